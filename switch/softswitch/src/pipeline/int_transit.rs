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
use crate::packet::{ipv4_checksum, rd16, wr16, wr32};
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
        if !b.int_source && e.buf[md + 3] == 0 {
            // hop_limit: the E bit, no hop
            e.buf[md] |= 0x04;
            self.int.hop_limit.fetch_add(1, Relaxed);
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
        let l3 = shim - 28;
        let udp = shim - 8;
        // room for what this hop adds, right after the MD header (the
        // source: after the UDP header)
        let at = if b.int_source { shim } else { md + MD_BYTES };
        e.buf.copy_within(at..e.len, at + added);
        e.len += added;
        let mut flags;
        if b.int_source {
            // source_hop: shim, MD header, then the hop
            let dscp = e.buf[l3 + 1] >> 2;
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
            wr16(e.buf, udp + 6, 0);
            e.buf[l3 + 1] = (int_dscp() << 2) | (e.buf[l3 + 1] & 0x03);
        } else {
            // transit_hop: the stack grows by one hop
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
        let total = rd16(e.buf, l3 + 2) + added as u16;
        wr16(e.buf, l3 + 2, total);
        let c = ipv4_checksum(&e.buf[l3..l3 + 20]);
        wr16(e.buf, l3 + 10, c);
    }
}
