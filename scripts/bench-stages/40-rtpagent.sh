#!/usr/bin/env bash
# rtpagent: calls/s through the agent (embedded RTPProxy + software switch),
# control-path latency added vs RTPProxy directly, offload latency. Prints a table.
set -euo pipefail
exec uv run --frozen --no-sync python rtpagent/bench/bench.py "$@"
