#!/usr/bin/env bash
# Stop processes the rtpagent tests started and left behind (by recorded pid,
# only if the pid still runs one of ours), remove their namespaces (p4ra*).
pids="${RESULTS:-/tmp}/rtpagent.pids"
if [ -f "$pids" ]; then
  while read -r pid; do
    [ -n "$pid" ] || continue
    if grep -qaE 'p4relay-softswitch|rtpagent' "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
    fi
  done < "$pids"
  rm -f "$pids"
fi
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^p4ra' || true); do
  ip netns delete "$ns" 2>/dev/null || true
done
exit 0
