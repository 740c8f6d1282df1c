#!/usr/bin/env bash
# Softswitch at 16 to 100,000 concurrent calls (2 flows each) beside the kernel
# bridge and RTPProxy: cost per packet, loss, latency, the XDP maps, memory at
# 1,000,000 calls. Table + plots in docs/benchmarks/. Needs root.
set -euo pipefail
cd switch && cargo build --release --all-targets --quiet && cd ..
exec uv run --frozen --no-sync python switch/softswitch/bench/scale.py "$@"
