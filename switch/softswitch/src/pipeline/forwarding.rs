//! `Forwarding` (switch/p4/controls/forwarding.p4): ipv4_lpm → nexthop.

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
