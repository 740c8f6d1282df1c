"""The client against the real softswitch on loopback (no data ports)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from p4relay_switch import (
    Backoff,
    BlockingSwitch,
    Counters,
    EncodeError,
    Endpoint,
    Entry,
    EntryBatch,
    EntryExistsError,
    GuardKey,
    Lpm,
    Nexthop,
    NotFoundError,
    Pipeline,
    Reconnected,
    RelayCall,
    SchemaError,
    SwitchClient,
    SwitchError,
    SwitchUnavailableError,
    TableFullError,
)
from p4relay_switch import pipeline as pl
from p4relay_switch.names import IRED_DROPS
from p4relay_testsupport import free_port, softswitch, softswitch_binary, wait_for
from quality_cells import read_values

RELAY_ENTRIES = 16
LEGS = 16
ARGS = ("--relay-entries", str(RELAY_ENTRIES), "--legs", str(LEGS), "--workers", "1")


@pytest.fixture
async def sw(switch_addr: str) -> AsyncIterator[SwitchClient]:
    c = SwitchClient(switch_addr, client_id=11, timeout_s=5)
    await c.connect()
    for t in (pl.RELAY_GUARD, pl.RELAY, pl.LEG_REWRITE, pl.RELAY_ADDR, pl.IPV4_LPM, pl.NEXTHOP):
        rows = await c.read(t, from_hw=False)
        await c.delete(t, [Entry(r.key) for r in rows])
    yield c
    await c.close()


def call(i: int = 0, legs: tuple[int, int] = (0, 1)) -> RelayCall:
    return RelayCall.between(
        a=Endpoint.of("198.18.1.10", 6000 + 2 * i),
        relay_a=Endpoint.of("198.18.0.10", 20000 + 4 * i),
        b=Endpoint.of("198.18.2.10", 7000 + 2 * i),
        relay_b=Endpoint.of("198.18.0.10", 20002 + 4 * i),
        legs=legs,
        ports=(1, 2),
    )


async def test_connect_binds_and_loads_schema(sw: SwitchClient) -> None:
    assert sw.connected
    assert sw.schema.table(pl.RELAY).size == RELAY_ENTRIES
    assert sw.schema.table(pl.LEG_REWRITE).size == LEGS
    assert "$PORT_STAT" in sw.schema.tables
    cfg = await sw.get_pipeline_config()
    assert [c.p4_name for c in cfg.config] == ["p4relay"]


async def test_insert_read_modify_delete(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    await p.add_nexthops([Nexthop(1, 1, "02:00:00:00:00:01", "02:00:00:00:00:02")])
    await p.add_routes([("198.18.2.0/24", 1), ("0.0.0.0/0", 1)])
    [row] = await sw.read(pl.NEXTHOP, [{pl.K_NEXTHOP_ID: 1}])
    assert row.action == pl.A_FORWARD
    assert row.data == {"port": 1, "src_mac": 0x020000000001, "dst_mac": 0x020000000002}
    routes = await sw.read(pl.IPV4_LPM)
    assert sorted((r.key[pl.K_DST_ADDR] for r in routes), key=repr) == sorted(
        [Lpm(0xC6120200, 24), Lpm(0, 0)], key=repr
    )
    await p.add_nexthops([Nexthop(1, 2, "02:00:00:00:00:01", "02:00:00:00:00:03")], replace=True)
    [row] = await sw.read(pl.NEXTHOP, [{pl.K_NEXTHOP_ID: 1}])
    assert row.data["port"] == 2
    with pytest.raises(EntryExistsError):
        await p.add_nexthops([Nexthop(1, 1, "02:00:00:00:00:01", "02:00:00:00:00:02")])
    await p.delete_routes(["0.0.0.0/0"])
    with pytest.raises(NotFoundError):
        await p.delete_routes(["0.0.0.0/0"])
    assert await sw.usage(pl.IPV4_LPM) == 1


async def test_batched_insert_and_usage(sw: SwitchClient) -> None:
    entries = [
        Entry({pl.K_NEXTHOP_ID: 100 + i}, pl.A_FORWARD, {"port": i % 4, "src_mac": i, "dst_mac": i})
        for i in range(250)
    ]
    await sw.insert(pl.NEXTHOP, entries, batch=64)
    assert await sw.usage(pl.NEXTHOP) == 250
    assert len(await sw.read(pl.NEXTHOP)) == 250
    await sw.delete(pl.NEXTHOP, entries, batch=100)
    assert await sw.usage(pl.NEXTHOP) == 0


async def test_encode_errors_caught_before_sending(sw: SwitchClient) -> None:
    with pytest.raises(EncodeError):
        await sw.insert(
            pl.NEXTHOP,
            [Entry({pl.K_NEXTHOP_ID: 1}, pl.A_FORWARD, {"port": 512, "src_mac": 0, "dst_mac": 0})],
        )
    with pytest.raises(SchemaError, match="parameters missing"):
        await sw.insert(pl.NEXTHOP, [Entry({pl.K_NEXTHOP_ID: 1}, pl.A_FORWARD, {"port": 1})])
    with pytest.raises(SchemaError, match="no table"):
        await sw.read("pipe.Ingress.nothing")


async def test_call_install_counters_remove(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    c = call()
    await p.install_call(c, ttl_ms=5000)
    assert await sw.usage(pl.RELAY) == 4
    assert await sw.usage(pl.LEG_REWRITE) == 2
    rows = await sw.read(pl.RELAY)
    assert {(r.data["leg"], r.data["rtcp"]) for r in rows} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    ttls = [r.data[pl.TTL] for r in rows]
    assert all(isinstance(t, int) and 0 < t <= 5000 for t in ttls), ttls
    [rw] = await sw.read(pl.LEG_REWRITE, [{pl.K_LEG: 0}])
    assert rw.data == {
        "src_addr": int(c.a_to_b.out_src.addr),
        "dst_addr": int(c.a_to_b.out_dst.addr),
        "src_port": 20002,
        "dst_port": 7000,
        pl.COUNTER_BYTES: 0,
        pl.COUNTER_PKTS: 0,
    }
    # counted per leg (leg_rewrite's direct counter); relay entries have none
    assert all(pl.COUNTER_PKTS not in r.data for r in rows)
    counters = await p.call_counters(c)
    assert counters == {0: Counters(0, 0), 1: Counters(0, 0)}
    q = await p.read_quality([0, 1])
    assert q[0].packets == 0 and q[1].lost == 0
    with pytest.raises(EntryExistsError):
        await p.install_call(c)
    # the refused duplicate removed only what it wrote: the call is intact
    assert await sw.usage(pl.RELAY) == 4
    assert await sw.usage(pl.LEG_REWRITE) == 2
    with pytest.raises(NotFoundError):
        await sw.read(pl.LEG_REWRITE, [{pl.K_LEG: LEGS - 1}])
    await p.remove_call(c)
    assert await sw.usage(pl.RELAY) == 0
    assert await sw.usage(pl.LEG_REWRITE) == 0


async def test_guard_install_read_remove(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    c = call()
    assert c.guard_keys() == [
        GuardKey("198.18.0.10", port) for port in (20000, 20001, 20002, 20003)
    ]
    await p.install_call(c, guard=True)
    assert await p.guard_entry_count() == 4
    rows = await sw.read(pl.RELAY_GUARD)
    assert {r.action for r in rows} == {pl.A_GUARD_DROP}
    # each relay port's drops count on the leg of the direction it receives
    assert {(r.key[pl.K_DST_PORT], r.data["leg"]) for r in rows} == {
        (20000, 0),
        (20001, 0),
        (20002, 1),
        (20003, 1),
    }
    assert await p.guard_drops(c) == {0: 0, 1: 0}
    # guard_drops is an indexed Counter: $COUNTER_INDEX -> $COUNTER_SPEC_PKTS
    await sw.modify(pl.GUARD_DROPS, [Entry({pl.COUNTER_INDEX: 1}, None, {pl.COUNTER_PKTS: 9})])
    assert await p.guard_drops(c) == {0: 0, 1: 9}
    await p.reset_quality([1])  # a leg's reset zeroes its drops too
    assert await p.guard_drops(c) == {0: 0, 1: 0}
    # guarding again: ALREADY_EXISTS, and the refused write removed nothing
    with pytest.raises(EntryExistsError):
        await p.guard_call(c)
    assert await p.guard_entry_count() == 4
    await p.unguard_call(c)
    assert await p.guard_entry_count() == 0
    with pytest.raises(NotFoundError):
        await p.unguard_call(c, missing_ok=False)
    # guard after install (NAT learning done), then remove_call takes guards first
    await p.guard_call(c)
    await p.remove_call(c)
    assert await p.guard_entry_count() == 0
    assert await sw.usage(pl.RELAY) == 0
    # a call never guarded removes cleanly too
    await p.install_call(c)
    await p.remove_call(c)
    assert await sw.usage(pl.LEG_REWRITE) == 0


async def test_guard_table_full_rolls_back_the_whole_install(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    # fill the guard table with foreign entries, then install a guarded call
    filler = [
        Entry({pl.K_DST_ADDR: 0xC612000B, pl.K_DST_PORT: 30000 + i}, pl.A_GUARD_DROP, {"leg": 0})
        for i in range(RELAY_ENTRIES - 2)
    ]
    await sw.insert(pl.RELAY_GUARD, filler)
    with pytest.raises(TableFullError):
        await p.install_call(call(), guard=True)
    assert await sw.usage(pl.RELAY) == 0
    assert await sw.usage(pl.LEG_REWRITE) == 0
    assert await p.guard_entry_count() == RELAY_ENTRIES - 2
    await sw.delete(pl.RELAY_GUARD, filler)


async def test_large_failed_batch_names_each_failed_update(tmp_path: Path) -> None:
    """20,000 calls in one Write (200,000 updates), three of them on relay
    ports another call of the batch has: the error names exactly their guard
    inserts, however far into the batch (the details outgrow grpc's default
    8 KiB trailer), and the batch is undone."""
    n, collide = 20_000, {7_000: 0, 13_001: 1, 19_999: 2}

    def relay(i: int, side: int) -> Endpoint:
        j = collide.get(i, i)
        return Endpoint.of(f"198.18.0.{10 + j // 10_000}", 20000 + 4 * (j % 10_000) + 2 * side)

    calls = [
        RelayCall.between(
            a=Endpoint.of(f"198.19.{i // 250 % 250}.{i % 250 + 1}", 6000),
            relay_a=relay(i, 0),
            b=Endpoint.of(f"198.20.{i // 250 % 250}.{i % 250 + 1}", 7000),
            relay_b=relay(i, 1),
            legs=(2 * i + 1, 2 * i + 2),
            ports=(1, 2),
        )
        for i in range(n)
    ]
    batch = EntryBatch(
        add_legs=tuple(lg for c in calls for lg in c.install().add_legs),
        add_relays=tuple(r for c in calls for r in c.install().add_relays),
        add_guards=tuple(g for c in calls for g in c.guards()),
    )
    first_guard = len(batch.add_legs) + len(batch.add_relays)
    args = ("--relay-entries", str(4 * n), "--legs", str(2 * n + 1))
    with softswitch(args, log_path=tmp_path / "softswitch.log") as ss:
        c = SwitchClient(ss.address, client_id=12, timeout_s=30)
        await c.connect()
        try:
            p = Pipeline(c)
            with pytest.raises(EntryExistsError) as ei:
                await p.write(batch)
            want = [first_guard + 4 * i + k for i in sorted(collide) for k in range(4)]
            assert [e.index for e in ei.value.errors] == want
            assert {e.code for e in ei.value.errors} == {grpc.StatusCode.ALREADY_EXISTS}
            assert f"update {want[0]}" in str(ei.value)
            for t in (pl.RELAY, pl.LEG_REWRITE, pl.RELAY_GUARD):
                assert await c.usage(t) == 0, t
        finally:
            await c.close()


async def test_table_full_is_typed_and_rolled_back(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    n_calls = RELAY_ENTRIES // 4
    for i in range(n_calls):
        await p.install_call(call(i, legs=(i * 2 % LEGS, (i * 2 + 1) % LEGS)))
    assert await sw.usage(pl.RELAY) == RELAY_ENTRIES
    legs_before = await sw.usage(pl.LEG_REWRITE)
    with pytest.raises(TableFullError) as ei:
        await p.install_call(call(n_calls, legs=(LEGS - 2, LEGS - 1)))
    assert ei.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await sw.usage(pl.RELAY) == RELAY_ENTRIES
    assert await sw.usage(pl.LEG_REWRITE) == legs_before


async def test_registers_roundtrip(sw: SwitchClient) -> None:
    await sw.write_register(pl.REG_JITTER, {0: 7, LEGS - 1: 2**32 - 1})
    got = await sw.read_register(pl.REG_JITTER, [0, 1, LEGS - 1])
    assert {i: v[0] for i, v in got.items()} == {0: 7, 1: 0, LEGS - 1: 2**32 - 1}
    with pytest.raises(EncodeError):
        await sw.write_register(pl.REG_PAYLOAD_TYPE, {0: 256})  # 8-bit register
    with pytest.raises(SwitchError):  # index beyond the register's size
        await sw.read_register(pl.REG_JITTER, [LEGS + 10])
    # a register of two fields: both written together, each read by name
    lost, reordered = pl.F_LOST, pl.F_REORDERED
    cells = {0: {lost: 7, reordered: 3}, LEGS - 1: {lost: 2**32 - 1, reordered: 1}}
    await sw.write_register_fields(pl.REG_LOSS, cells)
    got = await sw.read_register(pl.REG_LOSS, [0, 1, LEGS - 1], field=lost)
    assert {i: v[0] for i, v in got.items()} == {0: 7, 1: 0, LEGS - 1: 2**32 - 1}
    got = await sw.read_register(pl.REG_LOSS, [0, LEGS - 1], field=reordered)
    assert {i: v[0] for i, v in got.items()} == {0: 3, LEGS - 1: 1}
    with pytest.raises(SchemaError):  # which field?
        await sw.read_register(pl.REG_LOSS, [0])
    with pytest.raises(SchemaError):  # one field alone
        await sw.write_register_fields(pl.REG_LOSS, {0: {lost: 1}})
    with pytest.raises(SchemaError):
        await sw.write_register(pl.REG_LOSS, {0: 1})
    await Pipeline(sw).reset_quality([0])
    assert (await sw.read_register(pl.REG_JITTER, [0]))[0] == [0]
    assert await read_values(sw, 0) == [0] * len(pl.quality_values(sw.schema.tables))


async def test_counters_roundtrip(sw: SwitchClient) -> None:
    await sw.write_counter(IRED_DROPS, {2: 5, 63: 2**32 - 1})
    got = await sw.read_counter(IRED_DROPS, [2, 3, 63])
    assert {i: v[0] for i, v in got.items()} == {2: 5, 3: 0, 63: 2**32 - 1}
    await sw.write_counter(IRED_DROPS, {2: 0})  # 0 resets a cell
    assert (await sw.read_counter(IRED_DROPS, [2]))[2] == [0]
    with pytest.raises(SchemaError, match="not an indexed counter"):
        await sw.read_counter(pl.REG_LOSS, [0])  # a register is not a counter
    with pytest.raises(SwitchError):  # a dev_port this switch cannot have
        await sw.write_counter(IRED_DROPS, {511: 1})
    with pytest.raises(SwitchError):  # index beyond the counter's 512 cells
        await sw.read_counter(IRED_DROPS, [600])


async def test_idle_table_attribute(sw: SwitchClient) -> None:
    await Pipeline(sw).setup(ttl_query_interval_ms=100, min_ttl_ms=1000)
    got = await sw.read_idle_table(pl.RELAY)
    assert (got.enable, got.notify, got.ttl_query_interval_ms) == (True, True, 100)
    await sw.set_idle_table(pl.RELAY, enable=False, ttl_query_interval_ms=250)
    got = await sw.read_idle_table(pl.RELAY)
    assert (got.enable, got.ttl_query_interval_ms) == (False, 250)
    # The interval is held within what the switch polls at: 10 ms .. 10 s.
    await sw.set_idle_table(pl.RELAY, ttl_query_interval_ms=1)
    assert (await sw.read_idle_table(pl.RELAY)).ttl_query_interval_ms == 10
    with pytest.raises(SwitchError, match="no idle timeout"):
        await sw.set_idle_table(pl.NEXTHOP)
    # Poll mode, as bf_switchd has it: hit state read on demand, no notifications.
    await sw.set_idle_table(pl.RELAY, notify=False, ttl_query_interval_ms=100)
    got = await sw.read_idle_table(pl.RELAY)
    assert (got.enable, got.notify) == (True, False)
    await Pipeline(sw).setup(ttl_query_interval_ms=100, min_ttl_ms=1000)
    assert (await sw.read_idle_table(pl.RELAY)).enable


async def test_connect_timeout_when_nothing_listens() -> None:
    c = SwitchClient(f"127.0.0.1:{free_port()}", connect_timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(SwitchUnavailableError, match="not reachable"):
        await c.connect()
    assert time.monotonic() - t0 < 3
    await c.close()


async def test_reconnect_after_switch_restart() -> None:
    addr = f"127.0.0.1:{free_port()}"  # fixed across the restart
    cmd = [
        str(softswitch_binary()),
        *ARGS,
        "--grpc-listen",
        addr,
        "--metrics-listen",
        f"127.0.0.1:{free_port()}",
    ]

    async def start() -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        return proc

    proc = await start()
    c = SwitchClient(
        addr, client_id=12, backoff=Backoff(initial_s=0.1, max_s=0.5), connect_timeout_s=10
    )
    try:
        await c.connect()
        await Pipeline(c).add_nexthops([Nexthop(9, 1, "02:00:00:00:00:01", "02:00:00:00:00:02")])
        proc.kill()  # a crash; SIGTERM waits for open streams (see switch/README.md)
        await proc.wait()

        async def unavailable() -> bool:
            try:
                await c.usage(pl.NEXTHOP)
            except SwitchUnavailableError:
                return True
            return False

        await wait_for(unavailable, within=2.5, interval=0.05, what="the switch seen gone")
        proc = await start()
        n = await c.next_notification(15)
        assert isinstance(n, Reconnected)
        assert c.connected
        # the restarted switch is empty; the owner re-installs
        assert await c.usage(pl.NEXTHOP) == 0
        await Pipeline(c).add_nexthops([Nexthop(9, 1, "02:00:00:00:00:01", "02:00:00:00:00:02")])
    finally:
        await c.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_blocking_facade(switch_addr: str) -> None:
    sw = BlockingSwitch(switch_addr, client_id=13)
    try:
        before = sw.run(sw.client.usage(pl.NEXTHOP))
        p = Pipeline(sw.client)
        sw.run(p.add_nexthops([Nexthop(77, 1, "02:00:00:00:00:01", "02:00:00:00:00:02")]))
        assert sw.run(sw.client.usage(pl.NEXTHOP)) == before + 1
        sw.run(p.delete_nexthops([77]))
        assert sw.run(sw.client.usage(pl.NEXTHOP)) == before
        with pytest.raises(NotFoundError):  # the coroutine's error reaches the caller
            sw.run(p.delete_nexthops([77]))
        assert sw.next_notification(0.1) is None
    finally:
        sw.close()


async def test_default_clear_scope_and_port_errors(sw: SwitchClient) -> None:
    p = Pipeline(sw)
    await p.add_nexthops(
        [Nexthop(i, 1, "02:00:00:00:00:01", "02:00:00:00:00:02") for i in range(5)]
    )
    await sw.set_default(pl.IPV4_LPM, pl.A_SET_NEXTHOP, {"nexthop_id": 3})
    await sw.set_default(pl.IPV4_LPM, pl.A_DROP)
    await sw.clear(pl.NEXTHOP)
    assert await sw.usage(pl.NEXTHOP) == 0
    await sw.set_entry_scope(pl.RELAY, per_pipe=False)
    # this switch has no data ports: port tables answer NOT_FOUND, typed
    with pytest.raises(NotFoundError):
        await sw.port_stats([1])
    with pytest.raises(NotFoundError):
        await sw.queue_stats(1)
    with pytest.raises(NotFoundError):
        await sw.set_port_shaping(1, 1000)
