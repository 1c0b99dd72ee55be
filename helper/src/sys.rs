//! The helper's only unsafe code: adopting the inherited socket and joining
//! the host mount namespace between fork and exec.
#![allow(unsafe_code)]

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sched::{CloneFlags, setns};
use nix::sys::signal::Signal;
use nix::sys::stat::{SFlag, fstat};
use nix::unistd::{Pid, setpgid};
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Takes ownership of the socket the daemon passed as `fd`, after checking
/// that it is an open socket.
pub fn inherited_socket(fd: RawFd) -> io::Result<std::os::unix::net::UnixStream> {
    // SAFETY: only borrowed for the fstat; the fd number is checked by the
    // kernel (EBADF if not open).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let st = fstat(borrowed).map_err(|e| {
        io::Error::other(format!("no socket on fd {fd} (the daemon passes one): {e}"))
    })?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFSOCK {
        return Err(io::Error::other(format!("fd {fd} is not a socket")));
    }
    // SAFETY: fd is open (fstat succeeded), is a socket, and nothing else in
    // this process owns it: it was inherited from the daemon and this is
    // the only place that adopts it (called once from main).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    fcntl(&owned, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(std::os::unix::net::UnixStream::from(owned))
}

/// A pidfd for process `pid` (pidfd_open, Linux 5.3), registered with the
/// current tokio runtime: `readable()` resolves once that process has exited,
/// whoever holds the other end of any socket.
pub fn watch_exit(pid: i32) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor (it fits an int) that nothing else owns;
    // the AsyncFd owns it, open and the same while registered.
    Ok(unsafe { tokio::io::unix::AsyncFd::register(OwnedFd::from_raw_fd(fd as RawFd)) }?)
}

/// Makes the child join the mount namespace `ns` (an open
/// `/proc/<pid>/ns/mnt`) after fork and before exec. setns also moves the
/// child's root and working directory to that namespace's root, so the
/// program is looked up with the host's PATH on the host's filesystem.
///
/// After the setns the child also gets SIGKILL as its parent-death signal
/// (so the client it runs, `systemd-run` or `systemctl`, never outlives the
/// helper; checked against the helper's pid in case the helper died before
/// the prctl) and a process group of its own (so that [`kill_group`]
/// reaches whatever it started). What must outlive the helper, bootc's
/// mutating runs, lives in a systemd unit, not among the helper's children.
pub fn join_mount_ns_before_exec(cmd: &mut tokio::process::Command, ns: OwnedFd) {
    let helper = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec; it only makes
    // async-signal-safe system calls (setns on an fd it owns, prctl,
    // getppid, setpgid) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            setns(&ns, CloneFlags::CLONE_NEWNS).map_err(io::Error::from)?;
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            if nix::unistd::getppid() != helper {
                return Err(io::Error::from(nix::errno::Errno::ESRCH));
            }
            setpgid(Pid::from_raw(0), Pid::from_raw(0)).map_err(io::Error::from)
        });
    }
}

/// SIGKILL to the process group `pid` leads (a client started by
/// [`join_mount_ns_before_exec`], and what it started).
pub fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}
