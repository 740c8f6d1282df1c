#!/usr/bin/env bash
# The PTF suite again with the XDP fast path off: every packet through the
# user-space pipeline, which must conform on its own (XDP-less hosts).
set -euo pipefail
P4RELAY_PTF_XDP=off exec switch/ptf/run.sh
