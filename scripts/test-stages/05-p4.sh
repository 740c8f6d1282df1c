#!/usr/bin/env bash
# Tofino P4 program: every profile of switch/p4/build.sh compiled by the Tofino
# compiler (bf-p4c, or its open-source build under /opt/p4c-tofino that
# `make setup` installs; `build.sh --list`). One JUnit test case per profile: a
# compiler error (or a warning it treats as one, or a placement beyond the
# pipe's stages) fails it.
# Prints stages, SRAM, TCAM and calls per pipe per profile. Output:
# build/p4relay-<profile>/. Then the bf-rt.json parity test: the software
# switch's schema against the fresh standard compile and bf-drivers' fixed tables.
# CI=true: a missing compiler fails the stage; elsewhere it is reported and skipped.
# P4RELAY_P4_ALL=1: every profile (build.sh --list-all, large-t2 too: tens of
# minutes; the 05-p4-resources benchmark sets it).
set -uo pipefail
out=${P4RELAY_P4_OUT:-build}
mkdir -p "$out"
list=--list
[ "${P4RELAY_P4_ALL:-}" = 1 ] && list=--list-all
mapfile -t profiles < <(switch/p4/build.sh "$list")
if ! compiler=$(switch/p4/build.sh --compiler 2>/dev/null); then
  echo "p4: no Tofino compiler installed. Install: ../shared/tools/p4c-tofino/install.sh"
  echo "    (or make setup with ../shared present, or an SDE shell with bf-p4c)"
  {
    echo '<?xml version="1.0" encoding="utf-8"?>'
    echo "<testsuite name=\"$STAGE\" tests=\"${#profiles[@]}\" failures=\"0\" errors=\"0\" skipped=\"${#profiles[@]}\">"
    for p in "${profiles[@]}"; do
      echo "<testcase classname=\"p4.compile\" name=\"$p\"><skipped message=\"no Tofino compiler installed\"/></testcase>"
    done
    echo '</testsuite>'
  } > "$RESULTS/$STAGE.xml"
  [ "${CI:-}" = true ] && { echo "p4: CI=true needs the compiler" >&2; exit 1; }
  exit 0
fi
echo "p4: compiler $compiler"
# One profile: its log and "rc seconds" in its build directory.
compile() {
  local p=$1 dir="$out/p4relay-$1" t0 rc
  t0=$(date +%s)
  P4RELAY_P4_OUT="$out" nice -n 10 switch/p4/build.sh "$p" > "$out/p4relay-$p.log" 2>&1
  rc=$?
  mkdir -p "$dir"
  mv "$out/p4relay-$p.log" "$dir/compile.log"
  echo "$rc $(( $(date +%s) - t0 ))" > "$dir/compile.rc"
}
# The Tofino 2 compile is the longest and single-threaded: it runs beside the
# Tofino 1 ones (two cores), which run one after the other.
pids=()
for p in "${profiles[@]}"; do
  [[ $p == *-t2 ]] || continue
  compile "$p" &
  pids+=($!)
done
for p in "${profiles[@]}"; do
  [[ $p == *-t2 ]] || compile "$p"
done
wait "${pids[@]}"
dirs=()
status=0
for p in "${profiles[@]}"; do
  dir="$out/p4relay-$p"
  grep -E "error|warning" "$dir/compile.log" | grep -v "^+" | sed "s/^/p4 $p: /" | head -20
  [ "$(cut -d' ' -f1 "$dir/compile.rc")" -ne 0 ] && status=1
  dirs+=("$dir")
done
python3 switch/p4/resources.py junit "$RESULTS/$STAGE.xml" "$STAGE" "${dirs[@]}"
echo
python3 switch/p4/resources.py summary "${dirs[@]}"
# The committed schemas (switch/p4/bfrt/): the standard profile, which builds
# every feature, and its Tofino 2 build, the one with IPv6 (the software switch
# takes its ids from both).
for p in standard standard-t2; do
  fresh="$out/p4relay-$p/bf-rt.json"
  committed="switch/p4/bfrt/$p.bf-rt.json"
  if [ -f "$fresh" ] && ! python3 switch/p4/resources.py same-schema "$fresh" "$committed"; then
    if [ "${P4RELAY_UPDATE_BFRT:-}" = 1 ]; then
      cp "$fresh" "$committed"
      echo "p4: $committed regenerated"
    else
      echo "p4: $committed is stale (the contract test fails);"
      echo "    P4RELAY_UPDATE_BFRT=1 scripts/test-stages/05-p4.sh regenerates it"
    fi
  fi
done
echo
bin=switch/target/release/p4relay-softswitch
[ -x "$bin" ] || (cd switch && cargo build --release --quiet)
P4RELAY_P4_OUT="$out" uv run --frozen --no-sync pytest -q -p no:cacheprovider \
  switch/client/tests/test_bfrt_parity.py \
  --junitxml="$RESULTS/$STAGE.parity.xml" -o junit_suite_name="$STAGE.parity" || status=1
exit $status
