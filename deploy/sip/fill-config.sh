#!/bin/sh
# fill-config IN OUT: replace every __NAME__ placeholder of a SIP server config
# outside comments with the environment variable NAME; one without a value is an error
# naming it (nothing starts half-configured).
set -eu
in=$1 out=$2
missing=""
script=""
for name in $(grep -v '^[[:space:]]*#' "$in" | grep -o '__[A-Z][A-Z0-9_]*__' | sort -u | sed 's/^__\(.*\)__$/\1/'); do
    eval "set +u; value=\${$name-}; set -u"
    if [ -z "$value" ]; then missing="$missing $name"; continue; fi
    esc=$(printf '%s' "$value" | sed 's/[|&\\]/\\&/g')
    script="$script s|__${name}__|${esc}|g;"
done
if [ -n "$missing" ]; then
    echo "fill-config: set$missing (placeholders of $in)" >&2
    exit 78
fi
mkdir -p "$(dirname "$out")"
sed "$script" "$in" > "$out"
