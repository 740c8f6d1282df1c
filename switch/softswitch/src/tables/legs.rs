//! `pipe.Ingress.leg_rewrite`: leg index → (src addr, dst addr, src port, dst
//! port), with the table's direct counter (the direction's packets and bytes,
//! RTP and RTCP: the contract counts per leg).
//!
//! Direct-indexed (the key is the index). Each slot is a seqlock so the data
//! path reads a consistent rewrite without ever waiting; writers (gRPC) are
//! serialized by a mutex. The counters are plain atomics beside it: an
//! insert starts them at 0, as adding an entry does on Tofino.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use parking_lot::Mutex;

use super::TableError;
use crate::packet::family::Addr;

/// A leg's rewrite, either family's: `rewrite(src_addr, dst_addr, src_port,
/// dst_port)` (leg_rewrite) or `rewrite6(...)` (leg_rewrite6, legs6.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewriteOf<A> {
    pub src: A,
    pub dst: A,
    pub sport: u16,
    pub dport: u16,
}

/// `Ingress.rewrite`'s parameters.
pub type Rewrite = RewriteOf<u32>;

/// leg_rewrite and leg_rewrite6 as the data path and the control plane use
/// them: leg-keyed rewrites of one family, with the direct counter.
pub trait LegRewrites: Send + Sync {
    type Addr: Addr;
    /// The legs it is keyed on (the shared leg space).
    fn legs(&self) -> usize;
    fn get(&self, leg: u32) -> Option<RewriteOf<Self::Addr>>;
    /// The direct counter: one packet of `frame_len` bytes rewritten by `leg`.
    fn count(&self, leg: u32, frame_len: u32);
    fn insert(&self, leg: u32, r: RewriteOf<Self::Addr>) -> Result<(), TableError>;
    fn modify(&self, leg: u32, r: RewriteOf<Self::Addr>) -> Result<(), TableError>;
    fn delete(&self, leg: u32) -> Result<(), TableError>;
    fn clear(&self);
    fn for_each(&self, f: impl FnMut(u32, RewriteOf<Self::Addr>));
}

impl LegRewrites for LegTable {
    type Addr = u32;
    fn legs(&self) -> usize {
        self.capacity()
    }
    #[inline]
    fn get(&self, leg: u32) -> Option<Rewrite> {
        LegTable::get(self, leg)
    }
    #[inline]
    fn count(&self, leg: u32, frame_len: u32) {
        LegTable::count(self, leg, frame_len)
    }
    fn insert(&self, leg: u32, r: Rewrite) -> Result<(), TableError> {
        LegTable::insert(self, leg, r)
    }
    fn modify(&self, leg: u32, r: Rewrite) -> Result<(), TableError> {
        LegTable::modify(self, leg, r)
    }
    fn delete(&self, leg: u32) -> Result<(), TableError> {
        LegTable::delete(self, leg)
    }
    fn clear(&self) {
        LegTable::clear(self)
    }
    fn for_each(&self, f: impl FnMut(u32, Rewrite)) {
        LegTable::for_each(self, f)
    }
}

const WRITING: u32 = 1;
const VALID: u32 = 2;

#[derive(Debug, Default)]
struct Slot {
    seq: AtomicU32,
    src: AtomicU32,
    dst: AtomicU32,
    ports: AtomicU32,
    pkts: AtomicU64,
    bytes: AtomicU64,
}

pub struct LegTable {
    slots: Vec<Slot>,
    len: AtomicUsize,
    writer: Mutex<()>,
}

impl LegTable {
    pub fn new(legs: usize) -> LegTable {
        let mut slots = Vec::with_capacity(legs);
        slots.resize_with(legs, Slot::default);
        LegTable {
            slots,
            len: AtomicUsize::new(0),
            writer: Mutex::new(()),
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, leg: u32) -> Option<Rewrite> {
        let s = self.slots.get(leg as usize)?;
        loop {
            let s1 = s.seq.load(Acquire);
            if s1 & WRITING != 0 {
                std::hint::spin_loop();
                continue;
            }
            let (src, dst, ports) = (
                s.src.load(Relaxed),
                s.dst.load(Relaxed),
                s.ports.load(Relaxed),
            );
            fence(Acquire);
            if s.seq.load(Relaxed) == s1 {
                return (s1 & VALID != 0).then_some(Rewrite {
                    src,
                    dst,
                    sport: (ports >> 16) as u16,
                    dport: ports as u16,
                });
            }
        }
    }

    fn store(&self, leg: u32, v: Option<Rewrite>) {
        let s = &self.slots[leg as usize];
        let seq = s.seq.load(Relaxed);
        s.seq.store(seq | WRITING, Relaxed);
        fence(Release);
        let r = v.unwrap_or(Rewrite {
            src: 0,
            dst: 0,
            sport: 0,
            dport: 0,
        });
        s.src.store(r.src, Relaxed);
        s.dst.store(r.dst, Relaxed);
        s.ports
            .store((u32::from(r.sport) << 16) | u32::from(r.dport), Relaxed);
        let next = ((seq >> 2).wrapping_add(1) << 2) | if v.is_some() { VALID } else { 0 };
        s.seq.store(next, Release);
    }

    fn check(&self, leg: u32) -> Result<(), TableError> {
        if (leg as usize) < self.slots.len() {
            Ok(())
        } else {
            Err(TableError::Invalid(format!(
                "leg {leg} out of range (table size {})",
                self.slots.len()
            )))
        }
    }

    /// The direct counter: one packet of `frame_len` bytes rewritten by `leg`.
    #[inline]
    pub fn count(&self, leg: u32, frame_len: u32) {
        if let Some(s) = self.slots.get(leg as usize) {
            s.pkts.fetch_add(1, Relaxed);
            s.bytes.fetch_add(u64::from(frame_len), Relaxed);
        }
    }

    /// The leg's (packets, bytes); (0, 0) for a leg out of range.
    pub fn counts(&self, leg: u32) -> (u64, u64) {
        self.slots
            .get(leg as usize)
            .map_or((0, 0), |s| (s.pkts.load(Relaxed), s.bytes.load(Relaxed)))
    }

    /// Sets the leg's counter (a Write naming `$COUNTER_SPEC_*`, or an undo).
    pub fn set_counts(&self, leg: u32, pkts: u64, bytes: u64) {
        if let Some(s) = self.slots.get(leg as usize) {
            s.pkts.store(pkts, Relaxed);
            s.bytes.store(bytes, Relaxed);
        }
    }

    pub fn insert(&self, leg: u32, r: Rewrite) -> Result<(), TableError> {
        self.check(leg)?;
        let _w = self.writer.lock();
        if self.get(leg).is_some() {
            return Err(TableError::AlreadyExists);
        }
        self.set_counts(leg, 0, 0);
        self.store(leg, Some(r));
        self.len.fetch_add(1, Relaxed);
        Ok(())
    }

    pub fn modify(&self, leg: u32, r: Rewrite) -> Result<(), TableError> {
        self.check(leg)?;
        let _w = self.writer.lock();
        if self.get(leg).is_none() {
            return Err(TableError::NotFound);
        }
        self.store(leg, Some(r));
        Ok(())
    }

    pub fn delete(&self, leg: u32) -> Result<(), TableError> {
        self.check(leg)?;
        let _w = self.writer.lock();
        if self.get(leg).is_none() {
            return Err(TableError::NotFound);
        }
        self.store(leg, None);
        self.len.fetch_sub(1, Relaxed);
        Ok(())
    }

    pub fn clear(&self) {
        let _w = self.writer.lock();
        for leg in 0..self.slots.len() as u32 {
            if self.slots[leg as usize].seq.load(Relaxed) & VALID != 0 {
                self.store(leg, None);
            }
        }
        self.len.store(0, Relaxed);
    }

    pub fn for_each(&self, mut f: impl FnMut(u32, Rewrite)) {
        for leg in 0..self.slots.len() as u32 {
            if let Some(r) = self.get(leg) {
                f(leg, r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn crud_and_bounds() {
        let t = LegTable::new(8);
        let r = Rewrite {
            src: 1,
            dst: 2,
            sport: 3,
            dport: 4,
        };
        assert_eq!(t.get(1), None);
        t.insert(1, r).unwrap();
        assert_eq!(t.insert(1, r), Err(TableError::AlreadyExists));
        assert_eq!(t.get(1), Some(r));
        assert!(matches!(t.insert(8, r), Err(TableError::Invalid(_))));
        t.modify(1, Rewrite { sport: 9, ..r }).unwrap();
        assert_eq!(t.get(1).unwrap().sport, 9);
        assert_eq!(t.len(), 1);
        t.delete(1).unwrap();
        assert_eq!(t.delete(1), Err(TableError::NotFound));
        assert!(t.is_empty());
    }

    #[test]
    fn the_direct_counter_counts_per_leg_and_starts_at_zero_on_insert() {
        let t = LegTable::new(4);
        let r = Rewrite {
            src: 1,
            dst: 2,
            sport: 3,
            dport: 4,
        };
        t.insert(2, r).unwrap();
        t.count(2, 100);
        t.count(2, 60);
        t.count(9, 60); // out of range: nothing
        assert_eq!(t.counts(2), (2, 160));
        assert_eq!(t.counts(1), (0, 0));
        t.modify(2, r).unwrap();
        assert_eq!(t.counts(2), (2, 160), "a MODIFY keeps the counter");
        t.delete(2).unwrap();
        t.insert(2, r).unwrap();
        assert_eq!(t.counts(2), (0, 0), "a new entry starts at 0");
        t.set_counts(2, 7, 700);
        assert_eq!(t.counts(2), (7, 700));
    }

    #[test]
    fn readers_never_see_torn_rewrites() {
        let t = Arc::new(LegTable::new(1));
        t.insert(
            0,
            Rewrite {
                src: 0,
                dst: 0,
                sport: 0,
                dport: 0,
            },
        )
        .unwrap();
        let w = {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 1..20_000u32 {
                    t.modify(
                        0,
                        Rewrite {
                            src: i,
                            dst: i,
                            sport: i as u16,
                            dport: i as u16,
                        },
                    )
                    .unwrap();
                }
            })
        };
        for _ in 0..200_000 {
            let r = t.get(0).unwrap();
            assert!(r.src == r.dst && r.sport == r.src as u16 && r.dport == r.sport);
        }
        w.join().unwrap();
    }
}
