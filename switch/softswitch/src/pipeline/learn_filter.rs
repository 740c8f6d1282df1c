//! `LearnFilter` and `LearnFilter6` (switch/p4/controls/learn_filter.p4):
//! the learn digests, suppressed per hashed flow (4-tuple and bound port) for
//! `learn_filter_age_ms`, each family in its own register.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::mpsc::TrySendError;

use super::relay6_sessions::IngressMeta6;
use super::{zeroed, LearnDigest, LearnDigest6, Meta, Pipeline};
use crate::tables::relay::RelayKey;

impl Pipeline {
    /// `learning.apply`: raise `pipe.IngressDeparser.learn` for this flow
    /// unless the `learn_filter` register says it reported recently. `key`
    /// is relay's (its port the bound one), `ingress_port` the digest's.
    pub(super) fn learning(&self, key: &RelayKey, ingress_port: u16, m: &Meta) {
        let h = key.src.wrapping_mul(0x9e37_79b1)
            ^ key.dst.rotate_left(7).wrapping_mul(0x85eb_ca77)
            ^ ((u32::from(key.sport) << 16) | u32::from(key.dport)).wrapping_mul(0xc2b2_ae3d)
            ^ u32::from(key.port).wrapping_mul(0x27d4_eb2f);
        if !self.learn_filter.admit(h ^ (h >> 15), m.now_ms) {
            self.stats.learn_suppressed.fetch_add(1, Relaxed);
            return;
        }
        let d = LearnDigest {
            src: key.src,
            dst: key.dst,
            sport: key.sport,
            dport: key.dport,
            ingress_port,
        };
        match self.digests.try_send(d) {
            Ok(()) => {
                self.stats.learn_digests.fetch_add(1, Relaxed);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.learn_dropped.fetch_add(1, Relaxed);
            }
        }
    }
}

impl Pipeline {
    /// `learning6.apply`: `pipe.IngressDeparser.learn6` for an IPv6 flow to
    /// a relay address that missed relay6, unless `learn_filter6` says it
    /// reported recently. The flow hashes the destination as it arrived.
    pub(super) fn learning6(&self, md: &IngressMeta6, m: &Meta) {
        let k = &md.flow;
        let fold = |a: u128| (a as u64) ^ ((a >> 64) as u64).rotate_left(17);
        let h = (fold(k.src).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ fold(md.dst).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ ((u64::from(k.sport) << 32) | (u64::from(k.dport) << 16) | u64::from(k.port))
                .wrapping_mul(0x1656_67b1_9e37_79f9))
            >> 32;
        if !self.learn_filter6.admit(h as u32, m.now_ms) {
            self.stats.learn_suppressed.fetch_add(1, Relaxed);
            return;
        }
        let d = LearnDigest6 {
            src: k.src,
            dst: md.dst,
            sport: k.sport,
            dport: k.dport,
            ingress_port: md.ingress_port,
        };
        match self.digests6.try_send(d) {
            Ok(()) => {
                self.stats.learn_digests.fetch_add(1, Relaxed);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.learn_dropped.fetch_add(1, Relaxed);
            }
        }
    }
}

/// Digest suppression: hashed flow → ms it was last reported. A flow reports
/// again once `age_ms` has passed, so a digest lost while the agent restarts
/// comes back.
pub struct LearnFilter {
    slots: Vec<AtomicU32>,
    age_ms: u32,
}

impl LearnFilter {
    pub fn new(size: usize, age_ms: u32) -> LearnFilter {
        LearnFilter {
            slots: zeroed(size.next_power_of_two()),
            age_ms,
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// True if the flow should raise a digest now.
    #[inline]
    pub fn admit(&self, flow_hash: u32, now_ms: u32) -> bool {
        let slot = &self.slots[flow_hash as usize & (self.slots.len() - 1)];
        let last = slot.load(Relaxed);
        if last != 0 && now_ms.wrapping_sub(last) < self.age_ms {
            return false;
        }
        slot.store(now_ms.max(1), Relaxed);
        true
    }

    pub fn read(&self, i: usize) -> Option<u64> {
        self.slots.get(i).map(|s| s.load(Relaxed).into())
    }

    pub fn write(&self, i: usize, v: u64) -> bool {
        self.slots
            .get(i)
            .map(|s| s.store(v as u32, Relaxed))
            .is_some()
    }

    pub fn clear(&self) {
        self.slots.iter().for_each(|s| s.store(0, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learn_filter_suppresses_then_ages_out() {
        let f = LearnFilter::new(4096, 2000);
        assert!(f.admit(77, 10));
        assert!(!f.admit(77, 1500));
        assert!(f.admit(77, 2010));
        assert!(f.admit(78, 2010));
    }

    #[test]
    fn the_filter_ages_across_the_ms_clocks_wrap() {
        let f = LearnFilter::new(16, 2000);
        assert!(f.admit(1, u32::MAX - 500));
        assert!(!f.admit(1, 1000), "1501 ms later, across the wrap");
        assert!(f.admit(1, 1500));
        // time 0 is stored as 1: a slot at 0 reads as never reported
        assert!(f.admit(2, 0));
        assert_eq!(f.read(2), Some(1));
        assert!(!f.admit(2, 1));
    }

    #[test]
    fn the_size_rounds_up_to_a_power_of_two_and_writes_truncate() {
        let f = LearnFilter::new(3000, 2000);
        assert_eq!(f.len(), 4096);
        assert!(f.write(5, 0x1_0000_0009));
        assert_eq!(f.read(5), Some(9));
        assert!(!f.write(4096, 1));
        assert_eq!(f.read(4096), None);
        f.clear();
        assert_eq!(f.read(5), Some(0));
    }

    fn flow(sport: u16, port: u16) -> RelayKey {
        RelayKey {
            src: 1,
            dst: 2,
            sport,
            dport: 20000,
            port,
        }
    }

    #[test]
    fn learning_reports_a_flow_once_per_age_with_the_real_ingress_port() {
        let (p, rx) = crate::pipeline::tests::setup();
        let m = crate::pipeline::tests::meta(100);
        // keyed on the unbound port, reported with the port it came in on
        p.learning(&flow(4000, 511), 3, &m);
        p.learning(&flow(4000, 511), 3, &m);
        let d = rx.try_recv().unwrap();
        assert_eq!(
            (d.src, d.dst, d.sport, d.dport, d.ingress_port),
            (1, 2, 4000, 20000, 3)
        );
        assert!(rx.try_recv().is_err(), "suppressed");
        assert_eq!(p.stats.learn_suppressed.load(Relaxed), 1);
        // the same 4-tuple from another bound port is another flow
        p.learning(&flow(4000, 2), 2, &m);
        assert_eq!(rx.try_recv().unwrap().ingress_port, 2);
        // after the age it reports again
        p.learning(
            &flow(4000, 511),
            3,
            &crate::pipeline::tests::meta(100 + 2000),
        );
        assert!(rx.try_recv().is_ok());
        assert_eq!(p.stats.learn_digests.load(Relaxed), 3);
    }

    #[test]
    fn a_full_digest_queue_counts_the_loss() {
        let (p, _rx) = crate::pipeline::tests::setup();
        let m = crate::pipeline::tests::meta(1);
        // setup's queue holds 16 digests
        for sport in 0..20 {
            p.learning(&flow(sport, 1), 1, &m);
        }
        assert_eq!(p.stats.learn_digests.load(Relaxed), 16);
        assert_eq!(p.stats.learn_dropped.load(Relaxed), 4);
    }
}
