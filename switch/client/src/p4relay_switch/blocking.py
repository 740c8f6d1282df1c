"""Blocking facade for synchronous callers (PTF tests, scripts).

The asyncio client runs on an event loop in a background thread;
``run(coro)`` submits a coroutine to it and waits for the result:

    sw = BlockingSwitch("127.0.0.1:50052")
    sw.run(sw.client.insert("pipe.Ingress.nexthop", [...]))
    p = Pipeline(sw.client); sw.run(p.install_call(call))
    sw.close()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from p4relay_switch.client import Notification, SwitchClient

T = TypeVar("T")


class BlockingSwitch:
    def __init__(self, address: str, *, timeout_s: float = 30.0, **client_kw: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="bfrt-loop", daemon=True
        )
        self._thread.start()
        self.timeout_s = timeout_s

        async def make() -> SwitchClient:
            c = SwitchClient(address, **client_kw)
            await c.connect()
            return c

        try:
            self.client: SwitchClient = self.run(make())
        except BaseException:
            self._stop()
            raise

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(self.timeout_s if timeout_s is None else timeout_s)

    def next_notification(self, timeout_s: float) -> Notification | None:
        return self.run(self.client.next_notification(timeout_s), timeout_s + 5)

    def drain_notifications(self) -> list[Notification]:
        async def drain() -> list[Notification]:
            return self.client.drain_notifications()

        return self.run(drain())

    def close(self) -> None:
        try:
            self.run(self.client.close(), 10)
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
