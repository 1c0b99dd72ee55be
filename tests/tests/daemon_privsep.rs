#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The daemon's process model: what it holds after the drop, what its
//! seccomp filter does, and that daemon and helper live and die together.

use daemon::selftest;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;
use tests::daemon_proc::{DaemonProcess, HELPER_RAN_STATUS, READY, wait_pid};
use tests::fake_host::{FakeHost, bin, image};
use tests::require_root;

const T: Duration = Duration::from_secs(20);

#[test]
fn every_daemon_thread_is_unprivileged_under_seccomp() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut d = DaemonProcess::start(&host).unwrap();
    d.wait_for_log(READY, T).unwrap();
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{}/task", d.pid()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        tasks.len() >= 2,
        "main thread and a tokio worker: {tasks:?}"
    );
    for task in tasks {
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        daemon::privdrop::check_unprivileged(&status, true)
            .unwrap_or_else(|e| panic!("{}: {e}\n{status}", task.display()));
    }
    // The helper, by contrast, is the privileged one.
    let helper = d.helper_pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{helper}/status")).unwrap();
    assert!(daemon::privdrop::check_unprivileged(&status, false).is_err());
}

/// Where each open fd of `pid` points.
fn fd_targets(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn the_helper_inherits_nothing_but_its_socket() {
    require_root!();
    // A descriptor without close-on-exec, as a careless parent might leave.
    let leak = tempfile::NamedTempFile::new().unwrap();
    let fd = nix::fcntl::open(
        leak.path(),
        nix::fcntl::OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut d = DaemonProcess::start(&host).unwrap();
    d.wait_for_log(READY, T).unwrap();
    let leaked = leak.path().display().to_string();
    assert!(
        fd_targets(d.pid()).contains(&leaked),
        "the daemon got the leaked fd"
    );
    let helper = d.helper_pid().unwrap();
    let targets = fd_targets(helper);
    assert!(!targets.contains(&leaked), "{targets:?}");
    assert!(
        std::fs::read_link(format!("/proc/{helper}/fd/3"))
            .unwrap()
            .display()
            .to_string()
            .starts_with("socket:"),
        "fd 3 is the socketpair end"
    );
    drop(fd);
}

#[test]
fn daemon_sees_host_changes_through_inotify() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut d = DaemonProcess::start(&host).unwrap();
    d.wait_for_log(READY, T).unwrap();
    // What bootc does after a switch: touch ostree/bootc. The daemon then
    // asks the helper for the host's status again.
    std::fs::File::open(host.layout.ostree_bootc())
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    d.wait_for_log(HELPER_RAN_STATUS, T).unwrap();
}

fn selftest(case: &str) -> std::process::Output {
    Command::new(bin("bootc-daemon"))
        .args(["seccomp-selftest", case])
        .output()
        .unwrap()
}

#[test]
fn forbidden_syscalls_die_with_sigsys_or_get_eperm() {
    require_root!();
    // (case, killed outright?)
    let cases = [
        ("ptrace", true),
        ("setns", true),
        ("unshare", true),
        ("mount", true),
        ("umount2", true),
        ("chroot", true),
        ("pivot_root", true),
        ("execve", true),
        ("execveat", true),
        ("bpf", true),
        ("init_module", true),
        ("kexec_load", true),
        ("reboot", true),
        ("keyctl", true),
        ("perf_event_open", true),
        ("userfaultfd", true),
        ("process_vm_readv", true),
        ("open_by_handle_at", true),
        ("clone_newuser", false),
        ("kill", false),
        ("setuid0", false),
    ];
    for (case, killed) in cases {
        let out = selftest(case);
        if killed {
            assert_eq!(
                out.status.signal(),
                Some(libc_sigsys()),
                "{case}: {:?} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        } else {
            assert_eq!(
                out.status.code(),
                Some(i32::from(selftest::REFUSED_EPERM)),
                "{case}: {:?} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // clone3 gets ENOSYS (so glibc falls back to clone, whose flags are checked).
    assert_eq!(
        selftest("clone3").status.code(),
        Some(i32::from(selftest::REFUSED_ENOSYS))
    );
}

fn libc_sigsys() -> i32 {
    Signal::SIGSYS as i32
}

#[test]
fn allowed_calls_and_threads_work_under_the_filter() {
    require_root!();
    for case in [
        "getpid",
        "thread",
        "socket_netlink_ok",
        "dns_localhost",
        "tokio",
    ] {
        let out = selftest(case);
        assert_eq!(
            out.status.code(),
            Some(i32::from(selftest::ALLOWED)),
            "{case}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn tcp_client_works_under_the_filter() {
    require_root!();
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        s.write_all(b"pong").unwrap();
    });
    let out = selftest(&format!("tcp_connect:{port}"));
    assert_eq!(
        out.status.code(),
        Some(i32::from(selftest::ALLOWED)),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    server.join().unwrap();
}

#[test]
fn a_panic_under_the_filter_is_still_a_panic() {
    require_root!();
    let out = selftest("panic");
    assert_eq!(out.status.code(), Some(101), "{:?}", out.status);
    assert!(String::from_utf8_lossy(&out.stderr).contains("self-test panic under the filter"));
}

#[test]
fn kill_9_of_the_daemon_leaves_no_helper() {
    require_root!();
    // Orphans are reparented to this test process, so it can await them.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut d = DaemonProcess::start(&host).unwrap();
    d.wait_for_log(READY, T).unwrap();
    let helper = d.helper_pid().expect("helper running");
    kill(Pid::from_raw(d.pid()), Signal::SIGKILL).unwrap();
    d.wait_exit(T).unwrap();
    let status = wait_pid(Pid::from_raw(helper), Duration::from_secs(2))
        .expect("the helper must be gone within 2 s of the daemon's death");
    // Killed by PR_SET_PDEATHSIG, or it saw the socket close first (the
    // kernel closes the daemon's fds before it signals the children).
    assert!(
        status.signal() == Some(Signal::SIGKILL as i32) || status.success(),
        "{status:?}"
    );
    assert!(!std::path::Path::new(&format!("/proc/{helper}")).exists());
}

#[test]
fn killing_the_helper_makes_the_daemon_exit_non_zero() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut d = DaemonProcess::start(&host).unwrap();
    d.wait_for_log(READY, T).unwrap();
    let helper = d.helper_pid().expect("helper running");
    kill(Pid::from_raw(helper), Signal::SIGKILL).unwrap();
    let status = d.wait_exit(T).unwrap();
    assert_eq!(
        status.code(),
        Some(i32::from(daemon::EXIT_HELPER_DIED)),
        "{status:?}"
    );
}
