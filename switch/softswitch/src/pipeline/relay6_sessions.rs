//! `RelaySessions6` (switch/p4/controls/relay6_sessions.p4): relay6_addr,
//! relay6, relay_guard6 and leg_rewrite6, with their actions. The relay's
//! own IPv6 address is a small id (`relay6_addr`'s `relay_id`): relay6 and
//! relay_guard6 key on it, the remote party's address is the only 128-bit
//! part of a key.

use std::sync::atomic::Ordering::Relaxed;

use super::{Meta, Pipeline};
use crate::packet::ipv6::{udp_csum_rewrite, wr128, Parsed6};
use crate::packet::{self, rd16, wr16};
use crate::tables::guard::{Guard6Key, GuardAction};
use crate::tables::legs6::Rewrite6;
use crate::tables::relay::{Relay6Key, RelayAction};
use crate::tables::small6::Relay6AddrAction;

/// `ingress_metadata_t` as the IPv6 steps use it.
#[derive(Debug, Clone, Copy)]
pub(super) struct IngressMeta6 {
    /// relay6's key (`relay_id` filled in by relay6_addr), the learn filter's flow.
    pub flow: Relay6Key,
    /// The destination as it arrived (the learn digest's dst_addr).
    pub dst: u128,
    pub ingress_port: u16,
    /// relay6_addr: a relay address and port (`mark_relay6`).
    pub relay_dst: bool,
    /// relay6: hit (`relay6_leg`).
    pub relay_hit: bool,
    pub leg: u32,
    pub rtcp: bool,
    /// leg_rewrite6 rewrote the packet.
    pub rewritten: bool,
    /// relay_guard6: a foreign source to a guarded relay port.
    pub guard_drop: bool,
    /// The destination forwarding routes on (the rewritten one after a relay).
    pub dst_addr: u128,
}

impl IngressMeta6 {
    pub(super) fn new(p: &Parsed6, ingress_port: u16, bound_port: u16) -> IngressMeta6 {
        let (sport, dport) = p.udp.map_or((0, 0), |u| (u.src_port, u.dst_port));
        IngressMeta6 {
            flow: Relay6Key {
                src: p.src,
                relay_id: 0,
                sport,
                dport,
                port: bound_port,
            },
            dst: p.dst,
            ingress_port,
            relay_dst: false,
            relay_hit: false,
            leg: 0,
            rtcp: false,
            rewritten: false,
            guard_drop: false,
            dst_addr: p.dst,
        }
    }
}

impl Pipeline {
    /// `RelaySessions6.apply`: relay6_addr for UDP with a checksum (zero is
    /// invalid over IPv6: such a datagram is routed unchanged), then relay6
    /// and relay_guard6 on its relay_id, leg_rewrite6 on a hit.
    pub(super) fn relay6_sessions(
        &self,
        frame: &mut [u8],
        p: &Parsed6,
        m: &Meta,
        md: &mut IngressMeta6,
    ) {
        let Some(u) = p.udp else { return };
        if !u.valid_len {
            self.stats.udp_bad_length.fetch_add(1, Relaxed);
            return;
        }
        if rd16(frame, u.off + 6) == 0 {
            self.stats.udp6_zero_checksum.fetch_add(1, Relaxed);
            return; // RELAY_LOOKUP6
        }
        match self.small.load().v6.relay_addr_lookup(p.dst, u.dst_port) {
            Relay6AddrAction::MarkRelay6 { relay_id } => {
                md.relay_dst = true;
                md.flow.relay_id = relay_id;
            }
            Relay6AddrAction::NoAction => return,
        }
        match self.relay6.lookup(&md.flow, m.now_ms) {
            Some(RelayAction::Leg { leg, rtcp }) => {
                // relay6_leg
                self.stats.relay_hits.fetch_add(1, Relaxed);
                md.relay_hit = true;
                md.leg = leg;
                md.rtcp = rtcp;
            }
            // NoAction is relay6's default only: no entry carries it
            Some(RelayAction::NoAction) | None => self.relay_guard6(md, m),
        }
        if md.relay_hit {
            match self.legs6.get(md.leg) {
                Some(rw) => self.rewrite6(frame, p, &u, md, &rw),
                None => {
                    self.stats.leg_misses.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// `relay_guard6`: its hit counts only for a packet relay6 missed.
    fn relay_guard6(&self, md: &mut IngressMeta6, m: &Meta) {
        let g = Guard6Key {
            relay_id: md.flow.relay_id,
            dport: md.flow.dport,
        };
        if let Some(GuardAction::Drop { leg }) = self.guard6.lookup(&g, m.now_ms) {
            // guard6_drop(leg)
            self.guard_drops.count(leg);
            self.stats.guard_drops.fetch_add(1, Relaxed);
            md.guard_drop = true;
        }
    }

    /// `Ingress.rewrite6`: both addresses and ports (+ 1 for RTCP), the UDP
    /// checksum updated incrementally, a zero result sent as 0xffff;
    /// leg_rewrite6's direct counter counts the packet as it arrived.
    fn rewrite6(
        &self,
        frame: &mut [u8],
        p: &Parsed6,
        u: &packet::Udp,
        md: &mut IngressMeta6,
        rw: &Rewrite6,
    ) {
        self.legs6.count(md.leg, frame.len() as u32);
        let inc = u16::from(md.rtcp);
        let (sport, dport) = (rw.sport.wrapping_add(inc), rw.dport.wrapping_add(inc));
        let csum_off = u.off + 6;
        let c = udp_csum_rewrite(
            rd16(frame, csum_off),
            (p.src, p.dst, u.src_port, u.dst_port),
            (rw.src, rw.dst, sport, dport),
        );
        wr16(frame, csum_off, c);
        wr128(frame, p.l3 + 8, rw.src);
        wr128(frame, p.l3 + 24, rw.dst);
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
    use crate::packet::ipv6::testpkt::{udp6_checksum, Udp6, V6_RELAY, V6_UAC, V6_UAS};
    use crate::packet::ipv6::{parse_at, rd128};
    use crate::pipeline::tests::{meta, setup};
    use crate::pipeline::tests6::install_call6;

    fn run(p: &Pipeline, sport: u16, dport: u16, zero_csum: bool) -> (IngressMeta6, Vec<u8>) {
        let mut f = Udp6 {
            sport,
            dport,
            ..Udp6::default()
        }
        .build();
        if zero_csum {
            wr16(&mut f, 14 + 40 + 6, 0);
        }
        let parsed = parse_at(&f, 14).unwrap();
        let mut md = IngressMeta6::new(&parsed, 1, 1);
        p.relay6_sessions(&mut f, &parsed, &meta(5), &mut md);
        (md, f)
    }

    fn addrs(f: &[u8]) -> (u128, u128, u16, u16) {
        (rd128(f, 22), rd128(f, 38), rd16(f, 54), rd16(f, 56))
    }

    #[test]
    fn a_hit_takes_the_leg_and_rewrites_with_a_valid_checksum() {
        let (p, _) = setup();
        install_call6(&p);
        let (md, f) = run(&p, 4000, 20000, false);
        assert!(md.relay_dst && md.relay_hit && md.rewritten && !md.rtcp);
        assert_eq!((md.leg, md.flow.relay_id), (7, 3));
        assert_eq!(md.dst_addr, V6_UAS);
        assert_eq!(addrs(&f), (V6_RELAY, V6_UAS, 20002, 6000));
        let q = parse_at(&f, 14).unwrap();
        assert_eq!(rd16(&f, 14 + 40 + 6), udp6_checksum(&f, &q));
        assert_eq!(p.legs6.counts(7), (1, f.len() as u64));
        // RTCP: both ports + 1
        let (md, f) = run(&p, 4001, 20001, false);
        assert!(md.relay_hit && md.rtcp);
        assert_eq!(addrs(&f), (V6_RELAY, V6_UAS, 20003, 6001));
        let q = parse_at(&f, 14).unwrap();
        assert_eq!(rd16(&f, 14 + 40 + 6), udp6_checksum(&f, &q));
    }

    #[test]
    fn a_zero_checksum_is_never_relayed_guarded_or_marked() {
        let (p, _) = setup();
        install_call6(&p);
        let (md, f) = run(&p, 4000, 20000, true);
        assert!(!md.relay_dst && !md.relay_hit && !md.guard_drop);
        assert_eq!(addrs(&f), (V6_UAC, V6_RELAY, 4000, 20000));
        assert_eq!(p.stats.udp6_zero_checksum.load(Relaxed), 1);
    }

    #[test]
    fn a_miss_is_marked_and_the_guard_drops_foreign_sources() {
        let (p, _) = setup();
        install_call6(&p);
        let (md, _) = run(&p, 4444, 20010, false);
        assert!(md.relay_dst && !md.relay_hit && !md.guard_drop);
        let (md, _) = run(&p, 4000, 30000, false);
        assert!(!md.relay_dst, "beyond relay6_addr's range");
        p.guard6
            .insert(
                Guard6Key {
                    relay_id: 3,
                    dport: 20000,
                },
                GuardAction::Drop { leg: 7 },
                0,
                0,
            )
            .unwrap();
        let (md, _) = run(&p, 4000, 20000, false);
        assert!(md.relay_hit && !md.guard_drop, "the call's own flow");
        let (md, f) = run(&p, 4444, 20000, false);
        assert!(md.relay_dst && md.guard_drop);
        assert_eq!(addrs(&f), (V6_UAC, V6_RELAY, 4444, 20000));
        assert_eq!(p.guard_drops.read(7), Some(1));
    }

    #[test]
    fn a_v4_leg_or_no_leg_leaves_the_packet_alone() {
        let (p, _) = setup();
        install_call6(&p);
        p.legs6.delete(7).unwrap();
        let (md, f) = run(&p, 4000, 20000, false);
        assert!(md.relay_hit && !md.rewritten);
        assert_eq!(addrs(&f), (V6_UAC, V6_RELAY, 4000, 20000));
        assert_eq!(p.stats.leg_misses.load(Relaxed), 1);
    }
}
