//! The IPv6 small tables, held in `SmallTables::v6` (one snapshot with the
//! IPv4 ones): `ipv6_lpm` (128-bit LPM → the shared `nexthop`) and
//! `relay6_addr` (the relay's v6 addresses and port ranges → `relay_id`).

use std::collections::BTreeMap;

use super::maps::{longest_match, write_lpm, write_map, ByLen};
use super::TableError;

/// `Ingress.mark_relay6(relay_id)`, or NoAction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relay6AddrAction {
    MarkRelay6 { relay_id: u8 },
    NoAction,
}

/// Key of a `relay6_addr` entry: destination, inclusive port range,
/// priority (`$MATCH_PRIORITY`: lower value wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Relay6AddrKey {
    pub priority: u32,
    pub dst: u128,
    pub lo: u16,
    pub hi: u16,
}

/// `L`: ipv6_lpm's action (ipv4_lpm's, `small::LpmAction`).
#[derive(Debug, Clone)]
pub struct Small6<L> {
    /// (prefix, length) → action: the control-plane view, read back by Read.
    pub lpm: BTreeMap<(u128, u8), L>,
    lpm_by_len: ByLen<u128, L>,
    pub lpm_default: L,
    /// Sorted by key, so by priority first.
    pub relay_addr: BTreeMap<Relay6AddrKey, Relay6AddrAction>,
    pub relay_addr_default: Relay6AddrAction,
}

impl<L: Copy> Small6<L> {
    /// Empty tables, ipv6_lpm's default action `lpm_default`.
    pub fn new(lpm_default: L) -> Self {
        Small6 {
            lpm: BTreeMap::new(),
            lpm_by_len: Vec::new(),
            lpm_default,
            relay_addr: BTreeMap::new(),
            relay_addr_default: Relay6AddrAction::NoAction,
        }
    }
}

impl<L: Copy> Small6<L> {
    #[inline]
    pub fn lpm_lookup(&self, dst: u128) -> L {
        longest_match(&self.lpm_by_len, dst).unwrap_or(self.lpm_default)
    }

    #[inline]
    pub fn relay_addr_lookup(&self, dst: u128, dport: u16) -> Relay6AddrAction {
        self.relay_addr
            .iter()
            .find(|(k, _)| k.dst == dst && k.lo <= dport && dport <= k.hi)
            .map_or(self.relay_addr_default, |(_, a)| *a)
    }

    pub fn lpm_write(
        &mut self,
        prefix: u128,
        len: u8,
        a: Option<L>,
        insert: bool,
    ) -> Result<(), TableError> {
        write_lpm(&mut self.lpm, &mut self.lpm_by_len, prefix, len, a, insert)
    }

    pub fn relay_addr_write(
        &mut self,
        k: Relay6AddrKey,
        a: Option<Relay6AddrAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        if k.lo > k.hi {
            return Err(TableError::Invalid(format!(
                "port range {}..{} is empty",
                k.lo, k.hi
            )));
        }
        write_map(&mut self.relay_addr, k, a, insert)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET: u128 = 0x2001_0db8_0002_0000_0000_0000_0000_0000;

    #[test]
    fn the_longest_v6_prefix_wins_and_the_default_drops() {
        let mut t = Small6::new(0u16);
        assert_eq!(t.lpm_lookup(NET | 1), 0);
        t.lpm_write(NET | 0xffff, 48, Some(2), true).unwrap();
        t.lpm_write(NET | 0xb, 128, Some(3), true).unwrap();
        t.lpm_write(0, 0, Some(1), true).unwrap();
        assert_eq!(t.lpm_lookup(NET | 0xb), 3);
        assert_eq!(t.lpm_lookup(NET | 0xc), 2);
        assert_eq!(t.lpm_lookup(1), 1, "::/0");
        // host bits are cleared in the key: the same /48 again exists
        assert_eq!(
            t.lpm_write(NET, 48, Some(0), true),
            Err(TableError::AlreadyExists)
        );
        assert!(matches!(
            t.lpm_write(NET, 129, Some(0), true),
            Err(TableError::Invalid(_))
        ));
        t.lpm_write(NET, 48, None, false).unwrap();
        assert_eq!(t.lpm_lookup(NET | 0xc), 1);
    }

    #[test]
    fn relay6_addr_matches_address_and_range_by_priority() {
        let mut t = Small6::new(0u16);
        let k = |priority, lo, hi| Relay6AddrKey {
            priority,
            dst: NET | 1,
            lo,
            hi,
        };
        t.relay_addr_write(
            k(10, 20000, 29999),
            Some(Relay6AddrAction::MarkRelay6 { relay_id: 4 }),
            true,
        )
        .unwrap();
        t.relay_addr_write(k(5, 25000, 25001), Some(Relay6AddrAction::NoAction), true)
            .unwrap();
        assert_eq!(
            t.relay_addr_lookup(NET | 1, 20000),
            Relay6AddrAction::MarkRelay6 { relay_id: 4 }
        );
        assert_eq!(
            t.relay_addr_lookup(NET | 1, 25000),
            Relay6AddrAction::NoAction,
            "the lower priority value wins"
        );
        assert_eq!(
            t.relay_addr_lookup(NET | 2, 20000),
            Relay6AddrAction::NoAction
        );
        assert_eq!(
            t.relay_addr_lookup(NET | 1, 30000),
            Relay6AddrAction::NoAction
        );
        assert!(matches!(
            t.relay_addr_write(k(1, 5, 4), Some(Relay6AddrAction::NoAction), true),
            Err(TableError::Invalid(_))
        ));
    }
}
