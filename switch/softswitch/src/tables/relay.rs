//! `pipe.Ingress.relay`: exact match on (src addr, dst addr, src port, dst
//! port, bound port); entries (14-byte key, action word, TTL) in the shared
//! exact-match table (`exact.rs`). Not counted per entry: the leg is
//! (`leg_rewrite`'s direct counter).

use super::exact::{ActionWord, ExactKey, ExactTable, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RelayKey {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    /// `ig_md.bound_port`: the dev port the flow arrives on, or the
    /// contract's `unbound_port` on a port whose binding is off.
    pub port: u16,
}

impl ExactKey for RelayKey {
    #[inline]
    fn hash64(&self) -> u64 {
        let a = (u64::from(self.src) << 32) | u64::from(self.dst);
        let b =
            (u64::from(self.port) << 32) | (u64::from(self.sport) << 16) | u64::from(self.dport);
        let h = (a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 29)
    }
}

/// `pipe.Ingress.relay6`'s key: the remote's IPv6 address, the relay's v6
/// address as its `relay6_addr` id, the ports and the bound port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Relay6Key {
    pub src: u128,
    /// `ig_md.relay_id`: what `relay6_addr` mapped the destination to.
    pub relay_id: u8,
    pub sport: u16,
    pub dport: u16,
    pub port: u16,
}

impl ExactKey for Relay6Key {
    #[inline]
    fn hash64(&self) -> u64 {
        let a = (self.src as u64) ^ ((self.src >> 64) as u64).rotate_left(23);
        let b = (u64::from(self.relay_id) << 48)
            | (u64::from(self.port) << 32)
            | (u64::from(self.sport) << 16)
            | u64::from(self.dport);
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
const LEG_MASK: u32 = (1 << 22) - 1;

impl ActionWord for RelayAction {
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

pub type RelayTable = ExactTable<RelayKey, RelayAction>;
/// What a Read returns for one relay entry.
pub type EntrySnapshot = Snapshot<RelayKey, RelayAction>;

/// `pipe.Ingress.relay6`: the same action as `relay`.
pub type Relay6Table = ExactTable<Relay6Key, RelayAction>;
pub type Entry6Snapshot = Snapshot<Relay6Key, RelayAction>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::TableError;
    use std::collections::HashMap;

    fn k(i: u32) -> RelayKey {
        RelayKey {
            src: 0xc612_0000 | (i >> 8),
            dst: 0xc612_000a,
            sport: (i & 0xffff) as u16,
            dport: 20000 + (i % 7) as u16,
            port: (i % 3) as u16,
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
            assert_eq!(t.lookup(key, 1), Some(*a));
        }
        assert_eq!(t.lookup(&k(99_999), 1), None);
        let mut n = 0;
        t.for_each(1, |e| {
            assert_eq!(model.get(&e.key), Some(&e.action));
            n += 1;
        });
        assert_eq!(n, model.len());
    }

    #[test]
    fn v6_keys_differ_by_every_field() {
        let t = Relay6Table::new(16);
        let k = Relay6Key {
            src: 0x2001_0db8_0000_0000_0000_0000_0000_000a,
            relay_id: 1,
            sport: 4000,
            dport: 20000,
            port: 1,
        };
        let a = RelayAction::Leg { leg: 9, rtcp: true };
        t.insert(k, a, 0, 0).unwrap();
        assert_eq!(t.lookup(&k, 1), Some(a));
        for other in [
            Relay6Key {
                src: k.src ^ (1 << 127),
                ..k
            },
            Relay6Key { relay_id: 2, ..k },
            Relay6Key { sport: 4001, ..k },
            Relay6Key { dport: 20001, ..k },
            Relay6Key { port: 2, ..k },
        ] {
            assert_eq!(t.lookup(&other, 1), None, "{other:?}");
        }
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
            t.lookup(&k(1), 6000),
            Some(RelayAction::Leg {
                leg: 3,
                rtcp: false
            })
        );
        t.sweep_idle(7000, |k| got.push(k));
        assert_eq!(got.len(), 2);
        t.modify(&k(1), None, Some(0), 7000).unwrap();
        t.sweep_idle(99_000, |k| got.push(k));
        assert_eq!(got.len(), 2);
        assert_eq!(t.get(&k(1), 7000).unwrap().ttl_ms, 0);
    }
}
