"""In-band network telemetry (INT-MD over UDP, INT spec v2.1; Telemetry Report
v2.0): one switch plays each role by next hop. Next hop 2 leads to another INT
switch (transit: the source inserts INT there, a transit adds its hop), next
hop 4 leaves the domain (sink: strip, restore, report); the collector sits
behind port 3 (the report session's port, `int_report` entry). Watched: UDP to
host 2's subnet.

Checked byte for byte against packets built here, except the three hop
fields only the switch knows (hop latency, queue occupancy, tx bytes), which
are read from the packet and checked for range. Everything goes through
P4 Studio's client, so the module runs unchanged on tofino-model
with the standard profile (its report mirror session 1020 must point at port 3:
switch/bfrt/README.md); a target without the INT tables skips it.
"""

from __future__ import annotations

import ipaddress
import struct
import time

import ptf.testutils as tu
from p4rbase import HOST_IP, NET, P4RelayTest, forwarded, udp_packet
from p4relay_switch import Entry
from p4relay_switch import int_telemetry as it
from p4relay_switch.names import (
    A_INT_HOP,
    A_INT_REPORT_ENCAP,
    A_INT_SINK,
    A_INT_TRANSIT,
    INT_HOP_CONFIG,
    INT_MAX_HOPS,
    INT_REPORT,
    INT_REPORT_INTERVAL_MS,
    INT_ROLE,
    INT_WATCH,
    K_EGRESS_PORT,
    K_NEXTHOP_ID,
    REG_INT_FLOW_CONGESTED,
    REG_INT_FLOW_PATH,
    REG_INT_FLOW_REPORTED,
    REG_INT_HOP_LIMIT,
    REG_INT_MALFORMED,
    REG_INT_REPORT_SEQ,
    REG_INT_SINK_DEPTH,
    REG_INT_SINK_LATENCY,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

INT_DSCP = 0x17
SWITCH_ID = 0x11
UPSTREAM_ID = 0x22
COLLECTOR_IP = "198.18.0.99"
COLLECTOR_MAC = 0x020000000399
REPORT_SRC_MAC = 0x020000000398
REPORT_PORT = 32766
L4 = 14 + 20  # UDP header offset (no VLAN, no options)
SHIM = L4 + 8
FLAG_ONSET = 0x8000
FLAG_OVER_CLEAR = 0x4000
FLAG_ONSET_HOP2 = 0x2000  # the second hop from the source was at/over onset
FLAG_ONSET_HOP1 = 0x1000  # the first (the source's)
SINK_MD_BITS = 0xE000  # the report's metadata: level-1 ports, hop latency, queue
REPORT_MD = 14 + 20 + 8 + 8 + 12  # the sink's hop in a report frame


def hop(switch_id: int, in_port: int, out_port: int, latency: int = 0, occ: int = 0) -> bytes:
    return struct.pack("!IHHIII", switch_id, in_port, out_port, latency, occ & 0xFFFFFF, 0)


def stack(
    hops: list[bytes],
    *,
    dscp: int,
    udp_csum: int,
    flags: int,
    e: bool = False,
    marked: bool = False,
) -> bytes:
    """Shim + MD header + hops (newest first) as the switches write them."""
    shim = bytes([0x10 | int(marked), 4 + 5 * len(hops), 0, dscp << 2])
    md = bytes([0x20 | (0x04 if e else 0), 0, 5, INT_MAX_HOPS - len(hops)])
    md += struct.pack("!HHHH", 0xF100, 0x7072, udp_csum, flags)
    return shim + md + b"".join(hops)


def with_int(pkt: Packet, st: bytes) -> Packet:
    """`pkt` carrying the INT stack `st`: DSCP INT_DSCP (ECN kept), UDP
    checksum 0, lengths grown, IPv4 checksum recomputed."""
    raw = bytearray(bytes(pkt))
    out = bytearray(raw[:SHIM]) + st + raw[SHIM:]
    out[15] = (INT_DSCP << 2) | (raw[15] & 3)
    struct.pack_into("!H", out, 16, struct.unpack_from("!H", raw, 16)[0] + len(st))
    struct.pack_into("!H", out, L4 + 4, struct.unpack_from("!H", raw, L4 + 4)[0] + len(st))
    struct.pack_into("!H", out, L4 + 6, 0)
    e = Ether(bytes(out))
    del e[IP].chksum
    return Ether(bytes(e))


def mac(v: int) -> str:
    return ":".join(f"{b:02x}" for b in v.to_bytes(6, "big"))


def payload(seq: int) -> bytes:
    return b"\x80\x08" + struct.pack("!HI", seq, seq * 160) + b"\x12\x34\xab\xcd" + b"\xd5" * 160


def to_host(
    port: int, *, sport: int = 6000, dport: int = 7000, seq: int = 1, tos: int = 0
) -> Packet:
    p = udp_packet(
        in_port=1,
        src=HOST_IP[1],
        dst=HOST_IP[port],
        sport=sport,
        dport=dport,
        payload=payload(seq),
        tos=tos,
    )
    return Ether(bytes(p))  # checksums filled in


class IntTest(P4RelayTest):
    """Roles, the hop on port 2, the collector behind port 3; INT off after."""

    def setUp(self) -> None:
        super().setUp()
        if not self.tables.has(INT_WATCH):
            self.skipTest("the target's program has no INT tables (lean or large profile)")
        self.clear_int()
        h = it.IntHop(SWITCH_ID, 1000, 500, 10_000_000, 5_000_000)
        h.check()
        self.tables.insert(
            INT_HOP_CONFIG,
            [
                Entry(
                    {K_EGRESS_PORT: self.dev[2]},
                    A_INT_HOP,
                    {
                        "switch_id": h.switch_id,
                        "onset_cells": h.onset_cells,
                        "clear_cells": h.clear_cells,
                        "onset_ns": h.onset_ns,
                        "clear_ns": h.clear_ns,
                    },
                )
            ],
        )
        self.set_role(2, A_INT_TRANSIT)
        self.set_role(4, A_INT_SINK)
        self.tables.insert(
            INT_REPORT,
            [
                Entry(
                    {K_EGRESS_PORT: self.dev[3]},
                    A_INT_REPORT_ENCAP,
                    {
                        "src_mac": REPORT_SRC_MAC,
                        "dst_mac": COLLECTOR_MAC,
                        "src_addr": "198.18.0.1",
                        "dst_addr": COLLECTOR_IP,
                        "dst_port": REPORT_PORT,
                        "switch_id": SWITCH_ID,
                    },
                )
            ],
        )
        # UDP to host 2's subnet is watched
        self.tables.insert(INT_WATCH, [it.flow_watch(dst=ipaddress.IPv4Network(NET[2]))])
        # forget earlier tests' flows: every one reports afresh
        for reg in (REG_INT_FLOW_PATH, REG_INT_FLOW_CONGESTED, REG_INT_FLOW_REPORTED):
            self.tables.clear(reg)

    def tearDown(self) -> None:
        try:
            self.clear_int()
        finally:
            super().tearDown()

    def clear_int(self) -> None:
        """INT off: no watch list, roles, hops or report targets."""
        for table in (INT_WATCH, INT_ROLE, INT_HOP_CONFIG, INT_REPORT):
            self.tables.clear(table)

    def set_role(self, nexthop_id: int, action: str) -> None:
        self.tables.insert_or_modify(INT_ROLE, [Entry({K_NEXTHOP_ID: nexthop_id}, action)])

    def counter(self, register: str) -> int:
        """An INT counter (index 0), summed over the pipes."""
        return self.tables.register_total(register, 0)

    def receive(self, port: int, timeout: float = 2.0) -> bytes:
        r = tu.dp_poll(self, device_number=0, port_number=port, timeout=timeout)
        if not isinstance(r, self.dataplane.PollSuccess):
            self.fail(f"nothing on port {port}")
        return bytes(r.packet)

    def assert_int_packet(self, got: bytes, want: Packet, hops: int) -> None:
        """`got` is `want` but for the newest `hops` hops' switch-only fields
        (latency, occupancy, tx bytes), which must be plausible."""
        exp = bytearray(bytes(want))
        self.assertEqual(len(got), len(exp), "length")
        for h in range(hops):
            at = SHIM + 16 + 20 * h
            latency, occ, _tx = struct.unpack_from("!III", got, at + 8)
            self.assertLess(latency, 1_000_000_000, "hop latency (ns)")
            self.assertLess(occ, 1 << 19, "queue occupancy (cells)")
            exp[at + 8 : at + 20] = got[at + 8 : at + 20]
        self.assertEqual(got.hex(), bytes(exp).hex())

    def report_bytes(self, copy: Packet, seq: int, md: bytes = b"") -> bytes:
        """The Telemetry Report v2.0 datagram the sink sends for `copy`; `md`:
        the sink's own hop (rep_md_bits 0-2: ports, hop latency, queue)."""
        frame = bytes(copy)
        n = len(frame) + len(md)
        group = struct.pack("!II", (2 << 28) | (seq & 0x3FFFFF), SWITCH_ID)
        ind = bytes([0x13, ((n + 15) >> 2) & 0xFF, len(md) // 4, 0x30])
        ind += struct.pack("!HHHH", SINK_MD_BITS if md else 0, 0x7072, 0, 0)
        rep = (
            Ether(src=mac(REPORT_SRC_MAC), dst=mac(COLLECTOR_MAC))
            / IP(src="198.18.0.1", dst=COLLECTOR_IP, ttl=64, id=0, flags="DF", tos=0)
            / UDP(sport=REPORT_PORT, dport=REPORT_PORT, chksum=0)
            / Raw(group + ind + md + frame)
        )
        return bytes(Ether(bytes(rep)))

    def sink_md(self, report: bytes, in_port: int, out_port: int) -> bytes:
        """The sink's hop in a received report: its ports must be these, its
        latency and occupancy (what only the switch knows) plausible."""
        md = report[REPORT_MD : REPORT_MD + 12]
        self.assertEqual(report[REPORT_MD - 10], 3, "md_len: the sink's hop")
        self.assertEqual(struct.unpack_from("!HH", md), (self.dev[in_port], self.dev[out_port]))
        latency, queue = struct.unpack_from("!II", md, 4)
        self.assertLess(latency, 1 << 18, "hop latency (ns, deq_timedelta's 18 bits)")
        self.assertLess(queue, 1 << 19, "queue 0, occupancy (cells)")
        return md

    def seq(self) -> int:
        return self.counter(REG_INT_REPORT_SEQ)


class IntSourceInsertsShimAndHop(IntTest):
    """A watched packet leaving by a transit port gets shim, MD header and
    this switch's hop; the DSCP and UDP checksum are kept in the stack."""

    def runTest(self) -> None:
        p = to_host(2, tos=(46 << 2) | 1)
        self.send(1, p)
        got = self.receive(2)
        fw = forwarded(p, 2)
        st = stack(
            [hop(SWITCH_ID, self.dev[1], self.dev[2])],
            dscp=46,
            udp_csum=fw[UDP].chksum,
            flags=SWITCH_ID & 0x0FFF,
        )
        self.assert_int_packet(got, with_int(fw, st), 1)
        # unwatched traffic to another transit next hop is untouched
        q = to_host(4)
        self.send(1, q)
        self.expect(forwarded(q, 4), 4)


class IntTransitAppendsHop(IntTest):
    """An INT packet leaving by a transit port gets this switch's hop on top;
    the path signature takes its word, the flags stay."""

    def runTest(self) -> None:
        p = to_host(2)
        up = hop(UPSTREAM_ID, 7, 8, latency=555, occ=3)
        flags = UPSTREAM_ID | FLAG_OVER_CLEAR
        pkt = with_int(p, stack([up], dscp=0, udp_csum=p[UDP].chksum, flags=flags))
        self.send(1, pkt)
        got = self.receive(2)
        st = stack(
            [hop(SWITCH_ID, self.dev[1], self.dev[2]), up],
            dscp=0,
            udp_csum=p[UDP].chksum,
            flags=flags ^ SWITCH_ID,
        )
        self.assert_int_packet(got, with_int(forwarded(p, 2), st), 1)


class IntHopLimit(IntTest):
    """A stack with no hop left passes with the E bit set and is counted."""

    def runTest(self) -> None:
        p = to_host(2)
        hops = [hop(0x33, 1, 2), hop(UPSTREAM_ID, 7, 8)]
        pkt = with_int(p, stack(hops, dscp=0, udp_csum=p[UDP].chksum, flags=0x11))
        before = self.counter(REG_INT_HOP_LIMIT)
        self.send(1, pkt)
        want = with_int(
            forwarded(p, 2), stack(hops, dscp=0, udp_csum=p[UDP].chksum, flags=0x11, e=True)
        )
        self.expect(want, 2)
        self.assertEqual(self.counter(REG_INT_HOP_LIMIT), before + 1)


class IntSinkRestoresByteIdentical(IntTest):
    """Source, then sink: the datagram arrives as the source received it (with
    this path's TTL and MACs), UDP checksum, DSCP and ECN included; the sink
    sends the collector a report carrying the INT packet."""

    def runTest(self) -> None:
        p = to_host(2, tos=(34 << 2) | 2)
        self.send(1, p)
        with_stack = self.receive(2)
        # the next switch on the path is the sink: next hop 2 leaves the domain
        self.set_role(2, A_INT_SINK)
        seq = self.seq()
        self.send(1, with_stack)
        self.expect(forwarded(forwarded(p, 2), 2), 2)
        copy = bytearray(bytes(forwarded(Ether(with_stack), 2)))
        copy[SHIM] |= 1  # the copy's shim is marked sink-bound
        got = self.receive(3)
        md = self.sink_md(got, 1, 2)
        self.assertEqual(got.hex(), self.report_bytes(Ether(bytes(copy)), seq, md).hex())


class IntSinkReportCarriesItsOwnHop(IntTest):
    """The sink's report carries the sink's own hop (the report's metadata):
    the packet's ports there, and the time and depth the sink port's last
    departure had (recorded per port by the packets the sink strips: the
    copy's own pass is on the report port). Primed with known figures, a
    report shows them or, if the packet itself left first, what it recorded."""

    def runTest(self) -> None:
        self.set_role(2, A_INT_SINK)
        port = self.dev[2]
        self.tables.write_register(REG_INT_SINK_DEPTH, {port: 1234})
        self.tables.write_register(REG_INT_SINK_LATENCY, {port: 98_765})
        p = to_host(2, sport=6100)
        st = stack([hop(UPSTREAM_ID, 7, 8, 555, 3)], dscp=0, udp_csum=p[UDP].chksum, flags=0x22)
        pkt = with_int(p, st)
        seq = self.seq()
        self.send(1, pkt)
        self.expect(forwarded(p, 2), 2)
        got = self.receive(3)
        md = self.sink_md(got, 1, 2)
        latency, occ = struct.unpack_from("!II", md, 4)
        now = (
            self.tables.register_total(REG_INT_SINK_LATENCY, port),
            self.tables.register_total(REG_INT_SINK_DEPTH, port),
        )
        self.assertIn((latency, occ), {(98_765, 1234), now})
        self.assertNotEqual(
            now, (98_765, 1234), "the packet the sink stripped recorded its departure"
        )
        # the rest of the report as ever: its payload the copy, INT stack and all
        copy = bytearray(bytes(forwarded(Ether(bytes(pkt)), 2)))
        copy[SHIM] |= 1
        self.assertEqual(got.hex(), self.report_bytes(Ether(bytes(copy)), seq, md).hex())


class IntMalformedDroppedAndCounted(IntTest):
    """Marked packets whose stack is malformed are dropped and counted."""

    def runTest(self) -> None:
        p = to_host(2)
        good = bytes(with_int(p, stack([hop(UPSTREAM_ID, 7, 8)], dscp=0, udp_csum=0, flags=1)))
        bad: list[bytes] = []
        for off, val in (
            (SHIM, 0x20),  # not INT-MD
            (SHIM + 1, 19),  # three hops: over the bound
            (SHIM + 4, 0x10),  # version 1
            (SHIM + 6, 6),  # 6-word hops
            (SHIM + 7, 0),  # remaining hop count disagrees with the length
            (SHIM + 8, 0xFF),  # other instructions
        ):
            broken = bytearray(good)
            broken[off] = val
            bad.append(bytes(broken))
        # UDP too short for shim + MD header
        short = bytearray(
            bytes(
                udp_packet(
                    in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2, payload=b"x" * 8
                )
            )
        )
        short[15] = INT_DSCP << 2
        e = Ether(bytes(short))
        del e[IP].chksum
        bad.append(bytes(Ether(bytes(e))))
        before = self.counter(REG_INT_MALFORMED)
        for b in bad:
            self.send(1, b)
        self.expect_nothing(timeout=1.0)
        self.assertEqual(self.counter(REG_INT_MALFORMED), before + len(bad))
        # the well-formed one passes
        self.send(1, good)
        self.assertGreater(self.count_received(2, timeout=1.0), 0)


class IntReportSuppression(IntTest):
    """The sink reports a flow's first packet, then only on a new path, on
    congestion onset or clear (hysteresis: over clear but under onset keeps
    the state), or once the interval has passed."""

    def sink_packet(self, flags: int, seq: int) -> bytes:
        p = to_host(4, sport=9000, dport=9001, seq=seq)
        st = stack([hop(UPSTREAM_ID, 7, 8)], dscp=0, udp_csum=p[UDP].chksum, flags=flags)
        return bytes(with_int(p, st))

    def reports(self, flags: int, seq: int) -> int:
        self.send(1, self.sink_packet(flags, seq))
        self.receive(4)  # the packet itself
        # quickly: the steps before the interval test run within one interval
        return self.count_received(3, timeout=0.1)

    def runTest(self) -> None:
        sig = UPSTREAM_ID
        self.assertEqual(self.reports(sig, 1), 1, "first report of the flow")
        self.assertEqual(self.reports(sig, 2), 0, "within the interval")
        self.assertEqual(self.reports(sig, 3), 0)
        self.assertEqual(self.reports(0x123, 4), 1, "path change")
        self.assertEqual(self.reports(0x123 | FLAG_ONSET | FLAG_OVER_CLEAR, 5), 1, "onset")
        self.assertEqual(self.reports(0x123 | FLAG_ONSET | FLAG_OVER_CLEAR, 6), 0, "still on")
        self.assertEqual(self.reports(0x123 | FLAG_OVER_CLEAR, 7), 0, "between: kept")
        self.assertEqual(self.reports(0x123, 8), 1, "clear")
        self.assertEqual(self.reports(0x123, 9), 0)
        time.sleep(INT_REPORT_INTERVAL_MS / 1000 + 0.2)
        self.assertEqual(self.reports(0x123, 10), 1, "interval passed")
