from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from p4relay_switch import Subscription, SwitchClient
from p4relay_testsupport import Softswitch, softswitch


@pytest.fixture
def sw() -> Iterator[Softswitch]:
    with softswitch() as s:
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
