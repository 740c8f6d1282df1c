//! `RelaySessions` (switch/p4/controls/relay_sessions.p4): relay_addr,
//! relay, relay_guard and leg_rewrite, with their actions.

use std::sync::atomic::Ordering::Relaxed;

use super::{IngressMeta, IngressMetaOf, Meta, Pipeline};
use crate::packet::family::{udp_csum_rewrite, Addr};
use crate::packet::{self, rd16, wr16};
use crate::tables::guard::{GuardAction, GuardKey};
use crate::tables::legs::{LegRewrites, RewriteOf};
use crate::tables::relay::RelayAction;
use crate::tables::small::RelayAddrAction;

/// Where a family's header holds the addresses a rewrite changes: the source
/// and destination offsets from the L3 header, and their values as arrived.
pub(super) struct L3Addrs<A> {
    pub l3: usize,
    pub src_off: usize,
    pub dst_off: usize,
    pub src: A,
    pub dst: A,
}

impl Pipeline {
    /// `RelaySessions.apply`. relay_addr is looked up only when relay misses:
    /// only then does its result matter (it has no counters), and a relay hit
    /// is the per-packet hot path.
    pub(super) fn relay_sessions(
        &self,
        frame: &mut [u8],
        p: &packet::Parsed,
        m: &Meta,
        md: &mut IngressMeta,
    ) {
        let Some(u) = self.relay_udp(p.udp) else {
            return;
        };
        match self.relay.lookup(&md.flow, m.now_ms) {
            Some(RelayAction::Leg { leg, rtcp }) => self.relay_leg(md, leg, rtcp),
            // A NoAction entry is a hit that does nothing (not a miss).
            Some(RelayAction::NoAction) => {}
            None => {
                if self.small.load().relay_addr_lookup(p.dst, u.dst_port)
                    == RelayAddrAction::MarkRelay
                {
                    md.relay_dst = true; // mark_relay
                    self.relay_guard(md, m);
                }
            }
        }
        let a = L3Addrs {
            l3: p.l3,
            src_off: 12,
            dst_off: 16,
            src: p.src,
            dst: p.dst,
        };
        self.leg_rewrite(&self.legs, frame, &a, &u, md);
    }

    /// The relay tables look up UDP with a length that fits the packet (a
    /// bad one is counted and the packet routed).
    pub(super) fn relay_udp(&self, udp: Option<packet::Udp>) -> Option<packet::Udp> {
        let u = udp?;
        if !u.valid_len {
            self.stats.udp_bad_length.fetch_add(1, Relaxed);
            return None;
        }
        Some(u)
    }

    /// `Ingress.relay_leg` (relay6_leg: the same for relay6).
    pub(super) fn relay_leg<K, A>(&self, md: &mut IngressMetaOf<K, A>, leg: u32, rtcp: bool) {
        self.stats.relay_hits.fetch_add(1, Relaxed);
        md.relay_hit = true;
        md.leg = leg;
        md.rtcp = rtcp;
    }

    /// `relay_guard`, applied to a packet marked by relay_addr that missed relay.
    fn relay_guard(&self, md: &mut IngressMeta, m: &Meta) {
        let g = GuardKey {
            dst: md.flow.dst,
            dport: md.flow.dport,
        };
        self.guard_drop(md, self.guard.lookup(&g, m.now_ms));
    }

    /// `Ingress.guard_drop(leg)` (guard6_drop for relay_guard6): the drop,
    /// counted in `guard_drops[leg]` (GuardCount).
    pub(super) fn guard_drop<K, A>(&self, md: &mut IngressMetaOf<K, A>, hit: Option<GuardAction>) {
        if let Some(GuardAction::Drop { leg }) = hit {
            self.guard_drops.count(leg);
            self.stats.guard_drops.fetch_add(1, Relaxed);
            md.guard_drop = true;
        }
    }

    /// `leg_rewrite` (leg_rewrite6: `legs` is the family's table) on a relay
    /// hit. A missing entry leaves the packet as it is: it goes to the relay
    /// address, i.e. RTPProxy keeps relaying it.
    pub(super) fn leg_rewrite<K, A: Addr>(
        &self,
        legs: &impl LegRewrites<Addr = A>,
        frame: &mut [u8],
        a: &L3Addrs<A>,
        u: &packet::Udp,
        md: &mut IngressMetaOf<K, A>,
    ) {
        if !md.relay_hit {
            return;
        }
        match legs.get(md.leg) {
            Some(rw) => {
                legs.count(md.leg, frame.len() as u32);
                self.rewrite(frame, a, u, md, &rw);
            }
            None => {
                self.stats.leg_misses.fetch_add(1, Relaxed);
            }
        }
    }

    /// `Ingress.rewrite` and `Ingress.rewrite6` (leg_rewrite's and
    /// leg_rewrite6's action): both addresses and ports, the ports + 1 for
    /// RTCP; the UDP checksum updated incrementally (IPv4's zero stays zero,
    /// a zero result goes out as 0xffff); the direct counter (counted by the
    /// caller) counts the packet as it arrived.
    fn rewrite<K, A: Addr>(
        &self,
        frame: &mut [u8],
        a: &L3Addrs<A>,
        u: &packet::Udp,
        md: &mut IngressMetaOf<K, A>,
        rw: &RewriteOf<A>,
    ) {
        let inc = u16::from(md.rtcp);
        let (sport, dport) = (rw.sport.wrapping_add(inc), rw.dport.wrapping_add(inc));
        let csum_off = u.off + 6;
        let c = udp_csum_rewrite(
            rd16(frame, csum_off),
            (a.src, a.dst, u.src_port, u.dst_port),
            (rw.src, rw.dst, sport, dport),
        );
        wr16(frame, csum_off, c);
        rw.src.wr(frame, a.l3 + a.src_off);
        rw.dst.wr(frame, a.l3 + a.dst_off);
        wr16(frame, u.off, sport);
        wr16(frame, u.off + 2, dport);
        md.dst_addr = rw.dst;
        md.rewritten = true;
        self.stats.relay_rewrites.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::rd32;
    use crate::packet::testpkt::{udp_checksum, Udp4};
    use crate::pipeline::tests::{install_call, meta, setup, RELAY, UAC, UAS};
    use crate::tables::legs::Rewrite;
    use crate::tables::relay::RelayKey;

    /// RelaySessions alone on a UDP packet from UAC:`sport` to RELAY:`dport`
    /// arriving on port 1: the metadata it leaves, and the frame.
    fn run(p: &Pipeline, sport: u16, dport: u16, udp_csum: bool) -> (IngressMeta, Vec<u8>) {
        let mut f = Udp4 {
            src: UAC,
            dst: RELAY,
            sport,
            dport,
            udp_csum,
            payload: vec![0x80, 8, 0, 1, 0, 0, 0, 160, 1, 2, 3, 4, 0xd5, 0xd5],
            ..Udp4::default()
        }
        .build();
        let parsed = packet::parse(&f).unwrap();
        let mut md = IngressMeta::new(&parsed, 1, 1);
        p.relay_sessions(&mut f, &parsed, &meta(5), &mut md);
        (md, f)
    }

    /// Addresses and ports of a frame without options (its IPv4 checksum is
    /// the deparser's business, after this step).
    fn udp_ports(f: &[u8]) -> (u32, u32, u16, u16) {
        (rd32(f, 26), rd32(f, 30), rd16(f, 34), rd16(f, 36))
    }

    /// The frame as the deparser leaves it (IPv4 checksum recomputed), parsed.
    fn deparsed(f: &[u8]) -> (Vec<u8>, packet::Parsed) {
        let mut g = f.to_vec();
        let c = packet::ipv4_checksum(&g[14..34]);
        wr16(&mut g, 24, c);
        let p = packet::parse(&g).unwrap();
        (g, p)
    }

    #[test]
    fn a_hit_takes_the_leg_and_rewrites_with_a_valid_checksum() {
        let (p, _) = setup();
        install_call(&p);
        let (md, f) = run(&p, 4000, 20000, true);
        assert!(md.relay_hit && md.rewritten && !md.rtcp && !md.relay_dst);
        assert_eq!(md.leg, 7);
        assert_eq!(md.dst_addr, UAS, "forwarding routes on the new destination");
        assert_eq!(udp_ports(&f), (RELAY, UAS, 20002, 6000));
        let (g, parsed) = deparsed(&f);
        let stored = rd16(&g, parsed.udp.unwrap().off + 6);
        assert_eq!(stored, udp_checksum(&g, &parsed));
        // leg_rewrite's direct counter: the packet as it arrived
        assert_eq!(p.legs.counts(7), (1, f.len() as u64));
    }

    #[test]
    fn rtcp_takes_both_ports_plus_one() {
        let (p, _) = setup();
        install_call(&p);
        let (md, f) = run(&p, 4001, 20001, true);
        assert!(md.relay_hit && md.rtcp);
        assert_eq!(udp_ports(&f), (RELAY, UAS, 20003, 6001));
    }

    #[test]
    fn port_plus_one_wraps_at_16_bits_and_no_checksum_stays_none() {
        let (p, _) = setup();
        install_call(&p);
        let r = Rewrite {
            src: RELAY,
            dst: UAS,
            sport: 65535,
            dport: 65535,
        };
        p.legs.modify(7, r).unwrap();
        let (_, f) = run(&p, 4001, 20001, false);
        assert_eq!(udp_ports(&f), (RELAY, UAS, 0, 0), "bit<16> + 1 wraps");
        assert_eq!(rd16(&f, 40), 0, "0: no checksum, kept");
    }

    #[test]
    fn a_miss_in_the_relay_range_is_marked_and_outside_it_is_not() {
        let (p, _) = setup();
        install_call(&p);
        let (md, f) = run(&p, 4000, 20010, true);
        assert!(md.relay_dst && !md.relay_hit && !md.guard_drop);
        assert_eq!(udp_ports(&f), (UAC, RELAY, 4000, 20010), "not rewritten");
        let (md, _) = run(&p, 4000, 30000, true);
        assert!(!md.relay_dst, "30000 is beyond relay_addr's 20000..=29999");
        let (md, _) = run(&p, 4000, 19999, true);
        assert!(!md.relay_dst);
        let (md, _) = run(&p, 4000, 29999, true);
        assert!(md.relay_dst, "the range is inclusive");
    }

    #[test]
    fn a_noaction_entry_is_a_hit_that_does_nothing() {
        let (p, _) = setup();
        let k = RelayKey {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20010,
            port: 1,
        };
        p.relay.insert(k, RelayAction::NoAction, 0, 0).unwrap();
        let (md, f) = run(&p, 4000, 20010, true);
        assert!(
            !md.relay_hit && !md.relay_dst,
            "not a miss: relay_addr not applied"
        );
        assert_eq!(udp_ports(&f), (UAC, RELAY, 4000, 20010));
    }

    #[test]
    fn the_guard_drops_foreign_sources_and_counts_them_per_leg() {
        let (p, _) = setup();
        install_call(&p);
        let g = GuardKey {
            dst: RELAY,
            dport: 20000,
        };
        p.guard
            .insert(g, GuardAction::Drop { leg: 5 }, 0, 0)
            .unwrap();
        // the call's own flow hits relay: the guard is not consulted
        let (md, _) = run(&p, 4000, 20000, true);
        assert!(md.relay_hit && !md.guard_drop);
        // a foreign source to the same relay port
        let (md, _) = run(&p, 4444, 20000, true);
        assert!(md.relay_dst && md.guard_drop);
        assert_eq!(p.guard_drops.read(5), Some(1));
        assert_eq!(p.stats.guard_drops.load(Relaxed), 1);
    }

    #[test]
    fn a_leg_without_rewrite_and_a_bad_udp_length_leave_the_packet_alone() {
        let (p, _) = setup();
        install_call(&p);
        p.legs.delete(7).unwrap();
        let (md, f) = run(&p, 4000, 20000, true);
        assert!(md.relay_hit && !md.rewritten);
        assert_eq!(udp_ports(&f), (UAC, RELAY, 4000, 20000));
        assert_eq!(p.stats.leg_misses.load(Relaxed), 1);
        // a UDP length beyond the IPv4 payload: routed, never relayed
        let mut f = Udp4 {
            src: UAC,
            dst: RELAY,
            sport: 4000,
            dport: 20000,
            ..Udp4::default()
        }
        .build();
        let off = packet::parse(&f).unwrap().udp.unwrap().off;
        wr16(&mut f, off + 4, 1000);
        let parsed = packet::parse(&f).unwrap();
        let mut md = IngressMeta::new(&parsed, 1, 1);
        p.relay_sessions(&mut f, &parsed, &meta(5), &mut md);
        assert!(!md.relay_hit && !md.relay_dst);
        assert_eq!(p.stats.udp_bad_length.load(Relaxed), 1);
    }
}
