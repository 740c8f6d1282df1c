#!/usr/bin/env bash
# Congestion reroute with SIP calls on the three-switch fabric (scenarios/
# reroute_bed.py, STACK layout): the whole stack (server, OpenSIPS, rtpagent,
# RTPProxy, SIPp) with s1 relaying concurrent calls to the UAS behind s2 over
# a shaped link that iperf3 cross traffic at 2x and 4x its rate congests,
# without and with data-plane reroute; loss, max inter-arrival delta,
# packets/s, delay and MOS per call, and the reroute events the server linked
# to the calls. Prints the tables; writes them with the PNG plot to
# $RESULTS/reroute (the committed run: scenarios/results/reroute/).
# Needs root, iperf3, SIPp, OpenSIPS and PostgreSQL (a throwaway cluster).
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync python -m p4relay_scenarios reroute-experiment \
  --cross "${P4RELAY_BENCH_CROSS:-2,4}" --calls "${P4RELAY_BENCH_CALLS:-4}" \
  --cross-seconds "${P4RELAY_BENCH_SECONDS:-12}" --out "$RESULTS/reroute"
if [ -n "${BENCH_TABLE:-}" ]; then
  cp "$RESULTS/reroute/README.md" "$BENCH_TABLE"
fi
