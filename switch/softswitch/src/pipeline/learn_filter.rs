//! `LearnFilter` (switch/p4/controls/learn_filter.p4): the learn digest,
//! suppressed per hashed flow (4-tuple and bound port) for `learn_filter_age_ms`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::TrySendError;

use super::{LearnDigest, Meta, Pipeline};
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
