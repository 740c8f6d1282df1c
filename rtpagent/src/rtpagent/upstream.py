"""The connection to the one RTPProxy behind the agent.

Datagram RTPProxy (udp:/udp6:): the agent tags each command with its own
cookie, so replies to several SIP servers never mix and RTPProxy's cookie
cache still de-duplicates a retransmitted command (same agent cookie).
Stream RTPProxy (unix:/tcp:): one connection per command, no cookie, as the
OpenSIPS/Kamailio modules do.

At most `max_inflight` datagram commands are outstanding; the rest wait here,
in order. RTPProxy's control socket has a small receive buffer (32 KiB: ~25
commands) and one thread draining it, so a burst from several SIP servers
overflowed it: each dropped command cost its call a one-second retransmit
(~1 % of commands at 64 in flight, direct or through the agent). Waiting here
costs nothing extra: RTPProxy takes the commands one at a time anyway.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable

import structlog

from . import metrics
from .protocol import MAX_REPLY_BYTES, WIRE
from .sockets import SocketSpec

log = structlog.get_logger("rtpagent.upstream")


class UpstreamTimeout(Exception):
    pass


class _Datagram(asyncio.DatagramProtocol):
    def __init__(self, owner: Upstream) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr: object) -> None:
        self.owner._on_reply(data)

    def error_received(self, exc: Exception) -> None:
        log.warning("upstream_socket_error", error=str(exc))


class _Command:
    """One datagram command at RTPProxy, until answered or given up.

    An object, not closures: a closure that re-arms its own timer refers to
    itself, a reference cycle per command (with the whole command's state)
    that only the garbage collector could free; young-generation passes then
    freed thousands of objects each, 1-9 ms pauses on the event loop. Here
    the timer is dropped when the command is done: reference counting frees
    everything."""

    __slots__ = ("cb", "cookie", "data", "left", "t0", "timer", "up")

    def __init__(self, up: Upstream, body: str, cb: Callable[[str | None], None]) -> None:
        self.up = up
        self.cb = cb
        self.cookie = up.new_cookie()
        self.data = f"{self.cookie} {body}".encode(WIRE)
        self.left = up.retries
        self.t0 = time.perf_counter()
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        up = self.up
        assert up._transport is not None
        up._pending_cb[self.cookie] = self.on_reply
        up._transport.sendto(self.data)
        self.timer = asyncio.get_running_loop().call_later(up.timeout, self.expire)

    def on_reply(self, text: str) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        metrics.CONTROL_LATENCY.observe(time.perf_counter() - self.t0)
        try:
            self.cb(text)  # the reply first, then the next command goes
        finally:
            self.up._release()

    def expire(self) -> None:
        up = self.up
        if self.cookie not in up._pending_cb:
            return
        if self.left <= 0:
            del up._pending_cb[self.cookie]
            self.timer = None
            metrics.UPSTREAM_TIMEOUTS.inc()
            try:
                self.cb(None)
            finally:
                up._release()
            return
        self.left -= 1
        assert up._transport is not None
        up._transport.sendto(self.data)  # same cookie: RTPProxy answers from its cache
        self.timer = asyncio.get_running_loop().call_later(up.timeout, self.expire)


class Upstream:
    def __init__(
        self, spec: SocketSpec, timeout: float = 1.0, retries: int = 2, max_inflight: int = 16
    ) -> None:
        self.spec = spec
        self.timeout = timeout
        self.retries = retries
        self.max_inflight = max(1, max_inflight)
        self._transport: asyncio.DatagramTransport | None = None
        self._pending_cb: dict[str, Callable[[str], None]] = {}
        self._inflight = 0
        # Commands waiting for a slot: (queued at, body, callback).
        self._waiting: deque[tuple[float, str, Callable[[str | None], None]]] = deque()
        self._ids = itertools.count(1)
        # Unique per agent run: RTPProxy answers a known cookie from its reply
        # cache, so a restarted agent must never reuse its predecessor's cookies.
        self._prefix = uuid.uuid4().hex[:10]

    async def start(self) -> None:
        if self.spec.datagram:
            loop = asyncio.get_running_loop()
            family = socket.AF_INET6 if ":" in self.spec.host else socket.AF_INET
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _Datagram(self), remote_addr=(self.spec.host, self.spec.port), family=family
            )
            self._transport = transport

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._waiting.clear()

    def new_cookie(self) -> str:
        return f"{self._prefix}_{next(self._ids):x}"

    def _on_reply(self, data: bytes) -> None:
        if len(data) > MAX_REPLY_BYTES:
            metrics.BAD_INPUT.labels("reply_oversized").inc()
            log.warning("reply_oversized", size=len(data))
            return
        text = data.decode(WIRE)
        cookie, _, body = text.partition(" ")
        cb = self._pending_cb.pop(cookie, None)
        if cb is not None:
            cb(body)
            return
        metrics.BAD_INPUT.labels("reply_unmatched").inc()
        log.debug("reply_unmatched", cookie=cookie[:64])

    async def call(self, body: str) -> str:
        """Send one command, return the reply body. Raises UpstreamTimeout."""
        if self.spec.datagram:
            return await self._call_dgram(body)
        t0 = time.perf_counter()
        try:
            return await self._call_stream(body)
        finally:
            metrics.CONTROL_LATENCY.observe(time.perf_counter() - t0)

    async def _call_dgram(self, body: str) -> str:
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

        def done(reply: str | None) -> None:
            if not fut.done():
                fut.set_result(reply)

        self.call_cb(body, done)
        reply = await fut
        if reply is None:
            raise UpstreamTimeout(f"no reply from {self.spec} to {body[:60]!r}")
        return reply

    def call_cb(self, body: str, cb: Callable[[str | None], None]) -> None:
        """Datagram RTPProxy only: send, then `cb(reply)` or `cb(None)` when
        every attempt went unanswered. No task, no future: the hot path."""
        if self._inflight >= self.max_inflight:
            self._waiting.append((time.monotonic(), body, cb))
            return
        self._send(body, cb)

    def _release(self) -> None:
        """A command was answered or given up: the next waiting one goes."""
        self._inflight -= 1
        while self._waiting and self._inflight < self.max_inflight:
            queued, body, cb = self._waiting.popleft()
            if time.monotonic() - queued > self.timeout * (self.retries + 1):
                # RTPProxy has not been keeping up for longer than a command
                # may take: as if unanswered (the SIP server retransmits).
                metrics.UPSTREAM_TIMEOUTS.inc()
                cb(None)
                continue
            self._send(body, cb)

    def _send(self, body: str, cb: Callable[[str | None], None]) -> None:
        self._inflight += 1
        _Command(self, body, cb).start()

    async def _call_stream(self, body: str) -> str:
        try:
            async with asyncio.timeout(self.timeout * (self.retries + 1)):
                if self.spec.kind == "unix":
                    reader, writer = await asyncio.open_unix_connection(self.spec.path)
                else:
                    reader, writer = await asyncio.open_connection(self.spec.host, self.spec.port)
                try:
                    writer.write(body.encode(WIRE))
                    await writer.drain()
                    data = await reader.read(MAX_REPLY_BYTES)
                finally:
                    writer.close()
        except (TimeoutError, OSError) as exc:
            metrics.UPSTREAM_TIMEOUTS.inc()
            raise UpstreamTimeout(f"{self.spec}: {exc}") from exc
        if not data:
            raise UpstreamTimeout(f"{self.spec}: closed without reply")
        return data.decode(WIRE)
