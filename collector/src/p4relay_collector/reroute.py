"""The local control plane of congestion reroute, one per switch
(`p4relay-reroute`).

The data plane moves a watched flow to its backup next hop by itself (or
notifies the upstream switch); this daemon, on the switch's BfRt session:

- installs the flow classes (t_q, m, hold time) and the watched destinations
  from its config, again after a switch restart;
- hears every `pipe.IngressDeparser.reroute` digest and records it (flow, from
  path, to path, trigger values, time) as a `reroute` event at the server;
- moves a flow back once its primary port has stayed clear for the class's
  hold time: the port's `reroute_port_hot` stamp (the switch's time of the
  last departure over t_q there, by any packet with a class) must stay
  unchanged that long, read every `poll_ms`. A flow that congests its primary
  again moves again only after m more hot packets: no flapping faster than
  the hold time.

Why a switch-side daemon and not rtpagent: every switch on a path needs one
(a switch without the relay, or one an upstream notice moves a flow on, has no
rtpagent), and a watch names any destination, not only an offloaded call. It
lives with the collector because that package already speaks BfRt to a
switch and the server's ingest (`Collector.submit`: backlog, retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import time
import tomllib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import structlog
from p4relay_switch import Digest, Reconnected, Subscription, SwitchClient, SwitchError
from p4relay_switch.reroute import (
    MOVED,
    Reroute,
    RerouteClass,
    RerouteEvent,
    RerouteWatch,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from p4relay_collector.config import ConfigError
from p4relay_collector.wire import Event, IngestBatch

log = structlog.get_logger("p4relay.reroute")


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClassConfig(_Cfg):
    flow_class: Annotated[int, Field(ge=0, le=255)]
    t_q_us: Annotated[float, Field(ge=0, le=4_294_967)] = Field(
        description="queueing delay threshold, us"
    )
    m: Annotated[int, Field(ge=0, le=65535)] = Field(description="consecutive packets over t_q")
    hold_ms: Annotated[int, Field(ge=0, le=2**32 - 1)] = Field(
        description="the primary stays clear this long before a flow moves back"
    )


class WatchConfig(_Cfg):
    prefix: ipaddress.IPv4Network
    slot: Annotated[int, Field(ge=0, le=4095)]
    flow_class: Annotated[int, Field(ge=0, le=255)]
    primary_port: Annotated[int, Field(ge=0, le=511)] = Field(
        description="dev_port of the primary next hop (upstream notices only from there)"
    )
    backup_nexthop_id: Annotated[int, Field(ge=0, le=65535)] | None = Field(
        default=None, description="next hop to move to; none: notify the upstream switch"
    )
    backup_port: Annotated[int, Field(ge=0, le=511)] | None = Field(
        default=None, description="dev_port of the backup next hop (for the record)"
    )


class RerouteConfig(_Cfg):
    """The `[reroute]` table of the daemon's TOML file."""

    switch: str = Field(description="the switch's name at the server")
    grpc_address: str = Field(description="its BfRt gRPC host:port")
    client_id: Annotated[int, Field(ge=0, le=65535)] = 11
    poll_ms: Annotated[int, Field(ge=10, le=10_000)] = 100
    classes: list[ClassConfig] = Field(default_factory=list)
    watch: list[WatchConfig] = Field(default_factory=list)

    def watches(self) -> list[RerouteWatch]:
        return [
            RerouteWatch(w.prefix, w.slot, w.flow_class, w.backup_nexthop_id, w.primary_port)
            for w in self.watch
        ]

    def reroute_classes(self) -> list[RerouteClass]:
        return [
            RerouteClass(c.flow_class, round(c.t_q_us * 1000), c.m, c.hold_ms) for c in self.classes
        ]


def load_config(path: Path) -> RerouteConfig:
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from e
    table = doc.get("reroute", doc)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [reroute] must be a table")
    try:
        cfg = RerouteConfig.model_validate(table)
    except ValidationError as e:
        raise ConfigError(f"{path}: {e}") from e
    slots = [w.slot for w in cfg.watch]
    if len(set(slots)) != len(slots):
        raise ConfigError(f"{path}: two watches share a slot")
    classes = {c.flow_class for c in cfg.classes}
    for w in cfg.watch:
        if w.flow_class not in classes:
            raise ConfigError(
                f"{path}: watch {w.prefix} names flow class {w.flow_class}, not defined"
            )
    return cfg


@dataclass
class Episode:
    """A flow on its backup, and what the return waits for."""

    watch: WatchConfig
    event: RerouteEvent
    since: float
    hot_seen: int | None = None  # last port_hot stamp read on the primary
    clear_since: float = field(default_factory=time.monotonic)


def _path(port: int | None, nexthop: int | None = None) -> str:
    if port is None and nexthop is None:
        return "upstream"
    parts = []
    if nexthop is not None:
        parts.append(f"nexthop {nexthop}")
    if port is not None:
        parts.append(f"port {port}")
    return " ".join(parts)


class RerouteAgent:
    """One switch's reroute control plane. `submit` takes an IngestBatch to
    the server (the collector's backlog and retries)."""

    def __init__(
        self,
        cfg: RerouteConfig,
        submit: Callable[[IngestBatch], Awaitable[None]],
        client: SwitchClient | None = None,
    ) -> None:
        self.cfg = cfg
        self.submit = submit
        self.client = client or SwitchClient(
            cfg.grpc_address,
            client_id=cfg.client_id,
            subscription=Subscription(learn=True, idle_timeout=False, port_status=False),
        )
        self.rr = Reroute(self.client)
        self.by_slot = {w.slot: w for w in cfg.watch}
        self.hold_ms = {c.flow_class: c.hold_ms for c in cfg.classes}
        self.t_q_ns = {c.flow_class: round(c.t_q_us * 1000) for c in cfg.classes}
        self.episodes: dict[int, Episode] = {}
        self.moves = 0
        self.returns = 0

    async def install(self) -> None:
        await self.rr.set_classes(self.cfg.reroute_classes())
        if self.cfg.watch:
            await self.rr.watch(self.cfg.watches())
        # a restart of this daemon finds flows the switch already moved
        if self.by_slot:
            active = await self.rr.active(sorted(self.by_slot))
            for slot, on_backup in active.items():
                if on_backup and slot not in self.episodes:
                    w = self.by_slot[slot]
                    ev = RerouteEvent(w.prefix[0], slot, MOVED, 0, 0, 0, w.flow_class)
                    self.episodes[slot] = Episode(w, ev, time.monotonic())
        log.info(
            "reroute installed",
            switch=self.cfg.switch,
            classes=len(self.cfg.classes),
            watches=len(self.cfg.watch),
            on_backup=sorted(self.episodes),
        )

    def _event(self, payload: dict[str, str | int | float | bool | None], msg: str) -> Event:
        return Event(
            event_id=str(uuid.uuid4()),
            type="reroute",
            ts=dt.datetime.now(dt.UTC),
            severity="warning",
            switch=self.cfg.switch,
            message=msg,
            payload=payload,
        )

    async def on_digest(self, d: Digest) -> None:
        for ev in Reroute.events(d):
            w = self.by_slot.get(ev.slot)
            if w is None:
                log.warning("reroute digest for an unknown slot", slot=ev.slot, dst=str(ev.dst))
                continue
            t_q = self.t_q_ns.get(ev.flow_class)
            trigger = (
                f"queue delay {ev.queue_delay_ns / 1e6:.3f} ms > t_q "
                f"{(t_q or 0) / 1e6:.3f} ms for {ev.run} packets"
            )
            if ev.moved:
                self.moves += 1
                self.episodes[ev.slot] = Episode(w, ev, time.monotonic())
                to = _path(w.backup_port, w.backup_nexthop_id)
            else:
                to = "upstream"
            payload: dict[str, str | int | float | bool | None] = {
                "flow": str(w.prefix),
                "from_path": _path(w.primary_port),
                "to_path": to,
                "trigger": trigger,
                "slot": ev.slot,
                "queue_delay_ns": ev.queue_delay_ns,
                "run": ev.run,
                "flow_class": ev.flow_class,
                "ingress_port": ev.port,
                "direction": "to_backup" if ev.moved else "notify_upstream",
            }
            log.info("reroute", **payload)
            await self.submit(
                IngestBatch(
                    idempotency_key=str(uuid.uuid4()),
                    events=[self._event(payload, f"{w.prefix} moved off port {w.primary_port}")],
                )
            )

    async def check_returns(self) -> None:
        """Moves back every flow whose primary stayed clear for its hold time."""
        if not self.episodes:
            return
        ports = sorted({e.watch.primary_port for e in self.episodes.values()})
        hot = await self.rr.port_hot(ports)
        now = time.monotonic()
        back: list[int] = []
        for slot, ep in self.episodes.items():
            stamp = hot.get(ep.watch.primary_port, 0)
            if stamp != ep.hot_seen:
                ep.hot_seen = stamp
                ep.clear_since = now
            hold_s = self.hold_ms.get(ep.watch.flow_class, 0) / 1000
            if now - ep.clear_since >= hold_s:
                back.append(slot)
        if not back:
            return
        await self.rr.move_back(back)
        events = []
        for slot in back:
            ep = self.episodes.pop(slot)
            self.returns += 1
            w = ep.watch
            held = round((now - ep.clear_since) * 1000)
            payload: dict[str, str | int | float | bool | None] = {
                "flow": str(w.prefix),
                "from_path": _path(w.backup_port, w.backup_nexthop_id),
                "to_path": _path(w.primary_port),
                "trigger": f"primary clear for {held} ms (hold {self.hold_ms.get(w.flow_class, 0)} ms)",
                "slot": slot,
                "direction": "to_primary",
                "on_backup_ms": round((now - ep.since) * 1000),
            }
            log.info("reroute back", **payload)
            events.append(self._event(payload, f"{w.prefix} back on port {w.primary_port}"))
        await self.submit(IngestBatch(idempotency_key=str(uuid.uuid4()), events=events))

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop`: connect (retrying), install, listen, return flows."""
        pump: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                try:
                    if not self.client.connected:
                        await self.client.connect()
                        await self.install()
                        if pump is None:
                            pump = asyncio.create_task(self._pump(), name="reroute-digests")
                    await self.check_returns()
                except SwitchError as e:
                    log.warning("switch unavailable; retrying", error=str(e))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.cfg.poll_ms / 1000)
        finally:
            if pump is not None:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
            await self.client.close()

    async def _pump(self) -> None:
        async for n in self.client.notifications():
            try:
                if isinstance(n, Digest):
                    await self.on_digest(n)
                elif isinstance(n, Reconnected):
                    await self.install()
            except SwitchError as e:
                log.warning("switch error while handling a notification", error=str(e))
