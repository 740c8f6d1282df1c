"""BfRt Write and Read of pre-encoded bytes, on the client's own channel
(`SwitchClient.write_encoded` / `read_encoded`).

`SwitchClient.write`/`read` take protobuf messages and build the request
message around them (another copy of every update or entity); a hot path that
encodes straight to wire bytes (`wire.py`, `encode.py`) sends them as they
are. Errors are raised exactly as the client raises them (`errors.rpc_error`).
"""

from __future__ import annotations

from collections.abc import AsyncIterable

import grpc
import grpc.aio

from .errors import SwitchUnavailableError, rpc_error, status_code, write_error
from .proto import bfruntime_pb2 as pb
from .wire import ld, tag

_WR_UPDATES = tag(pb.WriteRequest, "updates")
_RR_ENTITIES = tag(pb.ReadRequest, "entities")


class RawRpc:
    """Write/Read RPCs taking serialised updates/entities; `bind` after each
    (re)connect, with the request fields every call shares."""

    def __init__(self) -> None:
        self.timeout_s = 5.0
        self._write: grpc.aio.UnaryUnaryMultiCallable | None = None
        self._read: grpc.aio.UnaryStreamMultiCallable | None = None
        # The requests' other fields, serialised once per channel (the wire
        # format lets a message's fields come in any order).
        self._write_head = b""
        self._read_head = b""

    def bind(
        self,
        channel: grpc.aio.Channel,
        *,
        target: pb.TargetDevice,
        client_id: int,
        p4_name: str,
        timeout_s: float,
    ) -> None:
        self.timeout_s = timeout_s
        self._write = channel.unary_unary(
            "/bfrt_proto.BfRuntime/Write",
            request_serializer=None,  # bytes already
            response_deserializer=pb.WriteResponse.FromString,
        )
        self._read = channel.unary_stream(
            "/bfrt_proto.BfRuntime/Read",
            request_serializer=None,
            response_deserializer=pb.ReadResponse.FromString,
        )
        self._write_head = pb.WriteRequest(
            target=target,
            client_id=client_id,
            atomicity=pb.WriteRequest.CONTINUE_ON_ERROR,
            p4_name=p4_name,
        ).SerializeToString()
        self._read_head = pb.ReadRequest(
            target=target, client_id=client_id, p4_name=p4_name
        ).SerializeToString()

    def unbind(self) -> None:
        self._write = self._read = None

    async def write(self, updates: list[bytes]) -> None:
        """One Write RPC of encoded `Update`s (continue on error)."""
        await self.write_updates(b"".join([ld(_WR_UPDATES, u) for u in updates]), len(updates))

    async def write_updates(self, updates: bytes, n: int) -> None:
        """One Write RPC (continue on error) of `n` updates already framed as
        the request's `updates` fields, concatenated (`encode.Encoded`)."""
        if self._write is None:
            raise SwitchUnavailableError("not connected", code=grpc.StatusCode.UNAVAILABLE)
        try:
            await self._write(self._write_head + updates, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            raise rpc_error(e, "Write", n) from e

    async def read(self, entities: list[bytes]) -> list[pb.Entity]:
        """One Read RPC of encoded `Entity`s -> the entities read back."""
        if self._read is None:
            raise SwitchUnavailableError("not connected", code=grpc.StatusCode.UNAVAILABLE)
        req = self._read_head + b"".join([ld(_RR_ENTITIES, e) for e in entities])
        return await read_entities(self._read(req, timeout=self.timeout_s), len(entities))


async def read_entities(responses: AsyncIterable[pb.ReadResponse], n: int) -> list[pb.Entity]:
    """A Read RPC's response stream -> the entities, or the client's error."""
    out: list[pb.Entity] = []
    try:
        async for resp in responses:
            for st in resp.status:
                if st.canonical_code != 0:
                    code = status_code(st.canonical_code)
                    raise write_error(code, f"Read: {code.name}: {st.message}")
            out.extend(resp.entities)
    except grpc.aio.AioRpcError as e:
        raise rpc_error(e, "Read", n) from e
    return out
