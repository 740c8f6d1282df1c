//! What the IPv6 relay tables have of their own; their rules are their IPv4
//! twins' (relay.rs, guard.rs, legs.rs):
//! `pipe.Ingress.relay6` (remote address, relay_id, ports, bound port →
//! `relay6_leg(leg, rtcp)`, `$ENTRY_TTL`), `pipe.Ingress.relay_guard6`
//! (relay_id, relay port → `guard6_drop(leg)`) and `pipe.Ingress.leg_rewrite6`
//! (leg → `rewrite6(...)`, direct counter); a leg has its rewrite in
//! leg_rewrite or leg_rewrite6, never both.

use tonic::Status;

use super::guard::GuardFamily;
use super::legs::LegFamily;
use super::relay::{action, data_pb, ttl};
use super::{write_exact, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{invalid, key_exact, key_exact128, Data, Keys};
use crate::grpc::pb;
use crate::pipeline::Pipeline;
use crate::schema::TableSchema;
use crate::sys::now_ms;
use crate::tables::exact::{ExactTable, Snapshot, Untimed};
use crate::tables::guard::{Guard6Key, GuardAction};
use crate::tables::legs6::{Leg6Table, Rewrite6};
use crate::tables::relay::{Entry6Snapshot, Relay6Key};

// ---------------------------------------------------------------- relay6

pub(in crate::grpc) fn relay6_key(keys: &Keys) -> Result<Relay6Key, Status> {
    Ok(Relay6Key {
        src: keys.exact128(names::KEY_IPV6_SRC)?,
        relay_id: keys.exact(names::KEY_RELAY_ID)? as u8,
        sport: keys.exact(names::KEY_UDP_SRC)? as u16,
        dport: keys.exact(names::KEY_UDP_DST)? as u16,
        port: keys.exact(names::KEY_BOUND_PORT)? as u16,
    })
}

/// relay6 notifies idle entries ($ENTRY_TTL); it has no POLL mode.
pub(super) fn apply_relay6(u: &mut Update) -> Result<(), Status> {
    let relay6 = &u.sw.pipeline.relay6;
    if let Some(done) = u.fixed_default_or_clear(|undo| {
        relay6.clear();
        undo.push(Undo::Cleared);
    }) {
        return done;
    }
    let k = relay6_key(&u.keys()?)?;
    if u.data.has(names::ENTRY_HIT_STATE) {
        return Err(invalid(format!(
            "{}: {} is for the idle timeout's POLL mode; this table notifies ($ENTRY_TTL)",
            u.t.name,
            names::ENTRY_HIT_STATE
        )));
    }
    let action = action(u, names::RELAY6_LEG)?;
    let ttl = ttl(u)?;
    let prev = write_exact(relay6, u, k, action, ttl)?;
    u.undo.push(Undo::Relay6(k, prev));
    Ok(())
}

pub(super) fn read_relay6(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, pipeline) = (r.t, &r.sw.pipeline);
    let now = now_ms();
    let mut emit = |s: Entry6Snapshot| {
        out(r.entry(relay6_key_pb(t, &s.key), data_pb(t, names::RELAY6_LEG, &s)))
    };
    match target {
        Target::Key(k) => {
            let rk = relay6_key(&Keys::new(t, k)?)?;
            let s = pipeline.relay6.get(&rk, now).ok_or_else(|| r.not_found())?;
            emit(pipeline.with_fast_idle6(s, now));
        }
        // idle as the fast path's last hits have it too
        _ => pipeline.for_each_relay6_with_fast_idle(now, emit),
    }
    Ok(())
}

/// A relay6 key as BfRt key fields (reads, idle-timeout notifications).
pub(in crate::grpc) fn relay6_key_pb(t: &TableSchema, k: &Relay6Key) -> pb::TableKey {
    let ks = |n: &str| t.key_by_name(n).expect("schema");
    pb::TableKey {
        fields: vec![
            key_exact128(ks(names::KEY_IPV6_SRC), k.src),
            key_exact(ks(names::KEY_RELAY_ID), u64::from(k.relay_id)),
            key_exact(ks(names::KEY_UDP_SRC), u64::from(k.sport)),
            key_exact(ks(names::KEY_UDP_DST), u64::from(k.dport)),
            key_exact(ks(names::KEY_BOUND_PORT), u64::from(k.port)),
        ],
    }
}

// ---------------------------------------------------------------- relay_guard6

impl GuardFamily for Guard6Key {
    const DROP: &'static str = names::GUARD6_DROP;
    fn table(p: &Pipeline) -> &ExactTable<Guard6Key, GuardAction, Untimed> {
        &p.guard6
    }
    fn key(keys: &Keys) -> Result<Guard6Key, Status> {
        Ok(Guard6Key {
            relay_id: keys.exact(names::KEY_RELAY_ID)? as u8,
            dport: keys.exact(names::KEY_UDP_DST)? as u16,
        })
    }
    fn key_pb(t: &TableSchema, k: &Guard6Key) -> pb::TableKey {
        let f = |n: &str, v: u64| key_exact(t.key_by_name(n).expect("schema"), v);
        pb::TableKey {
            fields: vec![
                f(names::KEY_RELAY_ID, u64::from(k.relay_id)),
                f(names::KEY_UDP_DST, u64::from(k.dport)),
            ],
        }
    }
    fn undo(k: Guard6Key, prev: Option<Snapshot<Guard6Key, GuardAction>>) -> Undo {
        Undo::Guard6(k, prev)
    }
}

// ---------------------------------------------------------------- leg_rewrite6
// (key ig_md.leg6: relay6's leg, in the shared leg space)

impl LegFamily for Leg6Table {
    const KEY: &'static str = names::KEY_LEG6;
    const ACTION: &'static str = names::REWRITE6;
    const OTHER: &'static str = "an IPv4 rewrite (pipe.Ingress.leg_rewrite)";
    fn table(p: &Pipeline) -> &Leg6Table {
        &p.legs6
    }
    fn in_other(p: &Pipeline, leg: u32) -> bool {
        p.legs.get(leg).is_some()
    }
    // the fast path's part included (crate::pipeline::mirror)
    fn counts(p: &Pipeline, leg: u32) -> (u64, u64) {
        p.leg6_counts(leg)
    }
    fn set_counts(p: &Pipeline, leg: u32, pkts: u64, bytes: u64) {
        p.set_leg6_counts(leg, pkts, bytes)
    }
    fn addr(d: &Data, name: &str) -> Result<u128, Status> {
        d.int128(name)
    }
    fn undo(leg: u32, prev: Option<Rewrite6>, counts: (u64, u64)) -> Undo {
        Undo::Leg6(leg, prev, counts)
    }
}
