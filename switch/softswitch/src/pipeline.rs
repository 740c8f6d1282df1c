//! One packet through the p4relay pipeline, in the P4 program's order.
//! Ingress (`process`): parse → relay (+ leg_rewrite) or relay_addr → learn
//! digest, relay_guard → ipv4_lpm → nexthop (MAC rewrite, TTL) → deparse
//! (checksums); works in place on the frame, no allocation. Egress
//! (`egress_depart`): the RTP quality registers, updated when the packet
//! leaves its egress queue, from what ingress bridged with it (`Bridged`), so
//! tail drops show as loss and queueing delay variation as jitter.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

use crate::contract::Contract;
use crate::fastpath::FastPath;
use crate::packet::{self, csum_update16, csum_update32, rd16, wr16, wr32, ParseError, Rtp};
use crate::registers::{LearnFilter, QualityRegs};
use crate::tables::guard::{GuardAction, GuardKey, GuardTable};
use crate::tables::legs::LegTable;
use crate::tables::relay::{RelayAction, RelayKey, RelayTable};
use crate::tables::small::{LpmAction, NexthopAction, RelayAddrAction, SmallStore};

/// `pipe.IngressDeparser.learn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LearnDigest {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub ingress_port: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    Truncated,
    NotIpv4,
    BadIpv4,
    BadIpChecksum,
    /// ipv4_lpm or nexthop chose `drop` (incl. their default actions).
    NoRoute,
    TtlExpired,
    /// nexthop names a port the switch does not have.
    NoSuchPort,
    /// relay_guard hit: a foreign source to an offloaded call's relay port.
    Guarded,
}

impl DropReason {
    pub const ALL: [DropReason; 8] = [
        DropReason::Truncated,
        DropReason::NotIpv4,
        DropReason::BadIpv4,
        DropReason::BadIpChecksum,
        DropReason::NoRoute,
        DropReason::TtlExpired,
        DropReason::NoSuchPort,
        DropReason::Guarded,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotIpv4 => "not_ipv4",
            DropReason::BadIpv4 => "bad_ipv4",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoSuchPort => "no_such_port",
            DropReason::Guarded => "relay_guard",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

impl From<ParseError> for DropReason {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::Truncated => DropReason::Truncated,
            ParseError::NotIpv4 => DropReason::NotIpv4,
            ParseError::BadIpv4 => DropReason::BadIpv4,
            ParseError::BadIpChecksum => DropReason::BadIpChecksum,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Forward(u16),
    Drop(DropReason),
}

/// Pipeline-wide event counters (exported as metrics).
#[derive(Debug, Default)]
pub struct PipelineStats {
    pub relay_hits: AtomicU64,
    pub relay_rewrites: AtomicU64,
    /// relay hit but its leg has no leg_rewrite entry: forwarded unchanged.
    pub leg_misses: AtomicU64,
    pub learn_digests: AtomicU64,
    pub learn_suppressed: AtomicU64,
    /// Digest queue full (control plane not keeping up): the flow reports again after the filter ages.
    pub learn_dropped: AtomicU64,
    /// relay_guard hits (dropped; also counted per guard entry).
    pub guard_drops: AtomicU64,
    pub rtp_packets: AtomicU64,
    pub fragments: AtomicU64,
    /// UDP whose length field disagrees with IPv4: routed, not relayed.
    pub udp_bad_length: AtomicU64,
}

pub struct Pipeline {
    pub small: SmallStore,
    pub relay: RelayTable,
    pub guard: GuardTable,
    pub legs: LegTable,
    pub quality: QualityRegs,
    pub learn_filter: LearnFilter,
    pub stats: PipelineStats,
    digests: SyncSender<LearnDigest>,
    /// dev_port → egress exists (bitmap over contract max_ports).
    ports: u64,
    /// The XDP fast path, when attached: relay hits it forwards never reach
    /// `ingress`; what they count is added on reads (fastpath/mirror.rs).
    pub fastpath: Option<Arc<FastPath>>,
}

/// Carried with a forwarded packet from ingress through its egress queue to
/// `egress_depart` (Tofino: bridged metadata).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bridged {
    /// Relayed by a relay entry whose leg has a rewrite, RTP v2 header parsed.
    pub relayed_rtp: bool,
    pub leg: u32,
    /// The relay entry's rtcp bit: RTCP never touches the quality registers.
    pub rtcp: bool,
    pub rtp: Rtp,
}

/// Per-packet metadata the I/O layer provides.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub ingress_port: u16,
    /// Arrival, ns since the Unix epoch (kernel RX timestamp).
    pub now_ns: u64,
    /// Arrival, ms since the Unix epoch, mod 2^32 (idle timers, last_seen).
    pub now_ms: u32,
}

impl Pipeline {
    pub fn new(
        c: &Contract,
        relay_entries: usize,
        legs: usize,
        ports: &[u32],
        digests: SyncSender<LearnDigest>,
    ) -> Pipeline {
        Pipeline {
            small: SmallStore::default(),
            relay: RelayTable::new(relay_entries),
            guard: GuardTable::new(relay_entries),
            legs: LegTable::new(legs),
            quality: QualityRegs::new(legs, c.config.rtp_clock_hz, c.config.jitter_shift),
            learn_filter: LearnFilter::new(
                c.config.learn_filter_size as usize,
                c.config.learn_filter_age_ms,
            ),
            stats: PipelineStats::default(),
            digests,
            ports: ports
                .iter()
                .filter(|&&p| p < 64)
                .fold(0, |m, &p| m | 1 << p),
            fastpath: None,
        }
    }

    /// Shares the quality registers and the relay work with an XDP fast path.
    pub fn with_fastpath(mut self, c: &Contract, fp: Arc<FastPath>) -> Pipeline {
        self.quality =
            QualityRegs::shared(fp.quality(), c.config.rtp_clock_hz, c.config.jitter_shift);
        self.fastpath = Some(fp);
        self
    }

    pub fn has_port(&self, port: u32) -> bool {
        port < 64 && self.ports & (1 << port) != 0
    }

    /// Clears every table and register (SetForwardingPipelineConfig).
    pub fn clear(&self) {
        let _ = self.small.update(|t| {
            *t = Default::default();
            Ok(())
        });
        self.relay.clear();
        self.guard.clear();
        self.legs.clear();
        self.quality.clear();
        self.learn_filter.clear();
        self.mirror_cleared();
    }

    /// Ingress only (the bridged metadata is dropped): tests and fuzzing.
    pub fn process(&self, frame: &mut [u8], m: &Meta) -> Verdict {
        self.ingress(frame, m).0
    }

    /// Ingress: the verdict, and what the packet carries to `egress_depart`.
    pub fn ingress(&self, frame: &mut [u8], m: &Meta) -> (Verdict, Bridged) {
        let mut b = Bridged::default();
        let v = self.ingress_into(frame, m, &mut b);
        (v, b)
    }

    /// Egress: the packet of `b` leaves its egress queue at `now_ns` (wall
    /// clock, ns since the Unix epoch). Relayed RTP updates its leg's quality.
    #[inline]
    pub fn egress_depart(&self, b: &Bridged, now_ns: u64) {
        if b.relayed_rtp && !b.rtcp {
            self.stats.rtp_packets.fetch_add(1, Relaxed);
            let now_ms = (now_ns / 1_000_000) as u32;
            self.quality.update(b.leg as usize, &b.rtp, now_ns, now_ms);
        }
    }

    fn ingress_into(&self, frame: &mut [u8], m: &Meta, b: &mut Bridged) -> Verdict {
        let p = match packet::parse(frame) {
            Ok(p) => p,
            Err(e) => return Verdict::Drop(e.into()),
        };
        let frame_len = frame.len() as u32;
        let small = self.small.load();
        let mut dst = p.dst;
        if p.fragment {
            self.stats.fragments.fetch_add(1, Relaxed);
        }
        match p.udp {
            Some(u) if !u.valid_len => {
                self.stats.udp_bad_length.fetch_add(1, Relaxed);
            }
            Some(u) => {
                let key = RelayKey {
                    src: p.src,
                    dst: p.dst,
                    sport: u.src_port,
                    dport: u.dst_port,
                };
                match self.relay.lookup(&key, frame_len, m.now_ms) {
                    Some(RelayAction::Leg { leg, rtcp }) => {
                        self.stats.relay_hits.fetch_add(1, Relaxed);
                        match self.legs.get(leg) {
                            Some(rw) => {
                                if !rtcp {
                                    if let Some(rtp) = packet::parse_rtp(frame, &u, &p) {
                                        *b = Bridged {
                                            relayed_rtp: true,
                                            leg,
                                            rtcp,
                                            rtp,
                                        };
                                    }
                                }
                                let inc = u16::from(rtcp);
                                let (sport, dport) =
                                    (rw.sport.wrapping_add(inc), rw.dport.wrapping_add(inc));
                                let csum_off = u.off + 6;
                                let mut c = rd16(frame, csum_off);
                                if c != 0 {
                                    c = csum_update32(c, p.src, rw.src);
                                    c = csum_update32(c, p.dst, rw.dst);
                                    c = csum_update16(c, u.src_port, sport);
                                    c = csum_update16(c, u.dst_port, dport);
                                    // 0 means "no checksum" in UDP; its one's-complement twin is 0xffff.
                                    wr16(frame, csum_off, if c == 0 { 0xffff } else { c });
                                }
                                wr32(frame, p.l3 + 12, rw.src);
                                wr32(frame, p.l3 + 16, rw.dst);
                                wr16(frame, u.off, sport);
                                wr16(frame, u.off + 2, dport);
                                dst = rw.dst;
                                self.stats.relay_rewrites.fetch_add(1, Relaxed);
                            }
                            None => {
                                self.stats.leg_misses.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    Some(RelayAction::NoAction) => {}
                    None => {
                        if small.relay_addr_lookup(p.dst, u.dst_port) == RelayAddrAction::MarkRelay
                        {
                            // The digest goes out on a guard hit too: the agent
                            // sees the foreign source (NAT rebinding, attacks).
                            self.learn(&key, m);
                            let g = GuardKey {
                                dst: p.dst,
                                dport: u.dst_port,
                            };
                            if self.guard.lookup(&g, frame_len, m.now_ms) == Some(GuardAction::Drop)
                            {
                                self.stats.guard_drops.fetch_add(1, Relaxed);
                                return Verdict::Drop(DropReason::Guarded);
                            }
                        }
                    }
                }
            }
            None => {}
        }

        let (port, src_mac, dst_mac) = match small.lpm_lookup(dst) {
            LpmAction::SetNexthop(id) => match small.nexthop_lookup(id) {
                NexthopAction::Forward {
                    port,
                    src_mac,
                    dst_mac,
                } => (port, src_mac, dst_mac),
                NexthopAction::Drop => return Verdict::Drop(DropReason::NoRoute),
            },
            LpmAction::Drop => return Verdict::Drop(DropReason::NoRoute),
        };
        if p.ttl <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        if !self.has_port(u32::from(port)) {
            return Verdict::Drop(DropReason::NoSuchPort);
        }
        frame[0..6].copy_from_slice(&dst_mac);
        frame[6..12].copy_from_slice(&src_mac);
        let ip = &mut frame[p.l3..p.l3 + p.ihl];
        ip[8] = p.ttl - 1;
        let c = packet::ipv4_checksum(ip);
        wr16(ip, 10, c);
        Verdict::Forward(port)
    }

    fn learn(&self, key: &RelayKey, m: &Meta) {
        let h = key.src.wrapping_mul(0x9e37_79b1)
            ^ key.dst.rotate_left(7).wrapping_mul(0x85eb_ca77)
            ^ ((u32::from(key.sport) << 16) | u32::from(key.dport)).wrapping_mul(0xc2b2_ae3d);
        if !self.learn_filter.admit(h ^ (h >> 15), m.now_ms) {
            self.stats.learn_suppressed.fetch_add(1, Relaxed);
            return;
        }
        let d = LearnDigest {
            src: key.src,
            dst: key.dst,
            sport: key.sport,
            dport: key.dport,
            ingress_port: m.ingress_port,
        };
        match self.digests.try_send(d) {
            Ok(()) => {
                self.stats.learn_digests.fetch_add(1, Relaxed);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.learn_dropped.fetch_add(1, Relaxed);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::contract::CONTRACT;
    use crate::packet::testpkt::{rtp, udp_checksum, Udp4};
    use crate::packet::{parse, rd32};
    use crate::schema::Reg;
    use crate::tables::legs::Rewrite;
    use crate::tables::small::RelayAddrKey;
    use std::sync::mpsc::{sync_channel, Receiver};

    pub(crate) const UAC: u32 = 0xc612_010a; // 198.18.1.10
    pub(crate) const UAS: u32 = 0xc612_020a; // 198.18.2.10
    pub(crate) const RELAY: u32 = 0xc612_000a; // 198.18.0.10
    const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    pub(crate) fn setup() -> (Pipeline, Receiver<LearnDigest>) {
        let (tx, rx) = sync_channel(16);
        let p = Pipeline::new(&CONTRACT, 1000, 100, &[1, 2, 3], tx);
        p.small
            .update(|t| {
                t.lpm_write(0xc612_0100, 24, Some(LpmAction::SetNexthop(1)), true)?;
                t.lpm_write(0xc612_0200, 24, Some(LpmAction::SetNexthop(2)), true)?;
                t.lpm_write(0xc612_0000, 24, Some(LpmAction::SetNexthop(3)), true)?;
                t.lpm_write(0x0a00_0000, 8, Some(LpmAction::SetNexthop(9)), true)?;
                t.nexthop_write(
                    1,
                    Some(NexthopAction::Forward {
                        port: 1,
                        src_mac: MAC_A,
                        dst_mac: MAC_B,
                    }),
                    true,
                )?;
                t.nexthop_write(
                    2,
                    Some(NexthopAction::Forward {
                        port: 2,
                        src_mac: MAC_A,
                        dst_mac: MAC_B,
                    }),
                    true,
                )?;
                t.nexthop_write(
                    3,
                    Some(NexthopAction::Forward {
                        port: 3,
                        src_mac: MAC_A,
                        dst_mac: MAC_B,
                    }),
                    true,
                )?;
                t.nexthop_write(
                    9,
                    Some(NexthopAction::Forward {
                        port: 40,
                        src_mac: MAC_A,
                        dst_mac: MAC_B,
                    }),
                    true,
                )?;
                t.relay_addr_write(
                    RelayAddrKey {
                        priority: 1,
                        dst: RELAY,
                        lo: 20000,
                        hi: 29999,
                    },
                    Some(RelayAddrAction::MarkRelay),
                    true,
                )
            })
            .unwrap();
        (p, rx)
    }

    pub(crate) fn meta(ms: u32) -> Meta {
        Meta {
            ingress_port: 1,
            now_ns: u64::from(ms) * 1_000_000,
            now_ms: ms,
        }
    }

    #[test]
    fn routes_with_mac_rewrite_ttl_and_checksum() {
        let (p, _) = setup();
        let mut f = Udp4 {
            src: UAC,
            dst: UAS,
            dport: 5000,
            ..Udp4::default()
        }
        .build();
        assert_eq!(p.process(&mut f, &meta(1)), Verdict::Forward(2));
        assert_eq!(&f[0..6], &MAC_B);
        assert_eq!(&f[6..12], &MAC_A);
        let q = parse(&f).unwrap(); // parse verifies the IPv4 checksum
        assert_eq!(q.ttl, 63);
        let mut ttl1 = Udp4 {
            dst: UAS,
            ttl: 1,
            ..Udp4::default()
        }
        .build();
        assert_eq!(
            p.process(&mut ttl1, &meta(1)),
            Verdict::Drop(DropReason::TtlExpired)
        );
        let mut ttl0 = Udp4 {
            dst: UAS,
            ttl: 0,
            ..Udp4::default()
        }
        .build();
        assert_eq!(
            p.process(&mut ttl0, &meta(1)),
            Verdict::Drop(DropReason::TtlExpired)
        );
        let mut nr = Udp4 {
            dst: 0x0b00_0001,
            ..Udp4::default()
        }
        .build();
        assert_eq!(
            p.process(&mut nr, &meta(1)),
            Verdict::Drop(DropReason::NoRoute)
        );
        let mut np = Udp4 {
            dst: 0x0a00_0001,
            ..Udp4::default()
        }
        .build();
        assert_eq!(
            p.process(&mut np, &meta(1)),
            Verdict::Drop(DropReason::NoSuchPort)
        );
        // default route
        p.small
            .update(|t| t.lpm_write(0, 0, Some(LpmAction::SetNexthop(1)), true))
            .unwrap();
        let mut d = Udp4 {
            dst: 0x0b00_0001,
            ..Udp4::default()
        }
        .build();
        assert_eq!(p.process(&mut d, &meta(1)), Verdict::Forward(1));
    }

    /// Ingress, then departure from the egress queue right away.
    fn through(p: &Pipeline, f: &mut [u8], m: &Meta) -> Verdict {
        let (v, b) = p.ingress(f, m);
        if matches!(v, Verdict::Forward(_)) {
            p.egress_depart(&b, m.now_ns);
        }
        v
    }

    pub(crate) fn install_call(p: &Pipeline) {
        // UAC 198.18.1.10:4000 → relay :20000 becomes relay:20002 → UAS:6000 (leg 7)
        p.legs
            .insert(
                7,
                Rewrite {
                    src: RELAY,
                    dst: UAS,
                    sport: 20002,
                    dport: 6000,
                },
            )
            .unwrap();
        p.relay
            .insert(
                RelayKey {
                    src: UAC,
                    dst: RELAY,
                    sport: 4000,
                    dport: 20000,
                },
                RelayAction::Leg {
                    leg: 7,
                    rtcp: false,
                },
                0,
                0,
            )
            .unwrap();
        p.relay
            .insert(
                RelayKey {
                    src: UAC,
                    dst: RELAY,
                    sport: 4001,
                    dport: 20001,
                },
                RelayAction::Leg { leg: 7, rtcp: true },
                0,
                0,
            )
            .unwrap();
    }

    #[test]
    fn relays_rtp_and_rtcp_with_valid_checksums() {
        let (p, rx) = setup();
        install_call(&p);
        for csum in [true, false] {
            let mut f = Udp4 {
                src: UAC,
                dst: RELAY,
                sport: 4000,
                dport: 20000,
                udp_csum: csum,
                options: vec![1, 1, 1, 0],
                ..Udp4::default()
            }
            .build();
            assert_eq!(through(&p, &mut f, &meta(5)), Verdict::Forward(2));
            let q = parse(&f).unwrap();
            let u = q.udp.unwrap();
            assert_eq!(
                (q.src, q.dst, u.src_port, u.dst_port),
                (RELAY, UAS, 20002, 6000)
            );
            let c = rd16(&f, u.off + 6);
            if csum {
                assert_eq!(c, udp_checksum(&f, &q));
            } else {
                assert_eq!(c, 0, "zero UDP checksum stays zero");
            }
        }
        let mut rtcp = Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4001,
            dport: 20001,
            payload: vec![0x81, 200, 0, 6, 1, 2, 3, 4],
            ..Udp4::default()
        }
        .build();
        assert_eq!(through(&p, &mut rtcp, &meta(6)), Verdict::Forward(2));
        let q = parse(&rtcp).unwrap();
        let u = q.udp.unwrap();
        assert_eq!((u.src_port, u.dst_port), (20003, 6001));
        assert_eq!(rd16(&rtcp, u.off + 6), udp_checksum(&rtcp, &q));
        assert_eq!(rd32(&rtcp, q.l3 + 12), RELAY);
        // RTCP does not touch quality registers; the two RTP packets did.
        assert_eq!(p.quality.read(Reg::Packets, 7), Some(2));
        let e = p
            .relay
            .get(
                &RelayKey {
                    src: UAC,
                    dst: RELAY,
                    sport: 4000,
                    dport: 20000,
                },
                6,
            )
            .unwrap();
        assert_eq!(e.pkts, 2);
        assert!(rx.try_recv().is_err(), "hits raise no digest");
    }

    #[test]
    fn quality_is_measured_at_egress_departure() {
        let (p, _) = setup();
        install_call(&p);
        let rtp_frame = |seq: u16| {
            Udp4 {
                src: UAC,
                dst: RELAY,
                sport: 4000,
                dport: 20000,
                payload: rtp(8, seq, u32::from(seq) * 160, 160),
                ..Udp4::default()
            }
            .build()
        };
        // Ingress alone measures nothing: the packet has not left yet.
        let (v, b) = p.ingress(&mut rtp_frame(1), &meta(0));
        assert_eq!(v, Verdict::Forward(2));
        assert!(b.relayed_rtp && !b.rtcp && b.leg == 7 && b.rtp.seq == 1);
        assert_eq!(p.quality.read(Reg::Packets, 7), Some(0));
        // 10 packets sent every 20 ms; 3, 4 and 7 are tail-dropped by the
        // queue, the others leave after a queueing delay that varies 0/5 ms.
        let t0 = 1_700_000_000_000_000_000u64;
        for seq in 0..10u16 {
            let sent = t0 + u64::from(seq) * 20_000_000;
            let m = Meta {
                ingress_port: 1,
                now_ns: sent,
                now_ms: (sent / 1_000_000) as u32,
            };
            let (v, b) = p.ingress(&mut rtp_frame(seq), &m);
            assert_eq!(v, Verdict::Forward(2));
            if [3, 4, 7].contains(&seq) {
                continue;
            }
            let queued = if seq % 2 == 1 { 5_000_000 } else { 0 };
            p.egress_depart(&b, sent + queued);
        }
        assert_eq!(p.quality.read(Reg::Packets, 7), Some(7));
        assert_eq!(p.quality.read(Reg::Lost, 7), Some(3));
        assert_eq!(p.quality.read(Reg::Reordered, 7), Some(0));
        assert_eq!(p.quality.read(Reg::MaxSeq, 7), Some(9));
        assert_eq!(p.quality.read(Reg::PayloadType, 7), Some(8));
        // queueing delay variation is jitter: |D| = 5 ms = 40 units on every
        // step but 6 -> 8, so S = 40, 78, 114, 147, 138, 170 (J << 4)
        assert_eq!(p.quality.read(Reg::Jitter, 7), Some(170));
        let last = t0 + 9 * 20_000_000 + 5_000_000;
        assert_eq!(
            p.quality.read(Reg::LastSeen, 7),
            Some(u64::from((last / 1_000_000) as u32))
        );
        assert_eq!(p.stats.rtp_packets.load(Relaxed), 7);
        // RTCP and non-relayed packets bridge nothing to measure
        let mut rtcp = Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4001,
            dport: 20001,
            payload: rtp(8, 99, 0, 20),
            ..Udp4::default()
        }
        .build();
        let (_, b) = p.ingress(&mut rtcp, &meta(1));
        assert!(!b.relayed_rtp);
        let mut routed = Udp4 {
            dst: UAS,
            payload: rtp(8, 99, 0, 20),
            ..Udp4::default()
        }
        .build();
        let (_, b) = p.ingress(&mut routed, &meta(1));
        p.egress_depart(&b, t0);
        assert_eq!(p.quality.read(Reg::Packets, 7), Some(7));
    }

    #[test]
    fn relay_miss_in_range_learns_once_and_still_forwards() {
        let (p, rx) = setup();
        let mk = |sport| {
            Udp4 {
                src: 0x6440_4d0a,
                dst: RELAY,
                sport,
                dport: 20010,
                ..Udp4::default()
            }
            .build()
        };
        for t in [10, 20, 30] {
            assert_eq!(p.process(&mut mk(7777), &meta(t)), Verdict::Forward(3));
        }
        let d = rx.try_recv().unwrap();
        assert_eq!(
            d,
            LearnDigest {
                src: 0x6440_4d0a,
                dst: RELAY,
                sport: 7777,
                dport: 20010,
                ingress_port: 1
            }
        );
        assert!(rx.try_recv().is_err());
        // ages out after learn_filter_age_ms
        let age = CONTRACT.config.learn_filter_age_ms;
        p.process(&mut mk(7777), &meta(10 + age));
        assert!(rx.try_recv().is_ok());
        // outside the port range: no digest
        let mut f = Udp4 {
            dst: RELAY,
            dport: 30000,
            ..Udp4::default()
        }
        .build();
        p.process(&mut f, &meta(50));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn guard_drops_foreign_sources_counts_and_still_learns() {
        let (p, rx) = setup();
        install_call(&p);
        for dport in [20000, 20001] {
            p.guard
                .insert(GuardKey { dst: RELAY, dport }, GuardAction::Drop, 0, 0)
                .unwrap();
        }
        let attacker = 0xc612_040a; // 198.18.4.10
        let mk = |src, sport, dport| {
            Udp4 {
                src,
                dst: RELAY,
                sport,
                dport,
                payload: rtp(0, 1, 1, 20),
                ..Udp4::default()
            }
            .build()
        };
        for t in [10, 20, 30] {
            assert_eq!(
                p.process(&mut mk(attacker, 5555, 20000), &meta(t)),
                Verdict::Drop(DropReason::Guarded)
            );
        }
        let f = mk(attacker, 5555, 20000);
        let g = p
            .guard
            .get(
                &GuardKey {
                    dst: RELAY,
                    dport: 20000,
                },
                40,
            )
            .unwrap();
        assert_eq!((g.pkts, g.bytes), (3, 3 * f.len() as u64));
        assert_eq!(p.stats.guard_drops.load(Relaxed), 3);
        // the digest is raised once (learn_filter), like any unmatched flow
        assert_eq!(rx.try_recv().unwrap().src, attacker);
        assert!(rx.try_recv().is_err());
        // the legitimate flow still relays; it hits relay, not the guard
        assert_eq!(
            p.process(&mut mk(UAC, 4000, 20000), &meta(50)),
            Verdict::Forward(2)
        );
        assert_eq!(
            p.guard
                .get(
                    &GuardKey {
                        dst: RELAY,
                        dport: 20000
                    },
                    50
                )
                .unwrap()
                .pkts,
            3
        );
        // RTCP port guarded too; an unguarded relay port still goes to the relay server
        assert_eq!(
            p.process(&mut mk(attacker, 5556, 20001), &meta(60)),
            Verdict::Drop(DropReason::Guarded)
        );
        assert_eq!(
            p.process(&mut mk(attacker, 5557, 20010), &meta(70)),
            Verdict::Forward(3)
        );
        // NoAction entries and addresses outside relay_addr do not drop
        p.guard
            .modify(
                &GuardKey {
                    dst: RELAY,
                    dport: 20000,
                },
                Some(GuardAction::NoAction),
                None,
                None,
                80,
            )
            .unwrap();
        assert_eq!(
            p.process(&mut mk(attacker, 5555, 20000), &meta(80)),
            Verdict::Forward(3)
        );
        p.guard
            .insert(
                GuardKey {
                    dst: UAS,
                    dport: 6000,
                },
                GuardAction::Drop,
                0,
                0,
            )
            .unwrap();
        let mut to_uas = Udp4 {
            src: attacker,
            dst: UAS,
            dport: 6000,
            ..Udp4::default()
        }
        .build();
        assert_eq!(p.process(&mut to_uas, &meta(90)), Verdict::Forward(2));
    }

    #[test]
    fn leg_without_rewrite_forwards_unchanged() {
        let (p, _) = setup();
        p.relay
            .insert(
                RelayKey {
                    src: UAC,
                    dst: UAS,
                    sport: 1,
                    dport: 2,
                },
                RelayAction::Leg {
                    leg: 50,
                    rtcp: false,
                },
                0,
                0,
            )
            .unwrap();
        let mut f = Udp4 {
            src: UAC,
            dst: UAS,
            sport: 1,
            dport: 2,
            payload: rtp(0, 1, 1, 20),
            ..Udp4::default()
        }
        .build();
        assert_eq!(p.process(&mut f, &meta(1)), Verdict::Forward(2));
        assert_eq!(p.stats.leg_misses.load(Relaxed), 1);
    }

    #[test]
    fn bad_frames_are_dropped_with_reasons() {
        let (p, _) = setup();
        let good = Udp4 {
            dst: UAS,
            ..Udp4::default()
        }
        .build();
        assert_eq!(
            p.process(&mut good[..5].to_vec(), &meta(1)),
            Verdict::Drop(DropReason::Truncated)
        );
        let mut arp = good.clone();
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(
            p.process(&mut arp, &meta(1)),
            Verdict::Drop(DropReason::NotIpv4)
        );
        let mut bad = good.clone();
        bad[14 + 12] ^= 1;
        assert_eq!(
            p.process(&mut bad, &meta(1)),
            Verdict::Drop(DropReason::BadIpChecksum)
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2048, .. Default::default() })]
        #[test]
        fn pipeline_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), flip in 0usize..300) {
            let (p, _) = setup();
            install_call(&p);
            let mut f = bytes;
            let _ = p.process(&mut f, &meta(1));
            // and valid relay frames with one byte corrupted
            let mut g = Udp4 { src: UAC, dst: RELAY, sport: 4000, dport: 20000, ..Udp4::default() }.build();
            let i = flip % g.len();
            g[i] = g[i].wrapping_add(1);
            let _ = p.process(&mut g, &meta(1));
        }
    }
}
