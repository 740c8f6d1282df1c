//! `Ingress` (switch/p4/controls/ingress.p4): the parser's checks, the
//! ingress controls in the P4 program's order and the IngressDeparser's
//! work on a forwarded packet, in place on the frame, no allocation.

use std::sync::atomic::Ordering::Relaxed;

use super::forwarding;
use super::int_source::IntPkt;
use super::relay6_sessions::IngressMeta6;
use super::{ired, Bridged, DropReason, IngressMeta, Meta, Pipeline, Verdict};
use crate::packet::ipv6::{Parsed6, HDR_LEN, IPPROTO_ICMPV6};
use crate::packet::{self, wr16, L3};

impl Pipeline {
    /// Ingress only (the bridged metadata is dropped): tests and fuzzing.
    pub fn process(&self, frame: &mut [u8], m: &Meta) -> Verdict {
        self.ingress(frame, m).0
    }

    /// Ingress: the verdict, and what the packet carries to `egress_depart`.
    pub fn ingress(&self, frame: &mut [u8], m: &Meta) -> (Verdict, Bridged) {
        let mut b = Bridged::default();
        let v = self.ingress_into(frame, m, &mut b);
        // the parser's constant of every packet (reroute's delay at egress)
        b.rr_ingress_ts = self.tna.tstamp(m.now_ns);
        (v, b)
    }

    /// `Ingress.apply` (switch/p4/controls/ingress.p4): the parser's checks,
    /// `relay_sessions`, the bridged header, `learning` (learn_filter),
    /// `relay_guard`'s drop, `forwarding`, `ired_drop`, then the deparser's checksum.
    fn ingress_into(&self, frame: &mut [u8], m: &Meta, b: &mut Bridged) -> Verdict {
        if self.is_notice(frame) {
            // the parser's notice state: no session's packet (reroute.rs)
            return self.reroute_notice(frame, m);
        }
        let p = match packet::parse_l3(frame) {
            Ok(L3::V4(p)) => p,
            Ok(L3::V6(p)) => return self.ingress6(frame, &p, m, b),
            Err(e) => return Verdict::Drop(e.into()),
        };
        if p.fragment {
            self.stats.fragments.fetch_add(1, Relaxed);
        }
        let ip = IntPkt::v4(&p);
        let stack = match self.int_check(frame, &ip) {
            Ok(s) => s,
            Err(()) => return Verdict::Drop(DropReason::IntMalformed),
        };
        let bound_port = self.port_binding(m.ingress_port);
        let mut md = IngressMeta::new(&p, m.ingress_port, bound_port);
        // INT packets are routed, not relayed: the relay switch is the
        // source of its sessions' INT
        if stack.is_none() {
            self.relay_sessions(frame, &p, m, &mut md);
        }
        let watched = stack.is_none() && self.int_watch(frame, &p, &md);
        if md.relay_hit && !md.rtcp && md.rewritten {
            *b = self.bridge(frame, &p, &md).unwrap_or_default();
        }
        if md.relay_dst && !md.relay_hit {
            // Also for a guarded port: the agent sees the foreign source
            // (NAT rebinding, attacks).
            self.learning(&md.flow, md.ingress_port, m);
        }
        if md.guard_drop {
            return Verdict::Drop(DropReason::Guarded);
        }
        let out = match self.forwarding(&p, &md, m, b) {
            Ok(out) => out,
            Err(reason) => return Verdict::Drop(reason),
        };
        let ports = (md.flow.sport, md.flow.dport);
        let report = self.int_source(&ip, ports, md.ingress_port, stack, watched, &out, b);
        let dscp = frame[p.l3 + 1] >> 2;
        let protected =
            md.relay_hit || dscp == ired::DSCP_EF || self.ired_spare(dscp, p.udp.as_ref());
        if self.ired_drop(out.port, protected) {
            return Verdict::Drop(DropReason::Ired);
        }
        deparse(frame, &p, &out);
        if let (Some(r), Some(s)) = (report, stack) {
            self.int_report_copy(&frame[..p.l3 + p.total_len], s.shim, r);
        }
        Verdict::Forward(out.port)
    }

    /// `Ingress.apply` for an IPv6 packet: ICMPv6 for the CPU, hop limit,
    /// `relay6_sessions`, `learning6`, the guard's drop, `forwarding`'s IPv6
    /// branch, `ired_drop`, then the deparser (no L3 checksum). INT as for
    /// IPv4 (`int_watch6` traces destinations); reroute watches IPv6
    /// destinations in `reroute_watch6`.
    fn ingress6(&self, frame: &mut [u8], p: &Parsed6, m: &Meta, b: &mut Bridged) -> Verdict {
        if icmp6_to_cpu(frame, p) {
            return Verdict::Drop(DropReason::ToCpu);
        }
        if p.fragment {
            self.stats.fragments.fetch_add(1, Relaxed);
        }
        let ip = IntPkt::v6(p);
        let stack = match self.int_check(frame, &ip) {
            Ok(s) => s,
            Err(()) => return Verdict::Drop(DropReason::IntMalformed),
        };
        if p.hop_limit <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        let bound_port = self.port_binding(m.ingress_port);
        let mut md = IngressMeta6::new(p, m.ingress_port, bound_port);
        // INT packets are routed, not relayed (RELAY_LOOKUP6)
        if stack.is_none() {
            self.relay6_sessions(frame, p, m, &mut md);
        }
        let watched = stack.is_none() && self.int_watch6(p, md.dst_addr);
        if md.relay_hit && !md.rtcp && md.rewritten {
            if let Some(rtp) = p.udp.and_then(|u| packet::parse_rtp_in(frame, &u, p.end())) {
                *b = Bridged {
                    relayed_rtp: true,
                    leg: md.leg,
                    rtcp: md.rtcp,
                    rtp,
                    ..Bridged::default()
                };
            }
        }
        if md.relay_dst && !md.relay_hit {
            // also for a guarded port: the agent sees the foreign source
            self.learning6(&md, m);
        }
        let routed = if md.guard_drop {
            Err(DropReason::Guarded)
        } else {
            self.forwarding6(md.dst_addr, m.ingress_port, b)
        };
        let out = match routed {
            Ok(out) => out,
            Err(reason) => return Verdict::Drop(reason),
        };
        let ports = (md.flow.sport, md.flow.dport);
        let report = self.int_source(&ip, ports, md.ingress_port, stack, watched, &out, b);
        let protected =
            md.relay_hit || p.dscp() == ired::DSCP_EF || self.ired_spare(p.dscp(), p.udp.as_ref());
        if self.ired_drop(out.port, protected) {
            return Verdict::Drop(DropReason::Ired);
        }
        frame[0..6].copy_from_slice(&out.dst_mac);
        frame[6..12].copy_from_slice(&out.src_mac);
        frame[p.l3 + 7] = p.hop_limit - 1; // hop_limit_dec
        if let (Some(r), Some(s)) = (report, stack) {
            self.int_report_copy(&frame[..p.end()], s.shim, r);
        }
        Verdict::Forward(out.port)
    }

    /// `hdr.bridged`: what egress needs of a relayed RTP packet.
    fn bridge(&self, frame: &[u8], p: &packet::Parsed, md: &IngressMeta) -> Option<Bridged> {
        let u = p.udp.as_ref()?;
        let rtp = packet::parse_rtp(frame, u, p)?;
        Some(Bridged {
            relayed_rtp: true,
            leg: md.leg,
            rtcp: md.rtcp,
            rtp,
            ..Bridged::default()
        })
    }
}

/// `ICMP6_TO_CPU`: NDP (types 133..=137) wherever it is addressed, and any
/// ICMPv6 to a multicast (ff00::/8) or link-local (fe80::/10) destination.
fn icmp6_to_cpu(frame: &[u8], p: &Parsed6) -> bool {
    if p.next_header != IPPROTO_ICMPV6 {
        return false;
    }
    let ndp = p.payload_len >= 1 && (133..=137).contains(&frame[p.l3 + HDR_LEN]);
    ndp || p.dst >> 120 == 0xff || p.dst >> 118 == 0x3fa
}

/// The IngressDeparser's work on a forwarded packet: MACs and TTL as
/// `nexthop.forward` set them, the IPv4 header checksum recomputed. (The UDP
/// checksum was updated incrementally by `leg_rewrite`.)
fn deparse(frame: &mut [u8], p: &packet::Parsed, out: &forwarding::Egress) {
    frame[0..6].copy_from_slice(&out.dst_mac);
    frame[6..12].copy_from_slice(&out.src_mac);
    let ip = &mut frame[p.l3..p.l3 + p.ihl];
    ip[8] = p.ttl - 1;
    let c = packet::ipv4_checksum(ip);
    wr16(ip, 10, c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::Udp4;
    use crate::packet::{ipv4_checksum, rd16};
    use crate::pipeline::tests::{meta, setup, UAC, UAS};
    use crate::schema::IredCount;
    use crate::tables::small::IredConfig;

    #[test]
    fn the_deparser_writes_macs_ttl_and_a_fresh_header_checksum() {
        let (p, _) = setup();
        let mut f = Udp4 {
            src: UAC,
            dst: UAS,
            ttl: 2,
            options: vec![1, 1, 1, 0],
            ..Udp4::default()
        }
        .build();
        assert_eq!(p.process(&mut f, &meta(0)), Verdict::Forward(2));
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 0xb]);
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 0xa]);
        assert_eq!(f[14 + 8], 1, "TTL 2 leaves with 1");
        let ihl = usize::from(f[14] & 0xf) * 4;
        assert_eq!(ihl, 24, "options kept");
        assert_eq!(rd16(&f, 14 + 10), ipv4_checksum(&f[14..14 + ihl]));
        assert!(packet::parse(&f).is_ok());
    }

    #[test]
    fn fragments_are_counted_and_routed() {
        let (p, _) = setup();
        let mut f = Udp4 {
            src: UAC,
            dst: UAS,
            ..Udp4::default()
        }
        .build();
        f[14 + 6] |= 0x20; // more fragments
        let c = ipv4_checksum(&f[14..34]);
        wr16(&mut f, 24, c);
        assert_eq!(p.process(&mut f, &meta(0)), Verdict::Forward(2));
        assert_eq!(p.stats.fragments.load(Relaxed), 1);
    }

    #[test]
    fn the_ired_flag_drops_after_routing_and_spares_ef_when_protected() {
        let (p, _) = setup();
        let c = IredConfig {
            max_len_queue: 64,
            n_drop: 4,
            ewma_n: 1,
            tail_drop: false,
            protect: true,
        };
        p.small
            .update(|t| t.ired_port_write(2, Some(c), true))
            .unwrap();
        let pkt = |dscp: u8| {
            let mut f = Udp4 {
                src: UAC,
                dst: UAS,
                ..Udp4::default()
            }
            .build();
            f[15] = dscp << 2;
            let c = ipv4_checksum(&f[14..34]);
            wr16(&mut f, 24, c);
            f
        };
        // a decision at port 2's egress sets its flag (spare protected)
        p.ired(2, &Bridged::default(), 500, 500);
        p.ired_feedback();
        assert_eq!(
            p.process(&mut pkt(ired::DSCP_EF), &meta(0)),
            Verdict::Forward(2)
        );
        assert_eq!(
            p.process(&mut pkt(0), &meta(0)),
            Verdict::Drop(DropReason::Ired)
        );
        assert_eq!(
            p.process(&mut pkt(0), &meta(0)),
            Verdict::Forward(2),
            "one drop per flag"
        );
        assert_eq!(p.ired.read_count(IredCount::Spared, 2), Some(1));
        assert_eq!(p.ired.read_count(IredCount::Drops, 2), Some(1));
    }
}
