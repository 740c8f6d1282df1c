//! Indexed counter tables (`pipe.Ingress.guard_drops`, iRED's counts by
//! dev_port): `$COUNTER_INDEX` →
//! `$COUNTER_SPEC_PKTS`. Every cell always exists: an INSERT or a MODIFY sets
//! it, a DELETE (or keyless DELETE, the whole table) zeroes it, as
//! bf_switchd's counter tables do.

use tonic::Status;

use super::indexed::{self, Cells};
use super::{Op, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::invalid;
use crate::grpc::Switch;
use crate::schema::{Ctr, FieldSchema};

impl Cells for Ctr {
    const PER_PIPE: bool = false;
    const INDEX: &'static str = names::COUNTER_INDEX;

    fn get(self, sw: &Switch, i: usize) -> Option<u64> {
        match self {
            Ctr::GuardDrops => sw.pipeline.guard_drops.read(i),
            Ctr::Ired(c) => sw.pipeline.ired.read_count(c, i),
        }
    }

    fn set(self, sw: &Switch, i: usize, v: u64) -> bool {
        match self {
            Ctr::GuardDrops => sw.pipeline.guard_drops.write(i, v),
            Ctr::Ired(c) => sw.pipeline.ired.write_count(c, i, v),
        }
    }

    fn bits(_: &FieldSchema) -> u32 {
        64
    }
}

pub(super) fn apply(u: &mut Update, ctr: Ctr) -> Result<(), Status> {
    let Some((i, old)) = indexed::cell(u, ctr)? else {
        return Ok(());
    };
    let t = u.t;
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
    ctr.set(u.sw, i, v);
    u.undo.push(Undo::Counter(ctr, i, old));
    Ok(())
}
