// Generates the BfRt gRPC server from the project's bfruntime.proto subset and
// compiles the XDP fast path (bpf/fastpath.bpf.c) for the BPF target; the
// object is embedded in the binary and loaded through libbpf at start.
use std::path::PathBuf;
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["../proto/bfruntime.proto"], &["../proto"])?;

    println!("cargo:rerun-if-changed=bpf/fastpath.bpf.c");
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("fastpath.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let arch_include = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-mcpu=v3"])
        .arg(arch_include)
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
