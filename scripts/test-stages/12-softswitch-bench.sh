#!/usr/bin/env bash
# The softswitch benchmark's hosts on a small testbed of their own (p4rh-<pid>-*):
# the receiver counts every frame and no IP stack sees one, over IPv4 and IPv6.
set -euo pipefail
tool=switch/target/release/examples/benchtool
[ -x "$tool" ] || (cd switch && cargo build --release --quiet --example benchtool)
exec uv run --frozen --no-sync pytest -q -p no:cacheprovider switch/softswitch/bench/test_hosts.py \
  --junitxml="$RESULTS/$STAGE.xml" -o junit_suite_name="$STAGE"
