//! The pipeline contract (`switch/contract.toml`), compiled into the binary so
//! the served bfrt.json and the pipeline cannot drift from it.

use std::sync::LazyLock;

use serde::Deserialize;

pub const CONTRACT_TOML: &str = include_str!("../../contract.toml");

pub static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    toml::from_str(CONTRACT_TOML).expect("switch/contract.toml is valid (tested)")
});

#[derive(Debug, Deserialize)]
pub struct Contract {
    pub program: Program,
    pub config: ContractConfig,
    #[serde(rename = "table")]
    pub tables: Vec<TableDef>,
    #[serde(rename = "action")]
    pub actions: Vec<ActionDef>,
    #[serde(rename = "register")]
    pub registers: Vec<RegisterDef>,
    #[serde(rename = "counter")]
    pub counters: Vec<CounterDef>,
    #[serde(rename = "digest")]
    pub digests: Vec<DigestDef>,
    #[serde(rename = "fixed_table")]
    pub fixed_tables: Vec<FixedTableDef>,
}

#[derive(Debug, Deserialize)]
pub struct Program {
    pub name: String,
    pub contract_version: u32,
}

#[derive(Debug, Deserialize)]
pub struct ContractConfig {
    pub rtp_clock_hz: u32,
    pub jitter_shift: u32,
    pub relay_port_min: u16,
    pub relay_port_max: u16,
    pub learn_filter_size: u32,
    pub learn_filter_age_ms: u32,
    pub idle_timeout_min_ms: u32,
    pub relay_entries_p4: u32,
    pub relay_entries_softswitch: u32,
    pub legs_p4: u32,
    pub legs_softswitch: u32,
    pub max_ports: u32,
    pub reroute_slots: u32,
    pub reroute_notice_ethertype: u16,
    pub ired_ewma_n_max: u32,
    pub ired_cell_bytes: u32,
    pub int_dscp: u8,
    pub int_max_hops: u8,
    pub int_flow_slots: u32,
    pub int_report_interval_ms: u32,
    pub unbound_port: u16,
    /// relay6_addr's relay_id values (distinct IPv6 relay addresses).
    pub relay6_ids: u32,
    pub relay6_entries_softswitch: u32,
    pub leg_rewrite6_entries_softswitch: u32,
    pub tna_deq_timedelta_bits: u32,
    pub tna_qdepth_bits: u32,
    pub tna_tstamp_bits: u32,
    pub reroute_delay_shift: u32,
    pub reroute_delay_bits: u32,
}

#[derive(Debug, Deserialize)]
pub struct TableDef {
    pub name: String,
    pub size_p4: u32,
    pub keys: Vec<KeyDef>,
    pub actions: Vec<String>,
    /// Empty for a table without actions (port metadata).
    #[serde(default)]
    pub default_action: String,
    /// bf-p4c's table_type when it is not a match-action table.
    pub table_type: Option<String>,
    /// Data fields of a table without actions (port metadata).
    #[serde(default)]
    pub data: Vec<FieldDef>,
    #[serde(default)]
    pub direct_counter: bool,
    pub idle_timeout: Option<String>,
    pub entry_scope: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct KeyDef {
    pub name: String,
    #[serde(rename = "match")]
    pub match_type: String,
    pub bits: Option<u32>,
    #[serde(rename = "type")]
    pub ty: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ActionDef {
    pub name: String,
    pub params: Vec<FieldDef>,
}

#[derive(Debug, Deserialize)]
pub struct FieldDef {
    pub name: String,
    pub bits: u32,
}

#[derive(Debug, Deserialize)]
pub struct RegisterDef {
    pub name: String,
    /// Each field's width.
    pub bits: u32,
    pub size_p4: u32,
    /// A register of a struct: its fields (bf-rt data fields
    /// `<Control>.<reg>.<field>`); none: one value, `f1`.
    #[serde(default)]
    pub fields: Vec<String>,
    /// The target whose builds declare it (`tofino`, `tofino2`); none:
    /// every build.
    #[serde(default)]
    pub target: Option<String>,
}

/// The target the software switch stands in for: bf_switchd running Tofino
/// 1's standard program, so it publishes Tofino 1's registers.
pub const TARGET: &str = "tofino";

impl RegisterDef {
    /// Whether the software switch publishes it (`TARGET`).
    pub fn published(&self) -> bool {
        self.target.as_deref().is_none_or(|t| t == TARGET)
    }

    /// The data fields' short names: the struct's, or `f1`.
    pub fn field_names(&self) -> Vec<&str> {
        if self.fields.is_empty() {
            vec!["f1"]
        } else {
            self.fields.iter().map(String::as_str).collect()
        }
    }
}

/// An indexed counter (bf-p4c table_type "Counter").
#[derive(Debug, Deserialize)]
pub struct CounterDef {
    pub name: String,
    /// "PACKETS", "BYTES" or "PACKETS_AND_BYTES".
    pub unit: String,
    pub size_p4: u32,
}

#[derive(Debug, Deserialize)]
pub struct DigestDef {
    pub name: String,
    pub fields: Vec<FieldDef>,
}

#[derive(Debug, Deserialize)]
pub struct FixedTableDef {
    pub name: String,
    pub keys: Vec<KeyDef>,
    pub data: Vec<FixedDataDef>,
}

#[derive(Debug, Deserialize)]
pub struct FixedDataDef {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub read_only: bool,
}

/// The contract's names the software switch addresses (`switch/contract.toml`),
/// and the names bf-p4c gives a table's built-in fields. A test checks that
/// every contract name here exists in the contract.
pub mod names {
    // Tables.
    pub const IPV4_LPM: &str = "pipe.Ingress.ipv4_lpm";
    pub const NEXTHOP: &str = "pipe.Ingress.nexthop";
    pub const RELAY_ADDR: &str = "pipe.Ingress.relay_addr";
    pub const RELAY: &str = "pipe.Ingress.relay";
    pub const RELAY_GUARD: &str = "pipe.Ingress.relay_guard";
    pub const LEG_REWRITE: &str = "pipe.Ingress.leg_rewrite";
    pub const REROUTE_WATCH: &str = "pipe.Ingress.reroute_watch";
    pub const REROUTE_CLASS: &str = "pipe.Egress.reroute_class";
    pub const IRED_PORT: &str = "pipe.Egress.ired_port";
    pub const INT_WATCH: &str = "pipe.Ingress.int_watch";
    pub const INT_ROLE: &str = "pipe.Ingress.int_role";
    pub const INT_HOP_CONFIG: &str = "pipe.Egress.int_hop_config";
    pub const INT_REPORT: &str = "pipe.Egress.int_report";
    pub const PORT_METADATA: &str = "pipe.IngressParser.$PORT_METADATA";
    pub const IPV6_LPM: &str = "pipe.Ingress.ipv6_lpm";
    pub const RELAY6_ADDR: &str = "pipe.Ingress.relay6_addr";
    pub const RELAY6: &str = "pipe.Ingress.relay6";
    pub const RELAY_GUARD6: &str = "pipe.Ingress.relay_guard6";
    pub const LEG_REWRITE6: &str = "pipe.Ingress.leg_rewrite6";
    pub const REROUTE_WATCH6: &str = "pipe.Ingress.reroute_watch6";
    pub const INT_WATCH6: &str = "pipe.Ingress.int_watch6";
    pub const IRED_SPARE: &str = "pipe.Ingress.ired_spare";
    // Counters.
    pub const GUARD_DROPS: &str = "pipe.Ingress.guard_drops";
    pub const TABLES: [&str; 22] = [
        IPV4_LPM,
        NEXTHOP,
        RELAY_ADDR,
        RELAY,
        RELAY_GUARD,
        LEG_REWRITE,
        REROUTE_WATCH,
        REROUTE_CLASS,
        IRED_PORT,
        INT_WATCH,
        INT_ROLE,
        INT_HOP_CONFIG,
        INT_REPORT,
        PORT_METADATA,
        IPV6_LPM,
        RELAY6_ADDR,
        RELAY6,
        RELAY_GUARD6,
        LEG_REWRITE6,
        REROUTE_WATCH6,
        IRED_SPARE,
        INT_WATCH6,
    ];
    // Digests.
    pub const LEARN_DIGEST: &str = "pipe.IngressDeparser.learn";
    pub const REROUTE_DIGEST: &str = "pipe.IngressDeparser.reroute";
    pub const LEARN6_DIGEST: &str = "pipe.IngressDeparser.learn6";

    // Match keys.
    pub const KEY_IPV4_SRC: &str = "hdr.ipv4.src_addr";
    pub const KEY_IPV6_SRC: &str = "hdr.ipv6.src_addr";
    pub const KEY_IPV6_DST: &str = "hdr.ipv6.dst_addr";
    pub const KEY_RELAY_ID: &str = "ig_md.relay_id";
    pub const KEY_IPV4_DST: &str = "hdr.ipv4.dst_addr";
    pub const KEY_UDP_SRC: &str = "hdr.udp.src_port";
    pub const KEY_UDP_DST: &str = "hdr.udp.dst_port";
    pub const KEY_BOUND_PORT: &str = "ig_md.bound_port";
    pub const KEY_PORT_METADATA_PORT: &str = "ig_intr_md.ingress_port";
    pub const D_UNBOUND: &str = "unbound";
    pub const KEY_NEXTHOP_ID: &str = "ig_md.nexthop_id";
    pub const KEY_LEG: &str = "ig_md.leg";
    pub const KEY_LEG6: &str = "ig_md.leg6";
    pub const KEY_RR_CLASS: &str = "hdr.bridged.rr_class";
    pub const KEY_EGRESS_PORT: &str = "eg_intr_md.egress_port";
    pub const KEY_BRIDGED_RELAY: &str = "hdr.bridged.relay";
    pub const KEY_BRIDGED_LEG: &str = "hdr.bridged.leg";
    pub const KEY_DSCP: &str = "ig_md.dscp";
    pub const KEY_L4_SRC: &str = "ig_md.l4_src_port";
    pub const KEY_L4_DST: &str = "ig_md.l4_dst_port";

    // Actions and their parameters.
    pub const SET_NEXTHOP: &str = "Ingress.set_nexthop";
    pub const P_NEXTHOP_ID: &str = "nexthop_id";
    pub const FORWARD: &str = "Ingress.forward";
    pub const P_PORT: &str = "port";
    pub const P_SRC_MAC: &str = "src_mac";
    pub const P_DST_MAC: &str = "dst_mac";
    pub const DROP: &str = "Ingress.drop";
    pub const MARK_RELAY: &str = "Ingress.mark_relay";
    pub const RELAY_LEG: &str = "Ingress.relay_leg";
    pub const P_LEG: &str = "leg";
    pub const P_RTCP: &str = "rtcp";
    pub const REWRITE: &str = "Ingress.rewrite";
    pub const P_SRC_ADDR: &str = "src_addr";
    pub const P_DST_ADDR: &str = "dst_addr";
    pub const P_SRC_PORT: &str = "src_port";
    pub const P_DST_PORT: &str = "dst_port";
    pub const GUARD_DROP: &str = "Ingress.guard_drop";
    pub const MARK_RELAY6: &str = "Ingress.mark_relay6";
    pub const P_RELAY_ID: &str = "relay_id";
    pub const RELAY6_LEG: &str = "Ingress.relay6_leg";
    pub const REWRITE6: &str = "Ingress.rewrite6";
    pub const GUARD6_DROP: &str = "Ingress.guard6_drop";
    pub const REROUTE_BACKUP: &str = "Ingress.reroute_backup";
    pub const REROUTE_NOTIFY: &str = "Ingress.reroute_notify";
    pub const P_SLOT: &str = "slot";
    pub const P_FLOW_CLASS: &str = "flow_class";
    pub const P_BACKUP_NEXTHOP_ID: &str = "backup_nexthop_id";
    pub const P_PRIMARY_PORT: &str = "primary_port";
    pub const REROUTE_THRESHOLDS: &str = "Egress.reroute_thresholds";
    pub const P_T_Q_NS: &str = "t_q_ns";
    pub const P_M: &str = "m";
    pub const IRED_SET: &str = "Egress.ired_set";
    pub const P_MAX_LEN_QUEUE: &str = "max_len_queue";
    pub const P_N_DROP: &str = "n_drop";
    pub const P_EWMA_N: &str = "ewma_n";
    pub const P_TAIL_DROP: &str = "tail_drop";
    pub const P_PROTECT: &str = "protect";
    pub const INT_WATCH_FLOW: &str = "Ingress.int_watch_flow";
    pub const IRED_SPARE_PACKET: &str = "Ingress.ired_spare_packet";
    pub const INT_TRANSIT: &str = "Ingress.int_transit";
    pub const INT_SINK: &str = "Ingress.int_sink";
    pub const INT_HOP: &str = "Egress.int_hop";
    pub const P_SWITCH_ID: &str = "switch_id";
    pub const P_ONSET_CELLS: &str = "onset_cells";
    pub const P_CLEAR_CELLS: &str = "clear_cells";
    pub const P_ONSET_NS: &str = "onset_ns";
    pub const P_CLEAR_NS: &str = "clear_ns";
    pub const INT_REPORT_ENCAP: &str = "Egress.int_report_encap";
    pub const NO_ACTION: &str = "NoAction";

    // Fixed tables, their keys and data fields.
    pub const PORT: &str = "$PORT";
    pub const PORT_STAT: &str = "$PORT_STAT";
    pub const SCHED_SHAPING: &str = "tf1.tm.port.sched_shaping";
    pub const QUEUE_COUNTER: &str = "tf1.tm.counter.queue";
    pub const KEY_DEV_PORT: &str = "$DEV_PORT";
    pub const KEY_SHAPING_DEV_PORT: &str = "dev_port";
    pub const KEY_PG_ID: &str = "pg_id";
    pub const KEY_PG_QUEUE: &str = "pg_queue";
    pub const SPEED: &str = "$SPEED";
    pub const PORT_ENABLE: &str = "$PORT_ENABLE";
    pub const PORT_NAME: &str = "$PORT_NAME";
    pub const PORT_UP: &str = "$PORT_UP";
    pub const FRAMES_RX_OK: &str = "$FramesReceivedOK";
    pub const FRAMES_TX_OK: &str = "$FramesTransmittedOK";
    pub const OCTETS_RX: &str = "$OctetsReceived";
    pub const OCTETS_TX: &str = "$OctetsTransmittedTotal";
    pub const FRAMES_DROPPED_BUFFER_FULL: &str = "$FramesDroppedBufferFull";
    pub const UNIT: &str = "unit";
    pub const PROVISIONING: &str = "provisioning";
    pub const MAX_RATE: &str = "max_rate";
    pub const MAX_BURST_SIZE: &str = "max_burst_size";
    pub const USAGE_CELLS: &str = "usage_cells";
    pub const WATERMARK_CELLS: &str = "watermark_cells";
    pub const DROP_COUNT_PACKETS: &str = "drop_count_packets";
    pub const DEVICE_CONFIGURATION: &str = "tf1.dev.device_configuration";
    pub const SKU: &str = "sku";
    pub const NUM_PIPES: &str = "num_pipes";
    pub const NUM_STAGES: &str = "num_stages";
    pub const NUM_MAX_PORTS: &str = "num_max_ports";
    pub const NUM_FRONT_PORTS: &str = "num_front_ports";
    pub const ETH_CPU_PORT_LIST: &str = "eth_cpu_port_list";
    pub const INTERNAL_PORT_LIST: &str = "internal_port_list";
    pub const EXTERNAL_PORT_LIST: &str = "external_port_list";
    pub const RECIRC_PORT_LIST: &str = "recirc_port_list";
    pub const INTR_BASED_LINK_MONITORING: &str = "intr_based_link_monitoring";

    // Built-in fields bf-p4c adds to tables (not in the contract).
    pub const MATCH_PRIORITY: &str = "$MATCH_PRIORITY";
    pub const COUNTER_SPEC_BYTES: &str = "$COUNTER_SPEC_BYTES";
    pub const COUNTER_SPEC_PKTS: &str = "$COUNTER_SPEC_PKTS";
    pub const ENTRY_TTL: &str = "$ENTRY_TTL";
    pub const ENTRY_HIT_STATE: &str = "$ENTRY_HIT_STATE";
    pub const REGISTER_INDEX: &str = "$REGISTER_INDEX";
    pub const COUNTER_INDEX: &str = "$COUNTER_INDEX";
}

impl Contract {
    pub fn action(&self, name: &str) -> Option<&ActionDef> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// Width of the leg index (the `leg` parameter of `Ingress.relay_leg`).
    pub fn leg_bits(&self) -> u32 {
        self.action(names::RELAY_LEG)
            .and_then(|a| a.params.iter().find(|p| p.name == names::P_LEG))
            .map_or(20, |p| p.bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_parses_and_is_consistent() {
        let c = &*CONTRACT;
        assert_eq!(c.program.name, "p4relay");
        for t in &c.tables {
            for a in &t.actions {
                assert!(c.action(a).is_some(), "{}: unknown action {a}", t.name);
            }
            // a table without actions (port metadata) has data fields instead
            assert!(
                t.actions.contains(&t.default_action)
                    || (t.actions.is_empty() && t.default_action.is_empty() && !t.data.is_empty()),
                "{}",
                t.name
            );
        }
        assert!(u64::from(c.config.legs_softswitch) <= 1 << c.leg_bits());
        assert!(c.config.relay_port_min <= c.config.relay_port_max);
        assert!(c.config.learn_filter_size.is_power_of_two());
    }

    #[test]
    fn names_exist_in_the_contract() {
        use names::*;
        let c = &*CONTRACT;
        let table = |n: &str| {
            c.tables
                .iter()
                .find(|t| t.name == n)
                .unwrap_or_else(|| panic!("{n}"))
        };
        for n in TABLES {
            table(n);
        }
        let guard_drops = c
            .counters
            .iter()
            .find(|t| t.name == GUARD_DROPS)
            .expect("guard_drops");
        assert_eq!(guard_drops.unit, "PACKETS");
        assert!(table(LEG_REWRITE).direct_counter);
        assert!(!table(RELAY).direct_counter && !table(RELAY_GUARD).direct_counter);
        let keys = |t: &str| {
            table(t)
                .keys
                .iter()
                .map(|k| k.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(RELAY),
            [
                KEY_IPV4_SRC,
                KEY_IPV4_DST,
                KEY_UDP_SRC,
                KEY_UDP_DST,
                KEY_BOUND_PORT
            ]
        );
        assert_eq!(keys(RELAY_GUARD), [KEY_IPV4_DST, KEY_UDP_DST]);
        assert_eq!(
            keys(RELAY_ADDR),
            [KEY_IPV4_DST, KEY_UDP_DST, MATCH_PRIORITY]
        );
        assert_eq!(keys(IPV4_LPM), [KEY_IPV4_DST]);
        assert_eq!(keys(NEXTHOP), [KEY_NEXTHOP_ID]);
        assert_eq!(keys(LEG_REWRITE), [KEY_LEG]);
        assert_eq!(keys(LEG_REWRITE6), [KEY_LEG6]);
        assert_eq!(keys(IPV6_LPM), [KEY_IPV6_DST]);
        assert_eq!(
            keys(RELAY6_ADDR),
            [KEY_IPV6_DST, KEY_UDP_DST, MATCH_PRIORITY]
        );
        assert_eq!(
            keys(RELAY6),
            [
                KEY_IPV6_SRC,
                KEY_RELAY_ID,
                KEY_UDP_SRC,
                KEY_UDP_DST,
                KEY_BOUND_PORT
            ]
        );
        assert_eq!(keys(RELAY_GUARD6), [KEY_RELAY_ID, KEY_UDP_DST]);
        assert_eq!(keys(REROUTE_WATCH), [KEY_IPV4_DST]);
        assert_eq!(keys(REROUTE_WATCH6), [KEY_IPV6_DST]);
        assert_eq!(keys(INT_WATCH6), [KEY_IPV6_DST]);
        assert_eq!(keys(REROUTE_CLASS), [KEY_RR_CLASS]);
        assert_eq!(keys(IRED_PORT), [KEY_EGRESS_PORT]);
        assert_eq!(
            keys(IRED_SPARE),
            [KEY_DSCP, KEY_L4_SRC, KEY_L4_DST, MATCH_PRIORITY]
        );
        assert_eq!(
            keys(INT_WATCH),
            [
                KEY_BRIDGED_RELAY,
                KEY_BRIDGED_LEG,
                KEY_IPV4_SRC,
                KEY_IPV4_DST,
                KEY_UDP_DST,
                MATCH_PRIORITY
            ]
        );
        assert_eq!(keys(INT_ROLE), [KEY_NEXTHOP_ID]);
        assert_eq!(keys(INT_HOP_CONFIG), [KEY_EGRESS_PORT]);
        assert_eq!(keys(INT_REPORT), [KEY_EGRESS_PORT]);
        let params = |a: &str| {
            c.action(a)
                .unwrap_or_else(|| panic!("{a}"))
                .params
                .iter()
                .map(|p| p.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(params(SET_NEXTHOP), [P_NEXTHOP_ID]);
        assert_eq!(params(FORWARD), [P_PORT, P_SRC_MAC, P_DST_MAC]);
        assert_eq!(params(RELAY_LEG), [P_LEG, P_RTCP]);
        assert_eq!(
            params(REWRITE),
            [P_SRC_ADDR, P_DST_ADDR, P_SRC_PORT, P_DST_PORT]
        );
        assert_eq!(
            params(REROUTE_BACKUP),
            [P_SLOT, P_FLOW_CLASS, P_BACKUP_NEXTHOP_ID, P_PRIMARY_PORT]
        );
        assert_eq!(
            params(REROUTE_NOTIFY),
            [P_SLOT, P_FLOW_CLASS, P_PRIMARY_PORT]
        );
        assert_eq!(params(REROUTE_THRESHOLDS), [P_T_Q_NS, P_M]);
        assert_eq!(
            params(INT_HOP),
            [
                P_SWITCH_ID,
                P_ONSET_CELLS,
                P_CLEAR_CELLS,
                P_ONSET_NS,
                P_CLEAR_NS
            ]
        );
        assert_eq!(
            params(INT_REPORT_ENCAP),
            [
                P_SRC_MAC,
                P_DST_MAC,
                P_SRC_ADDR,
                P_DST_ADDR,
                P_DST_PORT,
                P_SWITCH_ID
            ]
        );
        for d in [LEARN_DIGEST, REROUTE_DIGEST] {
            assert!(c.digests.iter().any(|x| x.name == d), "{d}");
        }
        assert_eq!(
            params(IRED_SET),
            [P_MAX_LEN_QUEUE, P_N_DROP, P_EWMA_N, P_TAIL_DROP, P_PROTECT]
        );
        assert_eq!(params(GUARD_DROP), [P_LEG]);
        for a in [
            DROP,
            MARK_RELAY,
            INT_WATCH_FLOW,
            INT_TRANSIT,
            INT_SINK,
            NO_ACTION,
        ] {
            assert!(params(a).is_empty());
        }
        let fixed = |n: &str| {
            let f = c
                .fixed_tables
                .iter()
                .find(|f| f.name == n)
                .unwrap_or_else(|| panic!("{n}"));
            let k: Vec<_> = f.keys.iter().map(|k| k.name.clone()).collect();
            let d: Vec<_> = f.data.iter().map(|d| d.name.clone()).collect();
            (k, d)
        };
        assert_eq!(
            fixed(PORT),
            (
                vec![KEY_DEV_PORT.into()],
                vec![
                    SPEED.into(),
                    PORT_ENABLE.into(),
                    PORT_NAME.into(),
                    PORT_UP.into()
                ]
            )
        );
        assert_eq!(
            fixed(PORT_STAT).1,
            [
                FRAMES_RX_OK,
                FRAMES_TX_OK,
                OCTETS_RX,
                OCTETS_TX,
                FRAMES_DROPPED_BUFFER_FULL
            ]
        );
        assert_eq!(
            fixed(SCHED_SHAPING),
            (
                vec![KEY_SHAPING_DEV_PORT.into()],
                vec![
                    UNIT.into(),
                    PROVISIONING.into(),
                    MAX_RATE.into(),
                    MAX_BURST_SIZE.into()
                ]
            )
        );
        assert_eq!(
            fixed(QUEUE_COUNTER),
            (
                vec![KEY_PG_ID.into(), KEY_PG_QUEUE.into()],
                vec![
                    USAGE_CELLS.into(),
                    WATERMARK_CELLS.into(),
                    DROP_COUNT_PACKETS.into()
                ]
            )
        );
    }
}
