//! `pipe.Ingress.leg_rewrite6`: leg → `rewrite6(src_addr, dst_addr,
//! src_port, dst_port)` with 128-bit addresses, and the table's direct
//! counter. Legs are one index space for both families (the quality
//! registers and guard_drops are shared): a leg has its rewrite here or in
//! `leg_rewrite` (legs.rs), never both.
//!
//! Unlike leg_rewrite this table holds far fewer entries than there are
//! legs (as on the Tofino, where it is an exact-match table of its own
//! size), so a per-leg index (4 bytes a leg) points into a slab of
//! `capacity` slots. Each slot is a seqlock over its fields and the leg it
//! belongs to, so the data path reads a consistent rewrite without waiting
//! and never takes a slot just handed to another leg as its own.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use parking_lot::Mutex;

use super::legs::{LegRewrites, RewriteOf};
use super::TableError;

/// `Ingress.rewrite6`'s parameters.
pub type Rewrite6 = RewriteOf<u128>;

const WRITING: u32 = 1;
const VALID: u32 = 2;
/// Fields of a slot: src (4 words), dst (4), ports.
const WORDS: usize = 9;

#[derive(Debug, Default)]
struct Slot {
    seq: AtomicU32,
    leg: AtomicU32,
    words: [AtomicU32; WORDS],
    pkts: AtomicU64,
    bytes: AtomicU64,
}

fn to_words(r: &Rewrite6) -> [u32; WORDS] {
    let mut w = [0u32; WORDS];
    for i in 0..4 {
        w[i] = (r.src >> (96 - 32 * i)) as u32;
        w[4 + i] = (r.dst >> (96 - 32 * i)) as u32;
    }
    w[8] = (u32::from(r.sport) << 16) | u32::from(r.dport);
    w
}

fn from_words(w: &[u32; WORDS]) -> Rewrite6 {
    let addr = |o: usize| (0..4).fold(0u128, |a, i| (a << 32) | u128::from(w[o + i]));
    Rewrite6 {
        src: addr(0),
        dst: addr(4),
        sport: (w[8] >> 16) as u16,
        dport: w[8] as u16,
    }
}

/// Writers' state: which slots are free.
#[derive(Debug)]
struct Alloc {
    free: Vec<u32>,
}

pub struct Leg6Table {
    /// leg → slot + 1 (0: no entry).
    index: Vec<AtomicU32>,
    slots: Vec<Slot>,
    len: AtomicUsize,
    writer: Mutex<Alloc>,
}

impl Leg6Table {
    /// A table of `capacity` entries over legs `0..legs`.
    pub fn new(legs: usize, capacity: usize) -> Leg6Table {
        let mut index = Vec::with_capacity(legs);
        index.resize_with(legs, AtomicU32::default);
        let mut slots = Vec::with_capacity(capacity);
        slots.resize_with(capacity, Slot::default);
        Leg6Table {
            index,
            slots,
            len: AtomicUsize::new(0),
            writer: Mutex::new(Alloc {
                free: (0..capacity as u32).rev().collect(),
            }),
        }
    }

    /// Entries the table can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Legs it is keyed on (the shared leg space).
    pub fn legs(&self) -> usize {
        self.index.len()
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn slot_of(&self, leg: u32) -> Option<&Slot> {
        match self.index.get(leg as usize)?.load(Acquire) {
            0 => None,
            i => self.slots.get(i as usize - 1),
        }
    }

    #[inline]
    pub fn get(&self, leg: u32) -> Option<Rewrite6> {
        let s = self.slot_of(leg)?;
        loop {
            let s1 = s.seq.load(Acquire);
            if s1 & WRITING != 0 {
                std::hint::spin_loop();
                continue;
            }
            let owner = s.leg.load(Relaxed);
            let mut w = [0u32; WORDS];
            for (o, a) in w.iter_mut().zip(&s.words) {
                *o = a.load(Relaxed);
            }
            fence(Acquire);
            if s.seq.load(Relaxed) == s1 {
                return (s1 & VALID != 0 && owner == leg).then(|| from_words(&w));
            }
        }
    }

    fn store(s: &Slot, leg: u32, v: Option<&Rewrite6>) {
        let seq = s.seq.load(Relaxed);
        s.seq.store(seq | WRITING, Relaxed);
        fence(Release);
        s.leg.store(leg, Relaxed);
        let w = v.map_or([0; WORDS], to_words);
        for (a, x) in s.words.iter().zip(w) {
            a.store(x, Relaxed);
        }
        let next = ((seq >> 2).wrapping_add(1) << 2) | if v.is_some() { VALID } else { 0 };
        s.seq.store(next, Release);
    }

    fn check(&self, leg: u32) -> Result<(), TableError> {
        if (leg as usize) < self.index.len() {
            Ok(())
        } else {
            Err(TableError::Invalid(format!(
                "leg {leg} out of range (legs = {})",
                self.index.len()
            )))
        }
    }

    /// The direct counter: one packet of `frame_len` bytes rewritten by `leg`.
    #[inline]
    pub fn count(&self, leg: u32, frame_len: u32) {
        if let Some(s) = self.slot_of(leg) {
            s.pkts.fetch_add(1, Relaxed);
            s.bytes.fetch_add(u64::from(frame_len), Relaxed);
        }
    }

    /// The leg's (packets, bytes); (0, 0) without an entry.
    pub fn counts(&self, leg: u32) -> (u64, u64) {
        self.slot_of(leg)
            .map_or((0, 0), |s| (s.pkts.load(Relaxed), s.bytes.load(Relaxed)))
    }

    /// Sets the leg's counter (a Write naming `$COUNTER_SPEC_*`, or an undo).
    pub fn set_counts(&self, leg: u32, pkts: u64, bytes: u64) {
        if let Some(s) = self.slot_of(leg) {
            s.pkts.store(pkts, Relaxed);
            s.bytes.store(bytes, Relaxed);
        }
    }

    pub fn insert(&self, leg: u32, r: Rewrite6) -> Result<(), TableError> {
        self.check(leg)?;
        let mut alloc = self.writer.lock();
        if self.get(leg).is_some() {
            return Err(TableError::AlreadyExists);
        }
        let Some(i) = alloc.free.pop() else {
            return Err(TableError::Full(self.slots.len()));
        };
        let s = &self.slots[i as usize];
        s.pkts.store(0, Relaxed);
        s.bytes.store(0, Relaxed);
        Self::store(s, leg, Some(&r));
        self.index[leg as usize].store(i + 1, Release);
        self.len.fetch_add(1, Relaxed);
        Ok(())
    }

    pub fn modify(&self, leg: u32, r: Rewrite6) -> Result<(), TableError> {
        self.check(leg)?;
        let _w = self.writer.lock();
        let s = self.slot_of(leg).ok_or(TableError::NotFound)?;
        Self::store(s, leg, Some(&r));
        Ok(())
    }

    pub fn delete(&self, leg: u32) -> Result<(), TableError> {
        self.check(leg)?;
        let mut alloc = self.writer.lock();
        let i = self.index[leg as usize].load(Relaxed);
        if i == 0 {
            return Err(TableError::NotFound);
        }
        // the slot is invalidated before it can be handed out again
        Self::store(&self.slots[i as usize - 1], leg, None);
        self.index[leg as usize].store(0, Release);
        alloc.free.push(i - 1);
        self.len.fetch_sub(1, Relaxed);
        Ok(())
    }

    pub fn clear(&self) {
        let mut alloc = self.writer.lock();
        for (leg, ix) in self.index.iter().enumerate() {
            let i = ix.load(Relaxed);
            if i != 0 {
                Self::store(&self.slots[i as usize - 1], leg as u32, None);
                ix.store(0, Release);
            }
        }
        alloc.free = (0..self.slots.len() as u32).rev().collect();
        self.len.store(0, Relaxed);
    }

    /// Every entry, by leg.
    pub fn for_each(&self, mut f: impl FnMut(u32, Rewrite6)) {
        for leg in 0..self.index.len() as u32 {
            if let Some(r) = self.get(leg) {
                f(leg, r);
            }
        }
    }
}

impl LegRewrites for Leg6Table {
    type Addr = u128;
    fn legs(&self) -> usize {
        Leg6Table::legs(self)
    }
    #[inline]
    fn get(&self, leg: u32) -> Option<Rewrite6> {
        Leg6Table::get(self, leg)
    }
    #[inline]
    fn count(&self, leg: u32, frame_len: u32) {
        Leg6Table::count(self, leg, frame_len)
    }
    fn insert(&self, leg: u32, r: Rewrite6) -> Result<(), TableError> {
        Leg6Table::insert(self, leg, r)
    }
    fn modify(&self, leg: u32, r: Rewrite6) -> Result<(), TableError> {
        Leg6Table::modify(self, leg, r)
    }
    fn delete(&self, leg: u32) -> Result<(), TableError> {
        Leg6Table::delete(self, leg)
    }
    fn clear(&self) {
        Leg6Table::clear(self)
    }
    fn for_each(&self, f: impl FnMut(u32, Rewrite6)) {
        Leg6Table::for_each(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn rw(i: u128) -> Rewrite6 {
        Rewrite6 {
            src: 0x2001_0db8_0000_0000_0000_0000_0000_0000 | i,
            dst: u128::MAX - i,
            sport: i as u16,
            dport: 65535,
        }
    }

    #[test]
    fn crud_bounds_and_capacity() {
        let t = Leg6Table::new(1 << 21, 2);
        assert_eq!(t.get(5), None);
        t.insert(5, rw(1)).unwrap();
        assert_eq!(t.insert(5, rw(1)), Err(TableError::AlreadyExists));
        assert_eq!(t.get(5), Some(rw(1)), "128-bit fields round-trip");
        t.insert((1 << 21) - 1, rw(2)).unwrap();
        assert_eq!(t.insert(7, rw(3)), Err(TableError::Full(2)));
        assert!(matches!(
            t.insert(1 << 21, rw(3)),
            Err(TableError::Invalid(_))
        ));
        t.modify(5, rw(9)).unwrap();
        assert_eq!(t.get(5), Some(rw(9)));
        assert_eq!(t.modify(6, rw(9)), Err(TableError::NotFound));
        t.delete(5).unwrap();
        assert_eq!(t.delete(5), Err(TableError::NotFound));
        assert_eq!(t.get(5), None);
        // the freed slot serves another leg
        t.insert(7, rw(3)).unwrap();
        assert_eq!(t.get(7), Some(rw(3)));
        let mut seen = vec![];
        t.for_each(|l, r| seen.push((l, r)));
        assert_eq!(seen, vec![(7, rw(3)), ((1 << 21) - 1, rw(2))]);
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.get(7), None);
        t.insert(1, rw(1)).unwrap();
        t.insert(2, rw(2)).unwrap();
    }

    #[test]
    fn the_direct_counter_starts_at_zero_on_insert() {
        let t = Leg6Table::new(8, 4);
        t.insert(2, rw(1)).unwrap();
        t.count(2, 100);
        t.count(2, 60);
        t.count(3, 60); // no entry: nothing
        assert_eq!(t.counts(2), (2, 160));
        t.modify(2, rw(2)).unwrap();
        assert_eq!(t.counts(2), (2, 160), "a MODIFY keeps the counter");
        t.delete(2).unwrap();
        assert_eq!(t.counts(2), (0, 0));
        t.insert(3, rw(1)).unwrap();
        assert_eq!(t.counts(3), (0, 0), "the reused slot starts at 0");
        t.set_counts(3, 7, 700);
        assert_eq!(t.counts(3), (7, 700));
    }

    #[test]
    fn readers_never_see_torn_or_foreign_rewrites() {
        let t = Arc::new(Leg6Table::new(4, 1));
        t.insert(0, rw(0)).unwrap();
        let w = {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 1..20_000u128 {
                    // the one slot moves between legs 0 and 1
                    let (from, to) = if i % 2 == 1 { (0, 1) } else { (1, 0) };
                    t.delete(from).unwrap();
                    t.insert(to, rw(i * 2 + to as u128)).unwrap();
                }
            })
        };
        for _ in 0..200_000 {
            for leg in 0..2u32 {
                if let Some(r) = t.get(leg) {
                    assert_eq!(
                        r.src & 1,
                        u128::from(leg),
                        "leg {leg} read another leg's slot"
                    );
                    assert_eq!(r.dst, u128::MAX - (r.src & 0xffff_ffff), "torn");
                }
            }
        }
        w.join().unwrap();
    }
}
