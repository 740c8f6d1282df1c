#!/usr/bin/env bash
# The container deployment end to end with Docker: dockerd + `docker compose`
# building and running the same images and stack as 80-compose does with
# podman (scripts/compose-check.sh ENGINE=docker).
set -uo pipefail
ENGINE=docker exec scripts/compose-check.sh
