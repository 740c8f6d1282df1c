// Generates the BfRt gRPC server from the project's bfruntime.proto subset.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["../proto/bfruntime.proto"], &["../proto"])?;
    Ok(())
}
