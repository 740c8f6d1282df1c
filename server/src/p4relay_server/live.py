"""In-process fan-out of changes to live-stream subscribers.

Ingest publishes after its transaction commits, so a subscriber never sees
data that is not stored. A subscriber that falls `queue_size` messages behind
gets an `overflow` message and is disconnected (the console then re-fetches),
rather than silently missing changes. One API process owns the stream: run the
server with one worker process (uvicorn's default), which the benchmark shows
is ample.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from p4relay_server.metrics import LIVE_MESSAGES, LIVE_OVERFLOWS, LIVE_SUBSCRIBERS

TOPICS = frozenset({"sessions", "samples", "queues", "events"})
Message = dict[str, Any]


@dataclass(eq=False)
class Subscriber:
    topics: frozenset[str]
    queue: asyncio.Queue[Message]
    overflowed: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when some credential was revoked or changed: re-check this stream's.
    recheck: asyncio.Event = field(default_factory=asyncio.Event)


class LiveHub:
    def __init__(self, queue_size: int = 1000) -> None:
        self._queue_size = queue_size
        self._subs: set[Subscriber] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def subscribe(self, topics: Iterable[str]) -> Subscriber:
        self._loop = asyncio.get_running_loop()
        sub = Subscriber(frozenset(topics) & TOPICS, asyncio.Queue(self._queue_size))
        self._subs.add(sub)
        LIVE_SUBSCRIBERS.set(len(self._subs))
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subs.discard(sub)
        LIVE_SUBSCRIBERS.set(len(self._subs))

    @property
    def subscriber_count(self) -> int:
        return len(self._subs)

    def credentials_changed(self) -> None:
        """A token was revoked or a user's logins ended: every stream re-checks
        its credentials now. Callable from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for sub in list(self._subs):
            loop.call_soon_threadsafe(sub.recheck.set)

    def publish(self, messages: Iterable[Message]) -> None:
        """Must run on the event loop thread."""
        for msg in messages:
            topic = msg["topic"]
            LIVE_MESSAGES.labels(topic).inc()
            for sub in list(self._subs):
                if topic not in sub.topics or sub.overflowed:
                    continue
                try:
                    sub.queue.put_nowait(msg)
                except asyncio.QueueFull:
                    sub.overflowed = True
                    sub.closed.set()
                    LIVE_OVERFLOWS.inc()
