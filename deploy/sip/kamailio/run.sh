#!/bin/bash
# Kamailio with the p4relay config, addresses from the environment as -A
# defines, and the media-timeout listener beside it; the container ends when
# either ends (compose restarts it).
set -eu
: "${UAS_URI:?set UAS_URI, the SIP trunk calls go to (sip:host:port)}"
python3 /usr/local/lib/p4relay/timeout_listener.py --listen "$NOTIFY_SOCK" \
    --rpc /run/p4relay-kamailio/jsonrpc.sock &
listener=$!
kamailio -DD -E -f /etc/kamailio/p4relay.cfg \
    -A "SIP_UDP=udp:${SIP_LISTEN_IP}:${SIP_PORT}" -A "SIP_TCP=tcp:${SIP_LISTEN_IP}:${SIP_PORT}" \
    -A "RTPPROXY_SOCK=\"${RTPAGENT_SOCK}\"" -A "RTPPROXY_DIRECT_SET=\"1 == ${RTPPROXY_SOCK}\"" \
    -A "UAS_URI=\"${UAS_URI}\"" "$@" &
sip=$!
trap 'kill $sip $listener 2>/dev/null' TERM INT
# Whichever exits first takes the container down.
wait -n $sip $listener || true
kill $sip $listener 2>/dev/null || true
wait
exit 1
