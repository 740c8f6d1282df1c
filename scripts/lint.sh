#!/usr/bin/env bash
# make lint: every static check, grouped. Runs all groups, reports each failure,
# exits non-zero if any failed.
#
#   scripts/lint.sh [GROUP ...]   groups: python mypy mypy-tests imports shell rust web rules audit
#                                 (default: all; pre-commit runs single groups)
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
step() { echo "-- $*"; "$@" || rc=1; }
uvr() { uv run --frozen --no-sync "$@"; }

# The Python packages mypy checks strictly (sources, scripts).
MYPY_PATHS=(switch/client/src switch/controlplane/src server/src rtpagent/src scenarios/src collector/src testsupport/src runtime/src scripts)
# Test suites, benches and tools, just as strictly. They import their helpers as
# top-level modules (`from harness import ...`, `conftest`, `p4rbase`), so each
# entry is a MYPYPATH: its directories are checked together, each on the path,
# and their top-level module names must not collide (every suite has a
# `conftest`: one suite an entry). All runs share one cache (.mypy_cache): the
# standard library and the packages are analysed once, not once per entry (mypy
# checks each cached module against its file's content, so an entry's own
# `conftest` is never taken for another's).
MYPY_DIRS=(
  switch/client/tests switch/controlplane/tests switch/ptf switch/p4studio/tests rtpagent/tests:rtpagent/bench
  server/tests collector/tests:collector/bench scenarios/tests
  switch/softswitch/bench:switch/bfrt:switch/p4:server/bench:deploy/grafana:migrations
)

# Every tracked Python file is under MYPY_PATHS or MYPY_DIRS.
mypy_coverage() {
  local prefixes=("${MYPY_PATHS[@]}") d f p missing=()
  for d in "${MYPY_DIRS[@]}"; do IFS=: read -ra p <<<"$d" && prefixes+=("${p[@]}"); done
  while IFS= read -r f; do
    for p in "${prefixes[@]}"; do [[ $f == "$p"/* ]] && continue 2; done
    missing+=("$f")
  done < <(git ls-files '*.py')
  ((${#missing[@]} == 0)) && return 0
  printf 'lint: not type-checked (add its directory to MYPY_DIRS in scripts/lint.sh): %s\n' "${missing[@]}" >&2
  return 1
}

mypy_dirs() {
  local dirs
  IFS=: read -ra dirs <<<"$1"
  MYPYPATH=$1 uvr mypy "${dirs[@]}"
}

group() {
  case "$1" in
    python)
      step uvr ruff check .
      step uvr ruff format --check .
      # Each component's settings table in its README is the one its settings model gives.
      step uvr python scripts/settings_reference.py --check --only python ;;
    mypy)
      step uvr mypy "${MYPY_PATHS[@]}" ;;
    mypy-tests)
      step mypy_coverage
      local d
      for d in "${MYPY_DIRS[@]}"; do step mypy_dirs "$d"; done ;;
    imports)
      # Layering and no import cycles (.importlinter); one writer per switch table
      # (only the switch control plane writes routes, shaping, reroute, INT, iRED).
      step uvr lint-imports --no-cache
      step uvr python scripts/check_table_owners.py ;;
    shell)
      # Warnings and errors; the info level flags functions run from traps as unreachable.
      step bash -c 'git ls-files -z -- "*.sh" .ci/run | xargs -0 shellcheck -S warning' ;;
    rust)
      [ -f switch/Cargo.toml ] || return 0
      step bash -c 'cd switch && cargo fmt --all -- --check'
      step bash -c 'cd switch && cargo clippy --release --all-targets --quiet -- -D warnings'
      # no module cycle, a module per P4 control, generated files current
      step bash -c 'cd switch && cargo test --release --quiet --test architecture'
      # The software switch's settings table in its README is the one its flags give.
      step uvr python scripts/settings_reference.py --check --only softswitch ;;
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
    audit)
      # Locked Rust crates and Python packages against the offline advisory databases
      # (../shared/vendor); an advisory fails unless scripts/audit-exceptions.toml excepts it.
      step uvr python scripts/audit.py ;;
    *)
      echo "lint: unknown group '$1' (python mypy mypy-tests imports shell rust web rules audit)" >&2
      return 2 ;;
  esac
}

groups=("$@")
((${#groups[@]})) || groups=(python mypy mypy-tests imports shell rust web rules audit)
if ((${#groups[@]} == 1)); then
  group "${groups[0]}" || rc=1
  exit $rc
fi
# Several groups: two lanes side by side (two cores; mypy, tsc and the last
# crate's check each keep one busy), the Python checks in one and the rest in
# the other; each group's output is printed whole, in the order asked.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
lane() {
  local g
  for g in "$@"; do
    if (rc=0; group "$g" || rc=1; exit $rc) > "$out/$g.log" 2>&1; then
      echo 0 > "$out/$g.rc"
    else
      echo 1 > "$out/$g.rc"
    fi
  done
}
python_lane=() other_lane=()
for g in "${groups[@]}"; do
  case "$g" in
    python|mypy|mypy-tests|imports) python_lane+=("$g") ;;
    *) other_lane+=("$g") ;;
  esac
done
lane "${python_lane[@]}" &
lane "${other_lane[@]}"
wait
for g in "${groups[@]}"; do
  cat "$out/$g.log"
  [ "$(cat "$out/$g.rc")" = 0 ] || rc=1
done
exit $rc
