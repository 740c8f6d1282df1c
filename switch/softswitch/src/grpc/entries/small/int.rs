//! The INT tables: `pipe.Ingress.int_watch` (ternary relay bit, leg,
//! addresses, destination port, `$MATCH_PRIORITY` → `int_watch_flow` |
//! `NoAction`), `pipe.Ingress.int_watch6` (IPv6 destination prefix → the
//! same actions), `pipe.Ingress.int_role` (next hop → `int_transit` |
//! `int_sink` | `NoAction`), `pipe.Egress.int_hop_config` (egress port →
//! `int_hop(switch_id, onset_cells, clear_cells, onset_ns, clear_ns)`) and
//! `pipe.Egress.int_report` (egress port → `int_report_encap(src_mac,
//! dst_mac, src_addr, dst_addr, dst_port, switch_id)`). Ports must be ports
//! of this switch; a hop's clear thresholds may not exceed its onset
//! thresholds (no hysteresis otherwise). The port tables' default action is
//! fixed to NoAction.

use std::collections::{BTreeMap, HashMap};

use tonic::Status;

use super::forwarding::exact_pb;
use super::forwarding6::Ipv6Lpm;
use super::{not_allowed, SmallTable};
use crate::contract::names;
use crate::grpc::codec::{invalid, key_exact, key_ternary, Data, Keys};
use crate::grpc::entries::{action_only, params};
use crate::grpc::{pb, Switch};
use crate::schema::TableSchema;
use crate::tables::small::{
    IntHop, IntReportEncap, IntRoleAction, IntWatchAction, IntWatchKey, SmallTables,
};
use crate::tables::TableError;

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_u64(m: &[u8; 6]) -> u64 {
    m.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

fn egress_port_check(sw: &Switch, t: &TableSchema, port: u16) -> Result<(), Status> {
    if sw.pipeline.has_port(u32::from(port)) {
        return Ok(());
    }
    Err(invalid(format!(
        "{}: port {port} is not a port of this switch",
        t.name
    )))
}

// ---------------------------------------------------------------- int_watch

pub(super) struct IntWatch;

impl SmallTable for IntWatch {
    type Key = IntWatchKey;
    type Action = IntWatchAction;
    type Map = BTreeMap<IntWatchKey, IntWatchAction>;
    const RESET: Option<IntWatchAction> = Some(IntWatchAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.int_watch
    }
    fn write(
        s: &mut SmallTables,
        k: IntWatchKey,
        a: Option<IntWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.int_watch_write(k, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut IntWatchAction> {
        Some(&mut s.int_watch_default)
    }
    fn default(s: &SmallTables) -> Option<IntWatchAction> {
        Some(s.int_watch_default)
    }
    fn key(k: &Keys) -> Result<IntWatchKey, Status> {
        let (rv, rm) = k.ternary(names::KEY_BRIDGED_RELAY)?;
        let (lv, lm) = k.ternary(names::KEY_BRIDGED_LEG)?;
        let (sv, sm) = k.ternary(names::KEY_IPV4_SRC)?;
        let (dv, dm) = k.ternary(names::KEY_IPV4_DST)?;
        let (pv, pm) = k.ternary(names::KEY_UDP_DST)?;
        Ok(IntWatchKey {
            // bf-p4c: an optional uint32, 0 when absent.
            priority: k.exact_opt(names::MATCH_PRIORITY)?.unwrap_or(0) as u32,
            relay: (rv as u8, rm as u8),
            leg: (lv as u32, lm as u32),
            src: (sv as u32, sm as u32),
            dst: (dv as u32, dm as u32),
            dport: (pv as u16, pm as u16),
        })
    }
    fn key_pb(t: &TableSchema, k: &IntWatchKey) -> pb::TableKey {
        let ks = |n: &str| t.key_by_name(n).expect("schema");
        let tern = |n: &str, v: u64, m: u64| key_ternary(ks(n), v, m);
        pb::TableKey {
            fields: vec![
                tern(
                    names::KEY_BRIDGED_RELAY,
                    u64::from(k.relay.0),
                    u64::from(k.relay.1),
                ),
                tern(
                    names::KEY_BRIDGED_LEG,
                    u64::from(k.leg.0),
                    u64::from(k.leg.1),
                ),
                tern(names::KEY_IPV4_SRC, u64::from(k.src.0), u64::from(k.src.1)),
                tern(names::KEY_IPV4_DST, u64::from(k.dst.0), u64::from(k.dst.1)),
                tern(
                    names::KEY_UDP_DST,
                    u64::from(k.dport.0),
                    u64::from(k.dport.1),
                ),
                key_exact(ks(names::MATCH_PRIORITY), u64::from(k.priority)),
            ],
        }
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IntWatchAction>, Status> {
        Ok(match d.action_name() {
            Some(names::INT_WATCH_FLOW) => Some(IntWatchAction::WatchFlow),
            Some(names::NO_ACTION) => Some(IntWatchAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &IntWatchAction) -> pb::TableData {
        match a {
            IntWatchAction::WatchFlow => action_only(t, names::INT_WATCH_FLOW),
            IntWatchAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}

// ---------------------------------------------------------------- int_watch6

pub(super) struct IntWatch6;

impl SmallTable for IntWatch6 {
    type Key = (u128, u8);
    type Action = IntWatchAction;
    type Map = BTreeMap<(u128, u8), IntWatchAction>;
    const RESET: Option<IntWatchAction> = Some(IntWatchAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.int_watch6
    }
    fn write(
        s: &mut SmallTables,
        (p, l): (u128, u8),
        a: Option<IntWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.int_watch6_write(p, l, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut IntWatchAction> {
        Some(&mut s.int_watch6_default)
    }
    fn default(s: &SmallTables) -> Option<IntWatchAction> {
        Some(s.int_watch6_default)
    }
    fn key(k: &Keys) -> Result<(u128, u8), Status> {
        Ipv6Lpm::key(k)
    }
    fn key_pb(t: &TableSchema, k: &(u128, u8)) -> pb::TableKey {
        Ipv6Lpm::key_pb(t, k)
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IntWatchAction>, Status> {
        IntWatch::action(t, d)
    }
    fn data(t: &TableSchema, a: &IntWatchAction) -> pb::TableData {
        IntWatch::data(t, a)
    }
}

// ---------------------------------------------------------------- int_role

pub(super) struct IntRole;

impl SmallTable for IntRole {
    type Key = u16;
    type Action = IntRoleAction;
    type Map = HashMap<u16, IntRoleAction>;
    const RESET: Option<IntRoleAction> = Some(IntRoleAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.int_role
    }
    fn write(
        s: &mut SmallTables,
        id: u16,
        a: Option<IntRoleAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.int_role_write(id, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut IntRoleAction> {
        Some(&mut s.int_role_default)
    }
    fn default(s: &SmallTables) -> Option<IntRoleAction> {
        Some(s.int_role_default)
    }
    fn key(k: &Keys) -> Result<u16, Status> {
        Ok(k.exact(names::KEY_NEXTHOP_ID)? as u16)
    }
    fn key_pb(t: &TableSchema, id: &u16) -> pb::TableKey {
        exact_pb(t, names::KEY_NEXTHOP_ID, u64::from(*id))
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IntRoleAction>, Status> {
        Ok(match d.action_name() {
            Some(names::INT_TRANSIT) => Some(IntRoleAction::Transit),
            Some(names::INT_SINK) => Some(IntRoleAction::Sink),
            Some(names::NO_ACTION) => Some(IntRoleAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &IntRoleAction) -> pb::TableData {
        match a {
            IntRoleAction::Transit => action_only(t, names::INT_TRANSIT),
            IntRoleAction::Sink => action_only(t, names::INT_SINK),
            IntRoleAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}

// ---------------------------------------------------------------- int_hop_config

pub(super) struct IntHopConfig;

impl SmallTable for IntHopConfig {
    type Key = u16;
    type Action = IntHop;
    type Map = BTreeMap<u16, IntHop>;
    const RESET: Option<IntHop> = None;

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.int_hop_config
    }
    fn write(
        s: &mut SmallTables,
        port: u16,
        h: Option<IntHop>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.int_hop_config_write(port, h, insert)
    }
    fn key(k: &Keys) -> Result<u16, Status> {
        Ok(k.exact(names::KEY_EGRESS_PORT)? as u16)
    }
    fn check_key(sw: &Switch, t: &TableSchema, port: &u16) -> Result<(), Status> {
        egress_port_check(sw, t, *port)
    }
    fn key_pb(t: &TableSchema, port: &u16) -> pb::TableKey {
        exact_pb(t, names::KEY_EGRESS_PORT, u64::from(*port))
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IntHop>, Status> {
        Ok(match d.action_name() {
            Some(names::INT_HOP) => {
                let h = IntHop {
                    switch_id: d.int(names::P_SWITCH_ID)? as u32,
                    onset_cells: d.int(names::P_ONSET_CELLS)? as u32,
                    clear_cells: d.int(names::P_CLEAR_CELLS)? as u32,
                    onset_ns: d.int(names::P_ONSET_NS)? as u32,
                    clear_ns: d.int(names::P_CLEAR_NS)? as u32,
                };
                if h.clear_cells > h.onset_cells || h.clear_ns > h.onset_ns {
                    return Err(invalid(format!(
                        "{}: clear thresholds ({} cells, {} ns) must not exceed the onset \
                         thresholds ({} cells, {} ns)",
                        t.name, h.clear_cells, h.clear_ns, h.onset_cells, h.onset_ns
                    )));
                }
                Some(h)
            }
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, h: &IntHop) -> pb::TableData {
        params(
            t,
            names::INT_HOP,
            &[
                (names::P_SWITCH_ID, u64::from(h.switch_id)),
                (names::P_ONSET_CELLS, u64::from(h.onset_cells)),
                (names::P_CLEAR_CELLS, u64::from(h.clear_cells)),
                (names::P_ONSET_NS, u64::from(h.onset_ns)),
                (names::P_CLEAR_NS, u64::from(h.clear_ns)),
            ],
        )
    }
}

// ---------------------------------------------------------------- int_report

pub(super) struct IntReport;

impl SmallTable for IntReport {
    type Key = u16;
    type Action = IntReportEncap;
    type Map = BTreeMap<u16, IntReportEncap>;
    const RESET: Option<IntReportEncap> = None;

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.int_report
    }
    fn write(
        s: &mut SmallTables,
        port: u16,
        e: Option<IntReportEncap>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.int_report_write(port, e, insert)
    }
    fn key(k: &Keys) -> Result<u16, Status> {
        Ok(k.exact(names::KEY_EGRESS_PORT)? as u16)
    }
    fn check_key(sw: &Switch, t: &TableSchema, port: &u16) -> Result<(), Status> {
        egress_port_check(sw, t, *port)
    }
    fn key_pb(t: &TableSchema, port: &u16) -> pb::TableKey {
        exact_pb(t, names::KEY_EGRESS_PORT, u64::from(*port))
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IntReportEncap>, Status> {
        Ok(match d.action_name() {
            Some(names::INT_REPORT_ENCAP) => Some(IntReportEncap {
                src_mac: mac(d.int(names::P_SRC_MAC)?),
                dst_mac: mac(d.int(names::P_DST_MAC)?),
                src_addr: d.int(names::P_SRC_ADDR)? as u32,
                dst_addr: d.int(names::P_DST_ADDR)? as u32,
                dst_port: d.int(names::P_DST_PORT)? as u16,
                switch_id: d.int(names::P_SWITCH_ID)? as u32,
            }),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, r: &IntReportEncap) -> pb::TableData {
        params(
            t,
            names::INT_REPORT_ENCAP,
            &[
                (names::P_SRC_MAC, mac_u64(&r.src_mac)),
                (names::P_DST_MAC, mac_u64(&r.dst_mac)),
                (names::P_SRC_ADDR, u64::from(r.src_addr)),
                (names::P_DST_ADDR, u64::from(r.dst_addr)),
                (names::P_DST_PORT, u64::from(r.dst_port)),
                (names::P_SWITCH_ID, u64::from(r.switch_id)),
            ],
        )
    }
}
