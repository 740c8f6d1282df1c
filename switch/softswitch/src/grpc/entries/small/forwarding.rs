//! `pipe.Ingress.ipv4_lpm` (prefix → `set_nexthop` | `drop`),
//! `pipe.Ingress.nexthop` (id → `forward(port, src_mac, dst_mac)` | `drop`)
//! and `pipe.Ingress.relay_addr` (address, port range, priority →
//! `mark_relay` | `NoAction`).

use std::collections::{BTreeMap, HashMap};

use tonic::Status;

use super::{not_allowed, SmallTable};
use crate::contract::names;
use crate::grpc::codec::{key_exact, key_lpm, key_range, Data, Keys};
use crate::grpc::entries::{action_only, params};
use crate::grpc::pb;
use crate::schema::TableSchema;
use crate::tables::small::{
    prefix_mask, LpmAction, NexthopAction, RelayAddrAction, RelayAddrKey, SmallTables,
};
use crate::tables::TableError;

/// An LPM key on `ipv4_dst`, without host bits (as the table keeps it).
pub(super) fn prefix(keys: &Keys) -> Result<(u32, u8), Status> {
    let (p, l) = keys.lpm(names::KEY_IPV4_DST)?;
    Ok((p as u32 & prefix_mask::<u32>(l), l))
}

pub(super) fn prefix_pb(t: &TableSchema, (p, l): (u32, u8)) -> pb::TableKey {
    let ks = t.key_by_name(names::KEY_IPV4_DST).expect("schema");
    pb::TableKey {
        fields: vec![key_lpm(ks, u64::from(p), l)],
    }
}

/// An exact key on one field.
pub(super) fn exact_pb(t: &TableSchema, name: &str, v: u64) -> pb::TableKey {
    let ks = t.key_by_name(name).expect("schema");
    pb::TableKey {
        fields: vec![key_exact(ks, v)],
    }
}

/// ipv4_lpm's and ipv6_lpm's action: `set_nexthop(nexthop_id)` or `drop`.
pub(super) fn lpm_action(t: &TableSchema, d: &Data) -> Result<Option<LpmAction>, Status> {
    Ok(match d.action_name() {
        Some(names::SET_NEXTHOP) => Some(LpmAction::SetNexthop(d.int(names::P_NEXTHOP_ID)? as u16)),
        Some(names::DROP) => Some(LpmAction::Drop),
        None => None,
        Some(o) => return Err(not_allowed(t, o)),
    })
}

pub(super) fn lpm_data(t: &TableSchema, a: &LpmAction) -> pb::TableData {
    match *a {
        LpmAction::SetNexthop(id) => params(
            t,
            names::SET_NEXTHOP,
            &[(names::P_NEXTHOP_ID, u64::from(id))],
        ),
        LpmAction::Drop => action_only(t, names::DROP),
    }
}

pub(super) struct Ipv4Lpm;

impl SmallTable for Ipv4Lpm {
    type Key = (u32, u8);
    type Action = LpmAction;
    type Map = BTreeMap<(u32, u8), LpmAction>;
    const RESET: Option<LpmAction> = Some(LpmAction::Drop);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.lpm
    }
    fn write(
        s: &mut SmallTables,
        (p, l): (u32, u8),
        a: Option<LpmAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.lpm_write(p, l, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut LpmAction> {
        Some(&mut s.lpm_default)
    }
    fn default(s: &SmallTables) -> Option<LpmAction> {
        Some(s.lpm_default)
    }
    fn key(k: &Keys) -> Result<(u32, u8), Status> {
        prefix(k)
    }
    fn key_pb(t: &TableSchema, k: &(u32, u8)) -> pb::TableKey {
        prefix_pb(t, *k)
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<LpmAction>, Status> {
        lpm_action(t, d)
    }
    fn data(t: &TableSchema, a: &LpmAction) -> pb::TableData {
        lpm_data(t, a)
    }
}

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_u64(m: &[u8; 6]) -> u64 {
    m.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

pub(super) struct Nexthop;

impl SmallTable for Nexthop {
    type Key = u16;
    type Action = NexthopAction;
    type Map = HashMap<u16, NexthopAction>;
    const RESET: Option<NexthopAction> = Some(NexthopAction::Drop);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.nexthop
    }
    fn write(
        s: &mut SmallTables,
        id: u16,
        a: Option<NexthopAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.nexthop_write(id, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut NexthopAction> {
        Some(&mut s.nexthop_default)
    }
    fn default(s: &SmallTables) -> Option<NexthopAction> {
        Some(s.nexthop_default)
    }
    fn key(k: &Keys) -> Result<u16, Status> {
        Ok(k.exact(names::KEY_NEXTHOP_ID)? as u16)
    }
    fn key_pb(t: &TableSchema, id: &u16) -> pb::TableKey {
        exact_pb(t, names::KEY_NEXTHOP_ID, u64::from(*id))
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<NexthopAction>, Status> {
        Ok(match d.action_name() {
            Some(names::FORWARD) => Some(NexthopAction::Forward {
                port: d.int(names::P_PORT)? as u16,
                src_mac: mac(d.int(names::P_SRC_MAC)?),
                dst_mac: mac(d.int(names::P_DST_MAC)?),
            }),
            Some(names::DROP) => Some(NexthopAction::Drop),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &NexthopAction) -> pb::TableData {
        match a {
            NexthopAction::Forward {
                port,
                src_mac,
                dst_mac,
            } => params(
                t,
                names::FORWARD,
                &[
                    (names::P_PORT, u64::from(*port)),
                    (names::P_SRC_MAC, mac_u64(src_mac)),
                    (names::P_DST_MAC, mac_u64(dst_mac)),
                ],
            ),
            NexthopAction::Drop => action_only(t, names::DROP),
        }
    }
}

pub(super) struct RelayAddr;

impl SmallTable for RelayAddr {
    type Key = RelayAddrKey;
    type Action = RelayAddrAction;
    type Map = BTreeMap<RelayAddrKey, RelayAddrAction>;
    const RESET: Option<RelayAddrAction> = Some(RelayAddrAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.relay_addr
    }
    fn write(
        s: &mut SmallTables,
        k: RelayAddrKey,
        a: Option<RelayAddrAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.relay_addr_write(k, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut RelayAddrAction> {
        Some(&mut s.relay_addr_default)
    }
    fn default(s: &SmallTables) -> Option<RelayAddrAction> {
        Some(s.relay_addr_default)
    }
    fn key(k: &Keys) -> Result<RelayAddrKey, Status> {
        let (lo, hi) = k.range(names::KEY_UDP_DST)?;
        Ok(RelayAddrKey {
            // bf-p4c: an optional uint32, 0 when absent.
            priority: k.exact_opt(names::MATCH_PRIORITY)?.unwrap_or(0) as u32,
            dst: k.exact(names::KEY_IPV4_DST)? as u32,
            lo: lo as u16,
            hi: hi as u16,
        })
    }
    fn key_pb(t: &TableSchema, k: &RelayAddrKey) -> pb::TableKey {
        let ks = |n: &str| t.key_by_name(n).expect("schema");
        pb::TableKey {
            fields: vec![
                key_exact(ks(names::KEY_IPV4_DST), u64::from(k.dst)),
                key_range(ks(names::KEY_UDP_DST), u64::from(k.lo), u64::from(k.hi)),
                key_exact(ks(names::MATCH_PRIORITY), u64::from(k.priority)),
            ],
        }
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<RelayAddrAction>, Status> {
        Ok(match d.action_name() {
            Some(names::MARK_RELAY) => Some(RelayAddrAction::MarkRelay),
            Some(names::NO_ACTION) => Some(RelayAddrAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &RelayAddrAction) -> pb::TableData {
        match a {
            RelayAddrAction::MarkRelay => action_only(t, names::MARK_RELAY),
            RelayAddrAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}
