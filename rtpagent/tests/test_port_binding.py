"""`--port-binding off` against the real software switch (one veth port): the
agent turns binding off on every switch port and installs each leg with
UNBOUND_PORT; `route` (the default) binds every port again at connect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import Client, route_all, settings, wait_for
from p4relay_switch import Pipeline, Subscription, SwitchClient
from p4relay_switch.names import K_BOUND_PORT, RELAY, UNBOUND_PORT
from p4relay_testsupport import Softswitch
from rtpagent.app import App

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace"),
    pytest.mark.timeout(120),
]


async def _bound_ports(probe: SwitchClient) -> set[int]:
    return {int(str(e.key[K_BOUND_PORT])) for e in await probe.read(RELAY)}


def _dir(p: Path) -> Path:
    p.mkdir()
    return p


async def _agent(tmp: Path, sw: Softswitch, binding: str) -> tuple[App, Client]:
    """An agent with one call offloaded (its own state directory)."""
    cfg = settings(tmp, switch=sw.address, port_binding=binding)
    app = App(cfg)
    await app.start()
    cl = Client(int(cfg.listen[0].rsplit(":", 1)[1]))
    await cl.cmd("U sr 198.18.1.10 6000 f;1")
    await cl.cmd("L sr 198.18.2.10 7000 f;1 t;1")
    await wait_for(lambda: app.offloader.plans)
    return app, cl


async def test_binding_off_then_route(tmp_path: Path, netns_port: tuple[str, str]) -> None:
    sw = Softswitch(["--port", f"1={netns_port[0]}"])
    sw.start()
    probe = SwitchClient(
        sw.address, client_id=9, subscription=Subscription(learn=False, idle_timeout=False)
    )
    try:
        await route_all(sw.address)
        await probe.connect()
        app, cl = await _agent(_dir(tmp_path / "off"), sw, "off")
        try:
            assert await Pipeline(probe).read_port_binding() == {1: False}
            assert len(await probe.read(RELAY)) == 4
            assert await _bound_ports(probe) == {UNBOUND_PORT}
        finally:
            await app.stop()
            cl.close()
        app, cl = await _agent(_dir(tmp_path / "route"), sw, "route")
        try:
            assert await Pipeline(probe).read_port_binding() == {1: True}

            async def bound_to_port_1() -> bool:
                # every address is routed to port 1 (route_all); the first
                # agent's unbound entries are swept as stale
                return await _bound_ports(probe) == {1}

            await wait_for(bound_to_port_1, within=20.0, interval=0.2)
        finally:
            await app.stop()
            cl.close()
    finally:
        await probe.close()
        sw.stop()
