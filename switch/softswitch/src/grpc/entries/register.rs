//! Register tables (`pipe.Egress.rtp_*`, `pipe.Ingress.learn_filter{,6}`, the
//! reroute registers, iRED's `pipe.{Egress,Ingress}.ired_*`, INT's
//! `pipe.{Egress,Ingress}.int_*`):
//! `$REGISTER_INDEX` → the value (`<Control>.<register>.f1`).

use tonic::Status;

use super::indexed::{self, Cells};
use super::{Op, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::invalid;
use crate::grpc::Switch;
use crate::schema::{FieldSchema, Reg};

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

pub(super) fn apply(u: &mut Update, reg: Reg) -> Result<(), Status> {
    let Some((i, old)) = indexed::cell(u, reg)? else {
        return Ok(());
    };
    let t = u.t;
    let v = if u.op == Op::Delete {
        0
    } else {
        let f = &t.data[0];
        u.data
            .int_opt(&f.name)?
            .ok_or_else(|| invalid(format!("{}: data field {} missing", t.name, f.name)))?
    };
    reg.set(u.sw, i, v);
    u.undo.push(Undo::Register(reg, i, old));
    Ok(())
}
