#!/usr/bin/env bash
# Switch telemetry collector: queue arithmetic, congestion episodes, settings,
# agreement with the server's OpenAPI schema; against the real softswitch
# binary (veth ports in netns p4rcolc) and the real server (its CLI, a fresh
# database on the runner's PostgreSQL, $P4RELAY_TEST_DATABASE_URL).
set -euo pipefail
export COVERAGE_FILE="$RESULTS/$STAGE.coverage"  # coverage table printed at the end
: "${P4RELAY_TEST_DATABASE_URL:?needs the PostgreSQL started by the runner (make test STAGE=collector)}"
exec uv run --frozen --no-sync pytest collector/tests -q -p no:cacheprovider \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE" \
  --cov=p4relay_collector --cov-report=term:skip-covered --cov-fail-under=75  # today's figure
