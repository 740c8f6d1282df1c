//! `Forwarding` (switch/p4/controls/forwarding.p4): ipv4_lpm or ipv6_lpm →
//! nexthop (shared by both families).

use super::{Bridged, DropReason, IngressMeta, Meta, Pipeline};
use crate::packet;
use crate::tables::small::{LpmAction, NexthopAction};

/// Where `nexthop.forward` sends a packet, and the MACs it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Egress {
    /// The next hop chosen (int_role's key).
    pub nexthop_id: u16,
    pub port: u16,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
}

impl Pipeline {
    /// `Forwarding.apply`: the route of the (possibly rewritten) destination;
    /// `reroute` (reroute.rs) beside ipv4_lpm may replace the next hop by the
    /// flow's backup. `forward` decrements the TTL, so an expiring packet is
    /// dropped here; so is one to a port the switch does not have.
    pub(super) fn forwarding(
        &self,
        p: &packet::Parsed,
        md: &IngressMeta,
        m: &Meta,
        b: &mut Bridged,
    ) -> Result<Egress, DropReason> {
        let small = self.small.load();
        let routed = small.lpm_lookup(md.dst_addr);
        let backup = self.reroute(&small, md.dst_addr, m.ingress_port, b);
        let LpmAction::SetNexthop(id) = routed else {
            return Err(DropReason::NoRoute); // drop
        };
        let id = backup.unwrap_or(id);
        let NexthopAction::Forward {
            port,
            src_mac,
            dst_mac,
        } = small.nexthop_lookup(id)
        else {
            return Err(DropReason::NoRoute); // drop
        };
        if p.ttl <= 1 {
            return Err(DropReason::TtlExpired);
        }
        if !self.has_port(u32::from(port)) {
            return Err(DropReason::NoSuchPort);
        }
        Ok(Egress {
            nexthop_id: id,
            port,
            src_mac,
            dst_mac,
        })
    }
}

impl Pipeline {
    /// `Forwarding.apply`'s IPv6 branch: ipv6_lpm on the (possibly
    /// rewritten) destination → nexthop; `reroute` (reroute_watch6) beside
    /// it may replace the next hop by the flow's backup. The caller dropped
    /// hop limit <= 1; `hop_limit_dec` is the deparser's.
    pub(super) fn forwarding6(
        &self,
        dst: u128,
        ingress_port: u16,
        b: &mut Bridged,
    ) -> Result<Egress, DropReason> {
        let small = self.small.load();
        let routed = small.v6.lpm_lookup(dst);
        let backup = self.reroute(&small, dst, ingress_port, b);
        let LpmAction::SetNexthop(id) = routed else {
            return Err(DropReason::NoRoute);
        };
        let id = backup.unwrap_or(id);
        let NexthopAction::Forward {
            port,
            src_mac,
            dst_mac,
        } = small.nexthop_lookup(id)
        else {
            return Err(DropReason::NoRoute);
        };
        if !self.has_port(u32::from(port)) {
            return Err(DropReason::NoSuchPort);
        }
        Ok(Egress {
            nexthop_id: id,
            port,
            src_mac,
            dst_mac,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::Udp4;
    use crate::pipeline::tests::{meta, setup, UAS};

    /// Forwarding alone for a packet to `dst` with `ttl`, routed on `route_on`
    /// (the destination after a relay rewrite).
    fn route(p: &Pipeline, dst: u32, ttl: u8, route_on: u32) -> Result<Egress, DropReason> {
        let f = Udp4 {
            dst,
            ttl,
            ..Udp4::default()
        }
        .build();
        let parsed = packet::parse(&f).unwrap();
        let mut md = IngressMeta::new(&parsed, 1, 1);
        md.dst_addr = route_on;
        p.forwarding(&parsed, &md, &meta(0), &mut Bridged::default())
    }

    #[test]
    fn the_longest_prefix_chooses_the_next_hop_and_its_port() {
        let (p, _) = setup();
        let e = route(&p, UAS, 64, UAS).unwrap();
        assert_eq!((e.nexthop_id, e.port), (2, 2));
        assert_eq!(
            (e.src_mac, e.dst_mac),
            ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb])
        );
        // a /32 inside 198.18.2.0/24 wins over it
        p.small
            .update(|t| t.lpm_write(UAS, 32, Some(LpmAction::SetNexthop(3)), true))
            .unwrap();
        assert_eq!(route(&p, UAS, 64, UAS).unwrap().port, 3);
        assert_eq!(route(&p, UAS + 1, 64, UAS + 1).unwrap().port, 2);
    }

    #[test]
    fn it_routes_on_the_rewritten_destination() {
        let (p, _) = setup();
        // the packet was addressed to 10.0.0.1 (next hop 9, port 40); after a
        // relay rewrite it goes to UAS
        assert_eq!(route(&p, 0x0a00_0001, 64, UAS).unwrap().port, 2);
    }

    #[test]
    fn ipv6_routes_on_its_own_lpm_through_the_shared_next_hops() {
        let fwd6 = |p: &Pipeline, dst: u128| p.forwarding6(dst, 1, &mut Bridged::default());
        let (p, _) = setup();
        let net: u128 = 0x2001_0db8_0002 << 80;
        assert_eq!(fwd6(&p, net | 1), Err(DropReason::NoRoute));
        p.small
            .update(|t| {
                t.v6.lpm_write(net, 48, Some(LpmAction::SetNexthop(2)), true)?;
                t.v6.lpm_write(net | 9, 128, Some(LpmAction::SetNexthop(9)), true)?;
                t.v6.lpm_write(net | 7, 128, Some(LpmAction::SetNexthop(77)), true)
            })
            .unwrap();
        let e = fwd6(&p, net | 1).unwrap();
        assert_eq!(
            (e.nexthop_id, e.port, e.dst_mac),
            (2, 2, [2, 0, 0, 0, 0, 0xb])
        );
        assert_eq!(fwd6(&p, net | 9), Err(DropReason::NoSuchPort));
        assert_eq!(
            fwd6(&p, net | 7),
            Err(DropReason::NoRoute),
            "no next hop 77"
        );
        assert_eq!(fwd6(&p, 1), Err(DropReason::NoRoute));
    }

    #[test]
    fn no_route_a_drop_next_hop_expiry_and_unknown_ports_drop() {
        let (p, _) = setup();
        assert_eq!(
            route(&p, 0x0808_0808, 64, 0x0808_0808),
            Err(DropReason::NoRoute)
        );
        p.small
            .update(|t| {
                t.lpm_write(0x0808_0800, 24, Some(LpmAction::SetNexthop(77)), true)?;
                t.lpm_write(0x0909_0900, 24, Some(LpmAction::Drop), true)
            })
            .unwrap();
        // a next hop without an entry takes nexthop's default: drop
        assert_eq!(
            route(&p, 0x0808_0808, 64, 0x0808_0808),
            Err(DropReason::NoRoute)
        );
        assert_eq!(
            route(&p, 0x0909_0909, 64, 0x0909_0909),
            Err(DropReason::NoRoute)
        );
        // forward decrements the TTL: 1 expires here, 2 leaves with 1
        assert_eq!(route(&p, UAS, 1, UAS), Err(DropReason::TtlExpired));
        assert_eq!(route(&p, UAS, 0, UAS), Err(DropReason::TtlExpired));
        assert!(route(&p, UAS, 2, UAS).is_ok());
        // next hop 9 names port 40, which this switch does not have
        assert_eq!(
            route(&p, 0x0a00_0001, 64, 0x0a00_0001),
            Err(DropReason::NoSuchPort)
        );
    }
}
