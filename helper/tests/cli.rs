#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no socket on fd 3"), "{stderr}");
}

#[test]
fn refuses_a_socket_made_by_another_process() {
    use std::os::unix::process::CommandExt;
    // The child that becomes the helper makes the socketpair itself (between
    // fork and exec), so its peer credentials name the helper's own pid, not
    // its parent's (this test process, given as the daemon).
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bootc-helper"));
    cmd.args(["--parent-pid", &std::process::id().to_string()]);
    // SAFETY: runs in the forked child before exec; only socketpair and dup2
    // (async-signal-safe), no allocation.
    unsafe {
        cmd.pre_exec(|| {
            let mut fds = [0; 2];
            if nix::libc::socketpair(
                nix::libc::AF_UNIX,
                nix::libc::SOCK_STREAM | nix::libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            ) != 0
                || nix::libc::dup2(fds[0], 3) != 3
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the socket on fd 3 was made by pid") && stderr.contains("not the daemon"),
        "{stderr}"
    );
}
