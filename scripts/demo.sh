#!/usr/bin/env bash
# make demo: the main job on the embedded default. Filled in by scenarios/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x scenarios/demo.sh ]; then exec scenarios/demo.sh "$@"; fi
cat <<'TXT'
make demo will: build the namespace testbed, start PostgreSQL, the server with the
console, the software switch, RTPProxy (embedded, rtp.io) behind rtpagent, and
Kamailio; then run SIPp calls for a few minutes and print the console's URL and a
live summary. Ctrl-C tears everything down. The scenarios part that runs it has
not landed yet, so nothing was started.
TXT
