#!/usr/bin/env bash
# Removes what the softswitch benchmark leaves behind: its processes (by the
# pid files it writes) and its p4rb* network namespaces.
RUN=${P4RELAY_BENCH_RUN:-/tmp/p4rb-run}
# A benchmark still running owns its namespaces: leave them (other
# test runs call every cleanup hook). The benchmark itself forces cleanup.
if [ -z "${P4RB_FORCE_CLEANUP:-}" ] && [ -f "$RUN/bench.pid" ] && kill -0 "$(cat "$RUN/bench.pid")" 2>/dev/null; then
  exit 0
fi
if [ -d "$RUN" ]; then
  for f in "$RUN"/*.pid; do
    [ -f "$f" ] && [ "$(basename "$f")" != bench.pid ] || continue
    pid=$(cat "$f")
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done
  sleep 0.3
  for f in "$RUN"/*.pid; do
    [ -f "$f" ] && [ "$(basename "$f")" != bench.pid ] || continue
    pid=$(cat "$f")
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -f "$f"
  done
fi
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^p4rb'); do
  ip netns delete "$ns" 2>/dev/null
done
# The benchmark hosts' test (p4rh-<pid>-*, switch/softswitch/bench/test_hosts.py), its process gone.
"$(dirname "$0")/../reap-owned.sh" /nonexistent '^$' p4rh
