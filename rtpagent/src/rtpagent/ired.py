"""iRED on the switch's egress ports, as the operator configured it (`ired`).

The agent is the switch's control plane, so it sets the configured ports at
every (re)connect, after a switch restart too, beside the relay addresses and
the port binding. Ports not configured are left as the switch has them.
Depths are given in full-size packets (1514-byte frames, the unit of the iRED
paper's Table I) and written in the switch's 80-byte queue cells.
"""

from __future__ import annotations

from typing import Any, Self

import structlog
from p4relay_switch import SchemaError, SwitchClient, SwitchError
from p4relay_switch.ired import (
    IredPortState,
    IredSettings,
    cells,
    ired_settings,
    ired_state,
    set_ired,
)
from p4relay_switch.names import IRED_CELL_BYTES, IRED_EWMA_N_MAX, IRED_PORT
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
            lines.append(f"{p:>5}  set differently from the configuration (agent not restarted?)")
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
