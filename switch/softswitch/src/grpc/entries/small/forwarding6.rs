//! `pipe.Ingress.ipv6_lpm` (prefix → `set_nexthop` | `drop`, the shared
//! nexthop) and `pipe.Ingress.relay6_addr` (address, port range, priority →
//! `mark_relay6(relay_id)` | `NoAction`).

use std::collections::BTreeMap;

use tonic::Status;

use super::forwarding::{lpm_action, lpm_data};
use super::{not_allowed, SmallTable};
use crate::contract::{names, CONTRACT};
use crate::grpc::codec::{invalid, key_exact, key_exact128, key_lpm128, key_range, Data, Keys};
use crate::grpc::entries::{action_only, params};
use crate::grpc::pb;
use crate::schema::TableSchema;
use crate::tables::small::prefix_mask;
use crate::tables::small::{LpmAction, SmallTables};
use crate::tables::small6::{Relay6AddrAction, Relay6AddrKey};
use crate::tables::TableError;

pub(super) struct Ipv6Lpm;

impl SmallTable for Ipv6Lpm {
    type Key = (u128, u8);
    type Action = LpmAction;
    type Map = BTreeMap<(u128, u8), LpmAction>;
    const RESET: Option<LpmAction> = Some(LpmAction::Drop);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.v6.lpm
    }
    fn write(
        s: &mut SmallTables,
        (p, l): (u128, u8),
        a: Option<LpmAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.v6.lpm_write(p, l, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut LpmAction> {
        Some(&mut s.v6.lpm_default)
    }
    fn default(s: &SmallTables) -> Option<LpmAction> {
        Some(s.v6.lpm_default)
    }
    fn key(k: &Keys) -> Result<(u128, u8), Status> {
        let (p, l) = k.lpm128(names::KEY_IPV6_DST)?;
        Ok((p & prefix_mask::<u128>(l), l))
    }
    fn key_pb(t: &TableSchema, &(p, l): &(u128, u8)) -> pb::TableKey {
        let ks = t.key_by_name(names::KEY_IPV6_DST).expect("schema");
        pb::TableKey {
            fields: vec![key_lpm128(ks, p, l)],
        }
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<LpmAction>, Status> {
        lpm_action(t, d)
    }
    fn data(t: &TableSchema, a: &LpmAction) -> pb::TableData {
        lpm_data(t, a)
    }
}

pub(super) struct Relay6Addr;

impl SmallTable for Relay6Addr {
    type Key = Relay6AddrKey;
    type Action = Relay6AddrAction;
    type Map = BTreeMap<Relay6AddrKey, Relay6AddrAction>;
    const RESET: Option<Relay6AddrAction> = Some(Relay6AddrAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.v6.relay_addr
    }
    fn write(
        s: &mut SmallTables,
        k: Relay6AddrKey,
        a: Option<Relay6AddrAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.v6.relay_addr_write(k, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut Relay6AddrAction> {
        Some(&mut s.v6.relay_addr_default)
    }
    fn default(s: &SmallTables) -> Option<Relay6AddrAction> {
        Some(s.v6.relay_addr_default)
    }
    fn key(k: &Keys) -> Result<Relay6AddrKey, Status> {
        let (lo, hi) = k.range(names::KEY_UDP_DST)?;
        Ok(Relay6AddrKey {
            priority: k.exact_opt(names::MATCH_PRIORITY)?.unwrap_or(0) as u32,
            dst: k.exact128(names::KEY_IPV6_DST)?,
            lo: lo as u16,
            hi: hi as u16,
        })
    }
    fn key_pb(t: &TableSchema, k: &Relay6AddrKey) -> pb::TableKey {
        let ks = |n: &str| t.key_by_name(n).expect("schema");
        pb::TableKey {
            fields: vec![
                key_exact128(ks(names::KEY_IPV6_DST), k.dst),
                key_range(ks(names::KEY_UDP_DST), u64::from(k.lo), u64::from(k.hi)),
                key_exact(ks(names::MATCH_PRIORITY), u64::from(k.priority)),
            ],
        }
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<Relay6AddrAction>, Status> {
        Ok(match d.action_name() {
            Some(names::MARK_RELAY6) => {
                let id = d.int(names::P_RELAY_ID)?;
                let ids = u64::from(CONTRACT.config.relay6_ids);
                if id >= ids {
                    return Err(invalid(format!(
                        "{}: relay_id {id} beyond the contract's relay6_ids ({ids})",
                        t.name
                    )));
                }
                Some(Relay6AddrAction::MarkRelay6 { relay_id: id as u8 })
            }
            Some(names::NO_ACTION) => Some(Relay6AddrAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &Relay6AddrAction) -> pb::TableData {
        match a {
            Relay6AddrAction::MarkRelay6 { relay_id } => params(
                t,
                names::MARK_RELAY6,
                &[(names::P_RELAY_ID, u64::from(*relay_id))],
            ),
            Relay6AddrAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}
