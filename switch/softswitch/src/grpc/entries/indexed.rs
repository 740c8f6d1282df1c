//! What register and counter tables share: one index key into an array of
//! cells, a keyless DELETE that zeroes every cell (as bf_switchd's reset
//! does), and reads of one cell or all of them.

use tonic::Status;

use super::{Op, Reader, Target, Update};
use crate::grpc::codec::{df_int, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{FieldSchema, TableSchema};

/// One kind of indexed cells (a register or a counter).
pub(super) trait Cells: Copy {
    /// The index key's name (`$REGISTER_INDEX`, `$COUNTER_INDEX`).
    const INDEX: &'static str;
    /// A cell's value; None: index out of range.
    fn get(self, sw: &Switch, i: usize) -> Option<u64>;
    /// Sets one cell (also the undo of a write); false: index out of range.
    fn set(self, sw: &Switch, i: usize, v: u64) -> bool;
    /// The width a cell is read out with.
    fn bits(f: &FieldSchema) -> u32;
}

fn out_of_range(t: &TableSchema, i: usize) -> Status {
    Status::out_of_range(format!("{}: index {i} >= size {}", t.name, t.size))
}

/// The cell a write targets and its value before the write; None when the
/// write was a keyless DELETE, which has zeroed every cell already.
pub(super) fn cell<C: Cells>(u: &mut Update, c: C) -> Result<Option<(usize, u64)>, Status> {
    let (sw, t) = (u.sw, u.t);
    if !matches!(u.target, Target::Key(_)) {
        if u.op != Op::Delete {
            return Err(invalid(format!("{}: {} missing", t.name, C::INDEX)));
        }
        for i in 0..t.size as usize {
            c.set(sw, i, 0);
        }
        return Ok(None);
    }
    let i = u.keys()?.exact(C::INDEX)? as usize;
    let old = c.get(sw, i).ok_or_else(|| out_of_range(t, i))?;
    Ok(Some((i, old)))
}

pub(super) fn read<C: Cells>(
    r: &Reader,
    c: C,
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
                fields: vec![df_int(f.id, v, C::bits(f))],
            },
        ))
    };
    match target {
        Target::Key(k) => {
            let i = Keys::new(t, k)?.exact(C::INDEX)? as usize;
            let v = c.get(r.sw, i).ok_or_else(|| out_of_range(t, i))?;
            emit(i, v);
        }
        _ => {
            for i in 0..t.size as usize {
                if let Some(v) = c.get(r.sw, i) {
                    emit(i, v);
                }
            }
        }
    }
    Ok(())
}
