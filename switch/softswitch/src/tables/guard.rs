//! `pipe.Ingress.relay_guard`: exact match on (dst addr, dst port) of a packet
//! to a relay port of an offloaded call that missed `relay`. A hit drops it
//! (`Ingress.guard_drop`), counted per entry, so a foreign source cannot reach
//! RTPProxy and latch the call's stream.

use super::exact::{ActionWord, ExactKey, ExactTable, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GuardKey {
    pub dst: u32,
    pub dport: u16,
}

impl ExactKey for GuardKey {
    #[inline]
    fn hash64(&self) -> u64 {
        let h = ((u64::from(self.dst) << 16) | u64::from(self.dport))
            .wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 29)
    }
}

/// `Ingress.guard_drop`, or NoAction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardAction {
    Drop,
    NoAction,
}

impl ActionWord for GuardAction {
    fn encode(self) -> u32 {
        match self {
            GuardAction::Drop => 1,
            GuardAction::NoAction => 0,
        }
    }
    fn decode(w: u32) -> GuardAction {
        if w & 1 != 0 {
            GuardAction::Drop
        } else {
            GuardAction::NoAction
        }
    }
}

pub type GuardTable = ExactTable<GuardKey, GuardAction>;
/// What a Read returns for one guard entry.
pub type GuardSnapshot = Snapshot<GuardKey, GuardAction>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::TableError;

    #[test]
    fn guard_entries_match_on_address_and_port_and_count() {
        let t = GuardTable::new(8);
        let k = |p| GuardKey {
            dst: 0xc612_000a,
            dport: p,
        };
        t.insert(k(20000), GuardAction::Drop, 0, 0).unwrap();
        t.insert(k(20001), GuardAction::NoAction, 0, 0).unwrap();
        assert_eq!(
            t.insert(k(20000), GuardAction::Drop, 0, 0),
            Err(TableError::AlreadyExists)
        );
        assert_eq!(t.lookup(&k(20000), 214, 1), Some(GuardAction::Drop));
        assert_eq!(t.lookup(&k(20000), 100, 2), Some(GuardAction::Drop));
        assert_eq!(t.lookup(&k(20001), 100, 2), Some(GuardAction::NoAction));
        assert_eq!(t.lookup(&k(20002), 100, 2), None);
        let other = GuardKey {
            dst: 0xc612_000b,
            dport: 20000,
        };
        assert_eq!(t.lookup(&other, 100, 2), None);
        let s = t.get(&k(20000), 3).unwrap();
        assert_eq!((s.pkts, s.bytes), (2, 314));
        t.delete(&k(20000)).unwrap();
        assert_eq!(t.lookup(&k(20000), 100, 4), None);
        assert_eq!(t.len(), 1);
    }
}
