#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The helper binary refuses to run outside the daemon's process model.
//! (These also make `cargo test --workspace` build `bootc-helper`, which the
//! tests/ crate runs.)

use std::process::Command;

#[test]
fn refuses_to_start_without_a_parent_pid() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-helper"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--parent-pid is required"));
}

#[test]
fn refuses_a_parent_that_is_not_the_daemon() {
    // Our parent is the test runner, not pid 1.
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-helper"))
        .args(["--parent-pid", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not the daemon"));
}

#[test]
fn refuses_to_serve_without_a_socket_on_fd_3() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-helper"))
        .args(["--parent-pid", &std::process::id().to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
