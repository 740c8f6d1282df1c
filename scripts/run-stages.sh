#!/usr/bin/env bash
# Runs every stage script of a folder in name order, timing each, and ends with
# one summary line. Used by `make test` (scripts/test-stages) and `make bench`
# (scripts/bench-stages). A stage is a bash script; it writes JUnit XML into
# $RESULTS (pytest --junitxml, vitest junit) or a cargo log ($RESULTS/*.cargo.log)
# so its tests are counted. A test stage that ran no test fails.
#
#   scripts/run-stages.sh test|bench [STAGE-NAME-FILTER]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
kind=${1:?test|bench}; filter=${2:-}
# Runs given their own P4RELAY_TEST_PG_PORT (test runs side by side in one
# checkout) get their own results folder too, so one run's start does not wipe
# another's JUnit files.
suffix=""
[ -n "${P4RELAY_TEST_PG_PORT:-}" ] && [ "$P4RELAY_TEST_PG_PORT" != 55432 ] && suffix="-$P4RELAY_TEST_PG_PORT"
export RESULTS="$ROOT/build/${kind}-results$suffix"
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
export P4RELAY_ROOT="$ROOT"

# PostgreSQL for the server's suites and the e2e test (a throwaway cluster). Its
# directory is named by port, so runs given different P4RELAY_TEST_PG_PORTs
# do not stop each other's cluster.
PGPORT=${P4RELAY_TEST_PG_PORT:-55432}
PGDIR="$ROOT/build/pg-$PGPORT"

cleanup() {
  for f in "$ROOT"/scripts/cleanup.d/*.sh; do [ -f "$f" ] && bash "$f" >/dev/null 2>&1; done
  scripts/pg.sh stop "$PGDIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if url=$(scripts/pg.sh start "$PGDIR" "$PGPORT"); then
  export P4RELAY_TEST_DATABASE_URL="$url"
else
  echo "run-stages: could not start PostgreSQL; suites that need it will fail" >&2
fi

status=0; declare -a rows=() failed=()
for stage in scripts/${kind}-stages/*.sh; do
  name=$(basename "$stage" .sh)
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
  printf '\n==== %s: %s ====\n' "$kind" "$name"
  t0=$(date +%s)
  # A bench stage may write its table as Markdown to $BENCH_TABLE; the report in
  # docs/benchmarks/ then shows that table instead of everything the stage printed.
  STAGE="$name" BENCH_TABLE="$RESULTS/$name.table.md" bash "$stage" 2>&1 | tee "$RESULTS/$name.log"
  rc=${PIPESTATUS[0]}
  # Exit 3: the bench ran to its end and printed its table, but a target is not met;
  # that table is still the current one (the stage counts as failed all the same).
  if [ "$kind" = bench ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; }; then
    BENCH_RC="$rc" BENCH_TABLE="$RESULTS/$name.table.md" uv run --frozen --no-sync python scripts/bench_report.py "$name" "$RESULTS/$name.log"
  fi
  dt=$(( $(date +%s) - t0 ))
  verdict=$(uv run --frozen --no-sync python scripts/stage_summary.py stage "$kind" "$name" "$rc")
  rows+=("$(printf '%-28s %5ss  %s' "$name" "$dt" "$verdict")")
  case "$verdict" in FAIL*) status=1; failed+=("$name") ;; esac
done

# A long run's output is read from its end: repeat each failed stage's last lines there.
for name in "${failed[@]}"; do
  printf '\n==== end of the failed stage %s (full log: %s) ====\n' "$name" "$RESULTS/$name.log"
  tail -n 60 "$RESULTS/$name.log"
done

printf '\n==== %s stages ====\n' "$kind"
printf '%s\n' "${rows[@]}"
uv run --frozen --no-sync python scripts/stage_summary.py total "$kind" "$status" | tee "$RESULTS/summary.txt"
exit $status
