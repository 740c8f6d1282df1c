//! Table writes and reads: BfRt TableEntry ↔ the pipeline's tables, registers
//! and the fixed port/queue tables. Each applied write records how to undo it,
//! so a ROLLBACK_ON_ERROR batch can be taken back.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tonic::Status;

use super::codec::{df_bool, df_int, df_str, invalid, key_exact, key_lpm, key_range, Data, Keys};
use super::pb::{self, update::Type as UpdateType};
use super::Switch;
use crate::dataplane::now_ms;
use crate::fastpath::Touched;
use crate::schema::{Reg, TableKind, TableSchema, ID_COUNTER_BYTES, ID_COUNTER_PKTS, ID_ENTRY_TTL};
use crate::tables::exact::{ActionWord, ExactKey, ExactTable, Snapshot};
use crate::tables::guard::{GuardAction, GuardKey, GuardSnapshot};
use crate::tables::legs::Rewrite;
use crate::tables::relay::{EntrySnapshot, RelayAction, RelayKey};
use crate::tables::small::{LpmAction, NexthopAction, RelayAddrAction, RelayAddrKey, SmallTables};
use crate::tables::TableError;

pub fn table_status(e: TableError) -> Status {
    match e {
        TableError::AlreadyExists => Status::already_exists(e.to_string()),
        TableError::NotFound => Status::not_found(e.to_string()),
        TableError::Full(_) => Status::resource_exhausted(e.to_string()),
        TableError::Invalid(m) => Status::invalid_argument(m),
    }
}

/// The direct-counter values a write sets, if it names any.
fn counters_of(data: &Data) -> Result<Option<(u64, u64)>, Status> {
    Ok(
        match (
            data.int_opt("$COUNTER_SPEC_BYTES")?,
            data.int_opt("$COUNTER_SPEC_PKTS")?,
        ) {
            (None, None) => None,
            (b, p) => Some((b.unwrap_or(0), p.unwrap_or(0))),
        },
    )
}

/// Insert, modify or delete one entry of an exact table (relay, relay_guard),
/// an upsert resolved against what is there. Returns what was there, for undo.
fn write_exact<K: ExactKey, A: ActionWord>(
    table: &ExactTable<K, A>,
    t: &TableSchema,
    op: Op,
    k: K,
    action: Option<A>,
    ttl: Option<u32>,
    counters: Option<(u64, u64)>,
) -> Result<Option<Snapshot<K, A>>, Status> {
    let now = now_ms();
    let prev = table.get(&k, now);
    let op = match (op, prev.is_some()) {
        (Op::Upsert, true) => Op::Modify,
        (Op::Upsert, false) => Op::Insert,
        (o, _) => o,
    };
    match op {
        Op::Insert => {
            let a = action.ok_or_else(|| invalid(format!("{}: INSERT needs an action", t.name)))?;
            table
                .insert(k, a, ttl.unwrap_or(0), now)
                .map_err(table_status)?;
            if counters.is_some() {
                let _ = table.modify(&k, None, None, counters, now);
            }
        }
        Op::Modify => table
            .modify(&k, action, ttl, counters, now)
            .map_err(table_status)?,
        Op::Delete => table.delete(&k).map_err(table_status)?,
        Op::Upsert => unreachable!("resolved above"),
    }
    Ok(prev)
}

/// How to take back one applied write.
pub enum Undo {
    Relay(RelayKey, Option<EntrySnapshot>),
    Guard(GuardKey, Option<GuardSnapshot>),
    Leg(u32, Option<Rewrite>),
    Small(Arc<SmallTables>),
    Register(Reg, usize, u64),
    PortEnable(usize, bool),
    Rate(usize, u64),
    /// A table was cleared (not undoable; marks a full fast-path mirror).
    Cleared,
}

/// What a batch of applied (or rolled back) writes touched.
pub fn touched(undo: &[Undo]) -> Touched {
    let mut t = Touched::default();
    for u in undo {
        match u {
            Undo::Relay(k, _) => t.relay.push(*k),
            Undo::Leg(leg, _) => t.legs.push(*leg),
            Undo::Small(_) => t.routes = true,
            Undo::PortEnable(..) | Undo::Rate(..) => t.ports = true,
            Undo::Cleared => t.cleared = true,
            Undo::Guard(..) | Undo::Register(..) => {}
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

fn need<T>(a: Option<T>, table: &str) -> Result<T, TableError> {
    a.ok_or_else(|| TableError::Invalid(format!("{table}: an action is required")))
}

fn u32_of(v: u64) -> u32 {
    v as u32
}

fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn mac_u64(m: &[u8; 6]) -> u64 {
    m.iter().fold(0, |a, &x| (a << 8) | u64::from(x))
}

impl Switch {
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
        if te.is_default_entry
            && !matches!(
                t.kind,
                TableKind::Relay
                    | TableKind::RelayGuard
                    | TableKind::LegRewrite
                    | TableKind::Ipv4Lpm
                    | TableKind::Nexthop
                    | TableKind::RelayAddr
            )
        {
            return Err(invalid(format!("{} has no default entry", t.name)));
        }
        // No key and not the default entry: DELETE clears the table (bfrt entry_del without keys).
        let wildcard = !te.is_default_entry && key.is_none_or(|k| k.fields.is_empty());
        match t.kind {
            TableKind::Relay => {
                self.apply_relay(t, op, te.is_default_entry, wildcard, key, &data, undo)
            }
            TableKind::RelayGuard => {
                self.apply_guard(t, op, te.is_default_entry, wildcard, key, &data, undo)
            }
            TableKind::LegRewrite => {
                self.apply_leg(t, op, te.is_default_entry, wildcard, key, &data, undo)
            }
            TableKind::Ipv4Lpm | TableKind::Nexthop | TableKind::RelayAddr => {
                self.apply_small(t, op, te.is_default_entry, wildcard, key, &data, undo)
            }
            TableKind::Register(reg) => self.apply_register(t, reg, op, wildcard, key, &data, undo),
            TableKind::Port
            | TableKind::PortStat
            | TableKind::SchedShaping
            | TableKind::QueueCounter => self.apply_fixed(t, op, key, &data, undo),
        }
    }

    pub fn undo(&self, u: Undo) {
        let p = &self.pipeline;
        match u {
            Undo::Relay(k, prev) => match prev {
                None => {
                    let _ = p.relay.delete(&k);
                }
                Some(s) => {
                    if p.relay.get(&k, 0).is_none() {
                        let _ = p.relay.insert(k, s.action, s.ttl_ms, now_ms());
                    }
                    let _ = p.relay.modify(
                        &k,
                        Some(s.action),
                        Some(s.ttl_ms),
                        Some((s.bytes, s.pkts)),
                        now_ms(),
                    );
                }
            },
            Undo::Guard(k, prev) => match prev {
                None => {
                    let _ = p.guard.delete(&k);
                }
                Some(s) => {
                    if p.guard.get(&k, 0).is_none() {
                        let _ = p.guard.insert(k, s.action, 0, now_ms());
                    }
                    let _ =
                        p.guard
                            .modify(&k, Some(s.action), None, Some((s.bytes, s.pkts)), now_ms());
                }
            },
            Undo::Leg(leg, prev) => {
                let _ = match prev {
                    None => p.legs.delete(leg),
                    Some(r) => p.legs.modify(leg, r).or_else(|_| p.legs.insert(leg, r)),
                };
            }
            Undo::Small(snap) => {
                let _ = p.small.update(|t| {
                    *t = (*snap).clone();
                    Ok(())
                });
            }
            Undo::Register(reg, i, v) => {
                if reg == Reg::LearnFilter {
                    p.learn_filter.write(i, v);
                } else {
                    p.quality.write(reg, i, v);
                }
            }
            Undo::PortEnable(i, v) => self.ports[i].enabled.store(v, Relaxed),
            Undo::Rate(i, v) => self.ports[i].stats.egress.rate_bps.store(v, Relaxed),
            Undo::Cleared => {}
        }
    }

    fn relay_key(keys: &Keys) -> Result<RelayKey, Status> {
        Ok(RelayKey {
            src: u32_of(keys.exact("hdr.ipv4.src_addr")?),
            dst: u32_of(keys.exact("hdr.ipv4.dst_addr")?),
            sport: keys.exact("hdr.udp.src_port")? as u16,
            dport: keys.exact("hdr.udp.dst_port")? as u16,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_relay(
        &self,
        t: &TableSchema,
        op: Op,
        default: bool,
        wildcard: bool,
        key: Option<&pb::TableKey>,
        data: &Data,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let relay = &self.pipeline.relay;
        if let Some(done) = fixed_default_or_clear(t, op, default, wildcard, data, || {
            relay.clear();
            undo.push(Undo::Cleared);
        }) {
            return done;
        }
        let k = Self::relay_key(&Keys::new(t, key.expect("not wildcard"))?)?;
        let action = match data.action_name() {
            Some("Ingress.relay_leg") => {
                let leg = data.int("leg")?;
                if leg >= self.pipeline.legs.capacity() as u64 {
                    return Err(invalid(format!(
                        "leg {leg} out of range (legs = {})",
                        self.pipeline.legs.capacity()
                    )));
                }
                Some(RelayAction::Leg {
                    leg: leg as u32,
                    rtcp: data.int("rtcp")? == 1,
                })
            }
            Some("NoAction") => Some(RelayAction::NoAction),
            Some(other) => return Err(invalid(format!("{}: action {other} not allowed", t.name))),
            None => None,
        };
        let ttl = data.int_opt("$ENTRY_TTL")?.map(u32_of);
        if let Some(ttl) = ttl {
            let min = crate::contract::CONTRACT.config.idle_timeout_min_ms;
            if ttl != 0 && ttl < min {
                return Err(invalid(format!(
                    "$ENTRY_TTL {ttl} ms below the minimum {min} ms"
                )));
            }
        }
        let counters = counters_of(data)?;
        let prev = write_exact(relay, t, op, k, action, ttl, counters)?;
        if counters.is_some() {
            self.pipeline.zero_fast_counts(&k);
        }
        undo.push(Undo::Relay(k, prev));
        Ok(())
    }

    fn guard_key(keys: &Keys) -> Result<GuardKey, Status> {
        Ok(GuardKey {
            dst: u32_of(keys.exact("hdr.ipv4.dst_addr")?),
            dport: keys.exact("hdr.udp.dst_port")? as u16,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_guard(
        &self,
        t: &TableSchema,
        op: Op,
        default: bool,
        wildcard: bool,
        key: Option<&pb::TableKey>,
        data: &Data,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let guard = &self.pipeline.guard;
        if let Some(done) = fixed_default_or_clear(t, op, default, wildcard, data, || guard.clear())
        {
            return done;
        }
        let k = Self::guard_key(&Keys::new(t, key.expect("not wildcard"))?)?;
        let action = match data.action_name() {
            Some("Ingress.guard_drop") => Some(GuardAction::Drop),
            Some("NoAction") => Some(GuardAction::NoAction),
            Some(other) => return Err(invalid(format!("{}: action {other} not allowed", t.name))),
            None => None,
        };
        let prev = write_exact(guard, t, op, k, action, None, counters_of(data)?)?;
        undo.push(Undo::Guard(k, prev));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_leg(
        &self,
        t: &TableSchema,
        op: Op,
        default: bool,
        wildcard: bool,
        key: Option<&pb::TableKey>,
        data: &Data,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let legs = &self.pipeline.legs;
        if let Some(done) = fixed_default_or_clear(t, op, default, wildcard, data, || {
            legs.clear();
            undo.push(Undo::Cleared);
        }) {
            return done;
        }
        let leg = Keys::new(t, key.expect("not wildcard"))?.exact("ig_md.leg")? as u32;
        if leg as usize >= legs.capacity() {
            return Err(invalid(format!(
                "leg {leg} out of range (legs = {})",
                legs.capacity()
            )));
        }
        let rw = match data.action_name() {
            Some("Ingress.rewrite") => Some(Rewrite {
                src: u32_of(data.int("src_addr")?),
                dst: u32_of(data.int("dst_addr")?),
                sport: data.int("src_port")? as u16,
                dport: data.int("dst_port")? as u16,
            }),
            Some(other) if op != Op::Delete => {
                return Err(invalid(format!(
                    "{}: only Ingress.rewrite entries are stored, not {other}",
                    t.name
                )))
            }
            _ => None,
        };
        let prev = legs.get(leg);
        match (op, rw) {
            (Op::Delete, _) => legs.delete(leg).map_err(table_status)?,
            (Op::Insert, Some(r)) => legs.insert(leg, r).map_err(table_status)?,
            (Op::Modify, Some(r)) => legs.modify(leg, r).map_err(table_status)?,
            (Op::Upsert, Some(r)) => {
                if prev.is_some() {
                    legs.modify(leg, r).map_err(table_status)?
                } else {
                    legs.insert(leg, r).map_err(table_status)?
                }
            }
            (_, None) => return Err(invalid(format!("{}: needs action Ingress.rewrite", t.name))),
        }
        undo.push(Undo::Leg(leg, prev));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_small(
        &self,
        t: &TableSchema,
        op: Op,
        default: bool,
        wildcard: bool,
        key: Option<&pb::TableKey>,
        data: &Data,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let kind = t.kind;
        let keys = match key {
            Some(k) if !default && !wildcard => Some(Keys::new(t, k)?),
            _ => None,
        };
        // Decode everything before touching the tables.
        let lpm_action = |d: &Data| -> Result<Option<LpmAction>, Status> {
            Ok(match d.action_name() {
                Some("Ingress.set_nexthop") => {
                    Some(LpmAction::SetNexthop(d.int("nexthop_id")? as u16))
                }
                Some("Ingress.drop") => Some(LpmAction::Drop),
                None => None,
                Some(o) => return Err(invalid(format!("{}: action {o} not allowed", t.name))),
            })
        };
        let nh_action = |d: &Data| -> Result<Option<NexthopAction>, Status> {
            Ok(match d.action_name() {
                Some("Ingress.forward") => Some(NexthopAction::Forward {
                    port: d.int("port")? as u16,
                    src_mac: mac(d.int("src_mac")?),
                    dst_mac: mac(d.int("dst_mac")?),
                }),
                Some("Ingress.drop") => Some(NexthopAction::Drop),
                None => None,
                Some(o) => return Err(invalid(format!("{}: action {o} not allowed", t.name))),
            })
        };
        let ra_action = |d: &Data| -> Result<Option<RelayAddrAction>, Status> {
            Ok(match d.action_name() {
                Some("Ingress.mark_relay") => Some(RelayAddrAction::MarkRelay),
                Some("NoAction") => Some(RelayAddrAction::NoAction),
                None => None,
                Some(o) => return Err(invalid(format!("{}: action {o} not allowed", t.name))),
            })
        };
        let snapshot = self.pipeline.small.load_full();
        let insert = matches!(op, Op::Insert);
        let result = self.pipeline.small.update(|s| {
            let err = |e: TableError| e;
            match kind {
                TableKind::Ipv4Lpm => {
                    let a =
                        lpm_action(data).map_err(|e| TableError::Invalid(e.message().into()))?;
                    if default {
                        s.lpm_default = if op == Op::Delete {
                            LpmAction::Drop
                        } else {
                            a.unwrap_or(s.lpm_default)
                        };
                    } else if wildcard {
                        if op != Op::Delete {
                            return Err(TableError::Invalid("key missing".into()));
                        }
                        for (p, l) in s.lpm.keys().copied().collect::<Vec<_>>() {
                            s.lpm_write(p, l, None, false)?;
                        }
                    } else {
                        let (p, l) = keys
                            .as_ref()
                            .expect("keyed")
                            .lpm("hdr.ipv4.dst_addr")
                            .map_err(|e| TableError::Invalid(e.message().into()))?;
                        let p = p as u32;
                        let exists = s
                            .lpm
                            .contains_key(&(p & crate::tables::small::prefix_mask(l), l));
                        match op {
                            Op::Delete => s.lpm_write(p, l, None, false)?,
                            _ => {
                                let a = need(a, &t.name)?;
                                s.lpm_write(p, l, Some(a), insert || (op == Op::Upsert && !exists))
                                    .map_err(err)?
                            }
                        }
                    }
                }
                TableKind::Nexthop => {
                    let a = nh_action(data).map_err(|e| TableError::Invalid(e.message().into()))?;
                    if default {
                        s.nexthop_default = if op == Op::Delete {
                            NexthopAction::Drop
                        } else {
                            a.unwrap_or(s.nexthop_default)
                        };
                    } else if wildcard {
                        if op != Op::Delete {
                            return Err(TableError::Invalid("key missing".into()));
                        }
                        s.nexthop.clear();
                    } else {
                        let id = keys
                            .as_ref()
                            .expect("keyed")
                            .exact("ig_md.nexthop_id")
                            .map_err(|e| TableError::Invalid(e.message().into()))?
                            as u16;
                        let exists = s.nexthop.contains_key(&id);
                        match op {
                            Op::Delete => s.nexthop_write(id, None, false)?,
                            _ => {
                                let a = need(a, &t.name)?;
                                s.nexthop_write(
                                    id,
                                    Some(a),
                                    insert || (op == Op::Upsert && !exists),
                                )?
                            }
                        }
                    }
                }
                _ => {
                    let a = ra_action(data).map_err(|e| TableError::Invalid(e.message().into()))?;
                    if default {
                        s.relay_addr_default = if op == Op::Delete {
                            RelayAddrAction::NoAction
                        } else {
                            a.unwrap_or(s.relay_addr_default)
                        };
                    } else if wildcard {
                        if op != Op::Delete {
                            return Err(TableError::Invalid("key missing".into()));
                        }
                        s.relay_addr.clear();
                    } else {
                        let inv = |e: Status| TableError::Invalid(e.message().into());
                        let rk = relay_addr_key(keys.as_ref().expect("keyed")).map_err(inv)?;
                        let exists = s.relay_addr.contains_key(&rk);
                        match op {
                            Op::Delete => s.relay_addr_write(rk, None, false)?,
                            _ => {
                                let a = need(a, &t.name)?;
                                s.relay_addr_write(
                                    rk,
                                    Some(a),
                                    insert || (op == Op::Upsert && !exists),
                                )?
                            }
                        }
                    }
                }
            }
            Ok(())
        });
        result.map_err(table_status)?;
        undo.push(Undo::Small(snapshot));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_register(
        &self,
        t: &TableSchema,
        reg: Reg,
        op: Op,
        wildcard: bool,
        key: Option<&pb::TableKey>,
        data: &Data,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let p = &self.pipeline;
        let read = |i: usize| {
            if reg == Reg::LearnFilter {
                p.learn_filter.read(i)
            } else {
                p.quality.read(reg, i)
            }
        };
        let write = |i: usize, v: u64| {
            if reg == Reg::LearnFilter {
                p.learn_filter.write(i, v)
            } else {
                p.quality.write(reg, i, v)
            }
        };
        if wildcard {
            // DELETE/RESET of a register table without index: zero it all.
            if op != Op::Delete {
                return Err(invalid(format!("{}: $REGISTER_INDEX missing", t.name)));
            }
            for i in 0..t.size as usize {
                write(i, 0);
            }
            return Ok(());
        }
        let i = Keys::new(t, key.expect("not wildcard"))?.exact("$REGISTER_INDEX")? as usize;
        let old = read(i).ok_or_else(|| {
            Status::out_of_range(format!("{}: index {i} >= size {}", t.name, t.size))
        })?;
        let v = if op == Op::Delete {
            0
        } else {
            let f = &t.data[0];
            data.int_opt(&f.name)?
                .ok_or_else(|| invalid(format!("{}: data field {} missing", t.name, f.name)))?
        };
        write(i, v);
        undo.push(Undo::Register(reg, i, old));
        Ok(())
    }

    fn port_index(&self, dev_port: u64) -> Result<usize, Status> {
        self.ports
            .iter()
            .position(|p| u64::from(p.id) == dev_port)
            .ok_or_else(|| {
                Status::not_found(format!("dev_port {dev_port} is not a port of this switch"))
            })
    }

    fn apply_fixed(
        &self,
        t: &TableSchema,
        op: Op,
        key: Option<&pb::TableKey>,
        data: &Data,
        undo: &mut Vec<Undo>,
    ) -> Result<(), Status> {
        let key = key.ok_or_else(|| invalid(format!("{}: key missing", t.name)))?;
        let keys = Keys::new(t, key)?;
        match t.kind {
            TableKind::Port => {
                let i = self.port_index(keys.exact("$DEV_PORT")?)?;
                let port = &self.ports[i];
                let enable = match op {
                    Op::Delete => Some(false),
                    _ => data.bool_opt("$PORT_ENABLE")?.or(if op == Op::Insert {
                        Some(true)
                    } else {
                        None
                    }),
                };
                if let Some(e) = enable {
                    undo.push(Undo::PortEnable(i, port.enabled.swap(e, Relaxed)));
                }
                Ok(())
            }
            TableKind::SchedShaping => {
                let i = self.port_index(keys.exact("dev_port")?)?;
                if let Some(u) = data.str_opt("unit")? {
                    if u != "BPS" {
                        return Err(invalid(format!(
                            "{}: unit {u:?} not supported (BPS only)",
                            t.name
                        )));
                    }
                }
                let rate = if op == Op::Delete {
                    Some(0)
                } else {
                    data.int_opt("max_rate")?
                };
                if let Some(kbps) = rate {
                    let old = self.ports[i]
                        .stats
                        .egress
                        .rate_bps
                        .swap(kbps * 1000, Relaxed);
                    undo.push(Undo::Rate(i, old));
                }
                Ok(())
            }
            TableKind::QueueCounter => {
                let i = self.port_index(keys.exact("pg_id")?)?;
                if keys.exact("pg_queue")? != 0 {
                    return Err(Status::not_found(
                        "the softswitch has one queue per port: pg_queue 0",
                    ));
                }
                let e = &self.ports[i].stats.egress;
                if data.int_opt("watermark_cells")?.is_some() || op == Op::Delete {
                    e.watermark_cells
                        .store(self.ports[i].queue_cells() as u32, Relaxed);
                }
                if data.int_opt("drop_count_packets")?.is_some() || op == Op::Delete {
                    e.tail_drops.store(0, Relaxed);
                }
                Ok(())
            }
            _ => Err(invalid(format!("{} is read-only", t.name))),
        }
    }

    // ------------------------------------------------------------------ reads

    /// Reads one TableEntry request (by key, wildcard, or default) into `out`.
    pub fn read_entries(
        &self,
        te: &pb::TableEntry,
        out: &mut dyn FnMut(pb::TableEntry),
    ) -> Result<(), Status> {
        let t = self
            .schema
            .table(te.table_id)
            .ok_or_else(|| invalid(format!("unknown table id {}", te.table_id)))?;
        let key = match &te.value {
            Some(pb::table_entry::Value::Key(k)) if !k.fields.is_empty() => Some(k),
            Some(pb::table_entry::Value::HandleId(_)) => {
                return Err(Status::unimplemented("entry handles are not supported"))
            }
            _ => None,
        };
        let entry = |key: pb::TableKey, data: pb::TableData| pb::TableEntry {
            table_id: t.id,
            value: Some(pb::table_entry::Value::Key(key)),
            data: Some(data),
            is_default_entry: false,
            entry_tgt: te.entry_tgt,
            table_flags: None,
        };
        if te.is_default_entry {
            let small = self.pipeline.small.load();
            let action = match t.kind {
                TableKind::Ipv4Lpm => lpm_data(t, small.lpm_default),
                TableKind::Nexthop => nh_data(t, small.nexthop_default),
                TableKind::RelayAddr => ra_data(t, small.relay_addr_default),
                TableKind::Relay | TableKind::RelayGuard | TableKind::LegRewrite => {
                    action_only(t, "NoAction")
                }
                _ => return Err(invalid(format!("{} has no default entry", t.name))),
            };
            out(pb::TableEntry {
                is_default_entry: true,
                value: None,
                ..entry(pb::TableKey::default(), action)
            });
            return Ok(());
        }
        match t.kind {
            TableKind::Relay => {
                let now = now_ms();
                let emit = |s: EntrySnapshot, out: &mut dyn FnMut(pb::TableEntry)| {
                    out(entry(relay_key_pb(t, &s.key), relay_data(t, &s)));
                };
                match key {
                    Some(k) => {
                        let rk = Self::relay_key(&Keys::new(t, k)?)?;
                        let s = self.pipeline.relay.get(&rk, now).ok_or_else(|| {
                            Status::not_found(format!("{}: no such entry", t.name))
                        })?;
                        emit(self.pipeline.with_fast_counts(s, now), out);
                    }
                    None => self
                        .pipeline
                        .for_each_relay_with_fast_counts(now, |s| emit(s, out)),
                }
            }
            TableKind::RelayGuard => {
                let now = now_ms();
                let emit = |s: GuardSnapshot, out: &mut dyn FnMut(pb::TableEntry)| {
                    out(entry(guard_key_pb(t, &s.key), guard_data(t, &s)));
                };
                match key {
                    Some(k) => {
                        let gk = Self::guard_key(&Keys::new(t, k)?)?;
                        let s = self.pipeline.guard.get(&gk, now).ok_or_else(|| {
                            Status::not_found(format!("{}: no such entry", t.name))
                        })?;
                        emit(s, out);
                    }
                    None => self.pipeline.guard.for_each(now, |s| emit(s, out)),
                }
            }
            TableKind::LegRewrite => {
                let ks = t.key_by_name("ig_md.leg").expect("schema");
                let emit = |leg: u32, r: Rewrite, out: &mut dyn FnMut(pb::TableEntry)| {
                    out(entry(
                        pb::TableKey {
                            fields: vec![key_exact(ks, u64::from(leg))],
                        },
                        leg_data(t, &r),
                    ));
                };
                match key {
                    Some(k) => {
                        let leg = Keys::new(t, k)?.exact("ig_md.leg")? as u32;
                        let r = self.pipeline.legs.get(leg).ok_or_else(|| {
                            Status::not_found(format!("{}: no entry for leg {leg}", t.name))
                        })?;
                        emit(leg, r, out);
                    }
                    None => self.pipeline.legs.for_each(|l, r| emit(l, r, out)),
                }
            }
            TableKind::Ipv4Lpm => {
                let small = self.pipeline.small.load_full();
                let ks = t.key_by_name("hdr.ipv4.dst_addr").expect("schema");
                let row = |(p, l): (u32, u8), a: LpmAction| {
                    entry(
                        pb::TableKey {
                            fields: vec![key_lpm(ks, u64::from(p), l)],
                        },
                        lpm_data(t, a),
                    )
                };
                match key {
                    Some(k) => {
                        let (p, l) = Keys::new(t, k)?.lpm("hdr.ipv4.dst_addr")?;
                        let k = (p as u32 & crate::tables::small::prefix_mask(l), l);
                        let a = small.lpm.get(&k).ok_or_else(|| {
                            Status::not_found(format!("{}: no such entry", t.name))
                        })?;
                        out(row(k, *a));
                    }
                    None => small.lpm.iter().for_each(|(k, a)| out(row(*k, *a))),
                }
            }
            TableKind::Nexthop => {
                let small = self.pipeline.small.load_full();
                let ks = t.key_by_name("ig_md.nexthop_id").expect("schema");
                let row = |id: u16, a: NexthopAction| {
                    entry(
                        pb::TableKey {
                            fields: vec![key_exact(ks, u64::from(id))],
                        },
                        nh_data(t, a),
                    )
                };
                match key {
                    Some(k) => {
                        let id = Keys::new(t, k)?.exact("ig_md.nexthop_id")? as u16;
                        let a = small.nexthop.get(&id).ok_or_else(|| {
                            Status::not_found(format!("{}: no such entry", t.name))
                        })?;
                        out(row(id, *a));
                    }
                    None => {
                        let mut ids: Vec<_> = small.nexthop.iter().collect();
                        ids.sort_by_key(|(id, _)| **id);
                        ids.into_iter().for_each(|(id, a)| out(row(*id, *a)));
                    }
                }
            }
            TableKind::RelayAddr => {
                let small = self.pipeline.small.load_full();
                match key {
                    Some(k) => {
                        let rk = relay_addr_key(&Keys::new(t, k)?)?;
                        let a = small.relay_addr.get(&rk).ok_or_else(|| {
                            Status::not_found(format!("{}: no such entry", t.name))
                        })?;
                        out(entry(relay_addr_key_pb(t, &rk), ra_data(t, *a)));
                    }
                    None => small
                        .relay_addr
                        .iter()
                        .for_each(|(k, a)| out(entry(relay_addr_key_pb(t, k), ra_data(t, *a)))),
                }
            }
            TableKind::Register(reg) => {
                let ks = &t.keys[0];
                let f = &t.data[0];
                let p = &self.pipeline;
                let read = |i: usize| {
                    if reg == Reg::LearnFilter {
                        p.learn_filter.read(i)
                    } else {
                        p.quality.read(reg, i)
                    }
                };
                let emit = |i: usize, v: u64, out: &mut dyn FnMut(pb::TableEntry)| {
                    out(entry(
                        pb::TableKey {
                            fields: vec![key_exact(ks, i as u64)],
                        },
                        pb::TableData {
                            action_id: 0,
                            fields: vec![df_int(f.id, v, f.bits)],
                        },
                    ));
                };
                match key {
                    Some(k) => {
                        let i = Keys::new(t, k)?.exact("$REGISTER_INDEX")? as usize;
                        let v = read(i).ok_or_else(|| {
                            Status::out_of_range(format!(
                                "{}: index {i} >= size {}",
                                t.name, t.size
                            ))
                        })?;
                        emit(i, v, out);
                    }
                    None => {
                        for i in 0..t.size as usize {
                            if let Some(v) = read(i) {
                                emit(i, v, out);
                            }
                        }
                    }
                }
            }
            TableKind::Port
            | TableKind::PortStat
            | TableKind::SchedShaping
            | TableKind::QueueCounter => {
                let only = match key {
                    Some(k) => {
                        let keys = Keys::new(t, k)?;
                        let name = &t.keys[0].name;
                        let dp = keys.exact(name)?;
                        if t.kind == TableKind::QueueCounter && keys.exact("pg_queue")? != 0 {
                            return Err(Status::not_found(
                                "the softswitch has one queue per port: pg_queue 0",
                            ));
                        }
                        Some(self.port_index(dp)?)
                    }
                    None => None,
                };
                for (i, port) in self.ports.iter().enumerate() {
                    if only.is_some_and(|o| o != i) {
                        continue;
                    }
                    let mut kf = vec![key_exact(&t.keys[0], u64::from(port.id))];
                    if t.kind == TableKind::QueueCounter {
                        kf.push(key_exact(&t.keys[1], 0));
                    }
                    out(entry(
                        pb::TableKey { fields: kf },
                        fixed_data(t, port, self.pipeline.fast_port_counts(port.id)),
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn usage(&self, t: &TableSchema) -> u32 {
        let p = &self.pipeline;
        match t.kind {
            TableKind::Relay => p.relay.len() as u32,
            TableKind::RelayGuard => p.guard.len() as u32,
            TableKind::LegRewrite => p.legs.len() as u32,
            TableKind::Ipv4Lpm => p.small.load().lpm.len() as u32,
            TableKind::Nexthop => p.small.load().nexthop.len() as u32,
            TableKind::RelayAddr => p.small.load().relay_addr.len() as u32,
            TableKind::Register(_) => t.size,
            _ => self.ports.len() as u32,
        }
    }
}

fn relay_addr_key(k: &Keys) -> Result<RelayAddrKey, Status> {
    let (lo, hi) = k.range("hdr.udp.dst_port")?;
    Ok(RelayAddrKey {
        priority: k.exact("$MATCH_PRIORITY")? as u32,
        dst: k.exact("hdr.ipv4.dst_addr")? as u32,
        lo: lo as u16,
        hi: hi as u16,
    })
}

fn action_only(t: &TableSchema, name: &str) -> pb::TableData {
    pb::TableData {
        action_id: t.action_by_name(name).map_or(0, |a| a.id),
        fields: vec![],
    }
}

fn params(t: &TableSchema, action: &str, vals: &[(&str, u64)]) -> pb::TableData {
    let a = t.action_by_name(action).expect("contract action");
    pb::TableData {
        action_id: a.id,
        fields: vals
            .iter()
            .map(|(n, v)| {
                let p = a
                    .params
                    .iter()
                    .find(|p| p.name == *n)
                    .expect("contract param");
                df_int(p.id, *v, p.bits)
            })
            .collect(),
    }
}

fn lpm_data(t: &TableSchema, a: LpmAction) -> pb::TableData {
    match a {
        LpmAction::SetNexthop(id) => {
            params(t, "Ingress.set_nexthop", &[("nexthop_id", u64::from(id))])
        }
        LpmAction::Drop => action_only(t, "Ingress.drop"),
    }
}

fn nh_data(t: &TableSchema, a: NexthopAction) -> pb::TableData {
    match a {
        NexthopAction::Forward {
            port,
            src_mac,
            dst_mac,
        } => params(
            t,
            "Ingress.forward",
            &[
                ("port", u64::from(port)),
                ("src_mac", mac_u64(&src_mac)),
                ("dst_mac", mac_u64(&dst_mac)),
            ],
        ),
        NexthopAction::Drop => action_only(t, "Ingress.drop"),
    }
}

fn ra_data(t: &TableSchema, a: RelayAddrAction) -> pb::TableData {
    match a {
        RelayAddrAction::MarkRelay => action_only(t, "Ingress.mark_relay"),
        RelayAddrAction::NoAction => action_only(t, "NoAction"),
    }
}

fn relay_addr_key_pb(t: &TableSchema, k: &RelayAddrKey) -> pb::TableKey {
    pb::TableKey {
        fields: vec![
            key_exact(
                t.key_by_name("hdr.ipv4.dst_addr").expect("schema"),
                u64::from(k.dst),
            ),
            key_range(
                t.key_by_name("hdr.udp.dst_port").expect("schema"),
                u64::from(k.lo),
                u64::from(k.hi),
            ),
            key_exact(
                t.key_by_name("$MATCH_PRIORITY").expect("schema"),
                u64::from(k.priority),
            ),
        ],
    }
}

fn relay_key_pb(t: &TableSchema, k: &RelayKey) -> pb::TableKey {
    let f = |n: &str, v: u64| key_exact(t.key_by_name(n).expect("schema"), v);
    pb::TableKey {
        fields: vec![
            f("hdr.ipv4.src_addr", u64::from(k.src)),
            f("hdr.ipv4.dst_addr", u64::from(k.dst)),
            f("hdr.udp.src_port", u64::from(k.sport)),
            f("hdr.udp.dst_port", u64::from(k.dport)),
        ],
    }
}

fn relay_data(t: &TableSchema, s: &EntrySnapshot) -> pb::TableData {
    let mut d = match s.action {
        RelayAction::Leg { leg, rtcp } => params(
            t,
            "Ingress.relay_leg",
            &[("leg", u64::from(leg)), ("rtcp", u64::from(rtcp))],
        ),
        RelayAction::NoAction => action_only(t, "NoAction"),
    };
    d.fields.push(df_int(ID_COUNTER_BYTES, s.bytes, 64));
    d.fields.push(df_int(ID_COUNTER_PKTS, s.pkts, 64));
    // As on Tofino, $ENTRY_TTL reads back the time left before the entry ages.
    let left = if s.ttl_ms == 0 {
        0
    } else {
        s.ttl_ms.saturating_sub(s.idle_ms)
    };
    d.fields.push(df_int(ID_ENTRY_TTL, u64::from(left), 32));
    d
}

fn guard_key_pb(t: &TableSchema, k: &GuardKey) -> pb::TableKey {
    let f = |n: &str, v: u64| key_exact(t.key_by_name(n).expect("schema"), v);
    pb::TableKey {
        fields: vec![
            f("hdr.ipv4.dst_addr", u64::from(k.dst)),
            f("hdr.udp.dst_port", u64::from(k.dport)),
        ],
    }
}

fn guard_data(t: &TableSchema, s: &GuardSnapshot) -> pb::TableData {
    let mut d = match s.action {
        GuardAction::Drop => action_only(t, "Ingress.guard_drop"),
        GuardAction::NoAction => action_only(t, "NoAction"),
    };
    d.fields.push(df_int(ID_COUNTER_BYTES, s.bytes, 64));
    d.fields.push(df_int(ID_COUNTER_PKTS, s.pkts, 64));
    d
}

fn leg_data(t: &TableSchema, r: &Rewrite) -> pb::TableData {
    params(
        t,
        "Ingress.rewrite",
        &[
            ("src_addr", u64::from(r.src)),
            ("dst_addr", u64::from(r.dst)),
            ("src_port", u64::from(r.sport)),
            ("dst_port", u64::from(r.dport)),
        ],
    )
}

fn fixed_data(
    t: &TableSchema,
    port: &crate::dataplane::Port,
    fast: crate::fastpath::PortCounts,
) -> pb::TableData {
    let st = &port.stats;
    let e = &st.egress;
    let fields = t
        .data
        .iter()
        .filter_map(|f| {
            let id = f.id;
            Some(match f.name.as_str() {
                "$SPEED" => df_str(id, "BF_SPEED_10G"),
                "$PORT_ENABLE" => df_bool(id, port.enabled.load(Relaxed)),
                "$PORT_NAME" => df_str(id, &port.ifname),
                "$PORT_UP" => df_bool(id, port.link_up()),
                "$FramesReceivedOK" => {
                    df_int(id, st.rx_packets.load(Relaxed) + fast.rx_packets, 64)
                }
                "$OctetsReceived" => df_int(id, st.rx_bytes.load(Relaxed) + fast.rx_bytes, 64),
                "$FramesTransmittedOK" => {
                    df_int(id, e.tx_packets.load(Relaxed) + fast.tx_packets, 64)
                }
                "$OctetsTransmittedTotal" => {
                    df_int(id, e.tx_bytes.load(Relaxed) + fast.tx_bytes, 64)
                }
                "$FramesDroppedBufferFull" => df_int(id, e.tail_drops.load(Relaxed), 64),
                "unit" => df_str(id, "BPS"),
                "provisioning" => df_str(id, "UPPER"),
                "max_rate" => df_int(id, e.rate_bps.load(Relaxed) / 1000, 32),
                "max_burst_size" => df_int(id, 0, 32),
                "usage_cells" => df_int(id, port.queue_cells() as u64, 32),
                "watermark_cells" => df_int(id, u64::from(e.watermark_cells.load(Relaxed)), 32),
                "drop_count_packets" => df_int(id, e.tail_drops.load(Relaxed), 64),
                _ => return None,
            })
        })
        .collect();
    pb::TableData {
        action_id: 0,
        fields,
    }
}

/// The relay, guard and leg tables share two rules: their default action is fixed to
/// NoAction, and a keyless write is only a wildcard delete (clear the table).
/// Returns the write's outcome when one of them applies.
fn fixed_default_or_clear(
    t: &TableSchema,
    op: Op,
    default: bool,
    wildcard: bool,
    data: &Data,
    clear: impl FnOnce(),
) -> Option<Result<(), Status>> {
    if default {
        return Some(match data.action_name() {
            None | Some("NoAction") => Ok(()),
            Some(a) => Err(invalid(format!(
                "{}: default action is fixed to NoAction, not {a}",
                t.name
            ))),
        });
    }
    if wildcard {
        if op != Op::Delete {
            return Some(Err(invalid(format!("{}: key missing", t.name))));
        }
        clear();
        return Some(Ok(()));
    }
    None
}
