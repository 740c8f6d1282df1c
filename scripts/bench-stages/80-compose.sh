#!/usr/bin/env bash
# The container deployment end to end: image builds (time and size per image),
# the compose stack carrying SIPp calls, the failure drills (scripts/compose-check.sh).
set -uo pipefail
exec scripts/compose-check.sh
