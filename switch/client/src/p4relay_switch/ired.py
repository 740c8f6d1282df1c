"""iRED per egress port: configuration and counters (switch/contract.toml,
``pipe.Egress.ired_port``, the ``ired_*`` registers and counters).

Depths are in queue cells (80 bytes) on both targets. ``IredSettings.check``
refuses what the softswitch refuses, so a bad setting fails with the same
``InvalidArgumentError`` on bf_switchd, which stores any value it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import grpc

from p4relay_switch.client import Entry, SwitchClient
from p4relay_switch.errors import write_error
from p4relay_switch.names import (
    A_IRED_SET,
    IRED_CELL_BYTES,
    IRED_COUNTERS,
    IRED_DECISIONS,
    IRED_DROPS,
    IRED_EWMA_N_MAX,
    IRED_FLAGS_SET,
    IRED_PORT,
    IRED_REGISTERS,
    IRED_SPARED,
    IRED_TAIL_DROPS,
    K_EGRESS_PORT,
    REG_IRED_DROP_FLAG,
    REG_IRED_DROP_PROB,
    REG_IRED_QAVG,
    REG_IRED_QDEPTH_PREV,
)

DEPTH_MAX = (1 << 19) - 1


def cells(packets: int, frame_bytes: int = 1514) -> int:
    """Queue cells that `packets` frames of `frame_bytes` occupy."""
    return packets * -(-frame_bytes // IRED_CELL_BYTES)


@dataclass(frozen=True, slots=True)
class IredSettings:
    """One port's iRED: maxLenQueue and N in cells, n of the average,
    drop_prob = chance that a packet between the thresholds decides a drop
    (0..1; the paper's coin, random(0, N) <= 1, is 2 / (N_packets + 1))."""

    max_len_queue: int
    n_drop: int
    ewma_n: int = 1
    drop_prob: float = 0.02
    tail_drop: bool = False
    protect: bool = True

    @property
    def min_thsld(self) -> int:
        return self.max_len_queue // 2 - self.n_drop

    @property
    def max_thsld(self) -> int:
        return 2 * self.min_thsld

    def check(self) -> None:
        """Raises InvalidArgumentError for a setting the pipeline cannot run."""
        err = None
        if not 1 <= self.ewma_n <= IRED_EWMA_N_MAX:
            err = f"ewma_n {self.ewma_n} out of range 1..={IRED_EWMA_N_MAX}"
        elif not 4 <= self.max_len_queue <= DEPTH_MAX:
            err = f"max_len_queue {self.max_len_queue} cells out of range 4..={DEPTH_MAX}"
        elif not 1 <= self.n_drop < self.max_len_queue // 2:
            err = (
                f"n_drop (N) {self.n_drop} must be at least 1 and below max_len_queue / 2 = "
                f"{self.max_len_queue // 2} (minThsld = max_len_queue / 2 - N must stay above 0)"
            )
        elif not 0.0 <= self.drop_prob <= 1.0:
            err = f"drop_prob {self.drop_prob} out of range 0..1"
        if err is not None:
            raise write_error(grpc.StatusCode.INVALID_ARGUMENT, f"{IRED_PORT}: {err}")

    @property
    def drop_prob_reg(self) -> int:
        """The ired_drop_prob register value (chance x 65536, at most 65535)."""
        return min(65535, round(self.drop_prob * 65536))


@dataclass(frozen=True, slots=True)
class IredPortState:
    """One port's iRED registers (per-pipe values summed; qavg and the flag of pipe 0)."""

    qdepth_prev: int
    qavg: int
    drop_prob: int
    decisions: int
    tail_drops: int
    drop_flag: int
    flags_set: int
    drops: int
    spared: int


async def set_ired(client: SwitchClient, dev_port: int, s: IredSettings) -> None:
    """Turns iRED on (or changes it) for an egress port. Unknown ports and
    settings out of range raise InvalidArgumentError before anything is written."""
    s.check()
    ports = await client.ports()
    if dev_port not in ports:
        raise write_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{IRED_PORT}: port {dev_port} is not a port of this switch",
        )
    await client.write_register(REG_IRED_DROP_PROB, {dev_port: s.drop_prob_reg})
    await client.insert_or_modify(
        IRED_PORT,
        [
            Entry(
                {K_EGRESS_PORT: dev_port},
                A_IRED_SET,
                {
                    "max_len_queue": s.max_len_queue,
                    "n_drop": s.n_drop,
                    "ewma_n": s.ewma_n,
                    "tail_drop": int(s.tail_drop),
                    "protect": int(s.protect),
                },
            )
        ],
    )


async def clear_ired(client: SwitchClient, dev_port: int, *, reset: bool = True) -> None:
    """Turns iRED off for a port (plain tail drop); with reset, zeroes its
    registers and counters."""
    got = await client.read(IRED_PORT)
    if any(e.key.get(K_EGRESS_PORT) == dev_port for e in got):
        await client.delete(IRED_PORT, [Entry({K_EGRESS_PORT: dev_port})])
    if reset:
        for name in IRED_REGISTERS:
            await client.write_register(name, {dev_port: 0})
        for name in IRED_COUNTERS:
            await client.write_counter(name, {dev_port: 0})


async def ired_settings(client: SwitchClient) -> dict[int, IredSettings]:
    """Every port with iRED on, with its settings."""
    out: dict[int, IredSettings] = {}
    entries = await client.read(IRED_PORT)
    ports = {e.key.get(K_EGRESS_PORT): e for e in entries}
    on = sorted(p for p in ports if isinstance(p, int))
    if not on:
        return out
    probs = await client.read_register(REG_IRED_DROP_PROB, on)
    for port in on:
        e = ports[port]
        d = {k: int(v) for k, v in e.data.items() if isinstance(v, int)}
        prob = probs.get(port, [0])[0] if probs else 0
        out[port] = IredSettings(
            max_len_queue=d["max_len_queue"],
            n_drop=d["n_drop"],
            ewma_n=d["ewma_n"],
            drop_prob=prob / 65536,
            tail_drop=bool(d["tail_drop"]),
            protect=bool(d["protect"]),
        )
    return out


async def ired_state(client: SwitchClient, ports: Iterable[int]) -> dict[int, IredPortState]:
    """The iRED registers and counters of each port."""
    idx = list(ports)
    if not idx:
        return {}
    regs = {name: await client.read_register(name, idx) for name in IRED_REGISTERS}
    for name in IRED_COUNTERS:
        regs[name] = await client.read_counter(name, idx)

    def total(name: str, p: int) -> int:
        return sum(regs[name].get(p, [0]))

    def first(name: str, p: int) -> int:
        return (regs[name].get(p) or [0])[0]

    return {
        p: IredPortState(
            qdepth_prev=first(REG_IRED_QDEPTH_PREV, p),
            qavg=first(REG_IRED_QAVG, p),
            drop_prob=first(REG_IRED_DROP_PROB, p),
            decisions=total(IRED_DECISIONS, p),
            tail_drops=total(IRED_TAIL_DROPS, p),
            drop_flag=first(REG_IRED_DROP_FLAG, p),
            flags_set=total(IRED_FLAGS_SET, p),
            drops=total(IRED_DROPS, p),
            spared=total(IRED_SPARED, p),
        )
        for p in idx
    }
