#!/usr/bin/env bash
# P4 Studio's client against the software switch: the points where it must
# answer as bf_switchd does, and the project's client and P4 Studio's reading
# the same entries, counters and registers alike.
set -euo pipefail
bin=switch/target/release/p4relay-softswitch
[ -x "$bin" ] || (cd switch && cargo build --release --quiet)
switch/p4studio/install.sh   # bfrt_grpc, p4testutils (a `uv sync` removes them)
exec uv run --frozen --no-sync pytest -q -p no:cacheprovider switch/p4studio/tests \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE"
