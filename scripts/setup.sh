#!/usr/bin/env bash
# make setup: idempotent; installs what the project needs and is fast when done.
# Every Debian package is listed with the reason we need it.
set -euo pipefail
cd "$(dirname "$0")/.."
STAMPS=build/stamps
mkdir -p "$STAMPS"

APT_PACKAGES=(
  postgresql          # the server's database (tests start a throwaway cluster)
  sip-tester          # SIPp: SIP/RTP load generator for scenarios and e2e tests
  rtpengine-daemon    # rtpengine (user space): a relay the call-count bench measures beside RTPProxy
  baresip-core        # baresip: real SIP phones for the e2e suite (holds, re-INVITEs, one tone each way)
  kamailio            # SIP server of the local testbed and CI (rtpproxy module)
  kamailio-extra-modules
  kamailio-postgres-modules # db_postgres: sipcapture (Homer 5's capture server) in the HEP export tests
  iperf3              # background/cross traffic in experiments
  tshark              # packet captures at switch ports (delay, loss measurement)
  tcpdump             # quick captures in testbeds
  netsniff-ng         # trafgen: line-rate RTP generator for the switch benchmark
  nftables            # NAT host masquerade in the testbed
  iproute2            # ip netns, veth, tc
  protobuf-compiler   # protoc for the BfRt gRPC definitions (Rust build)
  libprotobuf-dev     # google/protobuf/*.proto that bfruntime.proto imports (not pulled in without recommends)
  clang               # compiles the softswitch's XDP fast path (BPF target)
  libbpf-dev          # loads it (bpf_helpers.h to build, libbpf to link)
  chromium            # headless browser for the console's Playwright tests
  prometheus          # promtool: checks and unit-tests the alert rules in deploy/prometheus (lint)
  jq
  shellcheck          # lints every shell script (make lint)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# OpenSIPS: the SIP server of the demo and the end-to-end tests (Debian ships
# none). Built once from its release source when the tarball is at hand
# (../shared/vendor), into a prefix outside the checkout that later runs and
# clones reuse; otherwise install it from OpenSIPS's packages.
OPENSIPS_PREFIX=${OPENSIPS_PREFIX:-/opt/opensips-3.6.8}
if ! command -v opensips >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  if [ ! -x "$OPENSIPS_PREFIX/sbin/opensips" ] && [ -x ../shared/tools/build-opensips.sh ] \
     && [ -f ../shared/vendor/opensips-3.6.8.tar.gz ]; then
    echo "setup: building OpenSIPS 3.6.8 into $OPENSIPS_PREFIX (a few minutes, once)"
    nice -n 10 $SUDO ../shared/tools/build-opensips.sh "$OPENSIPS_PREFIX" >/dev/null
  fi
  if [ -x "$OPENSIPS_PREFIX/sbin/opensips" ]; then
    $SUDO ln -sf "$OPENSIPS_PREFIX/sbin/opensips" /usr/local/sbin/opensips
  else
    echo "setup: OpenSIPS is not installed: add OpenSIPS's apt repository (https://apt.opensips.org," \
         "release 3.6) and apt-get install opensips, then run make setup again" >&2
  fi
fi

# uv manages the Python environment and lock file.
if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv from PyPI"
  python3 -m pip install -q "uv>=0.5" || python3 -m pip install -q --break-system-packages "uv>=0.5"
fi
uv sync --frozen --all-packages --quiet
# P4 Studio's BfRt Python client and PTF base classes (bfrt_grpc, p4testutils) from
# ../shared/vendor: the PTF suite drives the switch through them.
switch/p4studio/install.sh

# Web console dependencies: npm ci only when the lock file changed.
if [ -f webui/package-lock.json ]; then
  lock_hash=$(sha256sum webui/package-lock.json | cut -c1-16)
  if [ ! -d webui/node_modules ] || [ "$(cat "$STAMPS/npm" 2>/dev/null)" != "$lock_hash" ]; then
    echo "setup: npm ci (webui)"
    (cd webui && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock_hash" > "$STAMPS/npm"
  fi
fi

# Software switch: one release profile serves tests and benchmarks.
if [ -f switch/Cargo.toml ]; then
  # The binary every stage runs; test targets are built where they run (the lint
  # stage's architecture test, the rust stage's instrumented build, the benches).
  (cd switch && cargo build --release --quiet)
  # Rust line coverage for the rust test stage: LLVM's tools from rustup and
  # cargo-llvm-cov from crates.io (once).
  rustup component add llvm-tools-preview >/dev/null 2>&1 \
    || echo "setup: rustup could not add llvm-tools-preview: the rust stage runs without coverage" >&2
  if ! cargo llvm-cov --version >/dev/null 2>&1; then
    echo "setup: installing cargo-llvm-cov"
    cargo install --locked --quiet cargo-llvm-cov@0.9.1 \
      || echo "setup: cargo-llvm-cov not installed: the rust stage runs without coverage" >&2
  fi
fi

# cargo-audit for the offline dependency audit in make lint (scripts/audit.py).
if ! command -v cargo-audit >/dev/null 2>&1; then
  echo "setup: installing cargo-audit from crates.io (a few minutes, once)"
  cargo install --locked --quiet cargo-audit --version 0.22.2
fi

# Tofino compiler (p4lang/p4c with its Tofino back end, the open-source bf-p4c) for
# the p4 stage: installed under /opt/p4c-tofino when ../shared provides the prebuilt
# tree (switch/p4/README.md "Build"). P4 Studio users keep their bf-p4c.
p4c_tofino=../shared/tools/p4c-tofino/install.sh
if [ ! -x /opt/p4c-tofino/bin/p4c ] && [ -x "$p4c_tofino" ]; then
  echo "setup: installing the Tofino compiler under /opt/p4c-tofino"
  P4C_SUDO=""; [ "$(id -u)" -eq 0 ] || P4C_SUDO=sudo
  $P4C_SUDO "$p4c_tofino" /opt/p4c-tofino >/dev/null
fi
echo "setup: ok"
