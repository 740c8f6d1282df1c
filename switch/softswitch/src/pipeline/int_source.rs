//! INT in Ingress (switch/p4/controls/int_source.p4, layout in
//! include/int_headers.p4): `int_check` is the ingress parser's INT states
//! with `IntCheck` (a marked packet whose stack is malformed is dropped and
//! counted in `int_malformed`), `int_watch` is `IntWatch` (the watch list,
//! after the relay rewrite), `int_source` is `IntSource` (the role of the
//! next hop from `int_role`, the flow's suppression slot, and the sink's
//! report copy).
//!
//! On the wire (INT-MD over UDP, INT spec v2.1), between the UDP header and
//! the UDP payload of a packet marked with DSCP `int_dscp`:
//! shim (4 B) | MD header (12 B) | hop x n (20 B each, newest first).
//! IPv4 packets without options and IPv6 packets (UDP right after the fixed
//! header; the traffic class's DSCP marks them) carry INT.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

use super::{forwarding, Bridged, IngressMeta, Pipeline};
use crate::contract::CONTRACT;
use crate::packet::ipv6::Parsed6;
use crate::packet::{self, rd16, rd32};
use crate::schema::IntReg;
use crate::tables::small::{IntRoleAction, IntWatchAction, IntWatchFields, PORTS};

pub const INT_TYPE_MD: u8 = 1;
pub const INT_VERSION: u8 = 2;
/// Words per hop (instruction bits 0-3 and 7: 20 bytes).
pub const INT_HOP_WORDS: u8 = 5;
pub const INT_INSTRUCTIONS: u16 = 0xF100;
/// p4relay's domain-specific fields (ds_instruction: the original UDP
/// checksum; ds_flags: congestion flags and path signature).
pub const INT_DS_ID: u16 = 0x7072;
pub const SHIM_BYTES: usize = 4;
pub const MD_BYTES: usize = 12;
pub const HOP_BYTES: usize = 20;
/// Shim + MD header + the source's own hop.
pub const SOURCE_BYTES: usize = SHIM_BYTES + MD_BYTES + HOP_BYTES;
/// ds_flags bit 15: a hop at/over its onset threshold.
pub const FLAG_ONSET: u16 = 0x8000;
/// ds_flags bit 14: a hop over its clear threshold.
pub const FLAG_OVER_CLEAR: u16 = 0x4000;
/// ds_flags bit 13 / 12: the second / first hop from the source was at/over
/// onset (the sink's reroute notice names that hop).
pub const FLAG_ONSET_HOP2: u16 = 0x2000;
pub const FLAG_ONSET_HOP1: u16 = 0x1000;
/// ds_flags bits 11..0: the path signature.
pub const SIG_MASK: u16 = 0x0FFF;
/// Report copies waiting for the report port's queue (more are dropped and counted).
const MAX_PENDING_COPIES: usize = 4096;

/// The contract's INT marker and bound.
pub fn int_dscp() -> u8 {
    CONTRACT.config.int_dscp
}

pub fn int_max_hops() -> u8 {
    CONTRACT.config.int_max_hops
}

/// The sink's report copy on its way to the collector's port
/// (`int_report_mirror_h`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntReportCopy {
    /// Suppression slot of the flow.
    pub flow_slot: u16,
    /// The MD header's flags and path signature.
    pub ds_flags: u16,
    /// The copied frame: L2 header + IPv4 total_len.
    pub frame_len: u16,
    /// The packet's ports at the sink (its own hop in the report).
    pub ingress_port: u16,
    pub egress_port: u16,
}

/// INT's registers (`int_malformed` here; `int_tx_bytes`, `int_hop_limit`
/// of int_transit.rs; the suppression state and `int_report_seq` of
/// int_sink.rs), and the report copies on their way to the report port.
#[derive(Debug)]
pub struct IntRegs {
    pub(super) malformed: AtomicU32,
    pub(super) tx_bytes: Vec<AtomicU32>,
    pub(super) hop_limit: AtomicU32,
    pub(super) flow_path: Vec<AtomicU16>,
    pub(super) flow_congested: Vec<AtomicU8>,
    pub(super) flow_reported: Vec<AtomicU32>,
    pub(super) report_seq: AtomicU32,
    /// The sink's own hop per egress port: its last departure's queue
    /// depth (cells) and time in the queue (ns), at TNA's widths.
    pub(super) sink_depth: Vec<AtomicU32>,
    pub(super) sink_latency: Vec<AtomicU32>,
    /// (report port, frame, bridged) of copies Ingress made.
    copies: parking_lot::Mutex<VecDeque<(u16, Vec<u8>, Bridged)>>,
    /// Some copy is waiting (the data plane looks every pass).
    copies_pending: AtomicBool,
    /// Copies dropped because the report port's queue fell behind.
    pub copies_dropped: AtomicU64,
    /// Reports sent, and report copies suppressed (int_sink.rs).
    pub reports_sent: AtomicU64,
    pub reports_suppressed: AtomicU64,
}

impl Default for IntRegs {
    fn default() -> Self {
        let slots = CONTRACT.config.int_flow_slots as usize;
        IntRegs {
            malformed: AtomicU32::new(0),
            tx_bytes: (0..PORTS).map(|_| AtomicU32::new(0)).collect(),
            hop_limit: AtomicU32::new(0),
            flow_path: (0..slots).map(|_| AtomicU16::new(0)).collect(),
            flow_congested: (0..slots).map(|_| AtomicU8::new(0)).collect(),
            flow_reported: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            report_seq: AtomicU32::new(0),
            sink_depth: (0..PORTS).map(|_| AtomicU32::new(0)).collect(),
            sink_latency: (0..PORTS).map(|_| AtomicU32::new(0)).collect(),
            copies: parking_lot::Mutex::new(VecDeque::new()),
            copies_pending: AtomicBool::new(false),
            copies_dropped: AtomicU64::new(0),
            reports_sent: AtomicU64::new(0),
            reports_suppressed: AtomicU64::new(0),
        }
    }
}

impl IntRegs {
    pub fn read(&self, reg: IntReg, i: usize) -> Option<u64> {
        Some(match reg {
            IntReg::Malformed => (i == 0).then(|| self.malformed.load(Relaxed))?.into(),
            IntReg::TxBytes => self.tx_bytes.get(i)?.load(Relaxed).into(),
            IntReg::HopLimit => (i == 0).then(|| self.hop_limit.load(Relaxed))?.into(),
            IntReg::FlowPath => self.flow_path.get(i)?.load(Relaxed).into(),
            IntReg::FlowCongested => self.flow_congested.get(i)?.load(Relaxed).into(),
            IntReg::FlowReported => self.flow_reported.get(i)?.load(Relaxed).into(),
            IntReg::ReportSeq => (i == 0).then(|| self.report_seq.load(Relaxed))?.into(),
            IntReg::SinkDepth => self.sink_depth.get(i)?.load(Relaxed).into(),
            IntReg::SinkLatency => self.sink_latency.get(i)?.load(Relaxed).into(),
        })
    }

    /// Register write (truncated to the register width, as on Tofino).
    pub fn write(&self, reg: IntReg, i: usize, v: u64) -> bool {
        let single = |r: &AtomicU32| {
            if i == 0 {
                r.store(v as u32, Relaxed);
            }
            i == 0
        };
        match reg {
            IntReg::Malformed => single(&self.malformed),
            IntReg::HopLimit => single(&self.hop_limit),
            IntReg::ReportSeq => single(&self.report_seq),
            IntReg::TxBytes => self
                .tx_bytes
                .get(i)
                .map(|r| r.store(v as u32, Relaxed))
                .is_some(),
            IntReg::SinkDepth => self
                .sink_depth
                .get(i)
                .map(|r| r.store(v as u32, Relaxed))
                .is_some(),
            IntReg::SinkLatency => self
                .sink_latency
                .get(i)
                .map(|r| r.store(v as u32, Relaxed))
                .is_some(),
            IntReg::FlowPath => self
                .flow_path
                .get(i)
                .map(|r| r.store(v as u16, Relaxed))
                .is_some(),
            IntReg::FlowCongested => self
                .flow_congested
                .get(i)
                .map(|r| r.store(v as u8, Relaxed))
                .is_some(),
            IntReg::FlowReported => self
                .flow_reported
                .get(i)
                .map(|r| r.store(v as u32, Relaxed))
                .is_some(),
        }
    }

    pub fn clear(&self) {
        self.malformed.store(0, Relaxed);
        self.hop_limit.store(0, Relaxed);
        self.report_seq.store(0, Relaxed);
        self.tx_bytes.iter().for_each(|r| r.store(0, Relaxed));
        self.sink_depth.iter().for_each(|r| r.store(0, Relaxed));
        self.sink_latency.iter().for_each(|r| r.store(0, Relaxed));
        self.flow_path.iter().for_each(|r| r.store(0, Relaxed));
        self.flow_congested.iter().for_each(|r| r.store(0, Relaxed));
        self.flow_reported.iter().for_each(|r| r.store(0, Relaxed));
        self.copies.lock().clear();
    }
}

/// Where a packet's INT stack is (the ingress parser's INT states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntStack {
    /// Offset of the shim in the frame.
    pub shim: usize,
    /// Hops on the stack (1..=int_max_hops).
    pub hops: u8,
    /// The MD header's ds_flags (congestion flags, path signature).
    pub ds_flags: u16,
    /// The hop the onset bits mark (switch id, egress port), as the P4
    /// program's egress parser reads it at the sink: the second hop from
    /// the source when its bit is set, else the first; None: no hop marked.
    pub onset_hop: Option<(u32, u16)>,
}

/// The hop `ds_flags` marks at/over onset on a stack of `hops` hops (newest
/// first) starting at `first_hop` in `frame`.
fn onset_hop(frame: &[u8], first_hop: usize, hops: usize, ds_flags: u16) -> Option<(u32, u16)> {
    // place from the source (1: the source's hop) -> index on the stack
    let place = if hops == 2 && ds_flags & FLAG_ONSET_HOP2 != 0 {
        2
    } else if ds_flags & FLAG_ONSET_HOP1 != 0 {
        1
    } else {
        return None;
    };
    let at = first_hop + (hops - place) * HOP_BYTES;
    (at + 8 <= frame.len()).then(|| (rd32(frame, at), rd16(frame, at + 6)))
}

/// CRC-16/UMTS (poly 0x8005, no reflection, init 0, no final xor): the
/// P4 program's `slot_hash`.
pub fn crc16_umts(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x8005
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The flow's suppression slot: CRC-16/UMTS of src, dst, sport, dport
/// (big-endian), modulo the slots.
pub fn flow_slot(src: u32, dst: u32, sport: u16, dport: u16) -> u16 {
    let mut k = [0u8; 12];
    k[0..4].copy_from_slice(&src.to_be_bytes());
    k[4..8].copy_from_slice(&dst.to_be_bytes());
    k[8..10].copy_from_slice(&sport.to_be_bytes());
    k[10..12].copy_from_slice(&dport.to_be_bytes());
    crc16_umts(&k) & (CONTRACT.config.int_flow_slots as u16 - 1)
}

/// The same CRC over an IPv6 flow's addresses (`slot_hash6`).
pub fn flow_slot6(src: u128, dst: u128, sport: u16, dport: u16) -> u16 {
    let mut k = [0u8; 36];
    k[0..16].copy_from_slice(&src.to_be_bytes());
    k[16..32].copy_from_slice(&dst.to_be_bytes());
    k[32..34].copy_from_slice(&sport.to_be_bytes());
    k[34..36].copy_from_slice(&dport.to_be_bytes());
    crc16_umts(&k) & (CONTRACT.config.int_flow_slots as u16 - 1)
}

/// What `IntSource` reads of a packet of either family: its UDP header,
/// whether INT may go in (IPv4 without options, or IPv6), the flow's
/// addresses (its suppression slot) and where the IP packet ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct IntPkt {
    pub udp: Option<usize>,
    pub carries_int: bool,
    pub addrs: IntAddrs,
    pub l3: usize,
    pub end: usize,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum IntAddrs {
    V4(u32, u32),
    V6(u128, u128),
}

impl IntPkt {
    pub fn v4(p: &packet::Parsed) -> IntPkt {
        IntPkt {
            udp: p.udp.map(|u| u.off),
            carries_int: p.ihl == 20,
            addrs: IntAddrs::V4(p.src, p.dst),
            l3: p.l3,
            end: p.l3 + p.total_len,
        }
    }

    pub fn v6(p: &Parsed6) -> IntPkt {
        IntPkt {
            udp: p.udp.map(|u| u.off),
            carries_int: true,
            addrs: IntAddrs::V6(p.src, p.dst),
            l3: p.l3,
            end: p.end(),
        }
    }

    fn is_v6(&self) -> bool {
        matches!(self.addrs, IntAddrs::V6(..))
    }

    /// The DSCP (IPv4's DS byte, IPv6's traffic class: its upper six bits).
    fn dscp(&self, frame: &[u8]) -> u8 {
        if self.is_v6() {
            (((frame[self.l3] & 0x0f) << 4) | (frame[self.l3 + 1] >> 4)) >> 2
        } else {
            frame[self.l3 + 1] >> 2
        }
    }
}

impl Pipeline {
    /// The ingress parser's INT states and `IntCheck`: `Ok(None)` for a
    /// packet without INT; `Err(())` for a marked packet whose stack is
    /// malformed (counted in `int_malformed`; Ingress drops it). Checked:
    /// type INT-MD, NPT 0, version 2, 5-word hops, our instructions, shim
    /// length and remaining hop count agreeing on 1..=int_max_hops hops, and
    /// UDP and IPv4 long enough for the whole stack.
    #[inline]
    pub(super) fn int_check(&self, frame: &[u8], p: &IntPkt) -> Result<Option<IntStack>, ()> {
        let Some(u) = p.udp else {
            return Ok(None);
        };
        if !p.carries_int || p.dscp(frame) != int_dscp() {
            return Ok(None);
        }
        let r = parse_stack(frame, p.end, u);
        if r.is_err() {
            self.int.malformed.fetch_add(1, Relaxed);
        }
        r.map(Some)
    }

    /// `IntWatch`: whether this UDP packet without INT is on the watch list
    /// (keys after the relay rewrite).
    #[inline]
    pub(super) fn int_watch(&self, frame: &[u8], p: &packet::Parsed, md: &IngressMeta) -> bool {
        let small = self.small.load();
        if small.int_watch.is_empty() && small.int_watch_default == IntWatchAction::NoAction {
            return false;
        }
        let Some(u) = p.udp else {
            return false;
        };
        let f = IntWatchFields {
            relay: md.relay_hit,
            leg: if md.relay_hit { md.leg } else { 0 },
            src: rd32(frame, p.l3 + 12),
            dst: rd32(frame, p.l3 + 16),
            dport: rd16(frame, u.off + 2),
        };
        small.int_watch_lookup(&f) == IntWatchAction::WatchFlow
    }

    /// `int_watch6`: an IPv6 UDP packet's destination (after the relay
    /// rewrite) in a traced prefix.
    #[inline]
    pub(super) fn int_watch6(&self, p: &Parsed6, dst: u128) -> bool {
        p.udp.is_some() && self.small.load().int_watch6_lookup(dst) == IntWatchAction::WatchFlow
    }

    /// `IntSource` after Forwarding chose `out` (int_role's key is its next
    /// hop; the report copy names its port): the roles Egress
    /// applies (in `b`), and for an INT packet leaving by a sink port the
    /// report copy's mirror header (the caller makes the copy after the
    /// deparser, marking the shim as the P4 program does).
    /// `ports`: the flow's UDP ports (INT packets are not relayed: as they
    /// arrived).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn int_source(
        &self,
        p: &IntPkt,
        ports: (u16, u16),
        ingress_port: u16,
        stack: Option<IntStack>,
        watched: bool,
        out: &forwarding::Egress,
        b: &mut Bridged,
    ) -> Option<IntReportCopy> {
        let u = p.udp?;
        let small = self.small.load();
        if small.int_role.is_empty() && small.int_role_default == IntRoleAction::NoAction {
            return None;
        }
        // hop_ingress_port
        b.int_ingress_port = ingress_port;
        b.int_v6 = p.is_v6();
        match small.int_role_lookup(out.nexthop_id) {
            IntRoleAction::Transit => b.int_transit = true,
            IntRoleAction::Sink => b.int_sink = true,
            IntRoleAction::NoAction => {}
        }
        // IPv4 without options, or IPv6, carries INT (the source inserts it).
        if watched && b.int_transit && p.carries_int {
            b.int_source = true;
            b.int_shim = (u + 8) as u16;
        }
        let s = stack?;
        b.int_shim = s.shim as u16;
        b.int_hops = s.hops;
        b.int_ds_flags = s.ds_flags;
        b.int_onset_hop = s.onset_hop;
        if !b.int_sink {
            return None;
        }
        // INT packets are not relayed: the flow's 4-tuple is as it arrived
        let (sport, dport) = ports;
        let flow_slot = match p.addrs {
            IntAddrs::V4(src, dst) => flow_slot(src, dst, sport, dport),
            IntAddrs::V6(src, dst) => flow_slot6(src, dst, sport, dport),
        };
        Some(IntReportCopy {
            flow_slot,
            ds_flags: s.ds_flags,
            // the L2 header and the IP packet
            frame_len: p.end as u16,
            ingress_port,
            egress_port: out.port,
        })
    }

    /// The sink's report copy of the deparsed `frame` (I2E mirror, session
    /// to the report port: the lowest port with an `int_report` entry; none:
    /// no copy). The copy's shim is marked (rsvd = 1) as Ingress marks it on
    /// Tofino.
    pub(super) fn int_report_copy(&self, frame: &[u8], shim: usize, r: IntReportCopy) {
        let Some(port) = self.small.load().int_report_port() else {
            return;
        };
        let mut q = self.int.copies.lock();
        if q.len() >= MAX_PENDING_COPIES {
            self.int.copies_dropped.fetch_add(1, Relaxed);
            return;
        }
        let mut copy = frame.to_vec();
        copy[shim] = (copy[shim] & !0x03) | 1;
        let b = Bridged {
            int_report: Some(r),
            ..Bridged::default()
        };
        q.push_back((port, copy, b));
        self.int.copies_pending.store(true, Relaxed);
    }

    /// The next report copy for the data plane to queue on its port.
    #[inline]
    pub fn take_int_copy(&self) -> Option<(u16, Vec<u8>, Bridged)> {
        if !self.int.copies_pending.load(Relaxed) {
            return None;
        }
        let mut q = self.int.copies.lock();
        let c = q.pop_front();
        if q.is_empty() {
            self.int.copies_pending.store(false, Relaxed);
        }
        c
    }
}

/// Parses and checks the INT stack behind the UDP header at `udp`.
fn parse_stack(frame: &[u8], end: usize, udp: usize) -> Result<IntStack, ()> {
    let udp_len = usize::from(rd16(frame, udp + 4));
    let shim = udp + 8;
    // < 32: no room for shim + MD header (as the P4 parser's mask)
    if udp_len < 32 || end < shim + SHIM_BYTES + MD_BYTES {
        return Err(());
    }
    let (ty, npt, len) = (frame[shim] >> 4, (frame[shim] >> 2) & 3, frame[shim + 1]);
    let md = shim + SHIM_BYTES;
    let ver = frame[md] >> 4;
    let hop_ml = frame[md + 2] & 0x1f;
    let remaining = frame[md + 3];
    let bitmap = rd16(frame, md + 4);
    if ty != INT_TYPE_MD
        || npt != 0
        || ver != INT_VERSION
        || hop_ml != INT_HOP_WORDS
        || bitmap != INT_INSTRUCTIONS
    {
        return Err(());
    }
    let max = int_max_hops();
    // shim.len = 4 + 5h words, remaining = max - h, h in 1..=max
    let words = usize::from(len);
    if words < 4 + usize::from(INT_HOP_WORDS) || (words - 4) % usize::from(INT_HOP_WORDS) != 0 {
        return Err(());
    }
    let hops = (words - 4) / usize::from(INT_HOP_WORDS);
    if hops == 0 || hops > usize::from(max) || usize::from(remaining) != usize::from(max) - hops {
        return Err(());
    }
    let stack = words * 4;
    if udp_len < 8 + stack || end < shim + stack || end - udp < udp_len {
        return Err(());
    }
    let ds_flags = rd16(frame, md + 10);
    Ok(IntStack {
        shim,
        hops: hops as u8,
        ds_flags,
        onset_hop: onset_hop(frame, md + MD_BYTES, hops, ds_flags),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_umts_check_value() {
        // The catalogue's check value of CRC-16/UMTS.
        assert_eq!(crc16_umts(b"123456789"), 0xFEE8);
    }

    #[test]
    fn slots_stay_in_range() {
        for i in 0..1000u32 {
            let s = flow_slot(i, !i, i as u16, (i * 7) as u16);
            assert!(u32::from(s) < CONTRACT.config.int_flow_slots);
        }
    }
}
