#!/usr/bin/env bash
# Build the local Debian base image every p4relay Dockerfile starts from
# (`FROM debian:bookworm-slim`) out of Debian's own packages, for machines
# that reach Debian's archive but no image registry:
#   deploy/base/build-base.sh [TAG]      (default docker.io/library/debian:bookworm-slim)
# Like the registry's bookworm-slim: minbase, no docs/man/locales, no perl
# beyond perl-base (minbase's usrmerge pulls it in; the image is merged-/usr
# already). One
# addition: the machine's own CA certificates from /usr/local/share/ca-certificates,
# so that build stages installing `ca-certificates` trust them too and builds
# behind a TLS-inspecting proxy reach PyPI, npm and crates.io as the host does.
set -euo pipefail
tag=${1:-docker.io/library/debian:bookworm-slim}
engine=${CONTAINER_ENGINE:-podman}
suite=${BASE_SUITE:-bookworm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hooks=()
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    hooks+=(--customize-hook='mkdir -p "$1"/usr/local/share/ca-certificates'
            --customize-hook="copy-in $(echo /usr/local/share/ca-certificates/*.crt) /usr/local/share/ca-certificates/")
fi
nice -n 19 mmdebstrap --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='chroot "$1" apt-get purge -y -q usrmerge perl libperl5.36 perl-modules-5.36 libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl >/dev/null' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "${hooks[@]}" \
    "$suite" "$tmp/base.tar"
"$engine" import --change 'CMD ["bash"]' --message "mmdebstrap --variant=minbase $suite" \
    "$tmp/base.tar" "$tag" >/dev/null
echo "base image $tag: $("$engine" image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec)"
