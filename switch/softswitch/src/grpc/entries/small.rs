//! The small tables, kept in one snapshot the data path reads without locks:
//! `pipe.Ingress.ipv4_lpm` (prefix → `set_nexthop` | `drop`),
//! `pipe.Ingress.nexthop` (id → `forward(port, src_mac, dst_mac)` | `drop`) and
//! `pipe.Ingress.relay_addr` (address, port range, priority → `mark_relay`)
//! and `pipe.Egress.ired_port` (egress port → `ired_set(...)`, validated:
//! a port of this switch, 1 <= ewma_n <= contract max, 0 < N < maxLenQueue / 2).
//! Writes replace the snapshot; the undo is the snapshot before.

use tonic::Status;

use super::{action_only, params, table_status, Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{invalid, key_exact, key_lpm, key_range, Data, Keys};
use crate::grpc::{pb, Switch};
use crate::pipeline::ired::IredConfig;
use crate::schema::{TableKind, TableSchema};
use crate::tables::small::{
    prefix_mask, LpmAction, NexthopAction, RelayAddrAction, RelayAddrKey, SmallTables,
};
use crate::tables::TableError;

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    match u.t.kind {
        TableKind::Ipv4Lpm => apply_lpm(u),
        TableKind::Nexthop => apply_nexthop(u),
        TableKind::IredPort => apply_ired_port(u),
        _ => apply_relay_addr(u),
    }
}

/// Which entry of a small table a write addresses, decoded.
pub(super) enum Entry<K> {
    Default,
    All,
    Key(K),
}

pub(super) fn entry<K>(
    u: &Update,
    key: impl FnOnce(&Keys) -> Result<K, Status>,
) -> Result<Entry<K>, Status> {
    Ok(match u.target {
        Target::Default => Entry::Default,
        Target::All if u.op != Op::Delete => {
            return Err(invalid(format!("{}: key missing", u.t.name)))
        }
        Target::All => Entry::All,
        Target::Key(_) => Entry::Key(key(&u.keys()?)?),
    })
}

/// Applies `f` to a copy of the tables and publishes it; records the undo.
pub(super) fn update(
    u: &mut Update,
    f: impl FnOnce(&mut SmallTables) -> Result<(), TableError>,
) -> Result<(), Status> {
    let small = &u.sw.pipeline.small;
    let snapshot = small.load_full();
    small.update(f).map_err(table_status)?;
    u.undo.push(Undo::Small(snapshot));
    Ok(())
}

/// Whether a keyed write inserts (else modifies or deletes) an entry that
/// `exists` or not.
pub(super) fn inserts(op: Op, exists: bool) -> bool {
    op == Op::Insert || (op == Op::Upsert && !exists)
}

pub(super) fn need<T>(a: Option<T>, t: &TableSchema) -> Result<T, TableError> {
    a.ok_or_else(|| TableError::Invalid(format!("{}: an action is required", t.name)))
}

pub(super) fn not_allowed(t: &TableSchema, a: &str) -> Status {
    invalid(format!("{}: action {a} not allowed", t.name))
}

// ---------------------------------------------------------------- ipv4_lpm

fn lpm_action(t: &TableSchema, d: &Data) -> Result<Option<LpmAction>, Status> {
    Ok(match d.action_name() {
        Some(names::SET_NEXTHOP) => Some(LpmAction::SetNexthop(d.int(names::P_NEXTHOP_ID)? as u16)),
        Some(names::DROP) => Some(LpmAction::Drop),
        None => None,
        Some(o) => return Err(not_allowed(t, o)),
    })
}

fn lpm_key(keys: &Keys) -> Result<(u32, u8), Status> {
    let (p, l) = keys.lpm(names::KEY_IPV4_DST)?;
    Ok((p as u32, l))
}

fn apply_lpm(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let a = lpm_action(t, &u.data)?;
    let entry = entry(u, lpm_key)?;
    let op = u.op;
    update(u, |s| match entry {
        Entry::Default => {
            s.lpm_default = if op == Op::Delete {
                LpmAction::Drop
            } else {
                a.unwrap_or(s.lpm_default)
            };
            Ok(())
        }
        Entry::All => {
            for (p, l) in s.lpm.keys().copied().collect::<Vec<_>>() {
                s.lpm_write(p, l, None, false)?;
            }
            Ok(())
        }
        Entry::Key((p, l)) if op == Op::Delete => s.lpm_write(p, l, None, false),
        Entry::Key((p, l)) => {
            let exists = s.lpm.contains_key(&(p & prefix_mask(l), l));
            s.lpm_write(p, l, Some(need(a, t)?), inserts(op, exists))
        }
    })
}

fn lpm_data(t: &TableSchema, a: LpmAction) -> pb::TableData {
    match a {
        LpmAction::SetNexthop(id) => params(
            t,
            names::SET_NEXTHOP,
            &[(names::P_NEXTHOP_ID, u64::from(id))],
        ),
        LpmAction::Drop => action_only(t, names::DROP),
    }
}

// ---------------------------------------------------------------- nexthop

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_u64(m: &[u8; 6]) -> u64 {
    m.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

fn nexthop_action(t: &TableSchema, d: &Data) -> Result<Option<NexthopAction>, Status> {
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

fn nexthop_key(keys: &Keys) -> Result<u16, Status> {
    Ok(keys.exact(names::KEY_NEXTHOP_ID)? as u16)
}

fn apply_nexthop(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let a = nexthop_action(t, &u.data)?;
    let entry = entry(u, nexthop_key)?;
    let op = u.op;
    update(u, |s| match entry {
        Entry::Default => {
            s.nexthop_default = if op == Op::Delete {
                NexthopAction::Drop
            } else {
                a.unwrap_or(s.nexthop_default)
            };
            Ok(())
        }
        Entry::All => {
            s.nexthop.clear();
            Ok(())
        }
        Entry::Key(id) if op == Op::Delete => s.nexthop_write(id, None, false),
        Entry::Key(id) => {
            let exists = s.nexthop.contains_key(&id);
            s.nexthop_write(id, Some(need(a, t)?), inserts(op, exists))
        }
    })
}

fn nexthop_data(t: &TableSchema, a: NexthopAction) -> pb::TableData {
    match a {
        NexthopAction::Forward {
            port,
            src_mac,
            dst_mac,
        } => params(
            t,
            names::FORWARD,
            &[
                (names::P_PORT, u64::from(port)),
                (names::P_SRC_MAC, mac_u64(&src_mac)),
                (names::P_DST_MAC, mac_u64(&dst_mac)),
            ],
        ),
        NexthopAction::Drop => action_only(t, names::DROP),
    }
}

// ---------------------------------------------------------------- relay_addr

fn relay_addr_action(t: &TableSchema, d: &Data) -> Result<Option<RelayAddrAction>, Status> {
    Ok(match d.action_name() {
        Some(names::MARK_RELAY) => Some(RelayAddrAction::MarkRelay),
        Some(names::NO_ACTION) => Some(RelayAddrAction::NoAction),
        None => None,
        Some(o) => return Err(not_allowed(t, o)),
    })
}

fn relay_addr_key(k: &Keys) -> Result<RelayAddrKey, Status> {
    let (lo, hi) = k.range(names::KEY_UDP_DST)?;
    Ok(RelayAddrKey {
        // bf-p4c: an optional uint32, 0 when absent.
        priority: k.exact_opt(names::MATCH_PRIORITY)?.unwrap_or(0) as u32,
        dst: k.exact(names::KEY_IPV4_DST)? as u32,
        lo: lo as u16,
        hi: hi as u16,
    })
}

fn apply_relay_addr(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let a = relay_addr_action(t, &u.data)?;
    let entry = entry(u, relay_addr_key)?;
    let op = u.op;
    update(u, |s| match entry {
        Entry::Default => {
            s.relay_addr_default = if op == Op::Delete {
                RelayAddrAction::NoAction
            } else {
                a.unwrap_or(s.relay_addr_default)
            };
            Ok(())
        }
        Entry::All => {
            s.relay_addr.clear();
            Ok(())
        }
        Entry::Key(rk) if op == Op::Delete => s.relay_addr_write(rk, None, false),
        Entry::Key(rk) => {
            let exists = s.relay_addr.contains_key(&rk);
            s.relay_addr_write(rk, Some(need(a, t)?), inserts(op, exists))
        }
    })
}

fn relay_addr_data(t: &TableSchema, a: RelayAddrAction) -> pb::TableData {
    match a {
        RelayAddrAction::MarkRelay => action_only(t, names::MARK_RELAY),
        RelayAddrAction::NoAction => action_only(t, names::NO_ACTION),
    }
}

fn relay_addr_key_pb(t: &TableSchema, k: &RelayAddrKey) -> pb::TableKey {
    let ks = |n: &str| t.key_by_name(n).expect("schema");
    pb::TableKey {
        fields: vec![
            key_exact(ks(names::KEY_IPV4_DST), u64::from(k.dst)),
            key_range(ks(names::KEY_UDP_DST), u64::from(k.lo), u64::from(k.hi)),
            key_exact(ks(names::MATCH_PRIORITY), u64::from(k.priority)),
        ],
    }
}

// ---------------------------------------------------------------- ired_port

fn ired_action(u: &Update) -> Result<Option<IredConfig>, Status> {
    let (t, d) = (u.t, &u.data);
    Ok(match d.action_name() {
        Some(names::IRED_SET) => {
            let c = IredConfig {
                max_len_queue: d.int(names::P_MAX_LEN_QUEUE)? as u32,
                n_drop: d.int(names::P_N_DROP)? as u32,
                ewma_n: d.int(names::P_EWMA_N)? as u8,
                tail_drop: d.int(names::P_TAIL_DROP)? != 0,
                protect: d.int(names::P_PROTECT)? != 0,
            };
            c.validate(crate::contract::CONTRACT.config.ired_ewma_n_max)
                .map_err(|m| invalid(format!("{}: {m}", t.name)))?;
            Some(c)
        }
        None => None,
        Some(o) => return Err(not_allowed(t, o)),
    })
}

fn ired_key(u: &Update) -> Result<u16, Status> {
    let port = u.keys()?.exact(names::KEY_EGRESS_PORT)?;
    if !u.sw.pipeline.has_port(port as u32) {
        return Err(invalid(format!(
            "{}: port {port} is not a port of this switch",
            u.t.name
        )));
    }
    Ok(port as u16)
}

fn apply_ired_port(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let op = u.op;
    match u.target {
        Target::Default => {
            return match u.data.action_name() {
                None | Some(names::NO_ACTION) => Ok(()),
                Some(a) => Err(invalid(format!(
                    "{}: default action is fixed to NoAction, not {a}",
                    t.name
                ))),
            }
        }
        Target::All if op != Op::Delete => return Err(invalid(format!("{}: key missing", t.name))),
        Target::All => {
            return update(u, |s| {
                for p in s.ired_port.keys().copied().collect::<Vec<_>>() {
                    s.ired_port_write(p, None, false)?;
                }
                Ok(())
            })
        }
        Target::Key(_) => {}
    }
    let port = ired_key(u)?;
    if op == Op::Delete {
        return update(u, |s| s.ired_port_write(port, None, false));
    }
    let c = ired_action(u)?;
    update(u, |s| {
        let exists = s.ired_port.contains_key(&port);
        s.ired_port_write(port, Some(need(c, t)?), inserts(op, exists))
    })
}

fn ired_data(t: &TableSchema, c: &IredConfig) -> pb::TableData {
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

// ---------------------------------------------------------------- reads

pub(super) fn undo(sw: &Switch, snapshot: &SmallTables) {
    let _ = sw.pipeline.small.update(|t| {
        *t = snapshot.clone();
        Ok(())
    });
}

/// The default entry's action.
pub(super) fn default_data(r: &Reader) -> pb::TableData {
    let small = r.sw.pipeline.small.load();
    match r.t.kind {
        TableKind::Ipv4Lpm => lpm_data(r.t, small.lpm_default),
        TableKind::Nexthop => nexthop_data(r.t, small.nexthop_default),
        TableKind::IredPort => action_only(r.t, names::NO_ACTION),
        _ => relay_addr_data(r.t, small.relay_addr_default),
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
    match t.kind {
        TableKind::Ipv4Lpm => {
            let ks = t.key_by_name(names::KEY_IPV4_DST).expect("schema");
            let row = |(p, l): (u32, u8), a: LpmAction| {
                r.entry(
                    pb::TableKey {
                        fields: vec![key_lpm(ks, u64::from(p), l)],
                    },
                    lpm_data(t, a),
                )
            };
            match keys {
                Some(keys) => {
                    let (p, l) = lpm_key(&keys)?;
                    let k = (p & prefix_mask(l), l);
                    let a = small.lpm.get(&k).ok_or_else(|| r.not_found())?;
                    out(row(k, *a));
                }
                None => small.lpm.iter().for_each(|(k, a)| out(row(*k, *a))),
            }
        }
        TableKind::Nexthop => {
            let ks = t.key_by_name(names::KEY_NEXTHOP_ID).expect("schema");
            let row = |id: u16, a: NexthopAction| {
                r.entry(
                    pb::TableKey {
                        fields: vec![key_exact(ks, u64::from(id))],
                    },
                    nexthop_data(t, a),
                )
            };
            match keys {
                Some(keys) => {
                    let id = nexthop_key(&keys)?;
                    let a = small.nexthop.get(&id).ok_or_else(|| r.not_found())?;
                    out(row(id, *a));
                }
                None => {
                    let mut ids: Vec<_> = small.nexthop.iter().collect();
                    ids.sort_by_key(|(id, _)| **id);
                    ids.into_iter().for_each(|(id, a)| out(row(*id, *a)));
                }
            }
        }
        TableKind::IredPort => {
            let ks = t.key_by_name(names::KEY_EGRESS_PORT).expect("schema");
            let row = |port: u16, c: &IredConfig| {
                r.entry(
                    pb::TableKey {
                        fields: vec![key_exact(ks, u64::from(port))],
                    },
                    ired_data(t, c),
                )
            };
            match keys {
                Some(keys) => {
                    let port = keys.exact(names::KEY_EGRESS_PORT)? as u16;
                    let c = small.ired_port.get(&port).ok_or_else(|| r.not_found())?;
                    out(row(port, c));
                }
                None => small.ired_port.iter().for_each(|(p, c)| out(row(*p, c))),
            }
        }
        _ => {
            let row = |k: &RelayAddrKey, a: RelayAddrAction| {
                r.entry(relay_addr_key_pb(t, k), relay_addr_data(t, a))
            };
            match keys {
                Some(keys) => {
                    let rk = relay_addr_key(&keys)?;
                    let a = small.relay_addr.get(&rk).ok_or_else(|| r.not_found())?;
                    out(row(&rk, *a));
                }
                None => small.relay_addr.iter().for_each(|(k, a)| out(row(k, *a))),
            }
        }
    }
    Ok(())
}
