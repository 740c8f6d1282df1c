#!/usr/bin/env bash
# Stop what controlplane test runs started and left behind: processes recorded
# as "<pid> <owner test pid>" (softswitches, daemons) and namespaces
# p4cp-<owner pid>-* (their veth pairs go with them), only where the owning
# test process is gone: every test run calls every hook, so a live run's
# children and namespaces are left alone.
pids="${RESULTS:-/tmp}/controlplane.pids"
gone() { [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null; }
if [ -f "$pids" ]; then
  keep=()
  while read -r pid owner; do
    [ -n "$pid" ] || continue
    if [ -n "$owner" ] && ! gone "$owner"; then
      keep+=("$pid $owner")
      continue
    fi
    if grep -qaE 'p4relay-softswitch|p4relay_controlplane' "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done < "$pids"
  if [ ${#keep[@]} -gt 0 ]; then printf '%s\n' "${keep[@]}" > "$pids"; else rm -f "$pids"; fi
fi
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^p4cp-' || true); do
  owner=$(echo "$ns" | sed -nE 's/^p4cp-([0-9]+)-.*/\1/p')
  [ -n "$owner" ] && ! gone "$owner" && continue
  ip netns delete "$ns" 2>/dev/null || true
done
exit 0
