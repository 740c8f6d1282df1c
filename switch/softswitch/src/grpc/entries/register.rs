//! Register tables (`pipe.Egress.rtp_*`, `pipe.Ingress.learn_filter{,6}`, the
//! reroute registers, iRED's `pipe.{Egress,Ingress}.ired_*`, INT's
//! `pipe.{Egress,Ingress}.int_*`):
//! `$REGISTER_INDEX` → the value (`<Control>.<register>.f1`), or a struct
//! register's fields (`pipe.Egress.rtp_loss`: `Egress.rtp_loss.lost`,
//! `.reordered`), every one mandatory in a write as bf-p4c declares them; the
//! cell's fields travel packed in one value (`schema::pack_fields`).

use tonic::Status;

use super::indexed::{self, Cells};
use super::{Op, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::invalid;
use crate::grpc::Switch;
use crate::schema::{pack_fields, FieldSchema, Half, Reg};

impl Cells for Reg {
    const PER_PIPE: bool = true;
    const INDEX: &'static str = names::REGISTER_INDEX;

    fn get(self, sw: &Switch, i: usize) -> Option<u64> {
        let p = &sw.pipeline;
        match self {
            Reg::LearnFilter => p.learn_filter.read(i),
            Reg::LearnFilter6 => p.learn_filter6.read(i),
            Reg::RerouteActive | Reg::RerouteFrom | Reg::RerouteRun | Reg::ReroutePortHot => {
                p.reroute_regs.read(self, i)
            }
            Reg::Ired(r) => p.ired.read(r, i),
            Reg::Int(r) => p.int.read(r, i),
            _ => p.quality.read(self, i),
        }
    }

    fn set(self, sw: &Switch, i: usize, v: u64) -> bool {
        let p = &sw.pipeline;
        match self {
            Reg::LearnFilter => p.learn_filter.write(i, v),
            Reg::LearnFilter6 => p.learn_filter6.write(i, v),
            Reg::RerouteActive | Reg::RerouteFrom | Reg::RerouteRun | Reg::ReroutePortHot => {
                p.reroute_regs.write(self, i, v)
            }
            Reg::Ired(r) => p.ired.write(r, i, v),
            Reg::Int(r) => p.int.write(r, i, v),
            _ => p.quality.write(self, i, v),
        }
    }

    fn bits(f: &FieldSchema) -> u32 {
        f.bits
    }
}

/// A half of a split quality register (`TableKind::QualityHalf`): its index
/// is the cell's index in that half (rtp_quality.rs `QualityRegs::cell`).
#[derive(Debug, Clone, Copy)]
pub(super) struct QualityHalf(pub Reg, pub Half);

impl Cells for QualityHalf {
    const PER_PIPE: bool = true;
    const INDEX: &'static str = names::REGISTER_INDEX;

    fn get(self, sw: &Switch, i: usize) -> Option<u64> {
        sw.pipeline.quality.read_half(self.0, self.1, i)
    }

    fn set(self, sw: &Switch, i: usize, v: u64) -> bool {
        sw.pipeline.quality.write_half(self.0, self.1, i, v)
    }

    fn bits(f: &FieldSchema) -> u32 {
        f.bits
    }
}

pub(super) fn apply(u: &mut Update, reg: Reg) -> Result<(), Status> {
    apply_cells(u, reg, |i, old| Undo::Register(reg, i, old))
}

/// A write of one half of a split quality register.
pub(super) fn apply_half(u: &mut Update, half: QualityHalf) -> Result<(), Status> {
    apply_cells(u, half, |i, old| Undo::QualityHalf(half.0, half.1, i, old))
}

fn apply_cells<C: Cells>(
    u: &mut Update,
    reg: C,
    undo: impl FnOnce(usize, u64) -> Undo,
) -> Result<(), Status> {
    let Some((i, old)) = indexed::cell(u, reg)? else {
        return Ok(());
    };
    let t = u.t;
    let v =
        if u.op == Op::Delete {
            0
        } else {
            let mut values = Vec::with_capacity(t.data.len());
            for f in &t.data {
                values.push(u.data.int_opt(&f.name)?.ok_or_else(|| {
                    invalid(format!("{}: data field {} missing", t.name, f.name))
                })?);
            }
            pack_fields(&t.data, &values)
        };
    reg.set(u.sw, i, v);
    u.undo.push(undo(i, old));
    Ok(())
}
