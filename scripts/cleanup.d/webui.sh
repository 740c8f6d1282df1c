#!/usr/bin/env bash
# Stops servers the console's e2e suite started and an interrupted run left
# behind: each build/webui-e2e-pids/<pid>.pid holds "<server pid> <owner pid>";
# a server is stopped (its process group) only when its owner is gone, so a
# concurrent run in the same checkout keeps its server.
dir="$(dirname "$0")/../../build/webui-e2e-pids"
[ -d "$dir" ] || exit 0
for f in "$dir"/*.pid; do
  [ -f "$f" ] || continue
  read -r pid owner < "$f" || true
  if [[ "$owner" =~ ^[0-9]+$ ]] && kill -0 "$owner" 2>/dev/null; then
    continue
  fi
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 1
    kill -KILL -- "-$pid" 2>/dev/null
  fi
  rm -f "$f"
done
