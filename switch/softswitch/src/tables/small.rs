//! The small, rarely written tables: `ipv4_lpm`, `nexthop`, `relay_addr`,
//! `reroute_watch`, `reroute_class`, and Egress's `ired_port`.
//! The data path reads an immutable snapshot; each write publishes a new one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::TableError;
use crate::pipeline::ired::IredConfig;

/// dev_ports `ired_port` can name (contract max_ports).
pub const IRED_PORTS: usize = 64;

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

/// `pipe.Ingress.reroute_watch`'s actions.
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
    },
    NoAction,
}

/// `pipe.Egress.reroute_class`'s actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerouteClassAction {
    Thresholds { t_q_ns: u32, m: u16, hold_ms: u32 },
    NoAction,
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
    /// Data-path index: one hash map per prefix length in use, longest first.
    lpm_by_len: Vec<(u8, HashMap<u32, LpmAction>)>,
    pub lpm_default: LpmAction,
    pub nexthop: HashMap<u16, NexthopAction>,
    pub nexthop_default: NexthopAction,
    /// Sorted by key, so by priority first.
    pub relay_addr: BTreeMap<RelayAddrKey, RelayAddrAction>,
    pub relay_addr_default: RelayAddrAction,
    /// (prefix, length) → action, and its data-path index, as for ipv4_lpm.
    pub reroute_watch: BTreeMap<(u32, u8), RerouteWatchAction>,
    watch_by_len: Vec<(u8, HashMap<u32, RerouteWatchAction>)>,
    pub reroute_watch_default: RerouteWatchAction,
    pub reroute_class: HashMap<u8, RerouteClassAction>,
    pub reroute_class_default: RerouteClassAction,
    /// `ired_port` entries by dev_port (the control-plane view) ...
    pub ired_port: BTreeMap<u16, IredConfig>,
    /// ... and the data path's index.
    ired_by_port: [Option<IredConfig>; IRED_PORTS],
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
            reroute_class: HashMap::new(),
            reroute_class_default: RerouteClassAction::NoAction,
            ired_port: BTreeMap::new(),
            ired_by_port: [None; IRED_PORTS],
        }
    }
}

pub fn prefix_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl SmallTables {
    #[inline]
    pub fn lpm_lookup(&self, dst: u32) -> LpmAction {
        for (len, m) in &self.lpm_by_len {
            if let Some(a) = m.get(&(dst & prefix_mask(*len))) {
                return *a;
            }
        }
        self.lpm_default
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
    pub fn reroute_watch_lookup(&self, dst: u32) -> RerouteWatchAction {
        for (len, m) in &self.watch_by_len {
            if let Some(a) = m.get(&(dst & prefix_mask(*len))) {
                return *a;
            }
        }
        self.reroute_watch_default
    }

    #[inline]
    pub fn reroute_class_lookup(&self, class: u8) -> RerouteClassAction {
        self.reroute_class
            .get(&class)
            .copied()
            .unwrap_or(self.reroute_class_default)
    }

    pub fn reroute_watch_write(
        &mut self,
        prefix: u32,
        len: u8,
        a: Option<RerouteWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        if len > 32 {
            return Err(TableError::Invalid(format!("prefix length {len} > 32")));
        }
        let k = (prefix & prefix_mask(len), len);
        write_map(&mut self.reroute_watch, k, a, insert)?;
        let mut by_len: BTreeMap<u8, HashMap<u32, RerouteWatchAction>> = BTreeMap::new();
        for (&(p, l), &a) in &self.reroute_watch {
            by_len.entry(l).or_default().insert(p, a);
        }
        self.watch_by_len = by_len.into_iter().rev().collect();
        Ok(())
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
        if usize::from(port) >= IRED_PORTS {
            return Err(TableError::Invalid(format!(
                "ired_port: port {port} is not a port of this switch"
            )));
        }
        write_map(&mut self.ired_port, port, c, insert)?;
        self.ired_by_port[usize::from(port)] = self.ired_port.get(&port).copied();
        Ok(())
    }

    fn reindex_lpm(&mut self) {
        let mut by_len: BTreeMap<u8, HashMap<u32, LpmAction>> = BTreeMap::new();
        for (&(p, l), &a) in &self.lpm {
            by_len.entry(l).or_default().insert(p, a);
        }
        self.lpm_by_len = by_len.into_iter().rev().collect();
    }

    pub fn lpm_write(
        &mut self,
        prefix: u32,
        len: u8,
        a: Option<LpmAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        if len > 32 {
            return Err(TableError::Invalid(format!("prefix length {len} > 32")));
        }
        let k = (prefix & prefix_mask(len), len);
        write_map(&mut self.lpm, k, a, insert)?;
        self.reindex_lpm();
        Ok(())
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

/// Insert (must not exist), modify (must exist), delete (`a` = None; must exist).
trait MapLike<K, V> {
    fn has(&self, k: &K) -> bool;
    fn put(&mut self, k: K, v: V);
    fn del(&mut self, k: &K);
}
impl<K: Ord, V> MapLike<K, V> for BTreeMap<K, V> {
    fn has(&self, k: &K) -> bool {
        self.contains_key(k)
    }
    fn put(&mut self, k: K, v: V) {
        self.insert(k, v);
    }
    fn del(&mut self, k: &K) {
        self.remove(k);
    }
}
impl<K: std::hash::Hash + Eq, V> MapLike<K, V> for HashMap<K, V> {
    fn has(&self, k: &K) -> bool {
        self.contains_key(k)
    }
    fn put(&mut self, k: K, v: V) {
        self.insert(k, v);
    }
    fn del(&mut self, k: &K) {
        self.remove(k);
    }
}

fn write_map<K, V>(
    m: &mut impl MapLike<K, V>,
    k: K,
    a: Option<V>,
    insert: bool,
) -> Result<(), TableError> {
    match (a, insert, m.has(&k)) {
        (Some(_), true, true) => Err(TableError::AlreadyExists),
        (Some(v), true, false) | (Some(v), false, true) => {
            m.put(k, v);
            Ok(())
        }
        (_, false, false) => Err(TableError::NotFound),
        (None, _, true) => {
            m.del(&k);
            Ok(())
        }
        (None, true, false) => Err(TableError::NotFound),
    }
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
}
