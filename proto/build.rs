//! Compiles helper.proto with protox (pure Rust: no system protoc) into
//! prost messages and tonic's client and server for the `Helper` service,
//! without tonic's transport (no `connect` helper, no listener).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/helper.proto");
    let fds = protox::compile(["helper.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
