"""Congestion reroute decisions of one switch.

The data plane moves a watched flow to its backup next hop by itself (or
notifies the upstream switch); the daemon installs the classes and watches
(desired.py) and here:

- hears every `pipe.IngressDeparser.reroute` digest and records it (flow, from
  path, to path, trigger values) as a `reroute` event for the server;
- moves a flow back once its primary port has stayed clear for the class's
  hold time: the port's `reroute_port_hot` stamp (the switch's time of the
  last departure over t_q there, by any packet with a class) must stay
  unchanged that long, read every `poll_ms`. A flow that congests its primary
  again moves again only after m more hot packets: no flapping faster than
  the hold time;
- a flow the sink's INT notice moved (`from_int`: the congested hop is
  further down the primary path) waits the hold from its move: this
  switch's own port says nothing of that hop, and nothing reports the hop
  once the flows left it (a notice for a slot already on its backup raises
  no digest), so the return is a probe. A probe that fails (the flow moved
  again within one hold of its return) doubles the next hold, up to
  2^BACKOFF_MAX times, as the INT loop's moves do: a lasting congestion
  costs one queue's worth of delay per doubling, not per hold;
- moves a flow to its backup on the control-plane INT loop's word
  (int_loop.py: a hop further down the primary path congested, which the
  switch's own queue does not show); such a flow moves back once that hop
  stayed clear (by the sinks' reports) for the hold time;
- at connect, takes over flows the switch already has on their backup (a
  restart of the daemon), and puts back on their primary the slots no watch
  names any more (a watch removed while a flow was away: a later watch given
  that slot must not start on a backup).

Why in the switch's control plane and not rtpagent: every switch on a path
needs it (a switch without the relay, or one an upstream notice moves a flow
on, has no rtpagent), and a watch names any destination, not only a call.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from p4relay_collector.wire import Event, IngestBatch, PayloadValue
from p4relay_switch import Digest, SwitchClient, SwitchError
from p4relay_switch.names import REROUTE_SLOTS
from p4relay_switch.reroute import MOVED, Reroute, RerouteEvent

from p4relay_controlplane import metrics
from p4relay_controlplane.config import RerouteSection, RerouteWatchConfig

log = structlog.get_logger("p4relay.controlplane.reroute")

Submit = Callable[[IngestBatch], Awaitable[None]]


HopKey = tuple[int, int]  # (INT switch id, egress port)
BACKOFF_MAX = 3  # a blind return's hold grows to at most 8x the configured one
# the INT loop's answer: monotonic time since which the hop is clear (None: not clear)
HopClearSince = Callable[[HopKey], float | None]


@dataclass
class Episode:
    """A flow on its backup, and what the return waits for."""

    watch: RerouteWatchConfig
    event: RerouteEvent
    since: float
    hot_seen: int | None = None  # last port_hot stamp read on the primary
    clear_since: float = field(default_factory=time.monotonic)
    hop: HopKey | None = None  # moved by the INT loop: the congested hop it waits on
    hold_ms: int = 0  # blind returns: the hold, doubled after each return that failed
    downstream: bool = False  # moved by the sink's INT notice: the return is blind
    named_hop: HopKey | None = None  # the congested hop that notice named

    @property
    def blind(self) -> bool:
        """The return waits for time alone (with backoff), not for this
        switch's own port."""
        return self.hop is not None or self.downstream


class Backoff:
    """Holds of blind returns: a flow moved again within one hold of its
    return waits twice as long the next time (up to 2^BACKOFF_MAX), else the
    configured hold. Keyed by what the return probes: the INT loop's hop, or
    the slot a downstream notice moved."""

    def __init__(self) -> None:
        self._returned: dict[object, float] = {}
        self._k: dict[object, int] = {}

    def hold_ms(self, key: object, base_ms: int, now: float) -> int:
        back_at = self._returned.get(key)
        k = self._k.get(key, 0)
        if back_at is not None and now - back_at < (base_ms << k) / 1000:
            k = min(k + 1, BACKOFF_MAX)
        else:
            k = 0
        self._k[key] = k
        return base_ms << k

    def returned(self, key: object, now: float) -> None:
        self._returned[key] = now


def _path(port: int | None, nexthop: int | None = None) -> str:
    if port is None and nexthop is None:
        return "upstream"
    parts = []
    if nexthop is not None:
        parts.append(f"nexthop {nexthop}")
    if port is not None:
        parts.append(f"port {port}")
    return " ".join(parts)


def _detected_by(ep: Episode) -> str:
    if ep.hop is not None:
        return "int_control_plane"
    return "int_data_plane" if ep.downstream else "local"


class RerouteControl:
    """Episodes of one switch's watched flows. `submit` takes events to the
    server (None: they are logged only)."""

    def __init__(
        self, cfg: RerouteSection, switch: str, client: SwitchClient, submit: Submit | None
    ) -> None:
        self.switch = switch
        self.rr = Reroute(client)
        self.submit = submit
        self.episodes: dict[int, Episode] = {}
        self._sending = asyncio.Lock()
        self.hop_clear_since: HopClearSince | None = None  # set by the INT loop
        self.int_hold_ms = 0  # the INT loop's hold time
        # INT moves back blind (nothing crosses the hop once its flows left):
        # a hop that congests again within a hold of a return doubles the next
        # hold, so a lasting congestion is probed ever less often
        self.backoff = Backoff()
        self.moves = 0
        self.returns = 0
        self.configure(cfg)

    def configure(self, cfg: RerouteSection) -> None:
        """A (re)loaded section: episodes of slots no longer watched are forgotten."""
        self.cfg = cfg
        self.by_slot = {w.slot: w for w in cfg.watch}
        self.hold_ms = {c.flow_class: c.hold_ms for c in cfg.classes}
        self.t_q_ns = {c.flow_class: c.t_q_ns for c in cfg.classes}
        for slot in [s for s, ep in self.episodes.items() if self.by_slot.get(s) != ep.watch]:
            del self.episodes[slot]
        metrics.ON_BACKUP.set(len(self.episodes))

    async def at_connect(self) -> None:
        """Flows the switch already has on their backup become episodes; slots
        no watch names are moved back."""
        active = await self.rr.active(range(REROUTE_SLOTS))
        stale = sorted(s for s, on in active.items() if on and s not in self.by_slot)
        if stale:
            await self.rr.move_back(stale)
            log.info("reroute_unwatched_slots_reset", slots=stale)
        for slot, on_backup in active.items():
            if on_backup and slot in self.by_slot and slot not in self.episodes:
                w = self.by_slot[slot]
                ev = RerouteEvent(w.prefix[0], slot, MOVED, 0, 0, 0, w.flow_class)
                self.episodes[slot] = Episode(w, ev, time.monotonic())
        metrics.ON_BACKUP.set(len(self.episodes))
        if self.episodes:
            log.info("reroute_on_backup_at_connect", slots=sorted(self.episodes))

    def _hop_fields(self, hop: HopKey) -> dict[str, PayloadValue]:
        """The congested hop a sink's notice named, as the INT loop's events
        name theirs (the console reads `hop_switch` and `hop_port`)."""
        return {
            "hop_switch": self.cfg.name(hop[0]),
            "hop_switch_id": hop[0],
            "hop_port": hop[1],
        }

    def _event(self, payload: dict[str, PayloadValue], msg: str) -> Event:
        return Event(
            event_id=str(uuid.uuid4()),
            type="reroute",
            ts=dt.datetime.now(dt.UTC),
            severity="warning",
            switch=self.switch,
            message=msg,
            payload=payload,
        )

    async def _send(self, events: list[Event]) -> None:
        if self.submit is not None and events:
            # one batch at a time: digests, returns and the INT loop's moves run
            # in different tasks, and the ingest client sends its backlog in order
            async with self._sending:
                await self.submit(IngestBatch(idempotency_key=str(uuid.uuid4()), events=events))

    async def on_digest(self, d: Digest) -> None:
        events = []
        for ev in Reroute.events(d):
            w = self.by_slot.get(ev.slot)
            if w is None:
                log.warning("reroute_digest_unknown_slot", slot=ev.slot, dst=str(ev.dst))
                continue
            t_q = self.t_q_ns.get(ev.flow_class)
            trigger = (
                f"queue delay {ev.queue_delay_ns / 1e6:.3f} ms > t_q "
                f"{(t_q or 0) / 1e6:.3f} ms for {ev.run} packets"
            )
            hop_fields: dict[str, PayloadValue] = {}
            if ev.from_int:
                trigger = f"a hop over its INT onset for {ev.run} packets at the sink"
                if ev.hop is not None:
                    hop_fields = self._hop_fields(ev.hop)
                    trigger = (
                        f"INT: {hop_fields['hop_switch']} port {ev.hop[1]} over onset "
                        f"for {ev.run} packets at the sink"
                    )
            if ev.moved:
                self.moves += 1
                now = time.monotonic()
                ep = Episode(w, ev, now, downstream=ev.from_int, named_hop=ev.hop)
                if ep.downstream:
                    hold = self.hold_ms.get(ev.flow_class, 0)
                    ep.hold_ms = self.backoff.hold_ms(("slot", ev.slot), hold, now)
                self.episodes[ev.slot] = ep
                to = _path(w.backup_port, w.backup_nexthop_id)
            else:
                to = "upstream"
            direction = "to_backup" if ev.moved else "notify_upstream"
            metrics.REROUTES.labels(direction).inc()
            payload: dict[str, PayloadValue] = {
                "flow": str(w.prefix),
                "from_path": _path(w.primary_port),
                "to_path": to,
                "trigger": trigger,
                "slot": ev.slot,
                "queue_delay_ns": ev.queue_delay_ns,
                "run": ev.run,
                "flow_class": ev.flow_class,
                "ingress_port": ev.port,
                "direction": direction,
                "detected_by": "int_data_plane" if ev.from_int else "local",
                **hop_fields,
            }
            if ev.moved and ev.from_int:
                payload["hold_ms"] = self.episodes[ev.slot].hold_ms
            log.info("reroute", **payload)
            events.append(self._event(payload, f"{w.prefix} moved off port {w.primary_port}"))
        metrics.ON_BACKUP.set(len(self.episodes))
        await self._send(events)

    async def move_by_int(
        self, slot: int, hop: HopKey, trigger: str, extra: dict[str, PayloadValue]
    ) -> bool:
        """The INT loop found `hop` on the primary path of `slot`'s destination
        congested: the flow takes its backup (one register write, as a notice
        does in the data plane). False when the slot is already on its backup."""
        w = self.by_slot.get(slot)
        if w is None or w.backup_nexthop_id is None or slot in self.episodes:
            return False
        ev = RerouteEvent(w.prefix[0], slot, MOVED, 0, 0, 0, w.flow_class)
        now = time.monotonic()
        hold_ms = self.backoff.hold_ms(hop, self.int_hold_ms, now)
        # the episode first: reports arriving during the write find the slot taken
        self.episodes[slot] = Episode(w, ev, now, hop=hop, hold_ms=hold_ms)
        try:
            await self.rr.move_to_backup([slot])
        except SwitchError:
            del self.episodes[slot]
            raise
        extra = {**extra, "hold_ms": hold_ms}
        self.moves += 1
        metrics.REROUTES.labels("to_backup").inc()
        metrics.ON_BACKUP.set(len(self.episodes))
        payload: dict[str, PayloadValue] = {
            "flow": str(w.prefix),
            "from_path": _path(w.primary_port),
            "to_path": _path(w.backup_port, w.backup_nexthop_id),
            "trigger": trigger,
            "slot": slot,
            "flow_class": w.flow_class,
            "direction": "to_backup",
            "detected_by": "int_control_plane",
            **extra,
        }
        log.info("reroute", **payload)
        await self._send([self._event(payload, f"{w.prefix} moved off port {w.primary_port}")])
        return True

    async def check_returns(self) -> None:
        """Moves back every flow whose primary stayed clear for its hold time."""
        if not self.episodes:
            return
        ports = sorted({e.watch.primary_port for e in self.episodes.values() if not e.blind})
        hot = await self.rr.port_hot(ports) if ports else {}
        now = time.monotonic()
        back: list[int] = []
        for slot, ep in self.episodes.items():
            if ep.hop is not None:
                since = self.hop_clear_since(ep.hop) if self.hop_clear_since else ep.since
                ep.clear_since = now if since is None else max(since, ep.since)
            elif ep.downstream:
                ep.clear_since = ep.since
            else:
                stamp = hot.get(ep.watch.primary_port, 0)
                if stamp != ep.hot_seen:
                    ep.hot_seen = stamp
                    ep.clear_since = now
            hold_ms = ep.hold_ms if ep.blind else self.hold_ms.get(ep.watch.flow_class, 0)
            hold_s = hold_ms / 1000
            if now - ep.clear_since >= hold_s:
                back.append(slot)
        if not back:
            return
        await self.rr.move_back(back)
        events = []
        for slot in back:
            ep = self.episodes.pop(slot)
            self.returns += 1
            metrics.REROUTES.labels("to_primary").inc()
            w = ep.watch
            held = round((now - ep.clear_since) * 1000)
            hold = ep.hold_ms if ep.blind else self.hold_ms.get(w.flow_class, 0)
            trigger = f"primary clear for {held} ms (hold {hold} ms)"
            if ep.hop is not None:
                self.backoff.returned(ep.hop, now)
                trigger = f"hop {ep.hop[0]} port {ep.hop[1]} clear for {held} ms (hold {hold} ms)"
            elif ep.downstream:
                self.backoff.returned(("slot", slot), now)
                trigger = (
                    f"hold {hold} ms over (a probe: the hop down the path is unseen while away)"
                )
            hop_fields: dict[str, PayloadValue] = {}
            if ep.hop is None and ep.named_hop is not None:
                hop_fields = self._hop_fields(ep.named_hop)
            payload: dict[str, PayloadValue] = {
                "flow": str(w.prefix),
                "from_path": _path(w.backup_port, w.backup_nexthop_id),
                "to_path": _path(w.primary_port),
                "trigger": trigger,
                "slot": slot,
                "direction": "to_primary",
                "detected_by": _detected_by(ep),
                "on_backup_ms": round((now - ep.since) * 1000),
                **hop_fields,
            }
            log.info("reroute_back", **payload)
            events.append(self._event(payload, f"{w.prefix} back on port {w.primary_port}"))
        metrics.ON_BACKUP.set(len(self.episodes))
        await self._send(events)
