//! INT in Egress, sink (switch/p4/controls/int_sink.p4): `int_sink` is
//! `IntSink`, run as the packet leaves its port's FIFO.
//!
//! strip (a packet Ingress sent to a sink port): the shim, MD header and hop
//! stack go, the DSCP and the UDP checksum come back from them, UDP and
//! IPv4 (IPv6 payload) lengths shrink, the IPv4 header checksum is
//! recomputed: the datagram is the one the source received, with this
//! path's TTL (hop limit) and MACs.
//!
//! report (the copy `int_source` made, leaving by the report port):
//! suppression per flow slot, the same registers as the P4 program's:
//!   int_flow_path       last path signature; a different one: report
//!   int_flow_congested  0/1 with hysteresis: a hop at/over onset sets it
//!                       (report), no hop over clear clears it (report), in
//!                       between it stays
//!   int_flow_reported   last report time (ms); `int_report_interval_ms`
//!                       after it: report
//! No reason: the copy is consumed. Else it leaves as a Telemetry Report
//! v2.0 (`int_report` gives the addresses; seq_no from `int_report_seq`)
//! with the copied frame, INT stack included, as payload.
//!
//! the sink's own hop: every packet the sink strips records its departure
//! per egress port (`int_sink_depth`, `int_sink_latency`); the report copy
//! reads them by the egress port the copy names and carries them with the
//! ports as the individual report's metadata (rep_md_bits 0-2, md_len 3),
//! when the sink port is in the report port's pipe (Tofino's registers are
//! per pipe).

use std::sync::atomic::Ordering::Relaxed;

use super::int_source::{
    IntReportCopy, FLAG_ONSET, FLAG_OVER_CLEAR, HOP_BYTES, INT_DS_ID, SHIM_BYTES, SIG_MASK,
    SOURCE_BYTES,
};
use super::int_transit::{set_traffic_class, traffic_class};
use super::{Bridged, EgressPass, EgressVerdict, Pipeline};
use crate::contract::CONTRACT;
use crate::packet::ipv6::HDR_LEN as IPV6_HDR_LEN;
use crate::packet::{ipv4_checksum, rd16, wr16, wr32, ETHERTYPE_IPV4, IPPROTO_UDP};

/// Ethernet 14 + IPv4 20 + UDP 8 + report group header 8 + individual
/// report header 12.
pub const REPORT_HEADER_BYTES: usize = 62;
/// The sink's hop as report metadata: ports 4, hop latency 4, queue 4.
pub const SINK_MD_BYTES: usize = 12;
/// rep_md_bits of the sink's hop: level-1 ports, hop latency, queue.
pub const SINK_MD_BITS: u16 = 0xE000;

/// Dev ports of one Tofino pipe: the pipe is the port's bits 8..7.
fn pipe_of(port: u16) -> u16 {
    port >> 7
}

impl Pipeline {
    /// `IntSink.apply` for a sink packet: strip and restore.
    #[inline]
    pub(super) fn int_strip(&self, port: u16, b: &Bridged, e: &mut EgressPass<'_>) {
        if b.int_hops == 0 {
            return;
        }
        // the sink's hop, for the reports (depth and delay at TNA's widths)
        let i = usize::from(port);
        if let (Some(d), Some(l)) = (self.int.sink_depth.get(i), self.int.sink_latency.get(i)) {
            d.store(e.deq_cells, Relaxed);
            l.store(e.queue_delay_ns.min(u64::from(u32::MAX)) as u32, Relaxed);
        }
        let shim = usize::from(b.int_shim);
        let md = shim + SHIM_BYTES;
        let udp = shim - 8;
        let l3 = udp - if b.int_v6 { IPV6_HDR_LEN } else { 20 };
        // the ingress parser admitted 1 or 2 hops (remaining 1: one hop)
        let strip = if e.buf[md + 3] == 1 {
            SOURCE_BYTES
        } else {
            SOURCE_BYTES + HOP_BYTES
        };
        if shim + strip > e.len {
            return;
        }
        let dscp = e.buf[shim + 3] >> 2;
        // the checksum the source found: over IPv6 the datagram's own (no
        // hop rewrites what it covers)
        let csum = rd16(e.buf, md + 8);
        wr16(e.buf, udp + 6, csum);
        e.buf.copy_within(shim + strip..e.len, shim);
        e.len -= strip;
        let udp_len = rd16(e.buf, udp + 4) - strip as u16;
        wr16(e.buf, udp + 4, udp_len);
        if b.int_v6 {
            // restore6: IPv6's DSCP and payload length
            let tc = traffic_class(e.buf, l3);
            set_traffic_class(e.buf, l3, (dscp << 2) | (tc & 0x03));
            let plen = rd16(e.buf, l3 + 4) - strip as u16;
            wr16(e.buf, l3 + 4, plen);
        } else {
            // strip's DSCP and restore_lengths' total length
            e.buf[l3 + 1] = (dscp << 2) | (e.buf[l3 + 1] & 0x03);
            let total = rd16(e.buf, l3 + 2) - strip as u16;
            wr16(e.buf, l3 + 2, total);
            let c = ipv4_checksum(&e.buf[l3..l3 + 20]);
            wr16(e.buf, l3 + 10, c);
        }
    }

    /// `IntSink.apply` for a report copy leaving by `port` at `now_ms`:
    /// suppressed (consumed), or wrapped into a telemetry report.
    pub(super) fn int_report(
        &self,
        port: u16,
        r: &IntReportCopy,
        e: &mut EgressPass<'_>,
        now_ms: u32,
    ) -> EgressVerdict {
        let regs = &self.int;
        let slot = usize::from(r.flow_slot) % regs.flow_path.len();
        let sig = r.ds_flags & SIG_MASK;
        // 1 onset, 0 clear, 2 keep
        let want: u8 = if r.ds_flags & FLAG_ONSET != 0 {
            1
        } else if r.ds_flags & FLAG_OVER_CLEAR == 0 {
            0
        } else {
            2
        };
        let path_changed = regs.flow_path[slot].swap(sig, Relaxed) != sig;
        let cong = &regs.flow_congested[slot];
        let cong_changed = want != 2 && cong.swap(want, Relaxed) != want;
        let last = &regs.flow_reported[slot];
        let interval_due =
            now_ms.wrapping_sub(last.load(Relaxed)) >= CONTRACT.config.int_report_interval_ms;
        if interval_due {
            last.store(now_ms, Relaxed);
        }
        if !interval_due && !path_changed && !cong_changed {
            regs.reports_suppressed.fetch_add(1, Relaxed);
            return EgressVerdict::Consume;
        }
        let seq = regs.report_seq.fetch_add(1, Relaxed);
        let Some(enc) = self.small.load().int_report_lookup(port) else {
            // no collector on this port
            regs.reports_suppressed.fetch_add(1, Relaxed);
            return EgressVerdict::Consume;
        };
        let frame_len = usize::from(r.frame_len);
        let sink = usize::from(r.egress_port);
        let md = if pipe_of(r.egress_port) == pipe_of(port) {
            regs.sink_depth.get(sink).zip(regs.sink_latency.get(sink))
        } else {
            None
        };
        let md_bytes = if md.is_some() { SINK_MD_BYTES } else { 0 };
        let head = REPORT_HEADER_BYTES + md_bytes;
        if e.len + head > e.buf.len() {
            return EgressVerdict::Consume;
        }
        e.buf.copy_within(0..e.len, head);
        e.len += head;
        let h = &mut e.buf[..head];
        h[0..6].copy_from_slice(&enc.dst_mac);
        h[6..12].copy_from_slice(&enc.src_mac);
        wr16(h, 12, ETHERTYPE_IPV4);
        let ip = 14;
        h[ip] = 0x45;
        h[ip + 1] = 0;
        wr16(h, ip + 2, (frame_len + 48 + md_bytes) as u16);
        wr16(h, ip + 4, 0);
        wr16(h, ip + 6, 0x4000); // DF
        h[ip + 8] = 64;
        h[ip + 9] = IPPROTO_UDP;
        wr16(h, ip + 10, 0);
        wr32(h, ip + 12, enc.src_addr);
        wr32(h, ip + 16, enc.dst_addr);
        let c = ipv4_checksum(&h[ip..ip + 20]);
        wr16(h, ip + 10, c);
        let udp = ip + 20;
        wr16(h, udp, enc.dst_port);
        wr16(h, udp + 2, enc.dst_port);
        wr16(h, udp + 4, (frame_len + 28 + md_bytes) as u16);
        wr16(h, udp + 6, 0);
        // group header: ver 2, hw_id 0, seq_no (22 bits), node id
        let g = udp + 8;
        wr32(h, g, (2 << 28) | (seq & 0x3F_FFFF));
        wr32(h, g + 4, enc.switch_id);
        // individual report: rep_type 1 (INT), in_type 3 (Ethernet),
        // rep_len (words after the group header), md_len (the sink's hop:
        // 3, or 0), flags f and i
        let ind = g + 8;
        h[ind] = (1 << 4) | 3;
        h[ind + 1] = ((frame_len + 15 + md_bytes) >> 2) as u8;
        h[ind + 2] = (md_bytes / 4) as u8;
        h[ind + 3] = 0b0011_0000;
        wr16(h, ind + 4, if md.is_some() { SINK_MD_BITS } else { 0 });
        wr16(h, ind + 6, INT_DS_ID);
        wr16(h, ind + 8, 0);
        wr16(h, ind + 10, 0);
        if let Some((depth, latency)) = md {
            // ports, hop latency, queue id 0 + occupancy (24 bits)
            let m = ind + 12;
            wr16(h, m, r.ingress_port);
            wr16(h, m + 2, r.egress_port);
            wr32(h, m + 4, latency.load(Relaxed));
            wr32(h, m + 8, depth.load(Relaxed) & 0xFF_FFFF);
        }
        regs.reports_sent.fetch_add(1, Relaxed);
        EgressVerdict::Send
    }
}
