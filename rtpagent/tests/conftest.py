from __future__ import annotations

from collections.abc import AsyncIterator

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
