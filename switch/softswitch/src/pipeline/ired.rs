//! iRED (switch/p4/controls/ired.p4): `ired` is the `Ired` control (Egress,
//! the drop decision, when a packet leaves its port's FIFO), `ired_feedback`
//! is `IredDrop`'s handling of the recirculated feedback copy (sets the
//! port's drop flag in an Ingress register) and `ired_drop` is `IredDrop` for
//! a routed packet (the drop), sparing on a protecting port relayed media,
//! DSCP EF and the signalling class of `ired_spare`. The same two steps as on Tofino: a decision
//! never drops the deciding packet; it sends a feedback copy (here: onto the
//! recirculation queue that Ingress takes after the egress pass), and the
//! next eligible packet routed to that port is dropped in Ingress.
//!
//! The arithmetic is the P4 program's, operation for operation: 19-bit
//! depths in cells (80 bytes), qAvg = prev - (prev >> n) + (cur >> n) with
//! cur the queue depth as the packet leaves (deq_qdepth; enq_qdepth with
//! `--ired-sample enq`, the program built with -DIRED_SAMPLE_ENQ) and prev
//! the port's previous sample, a 16-bit random number below `ired_drop_prob`
//! between the thresholds.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

use super::{Bridged, Pipeline};
use crate::schema::{IredCount, IredReg};
use crate::tables::small::{PORTS, QUEUE_DEPTH_MAX};

/// The queue depth iRED averages (switch/p4/controls/ired.p4, `sample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IredSample {
    /// deq_qdepth: the queue as the deciding packet leaves it.
    #[default]
    Deq,
    /// enq_qdepth: the queue as the deciding packet found it on arrival, one
    /// queueing delay old (the P4 program built with -DIRED_SAMPLE_ENQ).
    Enq,
}

/// DSCP Expedited Forwarding (RFC 3246).
pub const DSCP_EF: u8 = 46;
/// Drop flag values (`pipe.Ingress.ired_drop_flag`).
pub const FLAG_DROP: u8 = 1;
pub const FLAG_DROP_SPARE_PROTECTED: u8 = 3;

/// One port's iRED registers and counters (all of `pipe.Egress.ired_*` and
/// `pipe.Ingress.ired_*` at this index).
#[derive(Debug, Default)]
struct PortRegs {
    qdepth_prev: AtomicU32,
    qavg: AtomicU32,
    drop_prob: AtomicU16,
    decisions: AtomicU64,
    tail_drops: AtomicU64,
    drop_flag: AtomicU8,
    flags_set: AtomicU64,
    drops: AtomicU64,
    spared: AtomicU64,
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
    /// Fixed at start-up, as the P4 program's build.
    sample: IredSample,
}

impl Default for IredRegs {
    fn default() -> Self {
        let mut ports = Vec::with_capacity(PORTS);
        ports.resize_with(PORTS, PortRegs::default);
        IredRegs {
            ports,
            recirc_pending: AtomicBool::new(false),
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
            sample: IredSample::default(),
        }
    }
}

impl IredRegs {
    /// The registers of a switch averaging `sample`.
    pub fn with_sample(sample: IredSample) -> IredRegs {
        IredRegs {
            sample,
            ..IredRegs::default()
        }
    }

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
            IredReg::DropFlag => p.drop_flag.load(Relaxed).into(),
        })
    }

    fn count_cell(&self, c: IredCount, i: usize) -> Option<&AtomicU64> {
        let p = self.ports.get(i)?;
        Some(match c {
            IredCount::Decisions => &p.decisions,
            IredCount::TailDrops => &p.tail_drops,
            IredCount::FlagsSet => &p.flags_set,
            IredCount::Drops => &p.drops,
            IredCount::Spared => &p.spared,
        })
    }

    /// A counter cell (packets).
    pub fn read_count(&self, c: IredCount, i: usize) -> Option<u64> {
        self.count_cell(c, i).map(|n| n.load(Relaxed))
    }

    /// Sets a counter cell (0 resets it); false: index out of range.
    pub fn write_count(&self, c: IredCount, i: usize, v: u64) -> bool {
        self.count_cell(c, i).map(|n| n.store(v, Relaxed)).is_some()
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
            IredReg::DropFlag => p.drop_flag.store(v as u8, Relaxed),
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
                IredReg::DropFlag,
            ] {
                self.write(r, i, 0);
            }
            for c in [
                IredCount::Decisions,
                IredCount::TailDrops,
                IredCount::FlagsSet,
                IredCount::Drops,
                IredCount::Spared,
            ] {
                self.write_count(c, i, 0);
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
        let cur = match self.ired.sample {
            IredSample::Deq => deq_cells,
            IredSample::Enq => enq_cells,
        }
        .min(QUEUE_DEPTH_MAX);
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
                r.flags_set.fetch_add(u64::from(copies), Relaxed);
            }
        }
    }

    /// `ired_spare` (IredSpare, looked up on header fields only): whether
    /// the packet is in the operator's signalling class (its DSCP, its UDP
    /// ports; 0, 0 for anything but UDP), which a protecting port spares.
    #[inline]
    pub(super) fn ired_spare(&self, dscp: u8, udp: Option<&crate::packet::Udp>) -> bool {
        let small = self.small.load();
        if small.ired_spare.is_empty() {
            return false;
        }
        let (sport, dport) = udp.map_or((0, 0), |u| (u.src_port, u.dst_port));
        small.ired_spare_lookup(dscp, sport, dport)
    }

    /// `IredDrop` for a packet Forwarding routed to `port` (Algorithm 2,
    /// lines 7-10): true = drop it. A protected packet (relay hit, DSCP EF,
    /// `ired_spare`'s class) takes only a flag set without protection.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::tests::setup;
    use crate::tables::small::IredConfig;

    const PORT: u16 = 2;

    /// A pipeline with iRED on `PORT`: maxLenQueue 64 cells, N 4 (minThsld
    /// 28, maxThsld 56), average weight 2^-1.
    fn with_ired(tail_drop: bool, protect: bool) -> Pipeline {
        let (p, _) = setup();
        let c = IredConfig {
            max_len_queue: 64,
            n_drop: 4,
            ewma_n: 1,
            tail_drop,
            protect,
        };
        p.small
            .update(|t| t.ired_port_write(PORT, Some(c), true))
            .unwrap();
        p
    }

    fn reg(p: &Pipeline, r: IredReg) -> u64 {
        p.ired.read(r, usize::from(PORT)).unwrap()
    }

    fn count(p: &Pipeline, c: IredCount) -> u64 {
        p.ired.read_count(c, usize::from(PORT)).unwrap()
    }

    /// One packet leaves `PORT` with `deq` cells behind it; then the
    /// recirculated copy, if any, reaches Ingress.
    fn depart(p: &Pipeline, deq: u32) -> bool {
        let sent = p.ired(PORT, &Bridged::default(), deq, deq);
        p.ired_feedback();
        sent
    }

    #[test]
    fn a_port_without_an_entry_is_plain_tail_drop() {
        let (p, _) = setup();
        for deq in [0, 1000, QUEUE_DEPTH_MAX] {
            assert!(p.ired(PORT, &Bridged::default(), deq, deq));
        }
        p.ired_feedback();
        assert_eq!(count(&p, IredCount::Decisions), 0);
        assert_eq!(
            reg(&p, IredReg::Qavg),
            0,
            "no entry: the registers stay put"
        );
        assert!(!p.ired_drop(PORT, false));
    }

    #[test]
    fn the_average_is_the_p4_programs_shift_arithmetic() {
        let p = with_ired(false, false);
        // avg = prev - (prev >> 1) + (cur >> 1), prev = the previous sample
        depart(&p, 10);
        assert_eq!(reg(&p, IredReg::Qavg), 5); // 0 - 0 + 5
        assert_eq!(reg(&p, IredReg::QdepthPrev), 10);
        depart(&p, 21);
        assert_eq!(reg(&p, IredReg::Qavg), 10 - 5 + 10);
        depart(&p, 0);
        assert_eq!(reg(&p, IredReg::Qavg), 21 - 10);
        // depths are 19-bit: a deeper queue reads as the maximum
        depart(&p, u32::MAX);
        assert_eq!(reg(&p, IredReg::QdepthPrev), u64::from(QUEUE_DEPTH_MAX));
    }

    #[test]
    fn the_sample_is_the_depth_the_switch_was_built_to_average() {
        let mut p = with_ired(false, false);
        // deq_qdepth 30, enq_qdepth 10: the default averages the queue as it is left
        p.ired(PORT, &Bridged::default(), 30, 10);
        assert_eq!(reg(&p, IredReg::QdepthPrev), 30);
        p.ired = IredRegs::with_sample(IredSample::Enq);
        p.ired(PORT, &Bridged::default(), 30, 10);
        assert_eq!(reg(&p, IredReg::QdepthPrev), 10);
        assert_eq!(reg(&p, IredReg::Qavg), 5);
    }

    #[test]
    fn below_min_never_decides_above_max_always_and_the_next_packet_drops() {
        let p = with_ired(false, false);
        depart(&p, 20);
        depart(&p, 20); // avg 20 < minThsld 28
        assert_eq!(count(&p, IredCount::Decisions), 0);
        assert!(!p.ired_drop(PORT, false));
        depart(&p, 200);
        depart(&p, 200); // avg 200 > maxThsld 56
        assert_eq!(count(&p, IredCount::Decisions), 1 + 1);
        // the deciding packets were sent; the flag waits for the next one
        assert_eq!(reg(&p, IredReg::DropFlag), u64::from(FLAG_DROP));
        assert_eq!(count(&p, IredCount::FlagsSet), 2);
        assert!(
            p.ired_drop(PORT, false),
            "the next packet to the port is dropped"
        );
        assert!(!p.ired_drop(PORT, false), "one drop per flag");
        assert_eq!(count(&p, IredCount::Drops), 1);
        // another port's packets are not touched
        assert!(!p.ired_drop(PORT + 1, false));
    }

    #[test]
    fn between_the_thresholds_the_drop_probability_decides() {
        let p = with_ired(false, false);
        p.ired.write(IredReg::DropProb, usize::from(PORT), 0);
        for _ in 0..50 {
            depart(&p, 40); // avg settles at 40: between 28 and 56
        }
        assert_eq!(count(&p, IredCount::Decisions), 0, "probability 0: never");
        p.ired.write(IredReg::DropProb, usize::from(PORT), 0xffff);
        for _ in 0..50 {
            depart(&p, 40);
        }
        let d = count(&p, IredCount::Decisions);
        // a 16-bit random number below 0xffff: all but 1 in 65536
        assert!(d >= 49, "probability ~1: {d} of 50 decided");
        // the register is 16 bits wide
        p.ired.write(IredReg::DropProb, usize::from(PORT), 0x1_0007);
        assert_eq!(reg(&p, IredReg::DropProb), 7);
    }

    #[test]
    fn relayed_rtp_never_carries_a_decision() {
        let p = with_ired(false, false);
        let rtp = Bridged {
            relayed_rtp: true,
            ..Bridged::default()
        };
        for _ in 0..4 {
            assert!(p.ired(PORT, &rtp, 500, 500));
        }
        p.ired_feedback();
        assert_eq!(count(&p, IredCount::Decisions), 0);
        // RTCP of a relayed leg does carry one
        let rtcp = Bridged { rtcp: true, ..rtp };
        p.ired(PORT, &rtcp, 500, 500);
        p.ired_feedback();
        assert_eq!(count(&p, IredCount::Decisions), 1);
    }

    #[test]
    fn protection_spares_relay_hits_and_ef_but_not_the_rest() {
        let p = with_ired(false, true);
        depart(&p, 500);
        assert_eq!(
            reg(&p, IredReg::DropFlag),
            u64::from(FLAG_DROP_SPARE_PROTECTED)
        );
        assert!(!p.ired_drop(PORT, true), "protected: passes");
        assert_eq!(count(&p, IredCount::Spared), 1);
        assert!(
            p.ired_drop(PORT, false),
            "the flag still drops the next unprotected one"
        );
        assert_eq!(count(&p, IredCount::Drops), 1);
        // without protection a protected packet is dropped like any other
        let q = with_ired(false, false);
        depart(&q, 500);
        assert!(q.ired_drop(PORT, true));
    }

    #[test]
    fn the_signalling_class_is_spared_by_its_udp_port_or_its_dscp() {
        use crate::packet::testpkt::Udp4;
        use crate::pipeline::tests::{meta, UAC, UAS};
        use crate::pipeline::{DropReason, Verdict};
        use crate::tables::small::{IredSpareAction, IredSpareKey};
        let key = |priority, dscp, dport| IredSpareKey {
            priority,
            dscp,
            sport: (0, 0),
            dport,
        };
        let p = with_ired(false, true);
        p.small
            .update(|t| {
                // SIP to 5060, and DSCP CS3 (24) whatever the port
                let spare = Some(IredSpareAction::Spare);
                t.ired_spare_write(key(1, (0, 0), (5060, 0xffff)), spare, true)?;
                t.ired_spare_write(key(2, (24, 0x3f), (0, 0)), spare, true)
            })
            .unwrap();
        // bad entries: a DSCP wider than 6 bits, a value outside its mask
        p.small
            .update(|t| {
                let e = t.ired_spare_write(key(3, (64, 0x7f), (0, 0)), None, true);
                assert!(e.is_err());
                let e = t.ired_spare_write(key(3, (0, 0), (5061, 0xff00)), None, true);
                assert!(e.is_err());
                Ok(())
            })
            .unwrap();
        // UAC -> UAS leaves by PORT (2)
        let send = |dport: u16, dscp: u8| {
            let mut f = Udp4 {
                src: UAC,
                dst: UAS,
                dport,
                ..Udp4::default()
            }
            .build();
            f[15] = dscp << 2;
            f[24..26].fill(0);
            let c = crate::packet::ipv4_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            p.process(&mut f, &meta(0))
        };
        depart(&p, 500);
        assert_eq!(send(5060, 0), Verdict::Forward(PORT), "SIP by its port");
        assert_eq!(send(7000, 24), Verdict::Forward(PORT), "CS3");
        assert_eq!(count(&p, IredCount::Spared), 2);
        assert_eq!(
            send(7000, 26),
            Verdict::Drop(DropReason::Ired),
            "AF31 is not"
        );
        assert_eq!(count(&p, IredCount::Drops), 1);
        // without protection on the port the class is dropped like any other
        let q = with_ired(false, false);
        q.small
            .update(|t| {
                t.ired_spare_write(
                    key(1, (0, 0), (5060, 0xffff)),
                    Some(IredSpareAction::Spare),
                    true,
                )
            })
            .unwrap();
        depart(&q, 500);
        let mut f = Udp4 {
            src: UAC,
            dst: UAS,
            dport: 5060,
            ..Udp4::default()
        }
        .build();
        assert_eq!(q.process(&mut f, &meta(0)), Verdict::Drop(DropReason::Ired));
    }

    #[test]
    fn tail_drop_mode_drops_at_egress_from_the_enqueue_depth() {
        let p = with_ired(true, false);
        assert!(
            p.ired(PORT, &Bridged::default(), 500, 63),
            "63 < maxLenQueue"
        );
        assert!(
            !p.ired(PORT, &Bridged::default(), 0, 64),
            "64 >= maxLenQueue"
        );
        assert!(!p.ired(PORT, &Bridged::default(), 0, u32::MAX));
        p.ired_feedback();
        assert_eq!(count(&p, IredCount::TailDrops), 2);
        assert_eq!(
            count(&p, IredCount::Decisions),
            0,
            "no decisions in this mode"
        );
        assert!(!p.ired_drop(PORT, false));
    }

    #[test]
    fn clear_resets_every_register_and_copies_in_flight() {
        let p = with_ired(false, false);
        p.ired(PORT, &Bridged::default(), 500, 500);
        p.ired.clear();
        p.ired_feedback();
        for r in [IredReg::Qavg, IredReg::DropFlag] {
            assert_eq!(reg(&p, r), 0, "{r:?}");
        }
        for c in [IredCount::Decisions, IredCount::FlagsSet] {
            assert_eq!(count(&p, c), 0, "{c:?}");
        }
        assert_eq!(p.ired.read(IredReg::Qavg, PORTS), None, "beyond the ports");
        assert!(!p.ired.write(IredReg::Qavg, PORTS, 1));
        assert_eq!(p.ired.read_count(IredCount::Drops, PORTS), None);
        assert!(!p.ired.write_count(IredCount::Drops, PORTS, 1));
    }
}
