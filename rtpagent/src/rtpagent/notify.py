"""Timeout notifications, RTPProxy's format: `<tag>\\n` over a stream socket.

* `NotifyListener`: the agent's own socket, which `U` commands name instead of
  the SIP server's, so RTPProxy's timeouts come to the agent first.
* `Notifier`: delivers `<tag>\\n` to a SIP server's socket (tcp: or unix:),
  keeping one connection per target like RTPProxy does; a connection the SIP
  server closed (it restarted) is replaced before the next notification.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from .protocol import WIRE
from .sockets import SocketSpec, parse_spec

log = structlog.get_logger("rtpagent.notify")

MAX_TAG = 4096


class NotifyListener:
    def __init__(self, spec: SocketSpec, on_tag: Callable[[str], None]) -> None:
        self.spec = spec
        self.on_tag = on_tag
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        if self.spec.kind == "unix":
            self._server = await asyncio.start_unix_server(self._conn, path=self.spec.path)
        elif self.spec.kind in ("tcp", "tcp6"):
            self._server = await asyncio.start_server(
                self._conn, self.spec.host, self.spec.port, reuse_address=True
            )
        else:
            raise ValueError(f"notify socket must be tcp: or unix:, not {self.spec}")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.LimitOverrunError:
                    log.warning("notify_line_oversized")
                    await reader.read(65536)
                    continue
                except asyncio.IncompleteReadError:
                    return
                tag = line.rstrip(b"\r\n").decode("utf-8", "replace")
                if tag and len(tag) <= MAX_TAG:
                    self.on_tag(tag)
        except (ConnectionError, OSError):
            return
        finally:
            writer.close()


class Notifier:
    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._conns: dict[str, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def send(self, target: str, tag: str) -> bool:
        """Deliver one notification; True when written. Never raises."""
        lock = self._locks.setdefault(target, asyncio.Lock())
        async with lock:
            for attempt in (1, 2):  # reconnect once, as RTPProxy retries
                try:
                    w = await self._writer(target)
                    w.write(f"{tag}\n".encode(WIRE))
                    await asyncio.wait_for(w.drain(), self.timeout)
                    return True
                except (OSError, ValueError, TimeoutError) as exc:
                    old = self._conns.pop(target, None)
                    if old is not None:
                        old[1].close()
                    if attempt == 2:
                        log.warning("notify_failed", target=target, error=str(exc))
            return False

    async def _writer(self, target: str) -> asyncio.StreamWriter:
        cur = self._conns.get(target)
        if cur is not None:
            reader, w = cur
            if not w.is_closing() and not reader.at_eof():
                return w
            # The SIP server closed it (restarted): a write would be lost.
            del self._conns[target]
            w.close()
        spec = parse_spec(target)
        if spec.kind == "unix":
            r, w = await asyncio.wait_for(asyncio.open_unix_connection(spec.path), self.timeout)
        elif spec.kind in ("tcp", "tcp6"):
            r, w = await asyncio.wait_for(
                asyncio.open_connection(spec.host, spec.port), self.timeout
            )
        else:
            raise ValueError(f"unsupported notify target {target}")
        self._conns[target] = (r, w)
        return w

    async def close(self) -> None:
        for _, w in self._conns.values():
            w.close()
        self._conns.clear()
