"""What the agent needs from the switch, as a small interface.

`bfrt.py` implements it over p4relay_switch's `Pipeline` (BfRt gRPC) for
Tofino and the software switch alike; the entries, counters and quality are
the switch client's types. The offload logic sees only this interface and
the fail-open reasons (`OffloadRefused`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from p4relay_switch import (
    Counters,
    EntryBatch,
    EntryDump,
    FlowKey,
    LearnEvent,
    LegQuality,
    RelayIdle,
    Routes,
)


@dataclass(frozen=True, slots=True)
class SwitchUp:
    """The switch (re)connected; its tables may have been emptied."""

    restarted: bool


@dataclass(frozen=True, slots=True)
class SwitchDown:
    reason: str


SwitchEvent = LearnEvent | RelayIdle | SwitchUp | SwitchDown


class OffloadRefused(Exception):
    """The switch would not take the entries; the call stays on RTPProxy.

    `reason` is short and stable (metric label / event payload): `table_full`,
    `switch_unreachable`, `refused`.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class Switch(Protocol):
    @property
    def connected(self) -> bool: ...

    @property
    def relays_ipv6(self) -> bool:
        """The switch's program relays IPv6 calls (read at connect)."""
        ...

    @property
    def lost_at(self) -> float | None:
        """When the connection to the switch was last lost (wall clock)."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def set_relay_addrs(self, addrs: list[str], port_min: int, port_max: int) -> None: ...

    async def write(self, batch: EntryBatch, idle_ttl_ms: int) -> None:
        """Apply the batch in its order: on OffloadRefused nothing of `add_*`
        is left behind (partial writes are undone)."""
        ...

    async def read_leg_counters(self, legs: list[int]) -> dict[int, Counters]:
        """Each leg's packets and bytes, RTP and RTCP (leg_rewrite's direct
        counter); legs without an entry left out."""
        ...

    async def read_guard_drops(self, legs: list[int]) -> dict[int, int]:
        """Foreign packets the guards of each leg dropped (guard_drops)."""
        ...

    async def read_quality(self, legs: list[int]) -> dict[int, LegQuality]: ...

    async def dump(self) -> EntryDump: ...

    async def read_ttl_left(self) -> dict[FlowKey, int]:
        """Each relay entry's time left before it ages, ms (`$ENTRY_TTL` read
        back: its TTL less the time since its last hit; 0 once idle)."""
        ...

    async def read_routes(self) -> Routes:
        """The switch's routes with their ports (reverse-path binding)."""
        ...

    def events(self) -> AsyncIterator[SwitchEvent]: ...
