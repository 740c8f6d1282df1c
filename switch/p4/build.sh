#!/usr/bin/env bash
# Build p4relay for Tofino 1 (or Tofino 2) with bf-p4c.
#
#   switch/p4/build.sh [standard|standard-v6|lean|large|standard-t2|large-t2] [--model] [-- extra bf-p4c args]
#   switch/p4/build.sh --list         the profiles the p4 test stage compiles, one a line
#   switch/p4/build.sh --list-all     every profile (--list and large-t2, whose
#                                     compile takes tens of minutes)
#   switch/p4/build.sh --compiler     the compiler this script would run
#
# Compiler: $P4C if set, else bf-p4c on PATH (P4 Studio's SDE shell), else the
# open-source build of the same compiler under /opt/p4c-tofino/bin/p4c
# (`make setup` installs it when ../shared/tools/p4c-tofino provides it).
#
# standard  default profile, contract sizes (128K relay + guard entries, 64K
#           legs): every feature (relay, guard, learning, RTP quality,
#           congestion reroute, INT, iRED)
# standard-v6  the standard profile with IPv6 on Tofino 1 (P4RELAY_IPV6 and
#           P4RELAY_SCALE_V6): every feature, the IPv4 tables smaller by what
#           the IPv6 tables take in the same stages (sizes.p4); 12 stages
#           with the loss counts in one register (docs/design/ipv6.md
#           "Tofino 1")
# lean      relay, guard, learning and forwarding only (P4RELAY_PROFILE_LEAN;
#           216K relay + guard entries, 108K legs)
# large     P4RELAY_SCALE_LARGE: RTP quality only (184K relay + guard
#           entries, 92K legs); each quality register in two at 65,536 legs
#           (rtp_* and rtp_*_hi, sizes.p4)
# standard-t2  the standard profile for Tofino 2 (--target tofino2 --arch
#           t2na): every feature, at the contract's sizes; the loss counts
#           in two registers (rtp_lost, rtp_reordered) on Tofino 2
# large-t2  P4RELAY_SCALE_T2 on Tofino 2: every feature, 256K relay + guard
#           entries, 128K legs (65,536 calls per pipe); each quality register
#           in two (rtp_* and rtp_*_hi, sizes.p4)
# --model   CPU_PORT=320 (tofino-model, 4-pipe parts)
# Output: build/p4relay-<profile>/ (bf-rt.json, p4info.txtpb, p4relay.conf,
# pipe/ with context.json, tofino.bin and the resource logs); P4RELAY_P4_OUT
# replaces build/. Exit status: the compiler's (127: no compiler).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profile=${1:-standard}
[ $# -gt 0 ] && shift
defines=()
target=(--target tofino --arch tna)
case "$profile" in
  standard) ;;
  standard-v6) defines+=(-DP4RELAY_IPV6 -DP4RELAY_SCALE_V6) ;;
  lean) defines+=(-DP4RELAY_PROFILE_LEAN) ;;
  large) defines+=(-DP4RELAY_SCALE_LARGE) ;;
  # The alternative PHV allocator (after table placement): the Tofino 2
  # builds' PHV with INT over IPv6 does not fit the default one. Tofino 2's
  # mirror session ids are 8 bits: the same sessions, 768 lower (the
  # bootstrap's "target": "tofino2" uses these).
  standard-t2|large-t2)
    target=(--target tofino2 --arch t2na -Xp4c=--alt-phv-alloc)
    defines+=(-DJITTER_WRITEBACK_SESSION_BASE=232 -DIRED_SESSION_BASE=236
              -DREROUTE_NOTICE_SESSION_BASE=242 -DINT_REPORT_SESSION=252)
    [ "$profile" = large-t2 ] && defines+=(-DP4RELAY_SCALE_T2) ;;
  --list) echo standard; echo standard-v6; echo lean; echo large; echo standard-t2; exit 0 ;;
  --list-all) "$0" --list; echo large-t2; exit 0 ;;
  --compiler) ;;
  -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
  *) echo "unknown profile '$profile' (standard, standard-v6, lean, large, standard-t2, large-t2)" >&2; exit 2 ;;
esac
while [ $# -gt 0 ]; do
  case "$1" in
    --model) defines+=(-DCPU_PORT=320); shift ;;
    --) shift; break ;;
    *) echo "unknown option '$1'" >&2; exit 2 ;;
  esac
done
compiler=${P4C:-}
if [ -z "$compiler" ]; then
  if command -v bf-p4c >/dev/null; then
    compiler=bf-p4c
  elif [ -x /opt/p4c-tofino/bin/p4c ]; then
    compiler=/opt/p4c-tofino/bin/p4c
  fi
fi
if [ -z "$compiler" ]; then
  echo "no Tofino compiler: set P4C, source the SDE's set_sde.bash (bf-p4c), or run" >&2
  echo "../shared/tools/p4c-tofino/install.sh (installs /opt/p4c-tofino/bin/p4c)" >&2
  exit 127
fi
if [ "$profile" = --compiler ]; then echo "$compiler"; exit 0; fi
out="${P4RELAY_P4_OUT:-$root/build}/p4relay-$profile"
rm -rf "$out"
mkdir -p "$out"
set -x
"$compiler" "${target[@]}" --std p4-16 -g \
  -I "$here" "${defines[@]}" \
  -o "$out" \
  --bf-rt-schema "$out/bf-rt.json" \
  --p4runtime-files "$out/p4info.txtpb" \
  "$@" "$here/p4relay.p4"
