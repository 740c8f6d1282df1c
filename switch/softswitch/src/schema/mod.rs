//! The BfRt schema: ids for every table, key, action and data field, built from
//! the contract, and the bfrt.json documents served over gRPC (`--dump-bfrt-json`).
//!
//! Shapes and ids are bf-p4c's: key/data ids count from 1, `$MATCH_PRIORITY`
//! 65537, `$ENTRY_TTL` 65543, `$ENTRY_HIT_STATE` 65544,
//! `$COUNTER_SPEC_BYTES`/`PKTS` 65553/65554, `$COUNTER_INDEX` 65556,
//! `$REGISTER_INDEX` 65557; table,
//! action (one id per action, shared by every table that lists it) and
//! digest ids are taken from the compiler's bf-rt.json of the P4 program
//! (`switch/p4/bfrt/standard.bf-rt.json`, compiled in), so a client sees the
//! same ids on the Tofino and here.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::contract::{names, Contract, KeyDef, RegisterDef};

pub mod tf1;

pub const ID_MATCH_PRIORITY: u32 = 65537;
pub const ID_ENTRY_TTL: u32 = 65543;
pub const ID_ENTRY_HIT_STATE: u32 = 65544;
pub const ID_COUNTER_BYTES: u32 = 65553;
pub const ID_COUNTER_PKTS: u32 = 65554;
pub const ID_COUNTER_INDEX: u32 = 65556;
pub const ID_REGISTER_INDEX: u32 = 65557;
/// bf-p4c's id of the port metadata table's key (`ig_intr_md.ingress_port`).
pub const ID_PORT_METADATA_PORT: u32 = 65575;

/// The Tofino compiler's bf-rt.json of the P4 program (its ids are the
/// reference): the standard profile, which builds every feature.
const COMPILER_BFRT_JSON: &str = include_str!("../../../p4/bfrt/standard.bf-rt.json");
/// The Tofino 2 build of the standard profile: the IPv6 objects' ids (Tofino
/// 1's standard build has no room for them); names in both keep Tofino 1's.
const COMPILER_T2_BFRT_JSON: &str = include_str!("../../../p4/bfrt/standard-t2.bf-rt.json");

/// Table, action and learn-filter ids by name, and each table's action
/// scopes, from the compiler's bf-rt.json.
struct CompilerIds {
    tables: HashMap<String, u32>,
    actions: HashMap<String, u32>,
    learn: HashMap<String, u32>,
    /// (table, action) → `action_scope` ("TableAndDefault", "DefaultOnly", "TableOnly").
    scopes: HashMap<(String, String), String>,
}

impl CompilerIds {
    fn load() -> CompilerIds {
        let mut ids = CompilerIds {
            tables: HashMap::new(),
            actions: HashMap::new(),
            learn: HashMap::new(),
            scopes: HashMap::new(),
        };
        ids.add(COMPILER_BFRT_JSON);
        ids.add(COMPILER_T2_BFRT_JSON);
        ids
    }

    /// Adds the ids of one compiled profile; names already known keep theirs.
    fn add(&mut self, json: &str) {
        let v: Value =
            serde_json::from_str(json).expect("the compiler's bf-rt.json parses (tested)");
        let ids = self;
        let id_of = |o: &Value| o["id"].as_u64().map(|i| i as u32);
        for t in v["tables"].as_array().into_iter().flatten() {
            if let (Some(name), Some(id)) = (t["name"].as_str(), id_of(t)) {
                ids.tables.entry(name.to_string()).or_insert(id);
            }
            for a in t["action_specs"].as_array().into_iter().flatten() {
                if let (Some(name), Some(id)) = (a["name"].as_str(), id_of(a)) {
                    ids.actions.entry(name.to_string()).or_insert(id);
                }
                if let (Some(table), Some(name), Some(scope)) = (
                    t["name"].as_str(),
                    a["name"].as_str(),
                    a["action_scope"].as_str(),
                ) {
                    ids.scopes
                        .entry((table.to_string(), name.to_string()))
                        .or_insert_with(|| scope.to_string());
                }
            }
        }
        for l in v["learn_filters"].as_array().into_iter().flatten() {
            if let (Some(name), Some(id)) = (l["name"].as_str(), id_of(l)) {
                ids.learn.entry(name.to_string()).or_insert(id);
            }
        }
    }

    /// The compiler's id, or (an object the compiled program lacks) a
    /// bf-p4c-style id of our own.
    fn get(map: &HashMap<String, u32>, prefix: u8, name: &str) -> u32 {
        map.get(name)
            .copied()
            .unwrap_or_else(|| object_id(prefix, name))
    }
}

/// Which piece of the pipeline a BfRt table addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    Ipv4Lpm,
    Nexthop,
    RelayAddr,
    Relay,
    RelayGuard,
    LegRewrite,
    RerouteWatch,
    /// `reroute_watch6`: IPv6 destinations, the same actions.
    RerouteWatch6,
    RerouteClass,
    IredPort,
    /// `ired_spare`: the signalling class iRED spares (ternary).
    IredSpare,
    IntWatch,
    /// `int_watch6`: IPv6 destinations traced (LPM).
    IntWatch6,
    IntRole,
    IntHopConfig,
    IntReport,
    /// `pipe.IngressParser.$PORT_METADATA`: port binding per ingress port.
    PortMetadata,
    Ipv6Lpm,
    Relay6Addr,
    Relay6,
    RelayGuard6,
    LegRewrite6,
    Register(Reg),
    /// One half of a split quality register (`--quality-half-bits`):
    /// `pipe.Egress.rtp_*` or `pipe.Egress.rtp_*_hi`.
    QualityHalf(Reg, Half),
    /// An indexed counter (`$COUNTER_INDEX` → `$COUNTER_SPEC_*`).
    Counter(Ctr),
    Port,
    PortStat,
    SchedShaping,
    QueueCounter,
    /// `tf1.dev.device_configuration`: the device's pipes, stages and ports.
    DevConfig,
}

/// The registers, in contract order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    Packets,
    /// `rtp_loss`: two 32-bit fields, lost and reordered (one cell; its
    /// value here is `lost << 32 | reordered`, `pack_fields`).
    Loss,
    MaxSeq,
    Transit,
    Jitter,
    LastSeen,
    PayloadType,
    LearnFilter,
    LearnFilter6,
    RerouteActive,
    RerouteFrom,
    RerouteRun,
    ReroutePortHot,
    Ired(IredReg),
    Int(IntReg),
}

/// Which of a split quality register's two halves (rtp_quality.p4
/// QUALITY_SPLIT): `rtp_*` holds legs below 2^half_bits, `rtp_*_hi` the legs
/// from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    Lo,
    Hi,
}

/// The indexed counters, in contract order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctr {
    /// `pipe.Ingress.guard_drops`: packets, by leg.
    GuardDrops,
    /// iRED's counts (`pipe.Egress.ired_*`, `pipe.Ingress.ired_*`): packets,
    /// by dev_port.
    Ired(IredCount),
}

impl Ctr {
    fn from_name(name: &str) -> Option<Ctr> {
        Some(match name {
            names::GUARD_DROPS => Ctr::GuardDrops,
            "pipe.Egress.ired_decisions" => Ctr::Ired(IredCount::Decisions),
            "pipe.Egress.ired_tail_drops" => Ctr::Ired(IredCount::TailDrops),
            "pipe.Ingress.ired_flags_set" => Ctr::Ired(IredCount::FlagsSet),
            "pipe.Ingress.ired_drops" => Ctr::Ired(IredCount::Drops),
            "pipe.Ingress.ired_spared" => Ctr::Ired(IredCount::Spared),
            _ => return None,
        })
    }
}

/// The INT registers (pipeline/int_*.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntReg {
    Malformed,
    TxBytes,
    HopLimit,
    FlowPath,
    FlowCongested,
    FlowReported,
    ReportSeq,
    SinkDepth,
    SinkLatency,
}

/// The iRED registers (pipeline/ired.rs), indexed by dev_port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IredReg {
    QdepthPrev,
    Qavg,
    DropProb,
    DropFlag,
}

/// iRED's counters (pipeline/ired.rs), indexed by dev_port: Counter externs
/// on the Tofino (a statistics ALU each, no stateful ALU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IredCount {
    /// `pipe.Egress.ired_decisions`: feedback copies sent to Ingress.
    Decisions,
    /// `pipe.Egress.ired_tail_drops`: packets dropped at egress (tail-drop mode).
    TailDrops,
    /// `pipe.Ingress.ired_flags_set`: feedback copies that set the flag.
    FlagsSet,
    /// `pipe.Ingress.ired_drops`: packets dropped by the flag.
    Drops,
    /// `pipe.Ingress.ired_spared`: protected packets that found the flag and passed.
    Spared,
}

impl Reg {
    /// A per-leg RTP quality register (`pipe.Egress.rtp_*`).
    pub fn is_quality(self) -> bool {
        matches!(
            self,
            Reg::Packets
                | Reg::Loss
                | Reg::MaxSeq
                | Reg::Transit
                | Reg::Jitter
                | Reg::LastSeen
                | Reg::PayloadType
        )
    }

    fn from_name(name: &str) -> Option<Reg> {
        Some(match name.rsplit('.').next()? {
            "rtp_packets" => Reg::Packets,
            "rtp_loss" => Reg::Loss,
            "rtp_max_seq" => Reg::MaxSeq,
            "rtp_transit" => Reg::Transit,
            "rtp_jitter" => Reg::Jitter,
            "rtp_last_seen" => Reg::LastSeen,
            "rtp_payload_type" => Reg::PayloadType,
            "learn_filter" => Reg::LearnFilter,
            "learn_filter6" => Reg::LearnFilter6,
            "reroute_active" => Reg::RerouteActive,
            "reroute_from" => Reg::RerouteFrom,
            "reroute_run" => Reg::RerouteRun,
            "reroute_port_hot" => Reg::ReroutePortHot,
            "ired_qdepth_prev" => Reg::Ired(IredReg::QdepthPrev),
            "ired_qavg" => Reg::Ired(IredReg::Qavg),
            "ired_drop_prob" => Reg::Ired(IredReg::DropProb),
            "ired_drop_flag" => Reg::Ired(IredReg::DropFlag),
            "int_malformed" => Reg::Int(IntReg::Malformed),
            "int_tx_bytes" => Reg::Int(IntReg::TxBytes),
            "int_hop_limit" => Reg::Int(IntReg::HopLimit),
            "int_flow_path" => Reg::Int(IntReg::FlowPath),
            "int_flow_congested" => Reg::Int(IntReg::FlowCongested),
            "int_flow_reported" => Reg::Int(IntReg::FlowReported),
            "int_report_seq" => Reg::Int(IntReg::ReportSeq),
            "int_sink_depth" => Reg::Int(IntReg::SinkDepth),
            "int_sink_latency" => Reg::Int(IntReg::SinkLatency),
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchType {
    Exact,
    Lpm,
    Range,
    Ternary,
}

#[derive(Debug, Clone)]
pub struct KeySchema {
    pub id: u32,
    pub name: String,
    pub match_type: MatchType,
    /// Width in bits; 0 for `$MATCH_PRIORITY` and uint32 keys of fixed tables.
    pub bits: u32,
}

#[derive(Debug, Clone)]
pub struct FieldSchema {
    pub id: u32,
    pub name: String,
    pub bits: u32,
}

/// Where an action may be used (bf-rt.json `action_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionScope {
    TableAndDefault,
    /// Only as the table's default action (P4 `@defaultonly`).
    DefaultOnly,
    /// Only in entries (P4 `@tableonly`).
    TableOnly,
}

impl ActionScope {
    fn parse(s: &str) -> ActionScope {
        match s {
            "DefaultOnly" => ActionScope::DefaultOnly,
            "TableOnly" => ActionScope::TableOnly,
            _ => ActionScope::TableAndDefault,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ActionScope::TableAndDefault => "TableAndDefault",
            ActionScope::DefaultOnly => "DefaultOnly",
            ActionScope::TableOnly => "TableOnly",
        }
    }

    /// bf-p4c's annotation for the scope.
    fn annotations(self) -> Value {
        match self {
            ActionScope::TableAndDefault => json!([]),
            ActionScope::DefaultOnly => json!([{"name": "@defaultonly"}]),
            ActionScope::TableOnly => json!([{"name": "@tableonly"}]),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ActionSchema {
    pub id: u32,
    pub name: String,
    pub params: Vec<FieldSchema>,
    pub scope: ActionScope,
}

#[derive(Debug, Clone)]
pub struct TableSchema {
    pub id: u32,
    pub name: String,
    pub kind: TableKind,
    pub size: u32,
    pub keys: Vec<KeySchema>,
    pub actions: Vec<ActionSchema>,
    /// Data fields not tied to an action ($COUNTER_SPEC_*, $ENTRY_TTL, register f1, fixed-table data).
    pub data: Vec<FieldSchema>,
    pub default_action: Option<u32>,
}

impl TableSchema {
    pub fn key(&self, id: u32) -> Option<&KeySchema> {
        self.keys.iter().find(|k| k.id == id)
    }
    pub fn key_by_name(&self, name: &str) -> Option<&KeySchema> {
        self.keys.iter().find(|k| k.name == name)
    }
    pub fn action(&self, id: u32) -> Option<&ActionSchema> {
        self.actions.iter().find(|a| a.id == id)
    }
    pub fn action_by_name(&self, name: &str) -> Option<&ActionSchema> {
        self.actions.iter().find(|a| a.name == name)
    }
    pub fn data_by_name(&self, name: &str) -> Option<&FieldSchema> {
        self.data.iter().find(|d| d.name == name)
    }
}

#[derive(Debug, Clone)]
pub struct DigestSchema {
    pub id: u32,
    pub name: String,
    pub fields: Vec<FieldSchema>,
}

#[derive(Debug)]
pub struct Schema {
    pub tables: Vec<TableSchema>,
    pub digests: Vec<DigestSchema>,
    by_id: HashMap<u32, usize>,
    pub bfrt_json: String,
    pub fixed_json: String,
}

/// The IPv6 relay tables' sizes (`--relay6-entries`, `--leg6-entries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V6Sizes {
    /// relay6 and relay_guard6.
    pub relay6: u32,
    /// leg_rewrite6.
    pub legs6: u32,
}

impl V6Sizes {
    /// The defaults: the contract's software-switch sizes, leg_rewrite6
    /// within the legs.
    pub fn of_contract(c: &Contract, legs: u32) -> V6Sizes {
        V6Sizes {
            relay6: c.config.relay6_entries_softswitch,
            legs6: c.config.leg_rewrite6_entries_softswitch.min(legs),
        }
    }
}

/// bf-p4c style ids: a type prefix in the top byte and a name hash below.
/// The top byte of a register's id (bf-p4c: TNA's Register extern).
const REGISTER_ID_PREFIX: u8 = 0x8b;

/// bf-p4c hashes the object's full name with Jenkins' one-at-a-time hash
/// (the split quality registers' `_hi` halves of a large-t2 build get the
/// compiler's ids this way).
fn object_id(prefix: u8, name: &str) -> u32 {
    let mut h: u32 = 0;
    for b in name.bytes() {
        h = h.wrapping_add(u32::from(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h = h.wrapping_add(h << 15);
    (u32::from(prefix) << 24) | (h & 0x00ff_ffff)
}

fn match_type(s: &str) -> MatchType {
    match s {
        "LPM" => MatchType::Lpm,
        "Range" => MatchType::Range,
        "Ternary" => MatchType::Ternary,
        _ => MatchType::Exact,
    }
}

fn match_name(m: MatchType) -> &'static str {
    match m {
        MatchType::Exact => "Exact",
        MatchType::Lpm => "LPM",
        MatchType::Range => "Range",
        MatchType::Ternary => "Ternary",
    }
}

/// A register cell of several fields as one value: the fields' values in
/// declaration order, the first in the high bits, each truncated to its
/// width (as a Tofino register write truncates). One field: its value.
pub fn pack_fields(fields: &[FieldSchema], values: &[u64]) -> u64 {
    fields.iter().zip(values).fold(0u64, |acc, (f, &v)| {
        acc.checked_shl(f.bits).unwrap_or(0) | (v & field_mask(f.bits))
    })
}

/// The low `bits` bits set (all 64 for a field of 64 bits or more).
fn field_mask(bits: u32) -> u64 {
    u64::MAX
        .checked_shr(64u32.saturating_sub(bits))
        .unwrap_or(0)
}

/// The inverse of `pack_fields`: each field's value, in declaration order.
pub fn unpack_fields(fields: &[FieldSchema], v: u64) -> Vec<u64> {
    let mut shift: u32 = fields.iter().map(|f| f.bits).sum();
    fields
        .iter()
        .map(|f| {
            shift -= f.bits;
            v.checked_shr(shift).unwrap_or(0) & field_mask(f.bits)
        })
        .collect()
}

fn bytes_type(bits: u32) -> Value {
    json!({"type": "bytes", "width": bits})
}

fn key_json(k: &KeySchema, uint_key: bool) -> Value {
    let ty = if k.bits == 0 || uint_key {
        json!({"type": "uint32"})
    } else {
        bytes_type(k.bits)
    };
    json!({"id": k.id, "name": k.name, "repeated": false, "annotations": [],
           "mandatory": uint_key,
           "match_type": match_name(k.match_type), "type": ty})
}

fn singleton(id: u32, name: &str, ty: Value, read_only: bool, repeated: bool) -> Value {
    json!({"mandatory": false, "read_only": read_only,
           "singleton": {"id": id, "name": name, "repeated": repeated, "annotations": [], "type": ty}})
}

fn keys_of(defs: &[KeyDef]) -> Vec<KeySchema> {
    defs.iter()
        .enumerate()
        .map(|(i, k)| KeySchema {
            id: if k.name == names::MATCH_PRIORITY {
                ID_MATCH_PRIORITY
            } else {
                i as u32 + 1
            },
            name: k.name.clone(),
            match_type: match_type(&k.match_type),
            // bf-p4c types $MATCH_PRIORITY uint32 (no width of its own).
            bits: if k.name == names::MATCH_PRIORITY {
                0
            } else {
                k.bits.unwrap_or(0)
            },
        })
        .collect()
}

/// bf-p4c's shape of the parser's phase-0 table: keyed by the ingress port
/// (its own key id), the struct's members as data fields, no actions.
fn port_metadata_table(t: &crate::contract::TableDef, ids: &CompilerIds) -> (Value, TableSchema) {
    let id = CompilerIds::get(&ids.tables, 0x02, &t.name);
    let mut keys = keys_of(&t.keys);
    for k in &mut keys {
        k.id = ID_PORT_METADATA_PORT;
    }
    let data: Vec<FieldSchema> = t
        .data
        .iter()
        .enumerate()
        .map(|(i, d)| FieldSchema {
            id: i as u32 + 1,
            name: d.name.clone(),
            bits: d.bits,
        })
        .collect();
    let size = t.size_p4;
    let json_table = json!({
        "name": t.name, "id": id, "table_type": "PortMetadata",
        "size": size, "annotations": [], "depends_on": [],
        "key": keys.iter().map(|k| {
            let mut v = key_json(k, false);
            v["mandatory"] = json!(true);
            v
        }).collect::<Vec<_>>(),
        "data": data.iter().map(|d| {
            let mut v = singleton(d.id, &d.name, bytes_type(d.bits), false, false);
            v["mandatory"] = json!(true);
            v
        }).collect::<Vec<_>>(),
        "supported_operations": [], "attributes": [],
    });
    let schema = TableSchema {
        id,
        name: t.name.clone(),
        kind: TableKind::PortMetadata,
        size,
        keys,
        actions: vec![],
        data,
        default_action: None,
    };
    (json_table, schema)
}

impl Schema {
    /// Builds the schema with the software switch's table sizes.
    pub fn build(c: &Contract, relay_entries: u32, legs: u32) -> Schema {
        Schema::build_v6(c, relay_entries, legs, V6Sizes::of_contract(c, legs))
    }

    /// `build` with the IPv6 relay tables' sizes given.
    pub fn build_v6(c: &Contract, relay_entries: u32, legs: u32, v6: V6Sizes) -> Schema {
        Schema::build_sized(c, relay_entries, legs, v6, None)
    }

    /// `build_v6` with the quality registers split in two at
    /// 2^`quality_half_bits` (`--quality-half-bits`): each `pipe.Egress.rtp_*`
    /// of 2^N cells and a `pipe.Egress.rtp_*_hi` of the other legs, as the
    /// Tofino build with QUALITY_SPLIT declares them.
    pub fn build_sized(
        c: &Contract,
        relay_entries: u32,
        legs: u32,
        v6: V6Sizes,
        quality_half_bits: Option<u32>,
    ) -> Schema {
        let ids = CompilerIds::load();
        let mut tables = Vec::new();
        let mut json_tables = Vec::new();
        for t in &c.tables {
            let kind = match t.name.as_str() {
                names::IPV4_LPM => TableKind::Ipv4Lpm,
                names::NEXTHOP => TableKind::Nexthop,
                names::RELAY_ADDR => TableKind::RelayAddr,
                names::RELAY => TableKind::Relay,
                names::RELAY_GUARD => TableKind::RelayGuard,
                names::LEG_REWRITE => TableKind::LegRewrite,
                names::REROUTE_WATCH => TableKind::RerouteWatch,
                names::REROUTE_WATCH6 => TableKind::RerouteWatch6,
                names::REROUTE_CLASS => TableKind::RerouteClass,
                names::IRED_PORT => TableKind::IredPort,
                names::IRED_SPARE => TableKind::IredSpare,
                names::INT_WATCH => TableKind::IntWatch,
                names::INT_WATCH6 => TableKind::IntWatch6,
                names::INT_ROLE => TableKind::IntRole,
                names::INT_HOP_CONFIG => TableKind::IntHopConfig,
                names::INT_REPORT => TableKind::IntReport,
                names::PORT_METADATA => TableKind::PortMetadata,
                names::IPV6_LPM => TableKind::Ipv6Lpm,
                names::RELAY6_ADDR => TableKind::Relay6Addr,
                names::RELAY6 => TableKind::Relay6,
                names::RELAY_GUARD6 => TableKind::RelayGuard6,
                names::LEG_REWRITE6 => TableKind::LegRewrite6,
                other => panic!("contract table {other} has no implementation in the softswitch"),
            };
            if kind == TableKind::PortMetadata {
                let (json_table, schema) = port_metadata_table(t, &ids);
                json_tables.push(json_table);
                tables.push(schema);
                continue;
            }
            // A call has as many guard entries as relay entries (4).
            let size = match kind {
                TableKind::Relay | TableKind::RelayGuard => relay_entries,
                TableKind::LegRewrite => legs,
                TableKind::Relay6 | TableKind::RelayGuard6 => v6.relay6,
                TableKind::LegRewrite6 => v6.legs6,
                _ => t.size_p4,
            };
            let keys = keys_of(&t.keys);
            let actions: Vec<ActionSchema> = t
                .actions
                .iter()
                .map(|an| {
                    let a = c.action(an).expect("contract test: actions exist");
                    ActionSchema {
                        id: CompilerIds::get(&ids.actions, 0x01, an),
                        name: an.clone(),
                        scope: ids
                            .scopes
                            .get(&(t.name.clone(), an.clone()))
                            .map_or(ActionScope::TableAndDefault, |s| ActionScope::parse(s)),
                        params: a
                            .params
                            .iter()
                            .enumerate()
                            .map(|(i, p)| FieldSchema {
                                id: i as u32 + 1,
                                name: p.name.clone(),
                                bits: p.bits,
                            })
                            .collect(),
                    }
                })
                .collect();
            let mut data = Vec::new();
            if t.direct_counter {
                data.push(FieldSchema {
                    id: ID_COUNTER_BYTES,
                    name: names::COUNTER_SPEC_BYTES.into(),
                    bits: 64,
                });
                data.push(FieldSchema {
                    id: ID_COUNTER_PKTS,
                    name: names::COUNTER_SPEC_PKTS.into(),
                    bits: 64,
                });
            }
            if t.idle_timeout.is_some() {
                data.push(FieldSchema {
                    id: ID_ENTRY_HIT_STATE,
                    name: names::ENTRY_HIT_STATE.into(),
                    bits: 0,
                });
                data.push(FieldSchema {
                    id: ID_ENTRY_TTL,
                    name: names::ENTRY_TTL.into(),
                    bits: 32,
                });
            }
            let default_action = actions
                .iter()
                .find(|a| a.name == t.default_action)
                .map(|a| a.id);
            // bf-p4c lists EntryScope on every match table.
            let mut attributes = vec!["EntryScope"];
            if t.idle_timeout.is_some() {
                attributes.push("IdleTimeout");
            }
            let mut ops = vec![];
            if t.direct_counter {
                ops.push("SyncCounters");
            }
            if t.idle_timeout.is_some() {
                ops.push("UpdateHitState");
            }
            json_tables.push(json!({
                "name": t.name, "id": CompilerIds::get(&ids.tables, 0x02, &t.name), "table_type": "MatchAction_Direct",
                "size": size, "annotations": [], "depends_on": [],
                "has_const_default_action": false,
                "key": keys.iter().map(|k| key_json(k, false)).collect::<Vec<_>>(),
                "action_specs": actions.iter().map(|a| json!({
                    "id": a.id, "name": a.name, "action_scope": a.scope.name(), "annotations": a.scope.annotations(),
                    "data": a.params.iter().map(|p| json!({
                        "id": p.id, "name": p.name, "repeated": false, "mandatory": true,
                        "read_only": false, "annotations": [], "type": bytes_type(p.bits)})).collect::<Vec<_>>()
                })).collect::<Vec<_>>(),
                "data": data.iter().map(|d| {
                    let ty = if d.id == ID_ENTRY_HIT_STATE { json!({"type": "string", "choices": ["ENTRY_IDLE", "ENTRY_ACTIVE"]}) }
                             else if d.bits == 64 { json!({"type": "uint64", "default_value": 0}) }
                             else { json!({"type": "uint32", "default_value": 0}) };
                    singleton(d.id, &d.name, ty, false, false)
                }).collect::<Vec<_>>(),
                "supported_operations": ops, "attributes": attributes,
            }));
            tables.push(TableSchema {
                id: CompilerIds::get(&ids.tables, 0x02, &t.name),
                name: t.name.clone(),
                kind,
                size,
                keys,
                actions,
                data,
                default_action,
            });
        }
        // A quality register's tables: (name, cells, kind): one, or its two
        // halves (Reg::is_quality).
        let register_tables = |r: &RegisterDef, reg: Reg| -> Vec<(String, u32, TableKind)> {
            let size = match reg {
                Reg::LearnFilter | Reg::LearnFilter6 => c.config.learn_filter_size,
                // Indexed by dev_port (9 bits) on the Tofino: bf-p4c's size;
                // the cells of dev_ports this switch lacks read 0.
                Reg::RerouteActive | Reg::RerouteFrom | Reg::RerouteRun | Reg::ReroutePortHot => {
                    r.size_p4
                }
                Reg::Ired(_) | Reg::Int(_) => r.size_p4,
                _ => legs,
            };
            match quality_half_bits {
                Some(h) if reg.is_quality() => vec![
                    (
                        r.name.clone(),
                        1 << h,
                        TableKind::QualityHalf(reg, Half::Lo),
                    ),
                    (
                        format!("{}_hi", r.name),
                        legs - (1 << h),
                        TableKind::QualityHalf(reg, Half::Hi),
                    ),
                ],
                _ => vec![(r.name.clone(), size, TableKind::Register(reg))],
            }
        };
        for r in c.registers.iter().filter(|r| r.published()) {
            let reg = Reg::from_name(&r.name)
                .unwrap_or_else(|| panic!("contract register {} has no implementation", r.name));
            for (name, size, kind) in register_tables(r, reg) {
                let short = name.trim_start_matches("pipe.");
                let keys = vec![KeySchema {
                    id: ID_REGISTER_INDEX,
                    name: names::REGISTER_INDEX.into(),
                    match_type: MatchType::Exact,
                    bits: 0,
                }];
                // bf-p4c: `f1`, or a struct register's fields by name, ids
                // from 1 in declaration order
                let data: Vec<FieldSchema> = r
                    .field_names()
                    .iter()
                    .zip(1..)
                    .map(|(f, id)| FieldSchema {
                        id,
                        name: format!("{short}.{f}"),
                        bits: r.bits,
                    })
                    .collect();
                json_tables.push(json!({
                "name": name, "id": CompilerIds::get(&ids.tables, REGISTER_ID_PREFIX, &name), "table_type": "Register",
                "size": size, "depends_on": [],
                "key": [json!({"id": ID_REGISTER_INDEX, "name": names::REGISTER_INDEX, "repeated": false,
                        "annotations": [], "mandatory": true, "match_type": "Exact", "type": {"type": "uint32"}})],
                // bf-p4c: one value per field, mandatory, classed register_data
                // (reads return one value per pipe; the client gathers them).
                "data": data.iter().map(|f| json!({"mandatory": true, "read_only": false,
                    "singleton": {"id": f.id, "name": f.name, "repeated": false,
                        "annotations": [{"name": "$bfrt_field_class", "value": "register_data"}],
                        "type": bytes_type(r.bits)}})).collect::<Vec<_>>(),
                "supported_operations": ["Sync"], "attributes": [],
            }));
                tables.push(TableSchema {
                    id: CompilerIds::get(&ids.tables, REGISTER_ID_PREFIX, &name),
                    name: name.clone(),
                    kind,
                    size,
                    keys,
                    actions: vec![],
                    data,
                    default_action: None,
                });
            }
        }
        for ct in &c.counters {
            let ctr = Ctr::from_name(&ct.name)
                .unwrap_or_else(|| panic!("contract counter {} has no implementation", ct.name));
            let size = match ctr {
                Ctr::GuardDrops => legs,
                // by dev_port (9 bits) on the Tofino: bf-p4c's size
                Ctr::Ired(_) => ct.size_p4,
            };
            let id = CompilerIds::get(&ids.tables, 0x12, &ct.name);
            let keys = vec![KeySchema {
                id: ID_COUNTER_INDEX,
                name: names::COUNTER_INDEX.into(),
                match_type: MatchType::Exact,
                bits: 0,
            }];
            let mut data = Vec::new();
            if ct.unit != "PACKETS" {
                data.push(FieldSchema {
                    id: ID_COUNTER_BYTES,
                    name: names::COUNTER_SPEC_BYTES.into(),
                    bits: 64,
                });
            }
            if ct.unit != "BYTES" {
                data.push(FieldSchema {
                    id: ID_COUNTER_PKTS,
                    name: names::COUNTER_SPEC_PKTS.into(),
                    bits: 64,
                });
            }
            json_tables.push(json!({
                "name": ct.name, "id": id, "table_type": "Counter",
                "size": size, "annotations": [], "depends_on": [],
                "key": [json!({"id": ID_COUNTER_INDEX, "name": names::COUNTER_INDEX, "repeated": false,
                        "annotations": [], "mandatory": true, "match_type": "Exact", "type": {"type": "uint32"}})],
                "data": data.iter().map(|d| json!({"mandatory": false, "read_only": false,
                    "singleton": {"id": d.id, "name": d.name, "repeated": false, "annotations": [],
                        "type": {"type": "uint64", "default_value": 0}}})).collect::<Vec<_>>(),
                "supported_operations": ["Sync"], "attributes": [],
            }));
            tables.push(TableSchema {
                id,
                name: ct.name.clone(),
                kind: TableKind::Counter(ctr),
                size,
                keys,
                actions: vec![],
                data,
                default_action: None,
            });
        }
        let digests: Vec<DigestSchema> = c
            .digests
            .iter()
            .map(|d| DigestSchema {
                id: CompilerIds::get(&ids.learn, 0x03, &d.name),
                name: d.name.clone(),
                fields: d
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| FieldSchema {
                        id: i as u32 + 1,
                        name: f.name.clone(),
                        bits: f.bits,
                    })
                    .collect(),
            })
            .collect();
        let learn_filters: Vec<Value> = digests
            .iter()
            .map(|d| json!({"name": d.name, "id": d.id, "annotations": [],
                "fields": d.fields.iter().map(|f| json!({"id": f.id, "name": f.name, "repeated": false,
                    "annotations": [], "type": bytes_type(f.bits)})).collect::<Vec<_>>()}))
            .collect();

        // Fixed tables: bf-drivers' tf1 definitions (tf1.rs), the fields the
        // contract names.
        let mut fixed_json_tables = Vec::new();
        for f in &c.fixed_tables {
            let kind = match f.name.as_str() {
                names::PORT => TableKind::Port,
                names::PORT_STAT => TableKind::PortStat,
                names::SCHED_SHAPING => TableKind::SchedShaping,
                names::QUEUE_COUNTER => TableKind::QueueCounter,
                names::DEVICE_CONFIGURATION => TableKind::DevConfig,
                other => panic!("contract fixed table {other} has no implementation"),
            };
            let tf = tf1::table(&f.name)
                .unwrap_or_else(|| panic!("fixed table {} is not a tf1 table", f.name));
            let keys: Vec<&tf1::Field> = f
                .keys
                .iter()
                .map(|k| {
                    tf.key(&k.name)
                        .unwrap_or_else(|| panic!("{}: tf1 has no key {}", f.name, k.name))
                })
                .collect();
            let fields: Vec<&tf1::Field> = f
                .data
                .iter()
                .map(|d| {
                    tf.field(&d.name)
                        .unwrap_or_else(|| panic!("{}: tf1 has no field {}", f.name, d.name))
                })
                .collect();
            fixed_json_tables.push(json!({
                "name": tf.name, "id": tf.id, "table_type": tf.table_type, "size": tf.size,
                "key": keys.iter().map(|k| k.key_json()).collect::<Vec<_>>(),
                "data": fields.iter().map(|d| d.data_json()).collect::<Vec<_>>(),
                "supported_operations": [], "attributes": tf.attributes,
            }));
            tables.push(TableSchema {
                id: tf.id,
                name: f.name.clone(),
                kind,
                size: tf.size,
                keys: keys
                    .iter()
                    .map(|k| KeySchema {
                        id: k.id,
                        name: k.name.to_string(),
                        match_type: MatchType::Exact,
                        // uint32 keys are 0 (the codec's default width).
                        bits: if k.ty == "uint32" { 0 } else { k.bits() },
                    })
                    .collect(),
                actions: vec![],
                data: fields
                    .iter()
                    .map(|d| FieldSchema {
                        id: d.id,
                        name: d.name.to_string(),
                        bits: d.bits(),
                    })
                    .collect(),
                default_action: None,
            });
        }
        let by_id = tables.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
        let bfrt = json!({"schema_version": "1.0.0", "tables": json_tables, "learn_filters": learn_filters});
        let fixed = json!({"schema_version": "1.0.0", "tables": fixed_json_tables});
        Schema {
            tables,
            digests,
            by_id,
            bfrt_json: serde_json::to_string_pretty(&bfrt).expect("json"),
            fixed_json: serde_json::to_string_pretty(&fixed).expect("json"),
        }
    }

    pub fn table(&self, id: u32) -> Option<&TableSchema> {
        self.by_id.get(&id).map(|&i| &self.tables[i])
    }

    pub fn table_by_name(&self, name: &str) -> Option<&TableSchema> {
        self.tables.iter().find(|t| t.name == name)
    }

    pub fn table_by_kind(&self, kind: TableKind) -> &TableSchema {
        self.tables
            .iter()
            .find(|t| t.kind == kind)
            .expect("every kind is in the contract")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::CONTRACT;

    #[test]
    fn schema_covers_contract_with_unique_ids() {
        let s = Schema::build(&CONTRACT, 1000, 500);
        let mut ids: Vec<u32> = s.tables.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), s.tables.len());
        let relay = s.table_by_name("pipe.Ingress.relay").unwrap();
        assert_eq!(relay.size, 1000);
        assert_eq!(relay.key_by_name("hdr.ipv4.src_addr").unwrap().bits, 32);
        assert!(relay.data_by_name("$ENTRY_TTL").is_some());
        assert!(relay.data_by_name("$COUNTER_SPEC_PKTS").is_none());
        let lr = s.table_by_name("pipe.Ingress.leg_rewrite").unwrap();
        assert!(lr.data_by_name("$COUNTER_SPEC_PKTS").is_some());
        assert!(lr.data_by_name("$COUNTER_SPEC_BYTES").is_some());
        let gd = s.table_by_name("pipe.Ingress.guard_drops").unwrap();
        assert_eq!(gd.kind, TableKind::Counter(Ctr::GuardDrops));
        assert_eq!(gd.size, 500);
        assert_eq!(gd.keys[0].id, ID_COUNTER_INDEX);
        assert_eq!(
            gd.data.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            ["$COUNTER_SPEC_PKTS"]
        );
        let leg = relay.action_by_name("Ingress.relay_leg").unwrap();
        assert_eq!(
            leg.params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>(),
            ["leg", "rtcp"]
        );
        let reg = s.table_by_name("pipe.Egress.rtp_packets").unwrap();
        assert_eq!(reg.data[0].name, "Egress.rtp_packets.f1");
        assert_eq!(reg.size, 500);
        let v: Value = serde_json::from_str(&s.bfrt_json).unwrap();
        let names: Vec<&str> = v["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"pipe.Ingress.relay_addr"));
        let guard = s.table_by_name("pipe.Ingress.relay_guard").unwrap();
        assert_eq!(guard.size, 1000);
        assert_eq!(
            guard
                .keys
                .iter()
                .map(|k| (k.name.as_str(), k.bits))
                .collect::<Vec<_>>(),
            [("hdr.ipv4.dst_addr", 32), ("hdr.udp.dst_port", 16)]
        );
        let drop = guard.action_by_name("Ingress.guard_drop").unwrap();
        assert_eq!(drop.params[0].name, "leg");
        assert!(guard.data_by_name("$COUNTER_SPEC_PKTS").is_none());
        assert!(guard.data_by_name("$ENTRY_TTL").is_none());
        assert_eq!(v["learn_filters"][0]["name"], "pipe.IngressDeparser.learn");
        let f: Value = serde_json::from_str(&s.fixed_json).unwrap();
        assert_eq!(f["tables"].as_array().unwrap().len(), 5);
    }

    /// A struct register's cell as one value: the first field high, each
    /// truncated to its width, and back.
    #[test]
    fn register_fields_pack_in_declaration_order() {
        let f = |id, bits| FieldSchema {
            id,
            name: format!("r.f{id}"),
            bits,
        };
        let two = [f(1, 32), f(2, 32)];
        assert_eq!(pack_fields(&two, &[5, 4]), 5 << 32 | 4);
        assert_eq!(pack_fields(&two, &[1 << 32 | 5, 1 << 33 | 4]), 5 << 32 | 4);
        assert_eq!(unpack_fields(&two, 5 << 32 | 4), [5, 4]);
        let one = [f(1, 16)];
        assert_eq!(pack_fields(&one, &[0x1_2345]), 0x2345);
        assert_eq!(unpack_fields(&one, 0x2345), [0x2345]);
    }

    /// `--quality-half-bits`: each quality register as the two the Tofino
    /// build with QUALITY_SPLIT declares, the other registers as they were.
    #[test]
    fn split_quality_registers_are_published_as_two_halves() {
        let s = Schema::build_sized(
            &CONTRACT,
            1000,
            100,
            V6Sizes::of_contract(&CONTRACT, 100),
            Some(6),
        );
        let lo = s.table_by_name("pipe.Egress.rtp_jitter").unwrap();
        let hi = s.table_by_name("pipe.Egress.rtp_jitter_hi").unwrap();
        assert_eq!((lo.size, hi.size), (64, 36));
        assert_eq!(lo.kind, TableKind::QualityHalf(Reg::Jitter, Half::Lo));
        assert_eq!(hi.kind, TableKind::QualityHalf(Reg::Jitter, Half::Hi));
        assert_eq!(hi.data[0].name, "Egress.rtp_jitter_hi.f1");
        assert_ne!(lo.id, hi.id);
        // the id bf-p4c gives it in the large-t2 build
        let packets_hi = s.table_by_name("pipe.Egress.rtp_packets_hi").unwrap();
        assert_eq!(packets_hi.id, 0x8b7b_f524);
        let halves = s.tables.iter().filter(|t| t.name.ends_with("_hi")).count();
        assert_eq!(halves, 7, "the seven quality registers");
        // a struct register's halves: both fields each
        let loss_hi = s.table_by_name("pipe.Egress.rtp_loss_hi").unwrap();
        let names: Vec<&str> = loss_hi.data.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["Egress.rtp_loss_hi.lost", "Egress.rtp_loss_hi.reordered"]
        );
        let lf = s.table_by_name("pipe.Ingress.learn_filter").unwrap();
        assert_eq!(lf.kind, TableKind::Register(Reg::LearnFilter));
        let v: Value = serde_json::from_str(&s.bfrt_json).unwrap();
        let json_hi = v["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "pipe.Egress.rtp_max_seq_hi")
            .unwrap();
        assert_eq!(json_hi["size"], 36);
        assert_eq!(json_hi["data"][0]["singleton"]["type"]["width"], 16);
        let unsplit = Schema::build(&CONTRACT, 1000, 100);
        assert!(unsplit.table_by_name("pipe.Egress.rtp_jitter_hi").is_none());
        assert_eq!(
            unsplit
                .table_by_name("pipe.Egress.rtp_jitter")
                .unwrap()
                .size,
            100
        );
    }

    /// Every table, action and digest of the contract has the id the Tofino
    /// compiler gave it (none falls back to an id of our own).
    #[test]
    fn ids_are_the_compilers() {
        let ids = CompilerIds::load();
        let s = Schema::build(&CONTRACT, 1000, 500);
        for t in s.tables.iter().filter(|t| t.name.starts_with("pipe.")) {
            assert_eq!(ids.tables.get(&t.name), Some(&t.id), "{}", t.name);
            for a in &t.actions {
                assert_eq!(ids.actions.get(&a.name), Some(&a.id), "{}", a.name);
            }
        }
        for d in &s.digests {
            assert_eq!(ids.learn.get(&d.name), Some(&d.id), "{}", d.name);
        }
        let relay = s.table_by_name(names::RELAY).unwrap();
        assert_eq!(relay.data_by_name(names::ENTRY_TTL).unwrap().id, 65543);
        assert_eq!(
            relay.data_by_name(names::ENTRY_HIT_STATE).unwrap().id,
            65544
        );
        let reg = s.table_by_name("pipe.Ingress.learn_filter").unwrap();
        assert_eq!(reg.keys[0].id, 65557);
        // One id per action, whichever table lists it.
        let noaction = |t: &str| {
            s.table_by_name(t)
                .unwrap()
                .action_by_name(names::NO_ACTION)
                .unwrap()
                .id
        };
        assert_eq!(noaction(names::RELAY), noaction(names::RELAY_GUARD));
        let v: Value = serde_json::from_str(&s.bfrt_json).unwrap();
        let ra = v["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == names::RELAY_ADDR)
            .unwrap();
        let prio = ra["key"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == names::MATCH_PRIORITY)
            .unwrap();
        assert_eq!(prio["type"], serde_json::json!({"type": "uint32"}));
        assert_eq!(prio["mandatory"], false);
    }
}
