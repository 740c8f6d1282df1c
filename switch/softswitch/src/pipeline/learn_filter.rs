//! `LearnFilter` (switch/p4/controls/learn_filter.p4): the learn digest,
//! suppressed per hashed flow (4-tuple and bound port) for `learn_filter_age_ms`.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::mpsc::TrySendError;

use super::{zeroed, LearnDigest, Meta, Pipeline};
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
}
