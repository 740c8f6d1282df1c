#!/usr/bin/env bash
# Stops the server the console's e2e suite started, if a run was interrupted
# (its process group, by the pid the harness recorded).
pidfile="$(dirname "$0")/../../build/webui-e2e-server.pid"
[ -f "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
  kill -TERM -- "-$pid" 2>/dev/null
  sleep 1
  kill -KILL -- "-$pid" 2>/dev/null
fi
rm -f "$pidfile"
