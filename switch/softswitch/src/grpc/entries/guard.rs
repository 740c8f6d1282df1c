//! `pipe.Ingress.relay_guard`: (relay address, port) → `guard_drop(leg)`;
//! `pipe.Ingress.relay_guard6` (relay6.rs: its key) the same for IPv6. The
//! drops are counted in `guard_drops[leg]` (entries/counter.rs).

use tonic::Status;

use super::{
    action_only, params, read_exact, u32_of, undo_exact, write_exact, Reader, Target, Undo, Update,
};
use crate::contract::names;
use crate::grpc::codec::{invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::pipeline::Pipeline;
use crate::schema::TableSchema;
use crate::tables::exact::{ExactKey, ExactTable, Snapshot, Untimed};
use crate::tables::guard::{GuardAction, GuardKey};

/// What relay_guard and relay_guard6 differ in: the key, the table and
/// the drop action's name.
pub(super) trait GuardFamily: ExactKey {
    /// `guard_drop` or `guard6_drop`.
    const DROP: &'static str;
    fn table(p: &Pipeline) -> &ExactTable<Self, GuardAction, Untimed>;
    fn key(keys: &Keys) -> Result<Self, Status>;
    fn key_pb(t: &TableSchema, k: &Self) -> pb::TableKey;
    fn undo(k: Self, prev: Option<Snapshot<Self, GuardAction>>) -> Undo;
}

impl GuardFamily for GuardKey {
    const DROP: &'static str = names::GUARD_DROP;
    fn table(p: &Pipeline) -> &ExactTable<GuardKey, GuardAction, Untimed> {
        &p.guard
    }
    fn key(keys: &Keys) -> Result<GuardKey, Status> {
        Ok(GuardKey {
            dst: u32_of(keys.exact(names::KEY_IPV4_DST)?),
            dport: keys.exact(names::KEY_UDP_DST)? as u16,
        })
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
    fn undo(k: GuardKey, prev: Option<Snapshot<GuardKey, GuardAction>>) -> Undo {
        Undo::Guard(k, prev)
    }
}

fn action<K: GuardFamily>(u: &Update) -> Result<Option<GuardAction>, Status> {
    Ok(match u.data.action_name() {
        Some(a) if a == K::DROP => {
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

pub(super) fn apply<K: GuardFamily>(u: &mut Update) -> Result<(), Status> {
    let guard = K::table(&u.sw.pipeline);
    if let Some(done) = u.fixed_default_or_clear(|_| guard.clear()) {
        return done;
    }
    let k = K::key(&u.keys()?)?;
    let action = action::<K>(u)?;
    let prev = write_exact(guard, u, k, action, None)?;
    u.undo.push(K::undo(k, prev));
    Ok(())
}

pub(super) fn undo<K: GuardFamily>(sw: &Switch, k: K, prev: Option<Snapshot<K, GuardAction>>) {
    undo_exact(K::table(&sw.pipeline), k, prev)
}

pub(super) fn read<K: GuardFamily>(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let t = r.t;
    read_exact(r, target, K::table(&r.sw.pipeline), K::key, |s| {
        out(r.entry(K::key_pb(t, &s.key), data_pb::<K>(t, &s)))
    })
}

fn data_pb<K: GuardFamily>(t: &TableSchema, s: &Snapshot<K, GuardAction>) -> pb::TableData {
    match s.action {
        GuardAction::Drop { leg } => params(t, K::DROP, &[(names::P_LEG, u64::from(leg))]),
        GuardAction::NoAction => action_only(t, names::NO_ACTION),
    }
}
