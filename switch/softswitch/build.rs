// Generates the BfRt gRPC server from the project's bfruntime.proto subset,
// the XDP program's shared constants and map layouts (bpf/abi.toml and
// switch/contract.toml: a C header, Rust, and the contract's [config] for
// Python), and compiles the XDP fast path (bpf/fastpath.bpf.c) for the BPF
// target; the object is embedded in the binary and loaded through libbpf at
// start.
use std::path::PathBuf;
use std::process::Command;

#[path = "build/abi.rs"]
mod abi;

fn read_toml(path: &str) -> Result<toml::Table, Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={path}");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    Ok(toml::from_str::<toml::Table>(&text).map_err(|e| format!("{path}: {e}"))?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["../proto/bfruntime.proto"], &["../proto"])?;

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=build/abi.rs");
    let contract = read_toml("../contract.toml")?;
    let abi = abi::Abi::parse(&read_toml("bpf/abi.toml")?, &contract)?;
    std::fs::write(out_dir.join("xdp_abi.h"), abi.c_header())?;
    std::fs::write(out_dir.join("xdp_abi.rs"), abi.rust())?;
    std::fs::write(
        out_dir.join("contract_config.py"),
        abi::Abi::python(&contract)?,
    )?;

    println!("cargo:rerun-if-changed=bpf/fastpath.bpf.c");
    let out = out_dir.join("fastpath.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let arch_include = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-mcpu=v3"])
        .arg(arch_include)
        .arg("-I")
        .arg(&out_dir)
        .args(["-c", "bpf/fastpath.bpf.c", "-o"])
        .arg(&out)
        .status()
        .map_err(|e| {
            format!("running {clang} for the XDP fast path: {e} (install clang and libbpf-dev: make setup)")
        })?;
    if !status.success() {
        return Err(format!("{clang} failed to compile bpf/fastpath.bpf.c").into());
    }
    println!("cargo:rustc-link-lib=bpf");
    Ok(())
}
