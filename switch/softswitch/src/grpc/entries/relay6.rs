//! The IPv6 relay tables: `pipe.Ingress.relay6` (remote address, relay_id,
//! ports, bound port → `relay6_leg(leg, rtcp)`, `$ENTRY_TTL`),
//! `pipe.Ingress.relay_guard6` (relay_id, relay port → `guard6_drop(leg)`)
//! and `pipe.Ingress.leg_rewrite6` (leg → `rewrite6(...)`, direct counter).
//! The same rules as their IPv4 twins (relay.rs, guard.rs, legs.rs); a leg
//! has its rewrite in leg_rewrite or leg_rewrite6, never both.

use tonic::Status;

use super::{
    action_only, counters_of, params, table_status, write_exact, Op, Reader, Target, Undo, Update,
};
use crate::contract::{names, CONTRACT};
use crate::grpc::codec::{df_int, df_int128, invalid, key_exact, key_exact128, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{TableSchema, ID_COUNTER_BYTES, ID_COUNTER_PKTS, ID_ENTRY_TTL};
use crate::sys::now_ms;
use crate::tables::guard::{Guard6Key, Guard6Snapshot, GuardAction};
use crate::tables::legs6::Rewrite6;
use crate::tables::relay::{Entry6Snapshot, Relay6Key, RelayAction};

// ---------------------------------------------------------------- relay6

pub(in crate::grpc) fn relay6_key(keys: &Keys) -> Result<Relay6Key, Status> {
    Ok(Relay6Key {
        src: keys.exact128(names::KEY_IPV6_SRC)?,
        relay_id: keys.exact(names::KEY_RELAY_ID)? as u8,
        sport: keys.exact(names::KEY_UDP_SRC)? as u16,
        dport: keys.exact(names::KEY_UDP_DST)? as u16,
        port: keys.exact(names::KEY_BOUND_PORT)? as u16,
    })
}

fn relay6_action(u: &Update) -> Result<Option<RelayAction>, Status> {
    Ok(
        match u
            .data
            .action_to_set(u.op == Op::Modify)
            .map(|a| a.name.as_str())
        {
            Some(names::RELAY6_LEG) => {
                let leg = u.data.int(names::P_LEG)?;
                let legs = u.sw.pipeline.legs.capacity();
                if leg >= legs as u64 {
                    return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
                }
                Some(RelayAction::Leg {
                    leg: leg as u32,
                    rtcp: u.data.int(names::P_RTCP)? == 1,
                })
            }
            Some(other) => {
                return Err(invalid(format!("{}: action {other} not allowed", u.t.name)))
            }
            None => None,
        },
    )
}

/// `$ENTRY_TTL` in ms: 0 (no ageing) or at least the contract's minimum.
fn ttl(u: &Update) -> Result<Option<u32>, Status> {
    let ttl = u.data.int_opt(names::ENTRY_TTL)?.map(|v| v as u32);
    if let Some(ttl) = ttl {
        let min = CONTRACT.config.idle_timeout_min_ms;
        if ttl != 0 && ttl < min {
            return Err(invalid(format!(
                "$ENTRY_TTL {ttl} ms below the minimum {min} ms"
            )));
        }
    }
    Ok(ttl)
}

pub(super) fn apply_relay6(u: &mut Update) -> Result<(), Status> {
    let relay6 = &u.sw.pipeline.relay6;
    if let Some(done) = u.fixed_default_or_clear(|undo| {
        relay6.clear();
        undo.push(Undo::Cleared);
    }) {
        return done;
    }
    let k = relay6_key(&u.keys()?)?;
    if u.data.has(names::ENTRY_HIT_STATE) {
        return Err(invalid(format!(
            "{}: {} is for the idle timeout's POLL mode; this table notifies ($ENTRY_TTL)",
            u.t.name,
            names::ENTRY_HIT_STATE
        )));
    }
    let action = relay6_action(u)?;
    let ttl = ttl(u)?;
    let prev = write_exact(relay6, u, k, action, ttl)?;
    u.undo.push(Undo::Relay6(k, prev));
    Ok(())
}

pub(super) fn undo_relay6(sw: &Switch, k: Relay6Key, prev: Option<Entry6Snapshot>) {
    let relay6 = &sw.pipeline.relay6;
    match prev {
        None => {
            let _ = relay6.delete(&k);
        }
        Some(s) => {
            if relay6.get(&k, 0).is_none() {
                let _ = relay6.insert(k, s.action, s.ttl_ms, now_ms());
            }
            let _ = relay6.modify(&k, Some(s.action), Some(s.ttl_ms), now_ms());
        }
    }
}

pub(super) fn read_relay6(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, relay6) = (r.t, &r.sw.pipeline.relay6);
    let now = now_ms();
    let mut emit = |s: Entry6Snapshot| {
        let mut d = match s.action {
            RelayAction::Leg { leg, rtcp } => params(
                t,
                names::RELAY6_LEG,
                &[
                    (names::P_LEG, u64::from(leg)),
                    (names::P_RTCP, u64::from(rtcp)),
                ],
            ),
            RelayAction::NoAction => action_only(t, names::NO_ACTION),
        };
        let left = if s.ttl_ms == 0 {
            0
        } else {
            s.ttl_ms.saturating_sub(s.idle_ms)
        };
        d.fields.push(df_int(ID_ENTRY_TTL, u64::from(left), 32));
        out(r.entry(relay6_key_pb(t, &s.key), d))
    };
    match target {
        Target::Key(k) => {
            let rk = relay6_key(&Keys::new(t, k)?)?;
            let s = relay6.get(&rk, now).ok_or_else(|| r.not_found())?;
            emit(r.sw.pipeline.with_fast_idle6(s, now));
        }
        // idle as the fast path's last hits have it too
        _ => r.sw.pipeline.for_each_relay6_with_fast_idle(now, emit),
    }
    Ok(())
}

/// A relay6 key as BfRt key fields (reads, idle-timeout notifications).
pub(in crate::grpc) fn relay6_key_pb(t: &TableSchema, k: &Relay6Key) -> pb::TableKey {
    let ks = |n: &str| t.key_by_name(n).expect("schema");
    pb::TableKey {
        fields: vec![
            key_exact128(ks(names::KEY_IPV6_SRC), k.src),
            key_exact(ks(names::KEY_RELAY_ID), u64::from(k.relay_id)),
            key_exact(ks(names::KEY_UDP_SRC), u64::from(k.sport)),
            key_exact(ks(names::KEY_UDP_DST), u64::from(k.dport)),
            key_exact(ks(names::KEY_BOUND_PORT), u64::from(k.port)),
        ],
    }
}

// ---------------------------------------------------------------- relay_guard6

fn guard6_key(keys: &Keys) -> Result<Guard6Key, Status> {
    Ok(Guard6Key {
        relay_id: keys.exact(names::KEY_RELAY_ID)? as u8,
        dport: keys.exact(names::KEY_UDP_DST)? as u16,
    })
}

pub(super) fn apply_guard6(u: &mut Update) -> Result<(), Status> {
    let guard6 = &u.sw.pipeline.guard6;
    if let Some(done) = u.fixed_default_or_clear(|_| guard6.clear()) {
        return done;
    }
    let k = guard6_key(&u.keys()?)?;
    let action = match u.data.action_name() {
        Some(names::GUARD6_DROP) => {
            let leg = u.data.int(names::P_LEG)?;
            let legs = u.sw.pipeline.guard_drops.size();
            if leg >= legs as u64 {
                return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
            }
            Some(GuardAction::Drop { leg: leg as u32 })
        }
        Some(other) => return Err(invalid(format!("{}: action {other} not allowed", u.t.name))),
        None => None,
    };
    let prev = write_exact(guard6, u, k, action, None)?;
    u.undo.push(Undo::Guard6(k, prev));
    Ok(())
}

pub(super) fn undo_guard6(sw: &Switch, k: Guard6Key, prev: Option<Guard6Snapshot>) {
    let guard6 = &sw.pipeline.guard6;
    match prev {
        None => {
            let _ = guard6.delete(&k);
        }
        Some(s) => {
            if guard6.get(&k, 0).is_none() {
                let _ = guard6.insert(k, s.action, 0, now_ms());
            }
            let _ = guard6.modify(&k, Some(s.action), None, now_ms());
        }
    }
}

pub(super) fn read_guard6(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, guard6) = (r.t, &r.sw.pipeline.guard6);
    let now = now_ms();
    let mut emit = |s: Guard6Snapshot| {
        let d = match s.action {
            GuardAction::Drop { leg } => {
                params(t, names::GUARD6_DROP, &[(names::P_LEG, u64::from(leg))])
            }
            GuardAction::NoAction => action_only(t, names::NO_ACTION),
        };
        let ks = |n: &str| t.key_by_name(n).expect("schema");
        let key = pb::TableKey {
            fields: vec![
                key_exact(ks(names::KEY_RELAY_ID), u64::from(s.key.relay_id)),
                key_exact(ks(names::KEY_UDP_DST), u64::from(s.key.dport)),
            ],
        };
        out(r.entry(key, d))
    };
    match target {
        Target::Key(k) => {
            let gk = guard6_key(&Keys::new(t, k)?)?;
            emit(guard6.get(&gk, now).ok_or_else(|| r.not_found())?);
        }
        _ => guard6.for_each(now, emit),
    }
    Ok(())
}

// ---------------------------------------------------------------- leg_rewrite6
// (key ig_md.leg6: relay6's leg, in the shared leg space)

fn leg_of(u: &Update) -> Result<u32, Status> {
    let leg = u.keys()?.exact(names::KEY_LEG6)? as u32;
    let legs = u.sw.pipeline.legs6.legs();
    if leg as usize >= legs {
        return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
    }
    Ok(leg)
}

fn rewrite6(u: &Update) -> Result<Option<Rewrite6>, Status> {
    let d = &u.data;
    Ok(
        match d.action_to_set(u.op == Op::Modify).map(|a| a.name.as_str()) {
            Some(names::REWRITE6) => Some(Rewrite6 {
                src: d.int128(names::P_SRC_ADDR)?,
                dst: d.int128(names::P_DST_ADDR)?,
                sport: d.int(names::P_SRC_PORT)? as u16,
                dport: d.int(names::P_DST_PORT)? as u16,
            }),
            Some(other) if u.op != Op::Delete => {
                return Err(invalid(format!(
                    "{}: only {} entries are stored, not {other}",
                    u.t.name,
                    names::REWRITE6
                )))
            }
            _ => None,
        },
    )
}

pub(super) fn apply_legs6(u: &mut Update) -> Result<(), Status> {
    let legs6 = &u.sw.pipeline.legs6;
    if let Some(done) = u.fixed_default_or_clear(|undo| {
        legs6.clear();
        undo.push(Undo::Cleared);
    }) {
        return done;
    }
    let leg = leg_of(u)?;
    let rw = rewrite6(u)?;
    let counters = counters_of(&u.data)?;
    let prev = legs6.get(leg);
    // the fast path's part included (crate::pipeline::mirror)
    let prev_counts = u.sw.pipeline.leg6_counts(leg);
    if let (Op::Modify, None, Some((bytes, pkts))) = (u.op, rw, counters) {
        if prev.is_none() {
            return Err(Status::not_found(format!(
                "{}: no entry for leg {leg}",
                u.t.name
            )));
        }
        u.sw.pipeline.set_leg6_counts(leg, pkts, bytes);
        u.undo.push(Undo::Leg6(leg, prev, prev_counts));
        return Ok(());
    }
    let inserting = u.op == Op::Insert || (u.op == Op::Upsert && prev.is_none());
    if inserting && rw.is_some() && u.sw.pipeline.legs.get(leg).is_some() {
        return Err(Status::already_exists(format!(
            "{}: leg {leg} has an IPv4 rewrite (pipe.Ingress.leg_rewrite); a leg is in one of the two",
            u.t.name
        )));
    }
    match (u.op, rw) {
        (Op::Delete, _) => legs6.delete(leg),
        (Op::Insert, Some(r)) => legs6.insert(leg, r),
        (Op::Modify, Some(r)) => legs6.modify(leg, r),
        (Op::Upsert, Some(r)) if prev.is_some() => legs6.modify(leg, r),
        (Op::Upsert, Some(r)) => legs6.insert(leg, r),
        (_, None) => {
            return Err(invalid(format!(
                "{}: needs action {}",
                u.t.name,
                names::REWRITE6
            )))
        }
    }
    .map_err(table_status)?;
    match counters {
        Some((bytes, pkts)) if u.op != Op::Delete => {
            u.sw.pipeline.set_leg6_counts(leg, pkts, bytes)
        }
        // a new entry's counter starts at 0, the fast path's part too
        _ if inserting => u.sw.pipeline.set_leg6_counts(leg, 0, 0),
        _ => {}
    }
    u.undo.push(Undo::Leg6(leg, prev, prev_counts));
    Ok(())
}

pub(super) fn undo_legs6(sw: &Switch, leg: u32, prev: Option<Rewrite6>, counts: (u64, u64)) {
    let legs6 = &sw.pipeline.legs6;
    let _ = match prev {
        None => legs6.delete(leg),
        Some(r) => legs6.modify(leg, r).or_else(|_| legs6.insert(leg, r)),
    };
    sw.pipeline.set_leg6_counts(leg, counts.0, counts.1);
}

pub(super) fn read_legs6(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, legs6) = (r.t, &r.sw.pipeline.legs6);
    let mut emit = |leg: u32, rw: Rewrite6| {
        let a = t.action_by_name(names::REWRITE6).expect("schema");
        let p = |n: &str| a.params.iter().find(|p| p.name == n).expect("schema");
        let (pkts, bytes) = r.sw.pipeline.leg6_counts(leg);
        let d = pb::TableData {
            action_id: a.id,
            fields: vec![
                df_int128(p(names::P_SRC_ADDR).id, rw.src, 128),
                df_int128(p(names::P_DST_ADDR).id, rw.dst, 128),
                df_int(p(names::P_SRC_PORT).id, u64::from(rw.sport), 16),
                df_int(p(names::P_DST_PORT).id, u64::from(rw.dport), 16),
                df_int(ID_COUNTER_BYTES, bytes, 64),
                df_int(ID_COUNTER_PKTS, pkts, 64),
            ],
        };
        let key = pb::TableKey {
            fields: vec![key_exact(
                t.key_by_name(names::KEY_LEG6).expect("schema"),
                u64::from(leg),
            )],
        };
        out(r.entry(key, d))
    };
    match target {
        Target::Key(k) => {
            let leg = Keys::new(t, k)?.exact(names::KEY_LEG6)? as u32;
            let rw = legs6
                .get(leg)
                .ok_or_else(|| Status::not_found(format!("{}: no entry for leg {leg}", t.name)))?;
            emit(leg, rw);
        }
        _ => legs6.for_each(emit),
    }
    Ok(())
}
