//! The big exact-match tables (`relay`, `relay_guard`): one implementation,
//! generic over the key and the action word.
//!
//! Memory is the design constraint (4M entries in well under 512 MiB): each
//! shard is a linear-probing index of u32 slot numbers (4 bytes/slot, load
//! ≤ 0.7) into a dense array of entries that hold the key, the action word
//! and the TTL (no counters: the contract counts per leg, in leg_rewrite and
//! guard_drops). Both arrays are allocated up front but only touched as
//! entries arrive, so resident memory follows the number of entries. A
//! table without idle timeouts (`relay_guard`) keeps no TTL and no last-hit
//! time in its entries ([`Untimed`]): 8 bytes less per entry and no store per
//! hit.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

use parking_lot::RwLock;

use super::TableError;

/// A match key: small, comparable, with a well-mixed 64-bit hash.
pub trait ExactKey: Copy + Eq + std::fmt::Debug {
    fn hash64(&self) -> u64;
}

/// An action encoded in the entry's 32-bit action word. Bit 31 is reserved
/// (idle-notification state), so encodings use bits 0..=30.
pub trait ActionWord: Copy + Eq + std::fmt::Debug {
    fn encode(self) -> u32;
    fn decode(w: u32) -> Self;
}

/// Idle-timeout notification sent; cleared when the entry is hit again.
const IDLE_BIT: u32 = 1 << 31;

/// What an entry keeps for its idle timeout.
pub trait IdleTimer: std::fmt::Debug + Send + Sync + Sized {
    /// Whether the table has idle timeouts at all.
    const TIMED: bool;
    fn new(ttl_ms: u32, now_ms: u32) -> Self;
    fn ttl_ms(&self) -> u32;
    fn set_ttl(&mut self, ttl_ms: u32);
    fn last_hit_ms(&self) -> Option<u32>;
    fn hit(&self, now_ms: u32);
}

/// An idle timeout (0: none) and the time of the last hit.
#[derive(Debug)]
pub struct Timed {
    ttl_ms: u32,
    last_hit_ms: AtomicU32,
}

impl IdleTimer for Timed {
    const TIMED: bool = true;
    #[inline]
    fn new(ttl_ms: u32, now_ms: u32) -> Timed {
        Timed {
            ttl_ms,
            last_hit_ms: AtomicU32::new(now_ms),
        }
    }
    #[inline]
    fn ttl_ms(&self) -> u32 {
        self.ttl_ms
    }
    #[inline]
    fn set_ttl(&mut self, ttl_ms: u32) {
        self.ttl_ms = ttl_ms;
    }
    #[inline]
    fn last_hit_ms(&self) -> Option<u32> {
        Some(self.last_hit_ms.load(Relaxed))
    }
    #[inline]
    fn hit(&self, now_ms: u32) {
        self.last_hit_ms.store(now_ms, Relaxed);
    }
}

/// A table without idle timeouts: nothing kept, nothing stored per hit.
#[derive(Debug)]
pub struct Untimed;

impl IdleTimer for Untimed {
    const TIMED: bool = false;
    #[inline]
    fn new(_: u32, _: u32) -> Untimed {
        Untimed
    }
    #[inline]
    fn ttl_ms(&self) -> u32 {
        0
    }
    #[inline]
    fn set_ttl(&mut self, _: u32) {}
    #[inline]
    fn last_hit_ms(&self) -> Option<u32> {
        None
    }
    #[inline]
    fn hit(&self, _: u32) {}
}

#[derive(Debug)]
struct Entry<K, T> {
    key: K,
    action: AtomicU32,
    timer: T,
}

/// What a Read returns for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot<K, A> {
    pub key: K,
    pub action: A,
    pub ttl_ms: u32,
    /// ms since the entry was last hit (or installed); 0 in a table
    /// without idle timeouts.
    pub idle_ms: u32,
}

#[derive(Debug)]
struct Shard<K, T> {
    index: Vec<u32>,
    mask: usize,
    entries: Vec<Entry<K, T>>,
    cap: usize,
    with_ttl: usize,
}

impl<K: ExactKey, T: IdleTimer> Shard<K, T> {
    fn new(cap: usize) -> Shard<K, T> {
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
    fn find(&self, key: &K, h: u64) -> (usize, Option<usize>) {
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
            let home = (self.entries[i as usize - 1].key.hash64() as usize) & self.mask;
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

pub struct ExactTable<K, A, T = Timed> {
    shards: Box<[RwLock<Shard<K, T>>]>,
    shard_shift: u32,
    capacity: usize,
    len: AtomicUsize,
    _action: std::marker::PhantomData<A>,
}

impl<K: ExactKey, A: ActionWord, T: IdleTimer> ExactTable<K, A, T> {
    pub fn new(capacity: usize) -> ExactTable<K, A, T> {
        let nshards = (capacity / 4096).next_power_of_two().clamp(1, 256);
        // Slack per shard so uneven hashing does not fill one shard early;
        // the global count enforces the advertised size exactly.
        let per = capacity.div_ceil(nshards) * 21 / 20 + 64;
        let shards = (0..nshards).map(|_| RwLock::new(Shard::new(per))).collect();
        ExactTable {
            shards,
            shard_shift: 64 - nshards.trailing_zeros(),
            capacity,
            len: AtomicUsize::new(0),
            _action: std::marker::PhantomData,
        }
    }

    #[inline]
    fn shard(&self, h: u64) -> &RwLock<Shard<K, T>> {
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

    /// Data path: match, refresh the idle timer.
    #[inline]
    pub fn lookup(&self, key: &K, now_ms: u32) -> Option<A> {
        let h = key.hash64();
        let shard = self.shard(h).read();
        let (_, i) = shard.find(key, h);
        let e = &shard.entries[i?];
        e.timer.hit(now_ms);
        let mut w = e.action.load(Relaxed);
        if w & IDLE_BIT != 0 {
            w = e.action.fetch_and(!IDLE_BIT, Relaxed);
        }
        Some(A::decode(w & !IDLE_BIT))
    }

    pub fn insert(&self, key: K, action: A, ttl_ms: u32, now_ms: u32) -> Result<(), TableError> {
        Self::check_ttl(ttl_ms)?;
        let h = key.hash64();
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
            timer: T::new(ttl_ms, now_ms),
        });
        shard.index[slot] = shard.entries.len() as u32;
        if ttl_ms > 0 {
            shard.with_ttl += 1;
        }
        Ok(())
    }

    /// MODIFY: new action and/or TTL; the idle timer restarts.
    pub fn modify(
        &self,
        key: &K,
        action: Option<A>,
        ttl_ms: Option<u32>,
        now_ms: u32,
    ) -> Result<(), TableError> {
        Self::check_ttl(ttl_ms.unwrap_or(0))?;
        let h = key.hash64();
        let mut shard = self.shard(h).write();
        let i = shard.find(key, h).1.ok_or(TableError::NotFound)?;
        let old_ttl = shard.entries[i].timer.ttl_ms();
        if let Some(t) = ttl_ms {
            shard.entries[i].timer.set_ttl(t);
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
        e.timer.hit(now_ms);
        Ok(())
    }

    /// An idle timeout for a table that has none is refused.
    fn check_ttl(ttl_ms: u32) -> Result<(), TableError> {
        if ttl_ms != 0 && !T::TIMED {
            return Err(TableError::Invalid(format!(
                "idle timeout {ttl_ms} ms: this table has no idle timeouts"
            )));
        }
        Ok(())
    }

    pub fn delete(&self, key: &K) -> Result<(), TableError> {
        let h = key.hash64();
        let mut shard = self.shard(h).write();
        let (slot, i) = shard.find(key, h);
        let i = i.ok_or(TableError::NotFound)?;
        shard.remove_slot(slot);
        if shard.entries[i].timer.ttl_ms() > 0 {
            shard.with_ttl -= 1;
        }
        shard.entries.swap_remove(i);
        if i < shard.entries.len() {
            // The former last entry now lives at i: repoint its slot.
            let moved = shard.entries[i].key;
            let mh = moved.hash64();
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

    fn snapshot(e: &Entry<K, T>, now_ms: u32) -> Snapshot<K, A> {
        Snapshot {
            key: e.key,
            action: A::decode(e.action.load(Relaxed) & !IDLE_BIT),
            ttl_ms: e.timer.ttl_ms(),
            idle_ms: e
                .timer
                .last_hit_ms()
                .map_or(0, |last| now_ms.wrapping_sub(last)),
        }
    }

    pub fn get(&self, key: &K, now_ms: u32) -> Option<Snapshot<K, A>> {
        let h = key.hash64();
        let shard = self.shard(h).read();
        let i = shard.find(key, h).1?;
        Some(Self::snapshot(&shard.entries[i], now_ms))
    }

    /// Visits every entry, one shard read lock at a time.
    pub fn for_each(&self, now_ms: u32, mut f: impl FnMut(Snapshot<K, A>)) {
        for s in self.shards.iter() {
            let s = s.read();
            for e in &s.entries {
                f(Self::snapshot(e, now_ms));
            }
        }
    }

    /// Idle sweep: entries with a TTL idle for at least TTL are reported once
    /// (until hit again), as Tofino's notify mode does.
    pub fn sweep_idle(&self, now_ms: u32, expired: impl FnMut(K)) {
        self.sweep_idle_with(now_ms, |_| None, expired)
    }

    /// `sweep_idle`, where `hit_elsewhere` tells when a key was last hit
    /// outside this table (the XDP fast path): a later hit there counts.
    pub fn sweep_idle_with(
        &self,
        now_ms: u32,
        hit_elsewhere: impl Fn(&K) -> Option<u32>,
        mut expired: impl FnMut(K),
    ) {
        for s in self.shards.iter() {
            let s = s.read();
            if s.with_ttl == 0 {
                continue;
            }
            for e in &s.entries {
                let idle = |last: u32| now_ms.wrapping_sub(last);
                let (ttl, Some(last)) = (e.timer.ttl_ms(), e.timer.last_hit_ms()) else {
                    continue;
                };
                if ttl == 0 || idle(last) < ttl {
                    continue;
                }
                if let Some(t) = hit_elsewhere(&e.key) {
                    if idle(t) < ttl {
                        e.timer.hit(t);
                        e.action.fetch_and(!IDLE_BIT, Relaxed);
                        continue;
                    }
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
    use crate::tables::guard::GuardKey;
    use std::mem::size_of;

    #[test]
    fn an_entry_without_idle_timeouts_is_its_key_and_action_word() {
        assert_eq!(size_of::<Entry<GuardKey, Untimed>>(), 12);
        assert_eq!(size_of::<Entry<GuardKey, Timed>>(), 20);
    }
}
