#!/usr/bin/env bash
# Stop what rtpagent test runs started and left behind (softswitches, agents;
# namespaces p4ra-<owner pid>-*) where the owning test process is gone.
exec "$(dirname "$0")/../reap-owned.sh" "${RESULTS:-/tmp}/rtpagent.pids" \
  'p4relay-softswitch|rtpagent' p4ra
