//! `pipe.Ingress.relay`: 4-tuple and bound port → `relay_leg(leg, rtcp)`, with
//! `$ENTRY_TTL` (idle timeout). No counter: the leg counts (leg_rewrite).

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

use tonic::Status;

use super::{action_only, params, u32_of, undo_exact, write_exact, Reader, Target, Undo, Update};
use crate::contract::{names, CONTRACT};
use crate::grpc::codec::{df_int, df_str, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{TableSchema, ID_ENTRY_HIT_STATE, ID_ENTRY_TTL};
use crate::sys::now_ms;
use crate::tables::exact::{ExactKey, ExactTable, Snapshot};
use crate::tables::relay::{EntrySnapshot, RelayAction, RelayKey};

pub(super) fn key(keys: &Keys) -> Result<RelayKey, Status> {
    Ok(RelayKey {
        src: u32_of(keys.exact(names::KEY_IPV4_SRC)?),
        dst: u32_of(keys.exact(names::KEY_IPV4_DST)?),
        sport: keys.exact(names::KEY_UDP_SRC)? as u16,
        dport: keys.exact(names::KEY_UDP_DST)? as u16,
        port: keys.exact(names::KEY_BOUND_PORT)? as u16,
    })
}

/// `relay_leg(leg, rtcp)` (relay6's `relay6_leg`: `leg_action`), its leg
/// within the leg space.
pub(super) fn action(u: &Update, leg_action: &str) -> Result<Option<RelayAction>, Status> {
    let set = u.data.action_to_set(u.op == super::Op::Modify);
    Ok(match set.map(|a| a.name.as_str()) {
        Some(a) if a == leg_action => {
            let leg = u.data.int(names::P_LEG)?;
            let legs = u.sw.pipeline.legs.capacity();
            if leg >= legs as u64 {
                return Err(invalid(format!("leg {leg} out of range (legs = {legs})")));
            }
            Some(RelayAction::Leg {
                leg: leg as u32,
                rtcp: u.data.int(names::P_RTCP)? == 1,
            })
        }
        Some(names::NO_ACTION) => Some(RelayAction::NoAction),
        Some(other) => return Err(invalid(format!("{}: action {other} not allowed", u.t.name))),
        None => None,
    })
}

/// The idle table's POLL mode (bf_switchd's hit-state polling): no ageing
/// and no notifications; `UpdateHitState` samples which entries were hit
/// since the previous sample into their `$ENTRY_HIT_STATE` (ENTRY_ACTIVE /
/// ENTRY_IDLE), which reads return, and a write can set.
#[derive(Debug, Default)]
pub struct PollHits {
    /// When the previous sample (or the switch to POLL mode) was taken.
    since_ms: u32,
    /// An entry's last hit (install time) as of the previous sample.
    seen: HashMap<RelayKey, u32>,
    /// The sampled state: true = ENTRY_ACTIVE.
    active: HashMap<RelayKey, bool>,
}

impl PollHits {
    /// Starts polling: nothing hit yet.
    pub fn start(&mut self, now: u32) {
        *self = PollHits {
            since_ms: now,
            ..PollHits::default()
        };
    }

    /// `UpdateHitState`: each entry is ENTRY_ACTIVE if hit since the last sample.
    pub fn sample(&mut self, sw: &Switch, now: u32) {
        let mut seen = HashMap::new();
        let mut active = HashMap::new();
        sw.pipeline.for_each_relay_with_fast_idle(now, |s| {
            let last_hit = now.wrapping_sub(s.idle_ms);
            let before = self.seen.get(&s.key).copied().unwrap_or(self.since_ms);
            active.insert(s.key, last_hit.wrapping_sub(before) as i32 > 0);
            seen.insert(s.key, last_hit);
        });
        *self = PollHits {
            since_ms: now,
            seen,
            active,
        };
    }

    /// A write: it re-arms the entry's last hit, which is no hit; a new
    /// entry starts ENTRY_IDLE.
    fn written(&mut self, k: RelayKey, new: bool, now: u32) {
        self.seen.insert(k, now);
        if new {
            self.active.remove(&k);
        }
    }

    fn state(&self, k: &RelayKey) -> &'static str {
        if self.active.get(k).copied().unwrap_or(false) {
            "ENTRY_ACTIVE"
        } else {
            "ENTRY_IDLE"
        }
    }
}

/// `$ENTRY_TTL` in ms: 0 (no ageing) or at least the contract's minimum.
pub(super) fn ttl(u: &Update) -> Result<Option<u32>, Status> {
    let ttl = u.data.int_opt(names::ENTRY_TTL)?.map(u32_of);
    if let Some(ttl) = ttl {
        let min = CONTRACT.config.idle_timeout_min_ms;
        if ttl != 0 && ttl < min {
            return Err(invalid(format!(
                "$ENTRY_TTL {ttl} ms below the minimum {min} ms"
            )));
        }
    }
    Ok(ttl)
}

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    let relay = &u.sw.pipeline.relay;
    if let Some(done) = u.fixed_default_or_clear(|undo| {
        relay.clear();
        undo.push(Undo::Cleared);
    }) {
        return done;
    }
    let k = key(&u.keys()?)?;
    let poll = u.sw.idle.poll.load(Relaxed);
    let hit_state = match u.data.str_opt(names::ENTRY_HIT_STATE)? {
        None => None,
        Some(_) if !poll => {
            return Err(invalid(format!(
                "{}: {} is for the idle timeout's POLL mode; this table notifies ($ENTRY_TTL)",
                u.t.name,
                names::ENTRY_HIT_STATE
            )))
        }
        Some("ENTRY_ACTIVE") => Some(true),
        Some("ENTRY_IDLE") => Some(false),
        Some(other) => {
            return Err(invalid(format!(
                "{}: {} {other:?}: ENTRY_ACTIVE or ENTRY_IDLE",
                u.t.name,
                names::ENTRY_HIT_STATE
            )))
        }
    };
    let action = action(u, names::RELAY_LEG)?;
    let ttl = ttl(u)?;
    let prev = write_exact(relay, u, k, action, ttl)?;
    let new = prev.is_none();
    u.undo.push(Undo::Relay(k, prev));
    if poll && u.op != super::Op::Delete {
        let mut hits = u.sw.poll_hits.lock();
        hits.written(k, new, now_ms());
        if let Some(a) = hit_state {
            hits.active.insert(k, a);
        }
    }
    Ok(())
}

pub(super) fn undo<K: ExactKey>(
    table: &ExactTable<K, RelayAction>,
    k: K,
    prev: Option<Snapshot<K, RelayAction>>,
) {
    undo_exact(table, k, prev)
}

pub(super) fn read(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (t, pipeline) = (r.t, &r.sw.pipeline);
    let now = now_ms();
    // $ENTRY_HIT_STATE: in POLL mode the last sample's (every read); in
    // NOTIFY mode only when the read names it, whether a packet hit the
    // entry within the idle sweep's last query interval.
    let poll = r.sw.idle.poll.load(Relaxed);
    let hits = poll.then(|| r.sw.poll_hits.lock());
    let hit_window = r
        .names(ID_ENTRY_HIT_STATE)
        .then(|| r.sw.idle.interval_ms.load(Relaxed));
    let mut emit = |s: EntrySnapshot| {
        let mut d = data_pb(t, names::RELAY_LEG, &s);
        if let Some(h) = &hits {
            d.fields
                .retain(|f| f.field_id != ID_ENTRY_TTL || r.names(ID_ENTRY_TTL));
            d.fields.push(df_str(ID_ENTRY_HIT_STATE, h.state(&s.key)));
        } else if let Some(window) = hit_window {
            let state = if s.idle_ms < window {
                "ENTRY_ACTIVE"
            } else {
                "ENTRY_IDLE"
            };
            d.fields.push(df_str(ID_ENTRY_HIT_STATE, state));
        }
        out(r.entry(key_pb(t, &s.key), d))
    };
    match target {
        Target::Key(k) => {
            let rk = key(&Keys::new(t, k)?)?;
            let s = pipeline.relay.get(&rk, now).ok_or_else(|| r.not_found())?;
            emit(pipeline.with_fast_idle(s, now));
        }
        _ => pipeline.for_each_relay_with_fast_idle(now, emit),
    }
    Ok(())
}

/// A relay key as BfRt key fields (reads, idle-timeout notifications).
pub(in crate::grpc) fn key_pb(t: &TableSchema, k: &RelayKey) -> pb::TableKey {
    let f = |n: &str, v: u64| key_exact(t.key_by_name(n).expect("schema"), v);
    pb::TableKey {
        fields: vec![
            f(names::KEY_IPV4_SRC, u64::from(k.src)),
            f(names::KEY_IPV4_DST, u64::from(k.dst)),
            f(names::KEY_UDP_SRC, u64::from(k.sport)),
            f(names::KEY_UDP_DST, u64::from(k.dport)),
            f(names::KEY_BOUND_PORT, u64::from(k.port)),
        ],
    }
}

/// An entry's action (`leg_action`: relay_leg or relay6_leg) and `$ENTRY_TTL`.
pub(super) fn data_pb<K>(
    t: &TableSchema,
    leg_action: &str,
    s: &Snapshot<K, RelayAction>,
) -> pb::TableData {
    let mut d = match s.action {
        RelayAction::Leg { leg, rtcp } => params(
            t,
            leg_action,
            &[
                (names::P_LEG, u64::from(leg)),
                (names::P_RTCP, u64::from(rtcp)),
            ],
        ),
        RelayAction::NoAction => action_only(t, names::NO_ACTION),
    };
    // As on Tofino, $ENTRY_TTL reads back the time left before the entry ages.
    let left = if s.ttl_ms == 0 {
        0
    } else {
        s.ttl_ms.saturating_sub(s.idle_ms)
    };
    d.fields.push(df_int(ID_ENTRY_TTL, u64::from(left), 32));
    d
}
