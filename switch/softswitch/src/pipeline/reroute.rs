//! `Reroute` and `RerouteDetect` (switch/p4/controls/reroute.p4): congestion
//! detection after the queue, and the move to a pre-installed backup next hop
//! without a control-plane round trip.
//!
//! - `reroute` (ingress, beside ipv4_lpm): a watched destination's packet
//!   takes its backup next hop while `reroute_active[slot]` is 1; otherwise it
//!   is marked for detection (`Bridged::rr_detect`).
//! - `reroute_detect` (egress, as the packet leaves its queue): with the flow
//!   class's `t_q` and `m` (`reroute_class`), a departure whose queueing delay
//!   exceeds `t_q` stamps `reroute_port_hot[port]` and, for a marked packet,
//!   advances `reroute_run[slot]`; a clear one resets it. The m-th hot packet
//!   in a row queues a notice frame, as Tofino's egress mirror copy does, and
//!   the data plane feeds it to its own ingress from `RECIRC_PORT`
//!   (`Pipeline::take_notice`, the recirculation).
//! - `reroute_notice` (ingress): a LOCAL notice from the recirculation port
//!   moves a slot with a backup (`reroute_active` = 1, digest `MOVED`) or,
//!   without one, leaves as an UPSTREAM notice by the flow's ingress port
//!   (digest `NOTIFIED`); an UPSTREAM notice arriving by the watched route's
//!   primary port moves the receiver's slot. Everything else is dropped.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::TrySendError;

use super::{zeroed, Bridged, DropReason, Meta, Pipeline, Verdict};
use crate::packet::{self, rd16, rd32, ETHERTYPE_VLAN};
use crate::schema::Reg;
use crate::tables::small::{RerouteClassAction, RerouteWatchAction, SmallTables};

/// Pipe-local number of Tofino 1's recirculation port: notices from this
/// switch's own egress arrive here; no wire port has this number (< 64).
pub const RECIRC_PORT: u16 = 68;
/// `reroute_notice_h`: kind, flow_class, pad + port, slot, run, queue_delay_ns.
pub const NOTICE_LEN: usize = 12;
/// The kind of a notice made by this switch's egress (= the mirror header's
/// pkt_type on Tofino, PKT_TYPE_REROUTE_NOTICE).
pub const NOTICE_LOCAL: u8 = 3;
/// The kind of a notice sent to the switch the flow came from.
pub const NOTICE_UPSTREAM: u8 = 4;
/// `pipe.IngressDeparser.reroute` kinds.
pub const MOVED: u8 = 1;
pub const NOTIFIED: u8 = 2;
/// A notice copy is truncated to this (the mirror session's max_pkt_len).
pub const NOTICE_MAX_FRAME: usize = 128;
/// Notices waiting for their ingress pass; more are lost (counted), as
/// mirror copies are when the traffic manager has no room.
pub const NOTICE_QUEUE: usize = 1024;

/// `pipe.IngressDeparser.reroute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerouteDigest {
    pub dst_addr: u32,
    pub slot: u16,
    pub kind: u8,
    pub port: u16,
    pub queue_delay_ns: u32,
    pub run: u16,
    pub flow_class: u8,
}

/// Reroute event counters (exported as metrics).
#[derive(Debug, Default)]
pub struct RerouteStats {
    /// Notices made by detection (the m-th hot packet in a row).
    pub notices: AtomicU64,
    /// Notices lost because the recirculation queue was full.
    pub notices_lost: AtomicU64,
    /// Slots moved to their backup (digest kind MOVED).
    pub moves: AtomicU64,
    /// Notices sent upstream (digest kind NOTIFIED).
    pub upstream_sent: AtomicU64,
    /// Notices dropped without effect: unwatched destination, forged kind,
    /// wrong port, or the slot already on its backup.
    pub refused: AtomicU64,
    /// Reroute digests the control plane did not take in time.
    pub digests_lost: AtomicU64,
}

impl Pipeline {
    /// `reroute.apply` for a packet routed on `dst`: the backup next hop when
    /// the slot has moved; marks the packet for detection otherwise.
    #[inline]
    pub(super) fn reroute(
        &self,
        small: &SmallTables,
        dst: u32,
        ingress_port: u16,
        b: &mut Bridged,
    ) -> Option<u16> {
        b.rr_ingress_port = ingress_port;
        match small.reroute_watch_lookup(dst) {
            RerouteWatchAction::Backup {
                slot,
                flow_class,
                backup_nexthop_id,
                ..
            } => {
                b.rr_class = flow_class;
                b.rr_slot = slot;
                let active = self.reroute_regs.active.get(usize::from(slot))?;
                if active.load(Relaxed) == 0 {
                    b.rr_detect = true;
                    None
                } else {
                    Some(backup_nexthop_id)
                }
            }
            RerouteWatchAction::Notify { slot, flow_class } => {
                b.rr_class = flow_class;
                b.rr_slot = slot;
                b.rr_detect = true;
                None
            }
            RerouteWatchAction::NoAction => None,
        }
    }

    /// `reroute_detect.apply`: the packet of `b` leaves egress `port` after
    /// `queue_delay_ns` in its queue; `frame` is what leaves.
    #[inline]
    pub(super) fn reroute_detect(
        &self,
        b: &Bridged,
        port: u16,
        queue_delay_ns: u64,
        now_ms: u32,
        frame: &[u8],
    ) {
        let small = self.small.load();
        let RerouteClassAction::Thresholds { t_q_ns, m, .. } =
            small.reroute_class_lookup(b.rr_class)
        else {
            return;
        };
        let regs = &self.reroute_regs;
        let slot = usize::from(b.rr_slot);
        if queue_delay_ns > u64::from(t_q_ns) {
            if let Some(hot) = regs.port_hot.get(usize::from(port)) {
                hot.store(now_ms, Relaxed);
            }
            if b.rr_detect {
                let Some(cell) = regs.run.get(slot) else {
                    return;
                };
                let run = cell
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                        Some(r.saturating_add(1))
                    })
                    .unwrap_or(0)
                    .saturating_add(1);
                if run == m {
                    self.send_notice(b, run, queue_delay_ns, frame);
                }
            }
        } else if b.rr_detect {
            if let Some(cell) = regs.run.get(slot) {
                cell.store(0, Relaxed);
            }
        }
    }

    /// The notice copy and its egress pass: the departing frame's MACs, the
    /// notice, then its IPv4 header onward (a VLAN tag is left out),
    /// truncated to `NOTICE_MAX_FRAME`.
    fn send_notice(&self, b: &Bridged, run: u16, queue_delay_ns: u64, frame: &[u8]) {
        self.rr_stats.notices.fetch_add(1, Relaxed);
        if frame.len() < 14 {
            return;
        }
        let l3 = if rd16(frame, 12) == ETHERTYPE_VLAN {
            18
        } else {
            14
        };
        let ip = frame.get(l3..).unwrap_or(&[]);
        let mut n = Vec::with_capacity(NOTICE_MAX_FRAME);
        n.extend_from_slice(&frame[..12]);
        n.extend_from_slice(&self.notice_ethertype.to_be_bytes());
        n.push(NOTICE_LOCAL);
        n.push(b.rr_class);
        n.extend_from_slice(&(b.rr_ingress_port & 0x1ff).to_be_bytes());
        n.extend_from_slice(&b.rr_slot.to_be_bytes());
        n.extend_from_slice(&run.to_be_bytes());
        n.extend_from_slice(&(queue_delay_ns.min(u64::from(u32::MAX)) as u32).to_be_bytes());
        let room = NOTICE_MAX_FRAME - n.len();
        n.extend_from_slice(&ip[..ip.len().min(room)]);
        let mut q = self.notices.lock();
        if q.len() >= NOTICE_QUEUE {
            self.rr_stats.notices_lost.fetch_add(1, Relaxed);
        } else {
            q.push_back(n);
        }
    }

    /// The next notice waiting for its ingress pass (from `RECIRC_PORT`).
    pub fn take_notice(&self) -> Option<Vec<u8>> {
        self.notices.lock().pop_front()
    }

    /// Whether a frame is a congestion notice (`reroute_notice` handles it).
    #[inline]
    pub(super) fn is_notice(&self, frame: &[u8]) -> bool {
        frame.len() >= 14 && rd16(frame, 12) == self.notice_ethertype
    }

    /// Ingress of a congestion notice (the parser's notice state, then
    /// `Forwarding` with `reroute.apply`): see the module comment.
    pub(super) fn reroute_notice(&self, frame: &mut [u8], m: &Meta) -> Verdict {
        const N: usize = 14;
        const L3: usize = N + NOTICE_LEN;
        if frame.len() < L3 + 20 {
            return Verdict::Drop(DropReason::Truncated);
        }
        let ip = &frame[L3..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ip[0] >> 4 != 4 || ihl < 20 {
            return Verdict::Drop(DropReason::BadIpv4);
        }
        if ip.len() < ihl {
            return Verdict::Drop(DropReason::Truncated);
        }
        if packet::fold(packet::ones_sum(&ip[..ihl])) != 0xffff {
            return Verdict::Drop(DropReason::BadIpChecksum);
        }
        let dst = rd32(ip, 16);
        let n = &frame[N..L3];
        let (kind, flow_class) = (n[0], n[1]);
        let port = rd16(n, 2) & 0x1ff;
        let (run, queue_delay_ns) = (rd16(n, 6), rd32(n, 8));
        let small = self.small.load();
        let local = kind == NOTICE_LOCAL && m.ingress_port & 0x7f == RECIRC_PORT;
        let digest = |slot: u16, kind: u8| RerouteDigest {
            dst_addr: dst,
            slot,
            kind,
            port,
            queue_delay_ns,
            run,
            flow_class,
        };
        let mut upstream = false;
        match small.reroute_watch_lookup(dst) {
            RerouteWatchAction::Backup {
                slot, primary_port, ..
            } if local || (kind == NOTICE_UPSTREAM && m.ingress_port == primary_port) => {
                let old = self
                    .reroute_regs
                    .active
                    .get(usize::from(slot))
                    .map_or(1, |a| a.swap(1, Relaxed));
                if old == 0 {
                    self.rr_stats.moves.fetch_add(1, Relaxed);
                    self.reroute_digest(digest(slot, MOVED));
                } else {
                    self.rr_stats.refused.fetch_add(1, Relaxed);
                }
            }
            RerouteWatchAction::Notify { slot, .. } if local => {
                frame[N] = NOTICE_UPSTREAM;
                upstream = true;
                self.rr_stats.upstream_sent.fetch_add(1, Relaxed);
                self.reroute_digest(digest(slot, NOTIFIED));
            }
            _ => {
                self.rr_stats.refused.fetch_add(1, Relaxed);
            }
        }
        // ipv4_lpm's miss drops it too (its default action)
        if !matches!(
            small.lpm_lookup(dst),
            crate::tables::small::LpmAction::SetNexthop(_)
        ) {
            return Verdict::Drop(DropReason::NoRoute);
        }
        if !upstream {
            return Verdict::Drop(DropReason::RerouteNotice);
        }
        if !self.has_port(u32::from(port)) {
            return Verdict::Drop(DropReason::NoSuchPort);
        }
        Verdict::Forward(port)
    }

    fn reroute_digest(&self, d: RerouteDigest) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.reroute_digests.try_send(d)
        {
            self.rr_stats.digests_lost.fetch_add(1, Relaxed);
        }
    }
}

/// Congestion reroute state (`pipe.Ingress.reroute_active`,
/// `pipe.Egress.reroute_run` per slot; `pipe.Egress.reroute_port_hot` per
/// egress dev_port).
pub struct RerouteRegs {
    pub active: Vec<AtomicU8>,
    pub run: Vec<AtomicU16>,
    pub port_hot: Vec<AtomicU32>,
}

impl RerouteRegs {
    pub fn new(slots: usize, ports: usize) -> RerouteRegs {
        RerouteRegs {
            active: zeroed(slots),
            run: zeroed(slots),
            port_hot: zeroed(ports),
        }
    }

    pub fn read(&self, reg: Reg, i: usize) -> Option<u64> {
        Some(match reg {
            Reg::RerouteActive => self.active.get(i)?.load(Relaxed).into(),
            Reg::RerouteRun => self.run.get(i)?.load(Relaxed).into(),
            Reg::ReroutePortHot => self.port_hot.get(i)?.load(Relaxed).into(),
            _ => return None,
        })
    }

    /// Register write (truncated to the register width, as on Tofino).
    pub fn write(&self, reg: Reg, i: usize, v: u64) -> bool {
        match reg {
            Reg::RerouteActive => self.active.get(i).map(|c| c.store(v as u8, Relaxed)),
            Reg::RerouteRun => self.run.get(i).map(|c| c.store(v as u16, Relaxed)),
            Reg::ReroutePortHot => self.port_hot.get(i).map(|c| c.store(v as u32, Relaxed)),
            _ => None,
        }
        .is_some()
    }

    pub fn clear(&self) {
        self.active.iter().for_each(|c| c.store(0, Relaxed));
        self.run.iter().for_each(|c| c.store(0, Relaxed));
        self.port_hot.iter().for_each(|c| c.store(0, Relaxed));
    }
}
