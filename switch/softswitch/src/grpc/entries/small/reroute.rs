//! The congestion-reroute tables: `pipe.Ingress.reroute_watch` and
//! `reroute_watch6` (IPv4 / IPv6 destination prefix → `reroute_backup(slot,
//! flow_class, backup_nexthop_id, primary_port)` | `reroute_notify(slot,
//! flow_class)` | `NoAction`) and
//! `pipe.Egress.reroute_class` (flow class → `reroute_thresholds(t_q_ns, m)` |
//! `NoAction`).

use std::collections::{BTreeMap, HashMap};

use tonic::Status;

use super::forwarding::{exact_pb, prefix, prefix_pb};
use super::forwarding6::Ipv6Lpm;
use super::{not_allowed, SmallTable};
use crate::contract::{names, CONTRACT};
use crate::grpc::codec::{invalid, Data, Keys};
use crate::grpc::entries::{action_only, params};
use crate::grpc::pb;
use crate::schema::TableSchema;
use crate::tables::small::{RerouteClassAction, RerouteWatchAction, SmallTables, WatchAddr};
use crate::tables::TableError;

/// A slot indexes `reroute_active` and `reroute_run`: one beyond them would
/// be a register access out of range on Tofino (wrapped), so it is refused.
fn slot(t: &TableSchema, d: &Data) -> Result<u16, Status> {
    let s = d.int(names::P_SLOT)?;
    if s >= u64::from(CONTRACT.config.reroute_slots) {
        return Err(invalid(format!(
            "{}: slot {s} >= reroute_slots {}",
            t.name, CONTRACT.config.reroute_slots
        )));
    }
    Ok(s as u16)
}

/// A watch list's key, by family: the IPv4 prefix (`hdr.ipv4.dst_addr`) or
/// the IPv6 one (`hdr.ipv6.dst_addr`).
pub(super) trait WatchKey: WatchAddr {
    /// The list's entries and default action.
    fn entries(s: &SmallTables) -> &BTreeMap<(Self, u8), RerouteWatchAction>;
    fn default_mut(s: &mut SmallTables) -> &mut RerouteWatchAction;
    fn key(k: &Keys) -> Result<(Self, u8), Status>;
    fn key_pb(t: &TableSchema, k: &(Self, u8)) -> pb::TableKey;
}

impl WatchKey for u32 {
    fn entries(s: &SmallTables) -> &BTreeMap<(u32, u8), RerouteWatchAction> {
        &s.reroute_watch
    }
    fn default_mut(s: &mut SmallTables) -> &mut RerouteWatchAction {
        &mut s.reroute_watch_default
    }
    fn key(k: &Keys) -> Result<(u32, u8), Status> {
        prefix(k)
    }
    fn key_pb(t: &TableSchema, k: &(u32, u8)) -> pb::TableKey {
        prefix_pb(t, *k)
    }
}

impl WatchKey for u128 {
    fn entries(s: &SmallTables) -> &BTreeMap<(u128, u8), RerouteWatchAction> {
        &s.reroute_watch6
    }
    fn default_mut(s: &mut SmallTables) -> &mut RerouteWatchAction {
        &mut s.reroute_watch6_default
    }
    fn key(k: &Keys) -> Result<(u128, u8), Status> {
        Ipv6Lpm::key(k)
    }
    fn key_pb(t: &TableSchema, k: &(u128, u8)) -> pb::TableKey {
        Ipv6Lpm::key_pb(t, k)
    }
}

/// `reroute_watch` (`A` = u32) and `reroute_watch6` (u128).
pub(super) struct RerouteWatch<A>(std::marker::PhantomData<A>);

impl<A: WatchKey> SmallTable for RerouteWatch<A> {
    type Key = (A, u8);
    type Action = RerouteWatchAction;
    type Map = BTreeMap<(A, u8), RerouteWatchAction>;
    const RESET: Option<RerouteWatchAction> = Some(RerouteWatchAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        A::entries(s)
    }
    fn write(
        s: &mut SmallTables,
        (p, l): (A, u8),
        a: Option<RerouteWatchAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.reroute_watch_write(p, l, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut RerouteWatchAction> {
        Some(A::default_mut(s))
    }
    fn default(s: &SmallTables) -> Option<RerouteWatchAction> {
        Some(A::watch(s).1)
    }
    fn key(k: &Keys) -> Result<(A, u8), Status> {
        A::key(k)
    }
    fn key_pb(t: &TableSchema, k: &(A, u8)) -> pb::TableKey {
        A::key_pb(t, k)
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<RerouteWatchAction>, Status> {
        Ok(match d.action_name() {
            Some(names::REROUTE_BACKUP) => Some(RerouteWatchAction::Backup {
                slot: slot(t, d)?,
                flow_class: d.int(names::P_FLOW_CLASS)? as u8,
                backup_nexthop_id: d.int(names::P_BACKUP_NEXTHOP_ID)? as u16,
                primary_port: d.int(names::P_PRIMARY_PORT)? as u16,
            }),
            Some(names::REROUTE_NOTIFY) => Some(RerouteWatchAction::Notify {
                slot: slot(t, d)?,
                flow_class: d.int(names::P_FLOW_CLASS)? as u8,
                primary_port: d.int(names::P_PRIMARY_PORT)? as u16,
            }),
            Some(names::NO_ACTION) => Some(RerouteWatchAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &RerouteWatchAction) -> pb::TableData {
        match *a {
            RerouteWatchAction::Backup {
                slot,
                flow_class,
                backup_nexthop_id,
                primary_port,
            } => params(
                t,
                names::REROUTE_BACKUP,
                &[
                    (names::P_SLOT, u64::from(slot)),
                    (names::P_FLOW_CLASS, u64::from(flow_class)),
                    (names::P_BACKUP_NEXTHOP_ID, u64::from(backup_nexthop_id)),
                    (names::P_PRIMARY_PORT, u64::from(primary_port)),
                ],
            ),
            RerouteWatchAction::Notify {
                slot,
                flow_class,
                primary_port,
            } => params(
                t,
                names::REROUTE_NOTIFY,
                &[
                    (names::P_SLOT, u64::from(slot)),
                    (names::P_FLOW_CLASS, u64::from(flow_class)),
                    (names::P_PRIMARY_PORT, u64::from(primary_port)),
                ],
            ),
            RerouteWatchAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}

pub(super) struct RerouteClass;

impl SmallTable for RerouteClass {
    type Key = u8;
    type Action = RerouteClassAction;
    type Map = HashMap<u8, RerouteClassAction>;
    const RESET: Option<RerouteClassAction> = Some(RerouteClassAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.reroute_class
    }
    fn write(
        s: &mut SmallTables,
        c: u8,
        a: Option<RerouteClassAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.reroute_class_write(c, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut RerouteClassAction> {
        Some(&mut s.reroute_class_default)
    }
    fn default(s: &SmallTables) -> Option<RerouteClassAction> {
        Some(s.reroute_class_default)
    }
    fn key(k: &Keys) -> Result<u8, Status> {
        Ok(k.exact(names::KEY_RR_CLASS)? as u8)
    }
    fn key_pb(t: &TableSchema, c: &u8) -> pb::TableKey {
        exact_pb(t, names::KEY_RR_CLASS, u64::from(*c))
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<RerouteClassAction>, Status> {
        Ok(match d.action_name() {
            Some(names::REROUTE_THRESHOLDS) => Some(RerouteClassAction::Thresholds {
                t_q_ns: d.int(names::P_T_Q_NS)? as u32,
                m: d.int(names::P_M)? as u16,
            }),
            Some(names::NO_ACTION) => Some(RerouteClassAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &RerouteClassAction) -> pb::TableData {
        match *a {
            RerouteClassAction::Thresholds { t_q_ns, m } => params(
                t,
                names::REROUTE_THRESHOLDS,
                &[
                    (names::P_T_Q_NS, u64::from(t_q_ns)),
                    (names::P_M, u64::from(m)),
                ],
            ),
            RerouteClassAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}
