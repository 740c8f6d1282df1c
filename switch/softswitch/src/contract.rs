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
}

#[derive(Debug, Deserialize)]
pub struct TableDef {
    pub name: String,
    pub size_p4: u32,
    pub keys: Vec<KeyDef>,
    pub actions: Vec<String>,
    pub default_action: String,
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
    pub bits: u32,
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

impl Contract {
    pub fn action(&self, name: &str) -> Option<&ActionDef> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// Width of the leg index (the `leg` parameter of `Ingress.relay_leg`).
    pub fn leg_bits(&self) -> u32 {
        self.action("Ingress.relay_leg")
            .and_then(|a| a.params.iter().find(|p| p.name == "leg"))
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
            assert!(t.actions.contains(&t.default_action), "{}", t.name);
        }
        assert!(u64::from(c.config.legs_softswitch) <= 1 << c.leg_bits());
        assert!(c.config.relay_port_min <= c.config.relay_port_max);
        assert!(c.config.learn_filter_size.is_power_of_two());
    }
}
