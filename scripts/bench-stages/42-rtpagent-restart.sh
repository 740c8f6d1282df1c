#!/usr/bin/env bash
# rtpagent: restart with 10,000 journalled sessions: control socket answer
# time, one reconciliation pass, lost sessions' entries gone. Prints a table.
set -euo pipefail
exec uv run --frozen --no-sync python rtpagent/bench/restart.py "$@"
