#!/usr/bin/env bash
# Stop every process a scenarios run recorded (build/**/pids/*.pid) and remove
# the p4r-* testbed namespaces and links. Safe to run any time, also after a crash.
cd "$(dirname "$0")/../.." || exit 1
uv run --frozen --no-sync python -m p4relay_scenarios cleanup
