//! `pipe.Egress.ired_port` (egress port → `ired_set(...)`, validated: a port
//! of this switch, 1 <= ewma_n <= contract max, 0 < N < maxLenQueue / 2);
//! its default action is fixed to NoAction; and `pipe.Ingress.ired_spare`
//! (DSCP, UDP ports, ternary by priority → `ired_spare_packet` | `NoAction`).

use std::collections::BTreeMap;

use tonic::Status;

use super::forwarding::exact_pb;
use super::{not_allowed, SmallTable};
use crate::contract::{names, CONTRACT};
use crate::grpc::codec::{invalid, key_exact, key_ternary, Data, Keys};
use crate::grpc::entries::{action_only, params};
use crate::grpc::{pb, Switch};
use crate::schema::TableSchema;
use crate::tables::small::SmallTables;
use crate::tables::small::{IredConfig, IredSpareAction, IredSpareKey};
use crate::tables::TableError;

pub(super) struct IredPort;

impl SmallTable for IredPort {
    type Key = u16;
    type Action = IredConfig;
    type Map = BTreeMap<u16, IredConfig>;
    const RESET: Option<IredConfig> = None;

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.ired_port
    }
    fn write(
        s: &mut SmallTables,
        port: u16,
        c: Option<IredConfig>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.ired_port_write(port, c, insert)
    }
    fn key(k: &Keys) -> Result<u16, Status> {
        Ok(k.exact(names::KEY_EGRESS_PORT)? as u16)
    }
    fn check_key(sw: &Switch, t: &TableSchema, port: &u16) -> Result<(), Status> {
        if sw.pipeline.has_port(u32::from(*port)) {
            return Ok(());
        }
        Err(invalid(format!(
            "{}: port {port} is not a port of this switch",
            t.name
        )))
    }
    fn key_pb(t: &TableSchema, port: &u16) -> pb::TableKey {
        exact_pb(t, names::KEY_EGRESS_PORT, u64::from(*port))
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IredConfig>, Status> {
        Ok(match d.action_name() {
            Some(names::IRED_SET) => {
                let c = IredConfig {
                    max_len_queue: d.int(names::P_MAX_LEN_QUEUE)? as u32,
                    n_drop: d.int(names::P_N_DROP)? as u32,
                    ewma_n: d.int(names::P_EWMA_N)? as u8,
                    tail_drop: d.int(names::P_TAIL_DROP)? != 0,
                    protect: d.int(names::P_PROTECT)? != 0,
                };
                c.validate(CONTRACT.config.ired_ewma_n_max)
                    .map_err(|m| invalid(format!("{}: {m}", t.name)))?;
                Some(c)
            }
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, c: &IredConfig) -> pb::TableData {
        params(
            t,
            names::IRED_SET,
            &[
                (names::P_MAX_LEN_QUEUE, u64::from(c.max_len_queue)),
                (names::P_N_DROP, u64::from(c.n_drop)),
                (names::P_EWMA_N, u64::from(c.ewma_n)),
                (names::P_TAIL_DROP, u64::from(c.tail_drop)),
                (names::P_PROTECT, u64::from(c.protect)),
            ],
        )
    }
}

pub(super) struct IredSpare;

impl SmallTable for IredSpare {
    type Key = IredSpareKey;
    type Action = IredSpareAction;
    type Map = BTreeMap<IredSpareKey, IredSpareAction>;
    const RESET: Option<IredSpareAction> = Some(IredSpareAction::NoAction);

    fn entries(s: &SmallTables) -> &Self::Map {
        &s.ired_spare
    }
    fn write(
        s: &mut SmallTables,
        k: IredSpareKey,
        a: Option<IredSpareAction>,
        insert: bool,
    ) -> Result<(), TableError> {
        s.ired_spare_write(k, a, insert)
    }
    fn default_mut(s: &mut SmallTables) -> Option<&mut IredSpareAction> {
        Some(&mut s.ired_spare_default)
    }
    fn default(s: &SmallTables) -> Option<IredSpareAction> {
        Some(s.ired_spare_default)
    }
    fn key(k: &Keys) -> Result<IredSpareKey, Status> {
        let (dv, dm) = k.ternary(names::KEY_DSCP)?;
        let (sv, sm) = k.ternary(names::KEY_L4_SRC)?;
        let (pv, pm) = k.ternary(names::KEY_L4_DST)?;
        Ok(IredSpareKey {
            // bf-p4c: an optional uint32, 0 when absent.
            priority: k.exact_opt(names::MATCH_PRIORITY)?.unwrap_or(0) as u32,
            dscp: (dv as u8, dm as u8),
            sport: (sv as u16, sm as u16),
            dport: (pv as u16, pm as u16),
        })
    }
    fn key_pb(t: &TableSchema, k: &IredSpareKey) -> pb::TableKey {
        let ks = |n: &str| t.key_by_name(n).expect("schema");
        let tern = |n: &str, v: u64, m: u64| key_ternary(ks(n), v, m);
        pb::TableKey {
            fields: vec![
                tern(names::KEY_DSCP, u64::from(k.dscp.0), u64::from(k.dscp.1)),
                tern(
                    names::KEY_L4_SRC,
                    u64::from(k.sport.0),
                    u64::from(k.sport.1),
                ),
                tern(
                    names::KEY_L4_DST,
                    u64::from(k.dport.0),
                    u64::from(k.dport.1),
                ),
                key_exact(ks(names::MATCH_PRIORITY), u64::from(k.priority)),
            ],
        }
    }
    fn action(t: &TableSchema, d: &Data) -> Result<Option<IredSpareAction>, Status> {
        Ok(match d.action_name() {
            Some(names::IRED_SPARE_PACKET) => Some(IredSpareAction::Spare),
            Some(names::NO_ACTION) => Some(IredSpareAction::NoAction),
            None => None,
            Some(o) => return Err(not_allowed(t, o)),
        })
    }
    fn data(t: &TableSchema, a: &IredSpareAction) -> pb::TableData {
        match a {
            IredSpareAction::Spare => action_only(t, names::IRED_SPARE_PACKET),
            IredSpareAction::NoAction => action_only(t, names::NO_ACTION),
        }
    }
}
