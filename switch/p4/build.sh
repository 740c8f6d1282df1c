#!/usr/bin/env bash
# Build p4relay for Tofino 1 with bf-p4c (run inside an SDE shell).
#
#   switch/p4/build.sh [standard|lean|large] [--model] [-- extra bf-p4c args]
#
# standard  default profile, contract sizes (64K relay + guard entries, 32K legs)
# lean      no RTP quality registers / jitter write-back (P4RELAY_PROFILE_LEAN)
# large     standard with P4RELAY_SCALE_LARGE (192K relay + guard entries, 96K legs)
# --model   CPU_PORT=320 (tofino-model, 4-pipe parts)
# Output: build/p4relay-<profile>/ (bf-rt.json, p4info.txt, p4relay.conf,
# pipe/ with context.json, tofino.bin and the resource logs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profile=${1:-standard}
[ $# -gt 0 ] && shift
defines=()
case "$profile" in
  standard) ;;
  lean) defines+=(-DP4RELAY_PROFILE_LEAN) ;;
  large) defines+=(-DP4RELAY_SCALE_LARGE) ;;
  -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
  *) echo "unknown profile '$profile' (standard, lean, large)" >&2; exit 2 ;;
esac
while [ $# -gt 0 ]; do
  case "$1" in
    --model) defines+=(-DCPU_PORT=320); shift ;;
    --) shift; break ;;
    *) echo "unknown option '$1'" >&2; exit 2 ;;
  esac
done
if ! command -v bf-p4c >/dev/null; then
  echo "bf-p4c not found: source the SDE's set_sde.bash (open-p4studio 9.13) first" >&2
  exit 1
fi
out="$root/build/p4relay-$profile"
mkdir -p "$out"
set -x
bf-p4c --target tofino --arch tna --std p4-16 -g \
  -I "$here" "${defines[@]}" \
  -o "$out" \
  --bf-rt-schema "$out/bf-rt.json" \
  --p4runtime-files "$out/p4info.txt" \
  "$@" "$here/p4relay.p4"
