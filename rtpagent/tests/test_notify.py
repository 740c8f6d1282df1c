"""Timeout notifications reach the SIP server's socket, also after it restarted."""

from __future__ import annotations

import asyncio

from p4relay_testsupport import free_port, wait_for
from rtpagent.notify import Notifier


class SipServerSocket:
    """A SIP server's timeout listener: one line per notification."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.got: list[bytes] = []
        self._server: asyncio.AbstractServer | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        async def conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self._writers.append(w)
            while line := await r.readline():
                self.got.append(line)

        self._server = await asyncio.start_server(conn, "127.0.0.1", self.port, reuse_address=True)

    async def stop(self) -> None:
        """The SIP server goes away: its listener and every connection close."""
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.close()
        await self._server.wait_closed()


async def test_notification_after_the_sip_server_restarted() -> None:
    port = free_port()
    target = f"tcp:127.0.0.1:{port}"
    first = SipServerSocket(port)
    await first.start()
    n = Notifier(timeout=2.0)
    try:
        assert await n.send(target, "call-1 tag-a")
        await wait_for(lambda: first.got)
        assert first.got == [b"call-1 tag-a\n"]
        await first.stop()  # e.g. the SIP server restarts
        second = SipServerSocket(port)
        await second.start()
        # The old connection's close has reached the agent (its reader at EOF).
        await wait_for(lambda: all(r.at_eof() for r, _ in n._conns.values()))
        assert await n.send(target, "call-2 tag-b")
        await wait_for(lambda: second.got, within=3.0)
        assert second.got == [b"call-2 tag-b\n"]
        await second.stop()
    finally:
        await n.close()


async def test_unreachable_target_reported_not_raised() -> None:
    n = Notifier(timeout=0.5)
    try:
        assert not await n.send(f"tcp:127.0.0.1:{free_port()}", "x y")
    finally:
        await n.close()
