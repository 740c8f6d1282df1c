#!/usr/bin/env bash
# Python switch client: contract test (softswitch bfrt.json vs contract.toml),
# proto stubs up to date, and the client against the real softswitch on loopback.
set -euo pipefail
export COVERAGE_FILE="$RESULTS/$STAGE.coverage"  # coverage table printed at the end
bin=switch/target/release/p4relay-softswitch
[ -x "$bin" ] || (cd switch && cargo build --release --quiet)
exec uv run --frozen --no-sync pytest -q -p no:cacheprovider switch/client/tests \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE" \
  --cov=p4relay_switch --cov-report=term:skip-covered --cov-fail-under=70  # today's figure
