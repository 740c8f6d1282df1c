"""Poll a condition until it holds."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_for(
    pred: Callable[[], object | Awaitable[object]],
    within: float = 5.0,
    interval: float = 0.02,
    what: str = "condition",
) -> None:
    """Until ``pred()`` (sync or async) is truthy; AssertionError after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        r = pred()
        if inspect.isawaitable(r):
            r = await r
        if r:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {within} s")
        await asyncio.sleep(interval)


def wait_until(
    pred: Callable[[], object],
    within: float = 15.0,
    interval: float = 0.05,
    what: str = "condition",
) -> None:
    """Blocking `wait_for` for synchronous tests."""
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {within} s")
        time.sleep(interval)


def wait_value(fn: Callable[[], T | None], within: float, what: str, interval: float = 0.5) -> T:
    """Blocking: poll ``fn()`` until it returns something truthy and return that
    value; the AssertionError after ``within`` s names the last value seen."""
    box: dict[str, T | None] = {}

    def pred() -> bool:
        box["last"] = fn()
        return bool(box["last"])

    try:
        wait_until(pred, within=within, interval=interval, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (last: {box.get('last')!r})") from None
    value = box["last"]
    assert value is not None
    return value
