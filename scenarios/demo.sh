#!/usr/bin/env bash
# make demo: the testbed, PostgreSQL, server + console, softswitch, RTPProxy +
# rtpagent, OpenSIPS and live SIPp calls with a summary. Ctrl-C tears it down.
# Default: three switches with iRED, INT and reroute and a congestion episode;
# --plain: one switch. Options: --duration S, --minutes N, --json, --profile NAME,
# --sip opensips|kamailio, --no-server (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "make demo builds network namespaces: run it as root" >&2; exit 1; }
if [ ! -x switch/target/release/p4relay-softswitch ]; then
  (cd switch && cargo build --release --quiet) >&2
fi
if [ -f webui/package.json ] && [ ! -f webui/dist/index.html ]; then
  # stderr: stdout is the live view, or --json's lines
  (cd webui && npm run --silent build) >&2 || echo "demo: console build failed; the API still runs" >&2
fi
uv run --frozen --no-sync python -m p4relay_scenarios cleanup >/dev/null 2>&1 || true
exec uv run --frozen --no-sync python -m p4relay_scenarios demo "$@"
