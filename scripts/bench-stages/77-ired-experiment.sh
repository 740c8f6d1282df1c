#!/usr/bin/env bash
# iRED against tail drop, CoDel and PI2 (the iRED paper's Experiment 1, scaled):
# the softswitch's port towards the UAS host shaped to 50 Mbit/s carries iperf3
# TCP bulk flows, ping and the media of SIPp calls relayed by the switch; buffer
# references of Table I, tail drop (the queue's --port-queue-cells) vs CoDel vs
# PI2 (the switch queue's --port-aqm) vs iRED (averaging deq_qdepth, and
# enq_qdepth side by side) vs iRED sparing media. RTT, TCP goodput, drop rate,
# RTP loss, jitter and MOS per call. Prints the table; writes it with PNG plots
# to $RESULTS/ired (the committed run: scenarios/results/ired/).
# Needs root, iperf3, SIPp and OpenSIPS (make setup). Cells are cut to fit CI;
# the committed run is the whole matrix, 20 s cells (its passes: README there).
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync python -m p4relay_scenarios ired-experiment \
  --buffers "${P4RELAY_BENCH_BUFFERS:-64,128,256,512,1024}" \
  --seconds "${P4RELAY_BENCH_SECONDS:-15}" --calls "${P4RELAY_BENCH_CALLS:-20}" \
  --runs "${P4RELAY_BENCH_RUNS:-3}" \
  --out "$RESULTS/ired" --run-dir "$RESULTS/ired-run"
if [ -n "${BENCH_TABLE:-}" ]; then
  cp "$RESULTS/ired/README.md" "$BENCH_TABLE"
fi
