"""Telemetry reports: decoding the sink's Telemetry Report v2.0 + INT-MD frames
(the layout of switch/p4/include/int_headers.p4), bad reports counted and
dropped, path records, congestion onset/clear with hysteresis, and the UDP
listener on a real socket."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import struct

import pytest
from p4relay_collector.config import Settings
from p4relay_collector.int_reports import (
    Flow,
    IntTelemetry,
    ReportError,
    listen,
    parse_report,
)
from p4relay_collector.service import Collector
from p4relay_testsupport import Server, wait_for
from prometheus_client import REGISTRY
from pydantic import SecretStr

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def hop(sw: int, inp: int, outp: int, lat_ns: int, qid: int, cells: int, tx: int) -> bytes:
    return struct.pack("!IHHIII", sw, inp, outp, lat_ns, (qid << 24) | cells, tx)


def report(
    hops: list[bytes],
    *,
    flags: int = 0,
    node: int = 9,
    seq: int = 5,
    dscp: int = 0x17,
    remaining: int | None = None,
    shim_len: int | None = None,
    bitmap: int = 0xF100,
    vlan: bool = False,
    payload: bytes = b"\x80" + b"\x00" * 11,
    sink_md: bytes = b"",
    md_bits: int = 0xE000,
    md_len: int | None = None,
) -> bytes:
    """A report as the sink's egress emits it (without its Ethernet/IPv4/UDP);
    `sink_md`: the sink's own hop as the report's metadata."""
    n = len(hops)
    slen = 4 + 5 * n if shim_len is None else shim_len
    rem = 2 - n if remaining is None else remaining
    shim = bytes([0x10, slen, 0, 0x2E << 2 & 0xFC])
    md = bytes([0x20, 0x00, 5, rem]) + struct.pack("!HHHH", bitmap, 0x7072, 0xBEEF, flags)
    udp_payload = shim + md + b"".join(hops) + payload
    udp = struct.pack("!HHHH", 4000, 5000, 8 + len(udp_payload), 0) + udp_payload
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        dscp << 2,
        20 + len(udp),
        0,
        0,
        63,
        17,
        0,
        bytes([10, 0, 1, 2]),
        bytes([10, 0, 2, 3]),
    )
    eth = b"\x02" * 6 + b"\x04" * 6
    eth += b"\x81\x00\x00\x07\x08\x00" if vlan else b"\x08\x00"
    frame = eth + ip + udp
    group = struct.pack("!II", (2 << 28) | seq, node)
    words = len(sink_md) // 4 if md_len is None else md_len
    individual = bytes(
        [0x13, (12 + len(sink_md) + len(frame) + 3) // 4, words, 0x30]
    ) + struct.pack("!HHHH", md_bits if sink_md else 0, 0x7072, 0, 0)
    return group + individual + sink_md + frame


def sink_md(inp: int, outp: int, lat_ns: int, cells: int) -> bytes:
    """The sink's hop: ports, hop latency, queue id 0 + occupancy."""
    return struct.pack("!HHII", inp, outp, lat_ns, cells)


FLOW = Flow("10.0.1.2", "10.0.2.3", 4000, 5000)


def test_decodes_hops_newest_first_and_the_path_from_the_source() -> None:
    r = parse_report(
        report([hop(3, 2, 1, 1500, 0, 40, 99), hop(1, 5, 2, 200, 0, 1, 7)], flags=0x8000 | 0x12)
    )
    assert r.node_id == 9 and r.seq == 5 and r.flow == FLOW
    assert r.path == (1, 3)
    assert r.hops[0].queue_cells == 40 and r.hops[0].latency_ns == 1500
    assert r.hops[1].ingress_port == 5 and r.hops[1].egress_port == 2
    assert r.onset and not r.over_clear and r.path_sig == 0x12
    assert parse_report(report([hop(1, 5, 2, 0, 0, 0, 0)], vlan=True)).path == (1,)
    assert r.sink is None and r.route[-1] == (9, -1, -1)


def test_the_sinks_own_hop_is_read_from_the_reports_metadata() -> None:
    r = parse_report(report([hop(3, 2, 1, 1500, 0, 40, 99)], sink_md=sink_md(3, 1, 777, 12)))
    assert r.hops[0].switch_id == 3 and r.flow == FLOW
    assert r.sink is not None
    assert (r.sink.switch_id, r.sink.ingress_port, r.sink.egress_port) == (9, 3, 1)
    assert (r.sink.latency_ns, r.sink.queue_cells, r.sink.tx_bytes) == (777, 12, None)
    assert r.route == ((3, 2, 1), (9, 3, 1))
    t = IntTelemetry(names={3: "s3", 9: "s2"})
    t.handle(report([hop(3, 2, 1, 1500, 0, 40, 99)], sink_md=sink_md(3, 1, 777, 12)), T0)
    samples, _, paths = t.drain()
    by_switch = {s.switch: s for s in samples}
    assert by_switch["s2"].dev_port == 1 and by_switch["s2"].depth_bytes == 12 * 80
    assert by_switch["s2"].queue_delay_us == pytest.approx(0.777)
    assert paths[0].hops[-1].switch == "s2" and paths[0].hops[-1].egress_port == 1


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)])[:60], "truncated"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], dscp=0), "no_int"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], bitmap=0xFFFF), "int"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], remaining=0), "int"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], shim_len=200), "int"),
        (b"\x10" + report([hop(1, 1, 2, 0, 0, 0, 0)])[1:], "version"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], sink_md=sink_md(1, 2, 0, 0), md_len=2), "metadata"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], sink_md=sink_md(1, 2, 0, 0), md_bits=1), "metadata"),
        (report([hop(1, 1, 2, 0, 0, 0, 0)], sink_md=sink_md(1, 2, 0, 0), md_len=200), "metadata"),
    ],
)
def test_bad_reports_are_counted_by_reason_and_dropped(data: bytes, reason: str) -> None:
    with pytest.raises(ReportError) as e:
        parse_report(data)
    assert e.value.reason == reason
    t = IntTelemetry()
    before = (
        REGISTRY.get_sample_value("p4relay_collector_int_reports_bad_total", {"reason": reason})
        or 0.0
    )
    assert t.handle(data, T0) is None
    after = REGISTRY.get_sample_value("p4relay_collector_int_reports_bad_total", {"reason": reason})
    assert after == before + 1
    assert t.drain() == ([], [], [])


def test_samples_paths_and_congestion_with_hysteresis() -> None:
    t = IntTelemetry(names={1: "s1", 3: "s3"})
    calm = report([hop(3, 2, 1, 100, 0, 2, 0), hop(1, 5, 2, 50, 0, 1, 0)])
    hot = report([hop(3, 2, 1, 100, 0, 2, 0), hop(1, 5, 2, 9_000_000, 0, 500, 0)], flags=0xC000)
    between = report([hop(3, 2, 1, 100, 0, 2, 0), hop(1, 5, 2, 400_000, 0, 30, 0)], flags=0x4000)
    t.handle(calm, T0)
    assert t.path(FLOW) == ("s1", "s3")
    samples, events, paths = t.drain()
    assert events == []
    # the first report's path: source to sink, with the ports; the sink (node 9) last
    assert [p.model_dump() for p in paths] == [
        {
            "ts": T0,
            "src": {"addr": "10.0.1.2", "port": 4000},
            "dst": {"addr": "10.0.2.3", "port": 5000},
            "hops": [
                {"switch": "s1", "ingress_port": 5, "egress_port": 2},
                {"switch": "s3", "ingress_port": 2, "egress_port": 1},
                {"switch": "9", "ingress_port": None, "egress_port": None},
            ],
        }
    ]
    assert {(s.switch, s.dev_port, s.depth_bytes) for s in samples} == {
        ("s3", 1, 160),
        ("s1", 2, 80),
    }
    t.handle(hot, T0)
    _, events, paths = t.drain()
    assert [e.type for e in events] == ["congestion_onset"]
    assert paths == []  # same hops, same ports: no record
    assert events[0].switch == "s1" and events[0].payload["depth_bytes"] == 500 * 80
    # over the clear threshold but under onset: the episode stays open
    t.handle(between, T0)
    t.handle(hot, T0)
    assert t.drain()[1] == []
    t.handle(calm, T0)
    assert [e.type for e in t.drain()[1]] == ["congestion_clear"]
    # a new path is recorded
    t.handle(report([hop(2, 4, 1, 0, 0, 0, 0), hop(1, 5, 3, 0, 0, 0, 0)]), T0)
    assert t.path(FLOW) == ("s1", "2")
    # and so is a new port on the same switches
    t.handle(report([hop(2, 4, 1, 0, 0, 0, 0), hop(1, 6, 3, 0, 0, 0, 0)]), T0)
    paths = t.drain()[2]
    assert [[(h.switch, h.ingress_port, h.egress_port) for h in p.hops] for p in paths] == [
        [("s1", 5, 3), ("2", 4, 1), ("9", None, None)],
        [("s1", 6, 3), ("2", 4, 1), ("9", None, None)],
    ]


def test_path_records_between_two_sends_are_bounded() -> None:
    t = IntTelemetry(max_path_records=3)
    for port in range(5):  # five path changes of one flow
        t.handle(report([hop(1, port, 2, 0, 0, 0, 0)]), T0)
    assert len(t.drain()[2]) == 3
    t.handle(report([hop(1, 9, 2, 0, 0, 0, 0)]), T0)
    assert len(t.drain()[2]) == 1


def test_flow_records_are_bounded() -> None:
    t = IntTelemetry(max_flows=2)
    for i, port in enumerate((1, 2, 3)):
        data = bytearray(report([hop(1, 1, 2, 0, 0, 0, 0)]))
        struct.pack_into("!H", data, 20 + 14 + 20, port)  # UDP source port
        t.handle(bytes(data), T0 + dt.timedelta(seconds=i))
    assert t.path(Flow("10.0.1.2", "10.0.2.3", 1, 5000)) is None
    assert t.path(Flow("10.0.1.2", "10.0.2.3", 3, 5000)) == ("1",)


def test_forged_switch_ids_cannot_grow_state_without_bound() -> None:
    t = IntTelemetry(max_switches=3, max_queues=4)
    for sw in range(10):
        data = bytearray(report([hop(sw, 1, 2, 0, 0, 0, 0)]))
        struct.pack_into("!I", data, 4, sw)  # the group header's node id
        t.handle(bytes(data), T0)
    samples, _, _ = t.drain()
    assert len(t._reports) == 3 and len(samples) == 3


def test_listener_on_a_real_socket_survives_garbage() -> None:
    async def run() -> IntTelemetry:
        t = IntTelemetry()
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        transport = await listen(t, "127.0.0.1", port)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"\xff" * 3, ("127.0.0.1", port))
                s.sendto(report([hop(1, 5, 2, 0, 0, 3, 0)], flags=0x8000), ("127.0.0.1", port))
            await wait_for(lambda: t.path(FLOW) is not None, within=2.0, interval=0.01)
        finally:
            transport.close()
        return t

    t = asyncio.run(run())
    assert t.path(FLOW) == ("1",)
    assert [e.type for e in t.drain()[1]] == ["congestion_onset"]


def test_collector_forwards_int_samples_and_events_to_the_real_server(server: Server) -> None:
    """Reports reach the collector's listener (its --int-report-listen), and
    its next poll sends what they became to the server's ingest."""

    async def run() -> None:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        cfg = Settings(
            server_url=server.url,
            token=SecretStr(server.ingest_token),
            int_report_listen=f"127.0.0.1:{port}",
            int_switch_names="1=s1, 0x9=sink9",
        )
        c = Collector(cfg)
        stop = asyncio.Event()
        task = asyncio.create_task(c.run(stop=stop))
        try:

            def reported() -> bool:  # sent again until the listener (started by run) has it
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.sendto(
                        report([hop(1, 5, 2, 2000, 0, 7, 0)], flags=0x8000), ("127.0.0.1", port)
                    )
                return c.int_telemetry.path(FLOW) is not None

            await wait_for(reported, within=10.0, what="the report at the collector's listener")

            async def stored() -> bool:  # the next poll sends the batch
                paths = await asyncio.to_thread(server.get, "/api/v1/paths")
                onsets = await asyncio.to_thread(
                    server.get, "/api/v1/events", type="congestion_onset"
                )
                return bool(paths) and bool(onsets["items"])

            await wait_for(stored, within=10.0, what="the batch stored by the server")
        finally:
            stop.set()
            await task

    asyncio.run(run())
    events = server.get("/api/v1/events", type="congestion_onset")["items"]
    assert [e["switch"] for e in events] == ["s1"]
    assert events[0]["payload"]["source"] == "int"
    assert events[0]["payload"]["depth_bytes"] == 560
    # the flow's path record, the sink (node 9) named as the collector was told
    (path,) = server.get("/api/v1/paths")
    assert path["src"] == {"addr": "10.0.1.2", "port": 4000}
    assert path["hops"] == [
        {"switch": "s1", "ingress_port": 5, "egress_port": 2},
        {"switch": "sink9", "ingress_port": None, "egress_port": None},
    ]
    assert path["sink"] == "sink9"
