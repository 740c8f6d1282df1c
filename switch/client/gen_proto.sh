#!/usr/bin/env bash
# Regenerates the Python BfRt stubs from switch/proto/bfruntime.proto into
# src/p4relay_switch/proto/ (committed; tests/test_proto_stubs.py fails when
# they are stale). google/rpc/status.proto comes from googleapis-common-protos
# at run time, so only bfruntime.proto is generated.
#   switch/client/gen_proto.sh [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
proto_dir="$here/../proto"
out=${1:-"$here/src/p4relay_switch/proto"}
mkdir -p "$out"
cd "$here/../.."
uv run --frozen --no-sync python -m grpc_tools.protoc \
  -I "$proto_dir" \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  "$proto_dir/bfruntime.proto"
# grpc_tools writes `import bfruntime_pb2`; make it package-relative.
sed -i 's/^import bfruntime_pb2 as bfruntime__pb2$/from . import bfruntime_pb2 as bfruntime__pb2/' \
  "$out/bfruntime_pb2_grpc.py"
cat > "$out/__init__.py" <<'PY'
"""Generated BfRt gRPC stubs (switch/client/gen_proto.sh); do not edit."""
PY
