#!/usr/bin/env bash
# The operator console: generated API types current, Vitest component tests,
# production build (fails over the 300 kB gzipped initial-JS budget), then the
# Playwright end-to-end suite (playwright-core + Debian's Chromium) against the
# real server and PostgreSQL. eslint/tsc run in the lint stage.
set -uo pipefail
cd webui || exit 1
rc=0
vitest=node_modules/.bin/vitest

npm run --silent check:api || rc=1
"$vitest" run --reporter=default --reporter=junit --outputFile.junit="$RESULTS/$STAGE-vitest.xml" || rc=1
if npm run --silent build; then
  "$vitest" run --config vitest.e2e.config.ts --reporter=default --reporter=junit \
    --outputFile.junit="$RESULTS/$STAGE-e2e.xml" || rc=1
  echo "screenshots: $(ls test-artifacts/*.png 2>/dev/null | wc -l) in webui/test-artifacts/"
else
  echo "60-webui: build failed; e2e not run" >&2
  rc=1
fi
exit $rc
