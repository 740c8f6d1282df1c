//! Code generation from `bpf/abi.toml` and `switch/contract.toml`: the XDP
//! program's C header, its Rust twin (`crate::xdp_abi`) and the contract's
//! `[config]` values for Python. The layout rules are C's natural alignment,
//! which `#[repr(C)]` follows too; both sides assert the size computed here.

use std::fmt::Write as _;

use toml::{Table, Value};

type Error = Box<dyn std::error::Error>;

/// A field type: a scalar or an array of one.
struct Ty {
    /// u8 / u16 / u32 / u64
    scalar: &'static str,
    bytes: usize,
    /// `Some(n)`: `[scalar; n]`
    len: Option<usize>,
}

impl Ty {
    fn parse(s: &str) -> Result<Ty, Error> {
        let scalar = |s: &str| -> Result<(&'static str, usize), Error> {
            Ok(match s.trim() {
                "u8" => ("u8", 1),
                "u16" => ("u16", 2),
                "u32" => ("u32", 4),
                "u64" => ("u64", 8),
                other => return Err(format!("bpf/abi.toml: unknown type {other:?}").into()),
            })
        };
        if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let (t, n) = inner
                .split_once(';')
                .ok_or_else(|| format!("bpf/abi.toml: array type {s:?} is not [T; N]"))?;
            let (scalar, bytes) = scalar(t)?;
            let n: usize = n.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
            return Ok(Ty {
                scalar,
                bytes,
                len: Some(n),
            });
        }
        let (scalar, bytes) = scalar(s)?;
        Ok(Ty {
            scalar,
            bytes,
            len: None,
        })
    }

    fn align(&self) -> usize {
        self.bytes
    }

    fn size(&self) -> usize {
        self.bytes * self.len.unwrap_or(1)
    }

    fn c(&self) -> String {
        format!("__{}", self.scalar)
    }

    fn rust(&self, atomic: bool) -> String {
        match self.len {
            Some(n) => format!("[{}; {n}]", self.scalar),
            None if atomic => format!("std::sync::atomic::Atomic{}", self.scalar.to_uppercase()),
            None => self.scalar.to_string(),
        }
    }
}

struct Field {
    name: String,
    ty: Ty,
    doc: Option<String>,
}

struct Struct {
    c: String,
    rust: String,
    doc: String,
    derive: Vec<String>,
    atomic: bool,
    fields: Vec<Field>,
}

impl Struct {
    /// C's size: each field at its natural alignment, the whole rounded up
    /// to the largest.
    fn size(&self) -> usize {
        let mut off: usize = 0;
        let mut align: usize = 1;
        for f in &self.fields {
            let a = f.ty.align();
            off = off.div_ceil(a) * a + f.ty.size();
            align = align.max(a);
        }
        off.div_ceil(align) * align
    }
}

struct Constant {
    name: String,
    ty: Ty,
    value: i64,
    doc: String,
}

pub struct Abi {
    constants: Vec<Constant>,
    structs: Vec<Struct>,
}

fn str_of<'a>(t: &'a Table, key: &str, what: &str) -> Result<&'a str, Error> {
    t.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("bpf/abi.toml: {what} needs a string `{key}`").into())
}

impl Abi {
    pub fn parse(abi: &Table, contract: &Table) -> Result<Abi, Error> {
        let config = contract
            .get("config")
            .and_then(Value::as_table)
            .ok_or("switch/contract.toml has no [config]")?;
        let mut constants = Vec::new();
        for (name, c) in abi
            .get("constants")
            .and_then(Value::as_table)
            .into_iter()
            .flatten()
        {
            let c = c
                .as_table()
                .ok_or_else(|| format!("constants.{name}: a table"))?;
            let value = match (c.get("contract"), c.get("value")) {
                (Some(Value::String(k)), None) => {
                    config.get(k).and_then(Value::as_integer).ok_or_else(|| {
                        format!("constants.{name}: contract [config] has no integer {k}")
                    })?
                }
                (None, Some(Value::Integer(v))) => *v,
                _ => {
                    return Err(
                        format!("constants.{name}: exactly one of `contract` or `value`").into(),
                    )
                }
            };
            let ty = Ty::parse(str_of(c, "type", name)?)?;
            if ty.len.is_some() || value < 0 || (ty.bytes < 8 && value >= 1 << (8 * ty.bytes)) {
                return Err(format!("constants.{name}: {value} does not fit its type").into());
            }
            let doc = str_of(c, "doc", name)?.to_string();
            constants.push(Constant {
                name: name.clone(),
                ty,
                value,
                doc,
            });
        }
        let mut structs = Vec::new();
        for s in abi
            .get("struct")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let s = s.as_table().ok_or("[[struct]]: a table")?;
            let c = str_of(s, "c", "[[struct]]")?.to_string();
            let mut fields = Vec::new();
            for f in s
                .get("fields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = f
                    .as_table()
                    .ok_or_else(|| format!("struct {c}: fields are tables"))?;
                fields.push(Field {
                    name: str_of(f, "name", &c)?.to_string(),
                    ty: Ty::parse(str_of(f, "type", &c)?)?,
                    doc: f.get("doc").and_then(Value::as_str).map(str::to_string),
                });
            }
            if fields.is_empty() {
                return Err(format!("struct {c}: no fields").into());
            }
            let derive = s
                .get("derive")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|d| d.as_str().map(str::to_string).ok_or("derive: strings"))
                .collect::<Result<Vec<_>, _>>()?;
            structs.push(Struct {
                rust: str_of(s, "rust", &c)?.to_string(),
                doc: str_of(s, "doc", &c)?.to_string(),
                atomic: s.get("atomic").and_then(Value::as_bool).unwrap_or(false),
                derive,
                fields,
                c,
            });
        }
        Ok(Abi { constants, structs })
    }

    pub fn c_header(&self) -> String {
        let mut h = String::from(
            "// Generated by switch/softswitch/build.rs from bpf/abi.toml and\n\
             // switch/contract.toml: the constants and map layouts the XDP program\n\
             // shares with the softswitch (src/xdp_abi.rs). Do not edit.\n\
             #ifndef P4RELAY_XDP_ABI_H\n#define P4RELAY_XDP_ABI_H\n\n#include <linux/types.h>\n",
        );
        for c in &self.constants {
            let _ = write!(h, "\n// {}\n#define {} {}\n", c.doc, c.name, c.value);
        }
        for s in &self.structs {
            let _ = write!(h, "\n// {}\nstruct {} {{\n", s.doc, s.c);
            for f in &s.fields {
                let arr = f.ty.len.map(|n| format!("[{n}]")).unwrap_or_default();
                let doc = f
                    .doc
                    .as_deref()
                    .map(|d| format!(" // {d}"))
                    .unwrap_or_default();
                let _ = writeln!(h, "    {} {}{arr};{doc}", f.ty.c(), f.name);
            }
            let _ = writeln!(
                h,
                "}};\n_Static_assert(sizeof(struct {0}) == {1}, \"struct {0}: {1} bytes (bpf/abi.toml)\");",
                s.c,
                s.size()
            );
        }
        h.push_str("\n#endif\n");
        h
    }

    pub fn rust(&self) -> String {
        let mut r =
            String::from("// Generated by build.rs from bpf/abi.toml and switch/contract.toml.\n");
        for c in &self.constants {
            let _ = write!(
                r,
                "\n/// {}\npub const {}: {} = {};\n",
                c.doc,
                c.name,
                c.ty.rust(false),
                c.value
            );
        }
        for s in &self.structs {
            let mut derive = vec!["Debug".to_string(), "Default".to_string()];
            derive.extend(s.derive.iter().cloned());
            let _ = write!(
                r,
                "\n/// {}\n///\n/// C: `struct {}`.\n#[repr(C)]\n#[derive({})]\npub struct {} {{\n",
                s.doc,
                s.c,
                derive.join(", "),
                s.rust
            );
            for f in &s.fields {
                if let Some(d) = &f.doc {
                    let _ = writeln!(r, "    /// {d}");
                }
                let padding = f.name.starts_with('_');
                let vis = if padding { "" } else { "pub " };
                let _ = writeln!(
                    r,
                    "    {vis}{}: {},",
                    f.name,
                    f.ty.rust(s.atomic && !padding)
                );
            }
            let _ = writeln!(
                r,
                "}}\nconst _: () = assert!(std::mem::size_of::<{}>() == {});",
                s.rust,
                s.size()
            );
        }
        r
    }

    /// The contract's `[config]` as Python constants (every value is an
    /// integer).
    pub fn python(contract: &Table) -> Result<String, Error> {
        let config = contract
            .get("config")
            .and_then(Value::as_table)
            .ok_or("switch/contract.toml has no [config]")?;
        let mut p = String::from(
            "\"\"\"switch/contract.toml [config]: the values the control plane and the\n\
             data plane share.\n\n\
             Generated by switch/softswitch/build.rs from switch/contract.toml; do not\n\
             edit. The softswitch's tests (tests/architecture.rs) fail while it differs\n\
             from the contract; `P4RELAY_WRITE_GENERATED=1 cargo test --test\n\
             architecture` (in switch/) rewrites it.\n\"\"\"\n\n\
             from __future__ import annotations\n\nfrom typing import Final\n\n",
        );
        for (k, v) in config {
            let v = v
                .as_integer()
                .ok_or_else(|| format!("contract [config] {k}: not an integer"))?;
            let _ = writeln!(p, "{}: Final = {v}", k.to_uppercase());
        }
        Ok(p)
    }
}
