#!/usr/bin/env bash
# Server suite: FastAPI + PostgreSQL (the runner's throwaway cluster,
# $P4RELAY_TEST_DATABASE_URL; each pytest session makes its own database),
# Alembic round trip, schemathesis against our OpenAPI, the collector against
# the real softswitch binary. Two pytest-xdist workers (each its own database
# and softswitch ports): much of a case is waiting on PostgreSQL.
set -euo pipefail
export COVERAGE_FILE="$RESULTS/$STAGE.coverage"  # coverage table printed at the end
: "${P4RELAY_TEST_DATABASE_URL:?needs the PostgreSQL started by the runner (make test STAGE=server)}"
exec uv run --frozen --no-sync pytest server/tests -q -p no:cacheprovider -n 2 \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE" \
  --cov=p4relay_server --cov-report=term:skip-covered --cov-fail-under=91  # today's figure
