#!/usr/bin/env bash
# Stop what rtpagent test runs started and left behind: processes recorded as
# "<pid> <owner test pid>" and namespaces p4ra-<owner pid>-*, only where the
# owning test process is gone. Every test run calls every hook (and
# $RESULTS is shared), so a live run's children and namespaces are left alone.
pids="${RESULTS:-/tmp}/rtpagent.pids"
gone() { [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null; }
if [ -f "$pids" ]; then
  keep=()
  while read -r pid owner; do
    [ -n "$pid" ] || continue
    if [ -n "$owner" ] && ! gone "$owner"; then
      keep+=("$pid $owner")
      continue
    fi
    if grep -qaE 'p4relay-softswitch|rtpagent' "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done < "$pids"
  if [ ${#keep[@]} -gt 0 ]; then printf '%s\n' "${keep[@]}" > "$pids"; else rm -f "$pids"; fi
fi
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^p4ra-' || true); do
  owner=$(echo "$ns" | sed -nE 's/^p4ra-([0-9]+)-.*/\1/p')
  [ -n "$owner" ] && ! gone "$owner" && continue
  ip netns delete "$ns" 2>/dev/null || true
done
exit 0
