#!/usr/bin/env bash
# INT-driven congestion reroute on the three-switch fabric (scenarios/
# reroute_int.py): the calls' primary path s1 -> s3 -> s2 with the bottleneck
# on s3's port towards s2 (not the rerouting switch's own port), backup s1 ->
# s2 direct; iperf3 cross traffic at 2x and 4x the bottleneck; local-only
# detection at s1 vs the INT-driven data-plane notice vs the control-plane
# INT loop. Loss, packets/s, longest gap, p99 delay and MOS per call, time
# to the move. Prints the tables; writes them with the PNG plot to
# $RESULTS/reroute-int (the committed run: scenarios/results/reroute-int/).
# Needs root and iperf3.
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
mkdir -p "$RESULTS/reroute-int"
cp scenarios/results/reroute-int/README.md "$RESULTS/reroute-int/README.md" 2>/dev/null || true
uv run --frozen --no-sync python -m p4relay_scenarios reroute-int \
  --modes "${P4RELAY_BENCH_MODES:-local,int-dp,int-cp}" --cross "${P4RELAY_BENCH_CROSS:-2,4}" \
  --runs "${P4RELAY_BENCH_RUNS:-3}" --calls "${P4RELAY_BENCH_CALLS:-50}" \
  --cross-seconds "${P4RELAY_BENCH_SECONDS:-15}" --out "$RESULTS/reroute-int"
if [ -n "${BENCH_TABLE:-}" ]; then
  cp "$RESULTS/reroute-int/README.md" "$BENCH_TABLE"
fi
