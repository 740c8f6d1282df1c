#!/usr/bin/env bash
# rtpagent with the switch holding 1,000 to 100,000 calls: added latency of
# U/L/D under churn at 100 and 1,000 calls/s, offload time, calls/s per agent
# core, the agent's idle CPU with its calls up. Table + plots in docs/benchmarks/.
set -euo pipefail
cd switch && cargo build --release --quiet --bin p4relay-softswitch && cd ..
exec uv run --frozen --no-sync python rtpagent/bench/scale.py "$@"
