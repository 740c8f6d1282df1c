#!/usr/bin/env bash
# Softswitch vs RTPProxy vs kernel bridge: G.711 RTP over a veth testbed
# (namespaces p4rb-*). Prints one table with the ratios. Needs root.
set -euo pipefail
cd switch && cargo build --release --all-targets --quiet && cd ..
exec uv run --frozen --no-sync python switch/softswitch/bench/softswitch_bench.py "$@"
