#!/bin/bash
# p4relay-onswitch COMMAND: the on-switch image's entry point.
#   run        bootstrap, then rtpagent and the collector (the container ends
#              when either ends; the restart policy brings it back)
#   bootstrap  program the switch from $P4RELAY_BFRT_CONFIG: through the SDE's
#              bfshell when the image has one and P4RELAY_BOOTSTRAP is not
#              "grpc", else over BfRt gRPC at $P4RELAY_SWITCH_GRPC
#   check      validate $P4RELAY_BFRT_CONFIG and print the calls it makes
#   health     rtpagent's and the collector's /metrics answer
#   rtpagent ARGS... | collector ARGS...   one component alone
# rtpagent and the collector take their settings from the environment
# (RTPAGENT_*, P4RELAY_COLLECTOR_*; flags after the command word).
set -euo pipefail
bfrt=/opt/p4relay/bfrt
config=${P4RELAY_BFRT_CONFIG:-/etc/p4relay/bfrt.json}
grpc=${P4RELAY_SWITCH_GRPC:-127.0.0.1:50052}

bootstrap() {
    case "${P4RELAY_BOOTSTRAP:-auto}" in
    skip) echo "p4relay-onswitch: bootstrap skipped (P4RELAY_BOOTSTRAP=skip)"; return 0 ;;
    grpc) ;;
    auto|bfshell)
        if command -v bfshell >/dev/null; then
            # bfrt_python runs inside bf_switchd: the script must be at a path
            # bf_switchd reads (the shared /etc/p4relay), the config at the
            # default /etc/p4relay/bfrt.json.
            shared=${P4RELAY_SHARED_DIR:-/etc/p4relay}
            cp "$bfrt/bootstrap.py" "$shared/p4relay_bootstrap.py"
            out=$(bfshell -b "$shared/p4relay_bootstrap.py" 2>&1)
            echo "$out"
            if echo "$out" | grep -q "FAIL\|config error"; then return 1; fi
            return 0
        elif [ "${P4RELAY_BOOTSTRAP:-auto}" = bfshell ]; then
            echo "p4relay-onswitch: no bfshell in this image (build it with SDE_IMAGE)" >&2
            return 1
        fi ;;
    *) echo "p4relay-onswitch: P4RELAY_BOOTSTRAP is auto, bfshell, grpc or skip" >&2; return 2 ;;
    esac
    python3 "$bfrt/grpc_bootstrap.py" --config "$config" --switch "$grpc" \
        --timeout "${P4RELAY_BOOTSTRAP_TIMEOUT_S:-60}"
}

metrics_ok() {
    python3 -c "import sys,urllib.request; urllib.request.urlopen('http://%s/metrics' % sys.argv[1], timeout=4)" "$1"
}

cmd=${1:-run}
[ $# -gt 0 ] && shift
case "$cmd" in
run)
    bootstrap
    p4relay-collector &
    collector=$!
    rtpagent &
    agent=$!
    trap 'kill -TERM $agent $collector 2>/dev/null' TERM INT
    wait -n $agent $collector || true
    kill -TERM $agent $collector 2>/dev/null || true
    wait
    exit 1 ;;
bootstrap) bootstrap ;;
check) exec python3 "$bfrt/bootstrap.py" --check "$config" ;;
health)
    metrics_ok "${RTPAGENT_METRICS_LISTEN:-127.0.0.1:9102}"
    metrics_ok "${P4RELAY_COLLECTOR_METRICS_LISTEN:-127.0.0.1:9103}" ;;
rtpagent) exec rtpagent "$@" ;;
collector) exec p4relay-collector "$@" ;;
*) echo "usage: p4relay-onswitch run|bootstrap|check|health|rtpagent ARGS|collector ARGS" >&2; exit 2 ;;
esac
