#!/usr/bin/env bash
# Congestion reroute on the three-switch testbed (scenarios/reroute_bed.py):
# media streams share a shaped link with iperf3 cross traffic at 2x and 4x its
# rate, without and with data-plane reroute; loss, max inter-arrival delta,
# packets/s, delay and MOS per configuration. Prints the table; writes it with
# the PNG plot to $RESULTS/reroute (the committed run: scenarios/results/reroute/).
# Needs root and iperf3.
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync python -m p4relay_scenarios reroute-experiment \
  --cross "${P4RELAY_BENCH_CROSS:-2,4}" --streams "${P4RELAY_BENCH_STREAMS:-4}" \
  --seconds "${P4RELAY_BENCH_SECONDS:-12}" --out "$RESULTS/reroute"
if [ -n "${BENCH_TABLE:-}" ]; then
  cp "$RESULTS/reroute/README.md" "$BENCH_TABLE"
fi
