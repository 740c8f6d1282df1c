#!/usr/bin/env bash
# Switch control plane (p4relay-controlplane): configuration and its refusals,
# iRED, INT and routes applied to the real softswitch binary (veth ports in
# per-run namespaces p4cp-*), drift and a switch restart repaired and counted,
# SIGHUP reloads, and congestion reroute recorded at the real server
# ($P4RELAY_TEST_DATABASE_URL); the table-ownership lint check's own test.
set -euo pipefail
export COVERAGE_FILE="$RESULTS/$STAGE.coverage"  # coverage table printed at the end
export P4RELAY_TEST_PIDS="${RESULTS:-/tmp}/controlplane.pids"  # scripts/cleanup.d/controlplane.sh
: "${P4RELAY_TEST_DATABASE_URL:?needs the PostgreSQL started by the runner (make test STAGE=controlplane)}"
bin=switch/target/release/p4relay-softswitch
[ -x "$bin" ] || (cd switch && cargo build --release --quiet)
exec uv run --frozen --no-sync pytest switch/controlplane/tests -q -p no:cacheprovider \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE" \
  --cov=p4relay_controlplane --cov-report=term:skip-covered --cov-fail-under=81  # today's figure
