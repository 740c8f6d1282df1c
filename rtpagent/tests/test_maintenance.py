"""Drain, evacuation and the offload cap: real RTPProxy + real softswitch,
driven through the admin socket as rtpagent-ctl drives it."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

from harness import Client, running_agent, settings
from p4relay_switch import SwitchClient
from p4relay_testsupport import Softswitch, wait_for
from rtpagent.admin import ctl
from rtpagent.app import App
from rtpagent.ctl import main as ctl_main
from rtpagent.maintenance import Mode
from rtpagent.state import OffloadState, Session


async def call(cl: Client, n: int) -> None:
    """Offer and answer of call `n` (trusted public addresses: offloaded at once)."""
    assert await cl.cmd(f"U m{n} 198.18.1.{n} 6000 f{n};1") is not None
    assert await cl.cmd(f"L m{n} 198.18.2.{n} 7000 f{n};1 t{n};1") is not None


def session(app: App, n: int) -> Session:
    return next(s for s in app.table if s.call_id == f"m{n}")


async def entries(probe: SwitchClient) -> int:
    n = 0
    for t in ("pipe.Ingress.relay", "pipe.Ingress.leg_rewrite", "pipe.Ingress.relay_guard"):
        n += len(await probe.read(t))
    return n


async def admin(path: str, command: str) -> dict[str, Any]:
    got = await ctl(path, command, 10.0)
    assert got["ok"], got
    return got


async def test_drain_keeps_offloaded_calls_and_holds_new_ones(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    sock = str(tmp_path / "admin.sock")
    cfg = settings(tmp_path, switch=sw.address, admin_socket=sock)
    async with running_agent(cfg) as app:
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        await call(cl, 1)
        await wait_for(lambda: session(app, 1).state is OffloadState.OFFLOADED)
        st = await admin(sock, "drain")
        assert st["mode"] == "draining" and st["requested"]["local"] == "draining"
        await call(cl, 2)
        await wait_for(lambda: session(app, 2).reason == "draining")
        await app.offloader.drained()
        assert session(app, 2).state is OffloadState.FALLBACK
        assert session(app, 1).state is OffloadState.OFFLOADED  # keeps flowing on the switch
        assert await entries(probe) == 10  # one call: 4 relays, 2 legs, 4 guards
        # A re-INVITE of the offloaded call is still carried by the switch.
        await cl.cmd("U m1 198.18.2.1 7100 t1;1 f1;1")
        await cl.cmd("L m1 198.18.1.1 6000 t1;1 f1;1")
        await app.offloader.drained()
        assert session(app, 1).state is OffloadState.OFFLOADED
        st = await admin(sock, "resume")
        assert st["mode"] == "active"
        await wait_for(lambda: session(app, 2).state is OffloadState.OFFLOADED)
        assert await entries(probe) == 20
        cl.close()


async def test_evacuation_moves_every_call_back_and_offloads_none(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    sock = str(tmp_path / "admin.sock")
    cfg = settings(tmp_path, switch=sw.address, admin_socket=sock)
    events: list[tuple[str, dict[str, object]]] = []
    async with running_agent(cfg) as app:
        app.maintenance._emit_event = lambda kind, p: events.append((kind, p))
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        for n in range(1, 6):
            await call(cl, n)
        await wait_for(lambda: len(app.offloader.plans) == 5)
        before = [session(app, n).switch_totals.packets[:] for n in range(1, 6)]
        st = await admin(sock, "evacuate")  # waits for the last call to leave
        assert st["mode"] == "evacuated" and not st["evacuating"]
        assert st["last_evacuation"]["calls"] == 5
        assert await entries(probe) == 0
        for n in range(1, 6):
            s = session(app, n)
            assert (s.state, s.reason) == (OffloadState.FALLBACK, "evacuated")
            assert s.switch_totals.packets >= before[n - 1]  # counts kept
        kinds = [k for k, _ in events]
        assert kinds == ["maintenance", "evacuated"], events
        assert events[1][1]["calls"] == 5
        # New calls stay on RTPProxy while evacuated.
        await call(cl, 6)
        await wait_for(lambda: session(app, 6).reason == "evacuated")
        # The server's out-of-service wins over a local resume.
        app.maintenance.request("switch", Mode.EVACUATED, "test")
        assert (await admin(sock, "resume"))["mode"] == "evacuated"
        await app.offloader.drained()
        assert not app.offloader.plans
        app.maintenance.request("switch", Mode.ACTIVE, "test")
        await wait_for(lambda: len(app.offloader.plans) == 6)
        assert await entries(probe) == 60
        cl.close()


async def test_cap_holds_calls_for_capacity_until_room_frees(
    tmp_path: Path, sw: Softswitch, probe: SwitchClient
) -> None:
    cfg = settings(tmp_path, switch=sw.address, max_offloaded_calls=2)
    async with running_agent(cfg) as app:
        cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
        for n in range(1, 4):
            await call(cl, n)
        # Offloads are written in batches, not strictly in arrival order:
        # whichever call comes third waits.
        await wait_for(lambda: any(s.reason == "capacity" for s in app.table))
        held = next(s for s in app.table if s.reason == "capacity")
        await app.offloader.drained()
        assert len(app.offloader.plans) == 2
        st = app.maintenance.status()
        assert (st["offloaded"], st["capacity"], st["headroom"]) == (2, 2, 0)
        assert st["by_pipe"] == {"0": 2}
        n = next(n for n in (1, 2, 3) if session(app, n) is not held)
        assert await cl.cmd(f"D m{n} f{n} t{n}") == "0\n"
        await wait_for(lambda: held.state is OffloadState.OFFLOADED)
        assert len(app.offloader.plans) == 2
        # The server's cap, lower, wins; existing calls stay.
        app.maintenance.set_server_cap(1)
        await call(cl, 4)
        await wait_for(lambda: session(app, 4).reason == "capacity")
        assert app.maintenance.status()["capacity"] == 1
        cl.close()


async def test_admin_socket_refuses_bad_input(tmp_path: Path) -> None:
    sock = str(tmp_path / "admin.sock")
    cfg = settings(tmp_path, admin_socket=sock)
    async with running_agent(cfg) as app:
        got = await ctl(sock, "reboot", 0)
        assert not got["ok"] and "unknown command" in got["error"]
        r, w = await asyncio.open_unix_connection(sock)
        w.write(b"x" * 10000 + b"\n")
        await w.drain()
        answer = json.loads(await r.readline())
        assert answer == {"ok": False, "error": "line too long"}
        w.close()
        w2r, w2 = await asyncio.open_unix_connection(sock)
        w2.write(b"\xff\xfe\n")
        await w2.drain()
        assert json.loads(await w2r.readline())["error"] == "not UTF-8"
        w2.close()
        assert app.maintenance.mode is Mode.ACTIVE
        assert (await ctl(sock, "status", 0))["mode"] == "active"
        # rtpagent-ctl: exit 0 with the answer, 2 when the socket is not there.
        assert await asyncio.to_thread(ctl_main, ["--admin-socket", sock, "drain"]) == 0
        assert app.maintenance.status()["mode"] == "draining"
        assert await asyncio.to_thread(ctl_main, ["--admin-socket", sock + ".x", "status"]) == 2
