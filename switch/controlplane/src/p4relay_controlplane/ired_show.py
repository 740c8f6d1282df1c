"""`--show-ired`: what the switch runs on each port with iRED, its counters,
and how that compares with the configuration."""

from __future__ import annotations

from p4relay_switch import SchemaError, SwitchClient
from p4relay_switch.ired import IredPortState, IredSettings, cells, ired_settings, ired_state
from p4relay_switch.names import IRED_CELL_BYTES, IRED_PORT

from p4relay_controlplane.config import FRAME_BYTES, IredPort


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
            lines.append(f"{p:>5}  configured but not set on the switch (see the daemon's log)")
        elif _differs(on[p], s):
            lines.append(
                f"{p:>5}  set differently from the configuration (daemon not reloaded? "
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
