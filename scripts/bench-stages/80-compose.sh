#!/usr/bin/env bash
# The container deployment end to end: image builds (time and size per image),
# the compose stack carrying SIPp calls, the failure drills, with podman +
# podman-compose (scripts/compose-check.sh; 81-compose-docker: with Docker).
set -uo pipefail
ENGINE=podman exec scripts/compose-check.sh
