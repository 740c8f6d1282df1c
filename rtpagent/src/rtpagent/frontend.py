"""Where SIP servers talk to the agent: the sockets RTPProxy would listen on.

Datagram sockets carry `<cookie> <command>`; a retransmission (same client,
same cookie) is answered from a short reply cache instead of being executed
twice, like RTPProxy. Stream sockets (unix:, tcp:) carry one command per read,
no cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, cast

import structlog

from . import metrics
from .protocol import (
    MAX_COMMAND_BYTES,
    MAX_FORWARD_BYTES,
    WIRE,
    ProtocolError,
    error_reply,
    split_cookie,
    words,
)
from .sockets import SocketSpec

log = structlog.get_logger("rtpagent.frontend")

Handler = Callable[[str], Awaitable[str | None]]
REPLY_CACHE_SECONDS = 30.0
REPLY_CACHE_MAX = 65536


CallbackHandler = Callable[[str, Callable[[str | None], None]], None]
# (source address, command) -> None to go on, or the E code to answer with.
Admit = Callable[[str, str], int | None]
# A datagram's sender: (host, port, ...) over IP, a path over a unix socket, None
# for a unix peer that never bound one.
Address = tuple[Any, ...] | str | None


def _source(addr: Address) -> str:
    """A datagram sender's address, port left out (a SIP server may send
    from several ports; its limits are per host)."""
    if isinstance(addr, tuple) and addr:
        return str(addr[0])
    return str(addr or "local")  # a unix socket's peer has no address


class _DgramServer(asyncio.DatagramProtocol):
    def __init__(
        self,
        handler: Handler,
        handler_cb: CallbackHandler | None = None,
        admit: Admit | None = None,
    ) -> None:
        self.handler = handler
        self.handler_cb = handler_cb
        self.admit = admit
        self.transport: asyncio.DatagramTransport | None = None
        self.cache: OrderedDict[tuple[Address, str], tuple[float, bytes | None]] = OrderedDict()
        self.tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Address) -> None:
        try:
            dg = split_cookie(data)
        except ProtocolError as exc:
            metrics.BAD_INPUT.labels("command").inc()
            log.info("bad_datagram", reason=exc.reason, size=len(data))
            if self.transport is not None:
                # RTPProxy's answer: with the cookie when it could read one.
                head = f"{exc.cookie} " if exc.cookie else ""
                self.transport.sendto(f"{head}{error_reply(exc.code)}".encode(WIRE), addr)
            return
        key = (addr, dg.cookie)
        hit = self.cache.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[0] < REPLY_CACHE_SECONDS:
            if hit[1] is not None and self.transport is not None:
                self.transport.sendto(hit[1], addr)
            return  # in flight (None) or answered: never execute twice
        self.cache[key] = (now, None)
        while len(self.cache) > REPLY_CACHE_MAX:
            self.cache.popitem(last=False)
        if self.admit is not None:
            refused = self.admit(_source(addr), dg.body)
            if refused is not None:
                self._deliver(dg.cookie, error_reply(refused), addr, key)
                return
        if self.handler_cb is not None:
            cookie = dg.cookie

            def done(reply: str | None) -> None:
                self._deliver(cookie, reply, addr, key)

            try:
                self.handler_cb(dg.body, done)
            except Exception:
                log.exception("handler_failed", command=dg.body[:200])
                self.cache.pop(key, None)
            return
        t = asyncio.ensure_future(self._run(dg.cookie, dg.body, addr, key))
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def _run(self, cookie: str, body: str, addr: Address, key: tuple[Address, str]) -> None:
        try:
            reply = await self.handler(body)
        except Exception:
            log.exception("handler_failed", command=body[:200])
            reply = None
        self._deliver(cookie, reply, addr, key)

    def _deliver(
        self, cookie: str, reply: str | None, addr: Address, key: tuple[Address, str]
    ) -> None:
        if reply is None:
            self.cache.pop(key, None)  # let a retransmission try again
            return
        out = f"{cookie} {reply}".encode(WIRE)
        self.cache[key] = (time.monotonic(), out)
        if self.transport is not None:
            self.transport.sendto(out, addr)


class Frontend:
    def __init__(
        self,
        specs: list[SocketSpec],
        handler: Handler,
        handler_cb: CallbackHandler | None = None,
        admit: Admit | None = None,
        bound: dict[SocketSpec, socket.socket] | None = None,
    ) -> None:
        self.specs = specs
        # Datagram sockets bound already (early.py: open since the process started).
        self.bound = bound or {}
        self.handler = handler
        self.handler_cb = handler_cb
        self.admit = admit
        self._closers: list[Callable[[], None]] = []
        self._servers: list[asyncio.AbstractServer] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for spec in self.specs:
            if spec.datagram:
                family = (
                    socket.AF_INET6 if spec.kind == "udp6" or ":" in spec.host else socket.AF_INET
                )
                sock = self.bound.get(spec)
                transport, _ = await loop.create_datagram_endpoint(
                    lambda: _DgramServer(self.handler, self.handler_cb, self.admit),
                    **(
                        {"sock": sock}
                        if sock is not None
                        else {"local_addr": (spec.host, spec.port), "family": family}
                    ),
                )
                self._closers.append(transport.close)
            elif spec.kind == "unix":
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(spec.path)  # a stale socket of a previous run
                self._servers.append(await asyncio.start_unix_server(self._stream, path=spec.path))
            else:
                self._servers.append(
                    await asyncio.start_server(
                        self._stream, spec.host, spec.port, reuse_address=True
                    )
                )
            log.info("listening", socket=str(spec))

    async def close(self) -> None:
        for c in self._closers:
            c()
        for s in self._servers:
            s.close()
            await s.wait_closed()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(MAX_COMMAND_BYTES + 1)
                if not data:
                    return
                if len(data) > MAX_FORWARD_BYTES:
                    metrics.BAD_INPUT.labels("command").inc()
                    writer.write(error_reply(25).encode())
                    await writer.drain()
                    return
                body = data.decode(WIRE)
                if not words(body):
                    writer.write(error_reply(5).encode())
                    await writer.drain()
                    continue
                refused = None
                if self.admit is not None:
                    refused = self.admit(_source(writer.get_extra_info("peername")), body)
                reply = error_reply(refused) if refused is not None else await self.handler(body)
                if reply is None:
                    return  # RTPProxy silent: the client times out as it would
                writer.write(reply.encode(WIRE))
                await writer.drain()
        except (ConnectionError, OSError):
            return
        except Exception:
            log.exception("stream_handler_failed")
        finally:
            writer.close()
