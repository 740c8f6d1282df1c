from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator

import pytest
from harness import route_all
from p4relay_switch import Subscription, SwitchClient
from p4relay_testsupport import Softswitch, softswitch


@pytest.fixture
async def sw() -> AsyncIterator[Softswitch]:
    """A softswitch with every address routed to port 1."""
    with softswitch() as s:
        await route_all(s.address)
        yield s


@pytest.fixture
async def probe(sw: Softswitch) -> AsyncIterator[SwitchClient]:
    """A second BfRt client that reads what the agent wrote."""
    c = SwitchClient(
        sw.address, client_id=9, subscription=Subscription(learn=False, idle_timeout=False)
    )
    await c.connect()
    yield c
    await c.close()


@contextlib.contextmanager
def veth_ports(count: int) -> Iterator[tuple[list[str], str]]:
    """`count` veth pairs: (switch-side ifnames, namespace); the peers live in the namespace."""
    tag = secrets.token_hex(3)
    ns = f"p4ra-{os.getpid()}-{tag}"  # the owner's pid: scripts/cleanup.d/rtpagent.sh
    # pairs p4ra<tag>a/b, c/d, ...: the peer's name is the switch side's with the next letter
    names = [f"p4ra{tag}{chr(ord('a') + 2 * i)}" for i in range(count)]

    def peer(a: str) -> str:
        return a[:-1] + chr(ord(a[-1]) + 1)

    def run(*c: str) -> None:
        subprocess.run(c, check=True, capture_output=True)

    run("ip", "netns", "add", ns)
    try:
        for a in names:
            run("ip", "link", "add", a, "type", "veth", "peer", "name", peer(a))
            run("ip", "link", "set", peer(a), "netns", ns)
            run("ip", "link", "set", a, "up")
            run("ip", "-n", ns, "link", "set", peer(a), "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        yield names, ns
    finally:
        for a in names:
            subprocess.run(["ip", "link", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def netns_port() -> Iterator[tuple[str, str]]:
    """(switch-side ifname, namespace) of a veth pair; the peer lives in the namespace."""
    with veth_ports(1) as (names, ns):
        yield names[0], ns


@pytest.fixture
def netns_two_ports() -> Iterator[tuple[list[str], str]]:
    """Two veth pairs (switch-side ifnames, namespace)."""
    with veth_ports(2) as got:
        yield got
