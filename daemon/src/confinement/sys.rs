//! The daemon's unsafe system calls, outside the seccomp self-test: handing
//! the helper its socket as fd 3, and emptying the bounding set.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

/// Fd number the helper finds its socket on.
pub const HELPER_FD: i32 = 3;

/// Arranges for the child to get `fd` as fd 3 (without close-on-exec), no
/// other descriptor above 3 (whatever the daemon itself inherited stays
/// behind), and SIGKILL when the daemon dies.
pub fn pass_fd3_and_pdeathsig(cmd: &mut std::process::Command, fd: OwnedFd) {
    // SAFETY: runs in the forked child before exec; only async-signal-safe
    // system calls (dup2, fcntl, close_range, prctl) that change descriptor
    // flags, none that free memory or close a descriptor std relies on; no
    // allocation on the success path.
    unsafe {
        cmd.pre_exec(move || {
            let raw = fd.as_raw_fd();
            if raw == HELPER_FD {
                // dup2 onto itself keeps FD_CLOEXEC; clear it by hand.
                if libc::fcntl(raw, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(raw, HELPER_FD) == -1 {
                return Err(io::Error::last_os_error());
            }
            // Mark the rest close-on-exec rather than closing them: std's own
            // exec-error pipe is among them and must stay open until exec.
            // close_range(CLOEXEC) needs Linux 5.11; older kernels: one by one.
            let rest = (HELPER_FD + 1) as libc::c_uint;
            if libc::syscall(
                libc::SYS_close_range,
                rest,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) == -1
            {
                for other in HELPER_FD + 1..4096 {
                    libc::fcntl(other, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Drops capabilities `0..=last_cap` from the bounding set (needs
/// CAP_SETPCAP). Covers every capability the running kernel knows, even
/// ones newer than the caps crate.
pub fn drop_bounding_set(last_cap: u32) -> io::Result<()> {
    for cap in 0..=last_cap {
        // SAFETY: PR_CAPBSET_DROP takes a capability number and touches no
        // memory of ours.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc == -1 {
            let err = io::Error::last_os_error();
            // EINVAL: a number this kernel does not know; nothing to drop.
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(err);
            }
        }
    }
    Ok(())
}

/// An inotify instance as tokio wants it (owning its fd).
#[derive(Debug)]
pub struct InotifyFd(pub nix::sys::inotify::Inotify);

impl AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

/// Registers an inotify instance with the current tokio runtime.
pub fn async_inotify(
    inotify: nix::sys::inotify::Inotify,
) -> io::Result<tokio::io::unix::AsyncFd<InotifyFd>> {
    // SAFETY: InotifyFd owns the Inotify, which owns its fd: it stays open
    // and the same for as long as the AsyncFd holds it.
    Ok(unsafe { tokio::io::unix::AsyncFd::register(InotifyFd(inotify)) }?)
}
