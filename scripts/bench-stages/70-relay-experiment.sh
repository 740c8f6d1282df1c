#!/usr/bin/env bash
# The relay paper's experiment: server-based relay (RTPProxy relays) against
# switch-based relay (rtpagent offloads to the software switch) at increasing
# concurrency; per-packet delay, delay variation, loss, MOS, relay CPU from
# captures at the switch's ports. Prints the table; writes it with PNG plots to
# $RESULTS/relay-experiment (the committed run is in scenarios/results/).
# The SIP server is OpenSIPS (--sip kamailio: Kamailio); the table's README names it.
# Needs root. Levels/hold are cut to fit CI. The committed run (README there) has
# levels 150,300,500,750,1000,1500,1800 with --hold 80, measured in parts that each
# hold the testbed a short while, the first without --merge, the others adding theirs:
#   python -m p4relay_scenarios experiment --modes server --levels 150,300,500,750 --hold 80
#   python -m p4relay_scenarios experiment --modes server --levels 1000,1500,1800 --hold 80 --merge
#   (and the same two for --modes switch, with --merge)
# The testbed runs at nice -10 (--nice) and the table says where the CPU went.
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync python -m p4relay_scenarios experiment \
  --levels "${P4RELAY_BENCH_LEVELS:-50,150,300,500}" --hold "${P4RELAY_BENCH_HOLD:-30}" \
  --out "$RESULTS/relay-experiment" --run-dir "$RESULTS/relay-experiment-run"
