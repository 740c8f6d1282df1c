"""Congestion reroute in the data plane: m consecutive packets of a watched
destination over t_q of delay (m - 1 do not trigger) move it to its
pre-installed backup next hop with no control plane in the loop; without a
backup the switch sends a congestion notice out of the port the flow came in
by, a switch without a backup passes it on upstream, and the one with a
backup that receives it by the watched route's primary port moves its flow;
at the INT sink, packets whose INT shows a hop over onset count as hot
(INT-driven reroute); the control plane's return (hysteresis) restores the
primary and restarts detection; thresholds beyond what Tofino 1 measures are
refused, and never reached by the data plane.

The queue is made by shaping port 2 to 200 kbit/s: a burst of 1000-byte
frames leaves one every 40 ms, so the k-th frame of a burst waits about
(k - 1) x 40 ms and the first one (an idle queue) almost nothing. t_q is
200 us, far above an idle queue; the delay detection measures comes from the
48-bit timestamps (exact to 4.29 s), so the same cases run on tofino-model
(with the reroute notice mirror sessions of the bootstrap) and on the
software switch. One switch plays each role of a path in turn, the other
switches' notices sent into its ports."""

from __future__ import annotations

import ipaddress
import struct
import time

import ptf.testutils as tu
from int_telemetry import (
    FLAG_ONSET,
    FLAG_ONSET_HOP1,
    FLAG_ONSET_HOP2,
    SHIM,
    hop,
    stack,
    to_host,
    with_int,
)
from p4rbase import (
    HOST_IP,
    HOST_MAC,
    NET,
    SW_MAC,
    P4RelayTest,
    forwarded,
    lpm,
    param,
    udp_packet,
)
from p4relay_switch import Entry, int_telemetry, limits
from p4relay_switch.names import (
    A_INT_HOP,
    A_INT_SINK,
    A_INT_TRANSIT,
    A_REROUTE_BACKUP,
    A_REROUTE_NOTIFY,
    A_REROUTE_THRESHOLDS,
    INT_HOP_CONFIG,
    INT_ROLE,
    INT_WATCH,
    K_DST_ADDR,
    K_EGRESS_PORT,
    K_NEXTHOP_ID,
    K_RR_CLASS,
    REG_REROUTE_ACTIVE,
    REG_REROUTE_FROM,
    REG_REROUTE_PORT_HOT,
    REG_REROUTE_RUN,
    REROUTE_CLASS,
    REROUTE_DIGEST,
    REROUTE_NOTICE_ETHERTYPE,
    REROUTE_WATCH,
)
from p4relay_switch.reroute import (
    MOVED,
    NOTIFIED,
    RELAYED,
    RerouteClass,
    RerouteEvent,
    RerouteWatch,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

RATE_KBPS = 200
FRAME = 1000
GAP_S = FRAME * 8 / (RATE_KBPS * 1000)  # 40 ms per frame on the shaped port
T_Q_NS = 200_000
M = 4
SLOT = 5
CLASS = 1
UAS = ipaddress.IPv4Network(f"{HOST_IP[2]}/32")
NOTICE_LOCAL = 3
NOTICE_UPSTREAM = 4
FROM_INT = 0x8000  # reroute_notice_h: the top bit of the pad + port word
UPSTREAM_ID = 0x22  # the INT switch before this one
SOURCE_ID = 0x11  # the INT source, before that one
NOTICE = "!BBHHHIIH"  # reroute_notice_h: ... queue_delay_ns, hop_switch_id, hop_port
IP_AT = 14 + struct.calcsize(NOTICE)  # the flow's IPv4 header in a notice frame


class RerouteTest(P4RelayTest):
    """Port 2 (primary to the UAS) shaped; next hop 3 (port 3) the backup."""

    def setUp(self) -> None:
        super().setUp()
        self.reroute_digest = self.bfrt_info.learn_get(REROUTE_DIGEST)
        self.clear_reroute()
        c = RerouteClass(CLASS, T_Q_NS, M)
        self.tables.insert_or_modify(
            REROUTE_CLASS,
            [
                Entry(
                    {K_RR_CLASS: c.flow_class},
                    A_REROUTE_THRESHOLDS,
                    {"t_q_ns": c.t_q_ns, "m": c.m},
                )
            ],
        )
        self.tables.set_port_shaping(self.dev[2], RATE_KBPS)

    def tearDown(self) -> None:
        try:
            self.tables.set_port_shaping(self.dev[2], int(param("line_rate_kbps", 0)))
            self.clear_reroute()
        finally:
            super().tearDown()

    def clear_reroute(self) -> None:
        for t in (REROUTE_WATCH, REROUTE_CLASS):
            self.tables.clear(t)
        self.tables.write_register(REG_REROUTE_ACTIVE, {SLOT: 0, SLOT + 1: 0})
        self.tables.write_register(REG_REROUTE_RUN, {SLOT: 0, SLOT + 1: 0})

    def watch(self, backup: bool, slot: int = SLOT) -> None:
        """UAS watched, primary port 2: with the backup next hop 3, or notify upstream."""
        w = RerouteWatch(UAS, slot, CLASS, 3 if backup else None, self.dev[2])
        key = {K_DST_ADDR: lpm(str(w.prefix))}
        if w.backup_nexthop_id is None:
            data = {"slot": w.slot, "flow_class": w.flow_class, "primary_port": w.primary_port}
            e = Entry(key, A_REROUTE_NOTIFY, data)
        else:
            data = {
                "slot": w.slot,
                "flow_class": w.flow_class,
                "backup_nexthop_id": w.backup_nexthop_id,
                "primary_port": w.primary_port,
            }
            e = Entry(key, A_REROUTE_BACKUP, data)
        self.tables.insert_or_modify(REROUTE_WATCH, [e])

    def flow_packet(self, i: int = 0) -> bytes:
        return bytes(
            udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=HOST_IP[2],
                sport=4000,
                dport=4001,
                payload=struct.pack("!I", i) + b"r" * (FRAME - 46),
                ip_id=i,
            )
        )

    def burst(self, k: int, first: int = 0) -> None:
        """k frames back to back, then the time the shaped port needs to send them."""
        for i in range(first, first + k):
            tu.send_packet(self, 1, self.flow_packet(i))
        time.sleep(k * GAP_S + 0.3)

    def events(self, duration_s: float = 0.5) -> list[RerouteEvent]:
        """The reroute digests within ``duration_s``."""
        out: list[RerouteEvent] = []
        for d in self.digests(duration_s):
            if d.digest_id != self.reroute_digest.info.id_get():
                continue
            for data in self.reroute_digest.make_data_list(d):
                r = data.to_dict()
                out.append(
                    RerouteEvent(
                        dst=ipaddress.IPv4Address(r["dst_addr"]),
                        slot=r["slot"],
                        kind=r["kind"],
                        port=r["port"],
                        queue_delay_ns=r["queue_delay_ns"],
                        run=r["run"],
                        flow_class=r["flow_class"],
                        from_int=r["from_int"] == 1,
                        hop=(r["hop_switch_id"], r["hop_port"]) if r["hop_switch_id"] else None,
                    )
                )
        return out

    def active(self, slot: int = SLOT) -> bool:
        """On its backup, in any pipe."""
        return any(v != 0 for v in self.tables.read_register(REG_REROUTE_ACTIVE, [slot])[slot])

    def moved(self, slot: int = SLOT, timeout: float = 2.0) -> bool:
        """On its backup within ``timeout``: the notice's recirculation, not
        the packets, decides when."""
        deadline = time.monotonic() + timeout
        while not self.active(slot):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def notice(self, kind: int, dst: str, in_port: int, ttl: int = 63) -> bytes:
        ip = IP(src=HOST_IP[1], dst=dst, ttl=ttl, id=9) / UDP(sport=4000, dport=4001) / (b"n" * 40)
        body = struct.pack(NOTICE, kind, CLASS, self.dev[in_port] & 0x1FF, 77, M, 5_000_000, 0, 0)
        eth = Ether(src=HOST_MAC[in_port], dst=SW_MAC[in_port], type=REROUTE_NOTICE_ETHERTYPE)
        return bytes(eth) + body + bytes(ip)


class MConsecutivePackets(RerouteTest):
    """m - 1 hot packets in a row do not move the flow; m do, at once; the
    next packet takes the backup."""

    def runTest(self) -> None:
        self.watch(backup=True)
        self.dataplane.flush()
        # a burst of M: its first frame meets an empty queue, M - 1 wait
        self.burst(M)
        self.assertEqual(self.count_received(2, timeout=0.5), M)
        self.assertFalse(self.active())
        self.assertEqual(self.events(0.3), [])
        # a burst of M + 1: M wait in a row -> one reroute
        self.burst(M + 1, first=100)
        self.assertEqual(self.count_received(2, timeout=0.5), M + 1)
        self.assertTrue(self.moved())
        ev = self.events(1.0)
        self.assertEqual(len(ev), 1, ev)
        e = ev[0]
        self.assertEqual(
            (e.kind, e.slot, e.dst, e.run, e.flow_class), (MOVED, SLOT, UAS[0], M, CLASS)
        )
        self.assertEqual(e.port, self.dev[1])
        self.assertGreater(e.queue_delay_ns, T_Q_NS)
        # the next packet leaves by the backup next hop, with its MACs
        p = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded(p, 3), 3)
        self.expect_nothing(timeout=0.3)


class HysteresisReturn(RerouteTest):
    """While on the backup the primary port's last hot departure is stamped;
    the control plane's return puts the flow back on the primary, and
    detection starts again from zero."""

    def runTest(self) -> None:
        self.watch(backup=True)
        self.dataplane.flush()
        self.burst(M + 1)
        self.count_received(2, timeout=0.5)
        self.assertTrue(self.moved())
        hot = max(self.tables.read_register(REG_REROUTE_PORT_HOT, [self.dev[2]])[self.dev[2]])
        self.assertNotEqual(hot, 0)
        # the control plane's move back: active and run of the slot to 0
        self.tables.write_register(REG_REROUTE_ACTIVE, {SLOT: 0})
        self.tables.write_register(REG_REROUTE_RUN, {SLOT: 0})
        self.assertFalse(self.active())
        self.assertEqual(max(self.tables.read_register(REG_REROUTE_RUN, [SLOT])[SLOT]), 0)
        p = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded(p, 2), 2)
        time.sleep(2 * GAP_S)  # the link is free again: the burst's first frame waits for nothing
        # m - 1 hot packets after the return do not move it again
        self.burst(M, first=200)
        self.assertEqual(self.count_received(2, timeout=0.5), M)
        self.assertFalse(self.active())


class UpstreamNotification(RerouteTest):
    """No backup here: m hot packets send one congestion notice out of the
    port the flow came in by; the flow itself stays on its next hop."""

    def runTest(self) -> None:
        self.watch(backup=False)
        self.dataplane.flush()
        self.burst(M + 1)
        self.assertEqual(self.count_received(2, timeout=0.5), M + 1)
        r = tu.dp_poll(self, device_number=0, port_number=1, timeout=2.0)
        self.assertIsInstance(r, self.dataplane.PollSuccess, "no notice upstream")
        f = bytes(r.packet)
        self.assertEqual(struct.unpack("!H", f[12:14])[0], REROUTE_NOTICE_ETHERTYPE)
        kind, cls, port, slot, run, qd, hop_id, hop_port = struct.unpack(NOTICE, f[14:IP_AT])
        self.assertEqual(
            (kind, cls, port & 0x1FF, slot, run), (NOTICE_UPSTREAM, CLASS, self.dev[1], SLOT, M)
        )
        self.assertGreater(qd, T_Q_NS)
        self.assertEqual((hop_id, hop_port), (0, 0), "this switch's own delay names no INT hop")
        ip = IP(f[IP_AT : IP_AT + 20])
        self.assertEqual(ip.dst, HOST_IP[2])
        self.assertEqual(ip.src, HOST_IP[1])
        ev = self.events(1.0)
        self.assertEqual([(e.kind, e.slot) for e in ev], [(NOTIFIED, SLOT)])
        self.assertFalse(self.active())


class UpstreamSwitchMoves(RerouteTest):
    """The upstream side: a notice moves the flow only when it comes by the
    watched route's primary port and says UPSTREAM; forged LOCAL notices from
    a wire port, notices for unwatched destinations and damaged ones do nothing."""

    def runTest(self) -> None:
        self.watch(backup=True)
        self.dataplane.flush()
        for kind, port, dst in (
            (NOTICE_UPSTREAM, 1, HOST_IP[2]),  # wrong port
            (NOTICE_LOCAL, 2, HOST_IP[2]),  # LOCAL from the wire
            (NOTICE_UPSTREAM, 2, HOST_IP[4]),  # unwatched destination
        ):
            self.send(port, self.notice(kind, dst, port))
        bad = bytearray(self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2))
        bad[IP_AT + 10] ^= 0xFF  # IPv4 header checksum
        self.send(2, bytes(bad))
        self.send(2, self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2)[: IP_AT + 14])  # truncated
        self.expect_nothing(timeout=0.3)
        self.assertFalse(self.active())
        self.assertEqual(self.events(0.3), [])
        self.send(2, self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2))
        self.expect_nothing(timeout=0.3)  # consumed
        self.assertTrue(self.moved())
        ev = self.events(1.0)
        self.assertEqual([(e.kind, e.slot, e.run) for e in ev], [(MOVED, SLOT, M)])
        p = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded(p, 3), 3)
        # a second notice for a moved slot changes nothing and raises no digest
        self.send(2, self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2))
        self.assertEqual(self.events(0.3), [])


class NoticeCrossesSwitchWithoutBackup(RerouteTest):
    """Multi-hop: a switch without a backup passes an upstream notice that
    arrives by its primary next hop's port on to the port the flow comes in
    by (reroute_from), its TTL one less (digest RELAYED); from another port,
    or with its TTL spent, it ends there. The switch with the backup that
    receives the passed-on notice by its primary's port moves the flow."""

    def runTest(self) -> None:
        self.tables.set_port_shaping(self.dev[2], int(param("line_rate_kbps", 0)))
        self.watch(backup=False)
        self.dataplane.flush()
        # the flow comes in by port 3 here
        p = udp_packet(in_port=3, src=HOST_IP[1], dst=HOST_IP[2], sport=4000, dport=4001)
        self.send(3, p)
        self.expect(forwarded(p, 2), 2)
        came = self.tables.read_register(REG_REROUTE_FROM, [SLOT])[SLOT]
        self.assertIn(self.dev[3], came)
        # the downstream switch's notice (its own port of the flow: 7)
        n = bytearray(self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2))
        struct.pack_into("!H", n, 16, 7)
        self.send(1, bytes(n))  # not by the primary next hop's port
        self.expect_nothing(timeout=0.3)
        self.send(2, bytes(self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2, ttl=1)))
        self.expect_nothing(timeout=0.3)
        self.assertEqual(self.events(0.3), [])
        self.send(2, bytes(n))
        r = tu.dp_poll(self, device_number=0, port_number=3, timeout=2.0)
        self.assertIsInstance(r, self.dataplane.PollSuccess, "notice not passed on")
        on = bytes(r.packet)
        self.assertEqual(on[:IP_AT], bytes(n[:IP_AT]), "the notice itself is unchanged")
        ip = IP(on[IP_AT : IP_AT + 20])
        self.assertEqual(ip.ttl, 62)
        sent = ip.chksum
        del ip.chksum
        self.assertEqual(IP(bytes(ip)).chksum, sent, "IPv4 header checksum")
        ev = self.events(1.0)
        self.assertEqual(
            [(e.kind, e.slot, e.port, e.from_int) for e in ev], [(RELAYED, SLOT, 7, False)]
        )
        self.assertFalse(self.active())
        # the next switch upstream has the backup; its primary is its port 2
        self.watch(backup=True)
        self.send(2, on)
        self.expect_nothing(timeout=0.3)
        self.assertTrue(self.moved())
        self.assertEqual([(e.kind, e.slot) for e in self.events(1.0)], [(MOVED, SLOT)])
        self.send(1, p)
        self.expect(forwarded(p, 3), 3)


class IntSinkTest(RerouteTest):
    """This switch is the INT sink of the flow: next hop 2 leaves the domain.
    Port 2 runs at line rate: this switch's own delay stays under t_q."""

    def setUp(self) -> None:
        super().setUp()
        if not self.tables.has(INT_ROLE):
            self.skipTest("the target's program has no INT tables (lean or large profile)")
        self.tables.set_port_shaping(self.dev[2], int(param("line_rate_kbps", 0)))
        self.tables.insert_or_modify(INT_ROLE, [Entry({K_NEXTHOP_ID: 2}, A_INT_SINK)])

    def tearDown(self) -> None:
        try:
            for t in (INT_WATCH, INT_ROLE, INT_HOP_CONFIG):
                self.tables.clear(t)
        finally:
            super().tearDown()

    def int_packets(self, onset: list[bool], source_hot: bool = False) -> None:
        """One INT packet of the flow per entry, each checked as it leaves,
        stripped. Two hops (the source's, then the switch before this one,
        newest first); a hot entry has the newer hop at/over its onset
        threshold, or with `source_hot` the source's: the stack's bits say
        which."""
        for i, hot in enumerate(onset):
            p = to_host(2, sport=4000, dport=4001, seq=i)
            place = FLAG_ONSET_HOP1 if source_hot else FLAG_ONSET_HOP2
            flags = (SOURCE_ID ^ UPSTREAM_ID) | (FLAG_ONSET | place if hot else 0)
            up = hop(UPSTREAM_ID, 7, 8, latency=180_000, occ=5000 if hot and not source_hot else 3)
            src = hop(SOURCE_ID, 5, 6, latency=180_000, occ=5000 if hot and source_hot else 3)
            st = stack([up, src], dscp=0, udp_csum=p[UDP].chksum, flags=flags)
            self.send(1, with_int(p, st))
            self.expect(forwarded(p, 2), 2)

    def upstream_notice(self, named: tuple[int, int] = (UPSTREAM_ID, 8)) -> bytes:
        """The notice sent upstream, naming the hop at/over onset `named`
        (INT switch id, egress port)."""
        r = tu.dp_poll(self, device_number=0, port_number=1, timeout=2.0)
        self.assertIsInstance(r, self.dataplane.PollSuccess, "no notice upstream")
        f = bytes(r.packet)
        self.assertEqual(struct.unpack("!H", f[12:14])[0], REROUTE_NOTICE_ETHERTYPE)
        kind, cls, word, slot, run, _delay, hop_id, hop_port = struct.unpack(NOTICE, f[14:IP_AT])
        self.assertEqual(
            (kind, cls, word & FROM_INT, word & 0x1FF, slot, run, hop_id, hop_port),
            (NOTICE_UPSTREAM, CLASS, FROM_INT, self.dev[1], SLOT, M, *named),
        )
        return f


class IntDrivenMove(IntSinkTest):
    """INT-driven reroute: packets whose INT stack carries the onset bit (a
    hop upstream over its threshold) are hot at the sink though its own queue
    is idle: m in a row send one notice upstream by the flow's ingress port,
    flagged from_int, even with a backup here (a move here would not avoid
    the hop), and a longer run sends no second one. The switch with the
    backup upstream moves the flow on it."""

    def runTest(self) -> None:
        self.watch(backup=True)
        self.dataplane.flush()
        self.int_packets([True] * (M + 2))
        n = self.upstream_notice()
        self.expect_nothing(timeout=0.3)  # one notice per run
        ev = self.events(1.0)
        self.assertEqual(
            [(e.kind, e.slot, e.from_int, e.run, e.hop) for e in ev],
            [(NOTIFIED, SLOT, True, M, (UPSTREAM_ID, 8))],
        )
        self.assertFalse(self.active(), "the sink does not move the flow itself")
        # upstream: the switch with the backup receives it by its primary's
        # port; its digest names the congested hop the sink saw
        self.send(2, n)
        self.expect_nothing(timeout=0.3)
        self.assertTrue(self.moved())
        ev = self.events(1.0)
        self.assertEqual(
            [(e.kind, e.from_int, e.hop) for e in ev], [(MOVED, True, (UPSTREAM_ID, 8))]
        )
        p = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded(p, 3), 3)


class IntDrivenHysteresis(IntSinkTest):
    """m - 1 packets over onset and a clear one do not trigger (the run
    restarts); after a notice and the control plane's return (run 0), m - 1
    more do not trigger again, the m-th does."""

    def runTest(self) -> None:
        self.watch(backup=False)
        self.dataplane.flush()
        self.int_packets([True] * (M - 1) + [False] + [True] * (M - 1))
        self.expect_nothing(timeout=0.3)
        self.assertEqual(self.events(0.3), [])
        self.int_packets([True], source_hot=True)
        # the hop at/over onset is the source's, the stack's deeper one
        self.upstream_notice(named=(SOURCE_ID, 6))
        self.assertEqual([e.kind for e in self.events(1.0)], [NOTIFIED])
        # the control plane's return: the run starts from zero
        self.tables.write_register(REG_REROUTE_RUN, {SLOT: 0})
        self.int_packets([True] * (M - 1))
        self.expect_nothing(timeout=0.3)
        self.int_packets([True])
        self.upstream_notice()


class UnrepresentableThreshold(RerouteTest):
    """A threshold beyond what Tofino 1 measures: the control plane's check
    refuses it, naming the limit; written anyway, the data plane never
    reaches it, as the ASIC would not. This switch is the INT source on the
    shaped port 2: frames wait 40 to 120 ms there, yet with a hop latency
    onset of 1 ms (deq_timedelta: 18 bits, 262,143 ns) no hop is flagged and
    the hops report 262,143 ns; an onset of 200 us flags them."""

    def setUp(self) -> None:
        super().setUp()
        if not self.tables.has(INT_WATCH):
            self.skipTest("the target's program has no INT tables (lean or large profile)")
        watch = int_telemetry.flow_watch(dst=ipaddress.IPv4Network(NET[2]))
        self.tables.insert_or_modify(INT_WATCH, [watch])
        self.tables.insert_or_modify(INT_ROLE, [Entry({K_NEXTHOP_ID: 2}, A_INT_TRANSIT)])

    def tearDown(self) -> None:
        try:
            for t in (INT_WATCH, INT_ROLE, INT_HOP_CONFIG):
                self.tables.clear(t)
        finally:
            super().tearDown()

    def hop_thresholds(self, onset_ns: int, clear_ns: int) -> None:
        data = {
            "switch_id": UPSTREAM_ID,
            "onset_cells": limits.NEVER,
            "clear_cells": limits.NEVER,
            "onset_ns": onset_ns,
            "clear_ns": clear_ns,
        }
        self.tables.insert_or_modify(
            INT_HOP_CONFIG, [Entry({K_EGRESS_PORT: self.dev[2]}, A_INT_HOP, data)]
        )

    def burst_hops(self, first: int) -> list[tuple[bool, int]]:
        """(onset flag, hop latency) of each frame of a burst of 4."""
        self.burst(4, first=first)
        out = []
        for _ in range(4):
            r = tu.dp_poll(self, device_number=0, port_number=2, timeout=2.0)
            self.assertIsInstance(r, self.dataplane.PollSuccess, "frame missing")
            f = bytes(r.packet)
            (flags,) = struct.unpack_from("!H", f, SHIM + 14)
            (latency,) = struct.unpack_from("!I", f, SHIM + 16 + 8)
            out.append((flags & FLAG_ONSET != 0, latency))
        return out

    def runTest(self) -> None:
        with self.assertRaisesRegex(limits.UnrepresentableThreshold, "tna_deq_timedelta_bits"):
            limits.check_int_hop(limits.NEVER, limits.NEVER, 1_000_000, 500_000)
        with self.assertRaisesRegex(limits.UnrepresentableThreshold, "tna_qdepth_bits"):
            limits.check_int_hop(600_000, 0, limits.NEVER, limits.NEVER)
        with self.assertRaisesRegex(limits.UnrepresentableThreshold, "reroute_delay_shift"):
            limits.check_reroute_t_q(20_000)  # below one tick of the delay
        limits.check_reroute_t_q(50_000_000)  # 50 ms: measured from the timestamps
        self.dataplane.flush()
        self.hop_thresholds(1_000_000, 500_000)
        hops = self.burst_hops(0)
        self.assertEqual([f for f, _ in hops], [False] * 4, hops)
        self.assertTrue(all(lat <= limits.HOP_LATENCY_MAX_NS for _, lat in hops), hops)
        self.assertEqual(hops[-1][1], limits.HOP_LATENCY_MAX_NS, "saturated")
        self.hop_thresholds(200_000, 100_000)
        # The shaped link drains: the next burst's first frame waits for nothing.
        time.sleep(2 * GAP_S)
        hops = self.burst_hops(10)
        self.assertEqual([f for f, _ in hops[1:]], [True] * 3, hops)
