"""iRED: a port shaped below the offered load builds a queue; Egress decides
drops from the queue average (thresholds minThsld = maxLenQueue/2 - N,
maxThsld = 2 minThsld, a coin between them), Ingress drops the next eligible
packet to that port and clears the flag. Media (relay hits, DSCP EF) is
spared when the port protects it. Depths are in cells (80 bytes) on every
target; the packets here are 1000 bytes = 13 cells.

Every test writes the settings and reads the iRED registers through P4
Studio's client, so it runs unchanged on tofino-model (where the feedback
mirror sessions must exist).
"""

from __future__ import annotations

import grpc
import ptf.testutils as tu
from bfrt_tables import Tables
from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, param, rtp_payload, udp_packet
from p4relay_switch import Entry, InvalidArgumentError
from p4relay_switch.codec import Ternary
from p4relay_switch.errors import write_error
from p4relay_switch.ired import IredPortState, IredSettings
from p4relay_switch.names import (
    A_IRED_SET,
    A_IRED_SPARE_PACKET,
    IRED_COUNTERS,
    IRED_DECISIONS,
    IRED_DROPS,
    IRED_FLAGS_SET,
    IRED_PORT,
    IRED_REGISTERS,
    IRED_SPARE,
    IRED_SPARED,
    IRED_TAIL_DROPS,
    K_DSCP,
    K_EGRESS_PORT,
    K_L4_DST_PORT,
    K_L4_SRC_PORT,
    K_PRIORITY,
    REG_IRED_DROP_FLAG,
    REG_IRED_DROP_PROB,
    REG_IRED_QAVG,
    REG_IRED_QDEPTH_PREV,
)
from scapy.packet import Packet

RATE_KBPS = 1000  # 1 Mbit/s: 125 packets/s of 1000 bytes, 8 ms each
FRAME = 1000
CELLS = (FRAME + 79) // 80  # 13 cells a packet


def set_ired(t: Tables, dev_port: int, s: IredSettings) -> None:
    """A port's iRED on: its drop chance register, then its ired_port entry.
    Settings out of range and unknown ports are refused before any write."""
    s.check()
    if dev_port not in t.ports():
        raise write_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{IRED_PORT}: port {dev_port} is not a port of this switch",
        )
    t.write_register(REG_IRED_DROP_PROB, {dev_port: s.drop_prob_reg})
    data = {
        "max_len_queue": s.max_len_queue,
        "n_drop": s.n_drop,
        "ewma_n": s.ewma_n,
        "tail_drop": int(s.tail_drop),
        "protect": int(s.protect),
    }
    t.insert_or_modify(IRED_PORT, [Entry({K_EGRESS_PORT: dev_port}, A_IRED_SET, data)])


def clear_ired(t: Tables, dev_port: int, *, reset: bool = True) -> None:
    """A port's iRED off (plain tail drop); with reset, its registers and
    counters zeroed."""
    if any(r.key.get(K_EGRESS_PORT) == dev_port for r in t.read(IRED_PORT)):
        t.delete(IRED_PORT, [{K_EGRESS_PORT: dev_port}])
    if reset:
        for name in IRED_REGISTERS:
            t.write_register(name, {dev_port: 0})
        for name in IRED_COUNTERS:
            t.write_counter(name, {dev_port: 0})


def ired_state(t: Tables, dev_port: int) -> IredPortState:
    """The port's iRED registers and counters: counters summed over the
    pipes; the queue depth, average, chance and flag as pipe 0 holds them."""
    regs = {name: t.read_register(name, [dev_port])[dev_port] for name in IRED_REGISTERS}
    for name in IRED_COUNTERS:
        regs[name] = t.read_counter(name, [dev_port])[dev_port]
    return IredPortState(
        qdepth_prev=regs[REG_IRED_QDEPTH_PREV][0],
        qavg=regs[REG_IRED_QAVG][0],
        drop_prob=regs[REG_IRED_DROP_PROB][0],
        decisions=sum(regs[IRED_DECISIONS]),
        tail_drops=sum(regs[IRED_TAIL_DROPS]),
        drop_flag=regs[REG_IRED_DROP_FLAG][0],
        flags_set=sum(regs[IRED_FLAGS_SET]),
        drops=sum(regs[IRED_DROPS]),
        spared=sum(regs[IRED_SPARED]),
    )


def pkt_to(port: int, tos: int = 0) -> Packet:
    """A 1000-byte UDP packet from host 1 to the host behind `port`."""
    return udp_packet(
        in_port=1,
        src=HOST_IP[1],
        dst=HOST_IP[port],
        sport=1,
        dport=2,
        payload=b"i" * (FRAME - 42),
        tos=tos,
    )


class IredTest(P4RelayTest):
    """Port 2 shaped to RATE_KBPS; iRED settings per test; everything reset after."""

    def setUp(self) -> None:
        super().setUp()
        for p in (2, 4):
            clear_ired(self.tables, self.dev[p])
        self.tables.set_port_shaping(self.dev[2], RATE_KBPS)

    def tearDown(self) -> None:
        try:
            for p in (2, 4):
                clear_ired(self.tables, self.dev[p])
            self.tables.set_port_shaping(self.dev[2], int(param("line_rate_kbps", 0)))
        finally:
            super().tearDown()

    def configure(self, s: IredSettings, port: int = 2) -> None:
        set_ired(self.tables, self.dev[port], s)

    def state(self, port: int = 2) -> IredPortState:
        d = self.dev[port]
        return ired_state(self.tables, d)

    def burst(self, n: int, port: int = 2, tos: int = 0) -> int:
        """Sends n packets to `port` back to back; returns how many left it."""
        pkt = pkt_to(port, tos=tos)
        for _ in range(n):
            self.send(1, pkt)
        return self.count_received(port, timeout=1.0)

    def one_by_one(self, n: int, port: int = 2, tos: int = 0) -> int:
        """Sends n packets with the queue empty between them; returns how many arrived."""
        got = 0
        for _ in range(n):
            self.send(1, pkt_to(port, tos=tos))
            got += self.count_received(port, timeout=0.3)
        return got


def band(min_pkts: int, drop_prob: float, **kw: object) -> IredSettings:
    """Thresholds at min_pkts and 2 min_pkts packets of 1000 bytes (N = 4 packets)."""
    n_drop = 4 * CELLS
    return IredSettings(
        max_len_queue=2 * (min_pkts * CELLS + n_drop),
        n_drop=n_drop,
        ewma_n=1,
        drop_prob=drop_prob,
        **kw,  # type: ignore[arg-type]
    )


class IredThresholds(IredTest):
    """No decision while the average stays below minThsld or inside the band
    with a zero chance; every departure above maxThsld decides."""

    def runTest(self) -> None:
        s = band(20, 0.0)
        self.assertEqual((s.min_thsld, s.max_thsld), (20 * CELLS, 40 * CELLS))
        self.configure(s)
        got = self.burst(15)  # at most 14 behind any departure: below minThsld
        st = self.state()
        self.assertEqual(got, 15)
        self.assertEqual((st.decisions, st.flags_set, st.drops), (0, 0, 0))
        got = self.burst(38)  # up to 37 behind: inside the band, chance 0
        st = self.state()
        self.assertEqual(got, 38)
        self.assertEqual(st.decisions, 0)
        # The queue did reach the band (the average follows the depth with
        # ewma_n 1), so "no decision" above is the zero chance, not an empty queue.
        wm = self.tables.queue_stats(self.dev[2])["watermark_cells"]
        self.assertGreaterEqual(wm, s.min_thsld, "the burst never reached minThsld")
        sent = 60  # up to 59 behind (queue depth 64): above maxThsld
        got = self.burst(sent)
        st = self.state()
        self.assertGreater(st.decisions, 0, "no decision above maxThsld")
        # each feedback copy set the flag; each ingress drop took one flag
        self.assertEqual(st.flags_set, st.decisions)
        self.assertLessEqual(st.drops, st.flags_set)
        self.assertEqual(got + st.drops, sent, "a packet vanished without being counted")
        q = self.tables.queue_stats(self.dev[2])
        self.assertEqual(q["usage_cells"], 0)


class IredProbabilityBand(IredTest):
    """Inside the band a packet decides with the port's drop probability."""

    def decisions(self, p: float, bursts: int) -> int:
        self.configure(band(10, p))
        before = self.state().decisions
        for _ in range(bursts):
            self.burst(19)  # departures with 10..18 behind are in the band, none above
        return self.state().decisions - before

    def runTest(self) -> None:
        all_in_band = self.decisions(1.0, 3)
        self.assertGreater(all_in_band, 10)
        half = self.decisions(0.5, 3)
        none = self.decisions(0.0, 3)
        self.assertEqual(none, 0)
        # binomial(all_in_band, 0.5) within 4 standard deviations
        sd = (all_in_band * 0.25) ** 0.5
        self.assertLess(abs(half - all_in_band / 2), 4 * sd + 2, (all_in_band, half))


class IredFlagConsumedOnce(IredTest):
    """A decision sets the flag; exactly the next packet to the port is
    dropped, in Ingress, and the flag is cleared."""

    def runTest(self) -> None:
        # minThsld 2 packets: the last deciding departure (2 behind) comes
        # after every arrival of the burst, so the flag it sets stays
        self.configure(band(2, 1.0, protect=False))
        self.burst(30)
        st = self.state()
        self.assertGreater(st.decisions, 0)
        self.assertEqual(st.drop_flag, 1)
        got = self.one_by_one(4)
        after = self.state()
        self.assertEqual(got, 3, "exactly one packet dropped by the flag")
        self.assertEqual(after.drops, st.drops + 1)
        self.assertEqual(after.drop_flag, 0)
        # an empty queue decides nothing more
        self.assertEqual(after.decisions, st.decisions)
        self.assertEqual(after.flags_set, st.flags_set)


class IredProtectsMedia(IredTest):
    """With protection, DSCP EF and relayed call packets pass a set flag
    (counted as spared); the flag waits for the next other packet."""

    def runTest(self) -> None:
        self.configure(band(2, 1.0, protect=True))
        self.burst(30)
        st = self.state()
        self.assertEqual(st.drop_flag, 3)
        # EF (DSCP 46 = TOS 0xb8) passes, the flag stays
        self.assertEqual(self.one_by_one(3, tos=0xB8), 3)
        mid = self.state()
        self.assertEqual(mid.spared, st.spared + 3)
        self.assertEqual(mid.drop_flag, 3)
        # a relayed RTP packet of an offloaded call passes too
        call = self.call()
        self.calls.install(call)
        a = udp_packet(
            in_port=1,
            src=HOST_IP[1],
            dst=RELAY_IP,
            sport=6000,
            dport=20000,
            payload=rtp_payload(1, 160),
        )
        self.send(1, a)
        self.expect(forwarded(a, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        mid2 = self.state()
        self.assertEqual(mid2.spared, mid.spared + 1)
        # the next plain packet takes the flag
        self.assertEqual(self.one_by_one(2), 1)
        end = self.state()
        self.assertEqual(end.drops, st.drops + 1)
        self.assertEqual(end.drop_flag, 0)
        self.calls.remove(call)


class IredSparesSignalling(IredTest):
    """With protection, the operator's signalling class (ired_spare: here SIP
    to UDP 5060, and DSCP CS3) passes a set flag, counted as spared; a
    packet to another port or with another DSCP takes the flag."""

    def runTest(self) -> None:
        wild = Ternary(0, 0)
        spare = [
            Entry(
                {
                    K_DSCP: wild,
                    K_L4_SRC_PORT: wild,
                    K_L4_DST_PORT: Ternary(5060, 0xFFFF),
                    K_PRIORITY: 1,
                },
                A_IRED_SPARE_PACKET,
            ),
            Entry(
                {
                    K_DSCP: Ternary(24, 0x3F),
                    K_L4_SRC_PORT: wild,
                    K_L4_DST_PORT: wild,
                    K_PRIORITY: 2,
                },
                A_IRED_SPARE_PACKET,
            ),
        ]
        self.tables.clear(IRED_SPARE)
        self.tables.insert(IRED_SPARE, spare)
        try:
            self.configure(band(2, 1.0, protect=True))
            self.burst(30)
            st = self.state()
            self.assertEqual(st.drop_flag, 3)
            sip = udp_packet(
                in_port=1,
                src=HOST_IP[1],
                dst=HOST_IP[2],
                sport=5060,
                dport=5060,
                payload=b"INVITE sip:b@example.net SIP/2.0\r\n",
            )
            for _ in range(2):
                self.send(1, sip)
                self.assertEqual(self.count_received(2, timeout=0.3), 1)
            self.assertEqual(self.one_by_one(2, tos=24 << 2), 2, "CS3 passes")
            mid = self.state()
            self.assertEqual((mid.spared, mid.drop_flag), (st.spared + 4, 3))
            self.assertEqual(self.one_by_one(1, tos=26 << 2), 0, "AF31 takes the flag")
            self.assertEqual(self.state().drops, st.drops + 1)
        finally:
            self.tables.clear(IRED_SPARE)


class IredWithoutProtection(IredTest):
    """Without protection an EF packet is as eligible as any other."""

    def runTest(self) -> None:
        self.configure(band(2, 1.0, protect=False))
        self.burst(30)
        st = self.state()
        self.assertEqual(st.drop_flag, 1)
        self.assertEqual(self.one_by_one(2, tos=0xB8), 1)
        self.assertEqual(self.state().spared, 0)


class IredPerPort(IredTest):
    """A flag on port 2 touches nothing on port 4 and the reverse."""

    def runTest(self) -> None:
        self.configure(band(2, 1.0, protect=False))
        self.configure(band(2, 1.0, protect=False), port=4)
        self.burst(30)
        self.assertEqual(self.state().drop_flag, 1)
        self.assertEqual(self.one_by_one(3, port=4), 3)
        p4 = self.state(4)
        self.assertEqual((p4.decisions, p4.flags_set, p4.drops, p4.drop_flag), (0, 0, 0, 0))
        self.assertEqual(self.state().drop_flag, 1)
        # a port without iRED never decides: port 4 unconfigured, port 2 off
        clear_ired(self.tables, self.dev[2], reset=False)
        flag = self.tables.read_register(REG_IRED_DROP_FLAG, [self.dev[2]])
        self.assertEqual(flag[self.dev[2]][0], 1)
        before = self.state().decisions
        self.burst(30)
        self.assertEqual(self.state().decisions, before)


class IredTailDropMode(IredTest):
    """tail_drop: no decisions; packets that found maxLenQueue or more queued
    are dropped in Egress, so the port acts as a maxLenQueue-cell queue."""

    def runTest(self) -> None:
        self.configure(
            IredSettings(max_len_queue=10 * CELLS, n_drop=CELLS, tail_drop=True, drop_prob=1.0)
        )
        q0 = self.tables.queue_stats(self.dev[2])
        sent = 40
        got = self.burst(sent)
        st = self.state()
        q1 = self.tables.queue_stats(self.dev[2])
        self.assertEqual(st.decisions, 0)
        self.assertGreater(st.tail_drops, 0)
        self.assertEqual(got + st.tail_drops, sent)
        self.assertLess(got, 20)
        self.assertEqual(q1["drop_count_packets"], q0["drop_count_packets"])


class IredConfigErrors(IredTest):
    """Settings the pipeline cannot run are refused with InvalidArgumentError
    and nothing is written."""

    def runTest(self) -> None:
        bad = [
            IredSettings(max_len_queue=64 * CELLS, n_drop=32 * CELLS),  # N >= maxLenQueue/2
            IredSettings(max_len_queue=64 * CELLS, n_drop=0),
            IredSettings(max_len_queue=64 * CELLS, n_drop=4 * CELLS, ewma_n=0),
            IredSettings(max_len_queue=64 * CELLS, n_drop=4 * CELLS, ewma_n=5),
            IredSettings(max_len_queue=1 << 19, n_drop=4 * CELLS),
        ]
        for s in bad:
            with self.assertRaises(InvalidArgumentError, msg=str(s)) as cm:
                self.configure(s)
            self.assertIn("pipe.Egress.ired_port", str(cm.exception))
        unknown = max(self.tables.ports()) + 1
        with self.assertRaises(InvalidArgumentError) as cm:
            set_ired(self.tables, unknown, IredSettings(max_len_queue=640, n_drop=52))
        self.assertIn("not a port", str(cm.exception))
        self.assertEqual(self.tables.read(IRED_PORT), [])
        # still forwarding plainly
        self.assertEqual(self.one_by_one(2), 2)
        tu.verify_no_other_packets(self, timeout=0.2)
