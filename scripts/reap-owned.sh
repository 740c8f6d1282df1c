#!/usr/bin/env bash
# Stop what a suite's test runs started and left behind, only where the owning
# test process is gone (every test run calls every scripts/cleanup.d hook and
# $RESULTS is shared, so a live run's children and namespaces are left alone):
# processes recorded in PIDS as "<pid> <owner test pid>" whose command line
# matches CMDLINE (an extended regex; a reused pid is not killed), and network
# namespaces NSPREFIX-<owner pid>-* (their veth pairs go with them).
#
#   scripts/reap-owned.sh PIDS CMDLINE NSPREFIX
pids=${1:?pid file}; cmdline=${2:?command line pattern}; prefix=${3:?namespace prefix}
gone() { [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null; }
if [ -f "$pids" ]; then
  keep=()
  while read -r pid owner; do
    [ -n "$pid" ] || continue
    if [ -n "$owner" ] && ! gone "$owner"; then
      keep+=("$pid $owner")
      continue
    fi
    if grep -qaE "$cmdline" "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done < "$pids"
  if [ ${#keep[@]} -gt 0 ]; then printf '%s\n' "${keep[@]}" > "$pids"; else rm -f "$pids"; fi
fi
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-" || true); do
  owner=$(echo "$ns" | sed -nE "s/^$prefix-([0-9]+)-.*/\1/p")
  [ -n "$owner" ] && ! gone "$owner" && continue
  ip netns delete "$ns" 2>/dev/null || true
done
exit 0
