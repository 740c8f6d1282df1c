//! TNA's intrinsic metadata as the P4 program reads it (tna.p4, t2na.p4): the
//! widths `switch/contract.toml` names (`tna_*_bits`, `reroute_delay_*`),
//! saturating or wrapping as the ASIC does. The software switch measures its
//! queues without such ceilings; Egress sees them through this, so a
//! threshold the target cannot reach is not reached here either.

use crate::contract::ContractConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tna {
    deq_timedelta_max: u64,
    qdepth_max: u32,
    tstamp_mask: u64,
    delay_shift: u32,
    delay_mask: u64,
}

fn ones(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl Tna {
    pub fn new(c: &ContractConfig) -> Tna {
        Tna {
            deq_timedelta_max: ones(c.tna_deq_timedelta_bits),
            qdepth_max: ones(c.tna_qdepth_bits).min(u64::from(u32::MAX)) as u32,
            tstamp_mask: ones(c.tna_tstamp_bits),
            delay_shift: c.reroute_delay_shift,
            delay_mask: ones(c.reroute_delay_bits),
        }
    }

    /// `eg_intr_md.deq_timedelta`: ns the packet spent in the egress queue,
    /// saturating at its width (262,143 ns with 18 bits).
    #[inline]
    pub fn deq_timedelta(&self, queue_ns: u64) -> u64 {
        queue_ns.min(self.deq_timedelta_max)
    }

    /// `eg_intr_md.enq_qdepth` / `deq_qdepth`: cells, saturating.
    #[inline]
    pub fn qdepth(&self, cells: u32) -> u32 {
        cells.min(self.qdepth_max)
    }

    /// `ingress_mac_tstamp` / `global_tstamp`: ns, wrapping at their width.
    #[inline]
    pub fn tstamp(&self, ns: u64) -> u64 {
        ns & self.tstamp_mask
    }

    /// Reroute's delay in ticks of 2^`reroute_delay_shift` ns: the egress
    /// global timestamp's and the ingress MAC timestamp's bits 47..16 apart
    /// (mod 2^`reroute_delay_bits`), as the P4 program subtracts them.
    #[inline]
    pub fn delay_ticks(&self, egress_ts: u64, ingress_ts: u64) -> u64 {
        (egress_ts >> self.delay_shift).wrapping_sub(ingress_ts >> self.delay_shift)
            & self.delay_mask
    }

    /// A threshold in ns as the P4 program compares it: whole ticks.
    #[inline]
    pub fn ticks_of(&self, ns: u32) -> u64 {
        u64::from(ns) >> self.delay_shift
    }

    /// Ticks back to ns (32 bits, as the notice carries them).
    #[inline]
    pub fn ticks_ns(&self, ticks: u64) -> u32 {
        (ticks << self.delay_shift) as u32
    }
}

impl Default for Tna {
    fn default() -> Tna {
        Tna::new(&crate::contract::CONTRACT.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_the_contracts_and_saturate_or_wrap_as_tofino_does() {
        let t = Tna::default();
        // deq_timedelta: 18 bits of ns
        assert_eq!(t.deq_timedelta(262_143), 262_143);
        assert_eq!(t.deq_timedelta(50_000_000), 262_143);
        // queue depths: 19 bits of cells
        assert_eq!(t.qdepth(524_287), 524_287);
        assert_eq!(t.qdepth(600_000), 524_287);
        // 48-bit timestamps wrap
        assert_eq!(t.tstamp((1 << 48) + 5), 5);
        // the delay in 65,536 ns ticks, across the 48-bit wrap
        let ig = t.tstamp((1 << 48) - 70_000);
        let eg = t.tstamp((1 << 48) + 50_000_000);
        assert_eq!(t.delay_ticks(eg, ig), (50_000_000 + 70_000) >> 16);
        // bits below the tick do not count: a few ns across a tick boundary
        // are one tick, 65 us within one are none
        assert_eq!(t.delay_ticks(0x1_0000, 0xFFFF), 1);
        assert_eq!(t.delay_ticks(0x1_FFFF, 0x1_0000), 0);
        assert_eq!((t.ticks_of(200_000), t.ticks_ns(3)), (3, 196_608));
        // tens of ms and far more: no ceiling
        assert_eq!(t.delay_ticks(4 << 32, 0), 4 << 16);
    }
}
