#!/usr/bin/env bash
# Stop what controlplane test runs started and left behind (softswitches,
# daemons; namespaces p4cp-<owner pid>-*) where the owning test process is gone.
exec "$(dirname "$0")/../reap-owned.sh" "${RESULTS:-/tmp}/controlplane.pids" \
  'p4relay-softswitch|p4relay_controlplane' p4cp
