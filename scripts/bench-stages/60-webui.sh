#!/usr/bin/env bash
# The console's live table with 5,000 active sessions against the real server:
# frame intervals, long tasks and main-thread time in Chromium, idle vs while
# the server streams a sample per call per second (scrolling throughout).
# Prints a table. P4RELAY_BENCH_CALLS / P4RELAY_BENCH_SECONDS change the load.
set -euo pipefail
cd webui
npm run --silent build >/dev/null
exec node_modules/.bin/vitest run --config vitest.bench.config.ts --reporter=default
