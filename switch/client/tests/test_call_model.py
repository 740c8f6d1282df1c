"""The call model's writes and reads against the real softswitch: the
pre-encoded updates parse to exactly what the generic, schema-checked client
builds, a batch is written in its order, and reads decode as the generic
reads do."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4relay_switch import (
    Counters,
    EntryBatch,
    FlowKey,
    GuardEntry,
    GuardKey,
    LegRewrite,
    Pipeline,
    RelayEntry,
    SwitchClient,
)
from p4relay_switch import pipeline as pl
from p4relay_switch.client import Entry
from p4relay_switch.codec import DataValue, KeyValue
from p4relay_switch.encode import Encoder
from p4relay_switch.proto import bfruntime_pb2 as pb
from quality_cells import read_values, write_values, zeroes

ARGS = ("--relay-entries", "64", "--legs", "512", "--workers", "1")

KEY = FlowKey("198.18.1.10", "127.0.0.1", 6001, 40001, 1)
GKEY = GuardKey("127.0.0.1", 40001)
GUARD = GuardEntry(GKEY, 300)
LEG = LegRewrite(300, "127.0.0.1", "198.18.2.10", 40002, 7000)


@pytest.fixture
async def sw(switch_addr: str) -> AsyncIterator[SwitchClient]:
    c = SwitchClient(switch_addr, client_id=21, timeout_s=5)
    await c.connect()
    yield c
    await c.close()


async def test_encoding_matches_generic_client(sw: SwitchClient) -> None:
    c = sw
    rkey: dict[str, KeyValue] = {
        pl.K_SRC_ADDR: "198.18.1.10",
        pl.K_DST_ADDR: "127.0.0.1",
        pl.K_SRC_PORT: 6001,
        pl.K_DST_PORT: 40001,
        pl.K_BOUND_PORT: 1,
    }
    gkey: dict[str, KeyValue] = {pl.K_DST_ADDR: "127.0.0.1", pl.K_DST_PORT: 40001}
    lg_data: dict[str, DataValue] = {
        "src_addr": "127.0.0.1",
        "dst_addr": "198.18.2.10",
        "src_port": 40002,
    }
    lg_data["dst_port"] = 7000
    want = [
        c.update(pb.Update.DELETE, pl.RELAY_GUARD, Entry(gkey)),
        c.update(pb.Update.DELETE, pl.RELAY, Entry(rkey)),
        *(
            c.update(
                pb.Update.MODIFY,
                r,
                Entry({"$REGISTER_INDEX": 300}, None, zeroes(c, r)),
            )
            for r in pl.quality_registers(c.schema.tables)
        ),
        # a leg's reset zeroes its guard drops too
        c.update(
            pb.Update.MODIFY,
            pl.GUARD_DROPS,
            Entry({pl.COUNTER_INDEX: 300}, None, {pl.COUNTER_PKTS: 0}),
        ),
        c.update(pb.Update.MODIFY, pl.LEG_REWRITE, Entry({pl.K_LEG: 300}, pl.A_REWRITE, lg_data)),
        c.update(pb.Update.INSERT, pl.LEG_REWRITE, Entry({pl.K_LEG: 300}, pl.A_REWRITE, lg_data)),
        c.update(
            pb.Update.INSERT,
            pl.RELAY,
            Entry(rkey, pl.A_RELAY_LEG, {"leg": 300, "rtcp": 1, pl.TTL: 5000}),
        ),
        c.update(pb.Update.INSERT, pl.RELAY_GUARD, Entry(gkey, pl.A_GUARD_DROP, {"leg": 300})),
        c.update(pb.Update.DELETE, pl.LEG_REWRITE, Entry({pl.K_LEG: 300})),
    ]
    batch = EntryBatch(
        add_legs=(LEG,),
        mod_legs=(LEG,),
        add_relays=(RelayEntry(KEY, 300, True),),
        del_relays=(KEY,),
        del_legs=(300,),
        reset_legs=(300,),
        add_guards=(GUARD,),
        del_guards=(GKEY,),
    )
    enc = Encoder(c.schema)
    got = enc.batch(batch, 5000)
    assert list(pb.WriteRequest.FromString(got.updates).updates) == want
    assert got.kinds == [0, 0] + [1] * (len(pl.quality_registers(c.schema.tables)) + 2) + [
        2,
        2,
        2,
        0,
    ]
    # The inserts' positions, which a failed write's undo goes by.
    for at, table in (
        (got.add_legs, pl.LEG_REWRITE),
        (got.add_relays, pl.RELAY),
        (got.add_guards, pl.RELAY_GUARD),
    ):
        assert [(want[i].type, want[i].entity.table_entry.table_id) for i in at] == [
            (pb.Update.INSERT, c.schema.table(table).id)
        ]
    # Each TTL and rtcp flag has its own template: the same values again.
    for ttl, rtcp in ((0, False), (5000, True), (70000, False)):
        e = RelayEntry(KEY, 300, rtcp)
        one = enc.batch(EntryBatch(add_relays=(e,)), ttl)
        data = {"leg": 300, "rtcp": int(rtcp), pl.TTL: ttl}
        assert list(pb.WriteRequest.FromString(one.updates).updates) == [
            c.update(pb.Update.INSERT, pl.RELAY, Entry(rkey, pl.A_RELAY_LEG, data))
        ]
    # counters are read per leg: leg_rewrite entries and guard_drops cells
    te = c.table_entry(pl.LEG_REWRITE, Entry({pl.K_LEG: 300}))
    te.table_flags.from_hw = True
    assert [pb.Entity.FromString(e) for e in enc.leg_reads([300])] == [pb.Entity(table_entry=te)]
    gte = c.table_entry(pl.GUARD_DROPS, Entry({pl.COUNTER_INDEX: 300}))
    gte.table_flags.from_hw = True
    drops = [pb.Entity.FromString(e) for e in enc.guard_drop_reads([300])]
    assert drops == [pb.Entity(table_entry=gte)]
    reads = enc.register_reads([300])
    for raw, name in zip(reads, pl.quality_registers(c.schema.tables), strict=True):
        rte = c.table_entry(name, Entry({"$REGISTER_INDEX": 300}))
        rte.table_flags.from_hw = True
        assert pb.Entity.FromString(raw) == pb.Entity(table_entry=rte)


async def test_guards_inserted_after_relays_and_deleted_before(sw: SwitchClient) -> None:
    """One Write per batch: guards are inserted after the relay entries and
    deleted before them, so a legitimate packet is never dropped."""
    relay_id = sw.schema.table(pl.RELAY).id
    guard_id = sw.schema.table(pl.RELAY_GUARD).id
    call = pl.RelayCall.between(
        pl.Endpoint.of("198.18.1.10", 6000),
        pl.Endpoint.of("127.0.0.1", 36020),
        pl.Endpoint.of("198.18.2.10", 7000),
        pl.Endpoint.of("127.0.0.1", 36010),
        (1, 2),
        (1, 2),
    )
    enc = Encoder(sw.schema)

    def tables(b: EntryBatch) -> list[int]:
        ups = pb.WriteRequest.FromString(enc.batch(b, 1000).updates).updates
        ids = [u.entity.table_entry.table_id for u in ups]
        return [t for t in ids if t in (relay_id, guard_id)]

    assert tables(call.install(guard=True)) == [relay_id] * 4 + [guard_id] * 4
    assert tables(call.removal()) == [guard_id] * 4 + [relay_id] * 4
    p = Pipeline(sw)
    await p.write(call.install(guard=True), 1000)  # the switch takes them in that order
    dump = await p.dump()
    assert sorted(r.key for r in dump.relays) == sorted(call.flow_keys())
    assert sorted(dump.guards) == sorted(call.guards())
    await p.write(call.removal())
    dump = await p.dump()
    assert (dump.relays, dump.legs, dump.guards) == ([], [], [])


async def test_read_quality_matches_register_reads(sw: SwitchClient) -> None:
    """One Read of every quality register decodes to what the generic
    register reads return."""
    p = Pipeline(sw)
    legs = [7, 8]
    await write_values(sw, lambda c: {7: 100 + c, 8: 200 + c})
    q = await p.read_quality(legs)
    for leg in legs:
        regs = await read_values(sw, leg)
        got = q[leg]
        assert [
            got.packets,
            got.lost,
            got.reordered,
            got.max_seq,
            got.transit,
            got.jitter_raw,
            got.last_seen_ms,
            got.payload_type,
        ] == regs
    assert regs[1:3] == [201, 202], "lost and reordered: rtp_loss's two fields"
    await p.reset_quality(legs)
    assert all(v.packets == 0 and v.jitter_raw == 0 for v in (await p.read_quality(legs)).values())


async def test_counters_of_absent_legs_left_out(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    await p.write(EntryBatch(add_legs=(LEG,), add_relays=(RelayEntry(KEY, 300, True),)), 5000)
    got = await p.read_leg_counters([300, 301])
    assert got == {300: Counters(0, 0)}
    other = FlowKey("198.18.1.11", "127.0.0.1", 6001, 40001, 1)
    await p.write(EntryBatch(del_relays=(KEY, other), del_legs=(300,)))  # absent: fine
    assert await p.read_leg_counters([300]) == {}


_NETS = st.builds(
    lambda a, n: ipaddress.IPv4Network((a, n), strict=False),
    st.sampled_from([0x0A000000, 0xC6120100, 0xC6120180, 0]) | st.integers(0, 2**32 - 1),
    st.sampled_from([0, 8, 16, 24, 25, 32]) | st.integers(0, 32),
)


@given(
    st.lists(st.tuples(_NETS, st.none() | st.integers(0, 511)), max_size=12),
    st.lists(st.integers(0, 2**32 - 1) | st.sampled_from([0x0A000001, 0xC6120181]), max_size=20),
)
def test_route_lookup_is_the_longest_prefix(
    prefixes: list[tuple[ipaddress.IPv4Network, int | None]], addrs: list[int]
) -> None:
    """`Routes.port_for` answers as a scan of every prefix would: the longest
    prefix holding the address, the first listed of equal ones; by string and
    by integer, asked once or again."""
    routes = pl.Routes(tuple(prefixes))
    for net, _ in prefixes:
        addrs.append(int(net.network_address))
    for a in addrs:
        addr = ipaddress.IPv4Address(a)
        best: tuple[int, int | None] | None = None
        for net, port in prefixes:
            if addr in net and (best is None or net.prefixlen > best[0]):
                best = (net.prefixlen, port)
        want = None if best is None else best[1]
        assert routes.port_for(str(addr)) == want
        assert routes.port_for(str(addr)) == want
        assert routes.port_for(a) == want
    with pytest.raises(ValueError):
        routes.port_for("198.18.1")
