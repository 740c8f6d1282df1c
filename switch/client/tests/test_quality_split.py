"""A program that splits the quality registers (switch/p4 QUALITY_SPLIT, the
large-t2 profile): `Pipeline` reads and zeroes a leg from 2^16 up in
`<register>_hi` at index leg - 2^16, found in the switch's schema, and a leg
below in `<register>`. Against the software switch started as that build
(`--legs 131072 --quality-half-bits 16`, the large-t2 sizes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from p4relay_switch import EntryBatch, Pipeline, SwitchClient
from p4relay_switch import pipeline as pl
from p4relay_switch.client import Entry
from p4relay_switch.encode import Encoder
from p4relay_switch.errors import WriteError
from p4relay_switch.proto import bfruntime_pb2 as pb
from quality_cells import write_values, zeroes

SPLIT = 1 << 16
LEGS = 2 * SPLIT  # large-t2: 65,536 calls per pipe
ARGS = (
    *("--relay-entries", "64", "--legs", str(LEGS), "--quality-half-bits", "16"),
    *("--leg6-entries", "64", "--relay6-entries", "64", "--workers", "1"),
)
LOW, HIGH, TOP = 300, SPLIT + 300, LEGS - 1


@pytest.fixture
async def sw(switch_addr: str) -> AsyncIterator[SwitchClient]:
    c = SwitchClient(switch_addr, client_id=22, timeout_s=5)
    await c.connect()
    yield c
    await c.close()


def test_split_found_in_the_schema(sw: SwitchClient) -> None:
    for name in pl.quality_registers(sw.schema.tables):
        assert sw.schema.table(name).size == SPLIT
        assert sw.schema.table(name + pl.QUALITY_HI_SUFFIX).size == LEGS - SPLIT
    assert Encoder(sw.schema).quality_split == SPLIT


async def test_upper_legs_reset_and_read_in_the_upper_half(sw: SwitchClient) -> None:
    """The pre-encoded reset and read of each leg are the generic client's
    writes and reads of its half's cell; guard_drops stays indexed by leg."""
    enc = Encoder(sw.schema)
    want: list[pb.Update] = []
    for leg in (LOW, HIGH):
        suffix, i = (pl.QUALITY_HI_SUFFIX, leg - SPLIT) if leg >= SPLIT else ("", leg)
        for r in pl.quality_registers(sw.schema.tables):
            reg = r + suffix
            entry = Entry({"$REGISTER_INDEX": i}, None, zeroes(sw, reg))
            want.append(sw.update(pb.Update.MODIFY, reg, entry))
        drops = Entry({pl.COUNTER_INDEX: leg}, None, {pl.COUNTER_PKTS: 0})
        want.append(sw.update(pb.Update.MODIFY, pl.GUARD_DROPS, drops))
    got = enc.batch(EntryBatch(reset_legs=(LOW, HIGH)), 0)
    assert list(pb.WriteRequest.FromString(got.updates).updates) == want
    assert got.kinds == [1] * len(want)
    reads = [pb.Entity.FromString(e) for e in enc.register_reads([LOW, HIGH])]
    tables = [(e.table_entry.table_id, e.table_entry.key.fields[0].exact.value) for e in reads]
    for n, r in enumerate(pl.quality_registers(sw.schema.tables)):
        lo, hi = sw.schema.table(r).id, sw.schema.table(r + pl.QUALITY_HI_SUFFIX).id
        assert tables[2 * n : 2 * n + 2] == [
            (lo, LOW.to_bytes(4, "big")),
            (hi, (HIGH - SPLIT).to_bytes(4, "big")),
        ]


async def test_quality_of_legs_in_both_halves(sw: SwitchClient) -> None:
    """Values written to each half's cells come back as their legs' quality;
    a reset zeroes exactly those legs' cells."""
    p = Pipeline(sw)
    await write_values(sw, lambda c: {LOW: 10 + c, 1: 7})
    await write_values(sw, lambda c: {HIGH - SPLIT: 20 + c, TOP - SPLIT: 30}, pl.QUALITY_HI_SUFFIX)
    q = await p.read_quality([LOW, HIGH, TOP])
    assert [q[LOW].packets, q[LOW].lost, q[LOW].reordered, q[LOW].payload_type] == [
        10,
        11,
        12,
        17,
    ]
    assert [q[HIGH].lost, q[HIGH].reordered, q[TOP].reordered] == [21, 22, 30]
    assert [q[HIGH].packets, q[HIGH].max_seq, q[HIGH].payload_type] == [20, 23, 27]
    assert q[TOP].packets == q[TOP].jitter_raw == 30
    await p.reset_quality([HIGH, TOP])
    q = await p.read_quality([LOW, HIGH, TOP])
    assert q[LOW].packets == 10 and q[HIGH].packets == 0 and q[TOP].last_seen_ms == 0
    # the lower half's cell of the same index and other legs are untouched
    assert (await sw.read_register(pl.REG_PACKETS, [HIGH - SPLIT]))[HIGH - SPLIT] == [10]
    assert (await sw.read_register(pl.REG_PACKETS, [1]))[1] == [7]
    await p.reset_quality([LOW, 1])


async def test_a_half_refuses_an_index_beyond_it(sw: SwitchClient) -> None:
    with pytest.raises(WriteError, match="size"):
        await sw.write_register(pl.REG_PACKETS, {SPLIT: 1})
    with pytest.raises(WriteError, match="size"):
        await sw.write_register(pl.REG_PACKETS + pl.QUALITY_HI_SUFFIX, {LEGS - SPLIT: 1})
