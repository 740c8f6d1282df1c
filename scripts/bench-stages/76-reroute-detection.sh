#!/usr/bin/env bash
# Congestion reroute reaction time on the three-switch testbed: data-plane
# detection (m = 1, 2, 5, 10 packets over t_q) against a controller polling the
# bottleneck's queue every 1, 2, 5 s; false positives at t_q = 2x the idle
# queueing delay. Prints the tables; writes them with the PNG plot to
# $RESULTS/reroute-detection (the committed run: scenarios/results/reroute-detection/).
# Needs root and iperf3.
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync python -m p4relay_scenarios reroute-detection \
  --ms "${P4RELAY_BENCH_MS:-1,2,5,10}" --polls "${P4RELAY_BENCH_POLLS:-1,2,5}" \
  --out "$RESULTS/reroute-detection"
if [ -n "${BENCH_TABLE:-}" ]; then
  cp "$RESULTS/reroute-detection/README.md" "$BENCH_TABLE"
fi
