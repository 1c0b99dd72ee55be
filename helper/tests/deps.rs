#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The helper's dependency tree is part of its audit surface (SECURITY.md):
//! no Kubernetes client, no TLS, no HTTP client. Its gRPC is tonic's core
//! (codegen) on hyper's HTTP/2 server connection, and no more of either.

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
fn helper_links_no_kube_tls_or_http_client() {
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
        // gRPC is served on the one connection by hand: no router, no
        // middleware stack, no listener.
        "axum",
        "tower",
        "tower-http",
    ] {
        assert!(
            !crates.contains(&forbidden),
            "helper depends on {forbidden}:\n{tree}"
        );
    }
}

/// The features of `krate` the helper's tree enables.
fn features(krate: &str) -> Vec<String> {
    let tree = cargo_tree(&["-e", "features", "-i", krate, "--prefix", "none"]);
    let prefix = format!("{krate} feature \"");
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix)?.split('"').next())
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// tonic without its transport, TLS or compression; hyper and hyper-util
/// as an HTTP/2 server only (no HTTP/1, no client).
#[test]
fn grpc_is_an_http2_server_only() {
    for (krate, allowed) in [
        ("tonic", &["codegen"][..]),
        ("hyper", &["default", "http2", "server"]),
        ("hyper-util", &["tokio"]),
        ("h2", &["default"]),
    ] {
        let enabled = features(krate);
        assert!(!enabled.is_empty(), "{krate}: no features listed");
        for feature in &enabled {
            assert!(
                allowed.contains(&feature.as_str()),
                "{krate} has feature {feature:?} (allowed: {allowed:?})"
            );
        }
    }
}
