#!/usr/bin/env bash
# rtpagent: a long differential fuzz corpus into RTPProxy directly and through
# the agent; every answer class must match. Prints a table.
set -euo pipefail
exec uv run --frozen --no-sync python rtpagent/bench/differential_fuzz.py "$@"
