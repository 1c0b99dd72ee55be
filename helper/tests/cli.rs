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

/// Runs the helper (our pid as its parent) with fd 3 set up by `fd3` in
/// the child before exec; returns its stderr after checking it failed.
fn helper_with_fd3(fd3: fn() -> std::io::Result<()>) -> String {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bootc-helper"));
    cmd.args(["--parent-pid", &std::process::id().to_string()]);
    // SAFETY: `fd3` runs in the forked child before exec and makes only
    // async-signal-safe calls (close, open, dup2, socketpair).
    unsafe {
        cmd.pre_exec(fd3);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    stderr
}

#[test]
fn refuses_to_serve_without_a_socket_on_fd_3() {
    // Nothing on fd 3 (the test runner may have something there).
    let stderr = helper_with_fd3(|| {
        // SAFETY: closing a descriptor number in the child before exec.
        unsafe { nix::libc::close(3) };
        Ok(())
    });
    assert!(stderr.contains("no socket on fd 3"), "{stderr}");
    // Something that is not a socket on fd 3.
    let stderr = helper_with_fd3(|| {
        // SAFETY: a NUL-terminated literal path; dup2 onto 3.
        let fd = unsafe { nix::libc::open(c"/dev/null".as_ptr(), nix::libc::O_RDONLY) };
        // SAFETY: plain descriptor numbers.
        if fd < 0 || unsafe { nix::libc::dup2(fd, 3) } != 3 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    });
    assert!(stderr.contains("fd 3 is not a socket"), "{stderr}");
}

#[test]
fn refuses_a_socket_made_by_another_process() {
    // The child that becomes the helper makes the socketpair itself (between
    // fork and exec), so its peer credentials name the helper's own pid, not
    // its parent's (this test process, given as the daemon). The other end
    // is close-on-exec: without the check the helper would see EOF and exit 0.
    let stderr = helper_with_fd3(|| {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`; dup2 takes
        // plain descriptor numbers.
        let ok = unsafe {
            nix::libc::socketpair(
                nix::libc::AF_UNIX,
                nix::libc::SOCK_STREAM | nix::libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            ) == 0
                && nix::libc::dup2(fds[0], 3) == 3
        };
        if !ok {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    });
    assert!(
        stderr.contains("the socket on fd 3 was made by pid") && stderr.contains("not the daemon"),
        "{stderr}"
    );
}
