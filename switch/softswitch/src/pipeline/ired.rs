//! iRED (switch/p4/controls/ired.p4): `ired` is the `Ired` control (Egress,
//! the drop decision, when a packet leaves its port's FIFO), `ired_feedback`
//! is `IredDrop`'s handling of the recirculated feedback copy (sets the
//! port's drop flag in an Ingress register) and `ired_drop` is `IredDrop` for
//! a routed packet (the drop). The same two steps as on Tofino: a decision
//! never drops the deciding packet; it sends a feedback copy (here: onto the
//! recirculation queue that Ingress takes after the egress pass), and the
//! next eligible packet routed to that port is dropped in Ingress.
//!
//! The arithmetic is the P4 program's, operation for operation: 19-bit
//! depths in cells (80 bytes), qAvg = prev - (prev >> n) + (deq >> n) with
//! prev the port's previous sample, a 16-bit random number below
//! `ired_drop_prob` between the thresholds.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

use super::{Bridged, Pipeline};
use crate::schema::IredReg;
use crate::tables::small::{PORTS, QUEUE_DEPTH_MAX};

/// DSCP Expedited Forwarding (RFC 3246).
pub const DSCP_EF: u8 = 46;
/// Drop flag values (`pipe.Ingress.ired_drop_flag`).
pub const FLAG_DROP: u8 = 1;
pub const FLAG_DROP_SPARE_PROTECTED: u8 = 3;

/// One port's iRED registers (all of `pipe.Egress.ired_*` and
/// `pipe.Ingress.ired_*` at this index).
#[derive(Debug, Default)]
struct PortRegs {
    qdepth_prev: AtomicU32,
    qavg: AtomicU32,
    drop_prob: AtomicU16,
    decisions: AtomicU32,
    tail_drops: AtomicU32,
    drop_flag: AtomicU8,
    flags_set: AtomicU32,
    drops: AtomicU32,
    spared: AtomicU32,
    /// Feedback copies on the recirculation path, and the flag they carry.
    recirc: AtomicU32,
    recirc_flag: AtomicU8,
}

/// The iRED registers of every port, and the recirculation path.
#[derive(Debug)]
pub struct IredRegs {
    ports: Vec<PortRegs>,
    /// Some port has copies on the recirculation path.
    recirc_pending: AtomicBool,
    /// xorshift64 state (Tofino: `Random<bit<16>>`).
    rng: AtomicU64,
}

impl Default for IredRegs {
    fn default() -> Self {
        let mut ports = Vec::with_capacity(PORTS);
        ports.resize_with(PORTS, PortRegs::default);
        IredRegs {
            ports,
            recirc_pending: AtomicBool::new(false),
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        }
    }
}

impl IredRegs {
    /// 16 random bits. Racing workers may draw the same number: harmless.
    #[inline]
    fn random16(&self) -> u16 {
        let mut x = self.rng.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Relaxed);
        (x >> 24) as u16
    }

    pub fn read(&self, reg: IredReg, i: usize) -> Option<u64> {
        let p = self.ports.get(i)?;
        Some(match reg {
            IredReg::QdepthPrev => p.qdepth_prev.load(Relaxed).into(),
            IredReg::Qavg => p.qavg.load(Relaxed).into(),
            IredReg::DropProb => p.drop_prob.load(Relaxed).into(),
            IredReg::Decisions => p.decisions.load(Relaxed).into(),
            IredReg::TailDrops => p.tail_drops.load(Relaxed).into(),
            IredReg::DropFlag => p.drop_flag.load(Relaxed).into(),
            IredReg::FlagsSet => p.flags_set.load(Relaxed).into(),
            IredReg::Drops => p.drops.load(Relaxed).into(),
            IredReg::Spared => p.spared.load(Relaxed).into(),
        })
    }

    /// Register write (truncated to the register width, as on Tofino).
    pub fn write(&self, reg: IredReg, i: usize, v: u64) -> bool {
        let Some(p) = self.ports.get(i) else {
            return false;
        };
        match reg {
            IredReg::QdepthPrev => p.qdepth_prev.store(v as u32, Relaxed),
            IredReg::Qavg => p.qavg.store(v as u32, Relaxed),
            IredReg::DropProb => p.drop_prob.store(v as u16, Relaxed),
            IredReg::Decisions => p.decisions.store(v as u32, Relaxed),
            IredReg::TailDrops => p.tail_drops.store(v as u32, Relaxed),
            IredReg::DropFlag => p.drop_flag.store(v as u8, Relaxed),
            IredReg::FlagsSet => p.flags_set.store(v as u32, Relaxed),
            IredReg::Drops => p.drops.store(v as u32, Relaxed),
            IredReg::Spared => p.spared.store(v as u32, Relaxed),
        }
        true
    }

    pub fn clear(&self) {
        for p in &self.ports {
            p.recirc.store(0, Relaxed);
        }
        for i in 0..self.ports.len() {
            for r in [
                IredReg::QdepthPrev,
                IredReg::Qavg,
                IredReg::DropProb,
                IredReg::Decisions,
                IredReg::TailDrops,
                IredReg::DropFlag,
                IredReg::FlagsSet,
                IredReg::Drops,
                IredReg::Spared,
            ] {
                self.write(r, i, 0);
            }
        }
    }
}

impl Pipeline {
    /// Whether a port has an `ired_port` entry (the XDP fast path leaves such
    /// ports to user space, where the decision is made).
    pub fn ired_on(&self, port: u32) -> bool {
        u16::try_from(port).is_ok_and(|p| self.small.load().ired_lookup(p).is_some())
    }

    /// `Ired.apply` for a packet leaving `port`'s queue, which held
    /// `deq_cells` behind it (deq_qdepth) and `enq_cells` when it was queued
    /// (enq_qdepth). False: the packet is dropped here (tail-drop mode).
    #[inline]
    pub fn ired(&self, port: u16, b: &Bridged, deq_cells: u32, enq_cells: u32) -> bool {
        let Some(c) = self.small.load().ired_lookup(port) else {
            return true;
        };
        let Some(r) = self.ired.ports.get(usize::from(port)) else {
            return true;
        };
        let n = c.ewma_n;
        // 19-bit depths, as eg_intr_md.deq_qdepth / enq_qdepth.
        let cur = deq_cells.min(QUEUE_DEPTH_MAX);
        let prev = r.qdepth_prev.swap(cur, Relaxed);
        let avg = prev - (prev >> n) + (cur >> n);
        let (min, max) = (c.min_thsld(), c.max_thsld());
        r.qavg.store(avg, Relaxed);
        if c.tail_drop {
            if enq_cells.min(QUEUE_DEPTH_MAX) >= c.max_len_queue {
                r.tail_drops.fetch_add(1, Relaxed);
                return false;
            }
            return true;
        }
        let chosen = if avg > max {
            true
        } else if avg >= min {
            self.ired.random16() < r.drop_prob.load(Relaxed)
        } else {
            false
        };
        // A relayed RTP packet carries the jitter write-back copy on Tofino
        // (one mirror per packet): it never carries a decision.
        let carries_writeback = b.relayed_rtp && !b.rtcp;
        if chosen && !carries_writeback {
            r.decisions.fetch_add(1, Relaxed);
            // E2E mirror + recirculation: the copy reaches Ingress after this pass.
            let flag = if c.protect {
                FLAG_DROP_SPARE_PROTECTED
            } else {
                FLAG_DROP
            };
            r.recirc_flag.store(flag, Relaxed);
            r.recirc.fetch_add(1, Relaxed);
            self.ired.recirc_pending.store(true, Relaxed);
        }
        true
    }

    /// `IredDrop` for the feedback copies on the recirculation path: each
    /// sets its port's drop flag (Algorithm 2, lines 2-4). The data plane
    /// runs this after every egress pass.
    #[inline]
    pub fn ired_feedback(&self) {
        if !self.ired.recirc_pending.swap(false, Relaxed) {
            return;
        }
        for r in &self.ired.ports {
            let copies = r.recirc.swap(0, Relaxed);
            if copies > 0 {
                r.drop_flag.store(r.recirc_flag.load(Relaxed), Relaxed);
                r.flags_set.fetch_add(copies, Relaxed);
            }
        }
    }

    /// `IredDrop` for a packet Forwarding routed to `port` (Algorithm 2,
    /// lines 7-10): true = drop it. A protected packet (relay hit, DSCP EF)
    /// takes only a flag set without protection.
    #[inline]
    pub(super) fn ired_drop(&self, port: u16, protected: bool) -> bool {
        let Some(r) = self.ired.ports.get(usize::from(port)) else {
            return false;
        };
        if r.drop_flag.load(Relaxed) == 0 {
            return false;
        }
        let found = if protected {
            r.drop_flag
                .compare_exchange(FLAG_DROP, 0, Relaxed, Relaxed)
                .unwrap_or_else(|f| f)
        } else {
            r.drop_flag.swap(0, Relaxed)
        };
        if found == FLAG_DROP || (found == FLAG_DROP_SPARE_PROTECTED && !protected) {
            r.drops.fetch_add(1, Relaxed);
            true
        } else {
            if found == FLAG_DROP_SPARE_PROTECTED {
                r.spared.fetch_add(1, Relaxed);
            }
            false
        }
    }
}
