//! `RtpQuality` (switch/p4/controls/rtp_quality.p4): a relayed RTP packet's
//! leg quality registers (`pipe.Egress.rtp_*`), updated as the packet leaves
//! its egress queue, so tail drops show as sequence gaps and queueing delay
//! variation as jitter. Relaxed atomics: a leg's packets leave through one
//! egress port, whose queue one drainer at a time empties, so updates of one
//! slot do not race in practice; a rare race costs one sample, never memory
//! safety. The XDP fast path (bpf/fastpath.bpf.c `quality_update`) updates
//! the same memory the same way.

use std::sync::atomic::Ordering::Relaxed;

use super::rtp_clock::{ms_clock, rtp_clock};
use super::{zeroed, Bridged, Pipeline};
use crate::packet::Rtp;
use crate::schema::{Half, Reg};
use crate::xdp_abi::LegQuality;

impl Pipeline {
    /// `RtpQuality` (switch/p4/controls/rtp_quality.p4) with `ms_clock` and
    /// `rtp_clock` (rtp_clock.p4): the leg's quality registers
    /// (shared with the XDP fast path).
    #[inline]
    pub(super) fn rtp_quality(&self, b: &Bridged, now_ns: u64) {
        self.stats.rtp_packets.fetch_add(1, Relaxed);
        // QUALITY_RUN: the leg's half and its index there name the cell.
        let (half, i) = self.quality.half_of(b.leg as usize);
        if let Some(cell) = self.quality.cell(half, i) {
            self.quality.update(cell, &b.rtp, now_ns, ms_clock(now_ns));
        }
    }
}

/// Where the registers live: our heap, or memory shared with the kernel
/// (the fast path's mmapped `quality` array, alive as long as the process).
enum Storage {
    Owned(Box<[LegQuality]>),
    Shared(&'static [LegQuality]),
}

/// The registers of every leg, one cell per leg. With `half_bits` (the
/// program's QUALITY_HALF_BITS, `--quality-half-bits`) the control plane sees
/// each register as two, as the Tofino build that splits them declares them:
/// cell `leg` is index `leg` of the lower half below 2^half_bits and index
/// `leg - 2^half_bits` of the upper half from there. The cells stay one array
/// (the XDP fast path indexes it by leg).
pub struct QualityRegs {
    legs: Storage,
    clock_hz: u64,
    jitter_shift: u32,
    half_bits: Option<u32>,
}

impl QualityRegs {
    pub fn new(legs: usize, clock_hz: u32, jitter_shift: u32) -> QualityRegs {
        QualityRegs {
            legs: Storage::Owned(zeroed::<LegQuality>(legs).into_boxed_slice()),
            clock_hz: u64::from(clock_hz),
            jitter_shift,
            half_bits: None,
        }
    }

    /// Registers in memory the XDP fast path updates too.
    pub fn shared(legs: &'static [LegQuality], clock_hz: u32, jitter_shift: u32) -> QualityRegs {
        QualityRegs {
            legs: Storage::Shared(legs),
            clock_hz: u64::from(clock_hz),
            jitter_shift,
            half_bits: None,
        }
    }

    /// The registers split in two at 2^`half_bits` (None: one register each).
    pub fn with_half_bits(mut self, half_bits: Option<u32>) -> QualityRegs {
        self.half_bits = half_bits;
        self
    }

    pub fn half_bits(&self) -> Option<u32> {
        self.half_bits
    }

    /// The half a leg's cells are in and its index there (QUALITY_RUN: bit
    /// half_bits of the leg chooses, its low bits index). Unsplit: the lower.
    #[inline]
    pub fn half_of(&self, leg: usize) -> (Half, usize) {
        match self.half_bits {
            Some(h) if leg >> h & 1 == 1 => (Half::Hi, leg & ((1 << h) - 1)),
            Some(h) => (Half::Lo, leg & ((1 << h) - 1)),
            None => (Half::Lo, leg),
        }
    }

    /// Cells in a half: the lower's 2^half_bits (unsplit: every leg), the
    /// upper's the rest.
    pub fn half_len(&self, half: Half) -> usize {
        let lo = self
            .half_bits
            .map_or(self.len(), |h| (1usize << h).min(self.len()));
        match half {
            Half::Lo => lo,
            Half::Hi => self.len() - lo,
        }
    }

    /// The cell (leg) of index `i` of a half; None beyond the half.
    #[inline]
    pub fn cell(&self, half: Half, i: usize) -> Option<usize> {
        if i >= self.half_len(half) {
            return None;
        }
        Some(match half {
            Half::Lo => i,
            Half::Hi => self.half_len(Half::Lo) + i,
        })
    }

    /// A register cell as the control plane addresses it: index `i` of a half.
    pub fn read_half(&self, reg: Reg, half: Half, i: usize) -> Option<u64> {
        self.read(reg, self.cell(half, i)?)
    }

    pub fn write_half(&self, reg: Reg, half: Half, i: usize, v: u64) -> bool {
        self.cell(half, i).is_some_and(|c| self.write(reg, c, v))
    }

    #[inline]
    fn slots(&self) -> &[LegQuality] {
        match &self.legs {
            Storage::Owned(b) => b,
            Storage::Shared(s) => s,
        }
    }

    pub fn len(&self) -> usize {
        self.slots().len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots().is_empty()
    }

    /// One RTP packet of leg `l` left the egress queue at `now_ns` (wall clock) / `now_ms`.
    /// bpf/fastpath.bpf.c `quality_update` is this, statement for statement.
    #[inline]
    pub fn update(&self, l: usize, rtp: &Rtp, now_ns: u64, now_ms: u32) {
        let Some(q) = self.slots().get(l) else {
            return;
        };
        // Arrival in RTP clock units, so transit and jitter are in the codec's clock.
        let arrival = rtp_clock(now_ns, self.clock_hz);
        let transit = arrival.wrapping_sub(rtp.timestamp);
        let n = q.packets.fetch_add(1, Relaxed);
        if n == 0 {
            q.max_seq.store(rtp.seq, Relaxed);
            q.jitter.store(0, Relaxed);
        } else {
            let delta = rtp.seq.wrapping_sub(q.max_seq.load(Relaxed)) as i16;
            if delta > 0 {
                if delta > 1 {
                    q.lost.fetch_add((delta - 1) as u32, Relaxed);
                }
                q.max_seq.store(rtp.seq, Relaxed);
            } else if delta < 0 {
                q.reordered.fetch_add(1, Relaxed);
            }
            // RFC 3550 A.8 with J stored scaled by 2^shift: S += |D| - (S >> shift).
            let d = transit.wrapping_sub(q.transit.load(Relaxed)) as i32;
            let s = q.jitter.load(Relaxed);
            let s = s
                .wrapping_add(d.unsigned_abs())
                .wrapping_sub(s >> self.jitter_shift);
            q.jitter.store(s, Relaxed);
        }
        q.transit.store(transit, Relaxed);
        q.last_seen.store(now_ms, Relaxed);
        q.payload_type.store(rtp.payload_type, Relaxed);
    }

    pub fn read(&self, reg: Reg, i: usize) -> Option<u64> {
        let q = self.slots().get(i)?;
        Some(match reg {
            Reg::Packets => q.packets.load(Relaxed).into(),
            // two fields (schema::pack_fields): lost, reordered
            Reg::Loss => {
                u64::from(q.lost.load(Relaxed)) << 32 | u64::from(q.reordered.load(Relaxed))
            }
            Reg::MaxSeq => q.max_seq.load(Relaxed).into(),
            Reg::Transit => q.transit.load(Relaxed).into(),
            Reg::Jitter => q.jitter.load(Relaxed).into(),
            Reg::LastSeen => q.last_seen.load(Relaxed).into(),
            Reg::PayloadType => q.payload_type.load(Relaxed).into(),
            _ => return None,
        })
    }

    /// `rtp_loss`'s lost field of cell `i`.
    #[cfg(test)]
    pub fn lost(&self, i: usize) -> Option<u64> {
        self.read(Reg::Loss, i).map(|v| v >> 32)
    }

    /// `rtp_loss`'s reordered field of cell `i`.
    #[cfg(test)]
    pub fn reordered(&self, i: usize) -> Option<u64> {
        self.read(Reg::Loss, i).map(|v| v & 0xffff_ffff)
    }

    /// Register write (values truncated to the register width, as on Tofino).
    pub fn write(&self, reg: Reg, i: usize, v: u64) -> bool {
        let Some(q) = self.slots().get(i) else {
            return false;
        };
        match reg {
            Reg::Packets => q.packets.store(v as u32, Relaxed),
            Reg::Loss => {
                q.lost.store((v >> 32) as u32, Relaxed);
                q.reordered.store(v as u32, Relaxed);
            }
            Reg::MaxSeq => q.max_seq.store(v as u16, Relaxed),
            Reg::Transit => q.transit.store(v as u32, Relaxed),
            Reg::Jitter => q.jitter.store(v as u32, Relaxed),
            Reg::LastSeen => q.last_seen.store(v as u32, Relaxed),
            Reg::PayloadType => q.payload_type.store(v as u8, Relaxed),
            _ => return false,
        }
        true
    }

    pub fn clear(&self) {
        for i in 0..self.len() {
            for r in [
                Reg::Packets,
                Reg::Loss,
                Reg::MaxSeq,
                Reg::Transit,
                Reg::Jitter,
                Reg::LastSeen,
                Reg::PayloadType,
            ] {
                self.write(r, i, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(seq: u16, ts: u32) -> Rtp {
        Rtp {
            payload_type: 8,
            seq,
            timestamp: ts,
        }
    }

    #[test]
    fn loss_reorder_and_constant_spacing_jitter() {
        let r = QualityRegs::new(4, 8000, 4);
        // 20 ms packets, arrival exactly on the RTP clock: jitter stays 0.
        let t0 = 1_700_000_000_000_000_000u64;
        for (i, seq) in [1u16, 2, 3, 5, 4, 6].iter().enumerate() {
            let ts = u32::from(*seq) * 160;
            let now = t0 + u64::from(*seq) * 20_000_000;
            r.update(1, &rtp(*seq, ts), now, i as u32);
        }
        assert_eq!(r.read(Reg::Packets, 1), Some(6));
        assert_eq!(r.lost(1), Some(1)); // 4 missing when 5 arrived
        assert_eq!(r.reordered(1), Some(1));
        assert_eq!(r.read(Reg::MaxSeq, 1), Some(6));
        assert_eq!(r.read(Reg::Jitter, 1), Some(0));
        assert_eq!(r.read(Reg::PayloadType, 1), Some(8));
        assert_eq!(r.read(Reg::Packets, 4), None);
    }

    #[test]
    fn jitter_follows_rfc3550() {
        let r = QualityRegs::new(1, 8000, 4);
        let t0 = 1_000_000_000u64;
        // alternate arrival offsets of +0 / +5 ms: |D| = 40 clock units each packet
        let mut j = 0f64;
        for seq in 0..200u16 {
            let off = if seq % 2 == 1 { 5_000_000 } else { 0 };
            r.update(
                0,
                &rtp(seq, u32::from(seq) * 160),
                t0 + u64::from(seq) * 20_000_000 + off,
                0,
            );
            if seq > 0 {
                j += (40.0 - j) / 16.0;
            }
        }
        let got = r.read(Reg::Jitter, 0).unwrap() as f64 / 16.0;
        assert!((got - j).abs() < 1.5, "jitter {got} vs {j}");
    }

    #[test]
    fn sequence_numbers_wrap_at_16_bits() {
        let r = QualityRegs::new(1, 8000, 4);
        for (i, seq) in [65534u16, 65535, 0, 1].into_iter().enumerate() {
            r.update(0, &rtp(seq, 0), 0, i as u32);
        }
        assert_eq!(r.lost(0), Some(0), "65535 -> 0 is the next packet");
        assert_eq!(r.reordered(0), Some(0));
        assert_eq!(r.read(Reg::MaxSeq, 0), Some(1));
        // a jump of half the space or more reads as late (signed 16-bit delta)
        r.update(0, &rtp(1 + 0x8000, 0), 0, 9);
        assert_eq!(r.reordered(0), Some(1));
        assert_eq!(r.read(Reg::MaxSeq, 0), Some(1));
        r.update(0, &rtp(1 + 0x7fff, 0), 0, 9);
        assert_eq!(r.lost(0), Some(0x7ffe), "the largest gap forward");
        assert_eq!(r.read(Reg::LastSeen, 0), Some(9));
    }

    #[test]
    fn transit_is_in_clock_units_mod_2_32() {
        let r = QualityRegs::new(1, 8000, 4);
        // departure at 1 s = 8000 units; RTP timestamp 8160: transit -160 mod 2^32
        r.update(0, &rtp(1, 8160), 1_000_000_000, 0);
        assert_eq!(
            r.read(Reg::Transit, 0),
            Some(u64::from(8000u32.wrapping_sub(8160)))
        );
        assert_eq!(
            r.read(Reg::Jitter, 0),
            Some(0),
            "the first packet sets no jitter"
        );
    }

    #[test]
    fn writes_truncate_to_the_register_width_and_stay_in_range() {
        let r = QualityRegs::new(2, 8000, 4);
        assert!(r.write(Reg::MaxSeq, 1, 0x1_0005));
        assert!(r.write(Reg::PayloadType, 1, 0x1ff));
        assert!(r.write(Reg::Packets, 1, 0x1_0000_0007));
        assert_eq!(r.read(Reg::MaxSeq, 1), Some(5));
        assert_eq!(r.read(Reg::PayloadType, 1), Some(0xff));
        assert_eq!(r.read(Reg::Packets, 1), Some(7));
        assert!(!r.write(Reg::Packets, 2, 1), "beyond the legs");
        assert_eq!(r.read(Reg::Packets, 2), None);
        // an update beyond the legs is ignored, not a panic
        r.update(2, &rtp(1, 0), 0, 0);
        r.clear();
        assert_eq!(r.read(Reg::Packets, 1), Some(0));
        assert_eq!(r.read(Reg::MaxSeq, 1), Some(0));
    }

    #[test]
    fn a_split_register_addresses_its_halves_as_the_p4_program() {
        // 2^2 lower cells, 2 upper: legs 0..6 (QUALITY_HALF_BITS 2).
        let r = QualityRegs::new(6, 8000, 4).with_half_bits(Some(2));
        assert_eq!((r.half_len(Half::Lo), r.half_len(Half::Hi)), (4, 2));
        assert_eq!(r.half_of(3), (Half::Lo, 3));
        assert_eq!(r.half_of(5), (Half::Hi, 1));
        assert_eq!(r.cell(Half::Hi, 1), Some(5));
        assert_eq!(r.cell(Half::Hi, 2), None, "beyond the upper half");
        assert_eq!(r.cell(Half::Lo, 4), None, "the lower half ends at 2^2");
        r.update(5, &rtp(1, 0), 0, 0);
        assert_eq!(r.read_half(Reg::Packets, Half::Hi, 1), Some(1));
        assert_eq!(r.read_half(Reg::Packets, Half::Lo, 1), Some(0));
        assert!(r.write_half(Reg::Packets, Half::Hi, 1, 0));
        assert_eq!(r.read(Reg::Packets, 5), Some(0));
        assert!(!r.write_half(Reg::Packets, Half::Lo, 5, 1));
        // unsplit: one register of every leg
        let one = QualityRegs::new(6, 8000, 4);
        assert_eq!((one.half_len(Half::Lo), one.half_len(Half::Hi)), (6, 0));
        assert_eq!(one.half_of(5), (Half::Lo, 5));
    }

    #[test]
    fn the_step_counts_a_split_programs_upper_leg_in_its_cell() {
        let (mut p, _) = crate::pipeline::tests::setup();
        let legs = p.quality.len();
        // the largest split of these legs: 2^h < legs <= 2^(h+1)
        p.quality = QualityRegs::new(legs, 8000, 4).with_half_bits(Some((legs - 1).ilog2()));
        let leg = legs - 1;
        let b = Bridged {
            relayed_rtp: true,
            leg: leg as u32,
            rtp: rtp(10, 0),
            ..Bridged::default()
        };
        p.rtp_quality(&b, 2_000_000);
        let (half, i) = p.quality.half_of(leg);
        assert_eq!(half, Half::Hi);
        assert_eq!(p.quality.read_half(Reg::Packets, Half::Hi, i), Some(1));
        assert_eq!(p.quality.read(Reg::Packets, leg), Some(1));
    }

    #[test]
    fn the_step_counts_only_the_leg_it_was_bridged_with() {
        let (p, _) = crate::pipeline::tests::setup();
        let b = Bridged {
            relayed_rtp: true,
            leg: 3,
            rtp: rtp(10, 0),
            ..Bridged::default()
        };
        p.rtp_quality(&b, 2_000_000);
        assert_eq!(p.quality.read(Reg::Packets, 3), Some(1));
        assert_eq!(
            p.quality.read(Reg::LastSeen, 3),
            Some(2),
            "ms_clock of the departure"
        );
        assert_eq!(p.quality.read(Reg::Packets, 2), Some(0));
        assert_eq!(p.stats.rtp_packets.load(Relaxed), 1);
    }
}
