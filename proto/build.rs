//! Compiles helper.proto with protox (pure Rust: no system protoc).
//! The server and client halves are generated only for the features asked
//! for, so that the helper never links the client and the daemon never the
//! server.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/helper.proto");
    let fds = protox::compile(["helper.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(std::env::var_os("CARGO_FEATURE_SERVER").is_some())
        .build_client(std::env::var_os("CARGO_FEATURE_CLIENT").is_some())
        // No tonic::transport: the daemon brings its own connector.
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
