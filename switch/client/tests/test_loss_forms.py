"""A leg's loss counts in each target's form, through the call model's
encoder built from the committed compiler schemas: Tofino 1's standard
program (one register of two fields, rtp_loss {lost, reordered}) and Tofino
2's (two registers, rtp_lost and rtp_reordered). The encoder picks the form
from the schema; resets, reads and decoding follow it."""

from __future__ import annotations

from pathlib import Path

import pytest
from p4relay_switch import EntryBatch
from p4relay_switch import pipeline as pl
from p4relay_switch.encode import Encoder
from p4relay_switch.proto import bfruntime_pb2 as pb
from p4relay_switch.schema import Schema

BFRT = Path(__file__).resolve().parents[2] / "p4" / "bfrt"
LEG = 300


def schema(profile: str) -> Schema:
    return Schema.from_json((BFRT / f"{profile}.bf-rt.json").read_text())


@pytest.mark.parametrize(
    ("profile", "form"),
    [("standard", pl.LOSS_FIELDS), ("standard-t2", pl.LOSS_REGISTERS)],
)
def test_form_found_in_the_schema(profile: str, form: tuple[pl.RegisterValue, ...]) -> None:
    s = schema(profile)
    assert pl.loss_values(s.tables) == form
    other = pl.LOSS_REGISTERS if form == pl.LOSS_FIELDS else pl.LOSS_FIELDS
    assert not {r for r, _ in other} & set(s.tables), "one form per program"
    regs = pl.quality_registers(s.tables)
    assert Encoder(s).quality_registers == regs
    assert len(regs) == (7 if form == pl.LOSS_FIELDS else 8)


def cell(s: Schema, reg: str, values: dict[str, list[int]]) -> pb.Entity:
    """A register cell as a read returns it: per data field one value per pipe."""
    t = s.table(reg)
    key = t.key("$REGISTER_INDEX")
    fields = [
        pb.DataField(
            field_id=t.data_field(pl.register_field(reg, f)).id, stream=v.to_bytes(4, "big")
        )
        for f, per_pipe in values.items()
        for v in per_pipe
    ]
    return pb.Entity(
        table_entry=pb.TableEntry(
            table_id=t.id,
            key=pb.TableKey(
                fields=[
                    pb.KeyField(
                        field_id=key.id,
                        exact=pb.KeyField.Exact(value=LEG.to_bytes(key.nbytes, "big")),
                    )
                ]
            ),
            data=pb.TableData(fields=fields),
        )
    )


@pytest.mark.parametrize("profile", ["standard", "standard-t2"])
def test_loss_counts_decode_in_either_form(profile: str) -> None:
    """Every quality value written to its register's cell (its column + 10
    in pipe 0, + 20 in pipe 1) decodes to the leg's quality: the counts add
    over the pipes, the rest come from the pipe with most packets."""
    s = schema(profile)
    enc = Encoder(s)
    ents = []
    for reg in enc.quality_registers:
        cols = [(c, f) for c, (r, f) in enumerate(enc.quality_values) if r == reg]
        ents.append(cell(s, reg, {f: [10 + c, 20 + c] for c, f in cols}))
    q = enc.decode_quality(ents, [LEG])[LEG]
    assert (q.packets, q.lost, q.reordered) == (30, 32, 34)
    assert (q.max_seq, q.transit, q.jitter_raw, q.last_seen_ms, q.payload_type) == (
        23,
        24,
        25,
        26,
        27,
    )
    reads = [pb.Entity.FromString(e).table_entry.table_id for e in enc.register_reads([LEG])]
    assert reads == [s.table(r).id for r in pl.quality_registers(s.tables)]


@pytest.mark.parametrize("profile", ["standard", "standard-t2"])
def test_reset_zeroes_every_loss_field(profile: str) -> None:
    """A leg's reset writes each quality register's cell once, every data
    field 0: rtp_loss's two together, or rtp_lost's and rtp_reordered's."""
    s = schema(profile)
    got = Encoder(s).batch(EntryBatch(reset_legs=(LEG,)), 0)
    ups = list(pb.WriteRequest.FromString(got.updates).updates)
    by_table = {u.entity.table_entry.table_id: u.entity.table_entry for u in ups}
    (lost_reg, lost_f), (reord_reg, reord_f) = pl.loss_values(s.tables)
    for reg, f in ((lost_reg, lost_f), (reord_reg, reord_f)):
        te = by_table[s.table(reg).id]
        fid = s.table(reg).data_field(pl.register_field(reg, f)).id
        assert [d.stream for d in te.data.fields if d.field_id == fid] == [bytes(4)]
        assert len(te.data.fields) == len(s.table(reg).data)
    assert len(ups) == len(pl.quality_registers(s.tables)) + 1  # and guard_drops
