#!/usr/bin/env bash
# PTF conformance suite: real packets over veth against the software switch.
set -euo pipefail
exec switch/ptf/run.sh
