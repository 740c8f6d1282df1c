#!/usr/bin/env bash
# rtpagent: parsers (fuzzed), control path against the real RTPProxy (rtp.io),
# offload against the real software switch, restart safety, spool replay to the
# real server ($P4RELAY_TEST_DATABASE_URL).
set -euo pipefail
export COVERAGE_FILE="$RESULTS/$STAGE.coverage"  # coverage table printed at the end
export P4RELAY_RTPAGENT_PIDS="${RESULTS:-/tmp}/rtpagent.pids"
exec uv run --frozen --no-sync pytest rtpagent/tests -q -p no:cacheprovider \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE" \
  --cov=rtpagent --cov-report=term:skip-covered --cov-fail-under=93  # today's figure
