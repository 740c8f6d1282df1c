"""The upstream's cap on commands outstanding at RTPProxy."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, cast

from harness import wait_for
from rtpagent.sockets import parse_spec
from rtpagent.upstream import Upstream


class _Rtpp(asyncio.DatagramProtocol):
    """Records commands and when each body first arrived; answers only when told."""

    def __init__(self) -> None:
        self.got: list[tuple[str, tuple[Any, ...]]] = []
        self.first_seen: dict[str, float] = {}
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A datagram endpoint's transport (3.11's selector one does not subclass the ABC).
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self.first_seen.setdefault(data.decode().split()[1], time.monotonic())
        self.got.append((data.decode(), addr))

    def answer(self, i: int) -> None:
        cookie, _, body = self.got[i][0].partition(" ")
        assert self.transport is not None
        self.transport.sendto(f"{cookie} ok:{body}".encode(), self.got[i][1])


class _SendTimes(asyncio.DatagramTransport):
    """The upstream's transport, noting when each datagram was sent: the
    times the upstream keeps to, free of the receiver's own event-loop lag."""

    def __init__(self, inner: asyncio.DatagramTransport) -> None:
        super().__init__()
        self.inner = inner
        self.sent: dict[str, list[tuple[str, float]]] = {}  # body -> (cookie, at)

    def sendto(self, data: bytes | bytearray | memoryview, addr: Any = None) -> None:
        cookie, body = bytes(data).decode().split(" ", 1)
        self.sent.setdefault(body, []).append((cookie, time.monotonic()))
        self.inner.sendto(data, addr)

    def close(self) -> None:
        self.inner.close()


def _record_sends(up: Upstream) -> _SendTimes:
    assert up._transport is not None
    rec = _SendTimes(up._transport)
    up._transport = rec
    return rec


async def test_commands_beyond_the_cap_wait_in_order() -> None:
    loop = asyncio.get_running_loop()
    transport, rtpp = await loop.create_datagram_endpoint(_Rtpp, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    up = Upstream(parse_spec(f"udp:127.0.0.1:{port}"), timeout=0.3, retries=0, max_inflight=2)
    await up.start()
    try:
        replies: list[str | None] = []
        for n in range(5):
            up.call_cb(f"V{n}", replies.append)

        def sent() -> list[str]:
            return [c.split()[1] for c, _ in rtpp.got]

        await wait_for(lambda: len(rtpp.got) == 2)
        assert up._inflight == 2 and len(up._waiting) == 3  # the rest wait, unsent
        assert sent() == ["V0", "V1"]
        rtpp.answer(1)
        await wait_for(lambda: len(rtpp.got) == 3)
        assert replies == ["ok:V1"] and sent()[2] == "V2"
        rtpp.answer(2)
        rtpp.answer(0)
        await wait_for(lambda: len(rtpp.got) == 5)
        assert sent() == ["V0", "V1", "V2", "V3", "V4"]
        # Unanswered: given up after the timeout, and the slot is free again.
        await wait_for(lambda: len(replies) == 5, within=2.0)
        assert replies == ["ok:V1", "ok:V2", "ok:V0", None, None]
        task = asyncio.ensure_future(up.call("Q"))
        await wait_for(lambda: len(rtpp.got) == 6)
        rtpp.answer(5)
        assert await asyncio.wait_for(task, 2.0) == "ok:Q"
    finally:
        await up.close()
        transport.close()


async def test_commands_that_waited_too_long_are_given_up_unsent() -> None:
    """RTPProxy not keeping up: a command that waited in the agent longer than
    a command may take is answered None (the SIP server has retransmitted by
    then) and never sent; nothing is sent later than that."""
    loop = asyncio.get_running_loop()
    transport, rtpp = await loop.create_datagram_endpoint(_Rtpp, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    limit = 0.3  # timeout x (retries + 1)
    up = Upstream(parse_spec(f"udp:127.0.0.1:{port}"), timeout=limit, retries=0, max_inflight=1)
    await up.start()
    sends = _record_sends(up)
    try:
        replies: list[str | None] = []
        t0 = time.monotonic()
        for n in range(5):
            up.call_cb(f"V{n}", replies.append)
        await wait_for(lambda: len(replies) == 5, within=5.0)
        assert replies == [None] * 5  # RTPProxy never answers here
        assert "V0" in sends.sent and len(sends.sent) < 5  # some were given up unsent
        for v, [(_, at)] in sends.sent.items():
            assert at - t0 <= limit + 0.1, (v, at - t0)
        await wait_for(lambda: len(rtpp.first_seen) == len(sends.sent))  # and all arrived
    finally:
        await up.close()
        transport.close()


async def test_each_command_is_resent_a_timeout_after_its_own_send() -> None:
    """Commands sent at different times each go again `timeout` after their
    own (last) send, with the same cookie, `retries` times, then are given up;
    one answered meanwhile is never resent, one answered after a resend is
    answered once."""
    loop = asyncio.get_running_loop()
    transport, rtpp = await loop.create_datagram_endpoint(_Rtpp, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    timeout = 0.2
    up = Upstream(parse_spec(f"udp:127.0.0.1:{port}"), timeout=timeout, retries=2, max_inflight=8)
    await up.start()
    sends = _record_sends(up)
    arrivals: dict[str, int] = {}
    orig = rtpp.datagram_received

    def record(data: bytes, addr: tuple[Any, ...]) -> None:
        body = data.decode().split(" ", 1)[1]
        arrivals[body] = arrivals.get(body, 0) + 1
        orig(data, addr)
        # RTPProxy answers C at once (never resent), B after its first resend:
        # answered as they arrive, not when a poll of this test comes round.
        if (body, arrivals[body]) in {("C", 1), ("B", 2)}:
            rtpp.answer(len(rtpp.got) - 1)

    rtpp.datagram_received = record  # type: ignore[method-assign]
    try:
        replies: dict[str, list[str | None]] = {"A": [], "B": [], "C": []}
        up.call_cb("A", replies["A"].append)
        await asyncio.sleep(0.07)  # sent at different times (the scenario)
        up.call_cb("B", replies["B"].append)
        await asyncio.sleep(0.07)
        up.call_cb("C", replies["C"].append)
        await wait_for(lambda: replies["A"] == [None], within=3.0)
        await asyncio.sleep(timeout * 1.5)  # past any further resend's time: none may come
        assert replies == {"A": [None], "B": ["ok:B"], "C": ["ok:C"]}
        assert arrivals == {"A": 3, "B": 2, "C": 1}
        assert {body: len(times) for body, times in sends.sent.items()} == arrivals
        for times in sends.sent.values():
            assert len({c for c, _ in times}) == 1  # a resend keeps its cookie
            gaps = [b - a for (_, a), (_, b) in itertools.pairwise(times)]
            assert all(timeout - 0.005 <= g <= timeout + 0.1 for g in gaps), gaps
        assert up._inflight == 0 and not up._pending
    finally:
        await up.close()
        transport.close()
