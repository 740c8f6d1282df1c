//! The small, rarely written tables: `ipv4_lpm`, `nexthop`, `relay_addr`,
//! `reroute_watch` (and `reroute_watch6`), `reroute_class`, INT's `int_watch` and `int_role`, and
//! Egress's `ired_port`, `int_hop_config` and `int_report`.
//! The data path reads an immutable snapshot; each write publishes a new one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::maps::{longest_match, write_lpm, write_map, ByLen};
pub use super::maps::{prefix_key, prefix_mask, MapLike};
use super::TableError;
use crate::packet::family::Addr;

/// dev_ports the per-port tables (`ired_port`, `int_hop_config`) and
/// registers can name: contract max_ports.
pub const PORTS: usize = crate::xdp_abi::MAX_PORTS as usize;

/// Tofino's queue depths are 19-bit (cells).
pub const QUEUE_DEPTH_MAX: u32 = (1 << 19) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmAction {
    SetNexthop(u16),
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NexthopAction {
    Forward {
        port: u16,
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
    },
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayAddrAction {
    MarkRelay,
    NoAction,
}

/// An address family with a reroute watch list: IPv4 destinations
/// (`reroute_watch`), IPv6 ones (`reroute_watch6`).
pub trait WatchAddr: Addr {
    /// The list's data-path index and default action.
    fn watch(t: &SmallTables) -> (&ByLen<Self, RerouteWatchAction>, RerouteWatchAction);
    /// Its entries and index, to write.
    #[allow(clippy::type_complexity)]
    fn watch_mut(
        t: &mut SmallTables,
    ) -> (
        &mut BTreeMap<(Self, u8), RerouteWatchAction>,
        &mut ByLen<Self, RerouteWatchAction>,
    );
}

impl WatchAddr for u32 {
    fn watch(t: &SmallTables) -> (&ByLen<u32, RerouteWatchAction>, RerouteWatchAction) {
        (&t.watch_by_len, t.reroute_watch_default)
    }
    fn watch_mut(
        t: &mut SmallTables,
    ) -> (
        &mut BTreeMap<(u32, u8), RerouteWatchAction>,
        &mut ByLen<u32, RerouteWatchAction>,
    ) {
        (&mut t.reroute_watch, &mut t.watch_by_len)
    }
}

impl WatchAddr for u128 {
    fn watch(t: &SmallTables) -> (&ByLen<u128, RerouteWatchAction>, RerouteWatchAction) {
        (&t.watch6_by_len, t.reroute_watch6_default)
    }
    fn watch_mut(
        t: &mut SmallTables,
    ) -> (
        &mut BTreeMap<(u128, u8), RerouteWatchAction>,
        &mut ByLen<u128, RerouteWatchAction>,
    ) {
        (&mut t.reroute_watch6, &mut t.watch6_by_len)
    }
}

/// `pipe.Ingress.reroute_watch`'s (and `reroute_watch6`'s) actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerouteWatchAction {
    Backup {
        slot: u16,
        flow_class: u8,
        backup_nexthop_id: u16,
        primary_port: u16,
    },
    Notify {
        slot: u16,
        flow_class: u8,
        primary_port: u16,
    },
    NoAction,
}

/// `pipe.Egress.reroute_class`'s actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerouteClassAction {
    Thresholds { t_q_ns: u32, m: u16 },
    NoAction,
}

/// `pipe.Ingress.int_watch`'s actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntWatchAction {
    WatchFlow,
    NoAction,
}

/// `pipe.Ingress.int_role`'s actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntRoleAction {
    Transit,
    Sink,
    NoAction,
}

/// One `pipe.Egress.ired_port` entry (`Egress.ired_set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IredConfig {
    /// maxLenQueue, cells.
    pub max_len_queue: u32,
    /// N, cells.
    pub n_drop: u32,
    /// n: the average weighs the new sample 2^-n.
    pub ewma_n: u8,
    /// Comparison mode: no decisions, drop at egress when enq depth >= maxLenQueue.
    pub tail_drop: bool,
    /// Relay hits and DSCP EF are never dropped by the flag.
    pub protect: bool,
}

impl IredConfig {
    /// The configuration errors the control plane is told about.
    pub fn validate(&self, ewma_n_max: u32) -> Result<(), String> {
        if self.ewma_n == 0 || u32::from(self.ewma_n) > ewma_n_max {
            return Err(format!(
                "ewma_n {} out of range 1..={ewma_n_max}",
                self.ewma_n
            ));
        }
        if !(4..=QUEUE_DEPTH_MAX).contains(&self.max_len_queue) {
            return Err(format!(
                "max_len_queue {} cells out of range 4..={QUEUE_DEPTH_MAX}",
                self.max_len_queue
            ));
        }
        if self.n_drop == 0 || self.n_drop >= self.max_len_queue / 2 {
            return Err(format!(
                "n_drop (N) {} must be at least 1 and below max_len_queue / 2 = {} \
                 (minThsld = max_len_queue / 2 - N must stay above 0)",
                self.n_drop,
                self.max_len_queue / 2
            ));
        }
        Ok(())
    }

    /// minThsld = maxLenQueue / 2 - N (cells).
    pub fn min_thsld(&self) -> u32 {
        (self.max_len_queue >> 1).saturating_sub(self.n_drop)
    }

    /// maxThsld = 2 * minThsld (cells).
    pub fn max_thsld(&self) -> u32 {
        self.min_thsld() << 1
    }
}

/// One `pipe.Egress.int_hop_config` entry (`Egress.int_hop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntHop {
    pub switch_id: u32,
    pub onset_cells: u32,
    pub clear_cells: u32,
    pub onset_ns: u32,
    pub clear_ns: u32,
}

/// One `pipe.Egress.int_report` entry (`Egress.int_report_encap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntReportEncap {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_addr: u32,
    pub dst_addr: u32,
    pub dst_port: u16,
    pub switch_id: u32,
}

/// Key of an `ired_spare` entry: (value, mask) per field and the priority
/// (`$MATCH_PRIORITY`: lower wins; first in the map's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IredSpareKey {
    pub priority: u32,
    pub dscp: (u8, u8),
    pub sport: (u16, u16),
    pub dport: (u16, u16),
}

/// `pipe.Ingress.ired_spare`'s actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IredSpareAction {
    /// `ired_spare_packet`: the operator's signalling class.
    Spare,
    NoAction,
}

/// Key of an `int_watch` entry: (value, mask) per field and the priority
/// (`$MATCH_PRIORITY`: lower value wins, as on Tofino). Values are stored
/// masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IntWatchKey {
    pub priority: u32,
    pub relay: (u8, u8),
    pub leg: (u32, u32),
    pub src: (u32, u32),
    pub dst: (u32, u32),
    pub dport: (u16, u16),
}

/// What `int_watch` matches on (after the relay rewrite).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntWatchFields {
    pub relay: bool,
    pub leg: u32,
    pub src: u32,
    pub dst: u32,
    pub dport: u16,
}

impl IntWatchKey {
    #[inline]
    fn matches(&self, f: &IntWatchFields) -> bool {
        u8::from(f.relay) & self.relay.1 == self.relay.0
            && f.leg & self.leg.1 == self.leg.0
            && f.src & self.src.1 == self.src.0
            && f.dst & self.dst.1 == self.dst.0
            && f.dport & self.dport.1 == self.dport.0
    }
}

/// Key of a `relay_addr` entry: destination, inclusive port range, priority
/// (`$MATCH_PRIORITY`: lower value wins, as on Tofino).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelayAddrKey {
    pub priority: u32,
    pub dst: u32,
    pub lo: u16,
    pub hi: u16,
}

#[derive(Debug, Clone)]
pub struct SmallTables {
    /// (prefix, length) → action: the control-plane view, and read back by Read.
    pub lpm: BTreeMap<(u32, u8), LpmAction>,
    /// Data-path index (`index_by_len`).
    lpm_by_len: ByLen<u32, LpmAction>,
    pub lpm_default: LpmAction,
    pub nexthop: HashMap<u16, NexthopAction>,
    pub nexthop_default: NexthopAction,
    /// Sorted by key, so by priority first.
    pub relay_addr: BTreeMap<RelayAddrKey, RelayAddrAction>,
    pub relay_addr_default: RelayAddrAction,
    /// (prefix, length) → action, and its data-path index, as for ipv4_lpm.
    pub reroute_watch: BTreeMap<(u32, u8), RerouteWatchAction>,
    watch_by_len: ByLen<u32, RerouteWatchAction>,
    pub reroute_watch_default: RerouteWatchAction,
    /// `reroute_watch6`: IPv6 destinations, the same actions and slots.
    pub reroute_watch6: BTreeMap<(u128, u8), RerouteWatchAction>,
    watch6_by_len: ByLen<u128, RerouteWatchAction>,
    pub reroute_watch6_default: RerouteWatchAction,
    pub reroute_class: HashMap<u8, RerouteClassAction>,
    pub reroute_class_default: RerouteClassAction,
    /// `ired_port` entries by dev_port (the control-plane view) ...
    pub ired_port: BTreeMap<u16, IredConfig>,
    /// ... and the data path's index.
    ired_by_port: [Option<IredConfig>; PORTS],
    /// Sorted by key, so by priority first.
    pub ired_spare: BTreeMap<IredSpareKey, IredSpareAction>,
    pub ired_spare_default: IredSpareAction,
    /// Sorted by key, so by priority first.
    pub int_watch: BTreeMap<IntWatchKey, IntWatchAction>,
    pub int_watch_default: IntWatchAction,
    /// `int_watch6`: IPv6 destinations traced (LPM), and the data path's
    /// index.
    pub int_watch6: BTreeMap<(u128, u8), IntWatchAction>,
    int_watch6_by_len: ByLen<u128, IntWatchAction>,
    pub int_watch6_default: IntWatchAction,
    pub int_role: HashMap<u16, IntRoleAction>,
    pub int_role_default: IntRoleAction,
    /// `int_hop_config` entries by dev_port, and the data path's index.
    pub int_hop_config: BTreeMap<u16, IntHop>,
    int_hop_by_port: [Option<IntHop>; PORTS],
    /// `int_report` entries by dev_port.
    pub int_report: BTreeMap<u16, IntReportEncap>,
    /// `ipv6_lpm`, `relay6_addr` (small6.rs).
    pub v6: super::small6::Small6<LpmAction>,
}

impl Default for SmallTables {
    fn default() -> Self {
        SmallTables {
            lpm: BTreeMap::new(),
            lpm_by_len: Vec::new(),
            lpm_default: LpmAction::Drop,
            nexthop: HashMap::new(),
            nexthop_default: NexthopAction::Drop,
            relay_addr: BTreeMap::new(),
            relay_addr_default: RelayAddrAction::NoAction,
            reroute_watch: BTreeMap::new(),
            watch_by_len: Vec::new(),
            reroute_watch_default: RerouteWatchAction::NoAction,
            reroute_watch6: BTreeMap::new(),
            watch6_by_len: Vec::new(),
            reroute_watch6_default: RerouteWatchAction::NoAction,
            reroute_class: HashMap::new(),
            reroute_class_default: RerouteClassAction::NoAction,
            ired_port: BTreeMap::new(),
            ired_by_port: [None; PORTS],
            ired_spare: BTreeMap::new(),
            ired_spare_default: IredSpareAction::NoAction,
            int_watch: BTreeMap::new(),
            int_watch_default: IntWatchAction::NoAction,
            int_watch6: BTreeMap::new(),
            int_watch6_by_len: Vec::new(),
            int_watch6_default: IntWatchAction::NoAction,
            int_role: HashMap::new(),
            int_role_default: IntRoleAction::NoAction,
            int_hop_config: BTreeMap::new(),
            int_hop_by_port: [None; PORTS],
            int_report: BTreeMap::new(),
            v6: super::small6::Small6::new(LpmAction::Drop),
        }
    }
}

impl SmallTables {
    #[inline]
    pub fn lpm_lookup(&self, dst: u32) -> LpmAction {
        longest_match(&self.lpm_by_len, dst).unwrap_or(self.lpm_default)
    }

    #[inline]
    pub fn nexthop_lookup(&self, id: u16) -> NexthopAction {
        self.nexthop
            .get(&id)
            .copied()
            .unwrap_or(self.nexthop_default)
    }

    #[inline]
    pub fn relay_addr_lookup(&self, dst: u32, dport: u16) -> RelayAddrAction {
        for (k, a) in &self.relay_addr {
            if k.dst == dst && k.lo <= dport && dport <= k.hi {
                return *a;
            }
        }
        self.relay_addr_default
    }

    #[inline]
    pub fn reroute_watch_lookup<A: WatchAddr>(&self, dst: A) -> RerouteWatchAction {
        let (index, default) = A::watch(self);
        longest_match(index, dst).unwrap_or(default)
    }

    #[inline]
    pub fn reroute_class_lookup(&self, class: u8) -> RerouteClassAction {
        self.reroute_class
            .get(&class)
            .copied()
            .unwrap_or(self.reroute_class_default)
    }

    /// Writes an entry of the watch list of `A`'s family (`reroute_watch`,
    /// `reroute_watch6`).
    pub fn reroute_watch_write<A: WatchAddr>(
        &mut self,
        prefix: A,
        len: u8,
        a: Option<RerouteWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        let (entries, index) = A::watch_mut(self);
        write_lpm(entries, index, prefix, len, a, insert)
    }

    pub fn reroute_class_write(
        &mut self,
        class: u8,
        a: Option<RerouteClassAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_map(&mut self.reroute_class, class, a, insert)
    }

    /// The `ired_port` entry of an egress port, if iRED is on there.
    #[inline]
    pub fn ired_lookup(&self, port: u16) -> Option<IredConfig> {
        self.ired_by_port.get(usize::from(port)).copied().flatten()
    }

    /// Writes an `ired_port` entry; `c` is validated by the caller (it needs
    /// the switch's ports).
    pub fn ired_port_write(
        &mut self,
        port: u16,
        c: Option<IredConfig>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_port(
            "ired_port",
            &mut self.ired_port,
            Some(&mut self.ired_by_port),
            port,
            c,
            insert,
        )
    }

    /// `ired_spare`: whether the first (highest priority) entry that
    /// matches the packet's DSCP and UDP ports (0, 0 for anything but UDP)
    /// spares it.
    #[inline]
    pub fn ired_spare_lookup(&self, dscp: u8, sport: u16, dport: u16) -> bool {
        self.ired_spare
            .iter()
            .find(|(k, _)| {
                dscp & k.dscp.1 == k.dscp.0
                    && sport & k.sport.1 == k.sport.0
                    && dport & k.dport.1 == k.dport.0
            })
            .map_or(self.ired_spare_default, |(_, a)| *a)
            == IredSpareAction::Spare
    }

    /// A DSCP wider than 6 bits, or a value with bits outside its mask (an
    /// entry that never matches what its writer meant): refused.
    pub fn ired_spare_write(
        &mut self,
        k: IredSpareKey,
        a: Option<IredSpareAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        if k.dscp.0 > 0x3f || k.dscp.1 > 0x3f {
            return Err(TableError::Invalid(format!(
                "ired_spare: dscp {:#x}/{:#x} wider than 6 bits",
                k.dscp.0, k.dscp.1
            )));
        }
        if k.dscp.0 & !k.dscp.1 != 0 || k.sport.0 & !k.sport.1 != 0 || k.dport.0 & !k.dport.1 != 0 {
            return Err(TableError::Invalid(
                "ired_spare: a value has bits outside its mask".into(),
            ));
        }
        write_map(&mut self.ired_spare, k, a, insert)
    }

    /// `int_watch`: the first (highest priority) entry that matches.
    #[inline]
    pub fn int_watch_lookup(&self, f: &IntWatchFields) -> IntWatchAction {
        if self.int_watch.is_empty() {
            return self.int_watch_default;
        }
        for (k, a) in &self.int_watch {
            if k.matches(f) {
                return *a;
            }
        }
        self.int_watch_default
    }

    pub fn int_watch_write(
        &mut self,
        k: IntWatchKey,
        a: Option<IntWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_map(&mut self.int_watch, k, a, insert)
    }

    /// `int_watch6`: the longest prefix of the IPv6 destination.
    #[inline]
    pub fn int_watch6_lookup(&self, dst: u128) -> IntWatchAction {
        longest_match(&self.int_watch6_by_len, dst).unwrap_or(self.int_watch6_default)
    }

    pub fn int_watch6_write(
        &mut self,
        prefix: u128,
        len: u8,
        a: Option<IntWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_lpm(
            &mut self.int_watch6,
            &mut self.int_watch6_by_len,
            prefix,
            len,
            a,
            insert,
        )
    }

    #[inline]
    pub fn int_role_lookup(&self, nexthop_id: u16) -> IntRoleAction {
        self.int_role
            .get(&nexthop_id)
            .copied()
            .unwrap_or(self.int_role_default)
    }

    pub fn int_role_write(
        &mut self,
        nexthop_id: u16,
        a: Option<IntRoleAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_map(&mut self.int_role, nexthop_id, a, insert)
    }

    /// This switch's hop on an egress port, if the port adds one.
    #[inline]
    pub fn int_hop_lookup(&self, port: u16) -> Option<IntHop> {
        self.int_hop_by_port
            .get(usize::from(port))
            .copied()
            .flatten()
    }

    pub fn int_hop_config_write(
        &mut self,
        port: u16,
        h: Option<IntHop>,
        insert: bool,
    ) -> Result<(), TableError> {
        let index = Some(&mut self.int_hop_by_port);
        write_port(
            "int_hop_config",
            &mut self.int_hop_config,
            index,
            port,
            h,
            insert,
        )
    }

    #[inline]
    pub fn int_report_lookup(&self, port: u16) -> Option<IntReportEncap> {
        self.int_report.get(&port).copied()
    }

    /// The port the report session sends its copies to: the collector's,
    /// the (lowest) port with an `int_report` entry.
    #[inline]
    pub fn int_report_port(&self) -> Option<u16> {
        self.int_report.keys().next().copied()
    }

    pub fn int_report_write(
        &mut self,
        port: u16,
        e: Option<IntReportEncap>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_port("int_report", &mut self.int_report, None, port, e, insert)
    }

    pub fn lpm_write(
        &mut self,
        prefix: u32,
        len: u8,
        a: Option<LpmAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_lpm(&mut self.lpm, &mut self.lpm_by_len, prefix, len, a, insert)
    }

    pub fn nexthop_write(
        &mut self,
        id: u16,
        a: Option<NexthopAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_map(&mut self.nexthop, id, a, insert)
    }

    pub fn relay_addr_write(
        &mut self,
        k: RelayAddrKey,
        a: Option<RelayAddrAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        if k.lo > k.hi {
            return Err(TableError::Invalid(format!(
                "port range {}..{} is empty",
                k.lo, k.hi
            )));
        }
        write_map(&mut self.relay_addr, k, a, insert)
    }
}

/// Writes a per-egress-port table's entry (`ired_port`, `int_hop_config`,
/// `int_report`), refusing ports beyond the switch's, and refreshes the
/// port's slot in the data-path index where the table has one.
fn write_port<A: Copy>(
    table: &str,
    entries: &mut BTreeMap<u16, A>,
    index: Option<&mut [Option<A>; PORTS]>,
    port: u16,
    a: Option<A>,
    insert: bool,
) -> Result<(), TableError> {
    if usize::from(port) >= PORTS {
        return Err(TableError::Invalid(format!(
            "{table}: port {port} is not a port of this switch"
        )));
    }
    write_map(entries, port, a, insert)?;
    if let Some(index) = index {
        index[usize::from(port)] = entries.get(&port).copied();
    }
    Ok(())
}

/// Snapshot holder: lock-free reads, serialized copy-on-write updates.
pub struct SmallStore {
    current: ArcSwap<SmallTables>,
    writer: Mutex<()>,
}

impl Default for SmallStore {
    fn default() -> Self {
        SmallStore {
            current: ArcSwap::from_pointee(SmallTables::default()),
            writer: Mutex::new(()),
        }
    }
}

impl SmallStore {
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Arc<SmallTables>> {
        self.current.load()
    }

    pub fn load_full(&self) -> Arc<SmallTables> {
        self.current.load_full()
    }

    /// Applies `f` to a copy and publishes it if `f` succeeds.
    pub fn update<R>(
        &self,
        f: impl FnOnce(&mut SmallTables) -> Result<R, TableError>,
    ) -> Result<R, TableError> {
        let _w = self.writer.lock();
        let mut next = (**self.current.load()).clone();
        let r = f(&mut next)?;
        self.current.store(Arc::new(next));
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lpm_longest_prefix_wins_and_default_applies() {
        let s = SmallStore::default();
        s.update(|t| {
            t.lpm_write(0xc612_0000, 16, Some(LpmAction::SetNexthop(1)), true)?;
            t.lpm_write(0xc612_01ff, 24, Some(LpmAction::SetNexthop(2)), true)?;
            t.lpm_write(0, 0, Some(LpmAction::SetNexthop(9)), true)
        })
        .unwrap();
        let t = s.load();
        assert_eq!(t.lpm_lookup(0xc612_0105), LpmAction::SetNexthop(2));
        assert_eq!(t.lpm_lookup(0xc612_0205), LpmAction::SetNexthop(1));
        assert_eq!(t.lpm_lookup(0x0a00_0001), LpmAction::SetNexthop(9));
        assert!(t.lpm.contains_key(&(0xc612_0100, 24)));
        let r = s.update(|t| t.lpm_write(0xc612_0100, 24, Some(LpmAction::Drop), true));
        assert_eq!(r, Err(TableError::AlreadyExists));
        s.update(|t| t.lpm_write(0, 0, None, false)).unwrap();
        assert_eq!(s.load().lpm_lookup(0x0a00_0001), LpmAction::Drop);
        assert_eq!(
            s.update(|t| t.lpm_write(0, 0, None, false)),
            Err(TableError::NotFound)
        );
    }

    #[test]
    fn relay_addr_priority_and_range() {
        let s = SmallStore::default();
        s.update(|t| {
            t.relay_addr_write(
                RelayAddrKey {
                    priority: 10,
                    dst: 5,
                    lo: 20000,
                    hi: 29999,
                },
                Some(RelayAddrAction::MarkRelay),
                true,
            )?;
            t.relay_addr_write(
                RelayAddrKey {
                    priority: 1,
                    dst: 5,
                    lo: 25000,
                    hi: 25000,
                },
                Some(RelayAddrAction::NoAction),
                true,
            )
        })
        .unwrap();
        let t = s.load();
        assert_eq!(t.relay_addr_lookup(5, 20000), RelayAddrAction::MarkRelay);
        assert_eq!(t.relay_addr_lookup(5, 25000), RelayAddrAction::NoAction);
        assert_eq!(t.relay_addr_lookup(5, 30000), RelayAddrAction::NoAction);
        assert_eq!(t.relay_addr_lookup(6, 20000), RelayAddrAction::NoAction);
        assert!(s
            .update(|t| t.relay_addr_write(
                RelayAddrKey {
                    priority: 0,
                    dst: 0,
                    lo: 5,
                    hi: 4
                },
                Some(RelayAddrAction::NoAction),
                true
            ))
            .is_err());
    }

    fn cfg(max: u32, n_drop: u32) -> IredConfig {
        IredConfig {
            max_len_queue: max,
            n_drop,
            ewma_n: 1,
            tail_drop: false,
            protect: false,
        }
    }

    #[test]
    fn thresholds_follow_table_one() {
        // Table I (packets): 64/4 -> 28/56 ... 512/32 -> 224/448; 1024/64 -> 448/896
        for (max, n, lo, hi) in [
            (64, 4, 28, 56),
            (128, 8, 56, 112),
            (256, 16, 112, 224),
            (512, 32, 224, 448),
            (1024, 64, 448, 896),
        ] {
            let c = cfg(max, n);
            assert_eq!((c.min_thsld(), c.max_thsld()), (lo, hi));
            assert!(c.validate(4).is_ok());
        }
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(cfg(64, 32).validate(4).unwrap_err().contains("n_drop"));
        assert!(cfg(64, 0).validate(4).is_err());
        let mut c = cfg(64, 4);
        c.ewma_n = 5;
        assert!(c.validate(4).unwrap_err().contains("ewma_n"));
        c.ewma_n = 0;
        assert!(c.validate(4).is_err());
    }
}
