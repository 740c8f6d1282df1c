"""The reaper: ended sessions' removals (final counters, then deletes),
beside the install writer, so a slow counter read never delays the next
call's offload. Removals have no latency target: they are batched harder."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from . import metrics
from .drain import Drain
from .installed import Installed
from .state import OffloadState, Session

log = structlog.get_logger("rtpagent.reaper")

REMOVALS_PER_SLICE = 4  # ended sessions' bookkeeping per event-loop turn
GATHER_S = 0.02  # how long a wake-up waits for more ended sessions


class Reaper:
    def __init__(
        self,
        installed: Installed,
        emit: Callable[..., None],
        drain: Drain,
        writing: Callable[[str], bool],
        ended: Callable[[Session], None],
    ) -> None:
        """`writing(uid)`: the install writer has the session in a write (its
        removal waits for it); `ended(s)`: the session's other bookkeeping."""
        self.installed = installed
        self.emit = emit
        self.drain = drain
        self._writing = writing
        self._ended = ended
        self.ending: dict[str, Session] = {}
        self.lock = asyncio.Lock()  # held by reconcile too
        self._wake = asyncio.Event()
        drain.watch(lambda: len(self.ending))

    def end(self, s: Session) -> None:
        self.ending[s.uid] = s
        self.drain.queued()
        self._wake.set()

    def wake(self) -> None:
        """Sessions held back by a write under way may be ready now."""
        if self.ending:
            self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(GATHER_S)
            self._wake.clear()
            ready = [s for uid, s in self.ending.items() if not self._writing(uid)]
            for s in ready:
                del self.ending[s.uid]
            if ready:
                with self.drain.working():
                    try:
                        async with self.lock:
                            await self._remove(ready)
                    except Exception:
                        log.exception("offload_reaper_error")
            self.drain.settle()

    async def _remove(self, sessions: list[Session]) -> None:
        inst = self.installed
        plans = inst.of(sessions)
        await inst.harvest(plans)
        # Removals have no latency target, commands do: what arrived while
        # the counters were decoded goes before the removal is encoded.
        await asyncio.sleep(0)
        await inst.write_removal(lambda: inst.removal(inst.current(plans)))
        for n, s in enumerate(sessions, 1):
            p = inst.plans.get(s.uid)  # as it is now: a guard may have been taken over
            if p is not None:
                inst.forget(s, p)
                self.emit("offload_removed", s, reason="ended")
            inst.release_legs(s)
            self._ended(s)
            s.state = OffloadState.ENDED
            self.emit("ended", s)
            if n % REMOVALS_PER_SLICE == 0 and n < len(sessions):
                # Each session is done before the turn: its entries, plan,
                # legs and reports stay consistent for what runs meanwhile.
                await asyncio.sleep(0)
        metrics.OFFLOADED.set(len(inst.plans))
