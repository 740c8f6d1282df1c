#!/usr/bin/env bash
# Tofino resources per profile, from the compiler's own logs: compiles every
# profile (the p4 test stage's compile, with large-t2: P4RELAY_P4_ALL), then prints the table of stages,
# SRAM, TCAM, map RAM and calls per pipe / per switch, and each profile's
# stage map.
set -uo pipefail
out=${P4RELAY_P4_OUT:-build}
P4RELAY_P4_ALL=1 bash scripts/test-stages/05-p4.sh
rc=$?
mapfile -t dirs < <(switch/p4/build.sh --list-all | sed "s|^|$out/p4relay-|")
report() {
  echo "Tofino resources per pipe, from the compiler's logs (compiler $(switch/p4/build.sh --compiler 2>/dev/null || echo none)):"
  echo
  python3 switch/p4/resources.py table "${dirs[@]}"
  for d in "${dirs[@]}"; do
    echo
    python3 switch/p4/resources.py stages "$d"
  done
}
echo
report
# The report in docs/benchmarks/ (make bench): the table and the stage maps only.
if [ -n "${BENCH_TABLE:-}" ]; then
  report > "$BENCH_TABLE"
fi
exit $rc
