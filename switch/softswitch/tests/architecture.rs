//! The software switch's layout, checked (lint runs this file too):
//!
//! - dependencies point one way: the modules of src/ form no cycle, neither
//!   between the crate's top-level modules nor between the sibling modules
//!   of any directory (a child using its parent's items is the language's
//!   own arrow and not counted). Test code (`tests.rs`, `*_tests.rs`, a
//!   file's trailing `#[cfg(test)] mod`) may reach across and is left out;
//! - each P4 control file (switch/p4/controls/<name>.p4) has its step in
//!   src/pipeline/<name>.rs;
//! - files generated from switch/contract.toml and committed for other
//!   languages are what build.rs makes of it today.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A module path under `crate` (empty: the crate root).
type ModPath = Vec<String>;

/// Every source file of src/ with its module path.
fn source_files() -> Vec<(PathBuf, ModPath)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read src/") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = crate_dir().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).expect("under src/").with_extension("");
            let mut m: ModPath = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(m.last().map(String::as_str), Some("mod")) {
                m.pop();
            }
            if m.len() == 1 && (m[0] == "lib" || m[0] == "main") {
                m.clear();
            }
            (f, m)
        })
        .collect()
}

fn is_test_file(m: &ModPath) -> bool {
    m.last()
        .is_some_and(|n| n == "tests" || n.ends_with("_tests"))
}

/// The code of a file without comments, string contents and a trailing
/// `#[cfg(test)] mod`.
fn code_of(text: &str) -> String {
    let mut keep = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        keep.push(line);
    }
    let mut out = String::new();
    for line in keep {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_str {
                if c == '"' && prev != '\\' {
                    in_str = false;
                    out.push('"');
                }
                prev = if prev == '\\' && c == '\\' { ' ' } else { c };
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' {
                in_str = true;
            }
            out.push(c);
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The paths a piece of code names from `crate::`, `super::` and `self::`,
/// made absolute, each with the line it is on. `use a::{b, c::{d}}` names
/// `a::b` and `a::c::d`.
fn references(code: &str, module: &ModPath) -> Vec<(ModPath, usize)> {
    let bytes: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < bytes.len() {
        if bytes[i] == '\n' {
            line += 1;
        }
        let starts_ident = i == 0
            || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_' || bytes[i - 1] == ':');
        if starts_ident {
            for root in ["crate::", "super::", "self::"] {
                let r: Vec<char> = root.chars().collect();
                if bytes[i..].starts_with(&r) {
                    let mut base: ModPath = match root {
                        "crate::" => Vec::new(),
                        _ => module.clone(),
                    };
                    let mut j = i;
                    // super::super::...
                    while bytes[j..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
                        base.pop();
                        j += 7;
                    }
                    if root == "self::" {
                        j += 6;
                    } else if root == "crate::" {
                        j += 7;
                    }
                    let mut paths = Vec::new();
                    parse_tree(&bytes, &mut j, base, &mut paths);
                    out.extend(paths.into_iter().map(|p| (p, line)));
                    break;
                }
            }
        }
        i += 1;
    }
    out
}

/// One path tree from `s[*j..]` (after its root): segments joined by `::`,
/// a `{…}` group of trees, or `*`.
fn parse_tree(s: &[char], j: &mut usize, mut prefix: ModPath, out: &mut Vec<ModPath>) {
    loop {
        while *j < s.len() && s[*j].is_whitespace() {
            *j += 1;
        }
        if *j < s.len() && s[*j] == '{' {
            *j += 1;
            loop {
                while *j < s.len() && (s[*j].is_whitespace() || s[*j] == ',') {
                    *j += 1;
                }
                if *j >= s.len() || s[*j] == '}' {
                    *j += 1;
                    return;
                }
                let before = *j;
                parse_tree(s, j, prefix.clone(), out);
                // `self` in a group names the prefix itself.
                if *j == before {
                    *j += 1;
                }
                while *j < s.len() && s[*j] != ',' && s[*j] != '}' {
                    *j += 1;
                }
            }
        }
        let start = *j;
        while *j < s.len() && (s[*j].is_alphanumeric() || s[*j] == '_') {
            *j += 1;
        }
        if *j > start {
            let seg: String = s[start..*j].iter().collect();
            if seg != "self" {
                prefix.push(seg);
            }
        }
        if s[*j..].starts_with(&[':', ':']) {
            *j += 2;
            continue;
        }
        out.push(prefix);
        return;
    }
}

/// An arrow between two modules, with where it is written.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The two kinds of graphs: the crate's top level, and the siblings of each
/// directory (keyed by the parent module).
fn module_graphs() -> BTreeMap<String, Graph> {
    let files = source_files();
    let modules: BTreeSet<ModPath> = files.iter().map(|(_, m)| m.clone()).collect();
    let mut graphs: BTreeMap<String, Graph> = BTreeMap::new();
    for (file, m) in &files {
        if m.is_empty() || is_test_file(m) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read source");
        let shown = file
            .strip_prefix(crate_dir())
            .unwrap_or(file)
            .display()
            .to_string();
        for (target, line) in references(&code_of(&text), m) {
            // The longest prefix of the path that is a module.
            let Some(target) = (1..=target.len())
                .rev()
                .map(|n| target[..n].to_vec())
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            let common = m.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common >= m.len() || common >= target.len() {
                continue; // a module and its ancestors or descendants
            }
            let parent = if common == 0 {
                "crate".to_string()
            } else {
                format!("crate::{}", m[..common].join("::"))
            };
            graphs
                .entry(parent)
                .or_default()
                .entry(m[common].clone())
                .or_default()
                .entry(target[common].clone())
                .or_insert_with(|| format!("{shown}:{line}"));
        }
    }
    graphs
}

/// A cycle of `g`, if it has one (as the modules along it).
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &Graph,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for next in g.get(n).into_iter().flat_map(BTreeMap::keys) {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == next).expect("on the stack");
                    let mut c = stack[at..].to_vec();
                    c.push(next.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, g, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if !state.contains_key(n.as_str()) {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn module_dependencies_have_no_cycle() {
    let graphs = module_graphs();
    assert!(
        graphs.contains_key("crate"),
        "no arrows found: the parser is broken"
    );
    let mut cycles = Vec::new();
    for (parent, g) in &graphs {
        if let Some(c) = find_cycle(g) {
            let why: Vec<String> = c
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
                .collect();
            cycles.push(format!("in {parent}: {}", why.join(", ")));
        }
    }
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_cycle_check_sees_cycles() {
    // Two files' worth of code: a cycle through a `use` group and a path
    // in an expression, beside comments and strings that must not count.
    let a = code_of("use crate::b::{X, c::Y}; // crate::z::W\nfn f() { let _ = \"crate::q\"; }\n");
    let b = code_of("fn g() { crate::a::f(); super::a::f(); }\n#[cfg(test)]\nmod tests {\n use crate::d::Q;\n}\n");
    let refs_a: Vec<ModPath> = references(&a, &vec!["a".into()])
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(
        refs_a,
        vec![
            vec!["b".to_string(), "X".into()],
            vec!["b".into(), "c".into(), "Y".into()]
        ]
    );
    let refs_b: Vec<ModPath> = references(&b, &vec!["b".into()])
        .into_iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(
        refs_b,
        vec![
            vec!["a".to_string(), "f".into()],
            vec!["a".into(), "f".into()]
        ]
    );
    let mut g = Graph::new();
    g.entry("a".into())
        .or_default()
        .insert("b".into(), String::new());
    assert_eq!(find_cycle(&g), None);
    g.entry("b".into())
        .or_default()
        .insert("a".into(), String::new());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}

#[test]
fn every_p4_control_has_its_pipeline_module() {
    let controls = crate_dir().join("../p4/controls");
    let mut missing = Vec::new();
    let mut n = 0;
    for e in std::fs::read_dir(&controls).expect("switch/p4/controls") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "p4") {
            n += 1;
            let stem = p
                .file_stem()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            let module = crate_dir().join(format!("src/pipeline/{stem}.rs"));
            if !module.exists() {
                missing.push(format!("controls/{stem}.p4 -> src/pipeline/{stem}.rs"));
            }
        }
    }
    assert!(n > 0, "no P4 controls found in {}", controls.display());
    assert!(
        missing.is_empty(),
        "P4 controls without their Rust module: {missing:?}"
    );
}

/// A file build.rs generates for another language and the repository
/// commits: it must be today's. `P4RELAY_WRITE_GENERATED=1` rewrites it.
fn check_generated(generated: &str, committed: &str) {
    let path = crate_dir().join(committed);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current == generated {
        return;
    }
    if std::env::var_os("P4RELAY_WRITE_GENERATED").is_some() {
        std::fs::write(&path, generated).expect("write the generated file");
        return;
    }
    panic!(
        "{} is not what build.rs generates from switch/contract.toml: \
         run `P4RELAY_WRITE_GENERATED=1 cargo test --test architecture` in switch/",
        path.display()
    );
}

#[test]
fn python_contract_config_is_generated_from_the_contract() {
    check_generated(
        include_str!(concat!(env!("OUT_DIR"), "/contract_config.py")),
        "../client/src/p4relay_switch/contract_config.py",
    );
}

#[path = "../build/abi.rs"]
mod abi;

fn abi_of(constant_type: &str, fields: &str) -> Result<abi::Abi, String> {
    let contract: toml::Table = toml::from_str("[config]\nport = 511\nname = \"x\"\n").unwrap();
    let text = format!(
        "[constants.PORT]\ncontract = \"port\"\ntype = \"{constant_type}\"\ndoc = \"d\"\n\
         [[struct]]\nc = \"s\"\nrust = \"S\"\ndoc = \"d\"\nfields = [{fields}]\n"
    );
    let t: toml::Table = toml::from_str(&text).unwrap();
    abi::Abi::parse(&t, &contract).map_err(|e| e.to_string())
}

fn refused(r: Result<abi::Abi, String>) -> String {
    r.err().expect("refused")
}

#[test]
fn the_abi_generator_lays_out_like_c_and_refuses_what_does_not_fit() {
    // a@0, (pad) b@4, m@8..14, c@14, then padding to b's alignment: 16
    let a = abi_of(
        "u16",
        r#"{ name = "a", type = "u8" }, { name = "b", type = "u32" },
           { name = "m", type = "[u8; 6]" }, { name = "c", type = "u16" }"#,
    )
    .unwrap();
    let h = a.c_header();
    assert!(h.contains("#define PORT 511"), "{h}");
    assert!(h.contains("    __u8 m[6];"), "{h}");
    assert!(h.contains("_Static_assert(sizeof(struct s) == 16"), "{h}");
    let r = a.rust();
    assert!(r.contains("pub const PORT: u16 = 511;"), "{r}");
    assert!(r.contains("pub m: [u8; 6],"), "{r}");
    assert!(r.contains("size_of::<S>() == 16"), "{r}");
    // a u64 after a u8: 8-byte alignment, 16 bytes
    let a = abi_of(
        "u16",
        r#"{ name = "a", type = "u8" }, { name = "b", type = "u64" }"#,
    )
    .unwrap();
    assert!(a.rust().contains("size_of::<S>() == 16"));
    // 511 does not fit a u8; unknown types and empty structs are refused
    assert!(refused(abi_of("u8", r#"{ name = "a", type = "u8" }"#)).contains("does not fit"));
    assert!(refused(abi_of("u16", r#"{ name = "a", type = "i7" }"#)).contains("unknown type"));
    assert!(refused(abi_of("u16", "")).contains("no fields"));
    // Python: only integers in [config]
    let contract: toml::Table = toml::from_str("[config]\nname = \"x\"\n").unwrap();
    assert!(abi::Abi::python(&contract)
        .unwrap_err()
        .to_string()
        .contains("not an integer"));
}
