"""The collector's policy: survivors of the older generations frozen out of
later scans, everything scanned again once a period (garbage cycles among
frozen objects freed then)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from rtpagent.gcpolicy import GcPolicy


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def policy() -> Iterator[GcPolicy]:
    p = GcPolicy(rescan_s=3600.0)
    gc.collect()
    gc.callbacks.append(p)
    try:
        yield p
    finally:
        gc.callbacks.remove(p)
        gc.unfreeze()


def test_survivors_of_older_collections_are_frozen(policy: GcPolicy) -> None:
    gc.unfreeze()
    gc.collect(0)
    assert gc.get_freeze_count() == 0  # a young collection freezes nothing
    keep = [_Node() for _ in range(1000)]
    gc.collect(1)
    assert gc.get_freeze_count() >= len(keep)
    assert not policy.rescanning


def test_a_cycle_among_frozen_objects_is_freed_at_the_rescan(policy: GcPolicy) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle
    gone = weakref.ref(a)
    gc.collect(2)  # survives (still referenced), frozen
    assert gc.get_freeze_count() > 0
    del a, b
    gc.collect(2)
    assert gone() is not None  # frozen: no scan reaches it
    policy.last_rescan -= policy.rescan_s  # the period is over
    gc.collect(1)  # the next older collection gives the frozen objects back
    assert policy.rescanning and gc.get_freeze_count() == 0
    gc.collect(1)
    assert policy.rescanning  # a generation-1 collection is not the full one
    gc.collect(2)
    assert gone() is None
    assert not policy.rescanning and policy.rescans == 1
    assert gc.get_freeze_count() > 0  # frozen again after it
