//! Table writes and reads: BfRt TableEntry ↔ the pipeline's tables, registers
//! and the fixed port/queue tables. One module per table kind, each with its
//! decode (BfRt key/data → table types), apply, read and encode:
//! `relay`, `guard` (relay_guard), `legs` (leg_rewrite and its direct
//! counter), `counter` (indexed counters: guard_drops) and `register`, both on
//! `indexed` (what index-keyed tables share), `small` (one
//! mechanism for ipv4_lpm, nexthop, relay_addr, ired_port, reroute_watch,
//! reroute_class), `port_metadata` (the
//! parser's port binding), `fixed` ($PORT, $PORT_STAT, shaping,
//! queue counters). Each applied write records how to undo it, so a
//! ROLLBACK_ON_ERROR batch can be taken back.

mod counter;
mod fixed;
mod guard;
mod indexed;
mod legs;
mod port_metadata;
mod register;
pub(super) mod relay;
pub(super) mod relay6;
mod small;

use std::collections::HashSet;
use std::sync::Arc;

use tonic::Status;

use super::codec::{action_data as params, invalid, Data, Keys};
use super::pb::{self, update::Type as UpdateType};
use super::Switch;
use crate::contract::names;
use crate::pipeline::Touched;
use crate::schema::{ActionScope, Ctr, Half, Reg, TableKind, TableSchema};
use crate::sys::now_ms;
use crate::tables::exact::{ActionWord, ExactKey, ExactTable, IdleTimer, Snapshot};
use crate::tables::guard::{Guard6Key, Guard6Snapshot, GuardKey, GuardSnapshot};
use crate::tables::legs::{LegTable, Rewrite};
use crate::tables::legs6::{Leg6Table, Rewrite6};
use crate::tables::relay::{Entry6Snapshot, EntrySnapshot, Relay6Key, RelayKey};
use crate::tables::small::SmallTables;
use crate::tables::TableError;
use indexed::Cells;

pub fn table_status(e: TableError) -> Status {
    match e {
        TableError::AlreadyExists => Status::already_exists(e.to_string()),
        TableError::NotFound => Status::not_found(e.to_string()),
        TableError::Full(_) => Status::resource_exhausted(e.to_string()),
        TableError::Invalid(m) => Status::invalid_argument(m),
    }
}

/// How to take back one applied write.
pub enum Undo {
    Relay(RelayKey, Option<EntrySnapshot>),
    Guard(GuardKey, Option<GuardSnapshot>),
    /// A leg's rewrite and direct counter (packets, bytes) before the write.
    Leg(u32, Option<Rewrite>, (u64, u64)),
    Relay6(Relay6Key, Option<Entry6Snapshot>),
    Guard6(Guard6Key, Option<Guard6Snapshot>),
    Leg6(u32, Option<Rewrite6>, (u64, u64)),
    /// An indexed counter's cell before the write.
    Counter(Ctr, usize, u64),
    Small(Arc<SmallTables>),
    Register(Reg, usize, u64),
    /// A cell of one half of a split quality register before the write.
    QualityHalf(Reg, Half, usize, u64),
    PortEnable(usize, bool),
    Rate(usize, u64),
    /// A port's `$PORT_METADATA` entry before the write.
    PortBinding(u16, Option<bool>),
    /// A table was cleared (not undoable; marks a full fast-path mirror).
    Cleared,
}

/// What a batch of applied (or rolled back) writes touched.
pub fn touched(undo: &[Undo]) -> Touched {
    let mut t = Touched::default();
    for u in undo {
        match u {
            Undo::Relay(k, _) => t.relay.push(*k),
            Undo::Leg(leg, ..) => t.legs.push(*leg),
            Undo::Relay6(k, _) => t.relay6.push(*k),
            Undo::Leg6(leg, ..) => t.legs6.push(*leg),
            Undo::Small(_) => {
                t.routes = true;
                // ired_port decides which ports the fast path may send on.
                t.ports = true;
            }
            // the fast path keys relay on the bound port too
            Undo::PortEnable(..) | Undo::Rate(..) | Undo::PortBinding(..) => t.ports = true,
            Undo::Cleared => t.cleared = true,
            // guards act on relay misses, which the fast path leaves to user space
            Undo::Guard(..)
            | Undo::Register(..)
            | Undo::QualityHalf(..)
            | Undo::Counter(..)
            | Undo::Guard6(..) => {}
        }
    }
    t
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Insert,
    Modify,
    Delete,
    Upsert,
}

fn op_of(t: UpdateType) -> Result<Op, Status> {
    Ok(match t {
        UpdateType::Insert => Op::Insert,
        UpdateType::Modify | UpdateType::ModifyInc => Op::Modify,
        UpdateType::Delete | UpdateType::Reset => Op::Delete,
        UpdateType::InsertOrModify => Op::Upsert,
        UpdateType::Unspecified => return Err(invalid("update type UNSPECIFIED")),
    })
}

/// Which entries an update or a read addresses.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The table's default entry (`is_default_entry`).
    Default,
    /// Every entry: no key (a DELETE clears the table, as bfrt entry_del without keys).
    All,
    Key(&'a pb::TableKey),
}

/// One update of a Write being applied.
struct Update<'a> {
    sw: &'a Switch,
    t: &'a TableSchema,
    op: Op,
    target: Target<'a>,
    data: Data<'a>,
    undo: &'a mut Vec<Undo>,
}

impl Update<'_> {
    /// The key of a keyed update.
    fn keys(&self) -> Result<Keys<'_>, Status> {
        match self.target {
            Target::Key(k) => Keys::new(self.t, k),
            _ => Err(invalid(format!("{}: key missing", self.t.name))),
        }
    }

    /// The relay, guard and leg tables share two rules: their default action
    /// is fixed to NoAction, and a keyless write is only a wildcard delete
    /// (`clear` the table). Returns the write's outcome when one applies.
    fn fixed_default_or_clear(
        &mut self,
        clear: impl FnOnce(&mut Vec<Undo>),
    ) -> Option<Result<(), Status>> {
        match self.target {
            Target::Default => Some(match self.data.action_name() {
                None => Ok(()),
                Some(names::NO_ACTION) => Ok(()),
                Some(a) => Err(invalid(format!(
                    "{}: default action is fixed to NoAction, not {a}",
                    self.t.name
                ))),
            }),
            Target::All if self.op != Op::Delete => {
                Some(Err(invalid(format!("{}: key missing", self.t.name))))
            }
            Target::All => {
                clear(self.undo);
                Some(Ok(()))
            }
            Target::Key(_) => None,
        }
    }
}

/// One TableEntry of a Read being answered.
struct Reader<'a> {
    sw: &'a Switch,
    t: &'a TableSchema,
    entry_tgt: Option<pb::TargetDevice>,
    /// The data fields the read names (bf_switchd returns only those); None: all.
    wanted: Option<HashSet<u32>>,
}

impl Reader<'_> {
    /// Whether the read names this data field itself (fields a plain read
    /// leaves out, as bf_switchd does: `$ENTRY_HIT_STATE`).
    fn names(&self, id: u32) -> bool {
        self.wanted.as_ref().is_some_and(|w| w.contains(&id))
    }

    fn entry(&self, key: pb::TableKey, mut data: pb::TableData) -> pb::TableEntry {
        if let Some(w) = &self.wanted {
            data.fields.retain(|f| w.contains(&f.field_id));
        }
        pb::TableEntry {
            table_id: self.t.id,
            value: Some(pb::table_entry::Value::Key(key)),
            data: Some(data),
            is_default_entry: false,
            entry_tgt: self.entry_tgt,
            table_flags: None,
        }
    }

    fn not_found(&self) -> Status {
        Status::not_found(format!("{}: no such entry", self.t.name))
    }
}

/// The direct-counter values a write sets, if it names any.
fn counters_of(data: &Data) -> Result<Option<(u64, u64)>, Status> {
    Ok(
        match (
            data.int_opt(names::COUNTER_SPEC_BYTES)?,
            data.int_opt(names::COUNTER_SPEC_PKTS)?,
        ) {
            (None, None) => None,
            (b, p) => Some((b.unwrap_or(0), p.unwrap_or(0))),
        },
    )
}

/// Insert, modify or delete one entry of an exact table (relay, relay_guard),
/// an upsert resolved against what is there. Returns what was there, for undo.
fn write_exact<K: ExactKey, A: ActionWord, T: IdleTimer>(
    table: &ExactTable<K, A, T>,
    u: &Update,
    k: K,
    action: Option<A>,
    ttl: Option<u32>,
) -> Result<Option<Snapshot<K, A>>, Status> {
    let now = now_ms();
    let prev = table.get(&k, now);
    let op = match (u.op, prev.is_some()) {
        (Op::Upsert, true) => Op::Modify,
        (Op::Upsert, false) => Op::Insert,
        (o, _) => o,
    };
    match op {
        Op::Insert => {
            let a =
                action.ok_or_else(|| invalid(format!("{}: INSERT needs an action", u.t.name)))?;
            table
                .insert(k, a, ttl.unwrap_or(0), now)
                .map_err(table_status)?;
        }
        Op::Modify => table.modify(&k, action, ttl, now).map_err(table_status)?,
        Op::Delete => table.delete(&k).map_err(table_status)?,
        Op::Upsert => unreachable!("resolved above"),
    }
    Ok(prev)
}

/// Takes back one write of an exact table: the entry as it was (its action
/// and TTL) restored, or the new one deleted.
fn undo_exact<K: ExactKey, A: ActionWord, T: IdleTimer>(
    table: &ExactTable<K, A, T>,
    k: K,
    prev: Option<Snapshot<K, A>>,
) {
    match prev {
        None => {
            let _ = table.delete(&k);
        }
        Some(s) => {
            if table.get(&k, 0).is_none() {
                let _ = table.insert(k, s.action, s.ttl_ms, now_ms());
            }
            let _ = table.modify(&k, Some(s.action), Some(s.ttl_ms), now_ms());
        }
    }
}

/// A read of an exact table: the entry the key names, or every entry.
fn read_exact<K: ExactKey, A: ActionWord, T: IdleTimer>(
    r: &Reader,
    target: Target,
    table: &ExactTable<K, A, T>,
    key: fn(&Keys) -> Result<K, Status>,
    mut emit: impl FnMut(Snapshot<K, A>),
) -> Result<(), Status> {
    let now = now_ms();
    match target {
        Target::Key(k) => {
            let k = key(&Keys::new(r.t, k)?)?;
            emit(table.get(&k, now).ok_or_else(|| r.not_found())?);
        }
        _ => table.for_each(now, emit),
    }
    Ok(())
}

/// An action without parameters.
fn action_only(t: &TableSchema, name: &str) -> pb::TableData {
    pb::TableData {
        action_id: t.action_by_name(name).map_or(0, |a| a.id),
        fields: vec![],
    }
}

fn u32_of(v: u64) -> u32 {
    v as u32
}

impl Switch {
    /// Applies one TableEntry update, recording its undo.
    pub fn apply(
        &self,
        ty: UpdateType,
        te: &pb::TableEntry,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let op = op_of(ty)?;
        let t = self
            .schema
            .table(te.table_id)
            .ok_or_else(|| invalid(format!("unknown table id {}", te.table_id)))?;
        let key = match &te.value {
            Some(pb::table_entry::Value::Key(k)) => Some(k),
            Some(pb::table_entry::Value::HandleId(_)) => {
                return Err(Status::unimplemented(
                    "entry handles are not supported; address entries by key",
                ))
            }
            None => None,
        };
        let data = Data::new(t, te.data.as_ref())?;
        let target = if te.is_default_entry {
            if !has_default_entry(t.kind) {
                return Err(invalid(format!("{} has no default entry", t.name)));
            }
            Target::Default
        } else {
            match key {
                Some(k) if !k.fields.is_empty() => Target::Key(k),
                _ => Target::All,
            }
        };
        if let (Target::Key(_), Some(a)) = (target, data.action) {
            if a.scope == ActionScope::DefaultOnly {
                return Err(invalid(format!(
                    "{}: action {} is default only, it cannot be an entry's action",
                    t.name, a.name
                )));
            }
        }
        if let (Target::Default, Some(a)) = (target, data.action) {
            if a.scope == ActionScope::TableOnly {
                return Err(invalid(format!(
                    "{}: action {} is table only, it cannot be the default action",
                    t.name, a.name
                )));
            }
        }
        let mut u = Update {
            sw: self,
            t,
            op,
            target,
            data,
            undo,
        };
        match t.kind {
            TableKind::Relay => relay::apply(&mut u),
            TableKind::RelayGuard => guard::apply::<GuardKey>(&mut u),
            TableKind::LegRewrite => legs::apply::<LegTable>(&mut u),
            TableKind::Relay6 => relay6::apply_relay6(&mut u),
            TableKind::RelayGuard6 => guard::apply::<Guard6Key>(&mut u),
            TableKind::LegRewrite6 => legs::apply::<Leg6Table>(&mut u),
            TableKind::Register(reg) => register::apply(&mut u, reg),
            TableKind::QualityHalf(reg, half) => {
                register::apply_half(&mut u, register::QualityHalf(reg, half))
            }
            TableKind::Counter(ctr) => counter::apply(&mut u, ctr),
            TableKind::PortMetadata => port_metadata::apply(&mut u),
            TableKind::Port
            | TableKind::PortStat
            | TableKind::SchedShaping
            | TableKind::QueueCounter
            | TableKind::DevConfig => fixed::apply(&mut u),
            kind => (small_table(kind)?.apply)(&mut u),
        }
    }

    /// Takes back one applied write.
    pub fn undo(&self, u: Undo) {
        match u {
            Undo::Relay(k, prev) => relay::undo(&self.pipeline.relay, k, prev),
            Undo::Guard(k, prev) => guard::undo(self, k, prev),
            Undo::Leg(leg, prev, counts) => legs::undo::<LegTable>(self, leg, prev, counts),
            Undo::Relay6(k, prev) => relay::undo(&self.pipeline.relay6, k, prev),
            Undo::Guard6(k, prev) => guard::undo(self, k, prev),
            Undo::Leg6(leg, prev, counts) => legs::undo::<Leg6Table>(self, leg, prev, counts),
            Undo::Counter(ctr, i, v) => {
                ctr.set(self, i, v);
            }
            Undo::Small(snap) => small::undo(self, &snap),
            Undo::Register(reg, i, v) => {
                reg.set(self, i, v);
            }
            Undo::QualityHalf(reg, half, i, v) => {
                register::QualityHalf(reg, half).set(self, i, v);
            }
            Undo::PortEnable(..) | Undo::Rate(..) => fixed::undo(self, u),
            Undo::PortBinding(port, old) => port_metadata::undo(self, port, old),
            Undo::Cleared => {}
        }
    }

    /// Reads one TableEntry request into `out`: by key, by handle, the
    /// default entry, or (no key) every entry and then the default entry, as
    /// bf_switchd does.
    pub fn read_entries(
        &self,
        te: &pb::TableEntry,
        out: &mut dyn FnMut(pb::TableEntry),
    ) -> Result<(), Status> {
        let t = self
            .schema
            .table(te.table_id)
            .ok_or_else(|| invalid(format!("unknown table id {}", te.table_id)))?;
        let by_handle;
        let key = match &te.value {
            Some(pb::table_entry::Value::Key(k)) if !k.fields.is_empty() => Some(k),
            Some(pb::table_entry::Value::HandleId(h)) => {
                by_handle = self.key_of_handle(t.id, *h)?;
                Some(&by_handle)
            }
            _ => None,
        };
        // A read names the data fields it wants with field ids and no values.
        let wanted = match &te.data {
            Some(d) if !d.fields.is_empty() => {
                Data::new(t, Some(d))?;
                Some(d.fields.iter().map(|f| f.field_id).collect())
            }
            _ => None,
        };
        let r = Reader {
            sw: self,
            t,
            entry_tgt: te.entry_tgt,
            wanted,
        };
        if te.is_default_entry {
            default_entry(&r, out);
            return Ok(());
        }
        let target = key.map_or(Target::All, Target::Key);
        match t.kind {
            TableKind::Relay => relay::read(&r, target, out),
            TableKind::RelayGuard => guard::read::<GuardKey>(&r, target, out),
            TableKind::LegRewrite => legs::read::<LegTable>(&r, target, out),
            TableKind::Relay6 => relay6::read_relay6(&r, target, out),
            TableKind::RelayGuard6 => guard::read::<Guard6Key>(&r, target, out),
            TableKind::LegRewrite6 => legs::read::<Leg6Table>(&r, target, out),
            TableKind::Register(reg) => indexed::read(&r, reg, target, out),
            TableKind::QualityHalf(reg, half) => {
                indexed::read(&r, register::QualityHalf(reg, half), target, out)
            }
            TableKind::Counter(ctr) => indexed::read(&r, ctr, target, out),
            TableKind::PortMetadata => port_metadata::read(&r, target, out),
            TableKind::Port
            | TableKind::PortStat
            | TableKind::SchedShaping
            | TableKind::QueueCounter
            | TableKind::DevConfig => fixed::read(&r, target, out),
            kind => (small_table(kind)?.read)(&r, target, out),
        }?;
        if key.is_none() {
            default_entry(&r, out);
        }
        Ok(())
    }

    /// Entries in use (TableUsage).
    pub fn usage(&self, t: &TableSchema) -> u32 {
        let p = &self.pipeline;
        match t.kind {
            TableKind::Relay => p.relay.len() as u32,
            TableKind::RelayGuard => p.guard.len() as u32,
            TableKind::LegRewrite => p.legs.len() as u32,
            TableKind::Relay6 => p.relay6.len() as u32,
            TableKind::RelayGuard6 => p.guard6.len() as u32,
            TableKind::LegRewrite6 => p.legs6.len() as u32,
            TableKind::Register(_) | TableKind::QualityHalf(..) | TableKind::Counter(_) => t.size,
            TableKind::PortMetadata => p.port_binding.entries().len() as u32,
            kind => match small::table(kind) {
                Some(small) => (small.usage)(&p.small.load()) as u32,
                None => self.ports.len() as u32,
            },
        }
    }
}

/// The table's default entry (`is_default_entry`, no key), if it has one
/// (registers and fixed tables have none: nothing, as on bf_switchd).
fn default_entry(r: &Reader, out: &mut dyn FnMut(pb::TableEntry)) {
    let action = match r.t.kind {
        TableKind::Relay
        | TableKind::RelayGuard
        | TableKind::LegRewrite
        | TableKind::Relay6
        | TableKind::RelayGuard6
        | TableKind::LegRewrite6 => action_only(r.t, names::NO_ACTION),
        TableKind::DevConfig => fixed::device_configuration(r.sw, r.t),
        kind => match small::table(kind) {
            Some(small) => (small.default_data)(r),
            None => return,
        },
    };
    out(pb::TableEntry {
        is_default_entry: true,
        value: None,
        ..r.entry(pb::TableKey::default(), action)
    });
}

/// Match-action tables (and the keyless device configuration) have a default
/// entry; registers and the other fixed tables do not.
fn has_default_entry(kind: TableKind) -> bool {
    matches!(
        kind,
        TableKind::Relay
            | TableKind::RelayGuard
            | TableKind::LegRewrite
            | TableKind::Relay6
            | TableKind::RelayGuard6
            | TableKind::LegRewrite6
            | TableKind::DevConfig
    ) || small::table(kind).is_some()
}

/// The small table of this kind (every kind not matched before it is one).
fn small_table(kind: TableKind) -> Result<small::Ops, Status> {
    small::table(kind).ok_or_else(|| Status::unimplemented(format!("table kind {kind:?}")))
}
