//! The maps the small tables keep their entries in (`MapLike`), their write
//! rule, and the LPM tables' data-path index (`ipv4_lpm`, `reroute_watch`,
//! `ipv6_lpm`), over either family's address.

use std::collections::{BTreeMap, HashMap};

use super::TableError;
use crate::packet::family::Addr;

/// The network mask of a prefix `len` bits long, either family's.
#[inline]
pub fn prefix_mask<A: Addr>(len: u8) -> A {
    A::mask(len)
}

/// An LPM table's key: the prefix with its host bits cleared, and its length.
pub fn prefix_key<A: Addr>(prefix: A, len: u8) -> Result<(A, u8), TableError> {
    if len > A::BITS {
        return Err(TableError::Invalid(format!(
            "prefix length {len} > {}",
            A::BITS
        )));
    }
    Ok((prefix.and(prefix_mask(len)), len))
}

/// An LPM table's data-path index (either family's address `A`, action
/// `V`): one hash map per prefix length in use, longest first.
pub type ByLen<A, V> = Vec<(u8, HashMap<A, V>)>;

fn index_by_len<A: Addr, V: Copy>(entries: &BTreeMap<(A, u8), V>) -> ByLen<A, V> {
    let mut by_len: BTreeMap<u8, HashMap<A, V>> = BTreeMap::new();
    for (&(p, l), &a) in entries {
        by_len.entry(l).or_default().insert(p, a);
    }
    by_len.into_iter().rev().collect()
}

#[inline]
pub fn longest_match<A: Addr, V: Copy>(by_len: &ByLen<A, V>, dst: A) -> Option<V> {
    by_len
        .iter()
        .find_map(|(len, m)| m.get(&dst.and(prefix_mask(*len))).copied())
}

/// A small table's entries, whichever map holds them: what writes and reads
/// of any small table need.
pub trait MapLike<K, V> {
    fn has(&self, k: &K) -> bool;
    fn find(&self, k: &K) -> Option<&V>;
    fn put(&mut self, k: K, v: V);
    fn del(&mut self, k: &K);
    /// Every entry, sorted by key (as reads return them).
    fn sorted(&self) -> Vec<(&K, &V)>;
    fn count(&self) -> usize;
}
impl<K: Ord, V> MapLike<K, V> for BTreeMap<K, V> {
    fn has(&self, k: &K) -> bool {
        self.contains_key(k)
    }
    fn find(&self, k: &K) -> Option<&V> {
        self.get(k)
    }
    fn put(&mut self, k: K, v: V) {
        self.insert(k, v);
    }
    fn del(&mut self, k: &K) {
        self.remove(k);
    }
    fn sorted(&self) -> Vec<(&K, &V)> {
        self.iter().collect()
    }
    fn count(&self) -> usize {
        self.len()
    }
}
impl<K: std::hash::Hash + Ord, V> MapLike<K, V> for HashMap<K, V> {
    fn has(&self, k: &K) -> bool {
        self.contains_key(k)
    }
    fn find(&self, k: &K) -> Option<&V> {
        self.get(k)
    }
    fn put(&mut self, k: K, v: V) {
        self.insert(k, v);
    }
    fn del(&mut self, k: &K) {
        self.remove(k);
    }
    fn sorted(&self) -> Vec<(&K, &V)> {
        let mut all: Vec<_> = self.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all
    }
    fn count(&self) -> usize {
        self.len()
    }
}

/// Insert (must not exist), modify (must exist), delete (`a` = None; must exist).
pub fn write_map<K, V>(
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

/// Writes an LPM table's entry (`ipv4_lpm`, `reroute_watch`, `ipv6_lpm`)
/// and rebuilds its data-path index.
pub fn write_lpm<A: Addr, V: Copy>(
    entries: &mut BTreeMap<(A, u8), V>,
    index: &mut ByLen<A, V>,
    prefix: A,
    len: u8,
    a: Option<V>,
    insert: bool,
) -> Result<(), TableError> {
    write_map(entries, prefix_key(prefix, len)?, a, insert)?;
    *index = index_by_len(entries);
    Ok(())
}
