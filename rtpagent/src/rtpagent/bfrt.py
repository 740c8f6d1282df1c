"""`Switch` over p4relay_switch's `Pipeline` (Tofino and the software switch).

The entries of every call go through `Pipeline.write` (one ordered Write per
batch, a failed batch undone before the error is raised); this module keeps
the connection (connect in the background, re-setup after a switch restart),
turns the client's notifications into the agent's events and its typed
errors into fail-open reasons.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import grpc
import structlog
from p4relay_switch import (
    Counters,
    Digest,
    EntryBatch,
    EntryDump,
    FlowKey,
    IdleTimeout,
    LegQuality,
    Pipeline,
    Reconnected,
    Routes,
    Subscription,
    SwitchClient,
    SwitchError,
    SwitchUnavailableError,
    names,
)

from .switchport import OffloadRefused, SwitchEvent, SwitchUp

log = structlog.get_logger("rtpagent.bfrt")

T = TypeVar("T")
LOST_POLL_S = 0.05  # how often the connection is looked at (when it was lost)
NOTIFICATIONS_PER_TURN = 32  # the switch's notifications converted per event-loop turn


def _refused(exc: SwitchError) -> OffloadRefused:
    if isinstance(exc, SwitchUnavailableError) or exc.code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    ):
        return OffloadRefused("switch_unreachable", str(exc))
    if exc.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return OffloadRefused("table_full", str(exc))
    return OffloadRefused("refused", str(exc))


async def _refusing(op: Awaitable[T]) -> T:
    try:
        return await op
    except SwitchError as exc:
        raise _refused(exc) from exc


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
        port_bound: bool = True,
    ) -> None:
        self.client = SwitchClient(
            address,
            client_id=client_id,
            timeout_s=timeout_s,
            connect_timeout_s=timeout_s,
            subscription=Subscription(learn=True, idle_timeout=True),
        )
        self.pipeline = Pipeline(self.client)
        self.relay_addrs = relay_addrs or []
        self.port_min, self.port_max = port_min, port_max
        self.idle_query_ms = idle_query_ms
        # Port binding of every switch port, set at each (re)connect.
        self.port_bound = port_bound
        self._events: asyncio.Queue[SwitchEvent] = asyncio.Queue(65536)
        self._task: asyncio.Task[None] | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self.lost_at: float | None = None
        self._watch_task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self.client.connected

    @property
    def relays_ipv6(self) -> bool:
        """The program has the IPv6 relay (an older one relays IPv4 only)."""
        try:
            return self.pipeline.has_v6
        except SwitchError:  # not connected yet: no program to ask
            return False

    async def _watch(self) -> None:
        """When the connection is lost (a restart's counters are carried on to
        then, installed.py): the client notices a broken stream at once."""
        was = self.client.connected
        while True:
            await asyncio.sleep(LOST_POLL_S)
            now = self.client.connected
            if was and not now:
                self.lost_at = time.time()
            was = now

    async def start(self) -> None:
        """Connect now if the switch answers; otherwise keep trying in the background."""
        self._watch_task = asyncio.create_task(self._watch())
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
        await self.pipeline.setup(
            ttl_query_interval_ms=self.idle_query_ms, min_ttl_ms=self.idle_query_ms
        )
        await self.set_relay_addrs(self.relay_addrs, self.port_min, self.port_max)
        ports = await self.client.ports()
        await self.pipeline.set_port_binding(ports, bound=self.port_bound)
        log.info("port_binding_set", bound=self.port_bound, ports=len(ports))

    async def close(self) -> None:
        for t in (self._task, self._connect_task, self._watch_task):
            if t is not None:
                t.cancel()
        await self.client.close()

    async def set_relay_addrs(self, addrs: list[str], port_min: int, port_max: int) -> None:
        self.relay_addrs, self.port_min, self.port_max = addrs, port_min, port_max
        if not addrs or not self.client.connected:
            return
        if not self.relays_ipv6:
            addrs = [a for a in addrs if ":" not in a]
        await self.pipeline.set_relay_addrs(addrs, port_min, port_max)

    # ------------------------------------------------------------------ entries
    async def write(self, batch: EntryBatch, idle_ttl_ms: int) -> None:
        if not batch:
            return
        if not self.client.connected:
            raise OffloadRefused("switch_unreachable", "not connected")
        await _refusing(self.pipeline.write(batch, idle_ttl_ms))

    async def read_leg_counters(self, legs: list[int]) -> dict[int, Counters]:
        """A leg's rewrite is in leg_rewrite or (an IPv6 call's) leg_rewrite6:
        the legs the first read leaves out are looked for in the second."""
        got = await _refusing(self.pipeline.read_leg_counters(legs))
        rest = [leg for leg in legs if leg not in got]
        if rest and self.relays_ipv6:
            got.update(await _refusing(self.pipeline.read_leg_counters(rest, v6=True)))
        return got

    async def read_guard_drops(self, legs: list[int]) -> dict[int, int]:
        return await _refusing(self.pipeline.read_guard_drops(legs))

    async def read_quality(self, legs: list[int]) -> dict[int, LegQuality]:
        return await _refusing(self.pipeline.read_quality(legs))

    async def dump(self) -> EntryDump:
        return await _refusing(self.pipeline.dump())

    async def read_ttl_left(self) -> dict[FlowKey, int]:
        out: dict[FlowKey, int] = {}
        for r in await _refusing(self.client.read(names.RELAY)):
            k = r.key
            key = FlowKey(
                str(ipaddress.IPv4Address(k[names.K_SRC_ADDR])),
                str(ipaddress.IPv4Address(k[names.K_DST_ADDR])),
                int(str(k[names.K_SRC_PORT])),
                int(str(k[names.K_DST_PORT])),
                int(str(k[names.K_BOUND_PORT])),
            )
            ttl = r.data.get(names.TTL)
            if isinstance(ttl, int):
                out[key] = ttl
        if not self.relays_ipv6:
            return out
        # relay6 keys name the relay address by its relay_id (the pipeline's map).
        relays = self.pipeline.relay6_addrs
        for r in await _refusing(self.client.read(names.RELAY6)):
            k = r.key
            relay = relays.get(int(str(k[names.K_RELAY_ID])))
            ttl = r.data.get(names.TTL)
            if relay is None or not isinstance(ttl, int):
                continue
            key = FlowKey(
                str(ipaddress.IPv6Address(int(str(k[names.K6_SRC_ADDR])))),
                relay,
                int(str(k[names.K_SRC_PORT])),
                int(str(k[names.K_DST_PORT])),
                int(str(k[names.K_BOUND_PORT])),
            )
            out[key] = ttl
        return out

    async def read_routes(self) -> Routes:
        return await _refusing(self.pipeline.read_routes())

    # ------------------------------------------------------------------ events
    def _put(self, ev: SwitchEvent) -> None:
        try:
            self._events.put_nowait(ev)
        except asyncio.QueueFull:
            log.error("switch_event_dropped", kind=type(ev).__name__)

    async def _pump(self) -> None:
        """The client's notifications turned into the agent's events, a slice
        per event-loop turn (an idle sweep brings thousands at once)."""
        count = 0
        async for n in self.client.notifications():
            count += 1
            if count % NOTIFICATIONS_PER_TURN == 0:
                await asyncio.sleep(0)
            if isinstance(n, Digest):
                for ev in Pipeline.learn_events(n):
                    self._put(ev)
            elif isinstance(n, IdleTimeout):
                idle = Pipeline.relay_idle(n, active=True, relay6_addrs=self.pipeline.relay6_addrs)
                if idle is not None:
                    self._put(idle)
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
