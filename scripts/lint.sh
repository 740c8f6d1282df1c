#!/usr/bin/env bash
# make lint: every static check, grouped. Runs all groups, reports each failure,
# exits non-zero if any failed.
#
#   scripts/lint.sh [GROUP ...]   groups: python mypy imports shell rust web rules
#                                 (default: all; pre-commit runs single groups)
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
step() { echo "-- $*"; "$@" || rc=1; }
uvr() { uv run --frozen --no-sync "$@"; }

# The Python packages mypy checks strictly (sources, scripts).
MYPY_PATHS=(switch/client/src server/src rtpagent/src scenarios/src collector/src testsupport/src scripts)

group() {
  case "$1" in
    python)
      step uvr ruff check .
      step uvr ruff format --check . ;;
    mypy)
      step uvr mypy "${MYPY_PATHS[@]}" ;;
    imports)
      # Layering and no import cycles (.importlinter).
      step uvr lint-imports --no-cache ;;
    shell)
      # Warnings and errors; the info level flags functions run from traps as unreachable.
      step bash -c 'git ls-files -z -- "*.sh" .ci/run | xargs -0 shellcheck -S warning' ;;
    rust)
      [ -f switch/Cargo.toml ] || return 0
      step bash -c 'cd switch && cargo fmt --all -- --check'
      step bash -c 'cd switch && cargo clippy --release --all-targets --quiet -- -D warnings' ;;
    web)
      [ -f webui/package.json ] || return 0
      step bash -c 'cd webui && npm run --silent lint && npm run --silent typecheck' ;;
    rules)
      # Prometheus alert rules shipped for operators, and their unit tests.
      [ -d deploy/prometheus ] || return 0
      shopt -s nullglob
      local rules=(deploy/prometheus/*rules*.yml deploy/prometheus/alerts*.yml)
      local tests=(deploy/prometheus/tests/*.yml)
      ((${#rules[@]})) && step promtool check rules "${rules[@]}"
      ((${#tests[@]})) && step promtool test rules "${tests[@]}"
      # The scrape configuration, and every metric the rules and dashboards query exported by a component.
      step promtool check config --syntax-only deploy/prometheus/prometheus.yml
      step uvr python deploy/grafana/check_metrics.py deploy/grafana/*.json "${rules[@]}"
      return 0 ;;
    *)
      echo "lint: unknown group '$1' (python mypy imports shell rust web rules)" >&2
      return 2 ;;
  esac
}

groups=("$@")
((${#groups[@]})) || groups=(python mypy imports shell rust web rules)
for g in "${groups[@]}"; do group "$g" || rc=1; done
exit $rc
