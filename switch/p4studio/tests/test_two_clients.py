"""The project's client (`p4relay_switch`, production) and P4 Studio's client
(`bfrt_grpc.client`, what PTF and every Tofino operator use) see the same
switch: entries, counters and registers written through one read back alike
through the other, against the real software switch.

Values are compared as plain numbers: each client's own presentation (the
project's `Lpm`/`Range`, bfrt_grpc's `{"value": .., "prefix_len": ..}`) is
turned into one form, nothing else is changed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

import bfrt_grpc.client as gc
import pytest
from p4relay_switch import (
    BlockingSwitch,
    Endpoint,
    Lpm,
    Nexthop,
    NotFoundError,
    Pipeline,
    Range,
    RelayCall,
    Ternary,
)
from p4relay_switch import pipeline as pl
from p4relay_switch.codec import to_int
from p4relay_testsupport import Softswitch, softswitch

P4_NAME = "p4relay"
ALL_PIPES = gc.Target(device_id=0, pipe_id=0xFFFF)
ENTRIES = 64
TTL_MS = 60_000
# Read twice, a moment apart: the remaining idle TTL counts down in between.
TTL_SLACK_MS = 5_000
CALL_TABLES = (pl.RELAY, pl.LEG_REWRITE, pl.RELAY_GUARD)
ROUTE_TABLES = (pl.IPV4_LPM, pl.NEXTHOP, pl.RELAY_ADDR)

Plain = tuple[tuple[str, Any], ...]


@pytest.fixture(scope="module")
def switch() -> Iterator[Softswitch]:
    args = ("--relay-entries", str(ENTRIES), "--legs", str(ENTRIES))
    with softswitch(args) as sw:
        yield sw


@pytest.fixture
def project(switch: Softswitch) -> Iterator[BlockingSwitch]:
    sw = BlockingSwitch(switch.address, client_id=2, timeout_s=10.0)
    for t in (*CALL_TABLES, *ROUTE_TABLES):
        sw.run(sw.client.clear(t))
    yield sw
    sw.close()


@pytest.fixture
def p4studio(switch: Softswitch, project: BlockingSwitch) -> Iterator[Any]:
    """bfrt_grpc's client, subscribed and bound as a PTF test's BfRuntimeTest is."""
    interface = gc.ClientInterface(switch.address, client_id=1, device_id=0)
    interface.bind_pipeline_config(P4_NAME)
    yield interface
    interface.tear_down_stream()


def call(i: int, *, legs: tuple[int, int]) -> RelayCall:
    return RelayCall.between(
        a=Endpoint.of("198.18.1.10", 6000 + 2 * i),
        relay_a=Endpoint.of("198.18.0.10", 20000 + 4 * i),
        b=Endpoint.of("198.18.2.10", 7000 + 2 * i),
        relay_b=Endpoint.of("198.18.0.10", 20002 + 4 * i),
        legs=legs,
        ports=(1, 2),
    )


# ---------------------------------------------------------------- one form


def project_key(v: Any) -> Any:
    if isinstance(v, Lpm):
        return ("lpm", to_int(v.value), v.prefix_len)
    if isinstance(v, Range):
        return ("range", to_int(v.low), to_int(v.high))
    if isinstance(v, Ternary):
        return ("ternary", to_int(v.value), to_int(v.mask))
    return ("exact", to_int(v))


def p4studio_key(v: Mapping[str, Any]) -> Any:
    if "prefix_len" in v:
        return ("lpm", int(v["value"]), int(v["prefix_len"]))
    if "low" in v:
        return ("range", int(v["low"]), int(v["high"]))
    if "mask" in v:
        return ("ternary", int(v["value"]), int(v["mask"]))
    return ("exact", int(v["value"]))


def plain(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(plain(x) for x in v)
    if isinstance(v, bytes | bytearray):
        return int.from_bytes(v, "big")
    return v


def row(key: Mapping[str, Any], action: str | None, data: Mapping[str, Any]) -> Plain:
    return (
        ("key", tuple(sorted(key.items()))),
        ("action", action),
        ("data", tuple(sorted((k, plain(v)) for k, v in data.items()))),
    )


def read_project(sw: BlockingSwitch, table: str) -> set[Plain]:
    return {
        row({k: project_key(v) for k, v in e.key.items()}, e.action, e.data)
        for e in sw.run(sw.client.read(table, from_hw=True))
        if not e.is_default
    }


def read_p4studio(interface: Any, table: str) -> set[Plain]:
    t = interface.bfrt_info_get(P4_NAME).table_get(table)
    out = set()
    for data, key in t.entry_get(ALL_PIPES, None, {"from_hw": True}):
        d = data.to_dict()
        action = d.pop("action_name")
        if d.pop("is_default_entry"):
            continue
        out.add(row({k: p4studio_key(v) for k, v in key.to_dict().items()}, action, d))
    return out


def without_ttl(rows: set[Plain]) -> tuple[set[Plain], list[int]]:
    """The rows with $ENTRY_TTL left out, and the TTLs."""
    out: set[Plain] = set()
    ttls: list[int] = []
    for key, action, (_, data) in rows:
        kept = tuple((k, v) for k, v in data if k != pl.TTL)
        ttls += [int(v) for k, v in data if k == pl.TTL]
        out.add((key, action, ("data", kept)))
    return out, ttls


def install_calls(sw: BlockingSwitch) -> list[RelayCall]:
    p = Pipeline(sw.client)
    calls = [call(0, legs=(10, 11)), call(1, legs=(12, 13))]
    sw.run(p.install_call(calls[0], ttl_ms=TTL_MS, guard=True))
    sw.run(p.install_call(calls[1], ttl_ms=TTL_MS))
    sw.run(p.add_nexthops([Nexthop(1, 1, "02:00:00:00:01:01", "02:00:00:00:02:01")]))
    sw.run(p.add_routes([("198.18.1.0/24", 1), ("0.0.0.0/0", 1)]))
    sw.run(p.add_relay_addr("198.18.0.10", 20000, 29999))
    return calls


# ---------------------------------------------------------------- tests


def test_entries_written_by_the_project_read_alike(project: BlockingSwitch, p4studio: Any) -> None:
    install_calls(project)
    for table in (*CALL_TABLES, *ROUTE_TABLES):
        mine, theirs = read_project(project, table), read_p4studio(p4studio, table)
        assert mine, table
        if table == pl.RELAY:
            (mine, ttl_a), (theirs, ttl_b) = without_ttl(mine), without_ttl(theirs)
            assert len(ttl_a) == len(ttl_b) == 8  # two calls, four relay entries each
            assert all(TTL_MS - TTL_SLACK_MS < t <= TTL_MS for t in ttl_a + ttl_b), (ttl_a, ttl_b)
        assert mine == theirs, table


def test_entries_written_by_p4studio_read_alike(project: BlockingSwitch, p4studio: Any) -> None:
    info = p4studio.bfrt_info_get(P4_NAME)
    nexthop = info.table_get(pl.NEXTHOP)
    nexthop.entry_add(
        ALL_PIPES,
        [nexthop.make_key([gc.KeyTuple(pl.K_NEXTHOP_ID, 7)])],
        [
            nexthop.make_data(
                [
                    gc.DataTuple("port", 2),
                    gc.DataTuple("src_mac", 0x020000000102),
                    gc.DataTuple("dst_mac", 0x020000000202),
                ],
                pl.A_FORWARD,
            )
        ],
    )
    lpm = info.table_get(pl.IPV4_LPM)
    lpm.info.key_field_annotation_add(pl.K_DST_ADDR, "ipv4")
    lpm.entry_add(
        ALL_PIPES,
        [lpm.make_key([gc.KeyTuple(pl.K_DST_ADDR, "198.18.2.0", prefix_len=24)])],
        [lpm.make_data([gc.DataTuple("nexthop_id", 7)], pl.A_SET_NEXTHOP)],
    )
    leg = info.table_get(pl.LEG_REWRITE)
    leg.entry_add(
        ALL_PIPES,
        [leg.make_key([gc.KeyTuple(pl.K_LEG, 20)])],
        [
            leg.make_data(
                [
                    gc.DataTuple("src_addr", int(ipaddress.IPv4Address("198.18.0.10"))),
                    gc.DataTuple("dst_addr", int(ipaddress.IPv4Address("198.18.2.10"))),
                    gc.DataTuple("src_port", 20002),
                    gc.DataTuple("dst_port", 7000),
                ],
                pl.A_REWRITE,
            )
        ],
    )
    for table in (pl.NEXTHOP, pl.IPV4_LPM, pl.LEG_REWRITE):
        theirs = read_p4studio(p4studio, table)
        assert theirs == read_project(project, table), table
    routes = project.run(Pipeline(project.client).read_routes())
    assert routes.port_for("198.18.2.77") == 2


def test_counters_read_alike(project: BlockingSwitch, p4studio: Any) -> None:
    calls = install_calls(project)
    legs = [leg for c in calls for leg in c.legs]
    # leg_rewrite's direct counter and guard_drops' cells, set through P4 Studio's client
    info = p4studio.bfrt_info_get(P4_NAME)
    leg_t = info.table_get(pl.LEG_REWRITE)
    keys = [leg_t.make_key([gc.KeyTuple(pl.K_LEG, leg)]) for leg in legs]
    leg_t.entry_mod(
        ALL_PIPES,
        keys,
        [
            leg_t.make_data(
                [gc.DataTuple(pl.COUNTER_PKTS, 100 + i), gc.DataTuple(pl.COUNTER_BYTES, 1000 * i)],
                pl.A_REWRITE,
            )
            for i, _ in enumerate(legs)
        ],
    )
    gd = info.table_get(pl.GUARD_DROPS)
    gd.entry_mod(
        ALL_PIPES,
        [gd.make_key([gc.KeyTuple(pl.COUNTER_INDEX, leg)]) for leg in legs],
        [
            gd.make_data([gc.DataTuple(pl.COUNTER_PKTS, 7 * i)])  # a packets counter
            for i, _ in enumerate(legs)
        ],
    )
    p = Pipeline(project.client)
    mine = project.run(p.read_leg_counters(legs))
    theirs = {}
    for data, key in leg_t.entry_get(ALL_PIPES, keys, {"from_hw": True}):
        d = data.to_dict()
        theirs[key.to_dict()[pl.K_LEG]["value"]] = (d[pl.COUNTER_PKTS], d[pl.COUNTER_BYTES])
    assert {leg: (c.packets, c.bytes) for leg, c in mine.items()} == theirs
    assert theirs == {leg: (100 + i, 1000 * i) for i, leg in enumerate(legs)}
    drops = project.run(p.read_guard_drops(legs))
    theirs_gd = {
        key.to_dict()[pl.COUNTER_INDEX]["value"]: data.to_dict()[pl.COUNTER_PKTS]
        for data, key in gd.entry_get(
            ALL_PIPES,
            [gd.make_key([gc.KeyTuple(pl.COUNTER_INDEX, leg)]) for leg in legs],
            {"from_hw": True},
        )
    }
    assert drops == theirs_gd == {leg: 7 * i for i, leg in enumerate(legs)}


def test_registers_read_alike(project: BlockingSwitch, p4studio: Any) -> None:
    """Each quality register written through one client, read through both:
    a register of one value (`f1`) and rtp_loss's two fields alike."""
    info = p4studio.bfrt_info_get(P4_NAME)
    cells = [0, 3, ENTRIES - 1]
    tables = project.client.schema.tables
    values = pl.quality_values(tables)
    for n, name in enumerate(pl.quality_registers(tables)):
        fields = [f for r, f in values if r == name]
        full = {f: pl.register_field(name, f) for f in fields}
        reg = info.table_get(name)
        assert sorted(reg.info.data_field_name_list_get()) == sorted(full.values()), name

        def value(
            i: int,
            f: str,
            n: int = n,
            reg: Any = reg,
            full: dict[str, str] = full,
            fields: list[str] = fields,
        ) -> int:
            width: int = reg.info.data_field_size_get(full[f])[1]
            return (i * 1000 + n + fields.index(f)) % (1 << width)

        if n % 2:  # half written through each client
            write = project.client.write_register_fields(
                name, {i: {f: value(i, f) for f in fields} for i in cells}
            )
            project.run(write)
        else:  # as P4 Studio's tna_register test writes a register
            reg.entry_mod(
                ALL_PIPES,
                [reg.make_key([gc.KeyTuple("$REGISTER_INDEX", i)]) for i in cells],
                [
                    reg.make_data([gc.DataTuple(full[f], value(i, f)) for f in fields])
                    for i in cells
                ],
            )
        got = list(
            reg.entry_get(
                ALL_PIPES,
                [reg.make_key([gc.KeyTuple("$REGISTER_INDEX", i)]) for i in cells],
                {"from_hw": True},
            )
        )
        for f in fields:
            field = None if len(fields) == 1 else f
            mine = project.run(project.client.read_register(name, cells, field=field))
            theirs = {
                key.to_dict()["$REGISTER_INDEX"]["value"]: data.to_dict()[full[f]]
                for data, key in got
            }
            # One value per pipe, in both.
            assert mine == theirs, (name, f)
            assert theirs == {i: [value(i, f)] for i in cells}, (name, f)


def test_usage_alike(project: BlockingSwitch, p4studio: Any) -> None:
    install_calls(project)
    info = p4studio.bfrt_info_get(P4_NAME)
    for table in (*CALL_TABLES, *ROUTE_TABLES):
        theirs = sum(info.table_get(table).usage_get(ALL_PIPES, flags={"from_hw": False}))
        assert project.run(project.client.usage(table)) == theirs, table
    # and an entry removed through P4 Studio's client is gone for the project's
    relay = info.table_get(pl.RELAY)
    first = next(iter(project.run(project.client.read(pl.RELAY))))
    relay.entry_del(
        ALL_PIPES,
        [relay.make_key([gc.KeyTuple(k, to_int(v)) for k, v in first.key.items()])],  # type: ignore[arg-type]
    )
    assert project.run(project.client.usage(pl.RELAY)) == 7
    with pytest.raises(NotFoundError):
        project.run(project.client.read(pl.RELAY, [dict(first.key)], from_hw=False))
