#!/usr/bin/env bash
# Server benchmark: ingest rate, ingest -> live latency, sessions list with
# 1,000,000 sessions (prints a table). Uses the runner's throwaway PostgreSQL.
set -euo pipefail
: "${P4RELAY_TEST_DATABASE_URL:?needs the PostgreSQL started by the runner (make bench STAGE=server)}"
exec uv run --frozen --no-sync python server/bench/server_bench.py
