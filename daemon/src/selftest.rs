//! `bootc-daemon seccomp-selftest <case>` (hidden): drops privilege and
//! installs the daemon's exact filter, then makes one system call, so tests
//! can see what the filter does to it. Exit codes: [`REFUSED_EPERM`],
//! [`REFUSED_ENOSYS`], [`ALLOWED`], [`OTHER_ERROR`]; a killed process dies
//! of SIGSYS. The case `panic` panics (exit 101 expected, not SIGSYS).
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
/// Setting up the drop or the filter failed.
pub const SETUP_FAILED: u8 = 20;

/// Every case the self-test knows.
pub const CASES: &[&str] = &[
    "getpid",
    "thread",
    "panic",
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
    "clone_newuser",
    "clone3",
    "kill",
    "setuid0",
    "socket_netlink_ok",
];

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
            "kill" => libc::syscall(libc::SYS_kill, 1, 0),
            "setuid0" => libc::syscall(libc::SYS_setuid, 0),
            "socket_netlink_ok" => libc::syscall(
                libc::SYS_socket,
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
            ),
            _ => return None,
        })
    }
}

/// Runs one case under the daemon's drop and filter.
pub fn run(case: &str, uid: u32, gid: u32) -> ExitCode {
    if let Err(e) = crate::privdrop::drop_privileges(uid, gid) {
        tracing::error!(error = %e, "self-test: privilege drop failed");
        return ExitCode::from(SETUP_FAILED);
    }
    if let Err(e) = crate::seccomp::install() {
        tracing::error!(error = %e, "self-test: seccomp failed");
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
        "thread" => {
            return match std::thread::spawn(|| 7).join() {
                Ok(7) => ExitCode::from(ALLOWED),
                _ => ExitCode::from(OTHER_ERROR),
            };
        }
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
        libc::ENOSYS => REFUSED_ENOSYS,
        _ => OTHER_ERROR,
    })
}

/// What the daemon's loop does with tokio: a multi-thread runtime, timers,
/// a blocking-pool thread, a file read.
fn tokio_paths() -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
