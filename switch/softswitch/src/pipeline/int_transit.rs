//! INT in Egress, source and transit (switch/p4/controls/int_transit.p4):
//! `int_transit` is `IntTransit`, run as the packet leaves its port's FIFO,
//! so the hop carries the real queue: the cells still queued behind it
//! (deq_qdepth) and the time it spent in the queue (hop latency,
//! deq_timedelta). A packet Ingress marked, leaving by a port with an
//! `int_hop_config` entry:
//!  - source (watched, no INT yet): insert the shim and the MD header; the
//!    shim keeps the DSCP, ds_instruction the UDP checksum (which becomes 0),
//!    the DSCP becomes `int_dscp`; then this hop as transit;
//!  - transit: push this hop right after the MD header (newest first),
//!    lengths grow by 20; with no hop left (remaining_hop_cnt 0) set the E
//!    bit instead and count `int_hop_limit`.
//!
//! The hop ORs its threshold verdicts into ds_flags (onset: depth >=
//! onset_cells or latency >= onset_ns, with the bit of its place from the
//! source; over clear: depth > clear_cells or latency > clear_ns) and XORs
//! its path word (switch id, low 12 bits) into the path signature. `int_tx_bytes` counts every byte a port sends.

use std::sync::atomic::Ordering::Relaxed;

use super::int_source::{
    int_dscp, int_max_hops, FLAG_ONSET, FLAG_ONSET_HOP1, FLAG_ONSET_HOP2, FLAG_OVER_CLEAR,
    HOP_BYTES, INT_DS_ID, INT_HOP_WORDS, INT_INSTRUCTIONS, INT_TYPE_MD, INT_VERSION, MD_BYTES,
    SHIM_BYTES, SIG_MASK, SOURCE_BYTES,
};
use super::{Bridged, EgressPass, Pipeline};
use crate::packet::ipv6::HDR_LEN as IPV6_HDR_LEN;
use crate::packet::{fold, ipv4_checksum, ones_sum, rd16, wr16, wr32};
use crate::tables::small::QUEUE_DEPTH_MAX;

impl Pipeline {
    /// Whether a port adds an INT hop (the XDP fast path leaves such ports
    /// to user space, where the hop is written).
    pub fn int_hop_on(&self, port: u32) -> bool {
        u16::try_from(port).is_ok_and(|p| self.small.load().int_hop_lookup(p).is_some())
    }

    /// `IntTransit.apply` for the packet of `b` leaving `port`.
    #[inline]
    pub(super) fn int_transit(&self, port: u16, b: &Bridged, e: &mut EgressPass<'_>) {
        // count_tx: every packet through this control, as it entered
        let tx_total = self.int.tx_bytes.get(usize::from(port)).map_or(0, |r| {
            r.fetch_add(e.len as u32, Relaxed)
                .wrapping_add(e.len as u32)
        });
        if !b.int_transit || !(b.int_source || b.int_hops > 0) {
            return;
        }
        let Some(h) = self.small.load().int_hop_lookup(port) else {
            return;
        };
        let shim = usize::from(b.int_shim);
        let md = shim + SHIM_BYTES;
        let udp = shim - 8;
        let l3 = udp - if b.int_v6 { IPV6_HDR_LEN } else { 20 };
        // IPv6 (udp6_update): what this hop rewrites, as the egress parser
        // found it: the payload length (the pseudo-header's UDP length),
        // the UDP length and, at a transit, the shim and MD header
        let stack_was = if b.int_source {
            0
        } else {
            SHIM_BYTES + MD_BYTES
        };
        let mut was = [0u8; 4 + SHIM_BYTES + MD_BYTES];
        if b.int_v6 {
            was[..2].copy_from_slice(&e.buf[l3 + 4..l3 + 6]);
        }
        was[2..4].copy_from_slice(&e.buf[udp + 4..udp + 6]);
        was[4..4 + stack_was].copy_from_slice(&e.buf[shim..shim + stack_was]);
        let was = &was[..4 + stack_was];
        if !b.int_source && e.buf[md + 3] == 0 {
            // hop_limit: the E bit, no hop
            e.buf[md] |= 0x04;
            self.int.hop_limit.fetch_add(1, Relaxed);
            if b.int_v6 {
                udp6_update(e.buf, l3, udp, was, false);
            }
            return;
        }
        let added = if b.int_source {
            SOURCE_BYTES
        } else {
            HOP_BYTES
        };
        if e.len + added > e.buf.len() {
            return;
        }
        let deq = e.deq_cells.min(QUEUE_DEPTH_MAX);
        let latency = e.queue_delay_ns.min(u64::from(u32::MAX)) as u32;
        let word = (h.switch_id & u32::from(SIG_MASK)) as u16;
        // room for what this hop adds, right after the MD header (the
        // source: after the UDP header)
        let at = if b.int_source { shim } else { md + MD_BYTES };
        e.buf.copy_within(at..e.len, at + added);
        e.len += added;
        let mut flags;
        if b.int_source {
            // source_hop (source_hop6): shim, MD header, then the hop
            let dscp = if b.int_v6 {
                traffic_class(e.buf, l3) >> 2
            } else {
                e.buf[l3 + 1] >> 2
            };
            e.buf[shim] = INT_TYPE_MD << 4;
            e.buf[shim + 1] = 4 + INT_HOP_WORDS;
            e.buf[shim + 2] = 0;
            e.buf[shim + 3] = dscp << 2;
            e.buf[md] = INT_VERSION << 4;
            e.buf[md + 1] = 0;
            e.buf[md + 2] = INT_HOP_WORDS;
            e.buf[md + 3] = int_max_hops() - 1;
            wr16(e.buf, md + 4, INT_INSTRUCTIONS);
            wr16(e.buf, md + 6, INT_DS_ID);
            let csum = rd16(e.buf, udp + 6);
            wr16(e.buf, md + 8, csum);
            flags = word;
            if b.int_v6 {
                // IPv6: the checksum stays (udp6_update folds this in)
                let tc = traffic_class(e.buf, l3);
                set_traffic_class(e.buf, l3, (int_dscp() << 2) | (tc & 0x03));
            } else {
                wr16(e.buf, udp + 6, 0);
                e.buf[l3 + 1] = (int_dscp() << 2) | (e.buf[l3 + 1] & 0x03);
            }
        } else {
            // transit_hop (transit_hop6): the stack grows by one hop
            e.buf[shim + 1] += INT_HOP_WORDS;
            e.buf[md + 3] -= 1;
            flags = rd16(e.buf, md + 10) ^ word;
        }
        let hop = md + MD_BYTES;
        wr32(e.buf, hop, h.switch_id);
        wr16(e.buf, hop + 4, b.int_ingress_port);
        wr16(e.buf, hop + 6, port);
        wr32(e.buf, hop + 8, latency);
        // queue id 0 (one queue per port), occupancy 24 bits
        wr32(e.buf, hop + 12, deq);
        wr32(e.buf, hop + 16, tx_total);
        // one comparison per condition, as the P4 program's saturating ones
        if deq >= h.onset_cells || latency >= h.onset_ns {
            // with this hop's place from the source (int_max_hops 2)
            let place = if b.int_source {
                FLAG_ONSET_HOP1
            } else {
                FLAG_ONSET_HOP2
            };
            flags |= FLAG_ONSET | place;
        }
        if deq > h.clear_cells || latency > h.clear_ns {
            flags |= FLAG_OVER_CLEAR;
        }
        wr16(e.buf, md + 10, flags);
        let udp_len = rd16(e.buf, udp + 4) + added as u16;
        wr16(e.buf, udp + 4, udp_len);
        if b.int_v6 {
            let plen = rd16(e.buf, l3 + 4) + added as u16;
            wr16(e.buf, l3 + 4, plen);
            udp6_update(e.buf, l3, udp, was, true);
        } else {
            let total = rd16(e.buf, l3 + 2) + added as u16;
            wr16(e.buf, l3 + 2, total);
            let c = ipv4_checksum(&e.buf[l3..l3 + 20]);
            wr16(e.buf, l3 + 10, c);
        }
    }
}

/// An IPv6 header's traffic class (it straddles bytes 0 and 1).
pub(super) fn traffic_class(buf: &[u8], l3: usize) -> u8 {
    ((buf[l3] & 0x0f) << 4) | (buf[l3 + 1] >> 4)
}

pub(super) fn set_traffic_class(buf: &mut [u8], l3: usize, tc: u8) {
    buf[l3] = (buf[l3] & 0xf0) | (tc >> 4);
    buf[l3 + 1] = (buf[l3 + 1] & 0x0f) | (tc << 4);
}

/// EgressDeparser's `udp6_checksum` after an IPv6 INT hop: the datagram's
/// sum (the checksum's complement) without what the hop rewrote (`was`:
/// the payload length, the UDP length and, at a transit, the shim and MD
/// header as they came: the egress parser's `udp6_residual`), plus their
/// new values and the hop it pushed (`pushed`; none at the hop limit). A
/// zero result goes out as 0xffff (RFC 8200 8.1).
fn udp6_update(buf: &mut [u8], l3: usize, udp: usize, was: &[u8], pushed: bool) {
    let shim = udp + 8;
    // now: payload length, UDP length, shim, MD header and the hop pushed
    let stack = SHIM_BYTES + MD_BYTES + if pushed { HOP_BYTES } else { 0 };
    let now = ones_sum(&buf[l3 + 4..l3 + 6])
        + ones_sum(&buf[udp + 4..udp + 6])
        + ones_sum(&buf[shim..shim + stack]);
    let gone = (was.len() / 2) as u32 * 0xffff - ones_sum(was);
    let old = !rd16(buf, udp + 6);
    let c = !fold(u32::from(old) + gone + now);
    wr16(buf, udp + 6, if c == 0 { 0xffff } else { c });
}
