"""Whether switch work is still pending across the jobs that write to the
switch (the install writer and the reaper): `drained()` waits until none is,
so a stop or a test sees every change so far on the switch."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator


class Drain:
    def __init__(self) -> None:
        self._idle = asyncio.Event()
        self._idle.set()
        self._active = 0
        self._queues: list[Callable[[], int]] = []

    def watch(self, queued: Callable[[], int]) -> None:
        """A job's queue length: work not started yet."""
        self._queues.append(queued)

    def queued(self) -> None:
        """Work was queued: not drained until a job has done it."""
        self._idle.clear()

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1

    @property
    def busy(self) -> bool:
        return self._active > 0 or any(q() for q in self._queues)

    def settle(self) -> None:
        """A job finished a round: drained if nothing else is pending."""
        if not self.busy:
            self._idle.set()

    async def drained(self) -> None:
        while self.busy or not self._idle.is_set():
            await asyncio.sleep(0.001)
            await self._idle.wait()
