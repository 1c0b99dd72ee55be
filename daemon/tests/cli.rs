#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The daemon binary's command line. (This also makes `cargo test
//! --workspace` build `bootc-daemon`, which the tests/ crate runs.)

use std::process::Command;

#[test]
fn help_hides_the_seccomp_selftest() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-daemon"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--host-root"));
    assert!(!help.contains("seccomp-selftest"));
}
