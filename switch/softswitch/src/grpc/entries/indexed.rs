//! What register and counter tables share: one index key into an array of
//! cells, a keyless DELETE that zeroes every cell (as bf_switchd's reset
//! does), and reads of one cell or all of them.

use tonic::Status;

use super::{Op, Reader, Target, Update};
use crate::grpc::codec::{df_int, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch, PIPES};
use crate::schema::{unpack_fields, FieldSchema, TableSchema};

/// One kind of indexed cells (a register or a counter).
pub(super) trait Cells: Copy {
    /// The index key's name (`$REGISTER_INDEX`, `$COUNTER_INDEX`).
    const INDEX: &'static str;
    /// Whether a read returns the value once per pipe (registers).
    const PER_PIPE: bool;
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

/// A cell of a dev_port-indexed array (the Tofino's size, 512) for a dev_port
/// this switch cannot have: it reads 0, no packet ever changes it, and a
/// write to it is refused.
fn no_port(t: &TableSchema, i: usize) -> Status {
    Status::invalid_argument(format!(
        "{}: index {i} is a dev_port this switch cannot have (dev_ports below {})",
        t.name,
        crate::contract::CONTRACT.config.max_ports
    ))
}

/// A cell's value: within the table's size but beyond what this switch
/// keeps (dev_ports it cannot have), 0.
fn value<C: Cells>(sw: &Switch, t: &TableSchema, c: C, i: usize) -> Option<u64> {
    c.get(sw, i).or_else(|| (i < t.size as usize).then_some(0))
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
    let old = match c.get(sw, i) {
        Some(v) => v,
        None if i < t.size as usize => return Err(no_port(t, i)),
        None => return Err(out_of_range(t, i)),
    };
    Ok(Some((i, old)))
}

pub(super) fn read<C: Cells>(
    r: &Reader,
    c: C,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let t = r.t;
    let ks = &t.keys[0];
    // A register's value comes once per pipe (bf_switchd: one data field per
    // pipe, which the client gathers into a list); a counter's once. A
    // struct register's cell: each field in turn, each once per pipe.
    let copies = if C::PER_PIPE { PIPES as usize } else { 1 };
    let mut emit = |i: usize, v: u64| {
        let values = if t.data.len() > 1 {
            unpack_fields(&t.data, v)
        } else {
            vec![v]
        };
        let fields = t
            .data
            .iter()
            .zip(values)
            .flat_map(|(f, v)| std::iter::repeat_n(df_int(f.id, v, C::bits(f)), copies))
            .collect();
        out(r.entry(
            pb::TableKey {
                fields: vec![key_exact(ks, i as u64)],
            },
            pb::TableData {
                action_id: 0,
                fields,
            },
        ))
    };
    match target {
        Target::Key(k) => {
            let i = Keys::new(t, k)?.exact(C::INDEX)? as usize;
            let v = value(r.sw, t, c, i).ok_or_else(|| out_of_range(t, i))?;
            emit(i, v);
        }
        _ => {
            for i in 0..t.size as usize {
                if let Some(v) = value(r.sw, t, c, i) {
                    emit(i, v);
                }
            }
        }
    }
    Ok(())
}
