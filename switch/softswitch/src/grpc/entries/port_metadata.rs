//! `pipe.IngressParser.$PORT_METADATA`: the ingress port's phase-0 data
//! (port binding, pipeline/port_binding.rs). Keyed by a port of this switch;
//! its one data field `unbound` is the entry (no actions, no default entry).
//! An INSERT needs the field; a MODIFY without it leaves the entry as it is.

use tonic::Status;

use super::{Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{df_int, invalid, key_exact};
use crate::grpc::pb;
use crate::pipeline::port_binding::PORTS;
use crate::tables::TableError;

fn port_key(u: &Update) -> Result<u16, Status> {
    let port = u.keys()?.exact(names::KEY_PORT_METADATA_PORT)?;
    if port >= u64::from(PORTS) || !u.sw.pipeline.has_port(port as u32) {
        return Err(invalid(format!(
            "{}: port {port} is not a port of this switch",
            u.t.name
        )));
    }
    Ok(port as u16)
}

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    let t = u.t;
    let pb_ = &u.sw.pipeline.port_binding;
    match u.target {
        Target::Default => return Err(invalid(format!("{} has no default entry", t.name))),
        Target::All if u.op != Op::Delete => {
            return Err(invalid(format!("{}: key missing", t.name)))
        }
        Target::All => {
            for (port, unbound) in pb_.entries() {
                pb_.set(port, None);
                u.undo.push(Undo::PortBinding(port, Some(unbound)));
            }
            return Ok(());
        }
        Target::Key(_) => {}
    }
    let port = port_key(u)?;
    let unbound = u.data.int_opt(names::D_UNBOUND)?.map(|v| v != 0);
    let exists = pb_.get(port).is_some();
    let new = match u.op {
        Op::Delete if !exists => return Err(super::table_status(TableError::NotFound)),
        Op::Delete => None,
        Op::Insert if exists => return Err(super::table_status(TableError::AlreadyExists)),
        Op::Modify if !exists => return Err(super::table_status(TableError::NotFound)),
        Op::Modify => Some(unbound.unwrap_or_else(|| pb_.get(port) == Some(true))),
        Op::Insert | Op::Upsert => Some(unbound.ok_or_else(|| {
            invalid(format!(
                "{}: data field {} missing",
                t.name,
                names::D_UNBOUND
            ))
        })?),
    };
    let old = pb_.set(port, new);
    u.undo.push(Undo::PortBinding(port, old));
    Ok(())
}

pub(super) fn undo(sw: &crate::grpc::Switch, port: u16, old: Option<bool>) {
    sw.pipeline.port_binding.set(port, old);
}

pub(super) fn read(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let t = r.t;
    let ks = t
        .key_by_name(names::KEY_PORT_METADATA_PORT)
        .expect("schema");
    let field = t.data_by_name(names::D_UNBOUND).expect("schema");
    let row = |port: u16, unbound: bool| {
        r.entry(
            pb::TableKey {
                fields: vec![key_exact(ks, u64::from(port))],
            },
            pb::TableData {
                action_id: 0,
                fields: vec![df_int(field.id, u64::from(unbound), field.bits)],
            },
        )
    };
    let pb_ = &r.sw.pipeline.port_binding;
    match target {
        Target::Key(k) => {
            let port = crate::grpc::codec::Keys::new(t, k)?.exact(names::KEY_PORT_METADATA_PORT)?;
            let unbound = u16::try_from(port)
                .ok()
                .and_then(|p| pb_.get(p))
                .ok_or_else(|| r.not_found())?;
            out(row(port as u16, unbound));
        }
        _ => pb_.entries().into_iter().for_each(|(p, u)| out(row(p, u))),
    }
    Ok(())
}
