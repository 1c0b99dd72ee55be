//! `bootc-daemon seccomp-selftest [--layers L] <case>` (hidden): drops
//! privilege, installs the daemon's exact sandbox and filter (or, for
//! control runs, only some of them: `--layers all|seccomp|landlock|none`),
//! then makes one system call, so tests can see what each layer does to it
//! and that the kernel alone would have allowed it. Exit codes:
//! [`REFUSED_EPERM`], [`REFUSED_EACCES`], [`REFUSED_ENOSYS`], [`ALLOWED`],
//! [`OTHER_ERROR`]; a killed process dies of SIGSYS. The case `panic`
//! panics (exit 101 expected, not SIGSYS).
#![allow(unsafe_code)]

use std::process::ExitCode;

/// The call returned EPERM.
pub const REFUSED_EPERM: u8 = 10;
/// The call succeeded.
pub const ALLOWED: u8 = 11;
/// The call failed with another errno (e.g. EBADF: it reached the kernel).
pub const OTHER_ERROR: u8 = 12;
/// The call returned ENOSYS (clone3).
pub const REFUSED_ENOSYS: u8 = 13;
/// The call returned EACCES (Landlock, or the kernel's own permission checks).
pub const REFUSED_EACCES: u8 = 14;
/// Setting up the drop or the filter failed.
pub const SETUP_FAILED: u8 = 20;

/// Which confinement layers a self-test installs after the privilege drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layers {
    /// Landlock and seccomp, as the daemon runs.
    All,
    /// The seccomp filter only (control run for Landlock's share).
    Seccomp,
    /// The Landlock sandbox only (control run for seccomp's share).
    Landlock,
    /// Neither: what the kernel alone does to the dropped process.
    None,
}

impl std::str::FromStr for Layers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "all" => Layers::All,
            "seccomp" => Layers::Seccomp,
            "landlock" => Layers::Landlock,
            "none" => Layers::None,
            _ => return Err(format!("{s:?}: expected all, seccomp, landlock or none")),
        })
    }
}

/// The cases whose call the filter kills the daemon for (each is in
/// [`super::seccomp::KILLED`]): the process dies of SIGSYS.
pub const KILLED_CASES: &[&str] = &[
    "ptrace",
    "setns",
    "unshare",
    "mount",
    "umount2",
    "chroot",
    "pivot_root",
    "execve",
    "execveat",
    "bpf",
    "init_module",
    "kexec_load",
    "reboot",
    "keyctl",
    "perf_event_open",
    "userfaultfd",
    "process_vm_readv",
    "open_by_handle_at",
];

/// The cases the kernel allows the dropped daemon and only the filter
/// refuses (EPERM).
pub const FILTERED_CASES: &[&str] = &[
    "clone_newuser",
    "fork",
    "kill_self",
    "setresuid_same",
    "sendmsg",
];

/// The other cases (those with an argument are written `name:<arg>`).
const OTHER_CASES: &[&str] = &[
    "getpid",
    "thread",
    "panic",
    "clone3",
    "prlimit_self",
    "socket:inet",
    "socket:inet6",
    "socket:unix",
    "socket:netlink",
    "socket:alg",
    "socket:vsock",
    "socketpair:unix",
    "socketpair:unix_dgram",
    "socketpair:netlink",
    "socketpair:vsock",
    "read:<path>",
    "open_rw:<path>",
    "prlimit:<pid>",
    "dns_localhost",
    "tokio",
    "tcp_connect:<port>",
];

/// Every case the self-test knows.
pub fn cases() -> impl Iterator<Item = &'static str> {
    KILLED_CASES
        .iter()
        .chain(FILTERED_CASES)
        .chain(OTHER_CASES)
        .copied()
}

/// The address family a `socket:<name>` case names.
fn family(name: &str) -> Option<libc::c_int> {
    Some(match name {
        "inet" => libc::AF_INET,
        "inet6" => libc::AF_INET6,
        "unix" => libc::AF_UNIX,
        "netlink" => libc::AF_NETLINK,
        "alg" => libc::AF_ALG,
        "vsock" => libc::AF_VSOCK,
        _ => return None,
    })
}

/// The family and type a `socketpair:<name>` case asks for: `unix` is what
/// tokio's signal driver makes, the others what the kernel would run or
/// give without the filter.
fn pair_kind(name: &str) -> Option<(libc::c_int, libc::c_int)> {
    Some(match name {
        "unix" => (libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK),
        "unix_dgram" => (libc::AF_UNIX, libc::SOCK_DGRAM),
        "netlink" => (libc::AF_NETLINK, libc::SOCK_RAW),
        "vsock" => (libc::AF_VSOCK, libc::SOCK_STREAM),
        _ => return None,
    })
}

/// The cases that take an argument: `socket:<family>`,
/// `socketpair:<kind>`, `read:<path>`, `open_rw:<path>`, `prlimit:<pid>`.
fn raw_with_arg(case: &str) -> Option<libc::c_long> {
    let (name, arg) = case.split_once(':')?;
    let path = std::ffi::CString::new(arg).ok()?;
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: plain integers, a NUL-terminated path that outlives the call,
    // a live rlimit64 and a live pair of ints to write into, and a stack
    // buffer with its true length.
    unsafe {
        Some(match name {
            "socket" => {
                let family = family(arg)?;
                // The type each family takes (so that the kernel alone
                // would create the socket).
                let kind = match family {
                    libc::AF_NETLINK => libc::SOCK_RAW,
                    libc::AF_ALG => libc::SOCK_SEQPACKET,
                    _ => libc::SOCK_STREAM,
                };
                libc::syscall(libc::SYS_socket, family, kind | libc::SOCK_CLOEXEC, 0)
            }
            "socketpair" => {
                let (family, kind) = pair_kind(arg)?;
                libc::syscall(
                    libc::SYS_socketpair,
                    family,
                    kind | libc::SOCK_CLOEXEC,
                    0,
                    fds.as_mut_ptr(),
                )
            }
            "read" => {
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Some(-1);
                }
                let mut buf = [0u8; 64];
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                n as libc::c_long
            }
            "open_rw" => libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) as libc::c_long,
            "prlimit" => libc::syscall(
                libc::SYS_prlimit64,
                arg.parse::<libc::pid_t>().ok()?,
                libc::RLIMIT_NOFILE,
                std::ptr::null::<libc::rlimit64>(),
                &mut limit as *mut libc::rlimit64,
            ),
            _ => return None,
        })
    }
}

fn raw(case: &str) -> Option<libc::c_long> {
    let null = std::ptr::null::<libc::c_void>();
    let path = c"/bin/true".as_ptr();
    let argv = [path, std::ptr::null()];
    // SAFETY: each call passes either plain integers or pointers to live,
    // NUL-terminated data (`path`, `argv`) or null, which the kernel checks;
    // a successful clone is handled in the child before it returns.
    unsafe {
        Some(match case {
            "getpid" => libc::syscall(libc::SYS_getpid),
            "ptrace" => libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0),
            "setns" => libc::syscall(libc::SYS_setns, -1, 0),
            "unshare" => libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER),
            "mount" => libc::syscall(libc::SYS_mount, null, path, null, 0, null),
            "umount2" => libc::syscall(libc::SYS_umount2, path, 0),
            "chroot" => libc::syscall(libc::SYS_chroot, path),
            "pivot_root" => libc::syscall(libc::SYS_pivot_root, path, path),
            "execve" => libc::syscall(libc::SYS_execve, path, argv.as_ptr(), null),
            "execveat" => libc::syscall(
                libc::SYS_execveat,
                libc::AT_FDCWD,
                path,
                argv.as_ptr(),
                null,
                0,
            ),
            "bpf" => libc::syscall(libc::SYS_bpf, 0, null, 0),
            "init_module" => libc::syscall(libc::SYS_init_module, null, 0, path),
            "kexec_load" => libc::syscall(libc::SYS_kexec_load, 0, 0, null, 0),
            // An invalid magic: even if it got through, nothing reboots.
            "reboot" => libc::syscall(libc::SYS_reboot, 0, 0, 0, null),
            "keyctl" => libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0),
            "perf_event_open" => libc::syscall(libc::SYS_perf_event_open, null, 0, -1, -1, 0),
            "userfaultfd" => libc::syscall(libc::SYS_userfaultfd, 0),
            "process_vm_readv" => libc::syscall(libc::SYS_process_vm_readv, 1, null, 0, null, 0, 0),
            "open_by_handle_at" => libc::syscall(libc::SYS_open_by_handle_at, -1, null, 0),
            "clone_newuser" => {
                let rc = libc::syscall(
                    libc::SYS_clone,
                    (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
                    0,
                    0,
                    0,
                    0,
                );
                if rc == 0 {
                    libc::_exit(ALLOWED as i32);
                }
                rc
            }
            "clone3" => libc::syscall(libc::SYS_clone3, null, 0),
            // Calls the kernel allows an unprivileged process, so that a
            // refusal can only come from the filter.
            "kill_self" => libc::syscall(libc::SYS_kill, libc::getpid(), 0),
            "setresuid_same" => libc::syscall(libc::SYS_setresuid, -1, -1, -1),
            "fork" => {
                let rc = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
                if rc == 0 {
                    libc::_exit(ALLOWED as i32);
                }
                rc
            }
            "prlimit_self" => {
                let mut limit = libc::rlimit64 {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::syscall(
                    libc::SYS_prlimit64,
                    0,
                    libc::RLIMIT_NOFILE,
                    null,
                    &mut limit as *mut libc::rlimit64,
                )
            }
            "sendmsg" => {
                let mut fds = [0 as libc::c_int; 2];
                if libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) != 0 {
                    return Some(-1);
                }
                let mut byte = 0u8;
                let mut iov = libc::iovec {
                    iov_base: (&mut byte as *mut u8).cast(),
                    iov_len: 1,
                };
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                libc::syscall(libc::SYS_sendmsg, fds[0], &msg as *const libc::msghdr, 0)
            }
            _ => return raw_with_arg(case),
        })
    }
}

/// Drops privilege, then installs `layers`.
fn confine(uid: u32, gid: u32, layers: Layers) -> Result<(), String> {
    super::privdrop::drop_privileges(uid, gid).map_err(|e| e.to_string())?;
    if matches!(layers, Layers::All | Layers::Landlock) {
        let state = super::sandbox::install().map_err(|e| e.to_string())?;
        tracing::info!(landlock = %state, "self-test: sandbox");
    }
    if matches!(layers, Layers::All | Layers::Seccomp) {
        super::seccomp::install().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs one case under the daemon's drop and `layers`.
pub fn run(case: &str, uid: u32, gid: u32, layers: Layers) -> ExitCode {
    if let Err(error) = confine(uid, gid, layers) {
        tracing::error!(%error, "self-test: confinement failed");
        return ExitCode::from(SETUP_FAILED);
    }
    if let Some(port) = case.strip_prefix("tcp_connect:") {
        return tcp_connect(port);
    }
    match case {
        "panic" => panic!("self-test panic under the filter"),
        "dns_localhost" => {
            use std::net::ToSocketAddrs;
            return match ("localhost", 80).to_socket_addrs().map(|a| a.count()) {
                Ok(n) if n > 0 => ExitCode::from(ALLOWED),
                other => {
                    tracing::error!(?other, "self-test: resolving localhost failed");
                    ExitCode::from(OTHER_ERROR)
                }
            };
        }
        "tokio" => return tokio_paths(),
        "thread" => return new_thread_is_confined(layers),
        _ => {}
    }
    let Some(rc) = raw(case) else {
        tracing::error!(case, "self-test: unknown case");
        return ExitCode::from(SETUP_FAILED);
    };
    if rc >= 0 {
        return ExitCode::from(ALLOWED);
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    tracing::info!(case, errno, "self-test call refused");
    ExitCode::from(match errno {
        libc::EPERM => REFUSED_EPERM,
        libc::EACCES => REFUSED_EACCES,
        libc::ENOSYS => REFUSED_ENOSYS,
        _ => OTHER_ERROR,
    })
}

/// A thread started after the drop (as tokio's blocking pool starts them)
/// runs, and holds no more than the thread that made it: its own status
/// shows the drop, and the filter when one is installed.
fn new_thread_is_confined(layers: Layers) -> ExitCode {
    let seccomp = matches!(layers, Layers::All | Layers::Seccomp);
    let status = std::thread::spawn(|| std::fs::read_to_string("/proc/thread-self/status")).join();
    match status {
        Ok(Ok(status)) => match super::privdrop::check_unprivileged(&status, seccomp) {
            Ok(()) => ExitCode::from(ALLOWED),
            Err(error) => {
                tracing::error!(%error, "self-test: a new thread is not confined");
                ExitCode::from(OTHER_ERROR)
            }
        },
        other => {
            tracing::error!(?other, "self-test: a new thread could not read its status");
            ExitCode::from(OTHER_ERROR)
        }
    }
}

/// What the daemon's loop does with tokio: its one-thread runtime, timers,
/// a blocking-pool thread, a file read.
fn tokio_paths() -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "self-test: tokio runtime");
            return ExitCode::from(OTHER_ERROR);
        }
    };
    let ok = rt.block_on(async {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let blocking = tokio::task::spawn_blocking(|| std::fs::read("/proc/self/status")).await;
        let spawned = tokio::spawn(async { 7 }).await;
        matches!(blocking, Ok(Ok(ref b)) if !b.is_empty()) && matches!(spawned, Ok(7))
    });
    ExitCode::from(if ok { ALLOWED } else { OTHER_ERROR })
}

/// A TCP connection to 127.0.0.1:`port` (the test listens there), through
/// tokio as the Kubernetes client makes it.
fn tcp_connect(port: &str) -> ExitCode {
    let Ok(port) = port.parse::<u16>() else {
        return ExitCode::from(SETUP_FAILED);
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return ExitCode::from(OTHER_ERROR),
    };
    let result = rt.block_on(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.set_nodelay(true)?;
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    });
    match result {
        Ok(buf) if &buf == b"pong" => ExitCode::from(ALLOWED),
        other => {
            tracing::error!(?other, "self-test: tcp connect");
            ExitCode::from(OTHER_ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_killed_case_is_a_call_the_filter_kills() {
        for case in KILLED_CASES {
            let name = format!("SYS_{case}");
            assert!(
                crate::confinement::seccomp::KILLED
                    .iter()
                    .any(|k| k.name == name),
                "{case} is not in seccomp::KILLED"
            );
        }
    }

    #[test]
    fn cases_are_listed_once() {
        let all: Vec<&str> = cases().collect();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "{all:?}");
    }
}
