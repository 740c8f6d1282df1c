//! `pipe.Ingress.relay_guard`: exact match on (dst addr, dst port) of a packet
//! to a relay port of an offloaded call that missed `relay`. A hit drops it
//! (`Ingress.guard_drop(leg)`), counted in `guard_drops[leg]`, so a foreign
//! source cannot reach RTPProxy and latch the call's stream.

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

/// `pipe.Ingress.relay_guard6`'s key: the relay's v6 address as its
/// `relay6_addr` id, and the relay port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Guard6Key {
    pub relay_id: u8,
    pub dport: u16,
}

impl ExactKey for Guard6Key {
    #[inline]
    fn hash64(&self) -> u64 {
        let h = ((u64::from(self.relay_id) << 16) | u64::from(self.dport))
            .wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 29)
    }
}

/// `Ingress.guard_drop(leg)` (the guard_drops index), or NoAction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardAction {
    Drop { leg: u32 },
    NoAction,
}

const DROP_BIT: u32 = 1 << 30;
const LEG_MASK: u32 = (1 << 22) - 1;

impl ActionWord for GuardAction {
    fn encode(self) -> u32 {
        match self {
            GuardAction::Drop { leg } => DROP_BIT | (leg & LEG_MASK),
            GuardAction::NoAction => 0,
        }
    }
    fn decode(w: u32) -> GuardAction {
        if w & DROP_BIT != 0 {
            GuardAction::Drop { leg: w & LEG_MASK }
        } else {
            GuardAction::NoAction
        }
    }
}

pub type GuardTable = ExactTable<GuardKey, GuardAction>;
/// What a Read returns for one guard entry.
pub type GuardSnapshot = Snapshot<GuardKey, GuardAction>;

/// `pipe.Ingress.relay_guard6`: the same action as `relay_guard`.
pub type Guard6Table = ExactTable<Guard6Key, GuardAction>;
pub type Guard6Snapshot = Snapshot<Guard6Key, GuardAction>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::TableError;

    #[test]
    fn guard_entries_match_on_address_and_port_and_carry_the_leg() {
        let t = GuardTable::new(8);
        let k = |p| GuardKey {
            dst: 0xc612_000a,
            dport: p,
        };
        let drop = GuardAction::Drop { leg: (1 << 21) - 1 };
        t.insert(k(20000), drop, 0, 0).unwrap();
        t.insert(k(20001), GuardAction::NoAction, 0, 0).unwrap();
        assert_eq!(
            t.insert(k(20000), drop, 0, 0),
            Err(TableError::AlreadyExists)
        );
        assert_eq!(t.lookup(&k(20000), 1), Some(drop));
        assert_eq!(t.lookup(&k(20001), 2), Some(GuardAction::NoAction));
        assert_eq!(t.lookup(&k(20002), 2), None);
        let other = GuardKey {
            dst: 0xc612_000b,
            dport: 20000,
        };
        assert_eq!(t.lookup(&other, 2), None);
        assert_eq!(t.get(&k(20000), 3).unwrap().action, drop);
        t.delete(&k(20000)).unwrap();
        assert_eq!(t.lookup(&k(20000), 4), None);
        assert_eq!(t.len(), 1);
    }
}
