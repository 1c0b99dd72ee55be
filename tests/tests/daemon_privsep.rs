#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]
//! The daemon's process model: what it holds after the drop, what its
//! seccomp filter does, and that daemon and helper live and die together.

use daemon::confinement::selftest;
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
    // The loop runs on the main thread; any other (tokio's blocking pool)
    // is checked too, and the self-test case "thread" checks one started
    // after the drop.
    assert!(!tasks.is_empty(), "no threads: {tasks:?}");
    for task in tasks {
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        daemon::confinement::privdrop::check_unprivileged(&status, true)
            .unwrap_or_else(|e| panic!("{}: {e}\n{status}", task.display()));
    }
    // The helper, by contrast, is the privileged one.
    let helper = d.helper_pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{helper}/status")).unwrap();
    assert!(daemon::confinement::privdrop::check_unprivileged(&status, false).is_err());
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
    // The exact set at exec: stdio and the socket, nothing else (whatever
    // the daemon inherited or opened). fd-probe prints it and then runs
    // the real helper.
    drop(d);
    let mut d = DaemonProcess::start_with_helper(&host, &bin("fd-probe")).unwrap();
    let line = d.wait_for_log("fd-probe: fds=", T).unwrap();
    assert!(line.ends_with("fd-probe: fds=[0, 1, 2, 3]"), "{line}");
    d.wait_for_log(READY, T).unwrap();
    let helper = d.helper_pid().unwrap();
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
    selftest_with("all", &[], case)
}

/// The self-test with only `layers` installed after the drop ("none": the
/// control run, what the kernel alone does) and extra daemon flags.
fn selftest_with(layers: &str, flags: &[&str], case: &str) -> std::process::Output {
    Command::new(bin("bootc-daemon"))
        .args(flags)
        .args(["seccomp-selftest", "--layers", layers, case])
        .output()
        .unwrap()
}

fn code(out: &std::process::Output) -> Option<u8> {
    out.status.code().map(|c| c as u8)
}

/// Asserts the self-test's exit code for `case` under `layers`.
fn expect(layers: &str, flags: &[&str], case: &str, want: u8) {
    let out = selftest_with(layers, flags, case);
    assert_eq!(
        code(&out),
        Some(want),
        "{case} under {layers} {flags:?}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn forbidden_syscalls_die_with_sigsys_or_get_eperm() {
    require_root!();
    for &case in selftest::KILLED_CASES {
        let out = selftest(case);
        assert_eq!(
            out.status.signal(),
            Some(libc_sigsys()),
            "{case}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Calls the kernel allows the dropped process (the control run without
    // any layer says so): only the filter refuses them.
    for &case in selftest::FILTERED_CASES {
        expect("none", &[], case, selftest::ALLOWED);
        expect("seccomp", &[], case, selftest::REFUSED_EPERM);
        expect("all", &[], case, selftest::REFUSED_EPERM);
    }
    // clone3 gets ENOSYS (so glibc falls back to clone, whose flags are
    // checked); the kernel itself answers otherwise (EINVAL for a null
    // argument).
    assert_ne!(
        code(&selftest_with("none", &[], "clone3")),
        Some(selftest::REFUSED_ENOSYS)
    );
    expect("all", &[], "clone3", selftest::REFUSED_ENOSYS);
}

#[test]
fn only_inet_sockets_can_be_created() {
    require_root!();
    for family in ["inet", "inet6"] {
        expect("all", &[], &format!("socket:{family}"), selftest::ALLOWED);
    }
    for family in ["unix", "netlink", "alg", "vsock"] {
        let case = format!("socket:{family}");
        // The kernel alone answers something other than EPERM (the socket,
        // or EAFNOSUPPORT where the family is not built in)...
        let control = selftest_with("none", &[], &case);
        assert_ne!(
            code(&control),
            Some(selftest::REFUSED_EPERM),
            "{case}: {}",
            String::from_utf8_lossy(&control.stderr)
        );
        // ...so the filter's EPERM is the filter's.
        expect("all", &[], &case, selftest::REFUSED_EPERM);
    }
    // AF_UNIX and AF_NETLINK exist on every Linux: the kernel gives them.
    expect("none", &[], "socket:unix", selftest::ALLOWED);
    expect("none", &[], "socket:netlink", selftest::ALLOWED);
}

#[test]
fn only_tokios_unix_stream_pair_can_be_created() {
    require_root!();
    // What tokio's signal driver makes still works.
    expect("all", &[], "socketpair:unix", selftest::ALLOWED);
    // socketpair() runs the family's kernel code as socket() does (the
    // socket is created before the family refuses to pair it), and a
    // datagram pair could send to any pathname Unix socket.
    for kind in ["unix_dgram", "netlink", "vsock"] {
        let case = format!("socketpair:{kind}");
        // The kernel alone answers something other than EPERM (the pair,
        // EOPNOTSUPP from the family, or EAFNOSUPPORT where it is not
        // built in)...
        let control = selftest_with("none", &[], &case);
        assert_ne!(
            code(&control),
            Some(selftest::REFUSED_EPERM),
            "{case}: {}",
            String::from_utf8_lossy(&control.stderr)
        );
        // ...so the filter's EPERM is the filter's.
        expect("seccomp", &[], &case, selftest::REFUSED_EPERM);
        expect("all", &[], &case, selftest::REFUSED_EPERM);
    }
    expect("none", &[], "socketpair:unix_dgram", selftest::ALLOWED);
}

/// A process next to the daemon: `sleep` as `uid`/`gid`, with a secret in
/// its environment and a file only its uid (and root) can read, reachable
/// through `/proc/<pid>/root`.
struct Victim {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Victim {
    fn start(uid: u32, gid: u32) -> Victim {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "victim-file-secret").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        nix::unistd::chown(&secret, Some(uid.into()), Some(gid.into())).unwrap();
        // spawn() returns once sleep has been executed: its environ is set.
        let child = Command::new("sleep")
            .arg("600")
            .env_clear()
            .env("VICTIM_TOKEN", "victim-env-secret")
            .uid(uid)
            .gid(gid)
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Victim { child, dir }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn environ(&self) -> String {
        format!("read:/proc/{}/environ", self.pid())
    }

    /// Readable by anyone, and not behind Landlock's ptrace scoping (as
    /// `environ`, `root` and `mem` are): only the read rules refuse it.
    fn cmdline(&self) -> String {
        format!("read:/proc/{}/cmdline", self.pid())
    }

    fn root_file(&self) -> String {
        format!(
            "read:/proc/{}/root{}",
            self.pid(),
            self.dir.path().join("secret").display()
        )
    }

    fn mem(&self) -> String {
        format!("open_rw:/proc/{}/mem", self.pid())
    }

    fn limits(&self) -> String {
        format!("prlimit:{}", self.pid())
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_process_of_the_daemons_own_uid_is_out_of_reach() {
    require_root!();
    use daemon::confinement::privdrop::{DEFAULT_GID, DEFAULT_UID};
    let v = Victim::start(DEFAULT_UID, DEFAULT_GID);
    let (environ, root, mem, limits) = (v.environ(), v.root_file(), v.mem(), v.limits());
    let cmdline = v.cmdline();
    // Control: the kernel lets a process of the same uid read its
    // environment, command line and files, open its memory for writing,
    // read its limits.
    for case in [&environ, &cmdline, &root, &mem, &limits] {
        expect("none", &[], case, selftest::ALLOWED);
    }
    // Landlock: nothing outside the daemon's read-only set, its own /proc
    // included. The command line is refused by the read rules alone (the
    // others by its ptrace scoping too).
    expect("landlock", &[], &cmdline, selftest::REFUSED_EACCES);
    expect("all", &[], &cmdline, selftest::REFUSED_EACCES);
    expect("landlock", &[], &environ, selftest::REFUSED_EACCES);
    expect("landlock", &[], &root, selftest::REFUSED_EACCES);
    expect("landlock", &[], &mem, selftest::REFUSED_EACCES);
    // seccomp: no open for writing, no prlimit64 on another process.
    expect("seccomp", &[], &mem, selftest::REFUSED_EPERM);
    expect("seccomp", &[], &limits, selftest::REFUSED_EPERM);
    // The daemon as it runs: all of it refused.
    expect("all", &[], &environ, selftest::REFUSED_EACCES);
    expect("all", &[], &root, selftest::REFUSED_EACCES);
    expect("all", &[], &mem, selftest::REFUSED_EPERM);
    expect("all", &[], &limits, selftest::REFUSED_EPERM);
    // What a Kubernetes client needs still reads.
    expect("all", &[], "read:/proc/self/status", selftest::ALLOWED);
    expect("all", &[], "read:/etc/hosts", selftest::ALLOWED);
    expect("all", &[], "prlimit_self", selftest::ALLOWED);
}

#[test]
fn a_nobody_process_is_out_of_reach_of_the_default_uid() {
    require_root!();
    let v = Victim::start(65534, 65534);
    // Without any layer, the default uid alone keeps the kernel from
    // giving a 65534 process's environment, files or memory away (it did
    // when the daemon ran as 65534).
    for case in [v.environ(), v.root_file(), v.mem()] {
        expect("none", &[], &case, selftest::REFUSED_EACCES);
        let all = selftest_with("all", &[], &case);
        assert!(
            matches!(
                code(&all),
                Some(selftest::REFUSED_EACCES | selftest::REFUSED_EPERM)
            ),
            "{case}: {:?}",
            all.status
        );
    }
    expect("none", &[], &v.limits(), selftest::REFUSED_EPERM);
    // And the daemon refuses to become 65534 (or root).
    for flags in [["--uid", "65534"], ["--gid", "65534"], ["--uid", "0"]] {
        let out = selftest_with("none", &flags, "getpid");
        assert_eq!(code(&out), Some(selftest::SETUP_FAILED), "{flags:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("refusing"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
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
        "prlimit_self",
        "socket:inet",
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

/// Duplicates every socket the process `pid` holds into this process
/// (pidfd_getfd, Linux 5.6), so that none of their peers ever sees EOF.
fn hold_sockets_of(pid: i32) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags; the returned fd is owned here.
    let pidfd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a fresh descriptor nothing else owns.
    let pidfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(pidfd as i32) };
    let mut held = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let entry = entry.unwrap();
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        if !target.display().to_string().starts_with("socket:") {
            continue;
        }
        let n: i32 = entry.file_name().to_string_lossy().parse().unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: plain integers; the returned fd is owned here.
        let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) };
        assert!(fd >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nothing else owns.
        held.push(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) });
    }
    held
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
    // Keep the daemon's end of the socketpair open here: the helper then
    // never sees EOF, and only its watch on the daemon (a pidfd) ends it.
    // (PR_SET_PDEATHSIG cannot: the kernel refuses a signal from the dying
    // unprivileged daemon to the root helper.)
    let held = hold_sockets_of(d.pid());
    assert!(!held.is_empty());
    kill(Pid::from_raw(d.pid()), Signal::SIGKILL).unwrap();
    d.wait_exit(T).unwrap();
    let status = wait_pid(Pid::from_raw(helper), Duration::from_secs(2))
        .expect("the helper must be gone within 2 s of the daemon's death");
    assert!(status.success(), "{status:?}");
    d.wait_for_log("the daemon exited; exiting", T).unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{helper}")).exists());
    drop(held);
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
