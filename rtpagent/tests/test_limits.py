"""Fuzzed or runaway command sources: sessions the agent learnt age out with
RTPProxy's, and what one source may create is bounded (real rtp.io RTPProxy)."""

from __future__ import annotations

from pathlib import Path

from differential import active_sessions
from fakeswitch import FakeSwitch
from harness import Client, settings, wait_for
from rtpagent.admission import REFUSED
from rtpagent.app import App


async def start(tmp: Path, fake: FakeSwitch, **kw: object) -> tuple[App, Client]:
    cfg = settings(tmp, switch="fake:1", **kw)
    app = App(cfg, switch=fake)
    await app.start()
    return app, Client(int(cfg.listen[0].rsplit(":", 1)[1]))


async def test_sessions_age_out_with_rtpproxy(tmp_path: Path) -> None:
    """RTPProxy times out sessions nobody is told about (no notify socket in
    their U): the agent finds out within about a TTL and forgets them too."""
    fake = FakeSwitch()
    fake.up = False  # the calls stay on RTPProxy
    app, cl = await start(tmp_path, fake, rtpproxy_ttl=2.0, notify_listen="")
    try:
        assert await cl.cmd("U old1 198.18.1.10 6000 f;1")
        assert await cl.cmd("L old1 198.18.2.10 7000 f;1 t;1")
        assert await cl.cmd("U old2 198.18.1.10 6100 f;1")  # never answered
        assert len(app.table) == 2
        await wait_for(lambda: len(app.table) == 0, within=15.0, interval=0.2)
        assert await cl.cmd("Q old1 f;1 t;1") == "E50\n"  # gone at RTPProxy too
    finally:
        await app.stop()
        cl.close()


async def test_sessions_per_source_are_bounded(tmp_path: Path) -> None:
    app, a = await start(tmp_path, FakeSwitch(), max_sessions_per_source=3)
    b = Client(a.addr[1])  # another socket: the same host, a different port
    try:
        before = REFUSED.labels("sessions")._value.get()
        for n in range(3):
            r = await a.cmd(f"U s{n} 198.18.1.10 {6000 + 2 * n} f;1")
            assert r is not None and r.split()[0].isdigit(), r
        assert await a.cmd("U s3 198.18.1.10 6010 f;1") == "E98\n"
        assert await b.cmd("U s4 198.18.1.10 6012 f;1") == "E98\n"  # limits are per host
        assert REFUSED.labels("sessions")._value.get() == before + 2
        r = await a.cmd("U s0 198.18.1.10 6000 f;1")  # an existing session: never refused
        assert r is not None and r.split()[0].isdigit(), r
        assert app.upstream is not None
        rtpp = Client(int(app.upstream.spec.port))
        info = await rtpp.cmd("I")
        rtpp.close()
        assert info is not None and active_sessions(info.encode()) == 3  # E98 never got there
        assert await a.cmd("D s1 f") == "0\n"
        await wait_for(lambda: app.admission.held.get("127.0.0.1") == 2)
        r = await a.cmd("U s5 198.18.1.10 6014 f;1")
        assert r is not None and r.split()[0].isdigit(), r
    finally:
        await app.stop()
        a.close()
        b.close()


async def test_new_sessions_rate_is_bounded(tmp_path: Path) -> None:
    app, cl = await start(tmp_path, FakeSwitch(), new_sessions_per_second=0.5, new_sessions_burst=2)
    try:
        before = REFUSED.labels("rate")._value.get()
        assert (await cl.cmd("U r0 198.18.1.10 6000 f;1") or "E").split()[0].isdigit()
        assert (await cl.cmd("U r1 198.18.1.10 6002 f;1") or "E").split()[0].isdigit()
        assert await cl.cmd("U r2 198.18.1.10 6004 f;1") == "E98\n"
        assert REFUSED.labels("rate")._value.get() == before + 1
        assert (await cl.cmd("L r0 198.18.2.10 7000 f;1 t;1") or "E").split()[0].isdigit()
    finally:
        await app.stop()
        cl.close()
