"""BfRt Write and Read of pre-encoded bytes, on the client's own channel
(`SwitchClient.write_encoded` / `read_encoded`).

`SwitchClient.write`/`read` take protobuf messages and build the request
message around them (another copy of every update or entity); a hot path that
encodes straight to wire bytes (`wire.py`; rtpagent's per-table templates)
sends them as they are. Errors are raised exactly as the client raises them.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from typing import TYPE_CHECKING

import grpc
import grpc.aio

from .errors import SwitchError, SwitchUnavailableError, status_code, write_error
from .proto import bfruntime_pb2 as pb
from .wire import ld, tag

if TYPE_CHECKING:
    from .client import SwitchClient

_WR_UPDATES = tag(pb.WriteRequest, "updates")
_RR_ENTITIES = tag(pb.ReadRequest, "entities")


class RawRpc:
    def __init__(
        self,
        client: SwitchClient,
        rpc_error: Callable[[grpc.aio.AioRpcError, str, int], SwitchError],
    ) -> None:
        self.client = client
        self._rpc_error = rpc_error
        self._channel: grpc.aio.Channel | None = None
        self._write: grpc.aio.UnaryUnaryMultiCallable | None = None
        self._read: grpc.aio.UnaryStreamMultiCallable | None = None
        # The requests' other fields, serialised once per channel (the wire
        # format lets a message's fields come in any order).
        self._write_head = b""
        self._read_head = b""

    def _bind(self) -> None:
        c = self.client
        ch = c._channel
        if ch is None:
            raise SwitchUnavailableError("not connected", code=grpc.StatusCode.UNAVAILABLE)
        if ch is self._channel:
            return
        # A new channel after each reconnect, and the program may have changed.
        self._write = ch.unary_unary(
            "/bfrt_proto.BfRuntime/Write",
            request_serializer=None,  # bytes already
            response_deserializer=pb.WriteResponse.FromString,
        )
        self._read = ch.unary_stream(
            "/bfrt_proto.BfRuntime/Read",
            request_serializer=None,
            response_deserializer=pb.ReadResponse.FromString,
        )
        target = c._target(None)
        self._write_head = pb.WriteRequest(
            target=target,
            client_id=c.client_id,
            atomicity=pb.WriteRequest.CONTINUE_ON_ERROR,
            p4_name=c.p4_name,
        ).SerializeToString()
        self._read_head = pb.ReadRequest(
            target=target, client_id=c.client_id, p4_name=c.p4_name
        ).SerializeToString()
        self._channel = ch

    async def write(self, updates: list[bytes]) -> None:
        """One Write RPC of encoded `Update`s (continue on error)."""
        self._bind()
        assert self._write is not None
        req = self._write_head + b"".join([ld(_WR_UPDATES, u) for u in updates])
        try:
            await self._write(req, timeout=self.client.timeout_s)
        except grpc.aio.AioRpcError as e:
            raise self._rpc_error(e, "Write", len(updates)) from e

    async def read(self, entities: list[bytes]) -> list[pb.Entity]:
        """One Read RPC of encoded `Entity`s -> the entities read back."""
        self._bind()
        assert self._read is not None
        req = self._read_head + b"".join([ld(_RR_ENTITIES, e) for e in entities])
        return await read_entities(
            self._read(req, timeout=self.client.timeout_s), self._rpc_error, len(entities)
        )


async def read_entities(
    responses: AsyncIterable[pb.ReadResponse],
    rpc_error: Callable[[grpc.aio.AioRpcError, str, int], SwitchError],
    n: int,
) -> list[pb.Entity]:
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
