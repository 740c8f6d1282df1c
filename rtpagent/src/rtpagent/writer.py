"""The install writer: installs, modifications and take-backs, the
latency-critical writes.

The control path marks sessions dirty; one worker turns all dirty sessions
into one ordered BfRt write (batched: thousands of calls per second cost a
few RPCs), so the control path never waits on the switch. When the switch
refuses (full, unreachable, error) the session stays on RTPProxy and the
reason is recorded: fail-open.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog
from p4relay_switch import EntryBatch as Batch

from . import metrics
from .drain import Drain
from .installed import Installed
from .planner import Plan, Planner
from .state import OffloadState, Session, SessionTable
from .switchport import OffloadRefused

log = structlog.get_logger("rtpagent.writer")

Emit = Callable[..., None]
Install = tuple[Session, Plan, bool]  # (session, plan, is_new)


class InstallWriter:
    def __init__(
        self,
        table: SessionTable,
        installed: Installed,
        planner: Planner,
        emit: Emit,
        drain: Drain,
    ) -> None:
        self.table = table
        self.installed = installed
        self.planner = planner
        self.emit = emit
        self.drain = drain
        self.dirty: dict[str, Session] = {}
        self.writing: set[str] = set()  # sessions in the write under way
        self.adding = 0  # new calls in the write under way (the offload cap counts them)
        # One writer at a time: this worker and reconcile must not interleave
        # (a reconcile's read-back would be stale against a concurrent write).
        self.lock = asyncio.Lock()
        self.after_round: Callable[[], None] = lambda: None
        # Write-ahead: the sessions of an install journalled before their
        # entries are written (the journal's owner sets it; reporter.py).
        self.journal_ahead: Callable[[list[Session]], Awaitable[None]] | None = None
        self._wake = asyncio.Event()
        drain.watch(lambda: len(self.dirty))

    def mark(self, s: Session) -> None:
        """`s` changed: bring the switch in line with it soon."""
        self.dirty[s.uid] = s
        self.drain.queued()
        self._wake.set()

    def wake(self) -> None:
        """Something besides a session is pending (a taken-over guard)."""
        self._wake.set()

    def desired(self, s: Session) -> tuple[OffloadState, str | None]:
        """What state the session should be in, and why."""
        return self.planner.desired(s, self.installed.switch.connected)

    async def run(self) -> None:
        busy = False
        while True:
            await self._wake.wait()
            if busy:
                # Under load, a millisecond gathers more calls into one Write
                # (each RPC costs the agent far more CPU than an update in it).
                await asyncio.sleep(0.001)
            self._wake.clear()
            dirty, self.dirty = self.dirty, {}
            busy = len(dirty) > 1
            self.writing.update(dirty)
            with self.drain.working():
                try:
                    async with self.lock:
                        await self._flush(dirty)
                except Exception:
                    log.exception("offload_worker_error")
                finally:
                    self.writing.difference_update(dirty)
            self.after_round()
            self.drain.settle()

    async def _flush(self, dirty: dict[str, Session]) -> None:
        inst = self.installed
        if not dirty and not inst.guards.pending_deletes:
            return
        to_install: list[Install] = []
        to_remove: list[Session] = []
        self.adding = 0
        for s in dirty.values():
            if s.uid not in self.table.by_uid:
                continue
            want, reason = self.desired(s)
            have = inst.plans.get(s.uid)
            if want is OffloadState.OFFLOADED:
                legs = s.legs or []
                if not legs:
                    a, b = inst.legs.take(), inst.legs.take()
                    if a is None or b is None:
                        for leg in (a, b):
                            if leg is not None:
                                inst.legs.release(leg)
                        self._fallback(s, "legs_exhausted")
                        continue
                    legs = [a, b]
                p = self.planner.plan(s, legs)
                if have == p:
                    continue
                s.legs = legs
                to_install.append((s, p, have is None))
                self.adding += have is None
            else:
                if have is not None:
                    to_remove.append(s)
                self._set_state(s, want, reason)
        if to_remove:
            await self._take_back(to_remove)
        if to_install:
            try:
                await self._install(to_install)
            finally:
                self.adding = 0
        elif inst.guards.pending_deletes:
            await inst.write_removal(lambda: Batch(del_guards=inst.guards.take_deletes()))

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
        if s.uid not in self.installed.plans:
            self.installed.release_legs(s)
        self._set_state(s, OffloadState.FALLBACK, reason)

    async def _install(self, items: list[Install]) -> None:
        inst = self.installed
        if self.journal_ahead is not None:
            try:
                await self.journal_ahead([s for s, _p, _new in items])
            except Exception:  # the media goes on the switch all the same (fail-open)
                log.exception("journal_ahead_failed", sessions=len(items))
        async with inst.write_lock:
            batch, olds = self._install_batch(items)
            refused = await self._write_install(batch)
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
                inst.plans.pop(s.uid, None)
                await inst.remove_best_effort(s, olds.get(s.uid))
                self._fallback(s, exc.reason)
        log.warning("offload_refused", reason=exc.reason, detail=exc.detail, sessions=len(items))

    async def _write_install(self, batch: Batch) -> OffloadRefused | None:
        # Re-keyed flows (re-INVITE, latch) keep their legs: the legs' counters
        # go on counting, nothing to carry over.
        try:
            await self.installed.switch.write(batch, self.installed.idle_ttl_ms)
        except OffloadRefused as exc:
            return exc
        return None

    def _installed(self, items: list[Install]) -> None:
        now = time.time()
        for s, p, new in items:
            self.installed.record(s, p)
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
        metrics.OFFLOADED.set(len(self.installed.plans))

    def _install_batch(self, items: list[Install]) -> tuple[Batch, dict[str, Plan]]:
        inst = self.installed
        olds: dict[str, Plan] = {}
        for s, p, _new in items:
            for g in p.guards:
                inst.take_guard(g.key, s.uid)
        # Guards taken over from ended calls go first, before anything of the
        # new ones (Batch's order deletes guards before all else).
        parts = [Batch(del_guards=inst.guards.take_deletes())]
        for s, p, _new in items:
            old = inst.plans.get(s.uid)
            if old is None:
                parts.append(p.install(reset_legs=inst.legs.dirty(lg.leg for lg in p.legs)))
                continue
            olds[s.uid] = old
            # A re-keyed flow or a moved relay port (re-INVITE, latch): its old
            # entries go before the new ones come, in the same write.
            parts.append(p.change_from(old))
        return Batch.joined(parts), olds

    async def _take_back(self, sessions: list[Session]) -> None:
        """Move sessions' media back to RTPProxy, keeping the switch's counts."""
        inst = self.installed
        plans = inst.of(sessions)
        await inst.harvest(plans)
        plans = inst.current(plans)
        await inst.write_removal(lambda: inst.removal(inst.current(plans)))
        for s, p in inst.current(plans):
            inst.forget(s, p)
            want, reason = self.desired(s)
            self._set_state(
                s, want if want is not OffloadState.OFFLOADED else OffloadState.PENDING, reason
            )
        metrics.OFFLOADED.set(len(inst.plans))
