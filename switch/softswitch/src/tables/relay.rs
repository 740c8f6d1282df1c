//! `pipe.Ingress.relay`: exact match on (src addr, dst addr, src port, dst port).
//!
//! Memory is the design constraint (4M entries in well under 512 MiB): each
//! shard is a linear-probing index of u32 slot numbers (4 bytes/slot, load
//! ≤ 0.7) into a dense array of 40-byte entries that holds the 12-byte key,
//! the action word, the TTL and the direct counters. Both arrays are
//! allocated up front but only touched as entries arrive, so resident memory
//! follows the number of entries.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use parking_lot::RwLock;

use super::TableError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RelayKey {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
}

impl RelayKey {
    #[inline]
    fn hash(&self) -> u64 {
        let a = (u64::from(self.src) << 32) | u64::from(self.dst);
        let b = (u64::from(self.sport) << 16) | u64::from(self.dport);
        let h = (a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 29)
    }
}

/// `Ingress.relay_leg(leg, rtcp)`, or NoAction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayAction {
    Leg { leg: u32, rtcp: bool },
    NoAction,
}

const RTCP_BIT: u32 = 1 << 22;
const NOACTION_BIT: u32 = 1 << 23;
/// Idle-timeout notification sent; cleared when the entry is hit again.
const IDLE_BIT: u32 = 1 << 31;
const LEG_MASK: u32 = (1 << 22) - 1;

impl RelayAction {
    fn encode(self) -> u32 {
        match self {
            RelayAction::Leg { leg, rtcp } => (leg & LEG_MASK) | if rtcp { RTCP_BIT } else { 0 },
            RelayAction::NoAction => NOACTION_BIT,
        }
    }
    fn decode(w: u32) -> RelayAction {
        if w & NOACTION_BIT != 0 {
            RelayAction::NoAction
        } else {
            RelayAction::Leg {
                leg: w & LEG_MASK,
                rtcp: w & RTCP_BIT != 0,
            }
        }
    }
}

#[derive(Debug)]
struct Entry {
    key: RelayKey,
    action: AtomicU32,
    ttl_ms: u32,
    last_hit_ms: AtomicU32,
    pkts: AtomicU64,
    bytes: AtomicU64,
}

/// What a Read returns for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySnapshot {
    pub key: RelayKey,
    pub action: RelayAction,
    pub ttl_ms: u32,
    pub pkts: u64,
    pub bytes: u64,
    /// ms since the entry was last hit (or installed).
    pub idle_ms: u32,
}

#[derive(Debug)]
struct Shard {
    index: Vec<u32>,
    mask: usize,
    entries: Vec<Entry>,
    cap: usize,
    with_ttl: usize,
}

impl Shard {
    fn new(cap: usize) -> Shard {
        let slots = ((cap * 10 / 7) + 1).next_power_of_two().max(8);
        Shard {
            index: vec![0; slots],
            mask: slots - 1,
            entries: Vec::with_capacity(cap),
            cap,
            with_ttl: 0,
        }
    }

    /// (slot, entry index) of `key`, or the empty slot where it would go.
    #[inline]
    fn find(&self, key: &RelayKey, h: u64) -> (usize, Option<usize>) {
        let mut slot = (h as usize) & self.mask;
        loop {
            match self.index[slot] {
                0 => return (slot, None),
                i => {
                    let i = i as usize - 1;
                    if self.entries[i].key == *key {
                        return (slot, Some(i));
                    }
                }
            }
            slot = (slot + 1) & self.mask;
        }
    }

    fn remove_slot(&mut self, mut hole: usize) {
        // Backward-shift deletion keeps probe chains intact without tombstones.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let i = self.index[j];
            if i == 0 {
                break;
            }
            let home = (self.entries[i as usize - 1].key.hash() as usize) & self.mask;
            let dist_hole = hole.wrapping_sub(home) & self.mask;
            let dist_j = j.wrapping_sub(home) & self.mask;
            if dist_hole < dist_j {
                self.index[hole] = i;
                hole = j;
            }
        }
        self.index[hole] = 0;
    }
}

pub struct RelayTable {
    shards: Box<[RwLock<Shard>]>,
    shard_shift: u32,
    capacity: usize,
    len: AtomicUsize,
}

impl RelayTable {
    pub fn new(capacity: usize) -> RelayTable {
        let nshards = (capacity / 4096).next_power_of_two().clamp(1, 256);
        // Slack per shard so uneven hashing does not fill one shard early;
        // the global count enforces the advertised size exactly.
        let per = capacity.div_ceil(nshards) * 21 / 20 + 64;
        let shards = (0..nshards).map(|_| RwLock::new(Shard::new(per))).collect();
        RelayTable {
            shards,
            shard_shift: 64 - nshards.trailing_zeros(),
            capacity,
            len: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn shard(&self, h: u64) -> &RwLock<Shard> {
        if self.shards.len() == 1 {
            &self.shards[0]
        } else {
            &self.shards[(h >> self.shard_shift) as usize]
        }
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Data path: match, count, refresh the idle timer.
    #[inline]
    pub fn lookup(&self, key: &RelayKey, frame_len: u32, now_ms: u32) -> Option<RelayAction> {
        let h = key.hash();
        let shard = self.shard(h).read();
        let (_, i) = shard.find(key, h);
        let e = &shard.entries[i?];
        e.pkts.fetch_add(1, Relaxed);
        e.bytes.fetch_add(u64::from(frame_len), Relaxed);
        e.last_hit_ms.store(now_ms, Relaxed);
        let mut w = e.action.load(Relaxed);
        if w & IDLE_BIT != 0 {
            w = e.action.fetch_and(!IDLE_BIT, Relaxed);
        }
        Some(RelayAction::decode(w & !IDLE_BIT))
    }

    pub fn insert(
        &self,
        key: RelayKey,
        action: RelayAction,
        ttl_ms: u32,
        now_ms: u32,
    ) -> Result<(), TableError> {
        let h = key.hash();
        let mut shard = self.shard(h).write();
        let (slot, found) = shard.find(&key, h);
        if found.is_some() {
            return Err(TableError::AlreadyExists);
        }
        if shard.entries.len() >= shard.cap {
            return Err(TableError::Full(self.capacity));
        }
        if self.len.fetch_add(1, Relaxed) >= self.capacity {
            self.len.fetch_sub(1, Relaxed);
            return Err(TableError::Full(self.capacity));
        }
        shard.entries.push(Entry {
            key,
            action: AtomicU32::new(action.encode()),
            ttl_ms,
            last_hit_ms: AtomicU32::new(now_ms),
            pkts: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        });
        shard.index[slot] = shard.entries.len() as u32;
        if ttl_ms > 0 {
            shard.with_ttl += 1;
        }
        Ok(())
    }

    /// MODIFY: new action and/or TTL, optional counter values; the idle timer restarts.
    pub fn modify(
        &self,
        key: &RelayKey,
        action: Option<RelayAction>,
        ttl_ms: Option<u32>,
        counters: Option<(u64, u64)>,
        now_ms: u32,
    ) -> Result<(), TableError> {
        let h = key.hash();
        let mut shard = self.shard(h).write();
        let i = shard.find(key, h).1.ok_or(TableError::NotFound)?;
        let old_ttl = shard.entries[i].ttl_ms;
        if let Some(t) = ttl_ms {
            shard.entries[i].ttl_ms = t;
            match (old_ttl > 0, t > 0) {
                (false, true) => shard.with_ttl += 1,
                (true, false) => shard.with_ttl -= 1,
                _ => {}
            }
        }
        let e = &shard.entries[i];
        if let Some(a) = action {
            e.action.store(a.encode(), Relaxed);
        } else {
            e.action.fetch_and(!IDLE_BIT, Relaxed);
        }
        if let Some((b, p)) = counters {
            e.bytes.store(b, Relaxed);
            e.pkts.store(p, Relaxed);
        }
        e.last_hit_ms.store(now_ms, Relaxed);
        Ok(())
    }

    pub fn delete(&self, key: &RelayKey) -> Result<(), TableError> {
        let h = key.hash();
        let mut shard = self.shard(h).write();
        let (slot, i) = shard.find(key, h);
        let i = i.ok_or(TableError::NotFound)?;
        shard.remove_slot(slot);
        if shard.entries[i].ttl_ms > 0 {
            shard.with_ttl -= 1;
        }
        shard.entries.swap_remove(i);
        if i < shard.entries.len() {
            // The former last entry now lives at i: repoint its slot.
            let moved = shard.entries[i].key;
            let mh = moved.hash();
            let mut s = (mh as usize) & shard.mask;
            while shard.index[s] as usize != shard.entries.len() + 1 {
                s = (s + 1) & shard.mask;
            }
            shard.index[s] = i as u32 + 1;
        }
        self.len.fetch_sub(1, Relaxed);
        Ok(())
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.write();
            let n = s.entries.len();
            s.entries.clear();
            s.index.iter_mut().for_each(|x| *x = 0);
            s.with_ttl = 0;
            self.len.fetch_sub(n, Relaxed);
        }
    }

    fn snapshot(e: &Entry, now_ms: u32) -> EntrySnapshot {
        EntrySnapshot {
            key: e.key,
            action: RelayAction::decode(e.action.load(Relaxed) & !IDLE_BIT),
            ttl_ms: e.ttl_ms,
            pkts: e.pkts.load(Relaxed),
            bytes: e.bytes.load(Relaxed),
            idle_ms: now_ms.wrapping_sub(e.last_hit_ms.load(Relaxed)),
        }
    }

    pub fn get(&self, key: &RelayKey, now_ms: u32) -> Option<EntrySnapshot> {
        let h = key.hash();
        let shard = self.shard(h).read();
        let i = shard.find(key, h).1?;
        Some(Self::snapshot(&shard.entries[i], now_ms))
    }

    /// Visits every entry, one shard read lock at a time.
    pub fn for_each(&self, now_ms: u32, mut f: impl FnMut(EntrySnapshot)) {
        for s in self.shards.iter() {
            let s = s.read();
            for e in &s.entries {
                f(Self::snapshot(e, now_ms));
            }
        }
    }

    /// Idle sweep: entries with a TTL idle for at least TTL are reported once
    /// (until hit again), as Tofino's notify mode does.
    pub fn sweep_idle(&self, now_ms: u32, mut expired: impl FnMut(RelayKey)) {
        for s in self.shards.iter() {
            let s = s.read();
            if s.with_ttl == 0 {
                continue;
            }
            for e in &s.entries {
                if e.ttl_ms == 0 || now_ms.wrapping_sub(e.last_hit_ms.load(Relaxed)) < e.ttl_ms {
                    continue;
                }
                if e.action.fetch_or(IDLE_BIT, Relaxed) & IDLE_BIT == 0 {
                    expired(e.key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn k(i: u32) -> RelayKey {
        RelayKey {
            src: 0xc612_0000 | (i >> 8),
            dst: 0xc612_000a,
            sport: (i & 0xffff) as u16,
            dport: 20000 + (i % 7) as u16,
        }
    }

    #[test]
    fn insert_lookup_delete_against_model() {
        let t = RelayTable::new(20_000);
        let mut model = HashMap::new();
        // pseudo-random insert/delete mix
        let mut x: u32 = 12345;
        for _ in 0..60_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let key = k((x >> 8) % 30_000);
            if x & 3 == 0 {
                assert_eq!(t.delete(&key).is_ok(), model.remove(&key).is_some());
            } else {
                let a = RelayAction::Leg {
                    leg: x & 0xfffff,
                    rtcp: x & 16 != 0,
                };
                let r = t.insert(key, a, 0, 0);
                match model.entry(key) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        assert_eq!(r, Err(TableError::AlreadyExists))
                    }
                    std::collections::hash_map::Entry::Vacant(v) => match r {
                        Ok(()) => {
                            v.insert(a);
                        }
                        Err(e) => assert!(matches!(e, TableError::Full(_))),
                    },
                }
            }
        }
        assert_eq!(t.len(), model.len());
        for (key, a) in &model {
            assert_eq!(t.lookup(key, 100, 1), Some(*a));
        }
        assert_eq!(t.lookup(&k(99_999), 100, 1), None);
        let mut n = 0;
        t.for_each(1, |e| {
            assert_eq!(e.pkts, 1);
            assert_eq!(e.bytes, 100);
            n += 1;
        });
        assert_eq!(n, model.len());
    }

    #[test]
    fn full_table_is_reported_and_recovers() {
        let t = RelayTable::new(100);
        for i in 0..100 {
            t.insert(k(i), RelayAction::NoAction, 0, 0).unwrap();
        }
        assert_eq!(
            t.insert(k(100), RelayAction::NoAction, 0, 0),
            Err(TableError::Full(100))
        );
        assert_eq!(t.len(), 100);
        t.delete(&k(5)).unwrap();
        t.insert(k(100), RelayAction::NoAction, 0, 0).unwrap();
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn idle_entries_are_reported_once_until_hit() {
        let t = RelayTable::new(10);
        t.insert(
            k(1),
            RelayAction::Leg {
                leg: 3,
                rtcp: false,
            },
            1000,
            0,
        )
        .unwrap();
        t.insert(
            k(2),
            RelayAction::Leg {
                leg: 4,
                rtcp: false,
            },
            0,
            0,
        )
        .unwrap();
        let mut got = vec![];
        t.sweep_idle(999, |k| got.push(k));
        assert!(got.is_empty());
        t.sweep_idle(1000, |k| got.push(k));
        t.sweep_idle(5000, |k| got.push(k));
        assert_eq!(got, vec![k(1)]);
        assert_eq!(
            t.lookup(&k(1), 60, 6000),
            Some(RelayAction::Leg {
                leg: 3,
                rtcp: false
            })
        );
        t.sweep_idle(7000, |k| got.push(k));
        assert_eq!(got.len(), 2);
        t.modify(&k(1), None, Some(0), Some((0, 0)), 7000).unwrap();
        t.sweep_idle(99_000, |k| got.push(k));
        assert_eq!(got.len(), 2);
        assert_eq!(t.get(&k(1), 7000).unwrap().pkts, 0);
    }
}
