//! The congestion-reroute tables, kept in the small tables' snapshot:
//! `pipe.Ingress.reroute_watch` (destination prefix → `reroute_backup(slot,
//! flow_class, backup_nexthop_id, primary_port)` | `reroute_notify(slot,
//! flow_class)` | `NoAction`) and `pipe.Egress.reroute_class` (flow class →
//! `reroute_thresholds(t_q_ns, m, hold_ms)` | `NoAction`).

use tonic::Status;

use super::small::{entry, inserts, need, not_allowed, update, Entry};
use super::{action_only, params, Op, Reader, Target, Update};
use crate::contract::{names, CONTRACT};
use crate::grpc::codec::{invalid, key_exact, key_lpm, Data, Keys};
use crate::grpc::pb;
use crate::schema::{TableKind, TableSchema};
use crate::tables::small::{prefix_mask, RerouteClassAction, RerouteWatchAction};

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    match u.t.kind {
        TableKind::RerouteWatch => apply_watch(u),
        _ => apply_class(u),
    }
}

// ---------------------------------------------------------------- reroute_watch

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

fn watch_action(t: &TableSchema, d: &Data) -> Result<Option<RerouteWatchAction>, Status> {
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
        }),
        Some(names::NO_ACTION) => Some(RerouteWatchAction::NoAction),
        None => None,
        Some(o) => return Err(not_allowed(t, o)),
    })
}

fn watch_key(keys: &Keys) -> Result<(u32, u8), Status> {
    let (p, l) = keys.lpm(names::KEY_IPV4_DST)?;
    Ok((p as u32, l))
}

fn apply_watch(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let a = watch_action(t, &u.data)?;
    let entry = entry(u, watch_key)?;
    let op = u.op;
    update(u, |s| match entry {
        Entry::Default => {
            s.reroute_watch_default = if op == Op::Delete {
                RerouteWatchAction::NoAction
            } else {
                a.unwrap_or(s.reroute_watch_default)
            };
            Ok(())
        }
        Entry::All => {
            for (p, l) in s.reroute_watch.keys().copied().collect::<Vec<_>>() {
                s.reroute_watch_write(p, l, None, false)?;
            }
            Ok(())
        }
        Entry::Key((p, l)) if op == Op::Delete => s.reroute_watch_write(p, l, None, false),
        Entry::Key((p, l)) => {
            let exists = s.reroute_watch.contains_key(&(p & prefix_mask(l), l));
            s.reroute_watch_write(p, l, Some(need(a, t)?), inserts(op, exists))
        }
    })
}

fn watch_data(t: &TableSchema, a: RerouteWatchAction) -> pb::TableData {
    match a {
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
        RerouteWatchAction::Notify { slot, flow_class } => params(
            t,
            names::REROUTE_NOTIFY,
            &[
                (names::P_SLOT, u64::from(slot)),
                (names::P_FLOW_CLASS, u64::from(flow_class)),
            ],
        ),
        RerouteWatchAction::NoAction => action_only(t, names::NO_ACTION),
    }
}

// ---------------------------------------------------------------- reroute_class

fn class_action(t: &TableSchema, d: &Data) -> Result<Option<RerouteClassAction>, Status> {
    Ok(match d.action_name() {
        Some(names::REROUTE_THRESHOLDS) => Some(RerouteClassAction::Thresholds {
            t_q_ns: d.int(names::P_T_Q_NS)? as u32,
            m: d.int(names::P_M)? as u16,
            hold_ms: d.int(names::P_HOLD_MS)? as u32,
        }),
        Some(names::NO_ACTION) => Some(RerouteClassAction::NoAction),
        None => None,
        Some(o) => return Err(not_allowed(t, o)),
    })
}

fn class_key(keys: &Keys) -> Result<u8, Status> {
    Ok(keys.exact(names::KEY_RR_CLASS)? as u8)
}

fn apply_class(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let a = class_action(t, &u.data)?;
    let entry = entry(u, class_key)?;
    let op = u.op;
    update(u, |s| match entry {
        Entry::Default => {
            s.reroute_class_default = if op == Op::Delete {
                RerouteClassAction::NoAction
            } else {
                a.unwrap_or(s.reroute_class_default)
            };
            Ok(())
        }
        Entry::All => {
            s.reroute_class.clear();
            Ok(())
        }
        Entry::Key(c) if op == Op::Delete => s.reroute_class_write(c, None, false),
        Entry::Key(c) => {
            let exists = s.reroute_class.contains_key(&c);
            s.reroute_class_write(c, Some(need(a, t)?), inserts(op, exists))
        }
    })
}

fn class_data(t: &TableSchema, a: RerouteClassAction) -> pb::TableData {
    match a {
        RerouteClassAction::Thresholds { t_q_ns, m, hold_ms } => params(
            t,
            names::REROUTE_THRESHOLDS,
            &[
                (names::P_T_Q_NS, u64::from(t_q_ns)),
                (names::P_M, u64::from(m)),
                (names::P_HOLD_MS, u64::from(hold_ms)),
            ],
        ),
        RerouteClassAction::NoAction => action_only(t, names::NO_ACTION),
    }
}

// ---------------------------------------------------------------- reads

pub(super) fn default_data(r: &Reader) -> pb::TableData {
    let small = r.sw.pipeline.small.load();
    match r.t.kind {
        TableKind::RerouteWatch => watch_data(r.t, small.reroute_watch_default),
        _ => class_data(r.t, small.reroute_class_default),
    }
}

pub(super) fn read(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let t = r.t;
    let small = r.sw.pipeline.small.load_full();
    let keys = match target {
        Target::Key(k) => Some(Keys::new(t, k)?),
        _ => None,
    };
    if t.kind == TableKind::RerouteWatch {
        let ks = t.key_by_name(names::KEY_IPV4_DST).expect("schema");
        let row = |(p, l): (u32, u8), a: RerouteWatchAction| {
            r.entry(
                pb::TableKey {
                    fields: vec![key_lpm(ks, u64::from(p), l)],
                },
                watch_data(t, a),
            )
        };
        match keys {
            Some(keys) => {
                let (p, l) = watch_key(&keys)?;
                let k = (p & prefix_mask(l), l);
                let a = small.reroute_watch.get(&k).ok_or_else(|| r.not_found())?;
                out(row(k, *a));
            }
            None => small
                .reroute_watch
                .iter()
                .for_each(|(k, a)| out(row(*k, *a))),
        }
    } else {
        let ks = t.key_by_name(names::KEY_RR_CLASS).expect("schema");
        let row = |c: u8, a: RerouteClassAction| {
            r.entry(
                pb::TableKey {
                    fields: vec![key_exact(ks, u64::from(c))],
                },
                class_data(t, a),
            )
        };
        match keys {
            Some(keys) => {
                let c = class_key(&keys)?;
                let a = small.reroute_class.get(&c).ok_or_else(|| r.not_found())?;
                out(row(c, *a));
            }
            None => {
                let mut cs: Vec<_> = small.reroute_class.iter().collect();
                cs.sort_by_key(|(c, _)| **c);
                cs.into_iter().for_each(|(c, a)| out(row(*c, *a)));
            }
        }
    }
    Ok(())
}
