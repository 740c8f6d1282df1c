"""The software switch answers P4 Studio's own client (`bfrt_grpc.client`,
installed from the SDE's sources by switch/p4studio/install.sh) as bf_switchd
does: registers as `tna_register` drives them, counters as `tna_counter`,
digests as `tna_digest`, reads that name their fields, warm init on the
stream (`clear_all_tables`), `error_in_resp`, the device configuration PTF's
`get_num_pipes` reads, DefaultOnly actions, and the fixed tables with
bf-drivers' Tofino 1 ids and widths.

One real softswitch with one port (a veth pair, the peer in a p4rb-*
namespace where the digest test's packet is crafted); each test opens its own
client.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import bfrt_grpc.bfruntime_pb2 as bfruntime_pb2
import bfrt_grpc.client as gc
import pytest
from p4relay_testsupport import Softswitch

P4_NAME = "p4relay"
ALL_PIPES = gc.Target(device_id=0, pipe_id=0xFFFF)
DEV_PORT = 1
RELAY_IP = 0xC6120A01  # 198.18.10.1
HOST_IP = 0x0A000005  # 10.0.0.5

pytestmark = pytest.mark.skipif(
    subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0",
    reason="needs root for a network namespace",
)


@contextlib.contextmanager
def veth_port() -> Iterator[tuple[str, str, str]]:
    """(switch-side ifname, namespace, peer ifname): a veth pair, the peer in the namespace."""
    tag = secrets.token_hex(3)
    ns, a, b = f"p4rb-{tag}", f"p4rb{tag}a", f"p4rb{tag}b"

    def run(*c: str) -> None:
        subprocess.run(c, check=True, capture_output=True)

    run("ip", "netns", "add", ns)
    try:
        run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        run("ip", "link", "set", b, "netns", ns)
        run("ip", "link", "set", a, "up")
        run("ip", "-n", ns, "link", "set", b, "up")
        yield a, ns, b
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture(scope="module")
def port() -> Iterator[tuple[str, str, str]]:
    with veth_port() as p:
        yield p


@pytest.fixture(scope="module")
def switch(port: tuple[str, str, str]) -> Iterator[Softswitch]:
    sw = Softswitch(["--port", f"{DEV_PORT}={port[0]}"])
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


_next_client = iter(range(10, 1000))


@pytest.fixture
def client(switch: Softswitch) -> Iterator[Any]:
    """A P4 Studio client, subscribed (learn notifications on) and bound."""
    c = gc.ClientInterface(switch.address, client_id=next(_next_client), device_id=0)
    c.bind_pipeline_config(P4_NAME)
    try:
        yield c
    finally:
        c.tear_down_stream()


def info(client: Any) -> Any:
    return client.bfrt_info_get(P4_NAME)


def read_one(table: Any, key: Any, required_data: Any = None) -> dict[str, Any]:
    got = list(table.entry_get(ALL_PIPES, [key], {"from_hw": True}, required_data))
    assert len(got) == 1, got
    data, _ = got[0]
    return dict(data.to_dict())


def test_register_written_and_read_as_tna_register(client: Any) -> None:
    """Point 1: a register's data field is what bf-p4c publishes (one value,
    mandatory, register_data): written with a plain int, read back as the
    list of per-pipe values (one pipe here)."""
    reg = info(client).table_get("pipe.Egress.rtp_packets")
    field = "Egress.rtp_packets.f1"
    assert reg.info.data_field_annotations_get(field) == ["$bfrt_field_class.register_data"]
    key = reg.make_key([gc.KeyTuple("$REGISTER_INDEX", 5)])
    reg.entry_add(ALL_PIPES, [key], [reg.make_data([gc.DataTuple(field, 7)])])
    assert read_one(reg, key)[field] == [7]
    reg.entry_mod(ALL_PIPES, [key], [reg.make_data([gc.DataTuple(field, 9)])])
    assert read_one(reg, key)[field] == [9]


def test_struct_register_fields_written_together(client: Any) -> None:
    """A register of a struct (rtp_loss {lost, reordered}): one data field per
    member, each register_data, written in one entry and read back per pipe."""
    reg = info(client).table_get("pipe.Egress.rtp_loss")
    lost, reordered = "Egress.rtp_loss.lost", "Egress.rtp_loss.reordered"
    for f in (lost, reordered):
        assert reg.info.data_field_annotations_get(f) == ["$bfrt_field_class.register_data"]
    key = reg.make_key([gc.KeyTuple("$REGISTER_INDEX", 6)])
    data = reg.make_data([gc.DataTuple(lost, 4), gc.DataTuple(reordered, 2)])
    reg.entry_mod(ALL_PIPES, [key], [data])
    got = read_one(reg, key)
    assert (got[lost], got[reordered]) == ([4], [2])


def test_counter_entry_add_sets_the_cell(client: Any) -> None:
    """Point 2: `entry_add` on an indexed counter (as tna_counter does) sets the cell."""
    ctr = info(client).table_get("pipe.Ingress.guard_drops")
    key = ctr.make_key([gc.KeyTuple("$COUNTER_INDEX", 3)])
    ctr.entry_add(ALL_PIPES, [key], [ctr.make_data([gc.DataTuple("$COUNTER_SPEC_PKTS", 11)])])
    assert read_one(ctr, key)["$COUNTER_SPEC_PKTS"] == 11


def test_read_returns_only_the_named_fields(client: Any) -> None:
    """Point 3: a read naming data fields gets those back and no others,
    `$ENTRY_HIT_STATE` included."""
    relay = info(client).table_get("pipe.Ingress.relay")
    key = relay.make_key(
        [
            gc.KeyTuple("hdr.ipv4.src_addr", HOST_IP),
            gc.KeyTuple("hdr.ipv4.dst_addr", RELAY_IP),
            gc.KeyTuple("hdr.udp.src_port", 4000),
            gc.KeyTuple("hdr.udp.dst_port", 20000),
            gc.KeyTuple("ig_md.bound_port", DEV_PORT),
        ]
    )
    data = relay.make_data(
        [gc.DataTuple("leg", 4), gc.DataTuple("rtcp", 0), gc.DataTuple("$ENTRY_TTL", 5000)],
        "Ingress.relay_leg",
    )
    relay.entry_add(ALL_PIPES, [key], [data])
    try:
        hit = read_one(relay, key, relay.make_data([gc.DataTuple("$ENTRY_HIT_STATE")], get=True))
        fields = set(hit) - {"action_name", "is_default_entry"}
        assert fields == {"$ENTRY_HIT_STATE"}, hit
        assert hit["$ENTRY_HIT_STATE"] in ("ENTRY_IDLE", "ENTRY_ACTIVE")
        leg = read_one(
            relay, key, relay.make_data([gc.DataTuple("leg")], "Ingress.relay_leg", get=True)
        )
        assert set(leg) - {"action_name", "is_default_entry"} == {"leg"}, leg
        assert leg["leg"] == 4
        # Naming nothing: every field but the hit state, as before.
        plain = read_one(relay, key)
        assert {"leg", "rtcp", "$ENTRY_TTL"} <= set(plain)
    finally:
        relay.entry_del(ALL_PIPES, [key])


def send_udp(ns: str, iface: str, src: str, sport: int, dst: str, dport: int) -> None:
    """One UDP packet, crafted inside the namespace (never routed anywhere)."""
    code = (
        "from scapy.all import Ether, IP, UDP, Raw, sendp;"
        f"sendp(Ether(dst='02:00:00:00:00:01')/IP(src='{src}', dst='{dst}')"
        f"/UDP(sport={sport}, dport={dport})/Raw(b'\\x80\\x00\\x00\\x01' + b'\\x00' * 168),"
        f" iface='{iface}', verbose=False)"
    )
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], check=True, timeout=30)


def test_digest_target_is_the_ingress_ports_pipe(client: Any, port: tuple[str, str, str]) -> None:
    """Point 4: a learn digest's target names the pipe of its ingress port
    (tna_digest: `(ig_port >> 7) & 3`)."""
    bfrt = info(client)
    ra = bfrt.table_get("pipe.Ingress.relay_addr")
    key = ra.make_key(
        [
            gc.KeyTuple("hdr.ipv4.dst_addr", RELAY_IP),
            gc.KeyTuple("hdr.udp.dst_port", low=20000, high=29999),
            gc.KeyTuple("$MATCH_PRIORITY", 1),
        ]
    )
    ra.entry_add(ALL_PIPES, [key], [ra.make_data([], "Ingress.mark_relay")])
    lf = bfrt.table_get("pipe.Ingress.learn_filter")
    lf.entry_del(ALL_PIPES, [])  # forget flows reported before
    try:
        _, ns, peer = port
        send_udp(ns, peer, "10.0.0.5", 4242, "198.18.10.1", 20010)
        digest = client.digest_get(timeout=5)
        assert digest.target.pipe_id == (DEV_PORT >> 7) & 0x3
        learn = bfrt.learn_get("pipe.IngressDeparser.learn")
        events = [d.to_dict() for d in learn.make_data_list(digest)]
        assert [(e["src_port"], e["ingress_port"]) for e in events] == [(4242, DEV_PORT)]
    finally:
        ra.entry_del(ALL_PIPES, [key])


def test_set_pipeline_config_reports_warm_init_on_the_stream(client: Any) -> None:
    """Point 5: setting the pipeline config (clear_all_tables' path) sends
    WARM_INIT_STARTED and WARM_INIT_FINISHED on the client's stream, and the
    tables are empty after it."""
    ra = info(client).table_get("pipe.Ingress.relay_addr")
    key = ra.make_key(
        [
            gc.KeyTuple("hdr.ipv4.dst_addr", RELAY_IP + 1),
            gc.KeyTuple("hdr.udp.dst_port", low=20000, high=20001),
            gc.KeyTuple("$MATCH_PRIORITY", 2),
        ]
    )
    ra.entry_add(ALL_PIPES, [key], [ra.make_data([], "Ingress.mark_relay")])
    assert client.get_and_set_pipeline_config() is True
    assert [k for _, k in ra.entry_get(ALL_PIPES, None, {"from_hw": True})] == []


def test_error_in_resp_puts_errors_in_the_response(client: Any) -> None:
    """Point 6: with the `error_in_resp` request metadata a failed update
    comes back in WriteResponse.status (the call succeeds), which the client
    raises as BfruntimeErrorInResponseException."""
    lpm = info(client).table_get("pipe.Ingress.ipv4_lpm")
    missing = lpm.make_key([gc.KeyTuple("hdr.ipv4.dst_addr", 0x0A090000, prefix_len=16)])
    statuses = lpm.entry_del(ALL_PIPES, [missing], metadata=(("error_in_resp", "1"),))
    with pytest.raises(gc.BfruntimeErrorInResponseException) as e:
        list(statuses)
    assert "NOT_FOUND" in str(e.value) or "canonical_code: 5" in str(e.value)


def test_device_configuration_gives_the_pipes(client: Any) -> None:
    """Point 7: `device_configuration` answers PTF's get_num_pipes."""
    dev = info(client).table_get("device_configuration")
    target = gc.Target(device_id=0, pipe_id=0xFFFF, direction=0)
    conf = [d.to_dict() for d, _ in dev.default_entry_get(target)]
    assert conf[0]["num_pipes"] == 1
    assert conf[0]["num_stages"] == 12
    assert conf[0]["external_port_list"] == [DEV_PORT]


DEFAULT_ONLY_NOACTION = {
    "pipe.Ingress.relay": [
        ("hdr.ipv4.src_addr", 1),
        ("hdr.ipv4.dst_addr", 2),
        ("hdr.udp.src_port", 3),
        ("hdr.udp.dst_port", 4),
        ("ig_md.bound_port", DEV_PORT),
    ],
    "pipe.Ingress.relay_guard": [("hdr.ipv4.dst_addr", 2), ("hdr.udp.dst_port", 4)],
    "pipe.Ingress.leg_rewrite": [("ig_md.leg", 1)],
    "pipe.Egress.int_hop_config": [("eg_intr_md.egress_port", DEV_PORT)],
    "pipe.Egress.int_report": [("eg_intr_md.egress_port", DEV_PORT)],
}


@pytest.mark.parametrize("name", sorted(DEFAULT_ONLY_NOACTION))
def test_noaction_is_default_only(client: Any, name: str) -> None:
    """Point 8: where bf-p4c makes NoAction DefaultOnly, an entry with it is
    refused; it stays the default action."""
    table = info(client).table_get(name)
    keys = [
        gc.KeyTuple(f, v)
        for f, v in DEFAULT_ONLY_NOACTION[name]
        if f in table.info.key_field_name_list_get()
    ]
    assert len(keys) == len(table.info.key_field_name_list_get()), name
    with pytest.raises(gc.BfruntimeReadWriteRpcException) as e:
        table.entry_add(ALL_PIPES, [table.make_key(keys)], [table.make_data([], "NoAction")])
    assert "default only" in str(e.value)
    table.default_entry_set(ALL_PIPES, table.make_data([], "NoAction"))


def test_fixed_tables_have_bf_drivers_tf1_ids_and_widths(client: Any) -> None:
    """Point 9: $PORT, $PORT_STAT and tf1.tm.counter.queue as bf-drivers'
    tf1 bf-rt.json defines them; per-port P4 tables at bf-p4c's sizes."""
    bfrt = info(client)
    port = bfrt.table_get("$PORT")
    assert port.info.id_get() == 4278255617
    assert {
        f: port.info.data_field_id_get(f)
        for f in ("$SPEED", "$PORT_ENABLE", "$PORT_UP", "$PORT_NAME")
    } == {"$SPEED": 1, "$PORT_ENABLE": 4, "$PORT_UP": 25, "$PORT_NAME": 26}
    stat = bfrt.table_get("$PORT_STAT")
    assert stat.info.id_get() == 4278255618
    assert stat.info.data_field_id_get("$FramesTransmittedOK") == 33
    queue = bfrt.table_get("tf1.tm.counter.queue")
    assert [queue.info.key_field_size_get(k)[1] for k in ("pg_id", "pg_queue")] == [8, 8]
    assert {
        f: (queue.info.data_field_id_get(f), queue.info.data_field_size_get(f)[1])
        for f in ("drop_count_packets", "usage_cells", "watermark_cells")
    } == {"drop_count_packets": (1, 64), "usage_cells": (2, 64), "watermark_cells": (3, 64)}
    qkey = queue.make_key([gc.KeyTuple("pg_id", DEV_PORT), gc.KeyTuple("pg_queue", 0)])
    assert read_one(queue, qkey)["usage_cells"] == 0
    up = read_one(port, port.make_key([gc.KeyTuple("$DEV_PORT", DEV_PORT)]))
    assert isinstance(up["$PORT_ENABLE"], bool)
    for name in ("pipe.Egress.ired_port", "pipe.Egress.int_hop_config", "pipe.Egress.int_report"):
        assert bfrt.table_get(name).info.size_get() == 512, name
    assert bfrt.table_get("pipe.IngressParser.$PORT_METADATA").info.size_get() == 288


def test_direct_counter_modified_as_tna_counter(client: Any) -> None:
    """tna_counter's idiom: a MODIFY naming the entry's action with only the
    direct counter's fields sets the counter and keeps the action's data."""
    lr = info(client).table_get("pipe.Ingress.leg_rewrite")
    key = lr.make_key([gc.KeyTuple("ig_md.leg", 9)])
    params = {"src_addr": RELAY_IP, "dst_addr": HOST_IP, "src_port": 20000, "dst_port": 4000}
    lr.entry_add(
        ALL_PIPES,
        [key],
        [lr.make_data([gc.DataTuple(k, v) for k, v in params.items()], "Ingress.rewrite")],
    )
    try:
        counters = [gc.DataTuple("$COUNTER_SPEC_BYTES", 700), gc.DataTuple("$COUNTER_SPEC_PKTS", 7)]
        lr.entry_mod(ALL_PIPES, [key], [lr.make_data(counters, "Ingress.rewrite")])
        got = read_one(lr, key)
        assert (got["$COUNTER_SPEC_BYTES"], got["$COUNTER_SPEC_PKTS"]) == (700, 7)
        assert {k: got[k] for k in params} == params
    finally:
        lr.entry_del(ALL_PIPES, [key])


def test_hit_state_polled_as_tna_idletimeout(client: Any, port: tuple[str, str, str]) -> None:
    """tna_idletimeout's POLL mode: UpdateHitState samples whether an entry
    was hit since the last sample into $ENTRY_HIT_STATE, which every read
    returns and a MODIFY can set."""
    bfrt = info(client)
    relay = bfrt.table_get("pipe.Ingress.relay")
    relay.attribute_idle_time_set(ALL_PIPES, True, bfruntime_pb2.IdleTable.IDLE_TABLE_POLL_MODE)
    try:
        attr = next(iter(relay.attribute_get(ALL_PIPES, "IdleTimeout")))
        assert attr["idle_table_mode"] == bfruntime_pb2.IdleTable.IDLE_TABLE_POLL_MODE
        assert (attr["enable"], attr["ttl_query_interval"]) == (True, 0)
        key = relay.make_key(
            [
                gc.KeyTuple("hdr.ipv4.src_addr", HOST_IP),
                gc.KeyTuple("hdr.ipv4.dst_addr", RELAY_IP),
                gc.KeyTuple("hdr.udp.src_port", 4300),
                gc.KeyTuple("hdr.udp.dst_port", 20030),
                gc.KeyTuple("ig_md.bound_port", DEV_PORT),
            ]
        )
        data = relay.make_data(
            [gc.DataTuple("leg", 5), gc.DataTuple("rtcp", 0)], "Ingress.relay_leg"
        )
        relay.entry_add(ALL_PIPES, [key], [data])
        try:
            assert read_one(relay, key)["$ENTRY_HIT_STATE"] == "ENTRY_IDLE"
            relay.operations_execute(ALL_PIPES, "UpdateHitState")
            assert read_one(relay, key)["$ENTRY_HIT_STATE"] == "ENTRY_IDLE"
            _, ns, peer = port
            send_udp(ns, peer, "10.0.0.5", 4300, "198.18.10.1", 20030)
            deadline = time.monotonic() + 5
            state = "ENTRY_IDLE"
            while state == "ENTRY_IDLE" and time.monotonic() < deadline:
                relay.operations_execute(ALL_PIPES, "UpdateHitState")
                state = read_one(relay, key)["$ENTRY_HIT_STATE"]
            assert state == "ENTRY_ACTIVE"
            relay.operations_execute(ALL_PIPES, "UpdateHitState")
            assert read_one(relay, key)["$ENTRY_HIT_STATE"] == "ENTRY_IDLE"
            active = relay.make_data([gc.DataTuple("$ENTRY_HIT_STATE", str_val="ENTRY_ACTIVE")])
            relay.entry_mod(ALL_PIPES, [key], [active])
            assert read_one(relay, key)["$ENTRY_HIT_STATE"] == "ENTRY_ACTIVE"
            relay.operations_execute(ALL_PIPES, "UpdateHitState")
            assert read_one(relay, key)["$ENTRY_HIT_STATE"] == "ENTRY_IDLE"
        finally:
            relay.entry_del(ALL_PIPES, [key])
    finally:
        relay.attribute_idle_time_set(
            ALL_PIPES, True, bfruntime_pb2.IdleTable.IDLE_TABLE_NOTIFY_MODE, 200
        )
