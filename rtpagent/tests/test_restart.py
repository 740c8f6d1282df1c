"""Restart safety: RTPProxy runs as its own process; the agent restarts while
calls are up; the switch restarts under the agent."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from fakeswitch import FakeSwitch, port_of
from harness import (
    Client,
    RtpproxyProcess,
    Softswitch,
    free_port,
    free_udp_pair,
    route_all,
    settings,
    wait_for,
)
from p4relay_switch import SwitchClient
from rtpagent.app import App
from rtpagent.bfrt import BfrtSwitch
from rtpagent.state import OffloadState
from rtpagent.switchport import Switch


async def _scenario(
    tmp: Path,
    make_switch: Callable[[], Switch],
    count: Callable[[], Awaitable[tuple[int, int, int]]],
) -> None:
    port = free_udp_pair()
    notify = free_port()
    rtpp = RtpproxyProcess(
        port + 1, "127.0.0.1", "37000-37999", ["-T", "60", "-n", f"tcp:127.0.0.1:{notify}"]
    )
    rtpp.start()
    try:
        kw = dict(
            port=port,
            rtpproxy=f"udp:127.0.0.1:{port + 1}",
            notify_listen=f"tcp:127.0.0.1:{notify}",
            relay_ports="37000-37999",
        )
        cfg = settings(tmp, **kw)
        app1 = App(cfg, switch=make_switch())
        await app1.start()
        cl = Client(port)
        for call in ("keep", "gone"):
            assert await cl.cmd(f"U {call} 198.18.1.10 {6000 if call == 'keep' else 6100} f;1")
            assert await cl.cmd(f"L {call} 198.18.2.10 {7000 if call == 'keep' else 7100} f;1 t;1")
        await wait_for(lambda: len(app1.offloader.plans) == 2)
        before = await count()
        assert before == (8, 4, 8)  # relays, legs, guards
        await app1.stop()
        # While the agent is down the SIP server's D reaches RTPProxy some other way.
        direct = Client(port + 1)
        assert await direct.cmd("D gone f t") == "0\n"
        direct.close()
        app2 = App(settings(tmp, **kw), switch=make_switch())
        await app2.start()
        await app2.offloader.drained()
        await asyncio.sleep(0.3)
        assert [s.call_id for s in app2.table] == ["keep"]
        assert next(iter(app2.table)).state is OffloadState.OFFLOADED
        assert await count() == (4, 2, 4)  # the dead call's entries swept, the live one untouched
        q = await cl.cmd("Q keep f;1 t;1")
        assert q is not None and not q.startswith("E")
        assert await cl.cmd("D keep f t") == "0\n"
        await wait_for(lambda: not app2.offloader.plans)
        assert await count() == (0, 0, 0)
        await app2.stop()
        cl.close()
    finally:
        rtpp.stop()


async def test_agent_restart_fake_switch(tmp_path: Path) -> None:
    fake = FakeSwitch()

    async def count() -> tuple[int, int, int]:
        return len(fake.relays), len(fake.legs), len(fake.guards)

    await _scenario(tmp_path, lambda: fake, count)


async def test_agent_restart_softswitch(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    async def count() -> tuple[int, int, int]:
        return (
            len(await probe.read("pipe.Ingress.relay")),
            len(await probe.read("pipe.Ingress.leg_rewrite")),
            len(await probe.read("pipe.Ingress.relay_guard")),
        )

    await _scenario(
        tmp_path,
        lambda: BfrtSwitch(sw.address, relay_addrs=["127.0.0.1"], port_min=37000, port_max=37999),
        count,
    )


async def test_switch_restart_reinstalls(tmp_path: Path, sw: Softswitch) -> None:
    cfg = settings(tmp_path, switch=sw.address)
    app = App(cfg)
    await app.start()
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
    try:
        await cl.cmd("U sr 198.18.1.10 6000 f;1")
        await cl.cmd("L sr 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: app.offloader.plans)
        sw.stop()
        sw.start()  # same address, empty tables
        await route_all(sw.address)  # the bootstrap's routes
        probe = SwitchClient(sw.address, client_id=9)
        await probe.connect()

        async def reinstalled() -> bool:
            return len(await probe.read("pipe.Ingress.relay")) == 4

        await wait_for(reinstalled, within=20.0, interval=0.2)
        assert len(await probe.read("pipe.Ingress.leg_rewrite")) == 2
        assert len(await probe.read("pipe.Ingress.relay_guard")) == 4
        await probe.close()
    finally:
        await app.stop()
        cl.close()


pytestmark = pytest.mark.timeout(120)


async def test_agent_killed_and_restarted(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    """SIGKILL (no clean shutdown): the journal and the switch read-back still
    rebuild the state; the call keeps its entries and ends cleanly later."""
    import signal
    import subprocess
    import sys

    from harness import record_pid

    port = free_udp_pair()
    notify = free_port()
    rtpp = RtpproxyProcess(
        port + 1, "127.0.0.1", "37000-37999", ["-T", "60", "-n", f"tcp:127.0.0.1:{notify}"]
    )
    rtpp.start()
    cmd = [
        sys.executable,
        "-m",
        "rtpagent.cli",
        "--listen",
        f"udp:127.0.0.1:{port}",
        "--rtpproxy",
        f"udp:127.0.0.1:{port + 1}",
        "--relay-addr",
        "127.0.0.1",
        "--relay-ports",
        "37000-37999",
        "--notify-listen",
        f"tcp:127.0.0.1:{notify}",
        "--switch",
        sw.address,
        "--metrics-listen",
        "",
        "--state-file",
        str(tmp_path / "state.sqlite"),
        "--log-level",
        "warning",
    ]
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        record_pid(p.pid)
        procs.append(p)

    async def relays() -> int:
        return len(await probe.read("pipe.Ingress.relay"))

    async def guards() -> int:
        return len(await probe.read("pipe.Ingress.relay_guard"))

    cl = Client(port)
    try:
        start()
        await wait_for(lambda: cl.cmd("V", wait=0.3), within=60.0, interval=0.1)
        assert await cl.cmd("U kill 198.18.1.10 6000 f;1")
        assert await cl.cmd("L kill 198.18.2.10 7000 f;1 t;1")

        async def installed() -> bool:
            return await relays() == 4

        await wait_for(installed, within=10.0, interval=0.1)
        await asyncio.sleep(0.3)  # the journal commits every ~50 ms
        procs[-1].send_signal(signal.SIGKILL)
        procs[-1].wait()
        assert await relays() == 4  # the switch keeps forwarding meanwhile
        assert await guards() == 4  # ... and keeps guarding
        # A guard no live call owns (a crashed predecessor's): swept at start.
        from p4relay_switch import Entry
        from p4relay_switch.names import A_GUARD_DROP, RELAY_GUARD

        await probe.insert(
            RELAY_GUARD,
            [
                Entry(
                    {"hdr.ipv4.dst_addr": 0x7F000001, "hdr.udp.dst_port": 37998},
                    A_GUARD_DROP,
                    {"leg": 0},
                )
            ],
        )
        start()
        # Answered from the process's first moment (early.py), long before it is loaded.
        await wait_for(lambda: cl.cmd("V", wait=0.3), within=60.0, interval=0.1)

        async def reconciled() -> bool:
            return await guards() == 4  # the live call's, the stale one gone

        await wait_for(reconciled, within=30.0, interval=0.1)
        assert await relays() == 4  # recovered, not swept, not duplicated
        assert await cl.cmd("D kill f t") == "0\n"

        async def removed() -> bool:
            return await relays() == 0 and await guards() == 0

        await wait_for(removed, within=10.0, interval=0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        cl.close()
        rtpp.stop()


def _snapshot(state: Path, to: Path) -> None:
    """What a `kill -9` leaves: the state file as committed at this instant."""
    import sqlite3

    src, dst = sqlite3.connect(state), sqlite3.connect(to)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _sessions_in_order(app: App) -> dict[str, list[dict[str, object]]]:
    app.store.flush()
    out: dict[str, list[dict[str, object]]] = {}
    for _, kind, d in app.store.spool_head(100000):
        if kind == "session":
            out.setdefault(str(d["session_key"]), []).append(d)
    return out


async def test_crash_restart_reports_continue(tmp_path: Path) -> None:
    """After a crash, each session's reports go on with a higher `seq` (the
    server ignores one that is not), a session gone meanwhile is reported
    ended without any command, and the first sample is an interval."""
    from p4relay_switch import Counters, FlowKey, LegQuality

    port = free_udp_pair()
    notify = free_port()
    rtpp = RtpproxyProcess(
        port + 1, "127.0.0.1", "37000-37999", ["-T", "60", "-n", f"tcp:127.0.0.1:{notify}"]
    )
    rtpp.start()
    fake = FakeSwitch()  # the switch keeps its entries and counts across the crash
    kw = dict(
        port=port,
        rtpproxy=f"udp:127.0.0.1:{port + 1}",
        notify_listen=f"tcp:127.0.0.1:{notify}",
        relay_ports="37000-37999",
        switch="fake:1",
    )
    cl = Client(port)
    try:
        app1 = App(settings(tmp_path, **kw), switch=fake)
        await app1.start()
        assert await cl.cmd("U keep 198.18.1.10 6000 f;1")
        r = await cl.cmd("L keep 198.18.2.10 7000 f;1 t;1")
        assert r is not None
        assert await cl.cmd("U gone 198.18.1.10 6100 f;1")
        assert await cl.cmd("L gone 198.18.2.10 7100 f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 8)
        key = FlowKey("198.18.1.10", "127.0.0.1", 6000, int(r.split()[0]), port_of("198.18.1.10"))
        leg = fake.relays[key].leg
        fake.counters[leg] = Counters(100, 17200)
        fake.quality[leg] = LegQuality(leg, 100, 0, 0, 0, 0, 0, 0, 0)

        def sampled(app: App) -> list[int]:
            app.store.flush()
            return [
                int(d["packets"])
                for _, k, d in app.store.spool_head(100000)
                if k == "sample" and d["session_key"] == "keep;f;1" and d["packets"]
            ]

        await wait_for(lambda: sampled(app1) == [100], within=5.0, interval=0.1)
        await asyncio.sleep(0.2)  # the background flush commits every ~50 ms
        crashed = tmp_path / "crashed.sqlite"
        _snapshot(tmp_path / "state.sqlite", crashed)
        before = _sessions_in_order(app1)
        await app1.stop()
        # Meanwhile: the call `gone` ends at RTPProxy, `keep` carries 50 more.
        direct = Client(port + 1)
        assert await direct.cmd("D gone f t") == "0\n"
        direct.close()
        fake.counters[leg] = Counters(150, 25800)
        fake.quality[leg] = LegQuality(leg, 150, 0, 0, 0, 0, 0, 0, 0)

        app2 = App(settings(tmp_path, state_file=str(crashed), **kw), switch=fake)
        await app2.start()
        try:
            assert await cl.cmd("V") == "20040107\n"
            await wait_for(lambda: len(fake.relays) == 4)  # only `keep`'s entries
            await wait_for(lambda: sampled(app2) == [100, 50], within=5.0, interval=0.1)
            assert await cl.cmd("D keep f t") == "0\n"
            await wait_for(lambda: not fake.relays)

            def ended() -> bool:
                reports = _sessions_in_order(app2)
                return all(reports[k][-1]["state"] == "ended" for k in ("keep;f;1", "gone;f;1"))

            await wait_for(ended, within=5.0, interval=0.1)
            after = _sessions_in_order(app2)
            for k in ("keep;f;1", "gone;f;1"):
                seqs = [int(str(d["seq"])) for d in after[k]]
                assert seqs == sorted(set(seqs)), (k, seqs)  # each report newer than the last
                assert max(int(str(d["seq"])) for d in before[k]) < seqs[-1]
            assert after["keep;f;1"][-1]["packets"] == 150
        finally:
            await app2.stop()
    finally:
        cl.close()
        rtpp.stop()


async def test_control_socket_opens_before_rtpproxy_answers(tmp_path: Path) -> None:
    """A restart with journalled sessions does not wait for RTPProxy: the
    control socket answers while every session is still being checked."""
    from rtpagent.state import Session
    from rtpagent.store import Store

    store = Store(tmp_path / "state.sqlite")
    for n in range(50):
        s = Session(f"j{n}", "f;1", to_tag="t;1")
        store.put_session(s.uid, s.to_json)
    store.close()
    silent = free_port(socket.SOCK_DGRAM)  # nobody answers there
    cfg = settings(tmp_path, rtpproxy=f"udp:127.0.0.1:{silent}", notify_listen="")
    app = App(cfg, switch=FakeSwitch())
    await asyncio.wait_for(app.start(), 3.0)
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
    try:
        assert len(app.table) == 50
        assert await cl.raw(b"") == b"E5\n"  # answered by the agent itself
        assert await cl.raw(b"ck V", wait=0.2) is None  # forwarded: RTPProxy is silent
        assert not app.reconciled.is_set()
    finally:
        cl.close()
        await app.stop()


async def test_commands_while_the_journal_loads_are_learnt(tmp_path: Path) -> None:
    """A call set up while a large journal is still loading passes through to
    RTPProxy at once and is tracked (and offloaded) once the journal is in."""
    from rtpagent.state import Session
    from rtpagent.store import Store

    store = Store(tmp_path / "state.sqlite")
    for n in range(20000):
        s = Session(f"j{n}", "f;1", to_tag="t;1")
        store.put_session(s.uid, s.to_json)
    store.close()
    fake = FakeSwitch()
    cfg = settings(tmp_path, switch="fake:1")
    app = App(cfg, switch=fake)
    starting = asyncio.ensure_future(app.start())
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
    try:
        await wait_for(lambda: cl.cmd("V", wait=0.05), within=20.0, interval=0.0)
        assert not starting.done()  # the journal is still loading
        assert await cl.cmd("U early 198.18.1.10 6000 f;1")
        assert await cl.cmd("L early 198.18.2.10 7000 f;1 t;1")
        await asyncio.wait_for(starting, 60.0)
        assert app.passed_through >= 3
        assert len(app.table) == 20001
        early = [s for s in app.table if s.call_id == "early"]
        assert len(early) == 1 and early[0].to_tag == "t;1"
        await wait_for(lambda: len(fake.relays) == 4)  # offloaded like any call
        assert await cl.cmd("D early f t") == "0\n"
        await wait_for(lambda: not fake.relays)
    finally:
        if not starting.done():
            await asyncio.wait_for(starting, 60.0)
        await app.stop()
        cl.close()


async def test_journal_ahead_of_the_switch_and_the_server(tmp_path: Path) -> None:
    """A call's entries are written to the switch only after its journal row
    is committed, and the journal never waits on the report server: with
    the server taking the reports and never answering, a `kill -9` right
    after an install leaves the call in the state file (offloaded, its legs,
    its answer), and a call's end is committed within a flush."""
    import json
    import sqlite3

    hung: list[asyncio.StreamWriter] = []

    async def never_answers(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        hung.append(w)  # holds the connection open: the request waits its timeout

    server = await asyncio.start_server(never_answers, "127.0.0.1", 0)
    server_port = server.sockets[0].getsockname()[1]
    fake = FakeSwitch()
    cfg = settings(tmp_path, switch="fake:1", server_url=f"http://127.0.0.1:{server_port}")
    app = App(cfg, switch=fake)
    await app.start()
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))

    def journal() -> dict[str, dict[str, object]]:
        """The sessions of what a `kill -9` leaves: the state file as committed now."""
        crashed = tmp_path / "crashed.sqlite"
        crashed.unlink(missing_ok=True)
        _snapshot(tmp_path / "state.sqlite", crashed)
        db = sqlite3.connect(crashed)
        try:
            rows = db.execute("SELECT doc FROM sessions").fetchall()
        finally:
            db.close()
        return {str(d["call_id"]): d for d in (json.loads(r) for (r,) in rows)}

    try:
        assert await cl.cmd("U first 198.18.1.10 6000 f;1")
        assert await cl.cmd("L first 198.18.2.10 7000 f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 4 and bool(hung))  # a report in flight
        assert await cl.cmd("U kept 198.18.1.10 6100 f;1")
        assert await cl.cmd("L kept 198.18.2.10 7100 f;1 t;1")
        await wait_for(lambda: len(fake.relays) == 8, interval=0.001)
        kept = journal().get("kept")
        assert kept is not None, "entries on the switch of a call the journal lacks"
        assert kept["state"] == "offloaded" and kept["legs"], kept
        assert kept["answered_at"] is not None, kept
        assert await cl.cmd("D first f t") == "0\n"
        await wait_for(lambda: "first" not in journal(), within=2.0, interval=0.05)
    finally:
        await app.stop()
        cl.close()
        for w in hung:
            w.close()
        server.close()
