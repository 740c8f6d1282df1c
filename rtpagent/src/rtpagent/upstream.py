"""The connection to the one RTPProxy behind the agent.

Datagram RTPProxy (udp:/udp6:): the agent tags each command with its own
cookie, so replies to several SIP servers never mix and RTPProxy's cookie
cache still de-duplicates a retransmitted command (same agent cookie).
Stream RTPProxy (unix:/tcp:): one connection per command, no cookie, as the
OpenSIPS/Kamailio modules do.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
import uuid
from collections.abc import Callable

import structlog

from . import metrics
from .protocol import MAX_REPLY_BYTES
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


class Upstream:
    def __init__(self, spec: SocketSpec, timeout: float = 1.0, retries: int = 2) -> None:
        self.spec = spec
        self.timeout = timeout
        self.retries = retries
        self._transport: asyncio.DatagramTransport | None = None
        self._pending: dict[str, asyncio.Future[str]] = {}
        self._pending_cb: dict[str, Callable[[str], None]] = {}
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
        for f in self._pending.values():
            if not f.done():
                f.cancel()

    def new_cookie(self) -> str:
        return f"{self._prefix}_{next(self._ids):x}"

    def _on_reply(self, data: bytes) -> None:
        if len(data) > MAX_REPLY_BYTES:
            metrics.BAD_INPUT.labels("reply_oversized").inc()
            log.warning("reply_oversized", size=len(data))
            return
        text = data.decode("utf-8", "replace")
        cookie, _, body = text.partition(" ")
        fut = self._pending.pop(cookie, None)
        if fut is None:
            cb = self._pending_cb.pop(cookie, None)
            if cb is not None:
                cb(body)
                return
            metrics.BAD_INPUT.labels("reply_unmatched").inc()
            log.debug("reply_unmatched", cookie=cookie[:64])
            return
        if not fut.done():
            fut.set_result(body)

    async def call(self, body: str, cookie: str | None = None) -> str:
        """Send one command, return the reply body. Raises UpstreamTimeout."""
        t0 = time.perf_counter()
        try:
            if self.spec.datagram:
                return await self._call_dgram(body, cookie or self.new_cookie())
            return await self._call_stream(body)
        finally:
            metrics.CONTROL_LATENCY.observe(time.perf_counter() - t0)

    async def _call_dgram(self, body: str, cookie: str) -> str:
        # A future plus one timer per attempt: cheaper than wait_for/shield,
        # and this runs for every command.
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()
        self._pending[cookie] = fut
        data = f"{cookie} {body}".encode()
        left = [self.retries]

        def expire() -> None:
            if fut.done():
                return
            if left[0] <= 0:
                metrics.UPSTREAM_TIMEOUTS.inc()
                fut.set_exception(UpstreamTimeout(f"no reply from {self.spec} to {body[:60]!r}"))
                return
            left[0] -= 1
            transport.sendto(data)  # same cookie: RTPProxy answers from its cache
            timer[0] = loop.call_later(self.timeout, expire)

        transport.sendto(data)
        timer = [loop.call_later(self.timeout, expire)]
        try:
            return await fut
        finally:
            timer[0].cancel()
            self._pending.pop(cookie, None)

    def call_cb(self, body: str, cb: Callable[[str | None], None]) -> None:
        """Datagram RTPProxy only: send, then `cb(reply)` or `cb(None)` when
        every attempt went unanswered. No task, no future: the hot path."""
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        cookie = self.new_cookie()
        data = f"{cookie} {body}".encode()
        left = [self.retries]
        t0 = time.perf_counter()

        def on_reply(text: str) -> None:
            timer[0].cancel()
            metrics.CONTROL_LATENCY.observe(time.perf_counter() - t0)
            cb(text)

        def expire() -> None:
            if cookie not in self._pending_cb:
                return
            if left[0] <= 0:
                del self._pending_cb[cookie]
                metrics.UPSTREAM_TIMEOUTS.inc()
                cb(None)
                return
            left[0] -= 1
            transport.sendto(data)  # same cookie: RTPProxy answers from its cache
            timer[0] = loop.call_later(self.timeout, expire)

        self._pending_cb[cookie] = on_reply
        transport.sendto(data)
        timer = [loop.call_later(self.timeout, expire)]

    async def _call_stream(self, body: str) -> str:
        try:
            async with asyncio.timeout(self.timeout * (self.retries + 1)):
                if self.spec.kind == "unix":
                    reader, writer = await asyncio.open_unix_connection(self.spec.path)
                else:
                    reader, writer = await asyncio.open_connection(self.spec.host, self.spec.port)
                try:
                    writer.write(body.encode())
                    await writer.drain()
                    data = await reader.read(MAX_REPLY_BYTES)
                finally:
                    writer.close()
        except (TimeoutError, OSError) as exc:
            metrics.UPSTREAM_TIMEOUTS.inc()
            raise UpstreamTimeout(f"{self.spec}: {exc}") from exc
        if not data:
            raise UpstreamTimeout(f"{self.spec}: closed without reply")
        return data.decode("utf-8", "replace")
