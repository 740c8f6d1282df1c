//! The fixed (non-P4) tables as bf-drivers defines them for Tofino 1
//! (P4 Studio's `bf_rt_port_tf1.json`, `bf_rt_tm_tf1.json` and
//! `bf_rt_dev_tf1.json`, which bf_switchd serves as its non-P4 bf-rt.json):
//! table ids, types and sizes, key and data field ids, types, choices,
//! defaults and annotations. The software switch serves, of each table, the
//! fields the contract names (the ones it implements), so a client resolves
//! the same ids on either target.

use serde_json::{json, Value};

/// A field's `default_value`, if bf-drivers gives one.
#[derive(Debug, Clone, Copy)]
pub enum Default {
    None,
    Bool(bool),
    Int(u64),
    Str(&'static str),
}

#[derive(Debug)]
pub struct Field {
    pub id: u32,
    pub name: &'static str,
    /// bf-rt type: uint8/uint32/uint64, bool, string.
    pub ty: &'static str,
    pub read_only: bool,
    pub repeated: bool,
    pub default: Default,
    pub choices: &'static [&'static str],
    /// (name, value) pairs.
    pub annotations: &'static [(&'static str, &'static str)],
}

#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub id: u32,
    pub table_type: &'static str,
    pub size: u32,
    pub attributes: &'static [&'static str],
    pub keys: &'static [Field],
    pub data: &'static [Field],
}

impl Field {
    /// The width a value of this type has on the wire (bits), 0 for non-integers.
    pub fn bits(&self) -> u32 {
        match self.ty {
            "uint8" => 8,
            "uint16" => 16,
            "uint32" => 32,
            "uint64" => 64,
            "bool" => 1,
            _ => 0,
        }
    }

    fn type_json(&self) -> Value {
        let mut ty = json!({"type": self.ty});
        if !self.choices.is_empty() {
            ty["choices"] = json!(self.choices);
        }
        match self.default {
            Default::None => {}
            Default::Bool(b) => ty["default_value"] = json!(b),
            Default::Int(i) => ty["default_value"] = json!(i),
            Default::Str(s) => ty["default_value"] = json!(s),
        }
        ty
    }

    fn annotations_json(&self) -> Value {
        Value::Array(
            self.annotations
                .iter()
                .map(|(n, v)| json!({"name": n, "value": v}))
                .collect(),
        )
    }

    pub fn key_json(&self) -> Value {
        json!({"id": self.id, "name": self.name, "repeated": false,
               "annotations": self.annotations_json(), "mandatory": true,
               "match_type": "Exact", "type": self.type_json()})
    }

    pub fn data_json(&self) -> Value {
        json!({"mandatory": false, "read_only": self.read_only,
               "singleton": {"id": self.id, "name": self.name, "repeated": self.repeated,
                             "annotations": self.annotations_json(), "type": self.type_json()}})
    }
}

impl Table {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.data.iter().find(|f| f.name == name)
    }

    pub fn key(&self, name: &str) -> Option<&Field> {
        self.keys.iter().find(|f| f.name == name)
    }
}

pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

const fn field(id: u32, name: &'static str, ty: &'static str) -> Field {
    Field {
        id,
        name,
        ty,
        read_only: false,
        repeated: false,
        default: Default::None,
        choices: &[],
        annotations: &[],
    }
}

const DEV_PORT_CLASS: &[(&str, &str)] = &[("$bfrt_port_type_class", "dev_port")];
const IMP_LEVEL_2: &[(&str, &str)] = &[("$bfrt_field_imp_level", "2")];
const CLEAR_ONLY: &[(&str, &str)] = &[("clear_only", "true")];

const fn stat(id: u32, name: &'static str) -> Field {
    Field {
        default: Default::Int(0),
        ..field(id, name, "uint64")
    }
}

const fn dev_port_key(name: &'static str) -> Field {
    Field {
        annotations: DEV_PORT_CLASS,
        ..field(1, name, "uint32")
    }
}

const fn dev_info(id: u32, name: &'static str, ty: &'static str) -> Field {
    Field {
        read_only: true,
        ..field(id, name, ty)
    }
}

const fn dev_list(id: u32, name: &'static str) -> Field {
    Field {
        repeated: true,
        ..dev_info(id, name, "uint32")
    }
}

pub static TABLES: &[Table] = &[
    Table {
        name: "$PORT",
        id: 4278255617,
        table_type: "PortConfigure",
        size: 256,
        attributes: &["port_status_notif_cb"],
        keys: &[dev_port_key("$DEV_PORT")],
        data: &[
            Field {
                annotations: IMP_LEVEL_2,
                choices: &[
                    "BF_SPEED_NONE",
                    "BF_SPEED_1G",
                    "BF_SPEED_10G",
                    "BF_SPEED_25G",
                    "BF_SPEED_40G",
                    "BF_SPEED_40G_NB",
                    "BF_SPEED_40G_NON_BREAKABLE",
                    "BF_SPEED_50G",
                    "BF_SPEED_100G",
                    "BF_SPEED_200G",
                    "BF_SPEED_400G",
                ],
                ..field(1, "$SPEED", "string")
            },
            Field {
                annotations: IMP_LEVEL_2,
                default: Default::Bool(false),
                ..field(4, "$PORT_ENABLE", "bool")
            },
            Field {
                annotations: IMP_LEVEL_2,
                read_only: true,
                ..field(25, "$PORT_UP", "bool")
            },
            Field {
                annotations: &[
                    ("$bfrt_port_type_class", "port_name"),
                    ("$bfrt_field_imp_level", "2"),
                ],
                read_only: true,
                ..field(26, "$PORT_NAME", "string")
            },
        ],
    },
    Table {
        name: "$PORT_STAT",
        id: 4278255618,
        table_type: "PortStat",
        size: 256,
        attributes: &[],
        keys: &[dev_port_key("$DEV_PORT")],
        data: &[
            Field {
                annotations: IMP_LEVEL_2,
                ..stat(1, "$FramesReceivedOK")
            },
            stat(6, "$OctetsReceived"),
            stat(20, "$FramesDroppedBufferFull"),
            stat(33, "$FramesTransmittedOK"),
            stat(37, "$OctetsTransmittedTotal"),
        ],
    },
    Table {
        name: "tf1.tm.port.sched_shaping",
        id: 4278517783,
        table_type: "TmPortSchedShaping",
        size: 288,
        attributes: &[],
        keys: &[dev_port_key("dev_port")],
        data: &[
            Field {
                choices: &["PPS", "BPS"],
                ..field(1, "unit", "string")
            },
            Field {
                choices: &["UPPER", "LOWER", "MIN_ERROR"],
                ..field(2, "provisioning", "string")
            },
            field(3, "max_rate", "uint32"),
            field(4, "max_burst_size", "uint32"),
        ],
    },
    Table {
        name: "tf1.tm.counter.queue",
        id: 4278517827,
        table_type: "TmCounterQueue",
        size: 576,
        attributes: &[],
        keys: &[field(1, "pg_id", "uint8"), field(2, "pg_queue", "uint8")],
        data: &[
            field(1, "drop_count_packets", "uint64"),
            Field {
                read_only: true,
                ..field(2, "usage_cells", "uint64")
            },
            Field {
                annotations: CLEAR_ONLY,
                ..field(3, "watermark_cells", "uint64")
            },
        ],
    },
    Table {
        name: "tf1.dev.device_configuration",
        id: 4278583297,
        table_type: "DevConfigure",
        size: 1,
        attributes: &[],
        keys: &[],
        data: &[
            Field {
                choices: &[
                    "UNKNOWN",
                    "BFN-T10-064Q",
                    "BFN-T10-032Q",
                    "BFN-T10-032D",
                    "BFN-T10-032D-020",
                    "BFN-T10-032D-018",
                    "BFN-T10-032D-012",
                ],
                default: Default::Str("UNKNOWN"),
                ..dev_info(1, "sku", "string")
            },
            dev_info(2, "num_pipes", "uint32"),
            dev_info(3, "num_stages", "uint32"),
            dev_info(4, "num_max_ports", "uint32"),
            dev_info(5, "num_front_ports", "uint32"),
            dev_list(7, "eth_cpu_port_list"),
            dev_list(8, "internal_port_list"),
            dev_list(9, "external_port_list"),
            dev_list(10, "recirc_port_list"),
            dev_info(11, "intr_based_link_monitoring", "bool"),
        ],
    },
];
