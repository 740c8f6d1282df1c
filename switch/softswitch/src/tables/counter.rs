//! Indexed packet counters (`Counter` tables of the contract, e.g.
//! `pipe.Ingress.guard_drops`): one cell per index, added to by the data
//! path, read and set (reset) through BfRt by `$COUNTER_INDEX`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct PacketCounter {
    cells: Vec<AtomicU64>,
}

impl PacketCounter {
    pub fn new(size: usize) -> PacketCounter {
        let mut cells = Vec::with_capacity(size);
        cells.resize_with(size, AtomicU64::default);
        PacketCounter { cells }
    }

    pub fn size(&self) -> usize {
        self.cells.len()
    }

    /// One packet at `i`; an index out of range counts nothing (the writes
    /// that carry indexes are checked against the size).
    #[inline]
    pub fn count(&self, i: u32) {
        if let Some(c) = self.cells.get(i as usize) {
            c.fetch_add(1, Relaxed);
        }
    }

    pub fn read(&self, i: usize) -> Option<u64> {
        self.cells.get(i).map(|c| c.load(Relaxed))
    }

    /// Sets one cell; false: index out of range.
    pub fn write(&self, i: usize, v: u64) -> bool {
        self.cells.get(i).map(|c| c.store(v, Relaxed)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reads_and_resets_by_index() {
        let c = PacketCounter::new(4);
        c.count(3);
        c.count(3);
        c.count(4); // out of range
        assert_eq!(c.read(3), Some(2));
        assert_eq!(c.read(4), None);
        assert!(c.write(3, 0));
        assert!(!c.write(4, 0));
        assert_eq!(c.read(3), Some(0));
        assert_eq!(c.size(), 4);
    }
}
