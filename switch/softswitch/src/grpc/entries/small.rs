//! The small tables, kept in one snapshot the data path reads without locks
//! (`tables::small`): each is a `SmallTable` (its key and action decoded
//! from a write, encoded for a read, and where its entries live), and one
//! mechanism writes and reads them all. Writes replace the snapshot; the undo
//! is the snapshot before. The tables: `forwarding` (ipv4_lpm, nexthop,
//! relay_addr), `forwarding6` (ipv6_lpm, relay6_addr), `ired` (ired_port, ired_spare), `reroute` (reroute_watch, reroute_watch6, reroute_class),
//! `int` (int_watch, int_watch6, int_role, int_hop_config, int_report).

mod forwarding;
mod forwarding6;
mod int;
mod ired;
mod reroute;

use tonic::Status;

use super::{action_only, table_status, Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::grpc::codec::{invalid, Data, Keys};
use crate::grpc::{pb, Switch};
use crate::schema::{TableKind, TableSchema};
use crate::tables::small::{MapLike, SmallTables};
use crate::tables::TableError;

/// One small table as BfRt sees it.
pub(super) trait SmallTable {
    type Key: Copy + Ord;
    type Action: Copy;
    type Map: MapLike<Self::Key, Self::Action>;
    /// What the default entry returns to when it is deleted; None: the
    /// default action is fixed to NoAction.
    const RESET: Option<Self::Action>;

    fn entries(s: &SmallTables) -> &Self::Map;
    /// Insert (`insert`), modify, or delete (`a` None) one entry.
    fn write(
        s: &mut SmallTables,
        k: Self::Key,
        a: Option<Self::Action>,
        insert: bool,
    ) -> Result<(), TableError>;
    /// The default entry's action (tables with a settable default).
    fn default_mut(_s: &mut SmallTables) -> Option<&mut Self::Action> {
        None
    }
    fn default(_s: &SmallTables) -> Option<Self::Action> {
        None
    }

    /// The key of a write or a read, decoded (prefixes without host bits).
    fn key(k: &Keys) -> Result<Self::Key, Status>;
    /// What a write's key must be besides well-formed (a port of this switch).
    fn check_key(_sw: &Switch, _t: &TableSchema, _k: &Self::Key) -> Result<(), Status> {
        Ok(())
    }
    fn key_pb(t: &TableSchema, k: &Self::Key) -> pb::TableKey;
    /// The action a write names, if any.
    fn action(t: &TableSchema, d: &Data) -> Result<Option<Self::Action>, Status>;
    fn data(t: &TableSchema, a: &Self::Action) -> pb::TableData;
}

type ReadFn = fn(&Reader, Target, &mut dyn FnMut(pb::TableEntry)) -> Result<(), Status>;

/// A small table's entry points, for the dispatch by table kind.
#[derive(Clone, Copy)]
pub(super) struct Ops {
    pub apply: fn(&mut Update) -> Result<(), Status>,
    pub read: ReadFn,
    pub default_data: fn(&Reader) -> pb::TableData,
    pub usage: fn(&SmallTables) -> usize,
}

fn ops<T: SmallTable>() -> Ops {
    Ops {
        apply: apply::<T>,
        read: read::<T>,
        default_data: default_data::<T>,
        usage: |s| T::entries(s).count(),
    }
}

/// The small table of this kind, if it is one. A new small table is a
/// `SmallTable` impl and a line here.
pub(super) fn table(kind: TableKind) -> Option<Ops> {
    Some(match kind {
        TableKind::Ipv4Lpm => ops::<forwarding::Ipv4Lpm>(),
        TableKind::Nexthop => ops::<forwarding::Nexthop>(),
        TableKind::RelayAddr => ops::<forwarding::RelayAddr>(),
        TableKind::Ipv6Lpm => ops::<forwarding6::Ipv6Lpm>(),
        TableKind::Relay6Addr => ops::<forwarding6::Relay6Addr>(),
        TableKind::IredPort => ops::<ired::IredPort>(),
        TableKind::IredSpare => ops::<ired::IredSpare>(),
        TableKind::RerouteWatch => ops::<reroute::RerouteWatch<u32>>(),
        TableKind::RerouteWatch6 => ops::<reroute::RerouteWatch<u128>>(),
        TableKind::RerouteClass => ops::<reroute::RerouteClass>(),
        TableKind::IntWatch => ops::<int::IntWatch>(),
        TableKind::IntWatch6 => ops::<int::IntWatch6>(),
        TableKind::IntRole => ops::<int::IntRole>(),
        TableKind::IntHopConfig => ops::<int::IntHopConfig>(),
        TableKind::IntReport => ops::<int::IntReport>(),
        _ => return None,
    })
}

/// Applies `f` to a copy of the tables and publishes it; records the undo.
fn update(
    u: &mut Update,
    f: impl FnOnce(&mut SmallTables) -> Result<(), TableError>,
) -> Result<(), Status> {
    let small = &u.sw.pipeline.small;
    let snapshot = small.load_full();
    small.update(f).map_err(table_status)?;
    u.undo.push(Undo::Small(snapshot));
    Ok(())
}

fn apply<T: SmallTable>(u: &mut Update) -> Result<(), Status> {
    let (t, op) = (u.t, u.op);
    let settable_default = T::RESET.is_some();
    if matches!(u.target, Target::Default) && !settable_default {
        return match u.data.action_name() {
            None | Some(names::NO_ACTION) => Ok(()),
            Some(a) => Err(invalid(format!(
                "{}: default action is fixed to NoAction, not {a}",
                t.name
            ))),
        };
    }
    let a = T::action(t, &u.data)?;
    match u.target {
        Target::Default => update(u, |s| {
            if let Some(slot) = T::default_mut(s) {
                *slot = match (op, T::RESET) {
                    (Op::Delete, Some(reset)) => reset,
                    _ => a.unwrap_or(*slot),
                };
            }
            Ok(())
        }),
        Target::All if op != Op::Delete => Err(invalid(format!("{}: key missing", t.name))),
        Target::All => update(u, |s| {
            let keys: Vec<T::Key> = T::entries(s)
                .sorted()
                .into_iter()
                .map(|(k, _)| *k)
                .collect();
            keys.into_iter()
                .try_for_each(|k| T::write(s, k, None, false))
        }),
        Target::Key(_) => {
            let k = T::key(&u.keys()?)?;
            T::check_key(u.sw, t, &k)?;
            if op == Op::Delete {
                return update(u, |s| T::write(s, k, None, false));
            }
            let a = a.ok_or_else(|| invalid(format!("{}: an action is required", t.name)))?;
            update(u, |s| {
                let exists = T::entries(s).has(&k);
                T::write(
                    s,
                    k,
                    Some(a),
                    op == Op::Insert || (op == Op::Upsert && !exists),
                )
            })
        }
    }
}

fn read<T: SmallTable>(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let small = r.sw.pipeline.small.load_full();
    let entries = T::entries(&small);
    let row = |k: &T::Key, a: &T::Action| r.entry(T::key_pb(r.t, k), T::data(r.t, a));
    match target {
        Target::Key(k) => {
            let k = T::key(&Keys::new(r.t, k)?)?;
            let a = entries.find(&k).ok_or_else(|| r.not_found())?;
            out(row(&k, a));
        }
        _ => entries
            .sorted()
            .into_iter()
            .for_each(|(k, a)| out(row(k, a))),
    }
    Ok(())
}

/// The default entry's action.
fn default_data<T: SmallTable>(r: &Reader) -> pb::TableData {
    match T::default(&r.sw.pipeline.small.load()) {
        Some(a) => T::data(r.t, &a),
        None => action_only(r.t, names::NO_ACTION),
    }
}

pub(super) fn undo(sw: &Switch, snapshot: &SmallTables) {
    let _ = sw.pipeline.small.update(|t| {
        *t = snapshot.clone();
        Ok(())
    });
}

/// An action name the table does not have.
fn not_allowed(t: &TableSchema, a: &str) -> Status {
    invalid(format!("{}: action {a} not allowed", t.name))
}
