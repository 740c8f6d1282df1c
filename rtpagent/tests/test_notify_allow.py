"""Timeout sockets a U may name: the agent notifies only those it is allowed
to; any other U goes to RTPProxy unchanged and the agent never connects to
the socket it names."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import cast

import pytest
from fakeswitch import FakeSwitch
from harness import Client, free_port, settings, wait_for
from pydantic import ValidationError
from rtpagent.agent import NotifyAllow
from rtpagent.app import App
from rtpagent.config import Settings
from rtpagent.protocol import WIRE

from rtpagent import metrics


class Listener:
    """A TCP listener that counts every connection and line it receives."""

    def __init__(self) -> None:
        self.port = free_port()
        self.connections = 0
        self.lines: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        async def conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self.connections += 1
            while line := await r.readline():
                self.lines.append(line)
            w.close()

        self._server = await asyncio.start_server(conn, "127.0.0.1", self.port)

    @property
    def spec(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"

    def close(self) -> None:
        assert self._server is not None
        self._server.close()


async def start(tmp: Path, fake: FakeSwitch, **kw: object) -> tuple[App, Client]:
    cfg = settings(tmp, switch="fake:1", **kw)
    app = App(cfg, switch=fake)
    await app.start()
    return app, Client(int(cfg.listen[0].rsplit(":", 1)[1]))


def refused() -> float:
    return float(metrics.NOTIFY_REFUSED._value.get())


async def test_allowed_socket_notified_on_media_timeout(tmp_path: Path) -> None:
    sip = Listener()
    await sip.start()
    fake = FakeSwitch()
    fake.up = False  # the call stays on RTPProxy, which times it out
    app, cl = await start(tmp_path, fake, rtpproxy_ttl=2.0, notify_allow=[sip.spec])
    try:
        before = refused()
        await cl.cmd(f"U na1 198.18.1.10 6000 f;1 {sip.spec} dlg%3A1")
        await cl.cmd("L na1 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: sip.lines, within=10.0)
        assert sip.lines == [b"dlg:1\n"]
        assert refused() == before
    finally:
        await app.stop()
        cl.close()
        sip.close()


async def test_foreign_socket_never_contacted(tmp_path: Path) -> None:
    allowed = Listener()
    foreign = Listener()
    await allowed.start()
    await foreign.start()
    fake = FakeSwitch()
    fake.up = False
    app, cl = await start(tmp_path, fake, rtpproxy_ttl=2.0, notify_allow=[allowed.spec])
    try:
        before = refused()
        u = await cl.cmd(f"U na2 198.18.1.10 6000 f;1 {foreign.spec} dlg%3A2")
        assert u is not None and u.split()[0].isdigit(), u
        await cl.cmd("L na2 198.18.2.10 7000 f;1 t;1")
        assert refused() == before + 1
        s = next(iter(app.table))
        assert s.notify_socket is None and s.notify_token is None
        # RTPProxy's TTL (2 s) passes: the call times out there, and the agent
        # has handled that (told, or asked) when the call is gone from its table.
        await wait_for(lambda: not app.table, within=15.0)
        assert foreign.connections == 0 and foreign.lines == []
        assert allowed.connections == 0
        # A second U for the call: counted again, still not contacted.
        await cl.cmd(f"U na2 198.18.1.10 6000 f;1 t;1 {foreign.spec} dlg%3A2")
        assert refused() == before + 2
    finally:
        await app.stop()
        cl.close()
        allowed.close()
        foreign.close()


class RecordingRtpproxy(asyncio.DatagramProtocol):
    """Stands in for RTPProxy's control socket: records each datagram and
    answers with a port, as RTPProxy answers a U."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # uvloop's is no subclass

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.got.append(data)
        cookie = data.split(b" ", 1)[0]
        assert self.transport is not None
        self.transport.sendto(cookie + b" 36010\n", addr)


async def test_foreign_u_reaches_rtpproxy_unchanged(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    port = free_port(socket.SOCK_DGRAM)
    transport, rec = await loop.create_datagram_endpoint(
        RecordingRtpproxy, local_addr=("127.0.0.1", port)
    )
    fake = FakeSwitch()
    allowed = f"tcp:127.0.0.1:{free_port()}"
    app, cl = await start(tmp_path, fake, rtpproxy=f"udp:127.0.0.1:{port}", notify_allow=[allowed])
    try:
        before = refused()
        for i, target in enumerate(
            (
                "tcp:127.0.0.1:9",
                "tcp:localhost:9",  # a name: never resolved, never matches a literal entry
                "unix:/run/some.sock",
                f"tcp:127.0.0.2:{allowed.rsplit(':', 1)[1]}",
            )
        ):
            body = f"U  nf{i} 198.18.1.10\t6000 f;1 {target} tag%20x"
            rec.got.clear()
            assert await cl.cmd(body) == "36010\n"
            assert len(rec.got) == 1
            assert rec.got[0].split(b" ", 1)[1] == body.encode(WIRE)
        assert refused() == before + 4
        # The allowed socket is still replaced by the agent's own.
        rec.got.clear()
        await cl.cmd(f"U na3 198.18.1.10 6000 f;1 {allowed} tag1")
        sent = rec.got[0].decode(WIRE)
        assert app.cfg.notify_listen is not None
        assert allowed not in sent and app.cfg.notify_listen in sent
        assert refused() == before + 4
    finally:
        await app.stop()
        cl.close()
        transport.close()


def test_allow_list_compares_what_a_socket_names() -> None:
    allow = NotifyAllow(["tcp:127.0.0.1:5000", "tcp6:[::1]:5001", "unix:/run/sip.sock"])
    assert allow.permits("tcp:127.0.0.1:5000")
    assert allow.permits("TCP:127.0.0.1:5000")
    assert allow.permits("tcp:[0:0::1]:5001")
    assert allow.permits("tcp:::1:5001")
    assert allow.permits("unix:/run/sip.sock")
    assert not allow.permits("tcp:127.0.0.1:5001")
    assert not allow.permits("tcp:127.0.0.2:5000")
    assert not allow.permits("tcp:localhost:5000")
    assert not allow.permits("tcp:2130706433:5000")
    assert not allow.permits("udp:127.0.0.1:5000")
    assert not allow.permits("unix:/run/../run/sip.sock")
    assert not allow.permits("unix:/run/sip.sock2")
    assert not allow.permits("/run/sip.sock")
    assert not allow.permits("")


def test_notify_allow_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rtpagent.config import load

    monkeypatch.setenv(
        "P4RELAY_RTPAGENT_NOTIFY_ALLOW", json.dumps(["tcp:127.0.0.1:22225", "unix:/run/sip.sock"])
    )
    assert load(None, {}).notify_allow == ["tcp:127.0.0.1:22225", "unix:/run/sip.sock"]
    monkeypatch.delenv("P4RELAY_RTPAGENT_NOTIFY_ALLOW")
    toml = tmp_path / "a.toml"
    toml.write_text('[rtpagent]\nnotify_allow = ["tcp:10.0.0.1:5"]\n')
    assert load(str(toml), {}).notify_allow == ["tcp:10.0.0.1:5"]
    assert Settings().notify_allow == []
    for bad in ("udp:127.0.0.1:5", "tcp:sip.example.com:5", "tcp:1.2.3.4", "unix:", "x"):
        with pytest.raises(ValidationError):
            Settings(notify_allow=[bad])


async def test_switch_idle_notifies_no_socket_outside_the_list(tmp_path: Path) -> None:
    """A session holding a socket the list no longer permits (journalled under
    another list) ends on the switch's idle timeout without a connection to it."""

    allowed = Listener()
    foreign = Listener()
    await allowed.start()
    await foreign.start()
    fake = FakeSwitch()
    app, cl = await start(tmp_path, fake, notify_allow=[allowed.spec])
    try:
        await cl.cmd(f"U si1 198.18.1.10 6000 f;1 {allowed.spec} dlg%3A3")
        await cl.cmd("L si1 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: fake.relays)
        s = next(iter(app.table))
        assert s.notify_socket == allowed.spec
        s.notify_socket = foreign.spec
        before = refused()
        fake.idle_all()
        await wait_for(lambda: len(app.table) == 0)
        await wait_for(lambda: refused() > before)
        # No event says "nothing was connected": a connection made anyway
        # (after the refusal was counted) would arrive within this.
        await asyncio.sleep(0.5)
        assert foreign.connections == 0 and allowed.connections == 0
    finally:
        await app.stop()
        cl.close()
        allowed.close()
        foreign.close()


async def test_a_session_keeps_only_its_latest_token(tmp_path: Path) -> None:
    """Each U with a timeout socket gets a new token; RTPProxy keeps only the
    latest U's, so the earlier one names nothing any more (a notification
    with it is unknown), and a D leaves no token behind."""
    sip = Listener()
    await sip.start()
    fake = FakeSwitch()
    fake.up = False
    app, cl = await start(tmp_path, fake, notify_allow=[sip.spec])
    try:
        assert app.agent is not None
        await cl.cmd(f"U tk1 198.18.1.10 6000 f;1 {sip.spec} dlg%3A1")
        s = next(iter(app.table))
        first = s.notify_token
        assert first is not None and app.agent.notify_tokens == {first: s.uid}
        await cl.cmd("U tk1 198.18.1.10 6000 f;1 t;1")  # no socket: the handler is dropped
        await cl.cmd(f"U tk1 198.18.1.10 6002 f;1 t;1 {sip.spec} dlg%3A1")
        second = s.notify_token
        assert second not in (None, first) and app.agent.notify_tokens == {second: s.uid}
        unknown = metrics.RTPP_TIMEOUTS.labels("unknown")._value.get()
        app.agent.on_rtpproxy_timeout(first)
        assert metrics.RTPP_TIMEOUTS.labels("unknown")._value.get() == unknown + 1
        assert s.uid in app.table.by_uid
        await cl.cmd("D tk1 f t")
        assert app.agent.notify_tokens == {} and not app.table.by_uid
    finally:
        await app.stop()
        cl.close()
        sip.close()


async def test_callee_update_naming_a_socket_without_tag(tmp_path: Path) -> None:
    """Kamailio's callee re-INVITE with its timeout_socket set: `U <call-id>
    <addr> <port> <callee tag> <caller tag> <socket>`, no notify tag. RTPProxy
    updates the call's one session (the reply is the caller's port, as the
    answer's was; no second session) and a media timeout reaches the socket
    with the dialog's call-id and caller tag."""
    sip = Listener()
    await sip.start()
    fake = FakeSwitch()
    fake.up = False  # the call stays on RTPProxy, which times it out
    app, cl = await start(tmp_path, fake, rtpproxy_ttl=2.0, notify_allow=[sip.spec])
    try:
        offer = await cl.cmd("U kc1 198.18.1.10 6000 f;1")
        answer = await cl.cmd("L kc1 198.18.2.10 7000 f;1 t;1")
        assert offer is not None and answer is not None
        reinvite = await cl.cmd(f"U kc1 198.18.2.10 7002 t;1 f;1 {sip.spec}")
        assert reinvite is not None
        assert reinvite.split()[0] == answer.split()[0] != offer.split()[0]
        assert len(app.table) == 1
        (s,) = list(app.table)
        assert (s.tag, s.to_tag, s.notify_socket) == ("f;1", "t;1", sip.spec)
        await wait_for(lambda: sip.lines, within=10.0)
        assert sip.lines == [b"kc1 f\n"]
    finally:
        await app.stop()
        cl.close()
        sip.close()
