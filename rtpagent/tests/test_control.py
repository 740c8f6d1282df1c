"""Control path against the real RTPProxy (rtp.io): pass-through, bad input,
retransmissions, stream sockets, both timeout directions."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from fakeswitch import FakeSwitch
from harness import Client, free_port, free_udp_pair, settings, wait_for
from p4relay_switch import RelayIdle
from rtpagent.app import App
from rtpagent.protocol import MAX_COMMAND_BYTES
from rtpagent.state import OffloadState

from rtpagent import metrics


async def start(tmp: Path, fake: FakeSwitch | None = None, **kw: object) -> tuple[App, Client]:
    cfg = settings(tmp, switch="fake:1", **kw)
    app = App(cfg, switch=fake or FakeSwitch())
    await app.start()
    return app, Client(int(cfg.listen[0].rsplit(":", 1)[1]))


async def test_replies_pass_through_like_rtpproxy(tmp_path: Path) -> None:
    app, cl = await start(tmp_path)
    assert app.upstream is not None
    direct = Client(int(app.upstream.spec.port))
    try:
        for body in (
            "V",
            "VF 20081224",
            "VF 20991231",
            "bogus",
            "U",
            "Q nocall f t",
            "D nocall f",
            "U c 1.2.3.999 5000 f",
            "Ux c 1.2.3.4 5000 f",
            "Ix",
            "G nsess_created",
        ):
            via_agent = await cl.cmd(body)
            straight = await direct.cmd(body)
            assert via_agent is not None, body
            if body.startswith("G"):
                assert via_agent.split()[0].isdigit()
            else:
                assert via_agent == straight, (body, via_agent, straight)
        # garbage bytes: RTPProxy's answer comes back, the agent lives on
        r = await cl.raw(b"ck1 \xff\xfe\x00U\x01")
        assert r is not None and r.startswith(b"ck1 E")
        assert await cl.cmd("V") == "20040107\n"
    finally:
        await app.stop()
        cl.close()
        direct.close()


async def test_bad_input_answered_never_crashes(tmp_path: Path) -> None:
    app, cl = await start(tmp_path)
    try:
        assert await cl.raw(b"onlycookie") == b"onlycookie E5\n"
        big = b"ck2 U " + b"x" * MAX_COMMAND_BYTES
        assert await cl.raw(big) == b"ck2 E25\n"
        assert await cl.raw(b"") == b"E5\n"  # RTPProxy's answer to an empty datagram
        assert await cl.raw(b"ck\x00 V") == b"E5\n"  # a NUL in the cookie: no cookie back
        for body in (
            "U c1 999.1.1.1 70000 f",
            "L c1 1.2.3.4 -5 f t",
            "U c1 1.2.3.4 0 f",
            "Dz c f",
            "Uz c1 1.2.3.4 5 f",
            "U " + "a" * 600 + " 1.2.3.4 5 f",
        ):
            r = await cl.cmd(body)
            assert r is not None, body
        assert await cl.cmd("V") == "20040107\n"
        assert metrics.BAD_INPUT.labels("command")._value.get() > 0
    finally:
        await app.stop()
        cl.close()


async def test_rtpproxy_silent(tmp_path: Path) -> None:
    port = free_port(socket.SOCK_DGRAM)  # nobody listens there
    app, cl = await start(tmp_path, rtpproxy=f"udp:127.0.0.1:{port}", notify_listen="")
    try:
        before = metrics.UPSTREAM_TIMEOUTS._value.get()
        assert await cl.cmd("V", wait=2.0) is None
        assert metrics.UPSTREAM_TIMEOUTS._value.get() == before + 1
    finally:
        await app.stop()
        cl.close()


async def test_retransmission_executes_once(tmp_path: Path) -> None:
    app, cl = await start(tmp_path)
    try:
        a = await cl.raw(b"same U rc 198.18.1.10 6000 f;1")
        b = await cl.raw(b"same U rc 198.18.1.10 6000 f;1")
        assert a == b and a is not None
        assert len(app.table) == 1
    finally:
        await app.stop()
        cl.close()


async def test_unix_stream_socket(tmp_path: Path) -> None:
    path = tmp_path / "agent.sock"
    port = free_udp_pair()
    cfg_listen = [f"udp:127.0.0.1:{port}", f"unix:{path}"]
    app, cl = await start(tmp_path, listen=cfg_listen)
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b"V")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(100), 3) == b"20040107\n"
        writer.write(b"U st 198.18.1.10 6000 f;1")
        await writer.drain()
        reply = await asyncio.wait_for(reader.read(100), 3)
        assert reply.split()[0].isdigit()
        writer.close()
    finally:
        await app.stop()
        cl.close()


async def _sip_notify_server() -> tuple[asyncio.Server, int, list[bytes]]:
    got: list[bytes] = []

    async def conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while line := await r.readline():
            got.append(line)

    port = free_port()
    return await asyncio.start_server(conn, "127.0.0.1", port), port, got


async def test_no_false_rtpproxy_timeout_for_offloaded(tmp_path: Path) -> None:
    srv, port, got = await _sip_notify_server()
    fake = FakeSwitch()
    app, cl = await start(
        tmp_path,
        fake,
        rtpproxy_ttl=2.0,
        embedded_args=["-n", f"tcp:127.0.0.1:{port}"],
        notify_allow=[f"tcp:127.0.0.1:{port}"],
    )
    try:
        await cl.cmd(f"U tt 198.18.1.10 6000 f;1 tcp:127.0.0.1:{port} tag1")
        await cl.cmd("L tt 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: fake.relays)
        await asyncio.sleep(5.0)  # > 2 TTLs without a packet at RTPProxy
        q = await cl.cmd("Q tt f;1 t;1")
        assert q is not None and not q.startswith("E"), q
        assert got == []
        assert next(iter(app.table)).state is OffloadState.OFFLOADED
    finally:
        await app.stop()
        cl.close()
        srv.close()


async def test_refreshes_reach_rtpproxy_a_few_at_a_time(tmp_path: Path) -> None:
    """Calls set up together fall due for their refresh together: RTPProxy
    gets them a few at a time (a SIP server's command never queues behind
    all of them), and every call is refreshed all the same."""
    from rtpagent.agent import OWN_INFLIGHT

    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake, rtpproxy_ttl=1.5)  # a refresh due every 0.5 s
    assert app.agent is not None
    upstream = app.agent.upstream
    calls = 4 * OWN_INFLIGHT
    inflight, most, refreshed = 0, 0, set()
    send = upstream.call

    async def counted(body: str) -> str:
        nonlocal inflight, most
        if not body.startswith("L"):
            return await send(body)
        inflight += 1
        most = max(most, inflight)
        try:
            await asyncio.sleep(0.005)  # RTPProxy's turn: others due meanwhile must wait
            return await send(body)
        finally:
            inflight -= 1
            refreshed.add(body.split()[1])

    try:
        for n in range(calls):
            await cl.cmd(f"U rf{n} 198.18.1.10 {6000 + 2 * n} f;1")
            await cl.cmd(f"L rf{n} 198.18.2.10 {7000 + 2 * n} f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4 * calls)
        upstream.call = counted  # type: ignore[method-assign]
        await wait_for(lambda: len(refreshed) == calls, within=10.0)
        assert most <= OWN_INFLIGHT, most
    finally:
        upstream.call = send  # type: ignore[method-assign]
        await app.stop()
        cl.close()


async def test_idle_calls_deleted_at_rtpproxy_a_few_at_a_time(tmp_path: Path) -> None:
    """Calls set up together go idle in one sweep of the switch: their deletes
    reach RTPProxy a few at a time (a SIP server's command never queues behind
    all of them), every call still ends, and one its SIP server ended while
    its delete waited its turn is not deleted again."""
    from rtpagent.agent import OWN_INFLIGHT

    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake)
    assert app.agent is not None
    upstream = app.agent.upstream
    calls = 4 * OWN_INFLIGHT
    sip_delete = f"D id{calls - 1} f t"
    inflight, most, deleted = 0, 0, []
    rtpproxy_turn = asyncio.Event()  # RTPProxy answers the agent's deletes once set
    send = upstream.call

    async def counted(body: str) -> str:
        nonlocal inflight, most
        if body == sip_delete or not body.startswith(("D", "L")):
            return await send(body)
        inflight += 1
        most = max(most, inflight)
        try:
            await rtpproxy_turn.wait()
            return await send(body)
        finally:
            inflight -= 1
            deleted.append(body.split()[1])

    try:
        for n in range(calls):
            await cl.cmd(f"U id{n} 198.18.1.10 {6000 + 2 * n} f;1")
            await cl.cmd(f"L id{n} 198.18.2.10 {7000 + 2 * n} f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4 * calls)
        upstream.call = counted  # type: ignore[method-assign]
        fake.idle_all()
        await wait_for(lambda: inflight > 0)
        assert await cl.cmd(sip_delete) == "0\n"  # its SIP server's, meanwhile
        rtpproxy_turn.set()
        await wait_for(lambda: not app.table.by_uid and not fake.relays, within=10.0)
        assert most <= OWN_INFLIGHT, most
        assert sorted(deleted) == sorted(f"id{n}" for n in range(calls - 1)), deleted
    finally:
        upstream.call = send  # type: ignore[method-assign]
        await app.stop()
        cl.close()


async def test_an_idle_sweep_is_handled_a_slice_at_a_time(tmp_path: Path) -> None:
    """An idle sweep brings thousands of notifications at once: they are
    handled a slice per event-loop turn, so a command arriving meanwhile
    waits for one slice, not for the whole sweep; every call still ends."""
    from rtpagent.offload import EVENTS_PER_TURN

    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake)
    calls = 4 * EVENTS_PER_TURN
    handled = 0
    on_idle = app.offloader.events.on_idle

    def counted(ev: RelayIdle) -> None:
        nonlocal handled
        handled += 1
        on_idle(ev)

    app.offloader.events.on_idle = counted  # type: ignore[method-assign]
    try:
        for n in range(calls):
            await cl.cmd(f"U sw{n} 198.18.1.10 {6000 + 2 * n} f;1")
            await cl.cmd(f"L sw{n} 198.18.2.10 {7000 + 2 * n} f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4 * calls)
        fake.idle_all()  # two RTP entries a call
        await asyncio.sleep(0)  # one turn of the loop: the handler's, then this test's
        assert 0 < handled <= EVENTS_PER_TURN, handled
        await wait_for(lambda: not app.table.by_uid and not fake.relays, within=10.0)
        assert handled == 2 * calls
    finally:
        await app.stop()
        cl.close()


async def test_switch_notifications_converted_a_slice_at_a_time() -> None:
    """The switch client's notifications (an idle sweep's thousands) become
    the agent's events a slice per event-loop turn, all of them in the end."""
    from p4relay_switch import IdleTimeout, names
    from rtpagent.bfrt import NOTIFICATIONS_PER_TURN, BfrtSwitch

    sw = BfrtSwitch(f"127.0.0.1:{free_port()}")  # never connected: its queues only
    total = 4 * NOTIFICATIONS_PER_TURN
    for n in range(total):
        key: dict[str, int] = {
            names.K_SRC_ADDR: 0xC6120000 + n,
            names.K_DST_ADDR: 0x7F000001,
            names.K_SRC_PORT: 6000,
            names.K_DST_PORT: 30000,
            names.K_BOUND_PORT: 1,
        }
        sw.client._queue.put_nowait(IdleTimeout(names.RELAY, dict(key), 0, True))
    pump = asyncio.create_task(sw._pump())
    try:
        await asyncio.sleep(0)  # the pump's first turn
        assert 0 < sw._events.qsize() <= NOTIFICATIONS_PER_TURN, sw._events.qsize()
        await wait_for(lambda: sw._events.qsize() == total)
    finally:
        pump.cancel()


async def test_rtpproxy_timeout_forwarded_for_calls_it_carries(tmp_path: Path) -> None:
    srv, port, got = await _sip_notify_server()
    fake = FakeSwitch()
    fake.up = False  # the call stays on RTPProxy (fail-open)
    app, cl = await start(
        tmp_path,
        fake,
        rtpproxy_ttl=2.0,
        embedded_args=["-n", f"tcp:127.0.0.1:{port}"],
        notify_allow=[f"tcp:127.0.0.1:{port}"],
    )
    try:
        await cl.cmd(f"U to 198.18.1.10 6000 f;1 tcp:127.0.0.1:{port} dlg%3A7")
        await cl.cmd("L to 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: got, within=10.0)
        assert got == [b"dlg:7\n"]
        await wait_for(lambda: len(app.table) == 0)
    finally:
        await app.stop()
        cl.close()
        srv.close()


async def test_udp6_listener(tmp_path: Path) -> None:
    import socket as so

    probe = so.socket(so.AF_INET6, so.SOCK_DGRAM)
    try:
        probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = probe.getsockname()[1]
    probe.close()
    udp = free_udp_pair()
    app, cl = await start(tmp_path, listen=[f"udp:127.0.0.1:{udp}", f"udp6:[::1]:{port}"])
    try:
        loop = asyncio.get_running_loop()
        s6 = so.socket(so.AF_INET6, so.SOCK_DGRAM)
        s6.setblocking(False)
        await loop.sock_sendto(s6, b"c6 V", ("::1", port))
        assert await asyncio.wait_for(loop.sock_recv(s6, 100), 3) == b"c6 20040107\n"
        s6.close()
    finally:
        await app.stop()
        cl.close()


async def test_rtpproxy_on_unix_stream_socket(tmp_path: Path) -> None:
    """RTPProxy behind a unix: control socket (stream mode, no cookies)."""
    from harness import RtpproxyProcess

    sock = tmp_path / "rtpp.sock"
    rtpp = RtpproxyProcess(0, "127.0.0.1", "39000-39999", [])
    rtpp.cmd[rtpp.cmd.index("--control") + 1] = f"unix:{sock}"
    rtpp.start()
    try:
        app, cl = await start(tmp_path, rtpproxy=f"unix:{sock}", notify_listen="")
        try:
            assert await cl.cmd("V") == "20040107\n"
            r = await cl.cmd("U ux 198.18.1.10 6000 f;1")
            assert r is not None and r.split()[0].isdigit()
            r = await cl.cmd("L ux 198.18.2.10 7000 f;1 t;1")
            assert r is not None and r.split()[0].isdigit()
            assert await cl.cmd("D ux f t") == "0\n"
        finally:
            await app.stop()
            cl.close()
    finally:
        rtpp.stop()
