//! `pipe.Ingress.leg_rewrite`: leg → `rewrite(src_addr, dst_addr, src_port, dst_port)`,
//! with its direct counter (`$COUNTER_SPEC_BYTES` / `_PKTS`: the direction's
//! packets, the fast path's included).

use tonic::Status;

use super::{counters_of, params, table_status, u32_of, Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{df_int, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{TableSchema, ID_COUNTER_BYTES, ID_COUNTER_PKTS};
use crate::tables::legs::Rewrite;

/// The leg of a key, within the table's size.
fn key(u: &Update) -> Result<u32, Status> {
    let leg = u.keys()?.exact(names::KEY_LEG)? as u32;
    let legs = u.sw.pipeline.legs.capacity();
    if leg as usize >= legs {
        return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
    }
    Ok(leg)
}

fn action(u: &Update) -> Result<Option<Rewrite>, Status> {
    let d = &u.data;
    Ok(
        match d.action_to_set(u.op == Op::Modify).map(|a| a.name.as_str()) {
            Some(names::REWRITE) => Some(Rewrite {
                src: u32_of(d.int(names::P_SRC_ADDR)?),
                dst: u32_of(d.int(names::P_DST_ADDR)?),
                sport: d.int(names::P_SRC_PORT)? as u16,
                dport: d.int(names::P_DST_PORT)? as u16,
            }),
            Some(other) if u.op != Op::Delete => {
                return Err(invalid(format!(
                    "{}: only {} entries are stored, not {other}",
                    u.t.name,
                    names::REWRITE
                )))
            }
            _ => None,
        },
    )
}

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    let legs = &u.sw.pipeline.legs;
    if let Some(done) = u.fixed_default_or_clear(|undo| {
        legs.clear();
        undo.push(Undo::Cleared);
    }) {
        return done;
    }
    let leg = key(u)?;
    let rw = action(u)?;
    let counters = counters_of(&u.data)?;
    let prev = legs.get(leg);
    let prev_counts = u.sw.pipeline.leg_counts(leg);
    let inserted = u.op == Op::Insert || (u.op == Op::Upsert && prev.is_none());
    if let (Op::Modify, None, Some((bytes, pkts))) = (u.op, rw, counters) {
        // Resources only: the counter, the rewrite kept.
        if prev.is_none() {
            return Err(Status::not_found(format!(
                "{}: no entry for leg {leg}",
                u.t.name
            )));
        }
        u.sw.pipeline.set_leg_counts(leg, pkts, bytes);
        u.undo.push(Undo::Leg(leg, prev, prev_counts));
        return Ok(());
    }
    if inserted && rw.is_some() && u.sw.pipeline.legs6.get(leg).is_some() {
        return Err(Status::already_exists(format!(
            "{}: leg {leg} has an IPv6 rewrite (pipe.Ingress.leg_rewrite6); a leg is in one of the two",
            u.t.name
        )));
    }
    match (u.op, rw) {
        (Op::Delete, _) => legs.delete(leg),
        (Op::Insert, Some(r)) => legs.insert(leg, r),
        (Op::Modify, Some(r)) => legs.modify(leg, r),
        (Op::Upsert, Some(r)) if prev.is_some() => legs.modify(leg, r),
        (Op::Upsert, Some(r)) => legs.insert(leg, r),
        (_, None) => {
            return Err(invalid(format!(
                "{}: needs action {}",
                u.t.name,
                names::REWRITE
            )))
        }
    }
    .map_err(table_status)?;
    // A new entry's counter starts at 0 (the fast path's part too), unless
    // the write sets it; a MODIFY keeps it unless the write names it.
    match counters {
        Some((bytes, pkts)) if u.op != Op::Delete => u.sw.pipeline.set_leg_counts(leg, pkts, bytes),
        _ if inserted => u.sw.pipeline.set_leg_counts(leg, 0, 0),
        _ => {}
    }
    u.undo.push(Undo::Leg(leg, prev, prev_counts));
    Ok(())
}

pub(super) fn undo(sw: &Switch, leg: u32, prev: Option<Rewrite>, counts: (u64, u64)) {
    let legs = &sw.pipeline.legs;
    let _ = match prev {
        None => legs.delete(leg),
        Some(r) => legs.modify(leg, r).or_else(|_| legs.insert(leg, r)),
    };
    sw.pipeline.set_leg_counts(leg, counts.0, counts.1);
}

pub(super) fn read(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, pipeline) = (r.t, &r.sw.pipeline);
    let legs = &pipeline.legs;
    let mut emit = |leg: u32, rw: Rewrite| {
        out(r.entry(key_pb(t, leg), data_pb(t, &rw, pipeline.leg_counts(leg))))
    };
    match target {
        Target::Key(k) => {
            let leg = Keys::new(t, k)?.exact(names::KEY_LEG)? as u32;
            let rw = legs
                .get(leg)
                .ok_or_else(|| Status::not_found(format!("{}: no entry for leg {leg}", t.name)))?;
            emit(leg, rw);
        }
        _ => legs.for_each(emit),
    }
    Ok(())
}

fn key_pb(t: &TableSchema, leg: u32) -> pb::TableKey {
    pb::TableKey {
        fields: vec![key_exact(
            t.key_by_name(names::KEY_LEG).expect("schema"),
            u64::from(leg),
        )],
    }
}

fn data_pb(t: &TableSchema, r: &Rewrite, (pkts, bytes): (u64, u64)) -> pb::TableData {
    let mut d = params(
        t,
        names::REWRITE,
        &[
            (names::P_SRC_ADDR, u64::from(r.src)),
            (names::P_DST_ADDR, u64::from(r.dst)),
            (names::P_SRC_PORT, u64::from(r.sport)),
            (names::P_DST_PORT, u64::from(r.dport)),
        ],
    );
    d.fields.push(df_int(ID_COUNTER_BYTES, bytes, 64));
    d.fields.push(df_int(ID_COUNTER_PKTS, pkts, 64));
    d
}
