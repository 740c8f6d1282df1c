"""The client against a BfRt server that answers as bf_switchd does where it
differs from an idealised BfRt: a `DigestListAck` ends the stream (bf_switchd
answers it with BF_NOT_SUPPORTED), and a failed Write or Read is UNKNOWN
"Write Error Status" whose `bfrt_proto.Error` details list the updates in
order, successes included, up to the last failure. bf_switchd itself cannot
run here; this server reproduces those answers on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence

import grpc
import grpc.aio
import pytest
from google.protobuf import any_pb2
from google.rpc import status_pb2
from p4relay_switch import (
    Digest,
    Entry,
    EntryExistsError,
    NotFoundError,
    SwitchClient,
    TableFullError,
    WriteError,
)
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.proto import bfruntime_pb2_grpc as pb_grpc

TABLE_ID, KEY_ID, LEARN_ID = 10, 1, 20
BFRT = json.dumps(
    {
        "tables": [
            {
                "id": TABLE_ID,
                "name": "pipe.Ingress.nexthop",
                "table_type": "MatchAction_Direct",
                "size": 16,
                "key": [
                    {
                        "id": KEY_ID,
                        "name": "ig_md.nexthop_id",
                        "match_type": "Exact",
                        "type": {"type": "bytes", "width": 16},
                    }
                ],
                "action_specs": [{"id": 1, "name": "Ingress.drop", "data": []}],
                "data": [],
                "attributes": [],
            }
        ],
        "learn_filters": [
            {
                "id": LEARN_ID,
                "name": "pipe.IngressDeparser.learn",
                "fields": [{"id": 1, "name": "src_port", "type": {"type": "bytes", "width": 16}}],
            }
        ],
    }
).encode()


def _details(codes: Sequence[int]) -> bytes:
    """A google.rpc.Status with one Any(bfrt_proto.Error) per code."""
    st = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message="Write Error Status")
    for c in codes:
        a = any_pb2.Any()
        a.Pack(pb.Error(canonical_code=c, message=f"code {c}" if c else ""))
        st.details.append(a)
    return bytes(st.SerializeToString())


class BfSwitchdLike(pb_grpc.BfRuntimeServicer):
    """Answers: Subscribe, BIND, the schema; Write/Read fail with the next
    queued detail list; a DigestListAck ends the stream."""

    def __init__(self) -> None:
        self.failures: list[list[int]] = []  # per failing RPC: canonical codes in update order
        self.acks = 0
        self.streams = 0
        self.digests: asyncio.Queue[pb.StreamMessageResponse] = asyncio.Queue()

    async def _fail(self, context: grpc.aio.ServicerContext[object, object]) -> None:
        codes = self.failures.pop(0)
        await context.abort(
            grpc.StatusCode.UNKNOWN,
            "Write Error Status",
            trailing_metadata=(("grpc-status-details-bin", _details(codes)),),
        )

    async def Write(
        self, request: pb.WriteRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.WriteResponse:
        if self.failures:
            await self._fail(context)
        return pb.WriteResponse()

    async def Read(
        self, request: pb.ReadRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[pb.ReadResponse]:
        if self.failures:
            await self._fail(context)
        out = []
        for e in request.entities:
            if e.table_entry.key.fields:
                out.append(e)
                continue
            # A wildcard read: the entries, then the table's default entry.
            key = pb.TableKey(
                fields=[pb.KeyField(field_id=KEY_ID, exact=pb.KeyField.Exact(value=b"\x00\x07"))]
            )
            out.append(pb.Entity(table_entry=pb.TableEntry(table_id=TABLE_ID, key=key)))
            out.append(
                pb.Entity(table_entry=pb.TableEntry(table_id=TABLE_ID, is_default_entry=True))
            )
        yield pb.ReadResponse(entities=out)

    async def SetForwardingPipelineConfig(
        self,
        request: pb.SetForwardingPipelineConfigRequest,
        context: grpc.aio.ServicerContext[object, object],
    ) -> pb.SetForwardingPipelineConfigResponse:
        return pb.SetForwardingPipelineConfigResponse()

    async def GetForwardingPipelineConfig(
        self,
        request: pb.GetForwardingPipelineConfigRequest,
        context: grpc.aio.ServicerContext[object, object],
    ) -> pb.GetForwardingPipelineConfigResponse:
        return pb.GetForwardingPipelineConfigResponse(
            config=[pb.ForwardingPipelineConfig(p4_name="p4relay", bfruntime_info=BFRT)]
        )

    async def StreamChannel(
        self,
        request_iterator: AsyncIterator[pb.StreamMessageRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> AsyncIterator[pb.StreamMessageResponse]:
        self.streams += 1
        requests = aiter(request_iterator)
        first = await anext(requests)
        assert first.WhichOneof("update") == "subscribe"
        yield pb.StreamMessageResponse(subscribe=pb.Subscribe(status={"code": 0}))

        async def acks() -> None:
            async for req in requests:
                if req.WhichOneof("update") == "digest_ack":
                    self.acks += 1
                    await context.abort(grpc.StatusCode.UNKNOWN, "Not yet implemented")

        reader = asyncio.create_task(acks())
        try:
            while True:
                get = asyncio.create_task(self.digests.get())
                done, _ = await asyncio.wait({get, reader}, return_when=asyncio.FIRST_COMPLETED)
                if reader in done:
                    get.cancel()
                    reader.result()  # the abort, if an ack came
                    return
                yield get.result()
        finally:
            reader.cancel()


@pytest.fixture
async def server() -> AsyncIterator[tuple[BfSwitchdLike, str]]:
    srv = grpc.aio.server()
    svc = BfSwitchdLike()
    pb_grpc.add_BfRuntimeServicer_to_server(svc, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    yield svc, f"127.0.0.1:{port}"
    await srv.stop(0)


async def _client(addr: str) -> SwitchClient:
    c = SwitchClient(addr, client_id=5, timeout_s=5, connect_timeout_s=5)
    await c.connect()
    return c


def _digest(list_id: int, src_port: int) -> pb.StreamMessageResponse:
    return pb.StreamMessageResponse(
        digest=pb.DigestList(
            digest_id=LEARN_ID,
            list_id=list_id,
            data=[pb.TableData(fields=[pb.DataField(field_id=1, stream=src_port.to_bytes(2))])],
        )
    )


async def test_digests_are_not_acknowledged(server: tuple[BfSwitchdLike, str]) -> None:
    svc, addr = server
    sw = await _client(addr)
    try:
        for i in range(3):
            await svc.digests.put(_digest(i, 6000 + i))
            n = await sw.next_notification(5)
            assert isinstance(n, Digest) and n.entries == [{"src_port": 6000 + i}]
        # An ack would have ended the stream: the client would reconnect.
        assert await sw.next_notification(0.5) is None
        assert svc.acks == 0 and svc.streams == 1 and sw.connected
    finally:
        await sw.close()


async def test_write_error_decided_by_the_failed_updates_details(
    server: tuple[BfSwitchdLike, str],
) -> None:
    svc, addr = server
    sw = await _client(addr)
    ok, exists, full, absent = 0, 6, 8, 5  # google.rpc.Code numbers
    try:
        entries = [Entry({"ig_md.nexthop_id": i}, "Ingress.drop") for i in range(4)]
        # Details stop at the last failure: 3 for a batch of 4.
        svc.failures.append([ok, exists, ok])
        with pytest.raises(EntryExistsError) as e1:
            await sw.insert("pipe.Ingress.nexthop", entries)
        assert e1.value.code is grpc.StatusCode.ALREADY_EXISTS
        assert [(u.index, u.code) for u in e1.value.errors] == [(1, grpc.StatusCode.ALREADY_EXISTS)]
        svc.failures.append([ok, ok, ok, full])
        with pytest.raises(TableFullError) as e2:
            await sw.insert("pipe.Ingress.nexthop", entries)
        assert [u.index for u in e2.value.errors] == [3]
        # The pre-encoded path decides the same way.
        svc.failures.append([absent])
        upd = sw.update(pb.Update.DELETE, "pipe.Ingress.nexthop", entries[0])
        with pytest.raises(NotFoundError):
            await sw.write_encoded([upd.SerializeToString()])
        # Reads fail the same way.
        svc.failures.append([absent])
        with pytest.raises(NotFoundError):
            await sw.read("pipe.Ingress.nexthop", [{"ig_md.nexthop_id": 9}])
        # No per-update failure in the details: the call's own code (UNKNOWN).
        svc.failures.append([ok])
        with pytest.raises(WriteError) as e3:
            await sw.insert("pipe.Ingress.nexthop", entries[:1])
        assert type(e3.value) is WriteError and e3.value.code is grpc.StatusCode.UNKNOWN
        assert sw.connected
    finally:
        await sw.close()


async def test_wildcard_read_leaves_the_default_entry_out(
    server: tuple[BfSwitchdLike, str],
) -> None:
    _, addr = server
    sw = await _client(addr)
    try:
        rows = await sw.read("pipe.Ingress.nexthop")
        assert [r.key for r in rows] == [{"ig_md.nexthop_id": 7}]
        both = await sw.read("pipe.Ingress.nexthop", default=True)
        assert [r.is_default for r in both] == [False, True]
    finally:
        await sw.close()
