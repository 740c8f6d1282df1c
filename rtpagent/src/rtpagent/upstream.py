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


# A timer may fire this much before its time (uvloop's are in milliseconds):
# a command this close to its deadline counts as due.
TIMER_SLACK = 0.001


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
    freed thousands of objects each, 1-9 ms pauses on the event loop. Once
    answered or given up, nothing refers to it: reference counting frees
    everything. Its deadline is kept by `Upstream`'s one timer, not a timer
    of its own (arming and cancelling one per command cost more than the
    rest of its bookkeeping)."""

    __slots__ = ("cb", "cookie", "data", "deadline", "left", "t0", "up")

    def __init__(self, up: Upstream, body: str, cb: Callable[[str | None], None]) -> None:
        self.up = up
        self.cb = cb
        self.cookie = up.new_cookie()
        self.data = f"{self.cookie} {body}".encode(WIRE)
        self.left = up.retries
        self.t0 = time.perf_counter()
        self.deadline = 0.0

    def start(self) -> None:
        up = self.up
        assert up._transport is not None
        up._transport.sendto(self.data)
        up._await(self)

    def on_reply(self, text: str) -> None:
        metrics.CONTROL_LATENCY.observe(time.perf_counter() - self.t0)
        try:
            self.cb(text)  # the reply first, then the next command goes
        finally:
            self.up._release()

    def expire(self) -> None:
        """Its deadline passed unanswered (it is no longer pending)."""
        up = self.up
        if self.left <= 0:
            metrics.UPSTREAM_TIMEOUTS.inc()
            try:
                self.cb(None)
            finally:
                up._release()
            return
        self.left -= 1
        assert up._transport is not None
        up._transport.sendto(self.data)  # same cookie: RTPProxy answers from its cache
        up._await(self)


class Upstream:
    def __init__(
        self, spec: SocketSpec, timeout: float = 1.0, retries: int = 2, max_inflight: int = 16
    ) -> None:
        self.spec = spec
        self.timeout = timeout
        self.retries = retries
        self.max_inflight = max(1, max_inflight)
        self._transport: asyncio.DatagramTransport | None = None
        # Commands sent and not answered, by cookie, in the order they were
        # (last) sent: with one timeout for all, that is deadline order.
        self._pending: dict[str, _Command] = {}
        self._timer: asyncio.TimerHandle | None = None  # at the first deadline
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
        cmd = self._pending.pop(cookie, None)
        if cmd is not None:
            cmd.on_reply(body)
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

    def _await(self, cmd: _Command) -> None:
        """`cmd` was just sent: answered, or expired `timeout` from now."""
        loop = asyncio.get_running_loop()
        cmd.deadline = loop.time() + self.timeout
        self._pending[cmd.cookie] = cmd
        if self._timer is None:
            self._timer = loop.call_at(cmd.deadline, self._expire_due)

    def _expire_due(self) -> None:
        """The timer: every command past its deadline is resent or given up,
        in the order sent; then the timer is set for the next deadline."""
        self._timer = None
        pending = self._pending
        loop = asyncio.get_running_loop()
        now = loop.time() + TIMER_SLACK
        due: list[_Command] = []
        for cmd in pending.values():
            if cmd.deadline > now:
                break
            due.append(cmd)
        for cmd in due:
            # Out of `pending` first: a resend goes back in at the end (its
            # new deadline the latest), a give-up frees its slot.
            del pending[cmd.cookie]
        for cmd in due:
            try:
                cmd.expire()
            except Exception:  # one caller's failure must not stop the others' timeouts
                log.exception("command_expiry_failed")
        if self._timer is not None:
            # Set meanwhile (a resend, a waiting command sent) for a later deadline.
            self._timer.cancel()
            self._timer = None
        if pending:
            first = next(iter(pending.values()))
            self._timer = loop.call_at(first.deadline, self._expire_due)

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
