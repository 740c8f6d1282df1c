#!/usr/bin/env bash
# make demo: the main job on the embedded default (scenarios/demo.sh): the
# namespace testbed, PostgreSQL, the server with the console, the software
# switch, RTPProxy behind rtpagent, OpenSIPS (--sip kamailio for Kamailio) and
# live SIPp calls with a summary. Ctrl-C tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scenarios/demo.sh "$@"
