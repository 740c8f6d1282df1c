#!/usr/bin/env bash
# e2e: the scenarios' own tests (both SIP servers started for real), then SIPp
# calls through the SIP server -> rtpagent -> RTPProxy with the media in the
# software switch, on the namespace testbed: the SIP-facing cases (calls, NAT,
# media timeout, stock SIPp scenarios, re-INVITE/hold, switch down) once with
# OpenSIPS and once with Kamailio, attacker and congestion with OpenSIPS.
# Needs root, OpenSIPS and Kamailio (make setup).
set -euo pipefail
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet)
fi
uv run --frozen --no-sync pytest scenarios/tests -v -p no:cacheprovider --timeout 400 \
  --junitxml="$RESULTS/$STAGE.xml"
