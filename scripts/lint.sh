#!/usr/bin/env bash
# make lint: ruff, mypy, rustfmt + clippy, eslint + tsc. Fails on the first finding set.
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
step() { echo "-- $*"; "$@" || rc=1; }
step uv run --frozen --no-sync ruff check .
step uv run --frozen --no-sync ruff format --check .
step uv run --frozen --no-sync mypy switch/client/src server/src rtpagent/src scenarios/src collector/src scripts
# Every shell script git tracks (warnings and errors; the info level flags
# functions run from traps as unreachable).
step bash -c 'git ls-files -z -- "*.sh" .ci/run | xargs -0 shellcheck -S warning'
if [ -f switch/Cargo.toml ]; then
  step bash -c 'cd switch && cargo fmt --all -- --check'
  step bash -c 'cd switch && cargo clippy --release --all-targets --quiet -- -D warnings'
fi
if [ -f webui/package.json ]; then
  step bash -c 'cd webui && npm run --silent lint && npm run --silent typecheck'
fi
exit $rc
