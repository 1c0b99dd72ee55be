//! The helper's only unsafe code: adopting the inherited socket and joining
//! the host mount namespace between fork and exec.
#![allow(unsafe_code)]

use nix::sched::{CloneFlags, setns};
use nix::sys::stat::{SFlag, fstat};
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Takes ownership of the socket the daemon passed as `fd`, after checking
/// that it is an open socket.
pub fn inherited_socket(fd: RawFd) -> io::Result<std::os::unix::net::UnixStream> {
    // SAFETY: only borrowed for the fstat; the fd number is checked by the
    // kernel (EBADF if not open).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let st = fstat(borrowed).map_err(io::Error::from)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFSOCK {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fd {fd} is not a socket"),
        ));
    }
    // SAFETY: fd is open (fstat succeeded), is a socket, and nothing else in
    // this process owns it: it was inherited from the daemon and this is
    // the only place that adopts it (called once from main).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    nix::fcntl::fcntl(
        &owned,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(io::Error::from)?;
    Ok(std::os::unix::net::UnixStream::from(owned))
}

/// Makes the child join the mount namespace `ns` (an open
/// `/proc/<pid>/ns/mnt`) after fork and before exec. setns also moves the
/// child's root and working directory to that namespace's root, so the
/// program is looked up with the host's PATH on the host's filesystem. The
/// child gets SIGKILL when the helper dies (`PR_SET_PDEATHSIG`).
pub fn join_mount_ns_before_exec(cmd: &mut tokio::process::Command, ns: OwnedFd) {
    // SAFETY: the closure runs in the forked child before exec; it only makes
    // the setns system call (async-signal-safe) on an fd it owns, and
    // allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            setns(&ns, CloneFlags::CLONE_NEWNS).map_err(io::Error::from)?;
            // Dies with the helper: what must outlive it runs in a systemd
            // unit, not as the helper's child.
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(io::Error::from)
        });
    }
}
