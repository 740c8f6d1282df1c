"""Asyncio BfRt gRPC client (grpc.aio) for the softswitch and bf_switchd alike.

Session order follows bf_switchd: open StreamChannel and Subscribe (this
registers the client id), BIND to the program, then fetch the bfrt.json
schema with GetForwardingPipelineConfig. Every name is resolved through that
schema. If the stream breaks (switch restarted), the client reconnects with
exponential backoff, re-binds, re-fetches the schema and emits a
``Reconnected`` notification so its owner can re-install state.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import grpc.aio
import structlog

from p4relay_switch import codec
from p4relay_switch.codec import DataValue, KeyValue, ReadValue
from p4relay_switch.errors import (
    NotBoundError,
    SchemaError,
    SwitchError,
    SwitchUnavailableError,
    rpc_error,
    status_code,
    write_error,
)
from p4relay_switch.names import register_field
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.proto import bfruntime_pb2_grpc as pb_grpc
from p4relay_switch.raw import RawRpc, read_entities
from p4relay_switch.schema import ActionInfo, Schema, TableInfo

log = structlog.get_logger("p4relay_switch")

ALL_PIPES = 0xFFFF
ALL_DIRECTIONS = 0xFF
ALL_PARSERS = 0xFF
DEFAULT_PORT = 50052
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
    # A failed Write names its failed updates by position in the trailer's
    # details (every update up to the last failure): a large batch's list is
    # megabytes, past grpc's 8 KiB default (the softswitch's stays under 21 MiB).
    ("grpc.max_metadata_size", 32 << 20),
    ("grpc.absolute_max_metadata_size", 32 << 20),
]

T = TypeVar("T")


# ------------------------------------------------------------------ values


@dataclass(frozen=True, slots=True)
class Entry:
    """A table entry to write. ``key`` by key-field name; ``data`` by parameter or
    common data-field name (``$ENTRY_TTL``, ``$COUNTER_SPEC_PKTS``...)."""

    key: Mapping[str, KeyValue]
    action: str | None = None
    data: Mapping[str, DataValue] = field(default_factory=dict)
    pipe: int | None = None  # entry_tgt pipe (asymmetric tables); None: the request's target


@dataclass(frozen=True, slots=True)
class ReadEntry:
    """An entry as read back; integers are ints, per-pipe register values lists."""

    table: str
    key: dict[str, KeyValue]
    action: str | None
    data: dict[str, ReadValue]
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class Digest:
    """One learn digest list: ``entries`` holds one {field: int} per digest."""

    learn: str
    digest_id: int
    list_id: int
    entries: list[dict[str, int]]


@dataclass(frozen=True, slots=True)
class IdleTimeout:
    table: str
    key: dict[str, KeyValue]
    pipe: int
    idle: bool  # False: ENTRY_ACTIVE (idle -> active), True: ENTRY_IDLE


@dataclass(frozen=True, slots=True)
class PortStatus:
    port: int
    up: bool


@dataclass(frozen=True, slots=True)
class Reconnected:
    """The stream was re-established after a failure; switch state may be gone."""

    attempt: int


Notification = Digest | IdleTimeout | PortStatus | Reconnected


@dataclass(frozen=True, slots=True)
class IdleTableConfig:
    """A table's idle-timeout attribute as the switch holds it."""

    enable: bool
    notify: bool  # notify mode (idle entries reported); False: poll mode
    ttl_query_interval_ms: int
    min_ttl_ms: int
    max_ttl_ms: int


@dataclass(frozen=True, slots=True)
class Subscription:
    learn: bool = True
    idle_timeout: bool = True
    port_status: bool = False


@dataclass(frozen=True, slots=True)
class Backoff:
    """Reconnect delays: initial * factor**n, capped, with +-jitter fraction."""

    initial_s: float = 0.2
    max_s: float = 10.0
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        d = min(self.max_s, self.initial_s * self.factor ** max(0, attempt))
        return d * (1 + random.uniform(-self.jitter, self.jitter))


class SwitchClient:
    """One BfRt session with one switch.

    >>> async with SwitchClient("127.0.0.1:50052") as sw:
    ...     await sw.insert("pipe.Ingress.nexthop", [Entry({"ig_md.nexthop_id": 1},
    ...         "Ingress.forward", {"port": 1, "src_mac": "02:00:00:00:00:01",
    ...         "dst_mac": "02:00:00:00:00:02"})])
    """

    def __init__(
        self,
        address: str = f"127.0.0.1:{DEFAULT_PORT}",
        *,
        p4_name: str = "p4relay",
        client_id: int = 1,
        device_id: int = 0,
        timeout_s: float = 5.0,
        connect_timeout_s: float = 10.0,
        subscription: Subscription | None = None,
        backoff: Backoff | None = None,
        reconnect: bool = True,
        notification_queue_size: int = 65536,
    ) -> None:
        self.address = address
        self.p4_name = p4_name
        self.client_id = client_id
        self.device_id = device_id
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._raw = RawRpc()
        self.subscription = subscription or Subscription()
        self.backoff = backoff or Backoff()
        self.reconnect_enabled = reconnect
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None  # pb_grpc.BfRuntimeStub (generated, untyped)
        self._stream: Any = None  # grpc.aio.StreamStreamCall
        self._stream_task: asyncio.Task[None] | None = None
        self._schema: Schema | None = None
        self._queue: asyncio.Queue[Notification] = asyncio.Queue(notification_queue_size)
        self._callbacks: list[Callable[[Notification], Awaitable[None] | None]] = []
        self._closed = False
        self._up = False  # bound and streaming; the schema is kept across outages
        self.dropped_notifications = 0  # queue full: counted, logged, never silent

    # -------------------------------------------------------------- session

    async def __aenter__(self) -> SwitchClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def schema(self) -> Schema:
        if self._schema is None:
            raise NotBoundError("not connected: call connect() first")
        return self._schema

    @property
    def connected(self) -> bool:
        return self._up and not self._closed

    async def connect(self) -> None:
        """Subscribe, bind and load the schema; raises SwitchUnavailableError after
        ``connect_timeout_s`` if the switch does not answer."""
        self._closed = False
        deadline = asyncio.get_running_loop().time() + self.connect_timeout_s
        while True:
            try:
                await self._open()
                break
            except SwitchError as e:
                # Our previous stream with this client id may not be torn down on
                # the switch yet (quick reconnect): wait for it, up to the timeout.
                if e.code != grpc.StatusCode.ALREADY_EXISTS:
                    await self._close_channel()
                    raise
                if asyncio.get_running_loop().time() > deadline:
                    await self._close_channel()
                    raise SwitchUnavailableError(
                        f"client id {self.client_id} stays in use on {self.address}: {e}",
                        code=e.code,
                    ) from e
                await asyncio.sleep(0.1)
        self._stream_task = asyncio.create_task(self._stream_loop(), name="bfrt-stream")

    async def _open(self) -> None:
        self._up = False
        await self._close_channel()
        channel = grpc.aio.insecure_channel(self.address, options=CHANNEL_OPTIONS)
        self._channel = channel
        try:
            await asyncio.wait_for(channel.channel_ready(), self.connect_timeout_s)
        except TimeoutError:
            await self._close_channel()
            raise SwitchUnavailableError(
                f"switch at {self.address} not reachable within {self.connect_timeout_s}s"
            ) from None
        self._stub = pb_grpc.BfRuntimeStub(channel)
        await self._subscribe()
        await self._bind()
        await self._load_schema()
        self._raw.bind(
            self.address,
            CHANNEL_OPTIONS,
            target=self._target(None),
            client_id=self.client_id,
            p4_name=self.p4_name,
            timeout_s=self.timeout_s,
        )
        self._up = True
        log.info("switch.connected", address=self.address, client_id=self.client_id)

    async def _subscribe(self) -> None:
        assert self._stub is not None
        self._stream = self._stub.StreamChannel()
        n = self.subscription
        req = pb.StreamMessageRequest(
            client_id=self.client_id,
            subscribe=pb.Subscribe(
                device_id=self.device_id,
                notifications=pb.Subscribe.Notifications(
                    enable_learn_notifications=n.learn,
                    enable_idletimeout_notifications=n.idle_timeout,
                    enable_port_status_change_notifications=n.port_status,
                ),
            ),
        )
        try:
            await self._stream.write(req)
            while True:
                resp = await asyncio.wait_for(self._stream.read(), self.timeout_s)
                if resp is grpc.aio.EOF:
                    raise SwitchUnavailableError("stream closed before the Subscribe answer")
                if resp.WhichOneof("update") == "subscribe":
                    break
                # A notification may race the answer; keep it.
                await self._dispatch(resp)
        except TimeoutError:
            raise SwitchUnavailableError("no answer to Subscribe") from None
        except grpc.aio.AioRpcError as e:
            raise rpc_error(e, "Subscribe") from e
        st = resp.subscribe.status
        if st.code != 0:
            raise SwitchError(f"Subscribe refused: {st.message}", code=status_code(st.code))

    async def _bind(self) -> None:
        req = pb.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            client_id=self.client_id,
            action=pb.SetForwardingPipelineConfigRequest.BIND,
            config=[pb.ForwardingPipelineConfig(p4_name=self.p4_name)],
        )
        try:
            await self.stub.SetForwardingPipelineConfig(req, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            raise rpc_error(e, f"BIND {self.p4_name}") from e

    async def _load_schema(self) -> None:
        resp = await self.get_pipeline_config()
        docs: list[bytes] = [c.bfruntime_info for c in resp.config if c.p4_name == self.p4_name]
        if not docs:
            raise NotBoundError(
                f"switch serves no program {self.p4_name!r} "
                f"(has {[c.p4_name for c in resp.config]})"
            )
        docs.append(resp.non_p4_config.bfruntime_info)
        self._schema = Schema.from_json(*docs)

    async def get_pipeline_config(self) -> pb.GetForwardingPipelineConfigResponse:
        req = pb.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, client_id=self.client_id
        )
        try:
            resp: pb.GetForwardingPipelineConfigResponse = (
                await self.stub.GetForwardingPipelineConfig(req, timeout=self.timeout_s)
            )
        except grpc.aio.AioRpcError as e:
            raise rpc_error(e, "GetForwardingPipelineConfig") from e
        return resp

    @property
    def stub(self) -> Any:
        if self._stub is None:
            raise SwitchUnavailableError("not connected")
        return self._stub

    async def close(self) -> None:
        self._closed = True
        task, self._stream_task = self._stream_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close_channel()
        self._raw.close()
        self._up = False

    async def _close_channel(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        self._raw.unbind()
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None

    # -------------------------------------------------------------- stream

    def add_callback(self, cb: Callable[[Notification], Awaitable[None] | None]) -> None:
        """Called for every notification (besides the queue behind notifications())."""
        self._callbacks.append(cb)

    async def notifications(self) -> AsyncIterator[Notification]:
        """Digests, idle timeouts, port status changes and reconnects, in order."""
        while True:
            yield await self._queue.get()

    async def next_notification(self, timeout_s: float) -> Notification | None:
        try:
            return await asyncio.wait_for(self._queue.get(), timeout_s)
        except TimeoutError:
            return None

    def drain_notifications(self) -> list[Notification]:
        out: list[Notification] = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    async def _stream_loop(self) -> None:
        attempt = 0
        while not self._closed:
            try:
                stream = self._stream
                if stream is None:
                    raise SwitchUnavailableError("no stream")
                while True:
                    resp = await stream.read()
                    if resp is grpc.aio.EOF:
                        raise SwitchUnavailableError("stream closed by the switch")
                    attempt = 0
                    await self._dispatch(resp)
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, SwitchError) as e:
                if self._closed:
                    return
                log.warning("switch.stream_lost", error=str(e), address=self.address)
                self._up = False
                if not self.reconnect_enabled:
                    return
            # Reconnect with backoff until it works or close() is called.
            while not self._closed:
                await asyncio.sleep(self.backoff.delay(attempt))
                attempt += 1
                try:
                    await self._open()
                except SwitchError as e:
                    log.info("switch.reconnect_failed", attempt=attempt, error=str(e))
                    continue
                await self._emit(Reconnected(attempt))
                break

    async def _emit(self, n: Notification) -> None:
        try:
            self._queue.put_nowait(n)
        except asyncio.QueueFull:
            self.dropped_notifications += 1
            log.error("switch.notification_dropped", kind=type(n).__name__)
        for cb in self._callbacks:
            try:
                r = cb(n)
                if r is not None:
                    await r
            except Exception:  # a consumer's bug must not kill the stream
                log.exception("switch.callback_failed")

    async def _dispatch(self, resp: pb.StreamMessageResponse) -> None:
        which = resp.WhichOneof("update")
        if which == "digest":
            # Not acknowledged: bf_switchd answers a DigestListAck with
            # BF_NOT_SUPPORTED and ends the stream; it frees the list itself.
            d = self._decode_digest(resp.digest)
            if d is not None:
                await self._emit(d)
        elif which == "idle_timeout_notification":
            n = resp.idle_timeout_notification
            t = self._schema.table_by_id(n.table_entry.table_id) if self._schema else None
            if t is None:
                log.warning("switch.idle_unknown_table", table_id=n.table_entry.table_id)
                return
            await self._emit(
                IdleTimeout(
                    table=t.name,
                    key=self._decode_key(t, n.table_entry.key),
                    pipe=n.target.pipe_id,
                    idle=n.type == pb.IdleTimeoutNotification.ENTRY_IDLE,
                )
            )
        elif which == "port_status_change_notification":
            p = resp.port_status_change_notification
            port = 0
            for kf in p.table_entry.key.fields:
                port = codec.decode_int(kf.exact.value)
            await self._emit(PortStatus(port, p.port_up))
        else:
            log.debug("switch.stream_message", kind=which)

    def _decode_digest(self, d: pb.DigestList) -> Digest | None:
        ln = self._schema.learn_by_id(d.digest_id) if self._schema else None
        if ln is None:
            log.warning("switch.digest_unknown", digest_id=d.digest_id)
            return None
        entries: list[dict[str, int]] = []
        for td in d.data:
            row: dict[str, int] = {}
            for df in td.fields:
                f = ln.field_by_id(df.field_id)
                row[f.name if f else str(df.field_id)] = codec.decode_int(df.stream)
            entries.append(row)
        return Digest(ln.name, d.digest_id, d.list_id, entries)

    # -------------------------------------------------------------- encode

    def _target(self, pipe: int | None = None) -> pb.TargetDevice:
        return pb.TargetDevice(
            device_id=self.device_id,
            pipe_id=ALL_PIPES if pipe is None else pipe,
            direction=ALL_DIRECTIONS,
            prsr_id=ALL_PARSERS,
        )

    def _key(self, t: TableInfo, key: Mapping[str, KeyValue]) -> pb.TableKey:
        missing = [k for k, f in t.keys.items() if k not in key and f.match_type == "Exact"]
        if missing and key:
            raise SchemaError(f"table {t.name}: key fields missing: {missing}")
        return pb.TableKey(fields=[codec.key_field(t.key(k), v) for k, v in key.items()])

    def _decode_key(self, t: TableInfo, k: pb.TableKey) -> dict[str, KeyValue]:
        out: dict[str, KeyValue] = {}
        for kf in k.fields:
            f = t.key_by_id(kf.field_id)
            out[f.name] = codec.decode_key_field(f, kf)
        return out

    def _data(
        self, t: TableInfo, action: str | None, data: Mapping[str, DataValue]
    ) -> pb.TableData:
        a: ActionInfo | None = t.action(action) if action else None
        td = pb.TableData(action_id=a.id if a else 0)
        for name, value in data.items():
            td.fields.append(codec.data_field(t.data_field(name, a), value))
        if a is not None:
            absent = [p for p in a.params if p not in data]
            if absent:
                raise SchemaError(f"action {a.name}: parameters missing: {absent}")
        return td

    def table_entry(self, table: str, e: Entry, *, with_data: bool = True) -> pb.TableEntry:
        t = self.schema.table(table)
        te = pb.TableEntry(table_id=t.id, key=self._key(t, e.key))
        if with_data and (e.action or e.data):
            te.data.CopyFrom(self._data(t, e.action, e.data))
        if e.pipe is not None:
            te.entry_tgt.CopyFrom(self._target(e.pipe))
        return te

    # -------------------------------------------------------------- write

    async def write_encoded(self, updates: Sequence[bytes]) -> None:
        """One Write (continue on error) of `Update`s already encoded as
        protobuf bytes (`p4relay_switch.wire`): for hot paths where building
        messages costs more than the RPC. Errors as `write` raises them."""
        await self._raw.write(list(updates))

    async def write_updates(self, updates: bytes, n: int) -> None:
        """One Write (continue on error) of `n` updates framed and joined as
        the request's `updates` fields (`encode.Encoded`): a batch's bytes go
        out as they are. Errors as `write` raises them."""
        await self._raw.write_updates(updates, n)

    async def read_encoded(self, entities: Sequence[bytes]) -> list[pb.Entity]:
        """One Read of `Entity`s already encoded as protobuf bytes -> the entities read back."""
        return await self._raw.read(list(entities))

    async def write(
        self,
        updates: Sequence[pb.Update],
        *,
        atomicity: pb.WriteRequest.Atomicity = pb.WriteRequest.CONTINUE_ON_ERROR,
        pipe: int | None = None,
    ) -> None:
        """One Write RPC; raises the typed error of the first failed update."""
        if not updates:
            return
        req = pb.WriteRequest(
            target=self._target(pipe),
            client_id=self.client_id,
            updates=updates,
            atomicity=atomicity,
            p4_name=self.p4_name,
        )
        try:
            await self.stub.Write(req, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            raise rpc_error(e, "Write", len(updates)) from e

    def update(
        self,
        kind: pb.Update.Type,
        table: str,
        e: Entry,
    ) -> pb.Update:
        with_data = kind != pb.Update.DELETE
        return pb.Update(
            type=kind,
            entity=pb.Entity(table_entry=self.table_entry(table, e, with_data=with_data)),
        )

    async def _batch(
        self, kind: pb.Update.Type, table: str, entries: Iterable[Entry], batch: int
    ) -> None:
        ups = [self.update(kind, table, e) for e in entries]
        for i in range(0, len(ups), batch):
            await self.write(ups[i : i + batch])

    async def insert(self, table: str, entries: Iterable[Entry], *, batch: int = 1000) -> None:
        await self._batch(pb.Update.INSERT, table, entries, batch)

    async def modify(self, table: str, entries: Iterable[Entry], *, batch: int = 1000) -> None:
        await self._batch(pb.Update.MODIFY, table, entries, batch)

    async def insert_or_modify(
        self, table: str, entries: Iterable[Entry], *, batch: int = 1000
    ) -> None:
        await self._batch(pb.Update.INSERT_OR_MODIFY, table, entries, batch)

    async def delete(self, table: str, entries: Iterable[Entry], *, batch: int = 1000) -> None:
        await self._batch(pb.Update.DELETE, table, entries, batch)

    async def set_default(
        self, table: str, action: str, data: Mapping[str, DataValue] | None = None
    ) -> None:
        t = self.schema.table(table)
        te = pb.TableEntry(table_id=t.id, is_default_entry=True)
        te.data.CopyFrom(self._data(t, action, data or {}))
        await self.write([pb.Update(type=pb.Update.MODIFY, entity=pb.Entity(table_entry=te))])

    async def clear(self, table: str) -> None:
        """Delete every entry (a DELETE with an empty key, as bf_switchd accepts)."""
        t = self.schema.table(table)
        te = pb.TableEntry(table_id=t.id)
        await self.write([pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))])

    async def set_idle_table(
        self,
        table: str,
        *,
        enable: bool = True,
        notify: bool = True,
        ttl_query_interval_ms: int = 1000,
        min_ttl_ms: int = 1000,
        max_ttl_ms: int = 0,
    ) -> None:
        t = self.schema.table(table)
        it = pb.IdleTable(
            ttl_query_interval=ttl_query_interval_ms,
            max_ttl=max_ttl_ms,
            min_ttl=min_ttl_ms,
            idle_table_mode=(
                pb.IdleTable.IDLE_TABLE_NOTIFY_MODE if notify else pb.IdleTable.IDLE_TABLE_POLL_MODE
            ),
            enable=enable,
        )
        attr = pb.TableAttribute(table_id=t.id, idle_table=it)
        await self.write([pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_attribute=attr))])

    async def read_idle_table(self, table: str) -> IdleTableConfig:
        t = self.schema.table(table)
        attr = pb.TableAttribute(table_id=t.id, idle_table=pb.IdleTable())
        (got,) = await self._read([pb.Entity(table_attribute=attr)], None)
        it = got.table_attribute.idle_table
        return IdleTableConfig(
            enable=it.enable,
            notify=it.idle_table_mode == pb.IdleTable.IDLE_TABLE_NOTIFY_MODE,
            ttl_query_interval_ms=it.ttl_query_interval,
            min_ttl_ms=it.min_ttl,
            max_ttl_ms=it.max_ttl,
        )

    async def set_entry_scope(self, table: str, *, per_pipe: bool) -> None:
        """SINGLE pipe scope (each pipe its own entries) or ALL (symmetric)."""
        t = self.schema.table(table)
        mode = pb.Mode(predef=pb.Mode.SINGLE if per_pipe else pb.Mode.ALL)
        scope = pb.EntryScope(
            gress_scope=pb.Mode(predef=pb.Mode.ALL),
            pipe_scope=mode,
            prsr_scope=pb.Mode(predef=pb.Mode.ALL),
        )
        attr = pb.TableAttribute(table_id=t.id, entry_scope=scope)
        await self.write([pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_attribute=attr))])

    # -------------------------------------------------------------- read

    async def _read(self, entities: Sequence[pb.Entity], pipe: int | None) -> list[pb.Entity]:
        req = pb.ReadRequest(
            target=self._target(pipe),
            client_id=self.client_id,
            entities=entities,
            p4_name=self.p4_name,
        )
        return await read_entities(self.stub.Read(req, timeout=self.timeout_s), len(entities))

    def _decode_entry(self, te: pb.TableEntry) -> ReadEntry:
        t = self.schema.table_by_id(te.table_id)
        if t is None:
            raise SchemaError(f"switch returned an entry of unknown table id {te.table_id}")
        a = t.action_by_id(te.data.action_id) if te.data.action_id else None
        raw: dict[str, list[ReadValue]] = {}
        for df in te.data.fields:
            f = t.data_field_by_id(df.field_id, a)
            raw.setdefault(f.name if f else str(df.field_id), []).append(
                codec.decode_data_field(df)
            )
        data: dict[str, ReadValue] = {}
        for name, vals in raw.items():
            # Per-pipe values of a register come as repeated fields.
            ints = [v for v in vals if isinstance(v, int)]
            data[name] = vals[0] if len(vals) == 1 else ints
        return ReadEntry(
            table=t.name,
            key=self._decode_key(t, te.key),
            action=a.name if a else None,
            data=data,
            is_default=te.is_default_entry,
        )

    async def read(
        self,
        table: str,
        keys: Iterable[Mapping[str, KeyValue]] | None = None,
        *,
        from_hw: bool = True,
        pipe: int | None = None,
        default: bool = False,
    ) -> list[ReadEntry]:
        """Entries by key, or every entry when ``keys`` is None; with counters.
        A wildcard read on bf_switchd returns the table's default entry too
        (``is_default``, no key): left out unless ``default``."""
        t = self.schema.table(table)
        flags = pb.TableFlags(from_hw=from_hw)
        if keys is None:
            ents = [pb.Entity(table_entry=pb.TableEntry(table_id=t.id, table_flags=flags))]
        else:
            ents = [
                pb.Entity(
                    table_entry=pb.TableEntry(table_id=t.id, key=self._key(t, k), table_flags=flags)
                )
                for k in keys
            ]
            if not ents:
                return []
        return [
            self._decode_entry(e.table_entry)
            for e in await self._read(ents, pipe)
            if e.WhichOneof("entity") == "table_entry"
            and (default or not e.table_entry.is_default_entry)
        ]

    async def read_one(
        self, table: str, key: Mapping[str, KeyValue], *, from_hw: bool = True
    ) -> ReadEntry:
        got = await self.read(table, [key], from_hw=from_hw)
        if not got:
            raise write_error(grpc.StatusCode.NOT_FOUND, f"{table}: no entry {dict(key)}")
        return got[0]

    async def usage(self, table: str, *, pipe: int | None = None) -> int:
        t = self.schema.table(table)
        ents = await self._read([pb.Entity(table_usage=pb.TableUsage(table_id=t.id))], pipe)
        return sum(e.table_usage.usage for e in ents if e.WhichOneof("entity") == "table_usage")

    # -------------------------------------------------------------- registers

    def _register_table(self, name: str) -> TableInfo:
        t = self.schema.table(name)
        if t.table_type != "Register" or "$REGISTER_INDEX" not in t.keys:
            raise SchemaError(f"{t.name} is not a register table")
        return t

    def _register(self, name: str, field: str | None = None) -> tuple[TableInfo, str]:
        """The register's table and the data field `field` names (`lost` ->
        `Egress.rtp_loss.lost`); None: its one value (`f1`). A register of
        several fields needs `field`."""
        t = self._register_table(name)
        if field is not None:
            return t, t.data_field(register_field(t.name, field)).name
        fields = [n for n in t.data if n.endswith(".f1")] or list(t.data)
        if not fields:
            raise SchemaError(f"register {t.name} has no data field")
        if len(fields) > 1:
            raise SchemaError(f"register {t.name} has fields {fields}: name one")
        return t, fields[0]

    async def read_register(
        self,
        name: str,
        indexes: Iterable[int],
        *,
        field: str | None = None,
        from_hw: bool = True,
    ) -> dict[int, list[int]]:
        """index -> per-pipe values (one element on the softswitch) of the
        register's value, or of its field `field` (`_register`)."""
        t, f = self._register(name, field)
        idx = list(indexes)
        got = await self.read(t.name, [{"$REGISTER_INDEX": i} for i in idx], from_hw=from_hw)
        out: dict[int, list[int]] = {}
        for e in got:
            i = e.key["$REGISTER_INDEX"]
            v = e.data.get(f, 0)
            vals = v if isinstance(v, list) else [v]
            out[int(i) if isinstance(i, int) else -1] = [int(x) for x in vals]
        return out

    async def write_register(self, name: str, values: Mapping[int, int]) -> None:
        """Sets cells of a register of one value."""
        t, f = self._register(name)
        await self.modify(
            t.name, [Entry({"$REGISTER_INDEX": i}, None, {f: v}) for i, v in values.items()]
        )

    async def write_register_fields(
        self, name: str, values: Mapping[int, Mapping[str, int]]
    ) -> None:
        """Sets cells of a register, every data field of each, by short name
        (index -> {`lost`: ..., `reordered`: ...}; a plain register's is
        `f1`): bf-p4c makes each mandatory, so a write naming only some is
        refused before it is sent."""
        t = self._register_table(name)
        entries = []
        for i, cell in values.items():
            data: dict[str, DataValue] = {register_field(t.name, f): v for f, v in cell.items()}
            if set(data) != set(t.data):
                raise SchemaError(f"register {t.name}: a cell takes exactly {sorted(t.data)}")
            entries.append(Entry({"$REGISTER_INDEX": i}, None, data))
        await self.modify(t.name, entries)

    # --------------------------------------------------------------- counters

    def _counter(self, name: str) -> TableInfo:
        t = self.schema.table(name)
        if t.table_type != "Counter" or "$COUNTER_INDEX" not in t.keys:
            raise SchemaError(f"{t.name} is not an indexed counter table")
        if "$COUNTER_SPEC_PKTS" not in t.data:
            raise SchemaError(f"counter {t.name} counts no packets")
        return t

    async def read_counter(
        self, name: str, indexes: Iterable[int], *, from_hw: bool = True
    ) -> dict[int, list[int]]:
        """An indexed packet counter: index -> per-pipe packets (one element
        on the softswitch), as read_register returns a register's cells."""
        t = self._counter(name)
        idx = list(indexes)
        got = await self.read(t.name, [{"$COUNTER_INDEX": i} for i in idx], from_hw=from_hw)
        out: dict[int, list[int]] = {}
        for e in got:
            i = e.key["$COUNTER_INDEX"]
            v = e.data.get("$COUNTER_SPEC_PKTS", 0)
            vals = v if isinstance(v, list) else [v]
            out[int(i) if isinstance(i, int) else -1] = [int(x) for x in vals]
        return out

    async def write_counter(self, name: str, values: Mapping[int, int]) -> None:
        """Sets packet counter cells (0 resets them)."""
        t = self._counter(name)
        await self.modify(
            t.name,
            [
                Entry({"$COUNTER_INDEX": i}, None, {"$COUNTER_SPEC_PKTS": v})
                for i, v in values.items()
            ],
        )

    # -------------------------------------------------------------- ports, TM

    async def ports(self) -> dict[int, dict[str, ReadValue]]:
        """Every port the switch has ($PORT): dev_port -> $PORT_NAME, $SPEED, $PORT_UP..."""
        out: dict[int, dict[str, ReadValue]] = {}
        for e in await self.read("$PORT"):
            p = e.key.get("$DEV_PORT")
            if isinstance(p, int):
                out[p] = e.data
        return out

    async def port_stats(self, ports: Iterable[int]) -> dict[int, dict[str, int]]:
        """$PORT_STAT counters per dev port ($FramesReceivedOK, $OctetsReceived...)."""
        got = await self.read("$PORT_STAT", [{"$DEV_PORT": p} for p in ports])
        out: dict[int, dict[str, int]] = {}
        for e in got:
            p = e.key["$DEV_PORT"]
            out[int(p) if isinstance(p, int) else -1] = {
                k: int(v) for k, v in e.data.items() if isinstance(v, int)
            }
        return out

    def port_queue(self, dev_port: int, qid: int = 0) -> tuple[int, int, int]:
        """(pipe, pg_id, pg_queue) of a port's egress queue. Tofino1: pipe = port >> 7,
        pg_id = (port & 0x7f) >> 2, pg_queue = (port & 3) * 8 + qid (default
        8 queues per channel). The softswitch has one pipe and a port group per
        port: pg_id = port, pg_queue = qid."""
        t = self.schema.tables.get("tf1.tm.counter.queue")
        if t is not None and self.schema.tables.get("tf1.tm.port.cfg") is not None:
            local = dev_port & 0x7F
            return dev_port >> 7, local >> 2, (local & 3) * 8 + qid
        return 0, dev_port, qid

    async def queue_stats(self, dev_port: int, qid: int = 0) -> dict[str, int]:
        """usage_cells, watermark_cells, drop_count_packets of a port's egress queue."""
        pipe, pg_id, pg_queue = self.port_queue(dev_port, qid)
        got = await self.read(
            "tf1.tm.counter.queue", [{"pg_id": pg_id, "pg_queue": pg_queue}], pipe=pipe
        )
        if not got:
            raise write_error(grpc.StatusCode.NOT_FOUND, f"no queue for port {dev_port}")
        return {k: int(v) for k, v in got[0].data.items() if isinstance(v, int)}

    async def set_port_shaping(
        self, dev_port: int, max_rate_kbps: int, *, max_burst_bytes: int = 9000, enable: bool = True
    ) -> None:
        """Egress line rate of a port (tf1.tm.port.sched_shaping, unit BPS, kbit/s)."""
        t = self.schema.table("tf1.tm.port.sched_shaping")
        data: dict[str, DataValue] = {"max_rate": max_rate_kbps}
        if "unit" in t.data:
            data["unit"] = "BPS"
        if "max_burst_size" in t.data:
            data["max_burst_size"] = max_burst_bytes
        if "provisioning" in t.data:
            data["provisioning"] = "UPPER"
        pipe = dev_port >> 7 if "tf1.tm.port.cfg" in self.schema.tables else None
        await self.modify(t.name, [Entry({"dev_port": dev_port}, None, data, pipe=pipe)])
        cfg = self.schema.tables.get("tf1.tm.port.sched_cfg")
        if cfg is not None and "max_rate_enable" in cfg.data:
            await self.modify(
                cfg.name,
                [Entry({"dev_port": dev_port}, None, {"max_rate_enable": enable}, pipe=pipe)],
            )


async def with_retry(
    fn: Callable[[], Awaitable[T]], *, attempts: int = 5, backoff: Backoff | None = None
) -> T:
    """Retry an idempotent call while the switch is unavailable."""
    b = backoff or Backoff()
    for i in range(attempts):
        try:
            return await fn()
        except SwitchUnavailableError:
            if i == attempts - 1:
                raise
            await asyncio.sleep(b.delay(i))
    raise AssertionError("unreachable")
