"""BfRt Write and Read of pre-encoded bytes (`SwitchClient.write_encoded` /
`read_encoded`), the hot path of every table write.

`SwitchClient.write`/`read` take protobuf messages and build the request
message around them (another copy of every update or entity); a hot path that
encodes straight to wire bytes (`wire.py`, `encode.py`) sends them as they
are. Errors are raised exactly as the client raises them (`errors.rpc_error`).

These calls go through grpc's blocking stub on a channel and threads of their
own, not grpc.aio: an aio call costs the event loop about three times the CPU
of handing a blocking call to a thread (~150 vs ~50 us per Write, the same
process CPU in all), and a control plane's event loop is its bottleneck.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import grpc.aio

from .errors import SwitchUnavailableError, rpc_error, status_code, write_error
from .proto import bfruntime_pb2 as pb
from .wire import ld, tag

_WR_UPDATES = tag(pb.WriteRequest, "updates")
_RR_ENTITIES = tag(pb.ReadRequest, "entities")
# A write and a read (counters, a Q's live counts) may be under way at once.
RPC_THREADS = 2


class RawRpc:
    """Write/Read RPCs taking serialised updates/entities; `bind` after each
    (re)connect, with the request fields every call shares."""

    def __init__(self) -> None:
        self.timeout_s = 5.0
        self._channel: grpc.Channel | None = None
        self._write: grpc.UnaryUnaryMultiCallable | None = None
        self._read: grpc.UnaryStreamMultiCallable | None = None
        self._pool: ThreadPoolExecutor | None = None
        # The requests' other fields, serialised once per channel (the wire
        # format lets a message's fields come in any order).
        self._write_head = b""
        self._read_head = b""

    def bind(
        self,
        address: str,
        options: Sequence[tuple[str, Any]],
        *,
        target: pb.TargetDevice,
        client_id: int,
        p4_name: str,
        timeout_s: float,
    ) -> None:
        self.unbind()
        self.timeout_s = timeout_s
        self._channel = channel = grpc.insecure_channel(address, options=list(options))
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
        if self._pool is None:
            self._pool = ThreadPoolExecutor(RPC_THREADS, thread_name_prefix="bfrt-rpc")
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
        """Calls under way fail (CANCELLED: the switch is unavailable)."""
        channel, self._channel = self._channel, None
        self._write = self._read = None
        if channel is not None:
            channel.close()

    def close(self) -> None:
        self.unbind()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    async def write(self, updates: list[bytes]) -> None:
        """One Write RPC of encoded `Update`s (continue on error)."""
        await self.write_updates(b"".join([ld(_WR_UPDATES, u) for u in updates]), len(updates))

    async def write_updates(self, updates: bytes, n: int) -> None:
        """One Write RPC (continue on error) of `n` updates already framed as
        the request's `updates` fields, concatenated (`encode.Encoded`)."""
        write, pool = self._write, self._pool
        if write is None or pool is None:
            raise SwitchUnavailableError("not connected", code=grpc.StatusCode.UNAVAILABLE)
        call = functools.partial(write, self._write_head + updates, timeout=self.timeout_s)
        try:
            await asyncio.get_running_loop().run_in_executor(pool, call)
        except grpc.RpcError as e:
            raise rpc_error(e, "Write", n) from e
        except ValueError as e:  # the channel was closed meanwhile (reconnect, close)
            raise SwitchUnavailableError(f"Write: {e}") from e

    async def read(self, entities: list[bytes]) -> list[pb.Entity]:
        """One Read RPC of encoded `Entity`s -> the entities read back."""
        read, pool = self._read, self._pool
        if read is None or pool is None:
            raise SwitchUnavailableError("not connected", code=grpc.StatusCode.UNAVAILABLE)
        req = self._read_head + b"".join([ld(_RR_ENTITIES, e) for e in entities])

        def run() -> list[pb.Entity]:
            return entities_of(read(req, timeout=self.timeout_s), len(entities))

        try:
            return await asyncio.get_running_loop().run_in_executor(pool, run)
        except ValueError as e:  # the channel was closed meanwhile (reconnect, close)
            raise SwitchUnavailableError(f"Read: {e}") from e


def _entities(responses: Iterable[pb.ReadResponse], out: list[pb.Entity]) -> None:
    for resp in responses:
        for st in resp.status:
            if st.canonical_code != 0:
                code = status_code(st.canonical_code)
                raise write_error(code, f"Read: {code.name}: {st.message}")
        out.extend(resp.entities)


def entities_of(responses: Iterable[pb.ReadResponse], n: int) -> list[pb.Entity]:
    """A blocking Read's response stream -> the entities, or the client's error."""
    out: list[pb.Entity] = []
    try:
        _entities(responses, out)
    except grpc.RpcError as e:
        raise rpc_error(e, "Read", n) from e
    return out


async def read_entities(responses: Any, n: int) -> list[pb.Entity]:
    """An asyncio Read's response stream -> the entities, or the client's error."""
    out: list[pb.Entity] = []
    try:
        async for resp in responses:
            _entities((resp,), out)
    except grpc.aio.AioRpcError as e:
        raise rpc_error(e, "Read", n) from e
    return out
