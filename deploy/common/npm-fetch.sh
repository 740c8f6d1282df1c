#!/bin/sh
# npm-fetch NAME VERSION INTEGRITY DEST: download one package tarball from the
# npm registry, check it against its published sha512 integrity, unpack it
# into DEST. Used in image builds for Node and npm themselves.
set -eu
name=$1 version=$2 integrity=$3 dest=$4
tmp=$(mktemp)
curl -fsSL --retry 3 -o "$tmp" "https://registry.npmjs.org/${name}/-/${name}-${version}.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tmp" | openssl base64 -A)"
if [ "$got" != "$integrity" ]; then
    echo "npm-fetch: ${name}@${version}: integrity $got, expected $integrity" >&2
    exit 1
fi
mkdir -p "$dest"
tar -xzf "$tmp" -C "$dest" --strip-components=1 --no-same-owner
rm -f "$tmp"
