# PTF suite: stop its softswitch (only the one inside p4rptf) and delete the namespace.
if ip netns list 2>/dev/null | grep -qw p4rptf; then
  for pid in $(ip netns pids p4rptf 2>/dev/null); do kill "$pid" 2>/dev/null; done
  sleep 0.3
  for pid in $(ip netns pids p4rptf 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  ip netns del p4rptf
fi
exit 0
