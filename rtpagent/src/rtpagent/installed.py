"""What the agent has put on the switch, and the writes that take it away.

One record, shared by the install writer (`writer.py`), the reaper
(`reaper.py`) and reconciliation: each session's installed plan, which
session a flow key belongs to, guard ownership (`guards.py`) and the leg
numbers. Every switch write goes through `write_lock`, its batch built under
it: a guard handed over between two calls must reach the switch in the order
it was decided.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog
from p4relay_switch import Counters, FlowKey, GuardEntry, GuardKey, LegAllocator, LegQuality
from p4relay_switch import EntryBatch as Batch

from . import metrics
from .guards import GuardRegistry
from .planner import Plan, add_counts, reconciliation
from .state import Session, SessionTable
from .switchport import OffloadRefused, Switch

log = structlog.get_logger("rtpagent.installed")


@dataclass(frozen=True, slots=True)
class LegRead:
    """A leg's counters as last read, when, and the rate they grew at since
    the read before."""

    counters: Counters
    at: float
    pps: float = 0.0
    bps: float = 0.0

    def then(self, now: float, c: Counters) -> LegRead:
        dt = now - self.at
        if dt <= 0 or c.packets < self.counters.packets:
            return LegRead(c, now)
        return LegRead(
            c, now, (c.packets - self.counters.packets) / dt, (c.bytes - self.counters.bytes) / dt
        )

    def until(self, t: float | None) -> Counters:
        """The counters at `t` (when the switch was lost) at the leg's rate: it
        forwarded until then, and nobody could read it after this read."""
        if t is None or t <= self.at:
            return self.counters
        dt = t - self.at
        return Counters(
            self.counters.packets + round(self.pps * dt), self.counters.bytes + round(self.bps * dt)
        )


@dataclass(frozen=True, slots=True)
class LiveReading:
    sessions: list[tuple[Session, Plan]]
    counts: dict[int, Counters]  # by leg: its direction's packets and bytes, RTP and RTCP
    quality: dict[int, LegQuality]


def _keys(guards: tuple[GuardEntry, ...]) -> list[GuardKey]:
    return [g.key for g in guards]


class Installed:
    def __init__(self, switch: Switch, legs: int, idle_ttl_ms: int) -> None:
        self.switch = switch
        # Leg 0 stays unused: a zeroed register is "nothing".
        self.legs = LegAllocator(legs - 1, first=1)
        self.idle_ttl_ms = idle_ttl_ms
        self.plans: dict[str, Plan] = {}  # uid -> what is installed
        # flow key -> (session uid, stream index, rtcp)
        self.by_key: dict[FlowKey, tuple[str, int, bool]] = {}
        self.guards = GuardRegistry()
        # leg -> guard_drops[leg] as last read (a leg's cell is zeroed with
        # its registers when the leg is freed or reused).
        self._drops_seen: dict[int, int] = {}
        # leg -> its counters as last read. A switch that restarted lost them:
        # they go into the session's totals when its entries are written again
        # or it leaves the switch, carried on at the leg's rate to when the
        # switch was lost (the sampler reads every --sample-interval).
        self.seen: dict[int, LegRead] = {}
        self.write_lock = asyncio.Lock()
        # Called when a guard was taken over: its delete waits for a write.
        self.on_guard_taken: Callable[[], None] = lambda: None

    # ---------------------------------------------------------------- bookkeeping
    def take_guard(self, g: GuardKey, uid: str) -> bool:
        """`uid` now uses this relay port: an ended call's guard on it goes
        (at the next write, before anything of the new call). True if taken."""
        owner = self.guards.take_over(g, uid)
        if owner is None:
            return False
        old = self.plans.get(owner)
        if old is not None:
            self.plans[owner] = dataclasses.replace(
                old, guards=tuple(x for x in old.guards if x.key != g)
            )
        self.on_guard_taken()
        log.info("guard_port_reused", port=g.dst_port, previous=owner, now=uid)
        return True

    def record(self, s: Session, p: Plan) -> Plan | None:
        """`p` is on the switch for `s` now; returns the plan it replaced."""
        old = self.plans.get(s.uid)
        self.plans[s.uid] = p
        self.guards.install(s.uid, _keys(p.guards))
        for r in p.relays:
            self.by_key[r.key] = (s.uid, 0 if r.leg == p.legs[0].leg else 1, r.rtcp)
        if old is not None:
            self.guards.release(s.uid, [g.key for g in old.guards if g not in p.guards])
            for k in set(old.flow_keys()) - set(p.flow_keys()):
                self.by_key.pop(k, None)
        return old

    def restore(self, s: Session, p: Plan) -> None:
        """A journalled session's entries, as installed before a restart."""
        for lg in p.legs:
            self.legs.claim(lg.leg)
        self.record(s, p)

    def forget(self, s: Session, p: Plan) -> None:
        self.plans.pop(s.uid, None)
        for k in p.flow_keys():
            # The same flow may be a newer call's by now (its port reused).
            if self.by_key.get(k, ("",))[0] == s.uid:
                del self.by_key[k]
        self.guards.release(s.uid, _keys(p.guards))
        self.release_legs(s)

    def release_legs(self, s: Session) -> None:
        if s.legs:
            for leg in s.legs:
                self.legs.release(leg)
                self._drops_seen.pop(leg, None)
                self.seen.pop(leg, None)
            s.legs = None

    def of(self, sessions: list[Session]) -> list[tuple[Session, Plan]]:
        """These sessions with their installed plans (those that have one)."""
        return [(s, self.plans[s.uid]) for s in sessions if s.uid in self.plans]

    def current(self, plans: list[tuple[Session, Plan]]) -> list[tuple[Session, Plan]]:
        """The same sessions' plans as they are now (a guard may have been taken over)."""
        return [(s, self.plans.get(s.uid, p)) for s, p in plans]

    def offloaded(self, table: SessionTable) -> list[tuple[Session, Plan]]:
        """Every session on the switch, with the entries it has there."""
        by_uid = table.by_uid
        out: list[tuple[Session, Plan]] = []
        for uid, p in list(self.plans.items()):
            s = by_uid.get(uid)
            if s is not None:
                out.append((s, p))
        return out

    # ---------------------------------------------------------------- removals
    @staticmethod
    def removal(plans: list[tuple[Session, Plan]]) -> Batch:
        """The sessions' entries taken away, their legs' registers zeroed
        (a leg freed clean needs no reset when it is used again)."""
        return Batch.joined(p.removal(reset=True) for _, p in plans)

    async def write_removal(self, make: Callable[[], Batch]) -> None:
        """Build the batch under the write lock, write it. A switch that is
        away keeps the entries: the reconciliation at its reconnect sweeps
        them (it compares the switch's dump with the plans)."""
        async with self.write_lock:
            batch = make()
            if not batch:
                return
            try:
                await self.switch.write(batch, self.idle_ttl_ms)
            except OffloadRefused as exc:
                log.warning("removal_failed", reason=exc.reason, detail=exc.detail)
                return
        self.legs.clean.update(batch.reset_legs)

    async def remove_best_effort(self, s: Session, p: Plan | None) -> None:
        if p is None:
            return
        guards = self.guards.owned_by(s.uid, _keys(p.guards))
        self.guards.release(s.uid, guards)
        # A guard another call has taken over stays: it is that call's now.
        owned = set(guards)
        mine = dataclasses.replace(p, guards=tuple(g for g in p.guards if g.key in owned))
        await self.write_removal(mine.removal)

    async def reconcile(self, restarted: bool, sessions: Mapping[str, Session]) -> None:
        """After (re)connecting: make the switch hold exactly the planned entries."""
        fix = reconciliation(self.plans.values(), await self.switch.dump())
        self._fold_lost({lg.leg for lg in fix.missing.add_legs}, sessions)
        if fix.stale:
            await self.write_removal(lambda: fix.stale)
            log.info(
                "swept_stale_entries",
                relays=len(fix.stale.del_relays),
                legs=len(fix.stale.del_legs),
                guards=len(fix.stale.del_guards),
            )
        if fix.missing:
            try:
                await self.switch.write(fix.missing, self.idle_ttl_ms)
                log.info(
                    "reinstalled",
                    relays=len(fix.missing.add_relays),
                    legs=len(fix.missing.add_legs) + len(fix.missing.mod_legs),
                    guards=len(fix.missing.add_guards),
                    restarted=restarted,
                )
            except OffloadRefused as exc:
                log.error("reinstall_failed", reason=exc.reason)

    # ---------------------------------------------------------------- counters
    async def harvest(self, plans: list[tuple[Session, Plan]]) -> None:
        """Read final counters into each session's totals before removal; a
        leg the switch no longer has (it restarted, or is away) gives what
        was last read of it."""
        if not plans:
            return
        legs = [lg.leg for _, p in plans for lg in p.legs]
        counts: dict[int, Counters] = {}
        if self.switch.connected:
            try:
                counts = await self.switch.read_leg_counters(legs)
            except OffloadRefused as exc:
                log.warning("final_counters_unread", reason=exc.reason, detail=exc.detail)
        for leg in legs:
            last = self.seen.pop(leg, None)
            if leg not in counts and last is not None:
                counts[leg] = last.until(self.switch.lost_at)
        for s, p in plans:
            add_counts(s, p, counts)
        if self.switch.connected:
            await self.read_foreign_drops(plans)

    def _fold_lost(self, legs: set[int], sessions: Mapping[str, Session]) -> None:
        """These legs' entries are gone from the switch with their counters
        (it restarted): what was last read of them goes into the totals."""
        if not legs:
            return
        folded = 0
        for uid, p in self.plans.items():
            for i, lg in enumerate(p.legs):
                read = self.seen.pop(lg.leg, None) if lg.leg in legs else None
                s = sessions.get(uid)
                if read is not None and s is not None:
                    last = read.until(self.switch.lost_at)
                    s.switch_totals.packets[i] += last.packets
                    s.switch_totals.bytes[i] += last.bytes
                    folded += last.packets
        log.info("counters_carried_over", legs=len(legs), packets=folded)

    async def read_foreign_drops(self, plans: list[tuple[Session, Plan]]) -> None:
        """Add what the guards dropped (guard_drops, per leg) to each session's
        total and the metric. Only sessions a foreign source was seen on: every
        guard hit raises a learn digest, so the others have nothing to read."""
        attacked = [(s, p) for s, p in plans if s.foreign_sources and p.guards]
        if not attacked or not self.switch.connected:
            return
        legs = sorted({g.leg for _, p in attacked for g in p.guards})
        try:
            counts = await self.switch.read_guard_drops(legs)
        except OffloadRefused as exc:
            log.info("guard_drops_unread", reason=exc.reason)
            return
        for s, p in attacked:
            for leg in sorted({g.leg for g in p.guards}):
                packets = counts.get(leg)
                if packets is None:
                    continue
                last = self._drops_seen.get(leg, 0)
                self._drops_seen[leg] = packets
                # lower than last time: the cell was zeroed (the leg reused)
                delta = packets - last if packets >= last else packets
                if delta > 0:
                    s.switch_totals.foreign_dropped += delta
                    metrics.GUARD_DROPPED.inc(delta)

    async def read_live(
        self,
        live: list[tuple[Session, Plan]],
        quality_of: Callable[[int, Counters], bool] | None = None,
    ) -> LiveReading | None:
        """These sessions' RTP counters and quality registers as the switch has
        them now (guard drops added to the sessions' totals); None when there
        are none or the switch is away. `quality_of(leg, counters)`: whether
        the leg's registers are wanted (default: every leg's). Raises
        OffloadRefused."""
        if not live or not self.switch.connected:
            return None
        legs = [lg.leg for _, p in live for lg in p.legs]
        counts = await self.switch.read_leg_counters(legs)
        now = time.time()
        for leg, c in counts.items():
            prev = self.seen.get(leg)
            self.seen[leg] = prev.then(now, c) if prev is not None else LegRead(c, now)
        if quality_of is not None:
            legs = [leg for leg, got in counts.items() if quality_of(leg, got)]
        quality = await self.switch.read_quality(legs) if legs else {}
        await self.read_foreign_drops(live)
        return LiveReading(live, counts, quality)

    async def live_counts(self, s: Session) -> tuple[list[int], list[int]]:
        """Packets/bytes per stream index (from party i), switch totals included."""
        pk = list(s.switch_totals.packets)
        by = list(s.switch_totals.bytes)
        p = self.plans.get(s.uid)
        if p is not None and self.switch.connected:
            try:
                counts = await self.switch.read_leg_counters([lg.leg for lg in p.legs])
            except OffloadRefused:
                counts = {}
            for i, lg in enumerate(p.legs):
                c = counts.get(lg.leg)
                if c is not None:
                    pk[i] += c.packets
                    by[i] += c.bytes
        return pk, by
