from __future__ import annotations

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


@pytest.fixture
def netns_port() -> Iterator[tuple[str, str]]:
    """(switch-side ifname, namespace) of a veth pair; the peer lives in the namespace."""
    tag = secrets.token_hex(3)
    ns, a, b = f"p4ra-{tag}", f"p4ra{tag}a", f"p4ra{tag}b"

    def run(*c: str) -> None:
        subprocess.run(c, check=True, capture_output=True)

    run("ip", "netns", "add", ns)
    try:
        run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        run("ip", "link", "set", b, "netns", ns)
        run("ip", "link", "set", a, "up")
        run("ip", "-n", ns, "link", "set", b, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        yield a, ns
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
