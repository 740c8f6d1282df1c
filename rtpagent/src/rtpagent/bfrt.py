"""`Switch` over p4relay_switch's BfRt client (Tofino and the software switch).

Each `write` is one BfRt Write RPC carrying, in order: guard deletions, relay
deletions, quality-register resets, leg modifications and inserts, relay
inserts, guard inserts, leg deletions (guards exist only while relays do). A failed batch is undone (its inserts deleted) before
OffloadRefused is raised, so nothing half-installed is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import grpc
import structlog
from p4relay_switch import (
    Entry,
    Range,
    Reconnected,
    Subscription,
    SwitchClient,
    SwitchError,
    SwitchUnavailableError,
    WriteError,
)
from p4relay_switch import IdleTimeout as SwIdle
from p4relay_switch.client import Digest
from p4relay_switch.pipeline import (
    A_MARK_RELAY,
    K_DST_ADDR,
    K_DST_PORT,
    K_LEG,
    K_PRIORITY,
    K_SRC_ADDR,
    K_SRC_PORT,
    LEARN_DIGEST,
    LEG_REWRITE,
    QUALITY_REGISTERS,
    REG_JITTER,
    REG_LOST,
    REG_PACKETS,
    REG_PAYLOAD_TYPE,
    REG_REORDERED,
    RELAY,
    RELAY_ADDR,
    RELAY_GUARD,
)
from p4relay_switch.proto import bfruntime_pb2 as pb

from .encode import Encoder
from .switchport import (
    Batch,
    FlowCounters,
    FlowKey,
    GuardKey,
    IdleTimeout,
    LearnDigest,
    LegQuality,
    LegRewrite,
    OffloadRefused,
    RelayEntry,
    SwitchDump,
    SwitchEvent,
    SwitchUp,
)

log = structlog.get_logger("rtpagent.bfrt")


_K = TypeVar("_K", FlowKey, GuardKey)


def _ip(v: object) -> str:
    if isinstance(v, int):
        return str(ipaddress.IPv4Address(v))
    return str(v)


def _int(v: object) -> int:
    return v if isinstance(v, int) else int(str(v))


@functools.lru_cache(maxsize=65536)
def _ip4(addr: str) -> int:
    return int.from_bytes(socket.inet_aton(addr), "big")


def _key(k: FlowKey) -> dict[str, int]:
    return {
        K_SRC_ADDR: _ip4(k.src_addr),
        K_DST_ADDR: _ip4(k.dst_addr),
        K_SRC_PORT: k.src_port,
        K_DST_PORT: k.dst_port,
    }


def _refused(exc: SwitchError) -> OffloadRefused:
    if isinstance(exc, SwitchUnavailableError) or exc.code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    ):
        return OffloadRefused("switch_unreachable", str(exc))
    if exc.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return OffloadRefused("table_full", str(exc))
    return OffloadRefused("refused", str(exc))


class BfrtSwitch:
    def __init__(
        self,
        address: str,
        *,
        client_id: int = 1,
        relay_addrs: list[str] | None = None,
        port_min: int = 35000,
        port_max: int = 65000,
        idle_query_ms: int = 1000,
        timeout_s: float = 2.0,
    ) -> None:
        self.client = SwitchClient(
            address,
            client_id=client_id,
            timeout_s=timeout_s,
            connect_timeout_s=timeout_s,
            subscription=Subscription(learn=True, idle_timeout=True),
        )
        self.relay_addrs = relay_addrs or []
        self.port_min, self.port_max = port_min, port_max
        self.idle_query_ms = idle_query_ms
        self._events: asyncio.Queue[SwitchEvent] = asyncio.Queue(65536)
        self._enc: Encoder | None = None
        self._task: asyncio.Task[None] | None = None
        self._connect_task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self.client.connected

    async def start(self) -> None:
        """Connect now if the switch answers; otherwise keep trying in the background."""
        try:
            await self._connect()
        except SwitchError as exc:
            log.warning("switch_unreachable_at_start", error=str(exc))
            self._connect_task = asyncio.create_task(self._connect_loop())

    async def _connect(self) -> None:
        await self.client.connect()
        await self._setup()
        self._task = asyncio.create_task(self._pump())
        self._put(SwitchUp(restarted=False))

    async def _connect_loop(self) -> None:
        delay = 0.2
        while True:
            await asyncio.sleep(delay)
            try:
                await self._connect()
                return
            except SwitchError:
                delay = min(delay * 2, 5.0)

    async def _setup(self) -> None:
        await self.client.set_idle_table(
            RELAY,
            notify=True,
            ttl_query_interval_ms=self.idle_query_ms,
            min_ttl_ms=self.idle_query_ms,
        )
        await self.set_relay_addrs(self.relay_addrs, self.port_min, self.port_max)

    async def close(self) -> None:
        for t in (self._task, self._connect_task):
            if t is not None:
                t.cancel()
        await self.client.close()

    async def set_relay_addrs(self, addrs: list[str], port_min: int, port_max: int) -> None:
        self.relay_addrs, self.port_min, self.port_max = addrs, port_min, port_max
        if not addrs or not self.client.connected:
            return
        entries = [
            Entry(
                {
                    K_DST_ADDR: int(ipaddress.IPv4Address(a)),
                    K_DST_PORT: Range(port_min, port_max),
                    K_PRIORITY: 0,
                },
                A_MARK_RELAY,
            )
            for a in addrs
            if ":" not in a
        ]
        await self.client.insert_or_modify(RELAY_ADDR, entries)

    # ------------------------------------------------------------------ writes
    def _encoder(self) -> Encoder:
        schema = self.client.schema
        if self._enc is None or self._enc.schema is not schema:
            self._enc = Encoder(schema)  # ids may change when the switch reloads
        return self._enc

    def _updates(self, b: Batch, ttl_ms: int) -> tuple[list[bytes], list[int]]:
        """The batch's updates as wire bytes, in `Batch` order; per update its
        kind (0 delete, 1 modify, 2 insert)."""
        enc = self._encoder()
        ups: list[bytes] = []
        kinds: list[int] = []
        for g in b.del_guards:
            ups.append(enc.guard_delete(g))
        for k in b.del_relays:
            ups.append(enc.relay_delete(k))
        kinds += [0] * len(ups)
        for leg in b.reset_legs:
            # Leg indexes are reused: a leg's quality starts from zero.
            ups.extend(enc.register_resets(leg))
        for lg in b.mod_legs:
            ups.append(enc.leg_write(lg, pb.Update.MODIFY))
        kinds += [1] * (len(ups) - len(kinds))
        for lg in b.add_legs:
            ups.append(enc.leg_write(lg, pb.Update.INSERT))
        for r in b.add_relays:
            ups.append(enc.relay_insert(r, ttl_ms))
        for g in b.add_guards:
            ups.append(enc.guard_insert(g))
        kinds += [2] * (len(ups) - len(kinds))
        for leg in b.del_legs:
            ups.append(enc.leg_delete(leg))
        kinds += [0] * (len(ups) - len(kinds))
        return ups, kinds

    async def write(self, batch: Batch, idle_ttl_ms: int) -> None:
        if not batch:
            return
        if not self.client.connected:
            raise OffloadRefused("switch_unreachable", "not connected")
        try:
            ups, kinds = self._updates(batch, idle_ttl_ms)
        except SwitchError as exc:  # schema/encode: a bug or a bad address
            raise OffloadRefused("refused", str(exc)) from exc
        try:
            await self.client.write_encoded(ups)
            return
        except WriteError as exc:
            failed = [
                e
                for e in exc.errors
                if not (
                    0 <= e.index < len(kinds)
                    and kinds[e.index] == 0
                    and e.code is grpc.StatusCode.NOT_FOUND
                )
            ]
            if exc.errors and not failed:
                return  # only deletions of entries already gone
            log.warning("switch_write_failed", error=str(exc), failed=len(failed) or len(ups))
            bad = {e.index for e in exc.errors}
            await self._undo(batch, kinds, bad)
            if failed:
                raise _refused(_first_error(failed[0].code, failed[0].message)) from exc
            raise _refused(exc) from exc
        except SwitchError as exc:
            raise _refused(exc) from exc

    async def _undo(self, b: Batch, kinds: list[int], failed: set[int]) -> None:
        """Delete what this batch inserted, but never an entry whose own insert
        failed (ALREADY_EXISTS: it belongs to someone else). Without per-update
        detail every insert of the batch is undone."""
        refs = self._insert_refs(b)
        del_relays: list[FlowKey] = []
        del_legs: list[int] = []
        del_guards: list[GuardKey] = []
        for i, ref in refs.items():
            if i in failed:
                continue
            if isinstance(ref, FlowKey):
                del_relays.append(ref)
            elif isinstance(ref, GuardKey):
                del_guards.append(ref)
            else:
                del_legs.append(ref)
        undo = Batch(
            del_relays=tuple(del_relays), del_legs=tuple(del_legs), del_guards=tuple(del_guards)
        )
        if not undo:
            return
        ups, _ = self._updates(undo, 0)
        with contextlib.suppress(SwitchError):
            await self.client.write_encoded(ups)

    @staticmethod
    def _insert_refs(b: Batch) -> dict[int, FlowKey | GuardKey | int]:
        """Update index -> what it inserted (same order as `_updates`)."""
        refs: dict[int, FlowKey | GuardKey | int] = {}
        pos = (
            len(b.del_guards)
            + len(b.del_relays)
            + len(b.mod_legs)
            + len(b.reset_legs) * len(QUALITY_REGISTERS)
        )
        for lg in b.add_legs:
            refs[pos] = lg.leg
            pos += 1
        for r in b.add_relays:
            refs[pos] = r.key
            pos += 1
        for g in b.add_guards:
            refs[pos] = g
            pos += 1
        return refs

    # ------------------------------------------------------------------ reads
    async def read_counters(self, keys: list[FlowKey]) -> dict[FlowKey, FlowCounters]:
        enc = self._encoder()
        return await self._read_entries(keys, enc.relay_reads, enc.decode_counters)

    async def read_guard_counters(self, keys: list[GuardKey]) -> dict[GuardKey, FlowCounters]:
        enc = self._encoder()
        return await self._read_entries(keys, enc.guard_reads, enc.decode_guard_counters)

    async def _read_entries(
        self,
        keys: list[_K],
        reads: Callable[[list[_K]], tuple[list[bytes], dict[bytes, _K]]],
        decode: Callable[[list[pb.Entity], dict[bytes, _K]], dict[_K, FlowCounters]],
    ) -> dict[_K, FlowCounters]:
        """Direct counters of these entries. One Read; if some entry is gone
        (NOT_FOUND fails the whole Read), key by key, the gone ones left out."""
        if not keys:
            return {}
        ents, sent = reads(keys)
        try:
            return decode(await self.client.read_encoded(ents), sent)
        except SwitchError as exc:
            if exc.code is grpc.StatusCode.NOT_FOUND and len(keys) > 1:
                out: dict[_K, FlowCounters] = {}
                for k in keys:
                    out.update(await self._read_entries([k], reads, decode))
                return out
            if exc.code is grpc.StatusCode.NOT_FOUND:
                return {}
            raise _refused(exc) from exc

    async def read_quality(self, legs: list[int]) -> dict[int, LegQuality]:
        if not legs:
            return {}
        regs: dict[str, dict[int, list[int]]] = {}
        try:
            for name in (REG_PACKETS, REG_LOST, REG_REORDERED, REG_JITTER, REG_PAYLOAD_TYPE):
                regs[name] = await self.client.read_register(name, legs)
        except SwitchError as exc:
            raise _refused(exc) from exc

        def total(name: str, leg: int) -> int:
            return sum(regs[name].get(leg, [0]))

        def best(name: str, leg: int) -> int:
            return max(regs[name].get(leg, [0]) or [0])

        return {
            leg: LegQuality(
                total(REG_PACKETS, leg),
                total(REG_LOST, leg),
                total(REG_REORDERED, leg),
                best(REG_JITTER, leg),
                best(REG_PAYLOAD_TYPE, leg),
            )
            for leg in legs
        }

    async def dump(self) -> SwitchDump:
        try:
            relays = await self.client.read(RELAY)
            legs = await self.client.read(LEG_REWRITE)
            guards = await self.client.read(RELAY_GUARD)
        except SwitchError as exc:
            raise _refused(exc) from exc
        out_r = [
            RelayEntry(
                FlowKey(
                    _ip(r.key[K_SRC_ADDR]),
                    _ip(r.key[K_DST_ADDR]),
                    _int(r.key[K_SRC_PORT]),
                    _int(r.key[K_DST_PORT]),
                ),
                _int(r.data.get("leg", 0)),
                bool(_int(r.data.get("rtcp", 0))),
            )
            for r in relays
            if not r.is_default
        ]
        out_l = [
            LegRewrite(
                _int(r.key[K_LEG]),
                _ip(r.data.get("src_addr", 0)),
                _ip(r.data.get("dst_addr", 0)),
                _int(r.data.get("src_port", 0)),
                _int(r.data.get("dst_port", 0)),
            )
            for r in legs
            if not r.is_default
        ]
        out_g = [
            GuardKey(_ip(r.key[K_DST_ADDR]), _int(r.key[K_DST_PORT]))
            for r in guards
            if not r.is_default
        ]
        return SwitchDump(out_r, out_l, out_g)

    # ------------------------------------------------------------------ events
    def _put(self, ev: SwitchEvent) -> None:
        try:
            self._events.put_nowait(ev)
        except asyncio.QueueFull:
            log.error("switch_event_dropped", kind=type(ev).__name__)

    async def _pump(self) -> None:
        async for n in self.client.notifications():
            if isinstance(n, Digest):
                if n.learn != LEARN_DIGEST:
                    continue
                for r in n.entries:
                    self._put(
                        LearnDigest(
                            _ip(r.get("src_addr", 0)),
                            _ip(r.get("dst_addr", 0)),
                            r.get("src_port", 0),
                            r.get("dst_port", 0),
                            r.get("ingress_port", 0),
                        )
                    )
            elif isinstance(n, SwIdle):
                if n.table != RELAY:
                    continue
                k = n.key
                key = FlowKey(
                    _ip(k.get(K_SRC_ADDR, 0)),
                    _ip(k.get(K_DST_ADDR, 0)),
                    _int(k.get(K_SRC_PORT, 0)),
                    _int(k.get(K_DST_PORT, 0)),
                )
                self._put(IdleTimeout(key, idle=n.idle))
            elif isinstance(n, Reconnected):
                try:
                    await self._setup()
                except SwitchError as exc:
                    log.error("switch_setup_failed", error=str(exc))
                self._put(SwitchUp(restarted=True))

    async def events(self) -> AsyncIterator[SwitchEvent]:
        while True:
            ev = await self._events.get()
            yield ev


def _first_error(code: grpc.StatusCode, message: str) -> SwitchError:
    return SwitchError(message, code=code)
