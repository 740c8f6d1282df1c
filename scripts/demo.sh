#!/usr/bin/env bash
# make demo: the main job on the embedded default (scenarios/demo.sh): the
# namespace testbed, PostgreSQL, the server with the console, three software
# switches with their control planes (iRED, INT, reroute), RTPProxy behind
# rtpagent, OpenSIPS (--sip kamailio for Kamailio), live SIPp calls, one
# congestion episode and a summary of what the switches did (--plain: one
# switch; --ipv6: the UAC calls over IPv6 beside the NAT'd UAC's IPv4 calls;
# `make demo ARGS="--ipv6"`). Ctrl-C ends the calls; the summary follows, then
# the teardown.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scenarios/demo.sh "$@"
