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
# P4 Studio's bfrt_grpc registers its own bfruntime.proto (the whole API, the
# same package bfrt_proto) in protobuf's default pool, where a second, different
# bfruntime.proto is refused: ours goes in a pool of its own (with the two files
# it depends on), so both clients load in one process (PTF, conformance tests).
pb2="$out/bfruntime_pb2.py"
sed -i \
  -e 's/^from google.rpc import status_pb2 as google_dot_rpc_dot_status__pb2$/from google.protobuf import any_pb2 as _any_pb2\n&/' \
  -e 's/^DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(/_POOL = _descriptor_pool.DescriptorPool()\n_POOL.AddSerializedFile(_any_pb2.DESCRIPTOR.serialized_pb)\n_POOL.AddSerializedFile(google_dot_rpc_dot_status__pb2.DESCRIPTOR.serialized_pb)\nDESCRIPTOR = _POOL.AddSerializedFile(/' \
  "$pb2"
grep -q '^DESCRIPTOR = _POOL.AddSerializedFile(' "$pb2" && grep -q '^from google.protobuf import any_pb2' "$pb2" \
  || { echo "gen_proto: $pb2 is not laid out as expected (own descriptor pool)" >&2; exit 1; }
cat > "$out/__init__.py" <<'PY'
"""Generated BfRt gRPC stubs (switch/client/gen_proto.sh); do not edit."""
PY
