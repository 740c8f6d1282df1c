//! `pipe.Ingress.relay_guard`: exact match on (dst addr, dst port) of a packet
//! to a relay port of an offloaded call that missed `relay`. A hit drops it
//! (`Ingress.guard_drop(leg)`), counted in `guard_drops[leg]`, so a foreign
//! source cannot reach RTPProxy and latch the call's stream.

use super::exact::{ActionWord, ExactKey, ExactTable, Snapshot, Untimed};

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

/// No idle timeouts on guards: their entries keep no timer.
pub type GuardTable = ExactTable<GuardKey, GuardAction, Untimed>;
/// What a Read returns for one guard entry.
pub type GuardSnapshot = Snapshot<GuardKey, GuardAction>;

/// `pipe.Ingress.relay_guard6`: the same action as `relay_guard`.
pub type Guard6Table = ExactTable<Guard6Key, GuardAction, Untimed>;
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

    #[test]
    fn guard_entries_keep_no_idle_timer_and_refuse_a_timeout() {
        let t = GuardTable::new(8);
        let k = GuardKey {
            dst: 0xc612_000a,
            dport: 20000,
        };
        let drop = GuardAction::Drop { leg: 7 };
        assert!(matches!(
            t.insert(k, drop, 5000, 0),
            Err(TableError::Invalid(_))
        ));
        assert_eq!(t.len(), 0);
        t.insert(k, drop, 0, 0).unwrap();
        assert!(matches!(
            t.modify(&k, None, Some(5000), 10),
            Err(TableError::Invalid(_))
        ));
        t.modify(&k, Some(GuardAction::NoAction), Some(0), 10)
            .unwrap();
        let s = t.get(&k, 1_000_000).unwrap();
        assert_eq!(
            (s.action, s.ttl_ms, s.idle_ms),
            (GuardAction::NoAction, 0, 0)
        );
        let mut expired = 0;
        t.sweep_idle(u32::MAX, |_| expired += 1);
        assert_eq!(expired, 0);
    }
}
