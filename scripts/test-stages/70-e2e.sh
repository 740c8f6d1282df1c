#!/usr/bin/env bash
# e2e: the scenarios' own tests, then five SIPp calls (and NAT, congestion and
# switch-down cases) through Kamailio -> rtpagent -> RTPProxy with the media in
# the software switch, on the namespace testbed. Needs root. ~3-5 minutes.
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync pytest scenarios/tests -v -p no:cacheprovider --timeout 400 \
  --junitxml="$RESULTS/$STAGE.xml"
