#!/bin/bash
# p4relay-onswitch COMMAND: the on-switch image's entry point.
#   run        bootstrap, then the switch's control plane (when its
#              configuration is there), rtpagent and the collector (the
#              container ends when one ends; the restart policy brings it back)
#   bootstrap  ports and mirror sessions from $P4RELAY_BFRT_CONFIG through the
#              SDE's bfshell, when the image has one
#   check      validate both configurations and print what they write
#   health [controlplane|rtpagent|collector...]  their /metrics answer
#              (default: every component `run` starts)
#   controlplane ARGS... | rtpagent ARGS... | collector ARGS...   one alone
# The control plane reads $ONSWITCH_CONTROLPLANE_CONFIG
# (/etc/p4relay/controlplane.toml) and P4RELAY_CONTROLPLANE_*; rtpagent and the
# collector P4RELAY_RTPAGENT_* and P4RELAY_COLLECTOR_* (flags after the command word).
set -euo pipefail
bfrt=/opt/p4relay/bfrt
config=${P4RELAY_BFRT_CONFIG:-/etc/p4relay/bfrt.json}
cp_config=${ONSWITCH_CONTROLPLANE_CONFIG:-/etc/p4relay/controlplane.toml}

bootstrap() {
    case "${P4RELAY_BOOTSTRAP:-auto}" in
    skip) echo "p4relay-onswitch: bootstrap skipped (P4RELAY_BOOTSTRAP=skip)"; return 0 ;;
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
        fi
        echo "p4relay-onswitch: no bfshell in this image: ports and mirror sessions stay as the switch has them"
        return 0 ;;
    grpc)
        echo "p4relay-onswitch: P4RELAY_BOOTSTRAP=grpc is gone: next hops and routes are the" \
             "control plane's ($cp_config, switch/controlplane/README.md)" >&2
        return 2 ;;
    *) echo "p4relay-onswitch: P4RELAY_BOOTSTRAP is auto, bfshell or skip" >&2; return 2 ;;
    esac
}

metrics_ok() {
    python3 -c "import sys,urllib.request; urllib.request.urlopen('http://%s/metrics' % sys.argv[1], timeout=4)" "$1"
}

listen_of() {  # the component's /metrics host:port
    case "$1" in
    controlplane) echo "${P4RELAY_CONTROLPLANE_METRICS_LISTEN:-127.0.0.1:9104}" ;;
    rtpagent) echo "${P4RELAY_RTPAGENT_METRICS_LISTEN:-${RTPAGENT_METRICS_LISTEN:-127.0.0.1:9102}}" ;;
    collector) echo "${P4RELAY_COLLECTOR_METRICS_LISTEN:-127.0.0.1:9103}" ;;
    *) echo "p4relay-onswitch: health of controlplane, rtpagent or collector, not '$1'" >&2; return 2 ;;
    esac
}

cmd=${1:-run}
[ $# -gt 0 ] && shift
case "$cmd" in
run)
    bootstrap
    pids=()
    if [ -f "$cp_config" ]; then
        p4relay-controlplane --config "$cp_config" &
        pids+=($!)
    else
        echo "p4relay-onswitch: no $cp_config: the switch's routes, INT, iRED and reroute are" \
             "left to another control plane"
    fi
    p4relay-collector &
    pids+=($!)
    rtpagent &
    pids+=($!)
    trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
    wait -n "${pids[@]}" || true
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait
    exit 1 ;;
bootstrap) bootstrap ;;
check)
    [ -f "$config" ] && python3 "$bfrt/bootstrap.py" --check "$config"
    exec p4relay-controlplane --check "$cp_config" ;;
health)
    if [ $# -eq 0 ]; then
        set -- rtpagent collector
        [ -f "$cp_config" ] && set -- controlplane "$@"
    fi
    for c in "$@"; do
        listen=$(listen_of "$c") || exit 2
        metrics_ok "$listen"
    done ;;
controlplane) exec p4relay-controlplane --config "$cp_config" "$@" ;;
rtpagent) exec rtpagent "$@" ;;
collector) exec p4relay-collector "$@" ;;
*) echo "usage: p4relay-onswitch run|bootstrap|check|health [COMPONENT...]|controlplane ARGS|rtpagent ARGS|collector ARGS" >&2; exit 2 ;;
esac
