"""iRED on the switch's egress ports, as the operator configured it (`ired`).

The agent is the switch's control plane, so it sets the configured ports at
every (re)connect, after a switch restart too, beside the relay addresses and
the port binding; a reload (SIGHUP) sets what changed and sets a port dropped
from the configuration back to the switch's default, plain tail drop. At
connect it also reads back which ports the switch runs iRED on and sets those
not configured back to tail drop: a port removed from the configuration while
the agent was stopped, which no reload saw. Depths are given in full-size
packets (1514-byte frames, the unit of the iRED paper's Table I) and written
in the switch's 80-byte queue cells.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Self

import structlog
from p4relay_switch import SchemaError, SwitchClient, SwitchError
from p4relay_switch.ired import (
    IredPortState,
    IredSettings,
    cells,
    clear_ired,
    ired_settings,
    ired_state,
    set_ired,
)
from p4relay_switch.names import (
    IRED_CELL_BYTES,
    IRED_EWMA_N_MAX,
    IRED_PORT,
    K_EGRESS_PORT,
    REG_IRED_DROP_FLAG,
    REG_IRED_QAVG,
    REG_IRED_QDEPTH_PREV,
)
from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import metrics

log = structlog.get_logger("rtpagent.ired")

FRAME_BYTES = 1514
_BOOLS = {"1": True, "true": True, "on": True, "yes": True}
_BOOLS |= {"0": False, "false": False, "off": False, "no": False}


class IredPort(BaseModel):
    """One port's iRED: a TOML table, or `port=4,max_len_queue=1024,n_drop=64`
    (flags and the environment) with the same keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(ge=0, le=511, description="dev_port of the egress port")
    max_len_queue: int = Field(ge=1, description="maxLenQueue, full-size packets")
    n_drop: int = Field(ge=1, description="N, full-size packets: minThsld = maxLenQueue/2 - N")
    ewma_n: int = Field(default=1, description="n of the queue average, 1..4")
    drop_prob: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="chance between the thresholds; default the paper's 2 / (N + 1)",
    )
    tail_drop: bool = Field(
        default=False, description="plain tail drop at maxLenQueue instead (comparisons)"
    )
    protect: bool = Field(
        default=True, description="never pick offloaded calls' media or DSCP EF packets"
    )

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, v: Any) -> Any:
        if not isinstance(v, str):
            return v
        out: dict[str, Any] = {}
        for part in (p.strip() for p in v.split(",")):
            if not part:
                continue
            key, sep, val = part.partition("=")
            key = key.strip()
            if not sep:
                raise ValueError(f"iRED port {v!r}: {part!r} is not key=value")
            if key in out:
                raise ValueError(f"iRED port {v!r}: {key} given twice")
            val = val.strip()
            if key in ("tail_drop", "protect"):
                if val.lower() not in _BOOLS:
                    raise ValueError(f"iRED port {v!r}: {key}={val!r} is not on/off")
                out[key] = _BOOLS[val.lower()]
            else:
                out[key] = val
        return out

    @model_validator(mode="after")
    def _check(self) -> Self:
        where = f"iRED on port {self.port}"
        if not 1 <= self.ewma_n <= IRED_EWMA_N_MAX:
            raise ValueError(f"{where}: ewma_n (n) {self.ewma_n} must be 1..{IRED_EWMA_N_MAX}")
        if 2 * self.n_drop >= self.max_len_queue:
            raise ValueError(
                f"{where}: n_drop (N) {self.n_drop} must be below max_len_queue / 2 = "
                f"{self.max_len_queue / 2:g} (minThsld = maxLenQueue/2 - N must stay above 0)"
            )
        try:
            self.settings().check()
        except SwitchError as e:
            raise ValueError(f"{where}: {e}") from None
        return self

    def settings(self) -> IredSettings:
        """The switch's entry (depths in cells)."""
        return IredSettings(
            max_len_queue=cells(self.max_len_queue, FRAME_BYTES),
            n_drop=cells(self.n_drop, FRAME_BYTES),
            ewma_n=self.ewma_n,
            drop_prob=2.0 / (self.n_drop + 1) if self.drop_prob is None else self.drop_prob,
            tail_drop=self.tail_drop,
            protect=self.protect,
        )


def check_unique(ports: list[IredPort]) -> list[IredPort]:
    seen: set[int] = set()
    for p in ports:
        if p.port in seen:
            raise ValueError(f"iRED: port {p.port} configured twice")
        seen.add(p.port)
    return ports


async def apply(client: SwitchClient, ports: list[IredPort]) -> dict[int, str | None]:
    """Sets every configured port; per port None (set) or why the switch refused
    it (an unknown port, a program without iRED). One refusal never stops the
    others, nor the agent: calls are offloaded whatever iRED does."""
    if not ports:
        return {}
    out: dict[int, str | None] = {}
    try:
        client.schema.table(IRED_PORT)
    except SchemaError:
        absent = f"the switch program has no iRED ({IRED_PORT})"
        out = {p.port: absent for p in ports}
    else:
        for p in ports:
            try:
                await set_ired(client, p.port, p.settings())
                out[p.port] = None
            except SwitchError as e:
                out[p.port] = str(e)
    for port, refused in out.items():
        metrics.IRED_SET.labels(str(port)).set(0 if refused else 1)
        if refused:
            log.error("ired_not_set", dev_port=port, reason=refused)
        else:
            log.info("ired_set", dev_port=port)
    return out


# A port's state iRED keeps between packets: zeroed when the port goes back to tail
# drop (a drop flag left set would still drop the port's next packet; the average
# would greet a later setting with an old queue). Its counters are kept: the
# collector counts on from them.
_STATE_REGISTERS = (REG_IRED_DROP_FLAG, REG_IRED_QAVG, REG_IRED_QDEPTH_PREV)


async def clear(client: SwitchClient, ports: list[int]) -> dict[int, str | None]:
    """Sets ports back to the switch's default, plain tail drop (their entry deleted,
    their drop flag and queue average zeroed); per port None (done) or the switch's error."""
    out: dict[int, str | None] = dict.fromkeys(ports)
    try:
        client.schema.table(IRED_PORT)
    except SchemaError:
        ports = []  # no iRED in this program: every port is tail drop already
    for port in ports:
        try:
            await clear_ired(client, port, reset=False)
            for reg in _STATE_REGISTERS:
                await client.write_register(reg, {port: 0})
        except SwitchError as e:
            out[port] = str(e)
    for port, failed in out.items():
        if failed:
            log.error("ired_not_cleared", dev_port=port, reason=failed)
        else:
            with contextlib.suppress(KeyError):  # never set by this agent
                metrics.IRED_SET.remove(str(port))
            log.info("ired_cleared", dev_port=port)
    return out


async def unlisted(client: SwitchClient, configured: set[int]) -> list[int]:
    """Ports the switch runs iRED on (an entry in its table) that are not in
    `configured`; none when the program has no iRED or the table cannot be read
    (logged: the next connect tries again)."""
    try:
        client.schema.table(IRED_PORT)
    except SchemaError:
        return []
    try:
        entries = await client.read(IRED_PORT)
    except SwitchError as e:
        log.error("ired_read_failed", reason=str(e))
        return []
    ports = {e.key.get(K_EGRESS_PORT) for e in entries}
    return sorted(p for p in ports if isinstance(p, int) and p not in configured)


@dataclass
class Change:
    """What a reload does on the switch: ports set (new, changed, or refused before),
    ports set back to tail drop (dropped from the configuration), ports left as they are;
    per port the switch's refusal, if any."""

    set: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    applied: bool = True  # False: the switch is not connected; set when it connects


class IredControl:
    """The configured ports and what the switch was told: every configured port at
    each connect, the difference at a reload. Ports dropped from the configuration
    are set back to tail drop, at the reload or, if the switch was away, when it
    connects; at each connect so is every other port the switch runs iRED on
    (dropped while the agent was stopped). One at a time (a reload and a reconnect
    never interleave their writes)."""

    def __init__(self, ports: list[IredPort]) -> None:
        self.ports = ports
        self._to_clear: set[int] = set()
        self._refused: set[int] = set()
        self._lock = asyncio.Lock()

    async def at_connect(self, client: SwitchClient) -> dict[int, str | None]:
        async with self._lock:
            stale = await unlisted(client, {p.port for p in self.ports})
            self._to_clear |= set(stale)
            cleared = await self._clear_pending(client)
            if stale:
                done = [p for p in stale if not cleared.get(p)]
                metrics.IRED_UNLISTED_CLEARED.inc(len(done))
                log.warning(
                    "ired_unlisted_cleared",
                    dev_ports=done,
                    failed=sorted(set(stale) - set(done)),
                    why="iRED on the switch, not in the configuration: set back to tail drop",
                )
            out = await apply(client, self.ports)
            self._refused = {p for p, why in out.items() if why}
            return out

    async def reload(self, client: SwitchClient, ports: list[IredPort]) -> Change:
        async with self._lock:
            old = {p.port: p for p in self.ports}
            new = {p.port: p for p in ports}
            todo = [p for p in ports if old.get(p.port) != p or p.port in self._refused]
            change = Change(
                set=[p.port for p in todo],
                cleared=sorted(set(old) - set(new)),
                unchanged=sorted(set(new) - {p.port for p in todo}),
            )
            self.ports = ports
            self._to_clear = (self._to_clear | set(change.cleared)) - set(new)
            self._refused -= set(old) - set(new)
            if not client.connected:
                change.applied = False
                return change
            cleared = await self._clear_pending(client)
            out = await apply(client, todo)
            self._refused = (self._refused - set(change.set)) | {p for p, w in out.items() if w}
            change.refused = {p: w for p, w in (out | cleared).items() if w}
            return change

    async def _clear_pending(self, client: SwitchClient) -> dict[int, str | None]:
        if not self._to_clear:
            return {}
        out = await clear(client, sorted(self._to_clear))
        self._to_clear = {p for p, failed in out.items() if failed}
        return out


def _row(port: int, s: IredSettings, st: IredPortState | None, configured: bool) -> str:
    pkt = cells(1, FRAME_BYTES)
    mode = "tail-drop" if s.tail_drop else ("iRED+protect" if s.protect else "iRED")
    counters = (
        "-"
        if st is None
        else f"qavg {st.qavg * IRED_CELL_BYTES} B, decisions {st.decisions}, drops {st.drops}, "
        f"spared {st.spared}, tail drops {st.tail_drops}"
    )
    return (
        f"{port:>5}  {mode:<12}  {s.max_len_queue // pkt:>6}  {s.n_drop // pkt:>5}  "
        f"{s.min_thsld // pkt:>4}/{s.max_thsld // pkt:<5}  {s.ewma_n}  {s.drop_prob:.4f}  "
        f"{'yes' if configured else 'no':<10}  {counters}"
    )


async def show(client: SwitchClient, ports: list[IredPort]) -> str:
    """What the switch runs on each port with iRED, and its counters; configured
    ports the switch does not run (or runs differently) are named."""
    try:
        client.schema.table(IRED_PORT)
    except SchemaError:
        return f"the switch program has no iRED ({IRED_PORT})\n"
    on = await ired_settings(client)
    state = await ired_state(client, sorted(on))
    want = {p.port: p.settings() for p in ports}
    lines = [
        "iRED per egress port (depths in full-size packets of 1514 bytes; the switch counts "
        f"{IRED_CELL_BYTES}-byte cells)",
        " port  mode          maxLen      N  min/max     n  prob    configured  counters",
    ]
    lines += [_row(p, on[p], state.get(p), p in want) for p in sorted(on)]
    if not on:
        lines.append("    -  no port runs iRED (tail drop everywhere)")
    for p, s in sorted(want.items()):
        if p not in on:
            lines.append(f"{p:>5}  configured but not set on the switch (see the agent's log)")
        elif _differs(on[p], s):
            lines.append(
                f"{p:>5}  set differently from the configuration (agent not reloaded? "
                "SIGHUP applies it)"
            )
    return "\n".join(lines) + "\n"


def _differs(a: IredSettings, b: IredSettings) -> bool:
    # drop_prob goes through a 16-bit register: compare what the switch can hold
    return (a.max_len_queue, a.n_drop, a.ewma_n, a.tail_drop, a.protect, a.drop_prob_reg) != (
        b.max_len_queue,
        b.n_drop,
        b.ewma_n,
        b.tail_drop,
        b.protect,
        b.drop_prob_reg,
    )
