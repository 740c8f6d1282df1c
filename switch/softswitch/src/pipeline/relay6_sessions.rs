//! `RelaySessions6` (switch/p4/controls/relay6_sessions.p4): relay6_addr,
//! relay6, relay_guard6 and leg_rewrite6, with their actions. The relay's
//! own IPv6 address is a small id (`relay6_addr`'s `relay_id`): relay6 and
//! relay_guard6 key on it, the remote party's address is the only 128-bit
//! part of a key.

use std::sync::atomic::Ordering::Relaxed;

use super::relay_sessions::L3Addrs;
use super::{IngressMetaOf, Meta, Pipeline};
use crate::packet::ipv6::Parsed6;
use crate::packet::rd16;
use crate::tables::guard::Guard6Key;
use crate::tables::relay::{Relay6Key, RelayAction};
use crate::tables::small6::Relay6AddrAction;

/// `ingress_metadata_t` as the IPv6 steps use it: relay6's key (`relay_id`
/// filled in by relay6_addr) is the flow.
pub(super) type IngressMeta6 = IngressMetaOf<Relay6Key, u128>;

impl IngressMeta6 {
    pub(super) fn new(p: &Parsed6, ingress_port: u16, bound_port: u16) -> IngressMeta6 {
        let (sport, dport) = p.udp.map_or((0, 0), |u| (u.src_port, u.dst_port));
        let flow = Relay6Key {
            src: p.src,
            relay_id: 0,
            sport,
            dport,
            port: bound_port,
        };
        IngressMeta6::with_flow(flow, p.dst, ingress_port)
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
        let Some(u) = self.relay_udp(p.udp) else {
            return;
        };
        if rd16(frame, u.off + 6) == 0 {
            self.stats.udp6_zero_checksum.fetch_add(1, Relaxed);
            return; // RELAY_LOOKUP6
        }
        match self.small.load().v6.relay_addr_lookup(p.dst, u.dst_port) {
            Relay6AddrAction::MarkRelay6 { relay_id } => {
                md.relay_dst = true; // mark_relay6
                md.flow.relay_id = relay_id;
            }
            Relay6AddrAction::NoAction => return,
        }
        match self.relay6.lookup(&md.flow, m.now_ms) {
            Some(RelayAction::Leg { leg, rtcp }) => self.relay_leg(md, leg, rtcp), // relay6_leg
            // NoAction is relay6's default only: no entry carries it
            Some(RelayAction::NoAction) | None => self.relay_guard6(md, m),
        }
        let a = L3Addrs {
            l3: p.l3,
            src_off: 8,
            dst_off: 24,
            src: p.src,
            dst: p.dst,
        };
        self.leg_rewrite(&self.legs6, frame, &a, &u, md); // leg_rewrite6
    }

    /// `relay_guard6`: its hit counts only for a packet relay6 missed.
    fn relay_guard6(&self, md: &mut IngressMeta6, m: &Meta) {
        let g = Guard6Key {
            relay_id: md.flow.relay_id,
            dport: md.flow.dport,
        };
        self.guard_drop(md, self.guard6.lookup(&g, m.now_ms)); // guard6_drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ipv6::testpkt::{udp6_checksum, Udp6, V6_RELAY, V6_UAC, V6_UAS};
    use crate::packet::ipv6::{parse_at, rd128};
    use crate::packet::wr16;
    use crate::pipeline::tests::{meta, setup};
    use crate::pipeline::tests6::install_call6;
    use crate::tables::guard::GuardAction;

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
