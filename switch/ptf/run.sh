#!/usr/bin/env bash
# Runs the PTF conformance suite against the software switch over veth.
#
# Builds network namespace p4rptf-<pid> with one veth pair per switch port
# (p4rptf-sN: the switch's side, p4rptf-pN: PTF's side), starts
# p4relay-softswitch inside it (gRPC on the namespace's 127.0.0.1:50052) and
# runs ptf there too, so no packet or connection leaves the namespace. Cleans up
# on every exit. The tests drive the switch through P4 Studio's bfrt_grpc
# client, with the test parameters and --pypath P4 Studio's run_ptf_tests.py
# gives them; on tofino-model/hardware run them with P4 Studio's
# run_p4_tests.sh instead (README.md).
#
#   switch/ptf/run.sh [ptf args, e.g. a test name filter: relay.RelayBothWays]
# Env: RESULTS (xunit XML goes to $RESULTS/$STAGE.*.xml), STAGE (default 20-ptf),
#      P4RELAY_SOFTSWITCH_BIN, PTF_PORTS (default 4).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NS=p4rptf-$$   # per run, so concurrent runs (and their cleanup hooks) do not collide
NPORTS=${PTF_PORTS:-4}
STAGE=${STAGE:-20-ptf}
RESULTS=${RESULTS:-$ROOT/build/test-results}
BIN=${P4RELAY_SOFTSWITCH_BIN:-$ROOT/switch/target/release/p4relay-softswitch}
WORK=$(mktemp -d /tmp/p4rptf.XXXXXX)
GRPC=127.0.0.1:50052
SW_PID=

cleanup() {
  set +e
  if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then
    kill "$SW_PID"; for _ in $(seq 50); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SW_PID" 2>/dev/null
  fi
  if ip netns list 2>/dev/null | grep -qw "$NS"; then
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$NS"
  fi
  [ -f "$WORK/softswitch.log" ] && cp "$WORK/softswitch.log" "$RESULTS/$STAGE.softswitch.log"
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ -x "$BIN" ] || (cd "$ROOT/switch" && cargo build --release --quiet)
mkdir -p "$RESULTS"
bash "$ROOT/scripts/cleanup.d/ptf.sh"   # leftovers of interrupted runs

ip netns add "$NS"
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ports=() ifargs=()
for i in $(seq 1 "$NPORTS"); do
  nsx ip link add "p4rptf-s$i" type veth peer name "p4rptf-p$i"
  for end in s p; do
    nsx ip link set "p4rptf-$end$i" mtu 9000 up
  done
  ports+=(--port "$i=p4rptf-s$i")
  ifargs+=(--interface "$i@p4rptf-p$i")
done

# P4RELAY_PTF_XDP: the softswitch's --xdp (generic: relay hits through the
# XDP fast path; off: all in user space). The suite must pass either way.
XDP=${P4RELAY_PTF_XDP:-generic}
# With the fast path on, tests that count its relayed packets read its metrics.
XDP_PARAM=
[ "$XDP" = off ] || XDP_PARAM=";xdp_metrics='http://127.0.0.1:9101/metrics'"
# P4RELAY_PTF_USER_IO: the softswitch's --user-io (auto: AF_XDP sockets here).
USER_IO=${P4RELAY_PTF_USER_IO:-auto}
# Legs as the large-t2 build splits them (2 x 2^16, quality registers in two
# halves: quality_split.py); the other cases use legs below 2^16.
nsx "$BIN" "${ports[@]}" --grpc-listen "$GRPC" --metrics-listen 127.0.0.1:9101 \
  --relay-entries 256 --legs 131072 --quality-half-bits 16 --leg6-entries 128 \
  --queue-depth 64 --workers 1 --xdp "$XDP" --user-io "$USER_IO" \
  >"$WORK/softswitch.log" 2>&1 &
SW_PID=$!
for _ in $(seq 100); do
  nsx bash -c "exec 3<>/dev/tcp/${GRPC%:*}/${GRPC#*:}" 2>/dev/null && break
  kill -0 "$SW_PID" 2>/dev/null || { echo "softswitch exited:"; cat "$WORK/softswitch.log"; exit 1; }
  sleep 0.1
done

"$ROOT/switch/p4studio/install.sh"   # bfrt_grpc, p4testutils (a `uv sync` removes them)
# P4 Studio's PTF base classes import their siblings as top-level modules:
# their directory goes on ptf's --pypath, as run_ptf_tests.py puts it there.
P4TESTUTILS=$("$ROOT/.venv/bin/python" -c \
  'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("p4testutils").origin))') \
  || { echo "P4 Studio's p4testutils is not installed: run switch/p4studio/install.sh (make setup)"; exit 1; }
rc=0
nsx "$ROOT/.venv/bin/ptf" --test-dir "$ROOT/switch/ptf" --pypath "$P4TESTUTILS" "${ifargs[@]}" \
  --test-params "arch='tofino';grpc_server='${GRPC%:*}';bfrt_grpc_port='${GRPC#*:}';relay_entries=256;queue_depth=64$XDP_PARAM" \
  --qlen 100000 --log-file "$WORK/ptf.log" --xunit --xunit-dir "$WORK/xunit" "$@" || rc=$?
# One XML per test module; the stage runner counts $RESULTS/$STAGE*.xml.
for x in "$WORK"/xunit/*.xml; do
  [ -f "$x" ] && cp "$x" "$RESULTS/$STAGE.$(basename "$x")"
done
cp "$WORK/ptf.log" "$RESULTS/$STAGE.ptf.log" 2>/dev/null || true
kill -0 "$SW_PID" 2>/dev/null || { echo "softswitch died during the suite"; rc=1; }
nsx curl -fsS http://127.0.0.1:9101/metrics >"$RESULTS/$STAGE.metrics.txt" 2>/dev/null || true
io=$(sed -n 's/^p4relay_dataplane_io{io="\(.*\)"} 1$/\1/p' "$RESULTS/$STAGE.metrics.txt")
echo "user-space path (--user-io $USER_IO): ${io:-unknown}"
if [ "$USER_IO" != af-packet ]; then
  # The suite ran on AF_XDP only if the data plane chose it.
  case "$io" in af_xdp*) ;; *) echo "the user-space pipeline did not run on AF_XDP"; rc=1 ;; esac
fi
if [ "$XDP" != off ]; then
  # The suite passed through the fast path only if the fast path carried packets.
  relayed=$(awk '/^p4relay_xdp_relayed_total /{print $2}' "$RESULTS/$STAGE.metrics.txt")
  echo "XDP fast path ($XDP): relayed ${relayed:-none} packets of the suite"
  [ "${relayed:-0}" -gt 0 ] || { echo "XDP fast path attached but relayed nothing"; rc=1; }
fi
exit $rc
