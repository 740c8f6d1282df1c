"""Shared base of the p4relay PTF conformance suite.

Target-neutral: the tests drive the switch through P4 Studio's BfRt Python
client (`bfrt_grpc.client`, base class `BfRuntimeTest` from p4testutils) and the
PTF dataplane, so the suite runs unchanged with P4 Studio's run_p4_tests.sh on
tofino-model or hardware and with switch/ptf/run.sh on the software switch.
Test parameters (ptf --test-params; run_p4_tests.sh sets the first three):

  grpc_server     BfRt gRPC host (default localhost)
  bfrt_grpc_port  BfRt gRPC port (default 50052)
  p4_name         program to bind (default: the first the switch serves)
  port_map        "ptfport:devport,..." when PTF and device port numbers differ
                  (default: identical, ports 1..4)
  relay_entries   expected size of pipe.Ingress.relay (default: read from bf-rt.json)
  queue_depth     egress FIFO depth in packets the switch was started with
  client_id       BfRt client id (default 0, as P4 Studio's tests)
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import bfrt_grpc.bfruntime_pb2 as bfruntime_pb2
import bfrt_grpc.client as gc
import grpc
import ptf.testutils as tu
from bfrt_tables import ALL_PIPES, Calls, Tables, error_code, key_int, learn_events, relay_idle
from p4relay_switch import Endpoint, Entry, LearnEvent, Nexthop, RelayCall, RelayIdle
from p4relay_switch import pipeline as pl
from p4relay_switch.codec import Lpm, Range
from p4testutils.bfruntime_client_base_tests import BfRuntimeTest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.layers.rtp import RTP
from scapy.packet import Packet, Raw

# Testbed plan (README): hosts behind ports 1..4, the relay server behind 3.
SW_MAC = {
    1: "02:00:00:00:01:01",
    2: "02:00:00:00:01:02",
    3: "02:00:00:00:01:03",
    4: "02:00:00:00:01:04",
}
HOST_MAC = {
    1: "02:00:00:00:02:01",
    2: "02:00:00:00:02:02",
    3: "02:00:00:00:02:03",
    4: "02:00:00:00:02:04",
}
HOST_IP = {1: "198.18.1.10", 2: "198.18.2.10", 3: "198.18.0.10", 4: "198.18.4.10"}
NET = {1: "198.18.1.0/24", 2: "198.18.2.0/24", 3: "198.18.0.0/24", 4: "198.18.4.0/24"}
RELAY_IP = HOST_IP[3]
RELAY_PORT_MIN, RELAY_PORT_MAX = 20000, 29999
# The same hosts' IPv6 addresses (dual stack), the relay's at port 3.
HOST_IP6 = {1: "2001:db8:1::10", 2: "2001:db8:2::10", 3: "2001:db8::10", 4: "2001:db8:4::10"}
NET6 = {1: "2001:db8:1::/64", 2: "2001:db8:2::/64", 3: "2001:db8::/64", 4: "2001:db8:4::/64"}
RELAY_IP6 = HOST_IP6[3]
RELAY6_ID = 7  # relay6_addr's id of RELAY_IP6 (any id below relay6_ids)

TABLES = (
    pl.RELAY_GUARD,
    pl.RELAY,
    pl.LEG_REWRITE,
    pl.RELAY_ADDR,
    pl.IPV4_LPM,
    pl.NEXTHOP,
    pl.PORT_METADATA,  # every port bound again
)
# IPv6 tables (contract v6), cleared where the program has them.
TABLES6 = (pl.RELAY_GUARD6, pl.RELAY6, pl.LEG_REWRITE6, pl.RELAY6_ADDR, pl.IPV6_LPM)


def param(name: str, default: Any) -> Any:
    params = tu.test_params_get()
    return params.get(name, default)


def port_map() -> dict[int, int]:
    """ptf port -> device port."""
    raw = str(param("port_map", "1:1,2:2,3:3,4:4"))
    out: dict[int, int] = {}
    for pair in raw.split(","):
        p, d = pair.split(":")
        out[int(p)] = int(d)
    return out


def lpm(prefix: str) -> Lpm:
    net = ipaddress.ip_network(prefix)
    return Lpm(int(net.network_address), net.prefixlen)


def udp_packet(
    *,
    in_port: int,
    src: str,
    dst: str,
    sport: int,
    dport: int,
    ttl: int = 64,
    payload: bytes = b"p4relay-ptf" * 4,
    ip_id: int = 1,
    udp_chksum: int | None = None,
    tos: int = 0,
) -> Packet:
    """A frame as a host behind ``in_port`` sends it to its gateway (the switch)."""
    return (
        Ether(src=HOST_MAC[in_port], dst=SW_MAC[in_port])
        / IP(src=src, dst=dst, ttl=ttl, id=ip_id, tos=tos)
        / UDP(sport=sport, dport=dport, chksum=udp_chksum)
        / Raw(payload)
    )


def udp6_packet(
    *,
    in_port: int,
    src: str,
    dst: str,
    sport: int,
    dport: int,
    hlim: int = 64,
    payload: bytes = b"p4relay-ptf" * 4,
    udp_chksum: int | None = None,
    tc: int = 0,
) -> Packet:
    """An IPv6 frame as a host behind ``in_port`` sends it to its gateway."""
    return (
        Ether(src=HOST_MAC[in_port], dst=SW_MAC[in_port])
        / IPv6(src=src, dst=dst, hlim=hlim, tc=tc)
        / UDP(sport=sport, dport=dport, chksum=udp_chksum)
        / Raw(payload)
    )


def forwarded6(pkt: Packet, out_port: int, **changes: Any) -> Packet:
    """An IPv6 ``pkt`` as routed out of ``out_port``: MACs rewritten, hop
    limit - 1, the UDP checksum recomputed from scratch by scapy (0 goes out
    as 0xffff), so the switch's incremental update must be exact."""
    e = pkt.copy()
    e[Ether].src = SW_MAC[out_port]
    e[Ether].dst = HOST_MAC[out_port]
    e[IPv6].hlim = pkt[IPv6].hlim - 1
    for k, v in changes.items():
        if k in ("sport", "dport"):
            setattr(e[UDP], k, v)
        else:
            setattr(e[IPv6], k, v)
    if UDP in e:
        del e[UDP].chksum
    return Ether(bytes(e))


def rtp_payload(
    seq: int, ts: int, *, pt: int = 8, ssrc: int = 0x1234ABCD, size: int = 160
) -> bytes:
    return bytes(RTP(version=2, payload_type=pt, sequence=seq, timestamp=ts, sourcesync=ssrc)) + (
        b"\xd5" * size
    )


def forwarded(pkt: Packet, out_port: int, **ip_changes: Any) -> Packet:
    """``pkt`` as routed out of ``out_port``: MACs rewritten, TTL - 1, checksums
    recomputed from scratch (so the switch's incremental update must be exact)."""
    e = pkt.copy()
    e[Ether].src = SW_MAC[out_port]
    e[Ether].dst = HOST_MAC[out_port]
    e[IP].ttl = pkt[IP].ttl - 1
    for k, v in ip_changes.items():
        if k in ("sport", "dport"):
            setattr(e[UDP], k, v)
        else:
            setattr(e[IP], k, v)
    del e[IP].chksum
    if UDP in e and pkt[UDP].chksum != 0:
        del e[UDP].chksum
    return Ether(bytes(e))


class P4RelayTest(BfRuntimeTest):  # type: ignore[misc]  # p4testutils has no types
    """Binds through P4 Studio's client (`BfRuntimeTest`), clears the
    pipeline, routes the four host subnets. `self.tables` writes and reads any
    table, `self.calls` a call's entries (bfrt_tables.py)."""

    def setUp(self) -> None:
        BfRuntimeTest.setUp(
            self, client_id=int(param("client_id", 0)), p4_name=param("p4_name", None) or None
        )
        self.target = gc.Target(device_id=0, pipe_id=ALL_PIPES)
        self.tables = Tables(self.bfrt_info, self.target)
        self.calls = Calls(self.tables)
        self.learn = self.bfrt_info.learn_get(pl.LEARN_DIGEST)
        self.learn6 = (
            self.bfrt_info.learn_get(pl.LEARN6_DIGEST) if self.tables.has(pl.RELAY6) else None
        )
        self.ports = port_map()
        self.dev = self.ports  # ptf port -> dev port
        self.clear_pipeline()
        self.tables.table(pl.RELAY).attribute_idle_time_set(
            self.target,
            enable=True,
            idle_table_mode=bfruntime_pb2.IdleTable.IDLE_TABLE_NOTIFY_MODE,
            ttl_query_interval=200,
            min_ttl=1000,
        )
        self.add_host_routes()
        self.add_relay_addr(RELAY_IP, RELAY_PORT_MIN, RELAY_PORT_MAX)
        self.dataplane.flush()
        self.drain_notifications()

    def tearDown(self) -> None:
        try:
            self.clear_pipeline()
        finally:
            BfRuntimeTest.tearDown(self)

    # ------------------------------------------------------------ setup helpers

    def clear_pipeline(self) -> None:
        for t in TABLES:
            self.tables.clear(t)
        for t in TABLES6:
            if self.tables.has(t):
                self.tables.clear(t)
        self.calls.relay6_ids.clear()

    def add_host_routes(self, default_to: int | None = None) -> None:
        nhs = [Nexthop(p, self.dev[p], SW_MAC[p], HOST_MAC[p]) for p in sorted(self.dev)]
        self.tables.insert(
            pl.NEXTHOP,
            [
                Entry(
                    {pl.K_NEXTHOP_ID: nh.id},
                    pl.A_FORWARD,
                    {"port": nh.port, "src_mac": nh.src_mac, "dst_mac": nh.dst_mac},
                )
                for nh in nhs
            ],
        )
        routes: list[tuple[str, int]] = [(NET[p], p) for p in sorted(self.dev)]
        if default_to is not None:
            routes.append(("0.0.0.0/0", default_to))
        self.add_routes(routes)

    def add_routes(self, routes: Sequence[tuple[str, int]]) -> None:
        """(prefix, nexthop id) each; IPv6 prefixes go to ipv6_lpm."""
        v4 = [(p, nh) for p, nh in routes if ":" not in p]
        v6 = [(p, nh) for p, nh in routes if ":" in p]
        for table, key, rs in ((pl.IPV4_LPM, pl.K_DST_ADDR, v4), (pl.IPV6_LPM, pl.K6_DST_ADDR, v6)):
            if rs:
                self.tables.insert(
                    table,
                    [Entry({key: lpm(p)}, pl.A_SET_NEXTHOP, {"nexthop_id": nh}) for p, nh in rs],
                )

    def delete_routes(self, prefixes: Sequence[str]) -> None:
        v4 = [p for p in prefixes if ":" not in p]
        v6 = [p for p in prefixes if ":" in p]
        if v4:
            self.tables.delete(pl.IPV4_LPM, [{pl.K_DST_ADDR: lpm(p)} for p in v4])
        if v6:
            self.tables.delete(pl.IPV6_LPM, [{pl.K6_DST_ADDR: lpm(p)} for p in v6])

    def add_routes6(self) -> None:
        """The four hosts' IPv6 subnets, by the next hops `add_host_routes` made."""
        self.add_routes([(NET6[p], p) for p in sorted(self.dev)])

    def add_relay6_addr(self, addr: str, port_min: int, port_max: int, relay_id: int) -> None:
        """A relay IPv6 address (relay6_addr), its id noted for the call entries."""
        self.tables.insert(
            pl.RELAY6_ADDR,
            [
                Entry(
                    {
                        pl.K6_DST_ADDR: addr,
                        pl.K_DST_PORT: Range(port_min, port_max),
                        pl.K_PRIORITY: 0,
                    },
                    pl.A_MARK_RELAY6,
                    {"relay_id": relay_id},
                )
            ],
        )
        self.calls.relay6_ids[str(ipaddress.IPv6Address(addr))] = relay_id

    def add_relay_addr(self, addr: str, port_min: int, port_max: int) -> None:
        self.tables.insert(
            pl.RELAY_ADDR,
            [
                Entry(
                    {
                        pl.K_DST_ADDR: addr,
                        pl.K_DST_PORT: Range(port_min, port_max),
                        pl.K_PRIORITY: 0,
                    },
                    pl.A_MARK_RELAY,
                )
            ],
        )

    def set_port_binding(self, ports: Iterable[int], *, bound: bool) -> None:
        self.tables.insert_or_modify(
            pl.PORT_METADATA,
            [
                Entry({pl.K_PORT_METADATA_PORT: p}, None, {pl.D_UNBOUND: 0 if bound else 1})
                for p in ports
            ],
        )

    def read_port_binding(self) -> dict[int, bool]:
        """dev port -> bound, for every port with a $PORT_METADATA entry."""
        return {
            key_int(r.key[pl.K_PORT_METADATA_PORT]): int(r.data.get(pl.D_UNBOUND, 0)) == 0
            for r in self.tables.read(pl.PORT_METADATA, from_hw=False)
            if not r.is_default
        }

    def call(
        self, legs: tuple[int, int] = (10, 11), a_port: int = 6000, b_port: int = 7000
    ) -> RelayCall:
        return RelayCall.between(
            a=Endpoint.of(HOST_IP[1], a_port),
            relay_a=Endpoint.of(RELAY_IP, 20000),
            b=Endpoint.of(HOST_IP[2], b_port),
            relay_b=Endpoint.of(RELAY_IP, 20002),
            legs=legs,
            ports=(self.dev[1], self.dev[2]),
        )

    def call6(
        self, legs: tuple[int, int] = (20, 21), a_port: int = 6000, b_port: int = 7000
    ) -> RelayCall:
        """`call`'s IPv6 twin: A (port 1) and B (port 2) through the relay's IPv6 address."""
        return RelayCall.between(
            a=Endpoint.of(HOST_IP6[1], a_port),
            relay_a=Endpoint.of(RELAY_IP6, 20000),
            b=Endpoint.of(HOST_IP6[2], b_port),
            relay_b=Endpoint.of(RELAY_IP6, 20002),
            legs=legs,
            ports=(self.dev[1], self.dev[2]),
        )

    # ------------------------------------------------------------ notifications

    def drain_notifications(self) -> None:
        while self.digest(0.0) is not None:
            pass
        while self.idle_notification(0.0) is not None:
            pass

    def digest(self, timeout: float) -> Any:
        """The next digest message (any learn object), None after ``timeout``."""
        try:
            return self.interface.digest_get(timeout)
        except RuntimeError:  # bfrt_grpc's "Digest list not received."
            return None

    def idle_notification(self, timeout: float) -> Any:
        try:
            return self.interface.idletime_notification_get(timeout)
        except RuntimeError:  # "Idletime notification not received"
            return None

    def digests(self, duration_s: float) -> list[Any]:
        """Every digest message that arrives within ``duration_s``."""
        out: list[Any] = []
        end = time.monotonic() + duration_s
        while (left := end - time.monotonic()) > 0:
            d = self.digest(left)
            if d is not None:
                out.append(d)
        return out

    def learned(self, duration_s: float) -> list[LearnEvent]:
        """The learn digests' events within ``duration_s``."""
        out: list[LearnEvent] = []
        for d in self.digests(duration_s):
            if d.digest_id == self.learn.info.id_get():
                out.extend(learn_events(self.learn, d))
            elif self.learn6 is not None and d.digest_id == self.learn6.info.id_get():
                out.extend(learn_events(self.learn6, d, v6=True))
        return out

    def idle(self, duration_s: float) -> list[RelayIdle]:
        """Relay entries reported idle within ``duration_s``."""
        out: list[RelayIdle] = []
        end = time.monotonic() + duration_s
        while (left := end - time.monotonic()) > 0:
            m = self.idle_notification(left)
            if m is not None and (r := relay_idle(self.bfrt_info, m)) is not None:
                out.append(r)
        return out

    # ------------------------------------------------------------ packet helpers

    def relay_round_trip(self, seq: int, ip_ids: tuple[int, int] = (1, 1)) -> None:
        """One RTP packet each way through `call()`'s default call, each checked
        as it leaves: A -> R:20000 as R:20002 -> B, then B -> R:20002 as R:20000 -> A."""
        a = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(seq, seq * 160),
            ip_id=ip_ids[0],
        )
        self.send(1, a)
        self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        b = udp_packet(
            in_port=2,
            src=HOST_IP[2],
            dst=RELAY_IP,
            sport=7000,
            dport=20002,
            payload=rtp_payload(seq, seq * 160, ssrc=7),
            ip_id=ip_ids[1],
        )
        self.send(2, b)
        self.expect(forwarded(b, 1, src=RELAY_IP, dst=HOST_IP[1], sport=20000, dport=6000), 1)

    def send(self, port: int, pkt: Packet | bytes, count: int = 1) -> None:
        tu.send_packet(self, port, bytes(pkt), count)

    def expect(self, pkt: Packet, port: int, timeout: float = 2.0) -> None:
        tu.verify_packet(self, pkt, port, timeout=timeout)

    def expect_nothing(self, timeout: float = 0.5) -> None:
        tu.verify_no_other_packets(self, timeout=timeout)

    def count_received(self, port: int, timeout: float = 0.5) -> int:
        n = 0
        while True:
            r = tu.dp_poll(self, device_number=0, port_number=port, timeout=timeout)
            if not isinstance(r, self.dataplane.PollSuccess):
                return n
            n += 1

    @contextmanager
    def refused(self, *codes: grpc.StatusCode, msg: str = "") -> Iterator[None]:
        """The block's bfrt_grpc call fails with one of ``codes``."""
        with self.assertRaises(gc.BfruntimeRpcException, msg=msg) as cm:
            yield
        self.assertIn(error_code(cm.exception), codes, f"{msg} {cm.exception}")

    def assert_counts(self, got: Sequence[int], want: Sequence[int]) -> None:
        self.assertEqual(list(got), list(want))
