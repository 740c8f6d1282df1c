//! Port binding (switch/p4/parsers/ingress_parser.p4, states `start`, which
//! sets the bound port, `parse_port_metadata` and `port_unbound`): the ingress port's
//! phase-0 data (`pipe.IngressParser.$PORT_METADATA`, field `unbound`; a port
//! without an entry is bound) decides the port `relay` and the learn filter
//! key on: the ingress port, or the contract's `unbound_port` where binding
//! is off, so entries installed with it match from every unbound port.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

use super::Pipeline;

/// Dev ports this table can name (contract max_ports; one bit each).
pub const PORTS: u16 = crate::tables::small::PORTS as u16;
const _: () = assert!(PORTS <= 64);

/// `$PORT_METADATA` entries: which ports have one, and their `unbound` bit.
/// The data path reads one bitmap; writes are serialised.
#[derive(Debug)]
pub struct PortBinding {
    present: AtomicU64,
    unbound: AtomicU64,
    unbound_port: u16,
    write: Mutex<()>,
}

impl PortBinding {
    pub fn new(unbound_port: u16) -> PortBinding {
        PortBinding {
            present: AtomicU64::new(0),
            unbound: AtomicU64::new(0),
            unbound_port,
            write: Mutex::new(()),
        }
    }

    /// The relay key's port on an unbound port.
    pub fn unbound_port(&self) -> u16 {
        self.unbound_port
    }

    /// The port's entry: `Some(unbound)`, or None (no entry: bound).
    pub fn get(&self, port: u16) -> Option<bool> {
        let bit = 1u64 << (port % PORTS);
        (port < PORTS && self.present.load(Relaxed) & bit != 0)
            .then(|| self.unbound.load(Relaxed) & bit != 0)
    }

    /// Sets (`Some`) or removes (`None`) the port's entry; returns the old one.
    pub fn set(&self, port: u16, entry: Option<bool>) -> Option<bool> {
        assert!(port < PORTS, "port {port} checked by the caller");
        let _w = self.write.lock();
        let old = self.get(port);
        let bit = 1u64 << port;
        // unbound first: a reader that sees the entry sees its value
        match entry {
            Some(true) => {
                self.unbound.fetch_or(bit, Relaxed);
                self.present.fetch_or(bit, Relaxed);
            }
            Some(false) => {
                self.unbound.fetch_and(!bit, Relaxed);
                self.present.fetch_or(bit, Relaxed);
            }
            None => {
                self.present.fetch_and(!bit, Relaxed);
                self.unbound.fetch_and(!bit, Relaxed);
            }
        }
        old
    }

    /// Every entry, by port.
    pub fn entries(&self) -> Vec<(u16, bool)> {
        (0..PORTS)
            .filter_map(|p| self.get(p).map(|u| (p, u)))
            .collect()
    }

    pub fn clear(&self) {
        let _w = self.write.lock();
        self.present.store(0, Relaxed);
        self.unbound.store(0, Relaxed);
    }

    /// Is binding off on this port?
    #[inline]
    pub fn unbound(&self, port: u16) -> bool {
        port < PORTS && self.unbound.load(Relaxed) & (1u64 << port) != 0
    }
}

impl Pipeline {
    /// `parse_port_metadata`: the port relay's key and the learn filter use
    /// for a packet arriving on `ingress_port` (`ig_md.bound_port`).
    #[inline]
    pub(super) fn port_binding(&self, ingress_port: u16) -> u16 {
        if self.port_binding.unbound(ingress_port) {
            self.port_binding.unbound_port() // port_unbound
        } else {
            ingress_port // start
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::CONTRACT;
    use crate::pipeline::tests::setup;

    #[test]
    fn a_port_without_an_entry_is_bound() {
        let (p, _) = setup();
        assert_eq!(p.port_binding(1), 1);
        assert_eq!(p.port_binding.get(1), None);
        assert!(!p.port_binding.unbound(1));
    }

    #[test]
    fn an_unbound_port_keys_on_the_contracts_unbound_port() {
        let (p, _) = setup();
        let unbound = CONTRACT.config.unbound_port;
        assert_eq!(p.port_binding.set(2, Some(true)), None);
        assert_eq!(p.port_binding(2), unbound);
        assert_eq!(p.port_binding(1), 1, "other ports stay bound");
        // an entry with unbound = 0 binds the port again
        assert_eq!(p.port_binding.set(2, Some(false)), Some(true));
        assert_eq!(p.port_binding(2), 2);
        assert_eq!(p.port_binding.entries(), vec![(2, false)]);
        // deleting the entry: bound, no entry
        assert_eq!(p.port_binding.set(2, None), Some(false));
        assert!(p.port_binding.entries().is_empty());
    }

    #[test]
    fn ports_beyond_the_table_are_never_unbound() {
        let b = PortBinding::new(511);
        b.set(PORTS - 1, Some(true));
        assert!(b.unbound(PORTS - 1));
        assert!(!b.unbound(PORTS));
        assert!(!b.unbound(u16::MAX));
        b.clear();
        assert!(!b.unbound(PORTS - 1));
        assert!(b.entries().is_empty());
    }
}
