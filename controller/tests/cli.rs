//! The shipped binary's command line: no flag turns a safety check off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// `--no-registry` (digest references unchecked, tags refused) belongs to
/// the tests' `bootc-controller-test` only: `bootc-controller` refuses it
/// as an unknown flag (clap's usage error, exit 2) before it reads any
/// configuration, in every build, this test's included.
#[test]
fn the_shipped_controller_has_no_flag_that_skips_the_registry() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-controller"))
        .arg("--no-registry")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unexpected argument '--no-registry'"),
        "{stderr}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_bootc-controller"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--registry-timeout-seconds"), "{help}");
    assert!(!help.contains("no-registry"), "{help}");
}
