//! Indexed counter tables (`pipe.Ingress.guard_drops`): `$COUNTER_INDEX` →
//! `$COUNTER_SPEC_PKTS`. A MODIFY sets a cell, a DELETE (or keyless DELETE,
//! the whole table) zeroes it, as bf_switchd's counter tables do.

use tonic::Status;

use super::{Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{df_int, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{Ctr, TableSchema};

fn read_one(sw: &Switch, ctr: Ctr, i: usize) -> Option<u64> {
    match ctr {
        Ctr::GuardDrops => sw.pipeline.guard_drops.read(i),
    }
}

/// Sets one cell (also the undo of a write); false: index out of range.
pub(super) fn write(sw: &Switch, ctr: Ctr, i: usize, v: u64) -> bool {
    match ctr {
        Ctr::GuardDrops => sw.pipeline.guard_drops.write(i, v),
    }
}

fn out_of_range(t: &TableSchema, i: usize) -> Status {
    Status::out_of_range(format!("{}: index {i} >= size {}", t.name, t.size))
}

pub(super) fn apply(u: &mut Update, ctr: Ctr) -> Result<(), Status> {
    let (sw, t) = (u.sw, u.t);
    if !matches!(u.target, Target::Key(_)) {
        if u.op != Op::Delete {
            return Err(invalid(format!(
                "{}: {} missing",
                t.name,
                names::COUNTER_INDEX
            )));
        }
        for i in 0..t.size as usize {
            write(sw, ctr, i, 0);
        }
        return Ok(());
    }
    let i = u.keys()?.exact(names::COUNTER_INDEX)? as usize;
    let old = read_one(sw, ctr, i).ok_or_else(|| out_of_range(t, i))?;
    if u.op == Op::Insert {
        return Err(invalid(format!(
            "{}: a counter cell always exists; MODIFY sets it",
            t.name
        )));
    }
    if u.data.has(names::COUNTER_SPEC_BYTES) {
        return Err(invalid(format!(
            "{}: counts packets only, no {}",
            t.name,
            names::COUNTER_SPEC_BYTES
        )));
    }
    let v = if u.op == Op::Delete {
        0
    } else {
        u.data.int_opt(names::COUNTER_SPEC_PKTS)?.ok_or_else(|| {
            invalid(format!(
                "{}: data field {} missing",
                t.name,
                names::COUNTER_SPEC_PKTS
            ))
        })?
    };
    write(sw, ctr, i, v);
    u.undo.push(Undo::Counter(ctr, i, old));
    Ok(())
}

pub(super) fn read(
    r: &Reader,
    ctr: Ctr,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let t = r.t;
    let (ks, f) = (&t.keys[0], &t.data[0]);
    let mut emit = |i: usize, v: u64| {
        out(r.entry(
            pb::TableKey {
                fields: vec![key_exact(ks, i as u64)],
            },
            pb::TableData {
                action_id: 0,
                fields: vec![df_int(f.id, v, 64)],
            },
        ))
    };
    match target {
        Target::Key(k) => {
            let i = Keys::new(t, k)?.exact(names::COUNTER_INDEX)? as usize;
            let v = read_one(r.sw, ctr, i).ok_or_else(|| out_of_range(t, i))?;
            emit(i, v);
        }
        _ => {
            for i in 0..t.size as usize {
                if let Some(v) = read_one(r.sw, ctr, i) {
                    emit(i, v);
                }
            }
        }
    }
    Ok(())
}
