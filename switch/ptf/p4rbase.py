"""Shared base of the p4relay PTF conformance suite.

Target-neutral: everything goes through p4relay_switch (BfRt gRPC) and the
PTF dataplane, so the suite runs unchanged on the softswitch (switch/ptf/run.sh)
and on tofino-model/hardware. Test parameters (ptf --test-params):

  grpc_addr      BfRt gRPC address (default 127.0.0.1:50052)
  port_map       "ptfport:devport,..." when PTF and device port numbers differ
                 (default: identical, ports 1..4)
  relay_entries  expected size of pipe.Ingress.relay (default: read from bfrt.json)
  queue_depth    egress FIFO depth in packets the switch was started with
  client_id      BfRt client id (default 3)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ptf
import ptf.testutils as tu
from p4relay_switch import (
    BlockingSwitch,
    Endpoint,
    Entry,
    Nexthop,
    Notification,
    Pipeline,
    RelayCall,
)
from p4relay_switch import pipeline as pl
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, UDP
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

TABLES = (
    pl.RELAY_GUARD,
    pl.RELAY,
    pl.LEG_REWRITE,
    pl.RELAY_ADDR,
    pl.IPV4_LPM,
    pl.NEXTHOP,
    pl.PORT_METADATA,  # every port bound again
)


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


class P4RelayTest(BaseTest):  # type: ignore[misc]  # ptf has no types: BaseTest is Any
    """Connects, clears the pipeline, routes the four host subnets."""

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.ports = port_map()
        self.dev = self.ports  # ptf port -> dev port
        self.sw = BlockingSwitch(
            str(param("grpc_addr", "127.0.0.1:50052")),
            client_id=int(param("client_id", 3)),
            timeout_s=10.0,
        )
        self.client = self.sw.client
        self.p = Pipeline(self.client)
        self.clear_pipeline()
        self.sw.run(self.p.setup(ttl_query_interval_ms=200, min_ttl_ms=1000))
        self.add_host_routes()
        self.sw.run(self.p.add_relay_addr(RELAY_IP, RELAY_PORT_MIN, RELAY_PORT_MAX))
        self.dataplane.flush()
        self.sw.drain_notifications()

    def tearDown(self) -> None:
        try:
            self.clear_pipeline()
        finally:
            self.sw.close()
            BaseTest.tearDown(self)

    # ------------------------------------------------------------ setup helpers

    def clear_pipeline(self) -> None:
        for t in TABLES:
            entries = self.sw.run(self.client.read(t, from_hw=False))
            keys = [Entry(e.key) for e in entries if not e.is_default]
            if keys:
                self.sw.run(self.client.delete(t, keys))

    def add_host_routes(self, default_to: int | None = None) -> None:
        nhs = [Nexthop(p, self.dev[p], SW_MAC[p], HOST_MAC[p]) for p in sorted(self.dev)]
        self.sw.run(self.p.add_nexthops(nhs))
        routes: list[tuple[str, int]] = [(NET[p], p) for p in sorted(self.dev)]
        if default_to is not None:
            routes.append(("0.0.0.0/0", default_to))
        self.sw.run(self.p.add_routes(routes))

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

    def notifications(self, duration_s: float) -> list[Notification]:
        out: list[Notification] = []
        end = time.monotonic() + duration_s
        while (left := end - time.monotonic()) > 0:
            n = self.sw.next_notification(left)
            if n is not None:
                out.append(n)
        return out

    def assert_counts(self, got: Sequence[int], want: Sequence[int]) -> None:
        self.assertEqual(list(got), list(want))
