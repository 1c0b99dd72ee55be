//! Compiles helper.proto with protox (pure Rust: no system protoc) into
//! prost messages. No service code is generated: the transport is the
//! frames of `src/lib.rs`, not gRPC.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/helper.proto");
    let fds = protox::compile(["helper.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
