"""Tests' writes and reads of the quality registers' values by column
(`quality_values` of the switch's schema: the loss counts in the program's
form), every register's cell through `write_register_fields`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from p4relay_switch import pipeline as pl
from p4relay_switch.client import SwitchClient


async def write_values(
    sw: SwitchClient, values: Callable[[int], Mapping[int, int]], suffix: str = ""
) -> None:
    """Sets every quality value's cells: `values(column)` -> index -> value,
    in each register (`suffix`: the upper halves of a split program)."""
    values_of = pl.quality_values(sw.schema.tables)
    for reg in pl.quality_registers(sw.schema.tables):
        cells: dict[int, dict[str, int]] = {}
        for c, (r, f) in enumerate(values_of):
            if r != reg:
                continue
            for i, v in values(c).items():
                cells.setdefault(i, {})[f] = v
        await sw.write_register_fields(reg + suffix, cells)


async def read_values(sw: SwitchClient, index: int) -> list[int]:
    """Every quality value of one cell in `quality_values` order (pipe 0's)."""
    out = []
    for reg, f in pl.quality_values(sw.schema.tables):
        got = await sw.read_register(reg, [index], field=f)
        out.append(got[index][0])
    return out


def zeroes(sw: SwitchClient, reg: str) -> dict[str, int]:
    """A reset of a register's cell: every data field 0, in schema order."""
    return dict.fromkeys(sw.schema.table(reg).data, 0)
