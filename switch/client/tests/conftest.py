"""The software switch a live test module runs against: one per module, started
with the module's own `ARGS` (sizes and flags), stopped when the module ends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from p4relay_testsupport import softswitch


@pytest.fixture(scope="module")
def switch_addr(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    args: Sequence[str] = request.module.ARGS
    log = tmp_path_factory.mktemp("softswitch") / "softswitch.log"
    with softswitch(args, log_path=log) as sw:
        yield sw.address
