#!/usr/bin/env bash
# Call churn through rtpagent (real RTPProxy commands) at 100 and 1,000 calls/s
# while media flows over 10,000 and 100,000 calls in the software switch: setup
# time to the first relayed packet p50/p99, the media's cost per packet and loss
# with and without churn. Table + plots in docs/benchmarks/. Needs root.
set -euo pipefail
cd switch && cargo build --release --all-targets --quiet && cd ..
exec uv run --frozen --no-sync python rtpagent/bench/churn.py "$@"
