#!/usr/bin/env bash
# compose-check: the container deployment end to end on this machine (root),
# with either engine: ENGINE=podman (default: podman + podman-compose) or
# ENGINE=docker (dockerd + `docker compose`).
#   1. installs what is missing: podman, runc, podman-compose (PyPI, pinned)
#      and podman's settings for this kind of host; or Debian's docker.io
#      (dockerd) and the compose and buildx CLI plugins (built from their Go
#      modules when Go is there); mmdebstrap, SIPp;
#   2. builds the Debian base image (deploy/base/build-base.sh) if absent;
#   3. builds every image, one at a time under nice, timing each;
#   4. brings docker-compose.yml up (profiles softswitch + the SIP server) with
#      deploy/compose/testbed.yml (podman) or testbed-docker.yml (docker)
#      placing the services in test namespaces;
#   5. sends SIPp calls through it from namespace p4rc-uac to p4rc-uas and
#      checks: calls completed, media relayed by the switch (relay hits and the
#      UAS port's TX, RTPProxy relaying next to nothing), sessions in the API,
#      INT on the calls (the control planes' [int]: sw1 traces every offloaded
#      call, the UAS's switch s2 is the sink and reports to the collector;
#      path records and hop queue samples in the API);
#   6. drills: SIGKILL rtpagent mid-call (restarted by its policy, calls
#      complete, media keeps flowing), restart PostgreSQL (no session lost);
#   7. `down -v` and removes the namespaces: nothing left behind.
# Environment: CALLS (20), CALL_S (15), DRILL_CALLS (6), DRILL_CALL_S (40),
# SIP (opensips|kamailio), KEEP=1 leaves the stack up for a look,
# SKIP_BUILD=1 uses the images as they are (after a build of the same tree),
# REBUILD=0 skips the second, nothing-changed build (the warm figure),
# BUILD_ONLY=1 stops after the images are built (nothing on the testbed: a later
# SKIP_BUILD=1 run brings the stack up),
# STACK_LOCK (a file; /run/lock/p4relay-compose-check.lock) is held while the
# stack is up,
# ONSWITCH=1 runs the on-switch image (control plane + rtpagent + collector in
# one container) in place of the controlplane, rtpagent and collector services,
# OPENSIPS_TARBALL (default ../shared/vendor/opensips-3.6.8.tar.gz),
# BENCH_TABLE=FILE writes the figures (images, build times, calls, drills) there
# as Markdown (`make bench` puts it in docs/benchmarks/).
# Address plan (README "Deployment"): 198.18.8.0/24 relay, .9 UAC, .10 UAS,
# .11 management, .12 the collector's INT report link (s2's port 3); the UAS
# sits behind a second switch s2 (deploy/compose/testbed.yml adds it and its
# control plane), reached by sw1's port 3; namespaces and links named p4rc-*.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CALLS=${CALLS:-20}
CALL_S=${CALL_S:-15}
DRILL_CALLS=${DRILL_CALLS:-6}
DRILL_CALL_S=${DRILL_CALL_S:-40}
SIP=${SIP:-opensips}
ENGINE=${ENGINE:-podman}
case "$ENGINE" in podman|docker) ;; *) echo "compose-check: ENGINE must be podman or docker, not '$ENGINE'" >&2; exit 2 ;; esac
OPENSIPS_VERSION=3.6.8
OPENSIPS_TARBALL=${OPENSIPS_TARBALL:-$ROOT/../shared/vendor/opensips-$OPENSIPS_VERSION.tar.gz}
PODMAN_COMPOSE_VERSION=1.6.0
PC_VENV=/opt/p4relay-podman-compose
# Docker's CLI plugins when the machine has none (Debian ships neither): built
# from their Go modules (pinned releases).
DOCKER_COMPOSE_VERSION=v2.40.3
DOCKER_BUILDX_VERSION=v0.38.2
DOCKER_PLUGINS=/usr/local/lib/docker/cli-plugins
PROJECT=p4relay
# Runs of this check share the p4rc-* namespaces and addresses, whichever the
# engine: one stack at a time (builds run side by side).
STACK_LOCK=${STACK_LOCK:-/run/lock/p4relay-compose-check.lock}
# Docker image format: the OCI format has no HEALTHCHECK, and podman would drop it.
export BUILDAH_FORMAT=docker
NS_SW=p4rc-sw NS_RELAY=p4rc-relay NS_UAC=p4rc-uac NS_UAS=p4rc-uas
RELAY_IP=198.18.8.10 UAC_IP=198.18.9.10 UAS_IP=198.18.10.10 MGMT_SW=198.18.11.1 MGMT_RELAY=198.18.11.10
INT_COLLECTOR=198.18.12.1
WORK=$(mktemp -d /tmp/p4rc-compose.XXXXXX)
FAILS=0
START=$(date +%s)

log() { printf '[compose-check %4ds] %s\n' "$(( $(date +%s) - START ))" "$*"; }
CHECKS=()
ok() { log "ok: $*"; CHECKS+=("ok|$*"); }
bad() { log "FAIL: $*"; FAILS=$((FAILS + 1)); CHECKS+=("FAIL|$*"); }
die() { log "FATAL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (namespaces, podman, packages)"

# ---------------------------------------------------------------- 1. tools
apt_install() {
    log "installing $*"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
}
install_tools() {
    local need=()
    command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
    command -v sipp >/dev/null || need+=(sip-tester)
    command -v ethtool >/dev/null || need+=(ethtool)
    command -v curl >/dev/null || need+=(curl)
    python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
    if [ "$ENGINE" = podman ]; then
        command -v podman >/dev/null || need+=(podman)
        command -v runc >/dev/null || need+=(runc)
        command -v catatonit >/dev/null || need+=(catatonit)
        [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}" uidmap slirp4netns fuse-overlayfs
        install_podman_compose
    else
        command -v dockerd >/dev/null || need+=(docker.io)
        [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
        install_docker_plugins
    fi
}
install_podman_compose() {
    if [ ! -x "$PC_VENV/bin/podman-compose" ] \
        || [ "$("$PC_VENV/bin/podman-compose" --version 2>/dev/null | sed -n 's/^podman-compose version //p')" != "$PODMAN_COMPOSE_VERSION" ]; then
        log "installing podman-compose $PODMAN_COMPOSE_VERSION (PyPI) in $PC_VENV"
        python3 -m venv "$PC_VENV"
        PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$PC_VENV/bin/pip" install -q \
            "podman-compose==$PODMAN_COMPOSE_VERSION"
    fi
    # runc (crun refuses hybrid cgroup hosts), cgroupfs (no systemd needed),
    # ulimits within the usual hard limits of a VM.
    local conf=/etc/containers/containers.conf
    if ! grep -q '^runtime *= *"runc"' "$conf" 2>/dev/null; then
        log "writing $conf (runc, cgroupfs, ulimits)"
        mkdir -p /etc/containers
        [ -f "$conf" ] && cp "$conf" "$conf.p4relay-backup"
        cat > "$conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
    fi
}
# go_plugin MODULE VERSION PACKAGE NAME LDFLAGS: build a Docker CLI plugin from
# its Go module (downloaded through the module proxy) into $DOCKER_PLUGINS.
# `go install MODULE@VERSION` refuses modules whose go.mod has replace or
# exclude lines, as both have: build inside the downloaded module instead.
go_plugin() {
    local mod=$1 ver=$2 pkg=$3 name=$4 ldflags=$5 gotmp dir
    command -v go >/dev/null || die "Docker's $name plugin is missing and there is no Go to build it: install Docker's docker-$name plugin package"
    log "building the Docker CLI plugin $name $ver from its Go module"
    gotmp=$(mktemp -d /tmp/p4rc-go.XXXXXX)
    dir=$(cd "$gotmp" && GOPATH=$gotmp/gopath GOFLAGS=-mod=mod go mod download -json "$mod@$ver" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || die "could not download $mod@$ver"
    cp -r "$dir" "$gotmp/src" && chmod -R u+w "$gotmp/src"
    mkdir -p "$DOCKER_PLUGINS"
    (cd "$gotmp/src" && GOPATH=$gotmp/gopath nice -n 19 go build -trimpath -ldflags "-s -w $ldflags" \
        -o "$DOCKER_PLUGINS/docker-$name" "./$pkg") >"$WORK/go-$name.log" 2>&1 \
        || { tail -n 20 "$WORK/go-$name.log"; rm -rf "$gotmp"; die "docker-$name did not build"; }
    rm -rf "$gotmp"
}
install_docker_plugins() {
    if ! docker compose version >/dev/null 2>&1; then
        go_plugin github.com/docker/compose/v2 "$DOCKER_COMPOSE_VERSION" cmd compose \
            "-X github.com/docker/compose/v2/internal.Version=$DOCKER_COMPOSE_VERSION"
    fi
    if ! docker buildx version >/dev/null 2>&1; then
        go_plugin github.com/docker/buildx "$DOCKER_BUILDX_VERSION" cmd/buildx buildx \
            "-X github.com/docker/buildx/version.Version=$DOCKER_BUILDX_VERSION"
    fi
    docker compose version >/dev/null 2>&1 || die "docker compose does not run"
    docker buildx version >/dev/null 2>&1 || die "docker buildx does not run"
}
# A Docker daemon: the machine's, when one answers; otherwise one started here
# (and stopped at the end) that leaves the host's firewall and forwarding
# alone — every container of the check sits in a test namespace, and builds
# use the host's network. Niced while it builds (its builds are its children).
DOCKERD_PID=
start_dockerd() {
    docker info >/dev/null 2>&1 && return 0
    log "starting dockerd (no bridge, no iptables rules; log $WORK/dockerd.log)"
    nice -n 19 dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --pidfile /run/p4relay-dockerd.pid >"$WORK/dockerd.log" 2>&1 &
    DOCKERD_PID=$!
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && return 0; sleep 1; done
    tail -n 20 "$WORK/dockerd.log"; die "dockerd did not start"
}
stop_dockerd() {
    [ -n "$DOCKERD_PID" ] || return 0
    kill "$DOCKERD_PID" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
    DOCKERD_PID=
}
# The stack's containers at normal priority (those started after this inherit it).
unnice_dockerd() {
    [ -n "$DOCKERD_PID" ] || return 0
    renice -n 0 -p "$DOCKERD_PID" $(pgrep -x containerd) >/dev/null 2>&1 || true
}
AGENT=rtpagent COLLECTOR=collector PROFILES=(--profile softswitch --profile "$SIP")
# Where the control plane and the collector run (the on-switch container: the relay host).
CONTROL=controlplane NS_CONTROL=$NS_SW
if [ "${ONSWITCH:-0}" = 1 ]; then
    AGENT=onswitch COLLECTOR=onswitch CONTROL=onswitch NS_CONTROL=$NS_RELAY PROFILES+=(--profile onswitch)
fi
if [ "$ENGINE" = podman ]; then
    COMPOSE() { "$PC_VENV/bin/podman-compose" -p "$PROJECT" --env-file "$WORK/env" \
        -f docker-compose.yml -f deploy/compose/testbed.yml "${PROFILES[@]}" "$@"; }
    cname() { echo "${PROJECT}_$1_1"; }
    PROJECT_LABEL=io.podman.compose.project
    image_exists() { podman image exists "$1"; }
else
    COMPOSE() { docker compose -p "$PROJECT" --env-file "$WORK/env" \
        -f docker-compose.yml -f deploy/compose/testbed-docker.yml "${PROFILES[@]}" "$@"; }
    cname() { echo "${PROJECT}-$1-1"; }
    PROJECT_LABEL=com.docker.compose.project
    image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
fi

# ---------------------------------------------------------------- 2-3. images
declare -A BUILD_S WARM_S SIZE
PASS=first
build() {  # build TAG DOCKERFILE [extra build args...]
    local tag=$1 file=$2; shift 2
    local t0; t0=$(date +%s)
    log "building $tag ($file)"
    local how=(podman build --format docker)
    [ "$ENGINE" = docker ] && how=(docker build --network host --progress plain)
    if ! nice -n 19 "${how[@]}" -f "$file" -t "$tag" \
        --build-arg COMMIT="$COMMIT" --build-arg VERSION="$VERSION" "$@" . >"$WORK/build-${tag//\//_}.log" 2>&1; then
        tail -n 30 "$WORK/build-${tag//\//_}.log"
        die "image $tag did not build"
    fi
    if [ "$PASS" = first ]; then BUILD_S[$tag]=$(( $(date +%s) - t0 )); else WARM_S[$tag]=$(( $(date +%s) - t0 )); fi
    SIZE[$tag]=$("$ENGINE" image inspect --format '{{.Size}}' "$tag")
}
build_images() {
    BASE_BUILT=0
    if ! image_exists docker.io/library/debian:bookworm-slim; then
        log "no base image: building it from Debian packages (mmdebstrap)"
        local t0; t0=$(date +%s)
        CONTAINER_ENGINE=$ENGINE deploy/base/build-base.sh
        BASE_BUILT=$(( $(date +%s) - t0 ))
    fi
    if [ ! -f "deploy/sip/opensips/opensips-$OPENSIPS_VERSION.tar.gz" ]; then
        [ -f "$OPENSIPS_TARBALL" ] || die "OpenSIPS release source not found: $OPENSIPS_TARBALL"
        cp "$OPENSIPS_TARBALL" deploy/sip/opensips/
    fi
    build_all
}
build_all() {
    build p4relay/postgres:latest deploy/postgres/Dockerfile
    build p4relay/server:latest deploy/python/Dockerfile --target server
    build p4relay/collector:latest deploy/python/Dockerfile --target collector
    build p4relay/rtpproxy:latest deploy/python/Dockerfile --target rtpproxy
    build p4relay/rtpagent:latest deploy/python/Dockerfile --target rtpagent
    build p4relay/onswitch:latest deploy/python/Dockerfile --target onswitch
    build p4relay/softswitch:latest switch/softswitch/Dockerfile
    if [ "$SIP" = opensips ]; then
        build p4relay/sip-opensips:latest deploy/sip/opensips/Dockerfile
    else
        build p4relay/sip-kamailio:latest deploy/sip/kamailio/Dockerfile
    fi
}
print_builds() {
    printf '%-28s %8s %8s %10s\n' image "build s" "warm s" size
    for t in "${!BUILD_S[@]}"; do
        printf '%-28s %8s %8s %10s\n' "$t" "${BUILD_S[$t]}" "${WARM_S[$t]:--}" "$(numfmt --to=iec "${SIZE[$t]}")"
    done | sort
}

# ---------------------------------------------------------------- 4. testbed
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
link_host() {  # link_host NS PORT_NO HOST_ADDR: a host behind switch port PORT_NO
    local ns=$1 n=$2 addr=$3 sw_if=p4rc-sw-${1#p4rc-}
    local sw_mac host_mac gw=${addr%.*}.1
    sw_mac=$(printf '02:8c:00:00:%02x:01' "$n"); host_mac=$(printf '02:8c:00:00:%02x:10' "$n")
    ip link add "$sw_if" address "$sw_mac" netns "$NS_SW" type veth peer name eth0 address "$host_mac" netns "$ns"
    in_ns "$NS_SW" sysctl -qw "net.ipv6.conf.$sw_if.disable_ipv6=1"
    in_ns "$NS_SW" ip link set "$sw_if" up
    in_ns "$ns" ip addr add "$addr/24" dev eth0
    in_ns "$ns" ip link set eth0 up
    in_ns "$ns" ip route add default via "$gw"
    # The switch answers no ARP: the gateway is a static neighbour (the port's MAC).
    in_ns "$ns" ip neigh replace "$gw" lladdr "$sw_mac" dev eth0 nud permanent
    # veth hands over unfinished checksums otherwise; the switch rewrites packets.
    in_ns "$ns" ethtool -K eth0 tx off >/dev/null
}
testbed_up() {
    testbed_down
    local ns
    if [ "$ENGINE" = podman ]; then
        for ns in "$NS_SW" "$NS_RELAY"; do ip netns add "$ns"; done
    else
        # The holders' namespaces under the names the rest of the check uses.
        COMPOSE up -d netns-sw netns-relay >>"$WORK/up.log" 2>&1 \
            || { tail -n 40 "$WORK/up.log"; die "compose up netns-sw netns-relay failed"; }
        ip netns attach "$NS_SW" "$(docker inspect --format '{{.State.Pid}}' "$(cname netns-sw)")"
        ip netns attach "$NS_RELAY" "$(docker inspect --format '{{.State.Pid}}' "$(cname netns-relay)")"
    fi
    for ns in "$NS_UAC" "$NS_UAS"; do ip netns add "$ns"; done
    for ns in "$NS_SW" "$NS_RELAY" "$NS_UAC" "$NS_UAS"; do
        in_ns "$ns" ip link set lo up
        in_ns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    done
    link_host "$NS_RELAY" 1 "$RELAY_IP"
    link_host "$NS_UAC" 2 "$UAC_IP"
    # The UAS behind s2 (both switches in p4rc-sw): sw1 port 3 <-> s2 port 1,
    # s2 port 2 <-> the UAS (MACs as the control planes' configs have them).
    ip link add p4rc-sw-s2 address 02:8c:00:00:03:01 netns "$NS_SW" type veth \
        peer name p4rc-s2-sw address 02:8c:00:00:21:01 netns "$NS_SW"
    ip link add p4rc-s2-uas address 02:8c:00:00:22:01 netns "$NS_SW" type veth \
        peer name eth0 address 02:8c:00:00:03:10 netns "$NS_UAS"
    for i in p4rc-sw-s2 p4rc-s2-sw p4rc-s2-uas; do
        in_ns "$NS_SW" sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"
        in_ns "$NS_SW" ip link set "$i" up
        in_ns "$NS_SW" ethtool -K "$i" tx off >/dev/null
    done
    in_ns "$NS_UAS" ip addr add "$UAS_IP/24" dev eth0
    in_ns "$NS_UAS" ip link set eth0 up
    in_ns "$NS_UAS" ip route add default via "${UAS_IP%.*}.1"
    in_ns "$NS_UAS" ip neigh replace "${UAS_IP%.*}.1" lladdr 02:8c:00:00:22:01 dev eth0 nud permanent
    in_ns "$NS_UAS" ethtool -K eth0 tx off >/dev/null
    # Management link: rtpagent -> switch gRPC and server, both in p4rc-sw.
    ip link add p4rc-mgmt netns "$NS_SW" type veth peer name mgmt0 netns "$NS_RELAY"
    in_ns "$NS_SW" ip addr add "$MGMT_SW/24" dev p4rc-mgmt
    in_ns "$NS_SW" ip link set p4rc-mgmt up
    in_ns "$NS_RELAY" ip addr add "$MGMT_RELAY/24" dev mgmt0
    in_ns "$NS_RELAY" ip link set mgmt0 up
    # INT report link: s2's port 3 -> the collector's listener where the
    # collector runs (MACs as deploy/compose/testbed-controlplane-s2.toml has them).
    ip link add p4rc-s2-col address 02:8c:00:00:23:01 netns "$NS_SW" type veth \
        peer name p4rc-col address 02:8c:00:00:04:10 netns "$NS_CONTROL"
    in_ns "$NS_SW" sysctl -qw net.ipv6.conf.p4rc-s2-col.disable_ipv6=1
    in_ns "$NS_SW" ip link set p4rc-s2-col up
    in_ns "$NS_SW" ethtool -K p4rc-s2-col tx off >/dev/null
    in_ns "$NS_CONTROL" sysctl -qw net.ipv6.conf.p4rc-col.disable_ipv6=1
    in_ns "$NS_CONTROL" ip addr add "$INT_COLLECTOR/24" dev p4rc-col
    in_ns "$NS_CONTROL" ip link set p4rc-col up
    ok "testbed namespaces $NS_SW $NS_RELAY $NS_UAC $NS_UAS"
}
testbed_down() {
    for ns in "$NS_SW" "$NS_RELAY" "$NS_UAC" "$NS_UAS"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
}

write_env() {
    umask 077
    cat > "$WORK/env" <<EOF
P4RELAY_DB_PASSWORD=$(openssl rand -hex 16)
P4RELAY_SERVER_JWT_SECRET=$(openssl rand -hex 32)
P4RELAY_INIT_ADMIN_USER=admin
P4RELAY_INIT_ADMIN_PASSWORD=$(openssl rand -hex 12)
P4RELAY_COMMIT=$COMMIT
P4RELAY_SWITCH_NAME=sw1
P4RELAY_SWITCH_GRPC=$MGMT_SW:50052
P4RELAY_SERVER_URL=http://$MGMT_SW:8000
P4RELAY_SERVER_LISTEN=0.0.0.0
RELAY_IP=$RELAY_IP
RELAY_PORTS=35000-35999
RTPPROXY_TTL=60
SIP_IP=$RELAY_IP
UAS_URI=sip:$UAS_IP:5060
P4RELAY_RTPAGENT_SWITCH=$MGMT_SW:50052
SWITCH_PORTS=1=p4rc-sw-relay,2=p4rc-sw-uac,3=p4rc-sw-s2
SWITCH_GRPC_LISTEN=0.0.0.0:50052
CONTROLPLANE_CONFIG=./deploy/compose/testbed-controlplane.toml
S2_PORTS=1=p4rc-s2-sw,2=p4rc-s2-uas,3=p4rc-s2-col
CONTROLPLANE_S2_CONFIG=./deploy/compose/testbed-controlplane-s2.toml
INT_REPORT_LISTEN=$INT_COLLECTOR:32766
INT_SWITCH_NAMES=1=sw1,2=s2
SWITCH_WORKERS=1
EOF
    umask 022
    set -a; . "$WORK/env"; set +a
}

# ---------------------------------------------------------------- helpers
state() { "$ENGINE" inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$(cname "$1")" 2>/dev/null || echo "missing -"; }
restarts() { "$ENGINE" inspect --format '{{.RestartCount}}' "$(cname "$1")"; }
# podman without systemd runs no health timers: run the image's HEALTHCHECK
# here. dockerd runs them itself: read the state it keeps.
healthy() {
    if [ "$ENGINE" = podman ]; then podman healthcheck run "$(cname "$1")" >/dev/null 2>&1
    else [ "$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$(cname "$1")" 2>/dev/null)" = healthy ]
    fi
}
wait_healthy() {  # wait_healthy SERVICE TIMEOUT_S
    local svc=$1 limit=$2 i=0
    until healthy "$svc"; do
        i=$((i + 2)); [ "$i" -lt "$limit" ] || { "$ENGINE" logs --tail 30 "$(cname "$svc")"; return 1; }
        sleep 2
    done
}
wait_exited_ok() {  # wait_exited_ok SERVICE TIMEOUT_S
    local svc=$1 limit=$2 i=0 s
    while :; do
        s=$(state "$svc")
        case "$s" in "exited 0") return 0 ;; exited*) "$ENGINE" logs --tail 30 "$(cname "$svc")"; return 1 ;; esac
        i=$((i + 2)); [ "$i" -lt "$limit" ] || { "$ENGINE" logs --tail 30 "$(cname "$svc")"; return 1; }
        sleep 2
    done
}
metric() {  # metric NS HOST:PORT NAME_REGEX: sum of the matching samples
    in_ns "$1" curl -fsS "http://$2/metrics" 2>/dev/null \
        | awk -v re="^($3)([{ ,}])" '$0 ~ re {s += $NF} END {printf "%d\n", s}'
}
api() {  # api PATH: GET with the admin's bearer token, from the switch host
    in_ns "$NS_SW" curl -fsS -H "Authorization: Bearer $JWT" "http://$MGMT_SW:8000$1"
}
login() {
    JWT=$(in_ns "$NS_SW" curl -fsS -H 'Content-Type: application/json' \
        -d "{\"username\":\"admin\",\"password\":\"$P4RELAY_INIT_ADMIN_PASSWORD\"}" \
        "http://$MGMT_SW:8000/api/v1/auth/login" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
}
session_count() {  # sessions of our switch in the API (all pages)
    api "/api/v1/sessions?limit=500" | python3 -c '
import json, sys
page = json.load(sys.stdin)
items = page.get("items", page if isinstance(page, list) else [])
print(len(items), sum(1 for s in items if s.get("offloaded")))'
}
uas_start() {  # in the background, in its media directory; ended with its namespace
    (cd "$WORK/media" && exec ip netns exec "$NS_UAS" sipp -sf "$ROOT/scenarios/sipp/uas.xml" \
        -i "$UAS_IP" -mi "$UAS_IP" -p 5060 -nostdin -trace_err -error_file "$WORK/uas-errors.log" \
        >"$WORK/uas.log" 2>&1) &
    UAS_PID=$!
    sleep 1
    kill -0 "$UAS_PID" 2>/dev/null || { cat "$WORK/uas.log"; die "SIPp UAS did not start"; }
}
# uac CALLS CALL_S TAG: run CALLS calls of CALL_S seconds; prints "sent completed".
uac() {
    local n=$1 secs=$2 tag=$3
    (cd "$WORK/media" && in_ns "$NS_UAC" timeout $((secs + 120)) sipp "$RELAY_IP:5060" \
        -sf "$ROOT/scenarios/sipp/uac.xml" -s p4relay -i "$UAC_IP" -mi "$UAC_IP" -p 5060 \
        -r 5 -m "$n" -l "$n" -d $((secs * 1000)) -nostdin -timeout $((secs + 90)) -timeout_error \
        -trace_stat -stf "$WORK/uac-$tag.csv" -fd 1 -trace_err -error_file "$WORK/uac-$tag-errors.log" \
        >"$WORK/uac-$tag.log" 2>&1) || true
    python3 - "$WORK/uac-$tag.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1]), delimiter=";"))
head, last = rows[0], rows[-1]
col = lambda name: int(last[head.index(name)])
print(col("OutgoingCall(C)"), col("SuccessfulCall(C)"))
EOF
}

cleanup() {
    local rc=$?
    if [ "${KEEP:-0}" = 1 ]; then log "KEEP=1: stack and namespaces left up ($WORK)"; return; fi
    log "tearing down"
    if [ -f "$WORK/env" ] && ! COMPOSE down -v -t 10 >"$WORK/down.log" 2>&1; then
        tail -n 20 "$WORK/down.log"
    fi
    testbed_down
    local left
    left=$("$ENGINE" ps -a --filter "label=$PROJECT_LABEL=$PROJECT" -q | wc -l)
    left=$((left + $("$ENGINE" volume ls -q --filter "label=$PROJECT_LABEL=$PROJECT" | wc -l)))
    left=$((left + $(ip netns list | grep -c '^p4rc-' || true)))
    if [ "$left" -eq 0 ]; then ok "down -v: nothing left behind (containers, volumes, namespaces)"
    else bad "$left containers/volumes/namespaces left behind"; rc=1; fi
    [ -n "${BENCH_TABLE:-}" ] && [ -f "$BENCH_TABLE" ] && printf '| %s | %s |\n' "${CHECKS[-1]%%|*}" "${CHECKS[-1]#*|}" >> "$BENCH_TABLE"
    stop_dockerd
    rm -rf "$WORK"
    exit "$rc"
}

# BENCH_TABLE: what this run measured and checked, as Markdown.
write_table() {
    [ -n "${BENCH_TABLE:-}" ] || return 0
    local t
    mb() { awk -v b="$1" 'BEGIN {printf "%.0f MB", b / 1e6}'; }
    {
        echo "Engine: $ENGINE $ENGINE_VERSION, $COMPOSE_TOOL; SIP server: $SIP;" \
            "$( [ "${ONSWITCH:-0}" = 1 ] && echo "the on-switch image in place of rtpagent + collector" || echo "rtpagent and collector images")."
        if [ -z "$BUILD_TOTAL" ]; then echo "Images as built before (SKIP_BUILD=1)."
        elif [ "$BASE_BUILT" -gt 0 ]; then echo "Cold build: no base image at the start, so every layer was built."
        else echo "Build with the base image present and the engine's layer cache as the previous builds left it."; fi
        echo
        echo "| image | size (uncompressed) | build (s) | rebuild, nothing changed (s) |"
        echo "|---|---:|---:|---:|"
        [ "${BASE_BUILT:-0}" -gt 0 ] && printf '| %s | %s | %s | - |\n' "base debian:bookworm-slim (mmdebstrap)" \
            "$(mb "$("$ENGINE" image inspect --format '{{.Size}}' docker.io/library/debian:bookworm-slim)")" "$BASE_BUILT"
        for t in $(printf '%s\n' "${!SIZE[@]}" | sort); do
            printf '| %s | %s | %s | %s |\n' "$t" "$(mb "${SIZE[$t]}")" "${BUILD_S[$t]:--}" "${WARM_S[$t]:--}"
        done
        [ -n "$BUILD_TOTAL" ] && printf '| all images | | %s | %s |\n' "$BUILD_TOTAL" "${WARM_TOTAL:--}"
        echo
        echo "Calls: $CALLS of ${CALL_S} s, then $DRILL_CALLS of ${DRILL_CALL_S} s (drill 1) and $DRILL_CALLS of 12 s (drill 2): $total in all."
        echo "Offloaded share: $offloads rtpagent offloads for $CALLS calls; $noff of $nsess sessions in the API offloaded."
        echo "Stack healthy ${UP_S} s after \`up\`."
        echo
        echo "| check | result |"
        echo "|---|---|"
        for t in "${CHECKS[@]}"; do printf '| %s | %s |\n' "${t%%|*}" "${t#*|}"; done
    } > "$BENCH_TABLE"
}

# ================================================================= main
install_tools
trap 'stop_dockerd' EXIT
[ "$ENGINE" = docker ] && start_dockerd
if [ "$ENGINE" = podman ]; then ENGINE_VERSION=$(podman version --format '{{.Client.Version}}')
else ENGINE_VERSION="$(docker version --format '{{.Server.Version}} (client {{.Client.Version}})')"; fi
if [ "$ENGINE" = podman ]; then COMPOSE_TOOL="podman-compose $PODMAN_COMPOSE_VERSION"
else COMPOSE_TOOL="docker compose $(docker compose version --short)"; fi
log "engine: $ENGINE $ENGINE_VERSION, $COMPOSE_TOOL"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
BUILD_TOTAL=''
WARM_TOTAL=''
if [ "${SKIP_BUILD:-0}" = 1 ]; then
    log "SKIP_BUILD=1: using the images as they are"
    for t in postgres server collector rtpproxy rtpagent onswitch softswitch "sip-$SIP"; do
        image_exists "p4relay/$t:latest" || die "image p4relay/$t:latest missing"
        SIZE[p4relay/$t:latest]=$("$ENGINE" image inspect --format '{{.Size}}' "p4relay/$t:latest")
    done
else
    t_build=$(date +%s)
    build_images
    BUILD_TOTAL=$(( $(date +%s) - t_build ))
    log "all images built in ${BUILD_TOTAL}s"
    if [ "${REBUILD:-1}" = 1 ]; then
        # The same builds again, nothing changed: what the layer cache saves.
        PASS=warm
        t_build=$(date +%s)
        build_all
        WARM_TOTAL=$(( $(date +%s) - t_build ))
        log "all images rebuilt (nothing changed) in ${WARM_TOTAL}s"
    fi
    print_builds
fi
if [ "${BUILD_ONLY:-0}" = 1 ]; then
    log "BUILD_ONLY=1: images built; SKIP_BUILD=1 runs the stack with them"
    exit 0
fi
unnice_dockerd

exec 9>"$STACK_LOCK"
if ! flock -n 9; then log "waiting for $STACK_LOCK (another stack of this check is up)"; flock 9; fi
trap cleanup EXIT
write_env
testbed_up
# SIPp's rtp_stream loops media/tone.alaw (relative to its working directory):
# 10 s of A-law silence (0xd5), 50 packets/s per direction.
mkdir -p "$WORK/media/media"
python3 -c 'import sys; sys.stdout.buffer.write(bytes([0xd5]) * 80000)' > "$WORK/media/media/tone.alaw"

log "compose up (profiles softswitch, $SIP), in dependency order"
t_up=$(date +%s)
ONE_UP=0
up() {
    [ "$ONE_UP" = 1 ] && return 0
    COMPOSE up -d --no-deps "$@" >>"$WORK/up.log" 2>&1 || { tail -n 40 "$WORK/up.log"; die "compose up $* failed"; }
}
if [ "$ENGINE" = docker ] && [ "${ONSWITCH:-0}" != 1 ]; then
    ONE_UP=1
    # As an operator starts it: one `up`, docker compose ordering the start by
    # depends_on (healthy, completed successfully).
    COMPOSE up -d postgres softswitch softswitch-s2 controlplane controlplane-s2 rtpproxy init \
        server rtpagent collector "$SIP" \
        >>"$WORK/up.log" 2>&1 || { tail -n 40 "$WORK/up.log"; die "compose up failed"; }
fi
# podman 4.3 (Debian 12) cannot start a container whose `--requires` names a
# one-shot that has exited (init), nor wait for `healthy`: start each tier
# with --no-deps and wait for its healthchecks and one-shots here, the order
# depends_on gives under docker compose. (With docker the stack is up already
# and this only checks each tier; the on-switch service replaces services the
# SIP server depends on, so it starts tier by tier.)
up postgres softswitch softswitch-s2 rtpproxy
wait_healthy postgres 90 || die "postgres not healthy"
wait_healthy softswitch 60 || die "softswitch not healthy"
wait_healthy softswitch-s2 60 || die "softswitch-s2 not healthy"
wait_healthy rtpproxy 60 || die "rtpproxy not healthy"
up init
wait_exited_ok init 180 && ok "init: migrated, admin, ingest token, switch registered" || die "init failed"
up server "$CONTROL" controlplane-s2
wait_healthy server 120 || die "server not healthy"
wait_healthy "$CONTROL" 120 || die "$CONTROL not healthy"
wait_healthy controlplane-s2 120 || die "controlplane-s2 not healthy"
applied() {  # applied NS HOST:PORT: the control plane is connected and has been over its switch
    [ "$(metric "$1" "$2" p4relay_controlplane_switch_connected)" -eq 1 ] \
        && [ "$(metric "$1" "$2" 'p4relay_controlplane_reconciles_total\{result="(clean|repaired)"')" -ge 1 ]
}
cp_ok=0
for _ in $(seq 60); do
    applied "$NS_CONTROL" 127.0.0.1:9104 && applied "$NS_SW" 127.0.0.1:9105 && { cp_ok=1; break; }
    sleep 1
done
[ "$cp_ok" = 1 ] && ok "$CONTROL, controlplane-s2: both control planes connected, next hops, routes and INT applied over BfRt gRPC" \
    || die "the control planes did not apply their configurations ($CONTROL, controlplane-s2)"
[ "$AGENT" = "$CONTROL" ] || up "$AGENT"
wait_healthy "$AGENT" 120 || die "$AGENT not healthy"
up "$COLLECTOR" "$SIP"
for s in "$COLLECTOR" "$SIP"; do
    wait_healthy "$s" 120 || die "$s not healthy"
done
UP_S=$(( $(date +%s) - t_up ))
ok "stack healthy in ${UP_S}s: $("$ENGINE" ps --filter "label=$PROJECT_LABEL=$PROJECT" --format '{{.Names}}' | sed "s/^${PROJECT}[_-]//; s/[_-]1\$//" | sort | xargs)"
login

# ---------------------------------------------------------------- 5. calls
uas_start
hits0=$(metric "$NS_SW" 127.0.0.1:9101 p4relay_relay_hits_total)
tx0=$(metric "$NS_SW" 127.0.0.1:9101 'p4relay_port_tx_packets_total\{[^}]*port="3"')
log "calls: $CALLS x ${CALL_S}s through $SIP -> rtpagent -> RTPProxy/switch"
read -r sent done_ < <(uac "$CALLS" "$CALL_S" calls)
hits=$(( $(metric "$NS_SW" 127.0.0.1:9101 p4relay_relay_hits_total) - hits0 ))
tx=$(( $(metric "$NS_SW" 127.0.0.1:9101 'p4relay_port_tx_packets_total\{[^}]*port="3"') - tx0 ))
offloads=$(metric "$NS_RELAY" 127.0.0.1:9102 rtpagent_offloads_total)
expected=$(( CALLS * CALL_S * 50 ))   # caller->callee RTP alone, 50 packets/s
log "calls sent $sent, completed $done_; rtpagent offloads $offloads; switch relay hits $hits, UAS port TX $tx (caller RTP alone ~$expected)"
[ "$sent" -eq "$CALLS" ] && [ "$done_" -eq "$CALLS" ] && ok "all $CALLS calls completed" || bad "calls completed $done_/$sent of $CALLS"
[ "$offloads" -ge "$CALLS" ] && ok "every call offloaded to the switch ($offloads)" || bad "offloads $offloads < $CALLS"
[ "$hits" -ge $(( expected * 8 / 10 )) ] && ok "media relayed by the switch: $hits relay hits" || bad "relay hits $hits < 80% of $expected"
[ "$tx" -ge $(( expected * 8 / 10 )) ] && ok "UAS port sent $tx packets" || bad "UAS port TX $tx < 80% of $expected"
sleep 3
read -r nsess noff < <(session_count)
[ "$nsess" -ge "$CALLS" ] && [ "$noff" -ge "$CALLS" ] && ok "server API: $nsess sessions, $noff offloaded" \
    || bad "server API: $nsess sessions ($noff offloaded), expected >= $CALLS"
# INT: every offloaded call traced by the switch, its reports through the
# collector in the server (path records of the calls' media, the hop's queue).
read -r npaths nflows < <(api "/api/v1/paths?addr=$UAS_IP&limit=1000" | python3 -c '
import json, sys
p = json.load(sys.stdin)
print(len(p), len({(r["src"]["addr"], r["src"]["port"], r["dst"]["addr"], r["dst"]["port"]) for r in p}))')
hop=$(api "/api/v1/queues?from=$(date -u -d "-10 min" +%Y-%m-%dT%H:%M:%SZ)" | python3 -c '
import json, sys
print(sum(len(q["points"]) for q in json.load(sys.stdin) if q["switch"] == "sw1" and q["dev_port"] == 3))')
reports=$(metric "$NS_CONTROL" 127.0.0.1:9103 p4relay_collector_int_reports_total)
[ "$nflows" -ge "$CALLS" ] && [ "$hop" -gt 0 ] \
    && ok "INT on the calls: $nflows traced flows ($npaths path records), $hop queue samples of the UAS hop, $reports reports" \
    || bad "INT: $nflows traced flows ($npaths path records) for $CALLS calls, $hop hop samples, $reports reports"

# ---------------------------------------------------------------- 6. drills
log "drill 1: SIGKILL $AGENT during $DRILL_CALLS calls of ${DRILL_CALL_S}s"
before=$(restarts "$AGENT")
uac "$DRILL_CALLS" "$DRILL_CALL_S" drill1 > "$WORK/drill1.out" &
uacpid=$!
sleep $(( DRILL_CALLS / 5 + 8 ))
tx_a=$(metric "$NS_SW" 127.0.0.1:9101 'p4relay_port_tx_packets_total\{[^}]*port="3"')
kill -9 "$("$ENGINE" inspect --format '{{.State.Pid}}' "$(cname "$AGENT")")"
log "$AGENT killed; waiting for its restart"
for _ in $(seq 60); do
    [ "$(restarts "$AGENT")" -gt "$before" ] \
        && [ "$(state "$AGENT")" = "running 0" ] && break
    sleep 1
done
sleep 5
tx_b=$(metric "$NS_SW" 127.0.0.1:9101 'p4relay_port_tx_packets_total\{[^}]*port="3"')
restarts=$(restarts "$AGENT")
[ "$restarts" -gt "$before" ] && ok "$AGENT restarted by its policy (restart count $restarts)" \
    || bad "$AGENT not restarted (state $(state "$AGENT"))"
wait_healthy "$AGENT" 90 && ok "$AGENT healthy again" || bad "$AGENT not healthy after restart"
[ $(( tx_b - tx_a )) -gt $(( DRILL_CALLS * 50 * 3 )) ] && ok "media kept flowing through the switch meanwhile (+$(( tx_b - tx_a )) packets)" \
    || bad "media stalled during the rtpagent restart (+$(( tx_b - tx_a )) packets)"
wait "$uacpid" || true
read -r sent done_ < "$WORK/drill1.out"
[ "$done_" -eq "$DRILL_CALLS" ] && ok "drill 1: $done_/$sent calls survived the rtpagent kill" \
    || bad "drill 1: $done_/$sent calls completed"

log "drill 2: restart PostgreSQL during $DRILL_CALLS calls"
sleep 3
read -r n_before _ < <(session_count)
uac "$DRILL_CALLS" 12 drill2 > "$WORK/drill2.out" &
uacpid=$!
sleep 4
"$ENGINE" restart -t 20 "$(cname postgres)" >/dev/null && ok "postgres restarted"
wait_healthy postgres 60 || bad "postgres not healthy after restart"
wait "$uacpid" || true
read -r sent done_ < "$WORK/drill2.out"
[ "$done_" -eq "$DRILL_CALLS" ] && ok "drill 2: $done_/$sent calls completed across the restart" \
    || bad "drill 2: $done_/$sent calls completed"
wait_healthy server 60 || bad "server not healthy after the database restart"
spool=1
for _ in $(seq 60); do
    spool=$(metric "$NS_RELAY" 127.0.0.1:9102 rtpagent_spool_depth); [ "$spool" -eq 0 ] && break; sleep 2
done
login
read -r n_after _ < <(session_count)
[ "$n_after" -ge $(( n_before + DRILL_CALLS )) ] && [ "$spool" -eq 0 ] \
    && ok "nothing lost: sessions $n_before -> $n_after (+$DRILL_CALLS expected), rtpagent spool empty" \
    || bad "sessions $n_before -> $n_after (+$DRILL_CALLS expected), spool $spool"

total=$(( CALLS + 2 * DRILL_CALLS ))
log "summary: calls $total sent; images: $(for t in "${!SIZE[@]}"; do printf '%s=%s ' "${t#p4relay/}" "$(numfmt --to=iec "${SIZE[$t]}")"; done)"
write_table
[ "$FAILS" -eq 0 ] && log "compose-check: ok" || log "compose-check: $FAILS check(s) failed"
[ "$FAILS" -eq 0 ]
