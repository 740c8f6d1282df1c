#!/usr/bin/env bash
# Installs P4 Studio's BfRt Python client (package `bfrt_grpc`) and its PTF base
# classes (package `p4testutils`: BfRuntimeTest, bfrt_utils, misc_utils) into the
# project's uv environment, built the way P4 Studio's own build makes them:
# bfruntime_pb2{,_grpc}.py generated from bfruntime.proto with grpcio-tools
# (-I proto), beside the unmodified client.py and info_parse.py, the generated
# service module importing its sibling (`from . import bfruntime_pb2`).
# The tarball's files are copied unmodified (SOURCE.md inside lists them).
#
#   switch/p4studio/install.sh            # make setup calls it; idempotent
# Env: P4RELAY_P4STUDIO_TARBALL (default ../shared/vendor/p4studio-bfrt-python-<commit>.tar.gz
#      beside the checkout), P4RELAY_VENV (default .venv of the checkout).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
COMMIT=1f97778f9ad5
# The tarball is third-party code the tests import: install only the one we checked.
SHA256=d751fb43ea5f6f09aff25b89cb7e6d5eb24deb7f5313559cc678209c05e32d8f
TARBALL=${P4RELAY_P4STUDIO_TARBALL:-$ROOT/../shared/vendor/p4studio-bfrt-python-$COMMIT.tar.gz}
VENV=${P4RELAY_VENV:-$ROOT/.venv}
PY=$VENV/bin/python
DIST=p4studio-bfrt-python
VERSION=0+$COMMIT
OUT=$ROOT/build/p4studio
WHEEL=$OUT/p4studio_bfrt_python-$VERSION-py3-none-any.whl

# p4testutils' modules import each other as top-level modules (`from misc_utils
# import *`): P4 Studio's run_ptf_tests.py puts the package's directory on ptf's
# --pypath, and so does switch/ptf/run.sh. bfrt_utils and the base tests read
# ptf's test parameters when imported, so only misc_utils loads outside ptf.
installed() {
  "$PY" - "$DIST" "$VERSION" <<'EOF' 2>/dev/null
import importlib.metadata, importlib.util, os, sys
dist, version = sys.argv[1:]
if importlib.metadata.version(dist) != version:
    sys.exit(1)
import bfrt_grpc.client  # noqa: F401  (the generated stubs load against this protobuf)
sys.path.append(os.path.dirname(importlib.util.find_spec("p4testutils").origin))
import p4testutils.misc_utils  # noqa: F401
EOF
}

[ -x "$PY" ] || { echo "p4studio: no Python environment at $VENV (run uv sync first)" >&2; exit 1; }
# The wheel is rebuilt when this script changes (the tarball is pinned by SHA256).
stamp=$(sha256sum "$0" | cut -c1-16)
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ] && installed; then
  exit 0
fi

# A later `uv sync` removes packages its lock does not name: then the wheel
# built before is installed again.
if [ ! -f "$WHEEL" ] || [ "$(cat "$OUT/stamp" 2>/dev/null)" != "$stamp" ]; then
  if [ ! -f "$TARBALL" ]; then
    echo "p4studio: $TARBALL not found: P4 Studio's BfRt Python (bfrt_grpc, p4testutils)" \
         "is not installed; the PTF suite needs it (switch/ptf/README.md)" >&2
    exit 1
  fi
  echo "$SHA256  $TARBALL" | sha256sum --check --quiet --strict - \
    || { echo "p4studio: $TARBALL is not the checked tarball (sha256 $SHA256)" >&2; exit 1; }
  # Staged outside the checkout: hatchling would apply the checkout's .gitignore (build/).
  stage=$(mktemp -d /tmp/p4studio-bfrt.XXXXXX)
  trap 'rm -rf "$stage"' EXIT
  tar -xzf "$TARBALL" -C "$stage"
  src=$stage/p4studio-bfrt-python-$COMMIT
  pkg=$stage/pkg
  mkdir -p "$pkg/bfrt_grpc" "$pkg/p4testutils"
  cp "$src"/bfrt_grpc/client.py "$src"/bfrt_grpc/info_parse.py "$src"/bfrt_grpc/README.md "$pkg/bfrt_grpc/"
  cp "$src"/ptf-utils/*.py "$pkg/p4testutils/"
  cp "$src"/LICENSE "$pkg/"
  touch "$pkg/bfrt_grpc/__init__.py" "$pkg/p4testutils/__init__.py"
  "$PY" -m grpc_tools.protoc -I "$src/proto" --python_out="$pkg/bfrt_grpc" \
    --grpc_python_out="$pkg/bfrt_grpc" "$src/proto/bfruntime.proto"
  # grpcio-tools writes `import bfruntime_pb2`; inside the package it is a sibling.
  sed -i 's/^import bfruntime_pb2 as /from . import bfruntime_pb2 as /' "$pkg/bfrt_grpc/bfruntime_pb2_grpc.py"
  grep -q '^from \. import bfruntime_pb2 as ' "$pkg/bfrt_grpc/bfruntime_pb2_grpc.py" \
    || { echo "p4studio: generated bfruntime_pb2_grpc.py does not import bfruntime_pb2 as expected" >&2; exit 1; }
  cat >"$pkg/pyproject.toml" <<EOF
[project]
name = "$DIST"
version = "$VERSION"
description = "P4 Studio's BfRt gRPC Python client and PTF base classes (open-p4studio $COMMIT)"
license = "Apache-2.0"
requires-python = ">=3.8"
dependencies = ["grpcio", "protobuf", "googleapis-common-protos", "six", "ptf"]

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["bfrt_grpc", "p4testutils"]
EOF
  mkdir -p "$OUT"
  rm -f "$OUT"/*.whl
  uv build --quiet --wheel --out-dir "$OUT" "$pkg"
  [ -f "$WHEEL" ] || { echo "p4studio: the build did not produce $WHEEL" >&2; exit 1; }
  echo "$stamp" >"$OUT/stamp"
fi
# --no-deps: grpcio, protobuf, googleapis-common-protos, six and ptf come from uv.lock.
uv pip install --quiet --python "$PY" --no-deps --reinstall "$WHEEL"
installed || { echo "p4studio: bfrt_grpc / p4testutils do not import after installing $WHEEL" >&2; exit 1; }
echo "p4studio: installed bfrt_grpc and p4testutils ($COMMIT) into $VENV"
