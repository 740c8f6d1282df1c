//! `pipe.Ingress.leg_rewrite`: leg → `rewrite(src_addr, dst_addr, src_port, dst_port)`,
//! with its direct counter (`$COUNTER_SPEC_BYTES` / `_PKTS`: the direction's
//! packets, the fast path's included); `pipe.Ingress.leg_rewrite6`
//! (relay6.rs: what differs) the same with IPv6 addresses. Legs are one index
//! space for both: a leg has its rewrite in one of the two tables.

use tonic::Status;

use super::{counters_of, table_status, u32_of, Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{df_int, df_int128, invalid, key_exact, Data, Keys};
use crate::grpc::{pb, Switch};
use crate::pipeline::Pipeline;
use crate::schema::{TableSchema, ID_COUNTER_BYTES, ID_COUNTER_PKTS};
use crate::tables::legs::{LegRewrites, LegTable, Rewrite, RewriteOf};

/// What leg_rewrite and leg_rewrite6 differ in.
pub(super) trait LegFamily: LegRewrites {
    /// The key field (`ig_md.leg`, `ig_md.leg6`) and the action.
    const KEY: &'static str;
    const ACTION: &'static str;
    /// The other family's table, which must not hold the leg.
    const OTHER: &'static str;
    fn table(p: &Pipeline) -> &Self;
    fn in_other(p: &Pipeline, leg: u32) -> bool;
    /// The direct counter (packets, bytes), the fast path's part included.
    fn counts(p: &Pipeline, leg: u32) -> (u64, u64);
    fn set_counts(p: &Pipeline, leg: u32, pkts: u64, bytes: u64);
    /// An address parameter of the action.
    fn addr(d: &Data, name: &str) -> Result<Self::Addr, Status>;
    fn undo(leg: u32, prev: Option<RewriteOf<Self::Addr>>, counts: (u64, u64)) -> Undo;
}

impl LegFamily for LegTable {
    const KEY: &'static str = names::KEY_LEG;
    const ACTION: &'static str = names::REWRITE;
    const OTHER: &'static str = "an IPv6 rewrite (pipe.Ingress.leg_rewrite6)";
    fn table(p: &Pipeline) -> &LegTable {
        &p.legs
    }
    fn in_other(p: &Pipeline, leg: u32) -> bool {
        p.legs6.get(leg).is_some()
    }
    fn counts(p: &Pipeline, leg: u32) -> (u64, u64) {
        p.leg_counts(leg)
    }
    fn set_counts(p: &Pipeline, leg: u32, pkts: u64, bytes: u64) {
        p.set_leg_counts(leg, pkts, bytes)
    }
    fn addr(d: &Data, name: &str) -> Result<u32, Status> {
        Ok(u32_of(d.int(name)?))
    }
    fn undo(leg: u32, prev: Option<Rewrite>, counts: (u64, u64)) -> Undo {
        Undo::Leg(leg, prev, counts)
    }
}

/// The leg of a key, within the leg space.
fn key<T: LegFamily>(u: &Update) -> Result<u32, Status> {
    let leg = u.keys()?.exact(T::KEY)? as u32;
    let legs = T::table(&u.sw.pipeline).legs();
    if leg as usize >= legs {
        return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
    }
    Ok(leg)
}

fn action<T: LegFamily>(u: &Update) -> Result<Option<RewriteOf<T::Addr>>, Status> {
    let d = &u.data;
    Ok(
        match d.action_to_set(u.op == Op::Modify).map(|a| a.name.as_str()) {
            Some(a) if a == T::ACTION => Some(RewriteOf {
                src: T::addr(d, names::P_SRC_ADDR)?,
                dst: T::addr(d, names::P_DST_ADDR)?,
                sport: d.int(names::P_SRC_PORT)? as u16,
                dport: d.int(names::P_DST_PORT)? as u16,
            }),
            Some(other) if u.op != Op::Delete => {
                return Err(invalid(format!(
                    "{}: only {} entries are stored, not {other}",
                    u.t.name,
                    T::ACTION
                )))
            }
            _ => None,
        },
    )
}

pub(super) fn apply<T: LegFamily>(u: &mut Update) -> Result<(), Status> {
    let p = &u.sw.pipeline;
    let legs = T::table(p);
    if let Some(done) = u.fixed_default_or_clear(|undo| {
        legs.clear();
        undo.push(Undo::Cleared);
    }) {
        return done;
    }
    let leg = key::<T>(u)?;
    let rw = action::<T>(u)?;
    let counters = counters_of(&u.data)?;
    let prev = legs.get(leg);
    let prev_counts = T::counts(p, leg);
    let inserted = u.op == Op::Insert || (u.op == Op::Upsert && prev.is_none());
    if let (Op::Modify, None, Some((bytes, pkts))) = (u.op, rw, counters) {
        // Resources only: the counter, the rewrite kept.
        if prev.is_none() {
            return Err(Status::not_found(format!(
                "{}: no entry for leg {leg}",
                u.t.name
            )));
        }
        T::set_counts(p, leg, pkts, bytes);
        u.undo.push(T::undo(leg, prev, prev_counts));
        return Ok(());
    }
    if inserted && rw.is_some() && T::in_other(p, leg) {
        return Err(Status::already_exists(format!(
            "{}: leg {leg} has {}; a leg is in one of the two",
            u.t.name,
            T::OTHER
        )));
    }
    match (u.op, rw) {
        (Op::Delete, _) => legs.delete(leg),
        (Op::Insert, Some(r)) => legs.insert(leg, r),
        (Op::Modify, Some(r)) => legs.modify(leg, r),
        (Op::Upsert, Some(r)) if prev.is_some() => legs.modify(leg, r),
        (Op::Upsert, Some(r)) => legs.insert(leg, r),
        (_, None) => return Err(invalid(format!("{}: needs action {}", u.t.name, T::ACTION))),
    }
    .map_err(table_status)?;
    // A new entry's counter starts at 0 (the fast path's part too), unless
    // the write sets it; a MODIFY keeps it unless the write names it.
    match counters {
        Some((bytes, pkts)) if u.op != Op::Delete => T::set_counts(p, leg, pkts, bytes),
        _ if inserted => T::set_counts(p, leg, 0, 0),
        _ => {}
    }
    u.undo.push(T::undo(leg, prev, prev_counts));
    Ok(())
}

pub(super) fn undo<T: LegFamily>(
    sw: &Switch,
    leg: u32,
    prev: Option<RewriteOf<T::Addr>>,
    counts: (u64, u64),
) {
    let p = &sw.pipeline;
    let legs = T::table(p);
    let _ = match prev {
        None => legs.delete(leg),
        Some(r) => legs.modify(leg, r).or_else(|_| legs.insert(leg, r)),
    };
    T::set_counts(p, leg, counts.0, counts.1);
}

pub(super) fn read<T: LegFamily>(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, pipeline) = (r.t, &r.sw.pipeline);
    let legs = T::table(pipeline);
    let mut emit = |leg: u32, rw: RewriteOf<T::Addr>| {
        out(r.entry(
            key_pb::<T>(t, leg),
            data_pb::<T>(t, &rw, T::counts(pipeline, leg)),
        ))
    };
    match target {
        Target::Key(k) => {
            let leg = Keys::new(t, k)?.exact(T::KEY)? as u32;
            let rw = legs
                .get(leg)
                .ok_or_else(|| Status::not_found(format!("{}: no entry for leg {leg}", t.name)))?;
            emit(leg, rw);
        }
        _ => legs.for_each(emit),
    }
    Ok(())
}

fn key_pb<T: LegFamily>(t: &TableSchema, leg: u32) -> pb::TableKey {
    pb::TableKey {
        fields: vec![key_exact(
            t.key_by_name(T::KEY).expect("schema"),
            u64::from(leg),
        )],
    }
}

fn data_pb<T: LegFamily>(
    t: &TableSchema,
    r: &RewriteOf<T::Addr>,
    (pkts, bytes): (u64, u64),
) -> pb::TableData {
    let a = t.action_by_name(T::ACTION).expect("schema");
    let p = |n: &str| a.params.iter().find(|p| p.name == n).expect("schema");
    let addr = |n: &str, v: T::Addr| df_int128(p(n).id, v.into(), p(n).bits);
    let port = |n: &str, v: u16| df_int(p(n).id, u64::from(v), p(n).bits);
    pb::TableData {
        action_id: a.id,
        fields: vec![
            addr(names::P_SRC_ADDR, r.src),
            addr(names::P_DST_ADDR, r.dst),
            port(names::P_SRC_PORT, r.sport),
            port(names::P_DST_PORT, r.dport),
            df_int(ID_COUNTER_BYTES, bytes, 64),
            df_int(ID_COUNTER_PKTS, pkts, 64),
        ],
    }
}
