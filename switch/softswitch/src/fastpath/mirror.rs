//! The pipeline's side of the fast path: what a Write changed is mirrored
//! into the kernel's maps before the Write returns, and what the kernel
//! counted is added to every read. Without a fast path all of this is a no-op.

use super::{EntryCounts, LegRoute, PipelineCounts, PortCounts};
use crate::pipeline::Pipeline;
use crate::tables::relay::{EntrySnapshot, RelayAction, RelayKey};
use crate::tables::small::{LpmAction, NexthopAction};

/// What one Write touched, so only that is mirrored.
#[derive(Debug, Default)]
pub struct Touched {
    pub relay: Vec<RelayKey>,
    pub legs: Vec<u32>,
    /// ipv4_lpm / nexthop changed: every leg's route is resolved again.
    pub routes: bool,
    /// $PORT_ENABLE or shaping changed.
    pub ports: bool,
    /// A table was cleared: everything is mirrored again.
    pub cleared: bool,
}

impl Pipeline {
    /// Mirrors what a Write (applied or rolled back) touched.
    pub fn mirror(&self, t: &Touched) {
        if self.fastpath.is_none() {
            return;
        }
        if t.cleared {
            self.mirror_cleared();
            return;
        }
        for k in &t.relay {
            self.mirror_relay(k);
        }
        if t.routes {
            self.legs.for_each(|leg, _| self.mirror_leg(leg));
        } else {
            for &leg in &t.legs {
                self.mirror_leg(leg);
            }
        }
    }

    /// Everything again, from our tables (after a clear).
    pub fn mirror_cleared(&self) {
        let Some(fp) = &self.fastpath else {
            return;
        };
        fp.clear_relay();
        self.relay
            .for_each(0, |s| fp.mirror_relay(&s.key, leg_of(Some(s.action))));
        for leg in fp.mirrored_legs() {
            self.mirror_leg(leg);
        }
        self.legs.for_each(|leg, _| self.mirror_leg(leg));
    }

    fn mirror_relay(&self, k: &RelayKey) {
        let Some(fp) = &self.fastpath else {
            return;
        };
        fp.mirror_relay(k, leg_of(self.relay.get(k, 0).map(|s| s.action)));
    }

    /// A Write set this entry's counters: the kernel's part starts again at 0.
    pub fn zero_fast_counts(&self, k: &RelayKey) {
        if let Some(fp) = &self.fastpath {
            fp.zero_relay_counts(k);
        }
    }

    fn mirror_leg(&self, leg: u32) {
        if let Some(fp) = &self.fastpath {
            fp.mirror_leg(leg, self.leg_route(leg));
        }
    }

    /// The leg's rewrite and where `ingress` would send it; not valid (user
    /// space decides) when there is no rewrite or no plain forward.
    fn leg_route(&self, leg: u32) -> LegRoute {
        let Some(rw) = self.legs.get(leg) else {
            return LegRoute::default();
        };
        let small = self.small.load();
        let LpmAction::SetNexthop(id) = small.lpm_lookup(rw.dst) else {
            return LegRoute::default();
        };
        let NexthopAction::Forward {
            port,
            src_mac,
            dst_mac,
        } = small.nexthop_lookup(id)
        else {
            return LegRoute::default();
        };
        if !self.has_port(u32::from(port)) {
            return LegRoute::default();
        }
        LegRoute {
            src: rw.src,
            dst: rw.dst,
            sport: rw.sport,
            dport: rw.dport,
            port: u32::from(port),
            smac: src_mac,
            dmac: dst_mac,
            valid: 1,
        }
    }

    /// A relay entry as read: our counts plus the kernel's.
    pub fn with_fast_counts(&self, s: EntrySnapshot, now_ms: u32) -> EntrySnapshot {
        let c = self
            .fastpath
            .as_ref()
            .and_then(|fp| fp.relay_counts(&s.key));
        add_counts(s, c, now_ms)
    }

    /// Every relay entry, our counts plus the kernel's (a full Read): the
    /// kernel's map is read once, not looked up per entry.
    pub fn for_each_relay_with_fast_counts(&self, now_ms: u32, mut f: impl FnMut(EntrySnapshot)) {
        let all = self
            .fastpath
            .as_ref()
            .map(|fp| fp.all_relay_counts())
            .unwrap_or_default();
        self.relay.for_each(now_ms, |s| {
            f(add_counts(s, all.get(&s.key).copied(), now_ms))
        });
    }

    /// When the kernel last relayed a packet of `k` (idle sweeps).
    pub fn fast_last_hit(&self, k: &RelayKey) -> Option<u32> {
        let c = self.fastpath.as_ref()?.relay_counts(k)?;
        (c.pkts > 0).then_some(c.last_hit_ms)
    }

    pub fn fast_port_counts(&self, port: u32) -> PortCounts {
        self.fastpath
            .as_ref()
            .map(|fp| fp.port_counts(port))
            .unwrap_or_default()
    }

    pub fn fast_pipeline_counts(&self) -> PipelineCounts {
        self.fastpath
            .as_ref()
            .map(|fp| fp.pipeline_counts())
            .unwrap_or_default()
    }
}

/// What the kernel needs of a relay entry's action: its leg, if it has one.
fn leg_of(action: Option<RelayAction>) -> Option<(u32, bool)> {
    match action? {
        RelayAction::Leg { leg, rtcp } => Some((leg, rtcp)),
        RelayAction::NoAction => None,
    }
}

fn add_counts(mut s: EntrySnapshot, c: Option<EntryCounts>, now_ms: u32) -> EntrySnapshot {
    if let Some(c) = c {
        s.pkts += c.pkts;
        s.bytes += c.bytes;
        s.idle_ms = s.idle_ms.min(now_ms.wrapping_sub(c.last_hit_ms));
    }
    s
}
