#!/usr/bin/env bash
# RTPProxy's resident memory after 100,000 control datagrams of a kind (fuzz
# corpus, V with distinct cookies, V over 16 cookies), straight to it and
# through rtpagent: whose memory a command flood takes. Prints a table.
set -euo pipefail
exec uv run --frozen --no-sync python rtpagent/bench/rtpproxy_memory.py "$@"
