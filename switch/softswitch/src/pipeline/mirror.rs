//! The pipeline's side of the fast path: what a Write changed is mirrored
//! into the kernel's maps before the Write returns, and what the kernel
//! counted is added to every read. Without a fast path all of this is a no-op.

use std::collections::HashMap;

use super::Pipeline;
use crate::tables::relay::{EntrySnapshot, RelayAction, RelayKey};
use crate::tables::small::{LpmAction, NexthopAction, RerouteWatchAction};
use crate::xdp_abi::LegQuality;

/// What the pipeline needs of a fast path that forwards relay hits outside
/// it (the XDP program, crate::fastpath): maps to mirror the tables into and
/// the counts it kept. The pipeline stays the owner of every table.
pub trait FastPathMaps: Send + Sync {
    /// Mirrors one relay entry: `Some((leg, rtcp))` for a `relay_leg` entry,
    /// `None` to remove it.
    fn mirror_relay(&self, k: &RelayKey, leg: Option<(u32, bool)>);
    /// Removes every relay entry.
    fn clear_relay(&self);
    /// Mirrors one leg's rewrite with its route (`valid == false`: removed).
    fn mirror_leg(&self, leg: u32, r: LegRoute);
    /// Every leg the fast path holds.
    fn mirrored_legs(&self) -> Vec<u32>;
    /// Which ports may receive (`enabled`) and send (`fast`) on the fast path.
    fn set_port(&self, port: u32, enabled: bool, fast: bool);
    /// Whether the port's binding is off (relay keys on the unbound port).
    fn set_port_unbound(&self, port: u32, unbound: bool);
    /// When the fast path last relayed a packet of this entry (ms), if ever.
    fn relay_last_hit(&self, k: &RelayKey) -> Option<u32>;
    /// The same for every entry (one pass over the kernel's map).
    fn all_relay_last_hits(&self) -> HashMap<RelayKey, u32>;
    /// leg_rewrite's direct counter, the fast path's part: (packets, bytes).
    fn leg_counts(&self, leg: u32) -> (u64, u64);
    /// A Write set (or a new entry started) the leg's counter: the fast
    /// path's part starts again at 0.
    fn zero_leg_counts(&self, leg: u32);
    fn port_counts(&self, port: u32) -> PortCounts;
    fn pipeline_counts(&self) -> PipelineCounts;
    /// The quality registers, shared with the fast path (one memory).
    fn quality(&self) -> &'static [LegQuality];
    fn status(&self) -> FastPathStatus;
}

/// A leg's rewrite with its route resolved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LegRoute {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub port: u32,
    pub smac: [u8; 6],
    pub dmac: [u8; 6],
    /// false: not routable by the fast path (user space decides).
    pub valid: bool,
}

/// Per-port packets the fast path received / sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// Pipeline counters the fast path counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineCounts {
    pub relay_hits: u64,
    pub relay_rewrites: u64,
    pub rtp_packets: u64,
}

/// The fast path's own state, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastPathStatus {
    /// Ports it is attached to.
    pub ports: u64,
    pub relay_mirrored: u64,
    /// Relay entries in its map.
    pub relay_entries: u64,
    /// Relay entries its map refused (full): relayed by user space.
    pub relay_full: u64,
    /// Legs its map refused (full).
    pub legs_full: u64,
}

/// What one Write touched, so only that is mirrored.
#[derive(Debug, Default)]
pub struct Touched {
    pub relay: Vec<RelayKey>,
    pub legs: Vec<u32>,
    /// ipv4_lpm / nexthop changed: every leg's route is resolved again.
    pub routes: bool,
    /// $PORT_ENABLE, shaping or port binding changed.
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

    /// leg_rewrite's direct counter of `leg`: ours plus the kernel's.
    pub fn leg_counts(&self, leg: u32) -> (u64, u64) {
        let (p, b) = self.legs.counts(leg);
        let (fp_p, fp_b) = self
            .fastpath
            .as_ref()
            .map_or((0, 0), |fp| fp.leg_counts(leg));
        (p + fp_p, b + fp_b)
    }

    /// Sets leg_rewrite's direct counter of `leg` (a Write, a new entry, an
    /// undo): ours to the values, the kernel's part to 0.
    pub fn set_leg_counts(&self, leg: u32, pkts: u64, bytes: u64) {
        self.legs.set_counts(leg, pkts, bytes);
        if let Some(fp) = &self.fastpath {
            fp.zero_leg_counts(leg);
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
        // A watched destination's next hop depends on reroute_active, which
        // the kernel does not see: its packets take the user-space pipeline.
        if small.reroute_watch_lookup(rw.dst) != RerouteWatchAction::NoAction {
            return LegRoute::default();
        }
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
            valid: true,
        }
    }

    /// A relay entry as read: idle since our last hit or the kernel's.
    pub fn with_fast_idle(&self, s: EntrySnapshot, now_ms: u32) -> EntrySnapshot {
        with_last_hit(s, self.fast_last_hit(&s.key), now_ms)
    }

    /// Every relay entry, idle as `with_fast_idle` (a full Read): the
    /// kernel's map is read once, not looked up per entry.
    pub fn for_each_relay_with_fast_idle(&self, now_ms: u32, mut f: impl FnMut(EntrySnapshot)) {
        let all = self
            .fastpath
            .as_ref()
            .map(|fp| fp.all_relay_last_hits())
            .unwrap_or_default();
        self.relay.for_each(now_ms, |s| {
            f(with_last_hit(s, all.get(&s.key).copied(), now_ms))
        });
    }

    /// When the kernel last relayed a packet of `k` (idle sweeps).
    pub fn fast_last_hit(&self, k: &RelayKey) -> Option<u32> {
        self.fastpath.as_ref()?.relay_last_hit(k)
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

fn with_last_hit(mut s: EntrySnapshot, last_hit_ms: Option<u32>, now_ms: u32) -> EntrySnapshot {
    if let Some(t) = last_hit_ms {
        s.idle_ms = s.idle_ms.min(now_ms.wrapping_sub(t));
    }
    s
}
