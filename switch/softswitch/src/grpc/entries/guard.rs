//! `pipe.Ingress.relay_guard`: (relay address, port) → `guard_drop(leg)`;
//! the drops are counted in `guard_drops[leg]` (entries/counter.rs).

use tonic::Status;

use super::{action_only, params, u32_of, write_exact, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::TableSchema;
use crate::sys::now_ms;
use crate::tables::guard::{GuardAction, GuardKey, GuardSnapshot};

fn key(keys: &Keys) -> Result<GuardKey, Status> {
    Ok(GuardKey {
        dst: u32_of(keys.exact(names::KEY_IPV4_DST)?),
        dport: keys.exact(names::KEY_UDP_DST)? as u16,
    })
}

fn action(u: &Update) -> Result<Option<GuardAction>, Status> {
    Ok(match u.data.action_name() {
        Some(names::GUARD_DROP) => {
            let leg = u.data.int(names::P_LEG)?;
            let legs = u.sw.pipeline.guard_drops.size();
            if leg >= legs as u64 {
                return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
            }
            Some(GuardAction::Drop { leg: leg as u32 })
        }
        Some(names::NO_ACTION) => Some(GuardAction::NoAction),
        Some(other) => return Err(invalid(format!("{}: action {other} not allowed", u.t.name))),
        None => None,
    })
}

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    let guard = &u.sw.pipeline.guard;
    if let Some(done) = u.fixed_default_or_clear(|_| guard.clear()) {
        return done;
    }
    let k = key(&u.keys()?)?;
    let action = action(u)?;
    let prev = write_exact(guard, u, k, action, None)?;
    u.undo.push(Undo::Guard(k, prev));
    Ok(())
}

pub(super) fn undo(sw: &Switch, k: GuardKey, prev: Option<GuardSnapshot>) {
    let guard = &sw.pipeline.guard;
    match prev {
        None => {
            let _ = guard.delete(&k);
        }
        Some(s) => {
            if guard.get(&k, 0).is_none() {
                let _ = guard.insert(k, s.action, 0, now_ms());
            }
            let _ = guard.modify(&k, Some(s.action), None, now_ms());
        }
    }
}

pub(super) fn read(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, guard) = (r.t, &r.sw.pipeline.guard);
    let now = now_ms();
    let mut emit = |s: GuardSnapshot| out(r.entry(key_pb(t, &s.key), data_pb(t, &s)));
    match target {
        Target::Key(k) => {
            let gk = key(&Keys::new(t, k)?)?;
            emit(guard.get(&gk, now).ok_or_else(|| r.not_found())?);
        }
        _ => guard.for_each(now, emit),
    }
    Ok(())
}

fn key_pb(t: &TableSchema, k: &GuardKey) -> pb::TableKey {
    let f = |n: &str, v: u64| key_exact(t.key_by_name(n).expect("schema"), v);
    pb::TableKey {
        fields: vec![
            f(names::KEY_IPV4_DST, u64::from(k.dst)),
            f(names::KEY_UDP_DST, u64::from(k.dport)),
        ],
    }
}

fn data_pb(t: &TableSchema, s: &GuardSnapshot) -> pb::TableData {
    match s.action {
        GuardAction::Drop { leg } => {
            params(t, names::GUARD_DROP, &[(names::P_LEG, u64::from(leg))])
        }
        GuardAction::NoAction => action_only(t, names::NO_ACTION),
    }
}
