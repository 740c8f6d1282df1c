"""Keep the switch's entries equal to what the sessions need.

Sessions are marked dirty by the control path; one worker turns all dirty
sessions into one ordered BfRt write (batched: thousands of calls per second
cost a few RPCs), so the control path never waits on the switch. When the
switch refuses (full, unreachable, error) the session stays on RTPProxy and
the reason is recorded: fail-open.

The policy is the planner's (`planner.py`: which state, which entries,
reconciliation against the switch), guard ownership the registry's
(`guards.py`), the switch's learn and idle notifications the event
handler's (`switch_events.py`); this module writes: the install worker, the
reaper of ended sessions, take-backs, reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog
from p4relay_switch import (
    Counters,
    FlowKey,
    GuardKey,
    LearnEvent,
    LegAllocator,
    LegQuality,
    LegRewrite,
    RelayEntry,
    RelayIdle,
)
from p4relay_switch import EntryBatch as Batch

from . import metrics
from .guards import GuardRegistry
from .learning import Learner, LearnPolicy
from .planner import (
    DEFAULT_NAT_NETS,
    Plan,
    Planner,
    PortBinding,
    add_counts,
    reconciliation,
)
from .state import OffloadState, Session, SessionTable
from .switch_events import SwitchEventHandler
from .switchport import (
    OffloadRefused,
    Switch,
    SwitchDown,
    SwitchUp,
)

log = structlog.get_logger("rtpagent.offload")

REMOVALS_PER_SLICE = 4  # ended sessions' bookkeeping per event-loop turn


@dataclass(frozen=True, slots=True)
class LiveReading:
    sessions: list[tuple[Session, Plan]]
    counts: dict[FlowKey, Counters]
    quality: dict[int, LegQuality]


Listener = Callable[[str, Session, dict[str, object]], None]


class Offloader:
    def __init__(
        self,
        table: SessionTable,
        switch: Switch,
        *,
        legs: int = 32768,
        idle_ttl_ms: int = 5000,
        nat_nets: Iterable[str] = DEFAULT_NAT_NETS,
        latch_always: bool = False,
        enabled: bool = True,
        guard: bool = True,
        learn_policy: LearnPolicy | str = LearnPolicy.STRICT,
        learn_window_ms: int = 2000,
        port_binding: PortBinding | str = PortBinding.ROUTE,
        route_refresh_s: float = 10.0,
    ) -> None:
        self.table = table
        self.switch = switch
        # Leg 0 stays unused: a zeroed register is "nothing".
        self.legs = LegAllocator(legs - 1, first=1)
        self.idle_ttl_ms = idle_ttl_ms
        self.learner = Learner(LearnPolicy(learn_policy), learn_window_ms / 1000.0)
        self.events = SwitchEventHandler(self, self.learner)
        self.planner = Planner(
            nat_nets=nat_nets,
            latch_always=latch_always,
            enabled=enabled,
            guard=guard,
            port_binding=port_binding,
        )
        self.route_refresh_s = route_refresh_s
        self._routes_task: asyncio.Task[None] | None = None
        self.listeners: list[Listener] = []
        # (relay addr, relay port) -> (session uid, stream index); rtcp ports too.
        self.ports: dict[tuple[str, int], tuple[str, int, bool]] = {}
        self.plans: dict[str, Plan] = {}  # uid -> what is installed
        self.by_key: dict[FlowKey, tuple[str, int, bool]] = {}
        self.guards = GuardRegistry()
        # One switch write at a time across the install worker and the reaper,
        # each batch built under it: a guard handed over between two calls
        # must reach the switch in the order it was decided.
        self._write_lock = asyncio.Lock()
        self._port_keys: dict[str, set[tuple[str, int]]] = {}
        self._dirty: dict[str, Session] = {}
        self._ending: dict[str, Session] = {}
        self._wake = asyncio.Event()
        # One writer at a time: the worker and reconcile must not interleave
        # (a reconcile's read-back would be stale against a concurrent write).
        self._install_lock = asyncio.Lock()
        self._remove_lock = asyncio.Lock()
        self._reap_wake = asyncio.Event()
        self._busy: set[str] = set()  # sessions the install worker is writing
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._reaper_task: asyncio.Task[None] | None = None
        self._events_task: asyncio.Task[None] | None = None
        # Removals the switch did not take (unreachable): swept on reconnect.
        self._orphans: list[FlowKey] = []
        self._orphan_legs: list[int] = []

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._task = asyncio.create_task(self._worker(), name="offload-worker")
        self._reaper_task = asyncio.create_task(self._reaper(), name="offload-reaper")
        self._events_task = asyncio.create_task(self._switch_events(), name="switch-events")
        if self.planner.port_binding is PortBinding.ROUTE:
            self._routes_task = asyncio.create_task(self._routes_loop(), name="switch-routes")

    async def stop(self) -> None:
        tasks = (self._task, self._events_task, self._reaper_task, self._routes_task)
        for t in tasks:
            if t is not None:
                t.cancel()
        for t in tasks:
            if t is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def drained(self) -> None:
        """Wait until every change so far has reached the switch."""
        while self._dirty or self._ending or self._active or not self._idle.is_set():
            await asyncio.sleep(0.001)
            await self._idle.wait()

    async def drained_or_timeout(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.drained(), seconds)
        except TimeoutError:
            log.warning(
                "switch_work_pending_at_stop", dirty=len(self._dirty), ending=len(self._ending)
            )

    def emit(self, kind: str, s: Session, **payload: object) -> None:
        for cb in self.listeners:
            try:
                cb(kind, s, payload)
            except Exception:  # a reporting bug must not break the control path
                log.exception("listener_failed", kind=kind)

    # ---------------------------------------------------------------- control path hooks
    def touch(self, s: Session) -> None:
        self._index_ports(s)
        self._dirty[s.uid] = s
        self._idle.clear()
        self._wake.set()

    def end(self, s: Session) -> None:
        self._dirty.pop(s.uid, None)
        self._ending[s.uid] = s
        self._idle.clear()
        self._reap_wake.set()

    def _index_ports(self, s: Session) -> None:
        keys = self._port_keys.setdefault(s.uid, set())
        for i, st in enumerate(s.streams):
            if st.port and st.laddr:
                for k, rtcp in (((st.laddr, st.port), False), ((st.laddr, st.port + 1), True)):
                    self.ports[k] = (s.uid, i, rtcp)
                    keys.add(k)
                    self._take_guard(GuardKey(*k), s.uid)

    def _take_guard(self, g: GuardKey, uid: str) -> bool:
        """`uid` now uses this relay port: an ended call's guard on it goes
        (at the next write, before anything of the new call). True if taken."""
        owner = self.guards.take_over(g, uid)
        if owner is None:
            return False
        old = self.plans.get(owner)
        if old is not None:
            self.plans[owner] = dataclasses.replace(
                old, guards=tuple(x for x in old.guards if x != g)
            )
        self._wake.set()
        log.info("guard_port_reused", port=g.dst_port, previous=owner, now=uid)
        return True

    def _unindex(self, s: Session) -> None:
        for key in self._port_keys.pop(s.uid, ()):
            if self.ports.get(key, ("",))[0] == s.uid:
                del self.ports[key]

    # ---------------------------------------------------------------- planning
    def desired(self, s: Session) -> tuple[OffloadState, str | None]:
        """What state the session should be in, and why."""
        return self.planner.desired(s, self.switch.connected)

    def plan(self, s: Session, legs: list[int]) -> Plan:
        return self.planner.plan(s, legs)

    def restore(self, s: Session) -> None:
        """Take back a journalled session after a restart: its ports, and if it
        was offloaded its legs, plan and guards as installed (the switch is
        reconciled against them at the next connect)."""
        if (
            s.state is OffloadState.OFFLOADED
            and s.legs
            and any(st.ingress_port is None for st in s.streams)
        ):
            # Journalled without its ports: planned afresh once connected.
            s.state, s.legs = OffloadState.PENDING, None
            self._dirty[s.uid] = s
        if s.state is OffloadState.OFFLOADED and s.legs:
            for leg in s.legs:
                self.legs.claim(leg)
            p = self.plan(s, s.legs)
            self.plans[s.uid] = p
            for r in p.relays:
                self.by_key[r.key] = (s.uid, 0 if r.leg == s.legs[0] else 1, r.rtcp)
            self.guards.install(s.uid, p.guards)
        self._index_ports(s)

    def offloaded(self) -> list[tuple[Session, Plan]]:
        """Every session on the switch, with the entries it has there."""
        by_uid = self.table.by_uid
        out: list[tuple[Session, Plan]] = []
        for uid, p in list(self.plans.items()):
            s = by_uid.get(uid)
            if s is not None:
                out.append((s, p))
        return out

    # ---------------------------------------------------------------- worker
    async def _worker(self) -> None:
        """Installs, modifications, take-backs: the latency-critical writes."""
        busy = False
        while True:
            await self._wake.wait()
            if busy:
                # Under load, a millisecond gathers more calls into one Write
                # (each RPC costs the agent far more CPU than an update in it).
                await asyncio.sleep(0.001)
            self._wake.clear()
            dirty, self._dirty = self._dirty, {}
            busy = len(dirty) > 1
            self._busy.update(dirty)
            self._active += 1
            try:
                async with self._install_lock:
                    await self._flush(dirty)
            except Exception:
                log.exception("offload_worker_error")
            finally:
                self._busy.difference_update(dirty)
                self._active -= 1
            if self._ending:
                self._reap_wake.set()
            self._maybe_idle()

    async def _reaper(self) -> None:
        """Removals (final counters, then deletes), beside the installs: a slow
        counter read never delays the next call's offload."""
        while True:
            await self._reap_wake.wait()
            # Removals have no latency target: batch them harder.
            await asyncio.sleep(0.02)
            self._reap_wake.clear()
            ready = [s for uid, s in self._ending.items() if uid not in self._busy]
            for s in ready:
                del self._ending[s.uid]
            if ready:
                self._active += 1
                try:
                    async with self._remove_lock:
                        await self._remove_sessions(ready)
                except Exception:
                    log.exception("offload_reaper_error")
                finally:
                    self._active -= 1
            self._maybe_idle()

    def _maybe_idle(self) -> None:
        if not self._dirty and not self._ending and not self._active:
            self._idle.set()

    async def _flush(self, dirty: dict[str, Session]) -> None:
        if not dirty and not self.guards.pending_deletes:
            return
        to_install: list[tuple[Session, Plan, bool]] = []  # (session, plan, is_new)
        to_remove: list[Session] = []
        for s in dirty.values():
            if s.uid not in self.table.by_uid:
                continue
            want, reason = self.desired(s)
            have = self.plans.get(s.uid)
            if want is OffloadState.OFFLOADED:
                legs = s.legs or []
                if not legs:
                    a, b = self.legs.take(), self.legs.take()
                    if a is None or b is None:
                        for leg in (a, b):
                            if leg is not None:
                                self.legs.release(leg)
                        self._fallback(s, "legs_exhausted")
                        continue
                    legs = [a, b]
                p = self.plan(s, legs)
                if have == p:
                    continue
                s.legs = legs
                to_install.append((s, p, have is None))
            else:
                if have is not None:
                    to_remove.append(s)
                self._set_state(s, want, reason)
        if to_remove:
            await self._take_back(to_remove)
        if to_install:
            await self._install(to_install)
        elif self.guards.pending_deletes:
            await self._write_removal(lambda: Batch(del_guards=self.guards.take_deletes()))

    def _set_state(self, s: Session, state: OffloadState, reason: str | None) -> None:
        if s.state is state and s.reason == reason:
            return
        prev = s.state
        s.state, s.reason = state, reason
        if state is OffloadState.FALLBACK:
            metrics.FALLBACKS.labels(reason or "unknown").inc()
            log.info("fallback", call_id=s.call_id, tag=s.tag, reason=reason)
            self.emit("fallback", s, reason=reason or "unknown")
        elif state is OffloadState.HELD:
            log.info("held_on_rtpproxy", call_id=s.call_id, tag=s.tag, reason=reason)
            if prev is OffloadState.OFFLOADED:
                self.emit("offload_removed", s, reason=reason or "held")
        elif state is OffloadState.LEARNING:
            log.info("awaiting_latch", call_id=s.call_id, tag=s.tag)
        self.emit("state", s)

    def _fallback(self, s: Session, reason: str) -> None:
        if s.legs and s.uid not in self.plans:
            for leg in s.legs:
                self.legs.release(leg)
            s.legs = None
        self._set_state(s, OffloadState.FALLBACK, reason)

    async def _install(self, items: list[tuple[Session, Plan, bool]]) -> None:
        async with self._write_lock:
            batch, olds = self._install_batch(items)
            refused = await self._write_install(items, batch, olds)
        if refused is None:
            self._installed(items)
            return
        exc = refused
        if len(items) > 1 and exc.reason != "switch_unreachable":
            # One bad session must not sink the batch: retry one by one.
            for it in items:
                await self._install([it])
            return
        for s, _p, new in items:
            if new:
                self._fallback(s, exc.reason)
            else:
                # A modification failed: the old entries may be gone; drop all.
                self.plans.pop(s.uid, None)
                await self._remove_best_effort(s, olds.get(s.uid))
                self._fallback(s, exc.reason)
        log.warning("offload_refused", reason=exc.reason, detail=exc.detail, sessions=len(items))

    async def _write_install(
        self, items: list[tuple[Session, Plan, bool]], batch: Batch, olds: dict[str, Plan]
    ) -> OffloadRefused | None:
        if batch.del_relays and self.switch.connected:
            # Re-keyed flows (re-INVITE, latch): keep what the old keys counted.
            try:
                counts = await self.switch.read_counters(list(batch.del_relays))
            except OffloadRefused:
                counts = {}
            for s, _p, _new in items:
                old = olds.get(s.uid)
                if old is not None:
                    gone = set(batch.del_relays)
                    add_counts(
                        s, Plan(old.legs, tuple(r for r in old.relays if r.key in gone)), counts
                    )
        try:
            await self.switch.write(batch, self.idle_ttl_ms)
        except OffloadRefused as exc:
            return exc
        return None

    def _installed(self, items: list[tuple[Session, Plan, bool]]) -> None:
        now = time.time()
        for s, p, new in items:
            old = self.plans.get(s.uid)
            self.plans[s.uid] = p
            self.guards.install(s.uid, p.guards)
            if old is not None:
                self.guards.release(s.uid, [g for g in old.guards if g not in p.guards])
            for r in p.relays:
                self.by_key[r.key] = (s.uid, 0 if r.leg == p.legs[0].leg else 1, r.rtcp)
            if old is not None:
                for k in set(old.flow_keys()) - set(p.flow_keys()):
                    self.by_key.pop(k, None)
            prev = s.state
            s.state, s.reason = OffloadState.OFFLOADED, None
            s.idle_since = [None, None]
            if new:
                s.offloaded_at = now
                if s.pending_since is not None:
                    metrics.OFFLOAD_LATENCY.observe(time.perf_counter() - s.pending_since)
                    s.pending_since = None
                metrics.OFFLOADS.inc()
                log.info("offloaded", call_id=s.call_id, tag=s.tag, legs=s.legs)
                self.emit("offload_installed", s, entries=len(p.relays))
            else:
                metrics.MODIFICATIONS.inc()
                log.info("offload_modified", call_id=s.call_id, tag=s.tag)
                self.emit("modified", s)
            if prev is not OffloadState.OFFLOADED or not new:
                self.emit("state", s)
        metrics.OFFLOADED.set(len(self.plans))

    def _install_batch(
        self, items: list[tuple[Session, Plan, bool]]
    ) -> tuple[Batch, dict[str, Plan]]:
        add_legs: list[LegRewrite] = []
        mod_legs: list[LegRewrite] = []
        add_relays: list[RelayEntry] = []
        del_relays: list[FlowKey] = []
        add_guards: list[GuardKey] = []
        del_guards: list[GuardKey] = []
        reset: list[int] = []
        olds: dict[str, Plan] = {}
        for s, p, _new in items:
            for g in p.guards:
                self._take_guard(g, s.uid)
        del_guards.extend(self.guards.take_deletes())
        for s, p, _new in items:
            old = self.plans.get(s.uid)
            if old is None:
                add_legs.extend(p.legs)
                add_relays.extend(p.relays)
                add_guards.extend(p.guards)
                reset.extend(self.legs.dirty(lg.leg for lg in p.legs))
                continue
            olds[s.uid] = old
            mod_legs.extend(lg for lg, ol in zip(p.legs, old.legs, strict=True) if lg != ol)
            old_relays = {r.key: r for r in old.relays}
            new_keys = {r.key for r in p.relays}
            del_relays.extend(k for k in old_relays if k not in new_keys)
            add_relays.extend(r for r in p.relays if r.key not in old_relays)
            # A relay port moved (re-INVITE): its old guard goes before its
            # relays, the new one comes after them (Batch's order).
            del_guards.extend(g for g in old.guards if g not in p.guards)
            add_guards.extend(g for g in p.guards if g not in old.guards)
        # Removed keys first: a re-keyed flow may reuse a key of the same batch.
        batch = Batch(
            tuple(add_legs),
            tuple(mod_legs),
            tuple(add_relays),
            tuple(del_relays),
            reset_legs=tuple(reset),
            add_guards=tuple(add_guards),
            del_guards=tuple(del_guards),
        )
        return batch, olds

    async def _take_back(self, sessions: list[Session]) -> None:
        """Move sessions' media back to RTPProxy, keeping the switch's counts."""
        plans = [(s, self.plans[s.uid]) for s in sessions if s.uid in self.plans]
        await self._harvest(plans)
        plans = self._current(plans)
        await self._write_removal(lambda: self._removal(self._current(plans)))
        for s, p in self._current(plans):
            self._forget(s, p)
            want, reason = self.desired(s)
            self._set_state(
                s, want if want is not OffloadState.OFFLOADED else OffloadState.PENDING, reason
            )
        metrics.OFFLOADED.set(len(self.plans))

    async def _remove_sessions(self, sessions: list[Session]) -> None:
        plans = [(s, self.plans[s.uid]) for s in sessions if s.uid in self.plans]
        await self._harvest(plans)
        # Removals have no latency target, commands do: what arrived while
        # the counters were decoded goes before the removal is encoded.
        await asyncio.sleep(0)
        await self._write_removal(lambda: self._removal(self._current(plans)))
        for n, s in enumerate(sessions, 1):
            p = self.plans.get(s.uid)  # as it is now: a guard may have been taken over
            if p is not None:
                self._forget(s, p)
                self.emit("offload_removed", s, reason="ended")
            if s.legs:
                for leg in s.legs:
                    self.legs.release(leg)
                s.legs = None
            self._unindex(s)
            self.learner.forget(s.uid)
            s.state = OffloadState.ENDED
            self.emit("ended", s)
            if n % REMOVALS_PER_SLICE == 0 and n < len(sessions):
                # Each session is done before the turn: its entries, plan,
                # legs and reports stay consistent for what runs meanwhile.
                await asyncio.sleep(0)
        metrics.OFFLOADED.set(len(self.plans))

    def _current(self, plans: list[tuple[Session, Plan]]) -> list[tuple[Session, Plan]]:
        """The same sessions' plans as they are now (a guard may have been taken over)."""
        return [(s, self.plans.get(s.uid, p)) for s, p in plans]

    def _forget(self, s: Session, p: Plan) -> None:
        self.plans.pop(s.uid, None)
        for k in p.flow_keys():
            # The same flow may be a newer call's by now (its port reused).
            if self.by_key.get(k, ("",))[0] == s.uid:
                del self.by_key[k]
        self.guards.release(s.uid, p.guards)
        if s.legs:
            for leg in s.legs:
                self.legs.release(leg)
            s.legs = None

    async def _harvest(self, plans: list[tuple[Session, Plan]]) -> None:
        """Read final counters into each session's totals before removal."""
        if not plans or not self.switch.connected:
            return
        keys = [k for _, p in plans for k in p.flow_keys()]
        try:
            counts = await self.switch.read_counters(keys)
        except OffloadRefused as exc:
            log.warning("final_counters_unread", reason=exc.reason, detail=exc.detail)
            return
        for s, p in plans:
            add_counts(s, p, counts)
        await self.read_foreign_drops(plans)

    async def read_foreign_drops(self, plans: list[tuple[Session, Plan]]) -> None:
        """Add what the guards dropped to each session's total and the metric.
        Only sessions a foreign source was seen on: every guard hit raises a
        learn digest, so the others have nothing to read."""
        attacked = [(s, p) for s, p in plans if s.foreign_sources and p.guards]
        if not attacked or not self.switch.connected:
            return
        try:
            counts = await self.switch.read_guard_counters(
                [g for _, p in attacked for g in p.guards]
            )
        except OffloadRefused as exc:
            log.info("guard_counters_unread", reason=exc.reason)
            return
        for s, p in attacked:
            for g in p.guards:
                c = counts.get(g)
                if c is None:
                    continue
                delta = self.guards.dropped_since(g, c.packets)
                if delta > 0:
                    s.switch_totals.foreign_dropped += delta
                    metrics.GUARD_DROPPED.inc(delta)

    @staticmethod
    def _removal(plans: list[tuple[Session, Plan]]) -> Batch:
        legs = tuple(lg.leg for _, p in plans for lg in p.legs)
        return Batch(
            del_guards=tuple(g for _, p in plans for g in p.guards),
            del_relays=tuple(k for _, p in plans for k in p.flow_keys()),
            del_legs=legs,
            reset_legs=legs,
        )

    async def _write_removal(self, make: Callable[[], Batch]) -> None:
        """Build the batch under the write lock (see `_write_lock`), write it."""
        async with self._write_lock:
            batch = make()
            if not batch:
                return
            try:
                await self.switch.write(batch, self.idle_ttl_ms)
            except OffloadRefused as exc:
                refused: OffloadRefused | None = exc
            else:
                refused = None
        if refused is None:
            self.legs.clean.update(batch.reset_legs)
            return
        # Unreachable: the entries go with the switch's state; they are swept
        # on reconnect (reconcile) so nothing is left behind.
        log.warning("removal_failed", reason=refused.reason, detail=refused.detail)
        self._orphans.extend(batch.del_relays)
        self._orphan_legs.extend(batch.del_legs)

    async def _remove_best_effort(self, s: Session, p: Plan | None) -> None:
        if p is None:
            return
        guards = self.guards.owned_by(s.uid, p.guards)
        self.guards.release(s.uid, guards)
        await self._write_removal(
            lambda: Batch(
                del_guards=guards,
                del_relays=tuple(p.flow_keys()),
                del_legs=tuple(lg.leg for lg in p.legs),
            )
        )

    # ---------------------------------------------------------------- counters
    async def read_live(self) -> LiveReading | None:
        """Every offloaded session's RTP counters and quality registers as the
        switch has them now (guard drops added to the sessions' totals); None
        when nothing is offloaded or the switch is away. Raises OffloadRefused."""
        live = self.offloaded()
        if not live or not self.switch.connected:
            return None
        keys = [r.key for _, p in live for r in p.relays if not r.rtcp]
        legs = [lg.leg for _, p in live for lg in p.legs]
        counts = await self.switch.read_counters(keys)
        quality = await self.switch.read_quality(legs)
        await self.read_foreign_drops(live)
        return LiveReading(live, counts, quality)

    async def live_counts(self, s: Session) -> tuple[list[int], list[int]]:
        """Packets/bytes per stream index (from party i), switch totals included."""
        pk = list(s.switch_totals.packets)
        by = list(s.switch_totals.bytes)
        p = self.plans.get(s.uid)
        if p is not None and self.switch.connected:
            try:
                counts = await self.switch.read_counters([r.key for r in p.relays if not r.rtcp])
            except OffloadRefused:
                counts = {}
            for r in p.relays:
                c = counts.get(r.key)
                if c is not None and not r.rtcp:
                    i = 0 if r.leg == p.legs[0].leg else 1
                    pk[i] += c.packets
                    by[i] += c.bytes
        return pk, by

    # ---------------------------------------------------------------- switch events
    async def _switch_events(self) -> None:
        async for ev in self.switch.events():
            try:
                if isinstance(ev, LearnEvent):
                    await self.events.on_learn(ev)
                elif isinstance(ev, RelayIdle):
                    self.events.on_idle(ev)
                elif isinstance(ev, SwitchUp):
                    await self.refresh_routes()
                    await self.reconcile(restarted=ev.restarted)
                elif isinstance(ev, SwitchDown):
                    log.warning("switch_down", reason=ev.reason)
                    metrics.SWITCH_UP.set(0)
            except Exception:
                log.exception("switch_event_failed", event=repr(ev))

    async def refresh_routes(self) -> None:
        """Route binding: read the switch's routes; when they changed, every
        session that depends on them is planned again (a moved route re-binds
        its calls' relay entries to the new port)."""
        if self.planner.port_binding is not PortBinding.ROUTE or not self.switch.connected:
            return
        try:
            routes = await self.switch.read_routes()
        except OffloadRefused as exc:
            log.warning("routes_unread", reason=exc.reason, detail=exc.detail)
            return
        if routes == self.planner.routes:
            return
        first = self.planner.routes is None
        self.planner.routes = routes
        log.info("routes_read", prefixes=len(routes.prefixes), first=first)
        for s in self.table:
            if s.uid in self.plans or s.state in (OffloadState.PENDING, OffloadState.FALLBACK):
                self.touch(s)

    async def _routes_loop(self) -> None:
        while True:
            await asyncio.sleep(self.route_refresh_s)
            try:
                await self.refresh_routes()
            except Exception:
                log.exception("routes_refresh_failed")

    @property
    def on_timeout(self) -> Callable[[Session], None] | None:
        """Called when both of a session's RTP directions went idle on the switch."""
        return self.events.on_timeout

    @on_timeout.setter
    def on_timeout(self, cb: Callable[[Session], None] | None) -> None:
        self.events.on_timeout = cb

    def at_port(self, addr: str, port: int) -> tuple[str, int, bool] | None:
        return self.ports.get((addr, port))

    def flow_owner(self, key: FlowKey) -> tuple[str, int, bool] | None:
        return self.by_key.get(key)

    def plan_of(self, uid: str) -> Plan | None:
        return self.plans.get(uid)

    def mark_active(self, s: Session, i: int) -> None:
        s.idle_since[i] = None

    async def reconcile(self, restarted: bool) -> None:
        """After (re)connecting: make the switch hold exactly the planned entries."""
        async with self._install_lock, self._remove_lock:
            await self._reconcile(restarted)

    async def _reconcile(self, restarted: bool) -> None:
        metrics.SWITCH_UP.set(1)
        fix = reconciliation(self.plans.values(), await self.switch.dump())
        if fix.stale:
            await self._write_removal(lambda: fix.stale)
            log.info(
                "swept_stale_entries",
                relays=len(fix.stale.del_relays),
                legs=len(fix.stale.del_legs),
                guards=len(fix.stale.del_guards),
            )
        self._orphans.clear()
        self._orphan_legs.clear()
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
        # Sessions that fell back because the switch was away get another chance.
        for s in self.table:
            if s.state is OffloadState.FALLBACK and s.reason == "switch_unreachable":
                self.touch(s)
