"""Restart safety: RTPProxy runs as its own process; the agent restarts while
calls are up; the switch restarts under the agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from fakeswitch import FakeSwitch
from harness import (
    Client,
    RtpproxyProcess,
    Softswitch,
    free_port,
    free_udp_pair,
    settings,
    wait_for,
)
from p4relay_switch import SwitchClient
from rtpagent.app import App
from rtpagent.bfrt import BfrtSwitch
from rtpagent.state import OffloadState
from rtpagent.switchport import Switch


async def _scenario(
    tmp: Path, make_switch: Callable[[], Switch], count: Callable[[], object]
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
        before = await count()  # type: ignore[misc]
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
        await wait_for(lambda: cl.cmd("V", wait=0.3), within=20.0, interval=0.1)
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
        from p4relay_switch.pipeline import A_GUARD_DROP, RELAY_GUARD

        await probe.insert(
            RELAY_GUARD,
            [Entry({"hdr.ipv4.dst_addr": 0x7F000001, "hdr.udp.dst_port": 37998}, A_GUARD_DROP)],
        )
        start()
        await wait_for(lambda: cl.cmd("V", wait=0.3), within=20.0, interval=0.1)
        await asyncio.sleep(0.5)
        assert await relays() == 4  # recovered, not swept, not duplicated
        assert await guards() == 4  # the live call's, the stale one gone
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
