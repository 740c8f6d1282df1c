#!/usr/bin/env bash
# PTF suite (switch/ptf/run.sh): delete namespaces p4rptf-<pid> whose runner is
# gone, with the softswitch inside. A run still in progress is left alone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^p4rptf-[0-9]+$'); do
  owner=${ns#p4rptf-}
  kill -0 "$owner" 2>/dev/null && continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
done
exit 0
