"""What the agent needs from the switch, as a small interface.

`bfrt.py` implements it over p4relay_switch (BfRt gRPC) for Tofino and the
software switch alike. Keeping the interface this narrow makes the offload
logic independent of the client's evolution.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol


class FlowKey(NamedTuple):
    """Exact key of `pipe.Ingress.relay`."""

    src_addr: str
    dst_addr: str
    src_port: int
    dst_port: int


class GuardKey(NamedTuple):
    """Exact key of `pipe.Ingress.relay_guard`: one relay-side port of an
    offloaded call. A packet to it that misses `relay` (any source but the
    installed one) is dropped instead of reaching RTPProxy, which would latch
    it and relay it to the other party."""

    dst_addr: str
    dst_port: int


@dataclass(frozen=True, slots=True)
class RelayEntry:
    key: FlowKey
    leg: int
    rtcp: bool


@dataclass(frozen=True, slots=True)
class LegRewrite:
    """`pipe.Ingress.leg_rewrite[leg]`: what a packet of this leg becomes."""

    leg: int
    src_addr: str
    dst_addr: str
    src_port: int
    dst_port: int


@dataclass(frozen=True, slots=True)
class Batch:
    """One ordered write. Removals: guards first, then relays, legs last;
    additions: legs, relays, guards last. So a legitimate packet is never
    dropped: a guard exists only while the relay entries carry the call."""

    add_legs: tuple[LegRewrite, ...] = ()
    mod_legs: tuple[LegRewrite, ...] = ()
    add_relays: tuple[RelayEntry, ...] = ()
    del_relays: tuple[FlowKey, ...] = ()
    del_legs: tuple[int, ...] = ()
    reset_legs: tuple[int, ...] = ()  # zero these legs' quality registers
    add_guards: tuple[GuardKey, ...] = ()
    del_guards: tuple[GuardKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.add_legs
            or self.mod_legs
            or self.add_relays
            or self.del_relays
            or self.del_legs
            or self.reset_legs
            or self.add_guards
            or self.del_guards
        )


@dataclass(frozen=True, slots=True)
class FlowCounters:
    packets: int
    bytes: int


@dataclass(frozen=True, slots=True)
class LegQuality:
    """The RTP quality registers of one leg (cumulative since install)."""

    packets: int
    lost: int
    reordered: int
    jitter: int  # RFC 3550 J << jitter_shift, in RTP clock units
    payload_type: int


@dataclass(frozen=True, slots=True)
class LearnDigest:
    src_addr: str
    dst_addr: str
    src_port: int
    dst_port: int
    ingress_port: int


@dataclass(frozen=True, slots=True)
class IdleTimeout:
    key: FlowKey
    idle: bool = True  # False: the entry saw traffic again


@dataclass(frozen=True, slots=True)
class SwitchUp:
    """The switch (re)connected; its tables may have been emptied."""

    restarted: bool


@dataclass(frozen=True, slots=True)
class SwitchDown:
    reason: str


@dataclass(frozen=True, slots=True)
class SwitchDump:
    """Every entry the agent's tables hold (read back at (re)connect)."""

    relays: list[RelayEntry]
    legs: list[LegRewrite]
    guards: list[GuardKey]


SwitchEvent = LearnDigest | IdleTimeout | SwitchUp | SwitchDown


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

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def set_relay_addrs(self, addrs: list[str], port_min: int, port_max: int) -> None: ...

    async def write(self, batch: Batch, idle_ttl_ms: int) -> None:
        """Apply the batch atomically enough: on OffloadRefused nothing of
        `add_*` is left behind (the implementation undoes partial writes)."""
        ...

    async def read_counters(self, keys: list[FlowKey]) -> dict[FlowKey, FlowCounters]: ...

    async def read_guard_counters(self, keys: list[GuardKey]) -> dict[GuardKey, FlowCounters]:
        """Foreign packets each guard dropped (its direct counter)."""
        ...

    async def read_quality(self, legs: list[int]) -> dict[int, LegQuality]: ...

    async def dump(self) -> SwitchDump: ...

    def events(self) -> AsyncIterator[SwitchEvent]: ...
