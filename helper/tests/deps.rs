#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The helper's dependency tree is part of its audit surface (SECURITY.md):
//! no Kubernetes client, no TLS, no HTTP (client or server), no gRPC.

use std::process::Command;

fn cargo_tree(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "-p", "helper", "-e", "normal"])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn helper_links_no_kube_tls_http_or_grpc() {
    let tree = cargo_tree(&["--prefix", "none"]);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for forbidden in [
        "kube",
        "kube-client",
        "k8s-openapi",
        "rustls",
        "tokio-rustls",
        "hyper-rustls",
        "openssl",
        "native-tls",
        "reqwest",
        "hyper-timeout",
        "ring",
        "aws-lc-rs",
        // The transport is our own framing of prost messages.
        "hyper",
        "hyper-util",
        "h2",
        "http",
        "tonic",
        "tower",
    ] {
        assert!(
            !crates.contains(&forbidden),
            "helper depends on {forbidden}:\n{tree}"
        );
    }
}
