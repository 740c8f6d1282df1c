//! Key and data fields of BfRt messages ↔ integers, checked against the schema:
//! integers are big-endian byte strings of exactly `(bits + 7) / 8` bytes that
//! must fit the field's width (what bf_switchd enforces).

use std::collections::HashMap;

use tonic::Status;

use super::pb::{self, data_field, key_field};
use crate::schema::{FieldSchema, KeySchema, MatchType, TableSchema};

pub fn invalid(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg)
}

pub fn width_bytes(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

/// Decodes a big-endian integer of a `bits`-wide field.
pub fn decode_int(b: &[u8], bits: u32, what: &str) -> Result<u64, Status> {
    // At most 8 bytes: the value fits a u64.
    decode_be(b, bits, 8, what).map(|v| v as u64)
}

pub fn encode_int(v: u64, bits: u32) -> Vec<u8> {
    let n = width_bytes(bits);
    v.to_be_bytes()[8 - n..].to_vec()
}

/// `decode_int` for fields up to 128 bits wide (IPv6 addresses).
pub fn decode_u128(b: &[u8], bits: u32, what: &str) -> Result<u128, Status> {
    decode_be(b, bits, 16, what)
}

/// A big-endian field of `bits` in its exact byte width, at most `max_bytes`.
fn decode_be(b: &[u8], bits: u32, max_bytes: usize, what: &str) -> Result<u128, Status> {
    if b.len() != width_bytes(bits) || b.len() > max_bytes {
        return Err(invalid(format!(
            "{what}: expected {} bytes, got {}",
            width_bytes(bits),
            b.len()
        )));
    }
    let v = b.iter().fold(0u128, |acc, &x| (acc << 8) | u128::from(x));
    if bits < 128 && v >> bits != 0 {
        return Err(invalid(format!(
            "{what}: value {v} does not fit {bits} bits"
        )));
    }
    Ok(v)
}

pub fn encode_u128(v: u128, bits: u32) -> Vec<u8> {
    let n = width_bytes(bits);
    v.to_be_bytes()[16 - n..].to_vec()
}

/// `decode_int` or `decode_u128`: a field's bytes, its width in bits, its name.
type Decode<T> = fn(&[u8], u32, &str) -> Result<T, Status>;

/// Key field width: `bytes` fields have their own; uint32-typed ones are 32.
fn key_bits(k: &KeySchema) -> u32 {
    if k.bits == 0 {
        32
    } else {
        k.bits
    }
}

/// The key of one TableEntry, by field name.
pub struct Keys<'a> {
    table: &'a TableSchema,
    fields: HashMap<u32, &'a pb::KeyField>,
}

impl<'a> Keys<'a> {
    pub fn new(table: &'a TableSchema, key: &'a pb::TableKey) -> Result<Keys<'a>, Status> {
        let mut fields = HashMap::new();
        for f in &key.fields {
            if table.key(f.field_id).is_none() {
                return Err(invalid(format!(
                    "{}: unknown key field id {}",
                    table.name, f.field_id
                )));
            }
            if fields.insert(f.field_id, f).is_some() {
                return Err(invalid(format!(
                    "{}: key field id {} given twice",
                    table.name, f.field_id
                )));
            }
        }
        Ok(Keys { table, fields })
    }

    fn field(&self, name: &str) -> Result<(&KeySchema, &pb::KeyField), Status> {
        let ks = self.table.key_by_name(name).ok_or_else(|| {
            Status::internal(format!("{}: schema lacks key {name}", self.table.name))
        })?;
        let kf = self
            .fields
            .get(&ks.id)
            .ok_or_else(|| invalid(format!("{}: key field {name} missing", self.table.name)))?;
        Ok((ks, kf))
    }

    /// An optional Exact key field (`$MATCH_PRIORITY`): absent is None.
    pub fn exact_opt(&self, name: &str) -> Result<Option<u64>, Status> {
        match self.table.key_by_name(name) {
            Some(ks) if self.fields.contains_key(&ks.id) => self.exact(name).map(Some),
            _ => Ok(None),
        }
    }

    pub fn exact(&self, name: &str) -> Result<u64, Status> {
        self.exact_as(name, decode_int)
    }

    /// An Exact key field up to 128 bits wide.
    pub fn exact128(&self, name: &str) -> Result<u128, Status> {
        self.exact_as(name, decode_u128)
    }

    fn exact_as<T>(&self, name: &str, decode: Decode<T>) -> Result<T, Status> {
        let (ks, kf) = self.field(name)?;
        match &kf.match_type {
            Some(key_field::MatchType::Exact(e)) => decode(&e.value, key_bits(ks), name),
            _ => Err(invalid(format!(
                "{}: key {name} must be an Exact match",
                self.table.name
            ))),
        }
    }

    /// An LPM key field up to 128 bits wide: (prefix, length).
    pub fn lpm128(&self, name: &str) -> Result<(u128, u8), Status> {
        self.lpm_as(name, decode_u128)
    }

    pub fn lpm(&self, name: &str) -> Result<(u64, u8), Status> {
        self.lpm_as(name, decode_int)
    }

    fn lpm_as<T>(&self, name: &str, decode: Decode<T>) -> Result<(T, u8), Status> {
        let (ks, kf) = self.field(name)?;
        match &kf.match_type {
            Some(key_field::MatchType::Lpm(l)) => {
                let v = decode(&l.value, ks.bits, name)?;
                if l.prefix_len < 0 || l.prefix_len as u32 > ks.bits {
                    return Err(invalid(format!(
                        "{name}: prefix length {} outside 0..={}",
                        l.prefix_len, ks.bits
                    )));
                }
                Ok((v, l.prefix_len as u8))
            }
            _ => Err(invalid(format!(
                "{}: key {name} must be an LPM match",
                self.table.name
            ))),
        }
    }

    pub fn range(&self, name: &str) -> Result<(u64, u64), Status> {
        let (ks, kf) = self.field(name)?;
        match &kf.match_type {
            Some(key_field::MatchType::Range(r)) => {
                let lo = decode_int(&r.low, ks.bits, name)?;
                let hi = decode_int(&r.high, ks.bits, name)?;
                if lo > hi {
                    return Err(invalid(format!("{name}: range low {lo} > high {hi}")));
                }
                Ok((lo, hi))
            }
            // An exact value is the one-value range.
            Some(key_field::MatchType::Exact(e)) => {
                let v = decode_int(&e.value, ks.bits, name)?;
                Ok((v, v))
            }
            _ => Err(invalid(format!(
                "{}: key {name} must be a Range match",
                self.table.name
            ))),
        }
    }
}

impl Keys<'_> {
    /// A Ternary key field: (value, mask). An Exact value is the all-ones
    /// mask; an absent field matches anything (mask 0), as bf_switchd takes
    /// an entry without it.
    pub fn ternary(&self, name: &str) -> Result<(u64, u64), Status> {
        let ks = self.table.key_by_name(name).ok_or_else(|| {
            Status::internal(format!("{}: schema lacks key {name}", self.table.name))
        })?;
        let full = if ks.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << ks.bits) - 1
        };
        match self
            .fields
            .get(&ks.id)
            .and_then(|kf| kf.match_type.as_ref())
        {
            None => Ok((0, 0)),
            Some(key_field::MatchType::Ternary(t)) => {
                let v = decode_int(&t.value, ks.bits, name)?;
                let m = decode_int(&t.mask, ks.bits, name)?;
                // bf_switchd keeps value & mask: bits outside the mask are don't-care.
                Ok((v & m, m))
            }
            Some(key_field::MatchType::Exact(e)) => {
                Ok((decode_int(&e.value, ks.bits, name)?, full))
            }
            _ => Err(invalid(format!(
                "{}: key {name} must be a Ternary match",
                self.table.name
            ))),
        }
    }
}

pub fn key_ternary(k: &KeySchema, v: u64, mask: u64) -> pb::KeyField {
    pb::KeyField {
        field_id: k.id,
        match_type: Some(key_field::MatchType::Ternary(key_field::Ternary {
            value: encode_int(v, k.bits),
            mask: encode_int(mask, k.bits),
        })),
    }
}

pub fn key_exact(k: &KeySchema, v: u64) -> pb::KeyField {
    pb::KeyField {
        field_id: k.id,
        match_type: Some(key_field::MatchType::Exact(key_field::Exact {
            value: encode_int(v, key_bits(k)),
        })),
    }
}

pub fn key_exact128(k: &KeySchema, v: u128) -> pb::KeyField {
    pb::KeyField {
        field_id: k.id,
        match_type: Some(key_field::MatchType::Exact(key_field::Exact {
            value: encode_u128(v, key_bits(k)),
        })),
    }
}

pub fn key_lpm128(k: &KeySchema, v: u128, len: u8) -> pb::KeyField {
    pb::KeyField {
        field_id: k.id,
        match_type: Some(key_field::MatchType::Lpm(key_field::Lpm {
            value: encode_u128(v, k.bits),
            prefix_len: i32::from(len),
        })),
    }
}

pub fn key_lpm(k: &KeySchema, v: u64, len: u8) -> pb::KeyField {
    pb::KeyField {
        field_id: k.id,
        match_type: Some(key_field::MatchType::Lpm(key_field::Lpm {
            value: encode_int(v, k.bits),
            prefix_len: i32::from(len),
        })),
    }
}

pub fn key_range(k: &KeySchema, lo: u64, hi: u64) -> pb::KeyField {
    pb::KeyField {
        field_id: k.id,
        match_type: Some(key_field::MatchType::Range(key_field::Range {
            low: encode_int(lo, k.bits),
            high: encode_int(hi, k.bits),
        })),
    }
}

/// Builds a key from (name, value) pairs, choosing the encoding by match type.
pub fn key_of(t: &TableSchema, vals: &[(&str, u64)]) -> pb::TableKey {
    pb::TableKey {
        fields: vals
            .iter()
            .filter_map(|(n, v)| t.key_by_name(n).map(|k| (k, *v)))
            .map(|(k, v)| match k.match_type {
                MatchType::Exact => key_exact(k, v),
                MatchType::Lpm => key_lpm(k, v, 32),
                MatchType::Range => key_range(k, v, v),
                MatchType::Ternary => key_ternary(
                    k,
                    v,
                    if k.bits >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << k.bits) - 1
                    },
                ),
            })
            .collect(),
    }
}

/// The data of one TableEntry: action and fields by name.
pub struct Data<'a> {
    table: &'a TableSchema,
    pub action: Option<&'a crate::schema::ActionSchema>,
    fields: HashMap<u32, &'a pb::DataField>,
}

impl<'a> Data<'a> {
    pub fn new(
        table: &'a TableSchema,
        data: Option<&'a pb::TableData>,
    ) -> Result<Data<'a>, Status> {
        let mut d = Data {
            table,
            action: None,
            fields: HashMap::new(),
        };
        let Some(data) = data else { return Ok(d) };
        if data.action_id != 0 {
            d.action = Some(table.action(data.action_id).ok_or_else(|| {
                invalid(format!(
                    "{}: unknown action id {}",
                    table.name, data.action_id
                ))
            })?);
        }
        for f in &data.fields {
            let known = d
                .action
                .is_some_and(|a| a.params.iter().any(|p| p.id == f.field_id))
                || table.data.iter().any(|x| x.id == f.field_id);
            if !known {
                return Err(invalid(format!(
                    "{}: unknown data field id {}",
                    table.name, f.field_id
                )));
            }
            if d.fields.insert(f.field_id, f).is_some() {
                return Err(invalid(format!(
                    "{}: data field id {} given twice",
                    table.name, f.field_id
                )));
            }
        }
        Ok(d)
    }

    pub fn action_name(&self) -> Option<&str> {
        self.action.map(|a| a.name.as_str())
    }

    /// Whether any of the action's parameters is given. A MODIFY naming its
    /// action without parameters (only direct resources: `$COUNTER_SPEC_*`,
    /// `$ENTRY_TTL`) leaves the action as it is, as bf_switchd does.
    pub fn has_action_params(&self) -> bool {
        self.action
            .is_some_and(|a| a.params.iter().any(|p| self.fields.contains_key(&p.id)))
    }

    /// The action a MODIFY sets: None when it names none, or names it
    /// without any of its parameters (a resources-only modify).
    pub fn action_to_set(&self, modify: bool) -> Option<&crate::schema::ActionSchema> {
        match self.action {
            Some(a) if modify && !a.params.is_empty() && !self.has_action_params() => None,
            a => a,
        }
    }

    fn schema_of(&self, name: &str) -> Option<&FieldSchema> {
        self.action
            .and_then(|a| a.params.iter().find(|p| p.name == name))
            .or_else(|| self.table.data_by_name(name))
    }

    fn get(&self, name: &str) -> Option<(&FieldSchema, &pb::DataField)> {
        let s = self.schema_of(name)?;
        self.fields.get(&s.id).map(|f| (s, *f))
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// An integer field, if present.
    pub fn int_opt(&self, name: &str) -> Result<Option<u64>, Status> {
        let Some((s, f)) = self.get(name) else {
            return Ok(None);
        };
        let bits = if s.bits == 0 { 32 } else { s.bits };
        match &f.value {
            Some(data_field::Value::Stream(b)) => decode_int(b, bits, name).map(Some),
            _ => Err(invalid(format!(
                "{}: data field {name} must be an integer (stream)",
                self.table.name
            ))),
        }
    }

    /// A mandatory integer up to 128 bits wide (an IPv6 address parameter).
    pub fn int128(&self, name: &str) -> Result<u128, Status> {
        let Some((s, f)) = self.get(name) else {
            return Err(invalid(format!(
                "{}: {} needs parameter {name}",
                self.table.name,
                self.action_name().unwrap_or("entry")
            )));
        };
        match &f.value {
            Some(data_field::Value::Stream(b)) => decode_u128(b, s.bits, name),
            _ => Err(invalid(format!(
                "{}: data field {name} must be an integer (stream)",
                self.table.name
            ))),
        }
    }

    /// A mandatory integer (action parameter).
    pub fn int(&self, name: &str) -> Result<u64, Status> {
        self.int_opt(name)?.ok_or_else(|| {
            invalid(format!(
                "{}: {} needs parameter {name}",
                self.table.name,
                self.action_name().unwrap_or("entry")
            ))
        })
    }

    pub fn bool_opt(&self, name: &str) -> Result<Option<bool>, Status> {
        let Some((_, f)) = self.get(name) else {
            return Ok(None);
        };
        match &f.value {
            Some(data_field::Value::BoolVal(b)) => Ok(Some(*b)),
            Some(data_field::Value::Stream(b)) => Ok(Some(b.iter().any(|&x| x != 0))),
            _ => Err(invalid(format!(
                "{}: data field {name} must be bool",
                self.table.name
            ))),
        }
    }

    pub fn str_opt(&self, name: &str) -> Result<Option<&str>, Status> {
        let Some((_, f)) = self.get(name) else {
            return Ok(None);
        };
        match &f.value {
            Some(data_field::Value::StrVal(s)) => Ok(Some(s.as_str())),
            _ => Err(invalid(format!(
                "{}: data field {name} must be a string",
                self.table.name
            ))),
        }
    }
}

/// An action with its parameters, by name (names from the contract: an
/// unknown one is a programming error).
pub fn action_data(t: &TableSchema, action: &str, vals: &[(&str, u64)]) -> pb::TableData {
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

pub fn df_int(id: u32, v: u64, bits: u32) -> pb::DataField {
    pb::DataField {
        field_id: id,
        value: Some(data_field::Value::Stream(encode_int(v, bits))),
    }
}

pub fn df_int128(id: u32, v: u128, bits: u32) -> pb::DataField {
    pb::DataField {
        field_id: id,
        value: Some(data_field::Value::Stream(encode_u128(v, bits))),
    }
}

/// A repeated integer field (`int_arr_val`).
pub fn df_int_array(id: u32, v: &[u32]) -> pb::DataField {
    pb::DataField {
        field_id: id,
        value: Some(data_field::Value::IntArrVal(data_field::IntArray {
            val: v.to_vec(),
        })),
    }
}

pub fn df_bool(id: u32, v: bool) -> pb::DataField {
    pb::DataField {
        field_id: id,
        value: Some(data_field::Value::BoolVal(v)),
    }
}

pub fn df_str(id: u32, v: &str) -> pb::DataField {
    pb::DataField {
        field_id: id,
        value: Some(data_field::Value::StrVal(v.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_need_exact_width_and_must_fit() {
        assert_eq!(decode_int(&[0, 0, 1], 21, "leg").unwrap(), 1);
        assert!(decode_int(&[0, 1], 21, "leg").is_err());
        assert!(decode_int(&[0x20, 0, 0], 21, "leg").is_err());
        assert_eq!(decode_int(&[1], 1, "rtcp").unwrap(), 1);
        assert!(decode_int(&[2], 1, "rtcp").is_err());
        assert_eq!(encode_int(0x1_0002, 21), vec![1, 0, 2]);
        assert_eq!(
            decode_int(&encode_int(u64::MAX, 64), 64, "c").unwrap(),
            u64::MAX
        );
        assert!(decode_int(&[0; 16], 128, "addr").is_err(), "beyond u64");
    }

    #[test]
    fn wide_ints_take_128_bits_and_their_exact_width() {
        let a = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
        assert_eq!(encode_u128(a, 128).len(), 16);
        assert_eq!(decode_u128(&encode_u128(a, 128), 128, "a").unwrap(), a);
        assert!(decode_u128(&encode_u128(a, 128)[1..], 128, "a").is_err());
        assert!(decode_u128(&[0; 17], 136, "a").is_err());
        assert_eq!(decode_u128(&[1], 8, "relay_id").unwrap(), 1);
        assert!(decode_u128(&[0x02, 0], 9, "port").is_err(), "9 bits");
    }
}
