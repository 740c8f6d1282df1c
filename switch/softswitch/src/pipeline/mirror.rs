//! The pipeline's side of the fast path: what a Write changed is mirrored
//! into the kernel's maps before the Write returns, and what the kernel
//! counted is added to every read. Without a fast path all of this is a no-op.

use std::collections::{BTreeMap, HashMap};

use super::Pipeline;
use crate::tables::relay::{Entry6Snapshot, EntrySnapshot, Relay6Key, RelayAction, RelayKey};
use crate::tables::small::{LpmAction, NexthopAction, RerouteWatchAction, SmallTables};
use crate::tables::small6::{Relay6AddrAction, Relay6AddrKey};
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
    /// Mirrors one IPv6 relay entry under one of the relay addresses its
    /// relay_id stands for: `Some((leg, rtcp))` installs or re-points it,
    /// `None` removes it.
    fn mirror_relay6(&self, t: &Relay6Tuple, leg: Option<(u32, bool)>);
    /// Removes every IPv6 relay entry.
    fn clear_relay6(&self);
    /// When the fast path last relayed a packet of this IPv6 entry (ms).
    fn relay6_last_hit(&self, t: &Relay6Tuple) -> Option<u32>;
    /// The same for every IPv6 entry (one pass over the kernel's map).
    fn all_relay6_last_hits(&self) -> Vec<(Relay6Tuple, u32)>;
    /// Mirrors one leg's IPv6 rewrite with its route (`valid == false`: removed).
    fn mirror_leg6(&self, leg: u32, r: LegRoute6);
    /// Every leg whose IPv6 rewrite the fast path holds.
    fn mirrored_legs6(&self) -> Vec<u32>;
    /// Whether `relay6_addr` differs from the one the IPv6 entries were
    /// last resolved with; remembers this one.
    fn relay6_addr_changed(&self, addrs: &BTreeMap<Relay6AddrKey, Relay6AddrAction>) -> bool;
}

/// An IPv6 relay entry as the fast path keys it: relay6's key with, in
/// place of its relay_id, a relay address `relay6_addr` maps to that id
/// for the entry's port. The kernel then needs no relay6_addr lookup: a hit
/// is one hash lookup, as in IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Relay6Tuple {
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    pub port: u16,
}

/// A leg's rewrite with its route resolved; `A` is the address family's
/// integer (u32 for IPv4, u128 for IPv6).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LegRouteOf<A> {
    pub src: A,
    pub dst: A,
    pub sport: u16,
    pub dport: u16,
    pub port: u32,
    pub smac: [u8; 6],
    pub dmac: [u8; 6],
    /// false: not routable by the fast path (user space decides).
    pub valid: bool,
}

/// An IPv4 leg's rewrite with its route resolved.
pub type LegRoute = LegRouteOf<u32>;
/// An IPv6 leg's rewrite with its route resolved.
pub type LegRoute6 = LegRouteOf<u128>;

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
    /// Of `relay_rewrites`, IPv6 packets.
    pub relay6_rewrites: u64,
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
    /// IPv6 relay entries (one per relay address of a relay6 entry) in its map.
    pub relay6_entries: u64,
}

/// What one Write touched, so only that is mirrored.
#[derive(Debug, Default)]
pub struct Touched {
    pub relay: Vec<RelayKey>,
    pub legs: Vec<u32>,
    pub relay6: Vec<Relay6Key>,
    pub legs6: Vec<u32>,
    /// The small tables changed (ipv4_lpm, ipv6_lpm, nexthop, relay6_addr):
    /// every leg's route is resolved again, and every IPv6 relay entry's
    /// address if relay6_addr changed.
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
        let small = self.small.load();
        let readdress = t.routes
            && self
                .fastpath
                .as_ref()
                .is_some_and(|fp| fp.relay6_addr_changed(&small.v6.relay_addr));
        if readdress {
            self.mirror_relay6_all(&small);
        } else {
            for k in &t.relay6 {
                self.mirror_relay6(&small, k);
            }
        }
        if t.routes {
            self.legs.for_each(|leg, _| self.mirror_leg(leg));
            self.legs6.for_each(|leg, _| self.mirror_leg6(leg));
        } else {
            for &leg in &t.legs {
                self.mirror_leg(leg);
            }
            for &leg in &t.legs6 {
                self.mirror_leg6(leg);
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
        let small = self.small.load();
        fp.relay6_addr_changed(&small.v6.relay_addr);
        self.mirror_relay6_all(&small);
        for leg in fp.mirrored_legs6() {
            self.mirror_leg6(leg);
        }
        self.legs6.for_each(|leg, _| self.mirror_leg6(leg));
    }

    /// Every IPv6 relay entry again, under the relay addresses `small`'s
    /// relay6_addr gives their relay_ids.
    fn mirror_relay6_all(&self, small: &SmallTables) {
        let Some(fp) = &self.fastpath else {
            return;
        };
        fp.clear_relay6();
        self.relay6.for_each(0, |s| {
            let leg = leg_of(Some(s.action));
            for t in relay6_tuples(small, &s.key) {
                fp.mirror_relay6(&t, leg);
            }
        });
    }

    fn mirror_relay6(&self, small: &SmallTables, k: &Relay6Key) {
        let Some(fp) = &self.fastpath else {
            return;
        };
        let leg = leg_of(self.relay6.get(k, 0).map(|s| s.action));
        for t in relay6_tuples(small, k) {
            fp.mirror_relay6(&t, leg);
        }
    }

    fn mirror_leg6(&self, leg: u32) {
        if let Some(fp) = &self.fastpath {
            fp.mirror_leg6(leg, self.leg6_route(leg));
        }
    }

    /// The leg's IPv6 rewrite and where `ingress6` would send it; not valid
    /// when there is no rewrite or no plain forward.
    fn leg6_route(&self, leg: u32) -> LegRoute6 {
        let Some(rw) = self.legs6.get(leg) else {
            return LegRoute6::default();
        };
        let small = self.small.load();
        // as leg_route: a watched destination's packets take user space
        if small.reroute_watch_lookup(rw.dst) != RerouteWatchAction::NoAction {
            return LegRoute6::default();
        }
        let LpmAction::SetNexthop(id) = small.v6.lpm_lookup(rw.dst) else {
            return LegRoute6::default();
        };
        self.routed(&small, id, rw.src, rw.dst, rw.sport, rw.dport)
    }

    /// leg_rewrite6's direct counter of `leg`: ours plus the kernel's (legs
    /// are one index space: the kernel counts both families in one array).
    pub fn leg6_counts(&self, leg: u32) -> (u64, u64) {
        let (p, b) = self.legs6.counts(leg);
        let (fp_p, fp_b) = self
            .fastpath
            .as_ref()
            .map_or((0, 0), |fp| fp.leg_counts(leg));
        (p + fp_p, b + fp_b)
    }

    /// Sets leg_rewrite6's direct counter of `leg`: ours to the values, the
    /// kernel's part to 0.
    pub fn set_leg6_counts(&self, leg: u32, pkts: u64, bytes: u64) {
        self.legs6.set_counts(leg, pkts, bytes);
        if let Some(fp) = &self.fastpath {
            fp.zero_leg_counts(leg);
        }
    }

    /// When the kernel last relayed a packet of IPv6 entry `k` (idle sweeps).
    pub fn fast_last_hit6(&self, k: &Relay6Key) -> Option<u32> {
        let fp = self.fastpath.as_ref()?;
        let small = self.small.load();
        relay6_tuples(&small, k)
            .iter()
            .filter_map(|t| fp.relay6_last_hit(t))
            .reduce(latest)
    }

    /// An IPv6 relay entry as read: idle since our last hit or the kernel's.
    pub fn with_fast_idle6(&self, s: Entry6Snapshot, now_ms: u32) -> Entry6Snapshot {
        let mut s = s;
        if let Some(t) = self.fast_last_hit6(&s.key) {
            s.idle_ms = s.idle_ms.min(now_ms.wrapping_sub(t));
        }
        s
    }

    /// Every IPv6 relay entry, idle as `with_fast_idle6` (a full Read): the
    /// kernel's map is read once.
    pub fn for_each_relay6_with_fast_idle(&self, now_ms: u32, mut f: impl FnMut(Entry6Snapshot)) {
        let mut all: HashMap<Relay6Key, u32> = HashMap::new();
        if let Some(fp) = &self.fastpath {
            let small = self.small.load();
            for (t, hit) in fp.all_relay6_last_hits() {
                let Relay6AddrAction::MarkRelay6 { relay_id } =
                    small.v6.relay_addr_lookup(t.dst, t.dport)
                else {
                    continue;
                };
                let k = Relay6Key {
                    src: t.src,
                    relay_id,
                    sport: t.sport,
                    dport: t.dport,
                    port: t.port,
                };
                all.entry(k)
                    .and_modify(|h| *h = latest(*h, hit))
                    .or_insert(hit);
            }
        }
        self.relay6.for_each(now_ms, |mut s| {
            if let Some(t) = all.get(&s.key) {
                s.idle_ms = s.idle_ms.min(now_ms.wrapping_sub(*t));
            }
            f(s)
        });
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
        self.routed(&small, id, rw.src, rw.dst, rw.sport, rw.dport)
    }

    /// The rewrite sent by next hop `id` when it is a plain forward out of one
    /// of this switch's ports; else not valid (user space decides).
    fn routed<A: Default>(
        &self,
        small: &SmallTables,
        id: u16,
        src: A,
        dst: A,
        sport: u16,
        dport: u16,
    ) -> LegRouteOf<A> {
        let NexthopAction::Forward {
            port,
            src_mac,
            dst_mac,
        } = small.nexthop_lookup(id)
        else {
            return LegRouteOf::default();
        };
        if !self.has_port(u32::from(port)) {
            return LegRouteOf::default();
        }
        LegRouteOf {
            src,
            dst,
            sport,
            dport,
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

/// The relay addresses an IPv6 entry's relay_id stands for at its port:
/// each destination whose relay6_addr lookup with the entry's dport gives
/// that relay_id (entries in priority order, the first match of a
/// destination decides it).
pub fn relay6_tuples(small: &SmallTables, k: &Relay6Key) -> Vec<Relay6Tuple> {
    let mut decided: Vec<u128> = Vec::new();
    let mut out = Vec::new();
    for (a, act) in &small.v6.relay_addr {
        if a.lo > k.dport || k.dport > a.hi || decided.contains(&a.dst) {
            continue;
        }
        decided.push(a.dst);
        if *act
            == (Relay6AddrAction::MarkRelay6 {
                relay_id: k.relay_id,
            })
        {
            out.push(Relay6Tuple {
                src: k.src,
                dst: a.dst,
                sport: k.sport,
                dport: k.dport,
                port: k.port,
            });
        }
    }
    out
}

/// The later of two millisecond stamps of a wrapping clock.
fn latest(a: u32, b: u32) -> u32 {
    if (b.wrapping_sub(a) as i32) > 0 {
        b
    } else {
        a
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
