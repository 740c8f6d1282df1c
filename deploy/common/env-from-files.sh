#!/bin/sh
# Image entrypoint: for every P4RELAY_* variable (or a former RTPAGENT_* one) named
# *_TOKEN_FILE, *_PASSWORD_FILE or *_SECRET_FILE, export the variable without
# _FILE holding the file's contents (the Docker secrets convention), then run
# the command (other *_FILE settings, such as P4RELAY_RTPAGENT_STATE_FILE, stay as they are). Tokens the init service writes
# into a shared volume reach the components this way, never through the
# compose file or a process list.
set -eu
for var in $(env | sed -n 's/^\(\(P4RELAY\|RTPAGENT\)_[A-Z0-9_]*\(TOKEN\|PASSWORD\|SECRET\)\)_FILE=.*/\1/p'); do
    file=$(printenv "${var}_FILE")
    if [ ! -r "$file" ] || [ ! -s "$file" ]; then
        echo "env-from-files: ${var}_FILE=$file is missing or empty" >&2
        exit 78
    fi
    value=$(cat "$file")
    export "$var=$value"
    unset "${var}_FILE"
done
exec "$@"
