//! Register tables (`pipe.Egress.rtp_*`, `pipe.Ingress.learn_filter`, the
//! reroute registers, iRED's `pipe.{Egress,Ingress}.ired_*`, INT's
//! `pipe.{Egress,Ingress}.int_*`):
//! `$REGISTER_INDEX` → the value (`<Control>.<register>.f1`).

use tonic::Status;

use super::{Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{df_int, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{Reg, TableSchema};

fn read_one(sw: &Switch, reg: Reg, i: usize) -> Option<u64> {
    let p = &sw.pipeline;
    match reg {
        Reg::LearnFilter => p.learn_filter.read(i),
        Reg::RerouteActive | Reg::RerouteRun | Reg::ReroutePortHot => p.reroute_regs.read(reg, i),
        Reg::Ired(r) => p.ired.read(r, i),
        Reg::Int(r) => p.int.read(r, i),
        _ => p.quality.read(reg, i),
    }
}

/// Writes one slot (also the undo of a write); false: index out of range.
pub(super) fn write(sw: &Switch, reg: Reg, i: usize, v: u64) -> bool {
    let p = &sw.pipeline;
    match reg {
        Reg::LearnFilter => p.learn_filter.write(i, v),
        Reg::RerouteActive | Reg::RerouteRun | Reg::ReroutePortHot => {
            p.reroute_regs.write(reg, i, v)
        }
        Reg::Ired(r) => p.ired.write(r, i, v),
        Reg::Int(r) => p.int.write(r, i, v),
        _ => p.quality.write(reg, i, v),
    }
}

fn out_of_range(t: &TableSchema, i: usize) -> Status {
    Status::out_of_range(format!("{}: index {i} >= size {}", t.name, t.size))
}

pub(super) fn apply(u: &mut Update, reg: Reg) -> Result<(), Status> {
    let (sw, t) = (u.sw, u.t);
    if !matches!(u.target, Target::Key(_)) {
        // DELETE/RESET of a register table without index: zero it all.
        if u.op != Op::Delete {
            return Err(invalid(format!("{}: $REGISTER_INDEX missing", t.name)));
        }
        for i in 0..t.size as usize {
            write(sw, reg, i, 0);
        }
        return Ok(());
    }
    let i = u.keys()?.exact(names::REGISTER_INDEX)? as usize;
    let old = read_one(sw, reg, i).ok_or_else(|| out_of_range(t, i))?;
    let v = if u.op == Op::Delete {
        0
    } else {
        let f = &t.data[0];
        u.data
            .int_opt(&f.name)?
            .ok_or_else(|| invalid(format!("{}: data field {} missing", t.name, f.name)))?
    };
    write(sw, reg, i, v);
    u.undo.push(Undo::Register(reg, i, old));
    Ok(())
}

pub(super) fn read(
    r: &Reader,
    reg: Reg,
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
                fields: vec![df_int(f.id, v, f.bits)],
            },
        ))
    };
    match target {
        Target::Key(k) => {
            let i = Keys::new(t, k)?.exact(names::REGISTER_INDEX)? as usize;
            let v = read_one(r.sw, reg, i).ok_or_else(|| out_of_range(t, i))?;
            emit(i, v);
        }
        _ => {
            for i in 0..t.size as usize {
                if let Some(v) = read_one(r.sw, reg, i) {
                    emit(i, v);
                }
            }
        }
    }
    Ok(())
}
