"""Tests' writes and reads of the quality registers' values by column
(`QUALITY_VALUES`): a register of one value through `write_register`, the
loss register's two fields through `write_register_fields`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from p4relay_switch import pipeline as pl
from p4relay_switch.client import SwitchClient


async def write_values(
    sw: SwitchClient, values: Callable[[int], Mapping[int, int]], suffix: str = ""
) -> None:
    """Sets every quality value's cells: `values(column)` -> index -> value,
    in each register (`suffix`: the upper halves of a split program)."""
    for reg in pl.QUALITY_REGISTERS:
        cols = [(c, f) for c, (r, f) in enumerate(pl.QUALITY_VALUES) if r == reg]
        if len(cols) == 1:
            await sw.write_register(reg + suffix, values(cols[0][0]))
            continue
        cells: dict[int, dict[str, int]] = {}
        for c, f in cols:
            for i, v in values(c).items():
                cells.setdefault(i, {})[f] = v
        await sw.write_register_fields(reg + suffix, cells)


async def read_values(sw: SwitchClient, index: int) -> list[int]:
    """Every quality value of one cell in `QUALITY_VALUES` order (pipe 0's)."""
    out = []
    for reg, f in pl.QUALITY_VALUES:
        got = await sw.read_register(reg, [index], field=f)
        out.append(got[index][0])
    return out


def zeroes(sw: SwitchClient, reg: str) -> dict[str, int]:
    """A reset of a register's cell: every data field 0, in schema order."""
    return dict.fromkeys(sw.schema.table(reg).data, 0)
