"""Congestion reroute in the data plane: m consecutive packets of a watched
destination over t_q of queueing delay (m - 1 do not trigger) move it to its
pre-installed backup next hop with no control plane in the loop; without a
backup the switch sends a congestion notice out of the port the flow came in
by, and an upstream switch that receives one by the watched route's primary
port moves its flow; the control plane's return (hysteresis) restores the
primary and restarts detection.

The queue is made by shaping port 2 to 200 kbit/s: a burst of 1000-byte
frames leaves one every 40 ms, so the k-th frame of a burst waits about
(k - 1) x 40 ms and the first one (an idle queue) almost nothing. t_q is
200 us: far above an idle queue, below Tofino 1's deq_timedelta ceiling
(262 us), so the same case runs on tofino-model (with the reroute notice
mirror sessions of the bootstrap) and on the software switch."""

from __future__ import annotations

import ipaddress
import struct
import time

import ptf.testutils as tu
from p4rbase import HOST_IP, HOST_MAC, SW_MAC, P4RelayTest, forwarded, lpm, param, udp_packet
from p4relay_switch import Entry
from p4relay_switch.names import (
    A_REROUTE_BACKUP,
    A_REROUTE_NOTIFY,
    A_REROUTE_THRESHOLDS,
    K_DST_ADDR,
    K_RR_CLASS,
    REG_REROUTE_ACTIVE,
    REG_REROUTE_PORT_HOT,
    REG_REROUTE_RUN,
    REROUTE_CLASS,
    REROUTE_DIGEST,
    REROUTE_NOTICE_ETHERTYPE,
    REROUTE_WATCH,
)
from p4relay_switch.reroute import MOVED, NOTIFIED, RerouteClass, RerouteEvent, RerouteWatch
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

RATE_KBPS = 200
FRAME = 1000
GAP_S = FRAME * 8 / (RATE_KBPS * 1000)  # 40 ms per frame on the shaped port
T_Q_NS = 200_000
M = 4
SLOT = 5
CLASS = 1
HOLD_MS = 300
UAS = ipaddress.IPv4Network(f"{HOST_IP[2]}/32")
NOTICE_LOCAL = 3
NOTICE_UPSTREAM = 4


class RerouteTest(P4RelayTest):
    """Port 2 (primary to the UAS) shaped; next hop 3 (port 3) the backup."""

    def setUp(self) -> None:
        super().setUp()
        self.reroute_digest = self.bfrt_info.learn_get(REROUTE_DIGEST)
        self.clear_reroute()
        c = RerouteClass(CLASS, T_Q_NS, M, HOLD_MS)
        self.tables.insert_or_modify(
            REROUTE_CLASS,
            [
                Entry(
                    {K_RR_CLASS: c.flow_class},
                    A_REROUTE_THRESHOLDS,
                    {"t_q_ns": c.t_q_ns, "m": c.m, "hold_ms": c.hold_ms},
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
        """UAS watched: with the backup next hop 3 (primary port 2), or notify upstream."""
        w = RerouteWatch(UAS, slot, CLASS, 3 if backup else None, self.dev[2] if backup else 0)
        key = {K_DST_ADDR: lpm(str(w.prefix))}
        if w.backup_nexthop_id is None:
            e = Entry(key, A_REROUTE_NOTIFY, {"slot": w.slot, "flow_class": w.flow_class})
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
                    )
                )
        return out

    def active(self, slot: int = SLOT) -> bool:
        """On its backup, in any pipe."""
        return any(v != 0 for v in self.tables.read_register(REG_REROUTE_ACTIVE, [slot])[slot])

    def notice(self, kind: int, dst: str, in_port: int) -> bytes:
        ip = IP(src=HOST_IP[1], dst=dst, ttl=63, id=9) / UDP(sport=4000, dport=4001) / (b"n" * 40)
        body = struct.pack("!BBHHHI", kind, CLASS, self.dev[in_port] & 0x1FF, 77, M, 5_000_000)
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
        self.assertTrue(self.active())
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
        self.assertTrue(self.active())
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
        kind, cls, port, slot, run, qd = struct.unpack("!BBHHHI", f[14:26])
        self.assertEqual(
            (kind, cls, port & 0x1FF, slot, run), (NOTICE_UPSTREAM, CLASS, self.dev[1], SLOT, M)
        )
        self.assertGreater(qd, T_Q_NS)
        ip = IP(f[26:46])
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
        bad[26 + 10] ^= 0xFF  # IPv4 header checksum
        self.send(2, bytes(bad))
        self.send(2, self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2)[:40])  # truncated
        self.expect_nothing(timeout=0.3)
        self.assertFalse(self.active())
        self.assertEqual(self.events(0.3), [])
        self.send(2, self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2))
        self.expect_nothing(timeout=0.3)  # consumed
        self.assertTrue(self.active())
        ev = self.events(1.0)
        self.assertEqual([(e.kind, e.slot, e.run) for e in ev], [(MOVED, SLOT, M)])
        p = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=4000, dport=4001)
        self.send(1, p)
        self.expect(forwarded(p, 3), 3)
        # a second notice for a moved slot changes nothing and raises no digest
        self.send(2, self.notice(NOTICE_UPSTREAM, HOST_IP[2], 2))
        self.assertEqual(self.events(0.3), [])
