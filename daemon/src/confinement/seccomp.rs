//! The daemon's seccomp filters, installed after the privilege drop (no_new_privs
//! allows it without CAP_SYS_ADMIN). Three stacked filters; the kernel applies
//! the most severe verdict:
//!
//! 1. the allow-list below, every other system call failing with EPERM;
//! 2. a kill-list of calls that only an attacker would make (namespace,
//!    mount, exec, tracing, kernel-loading calls): the process dies with SIGSYS;
//! 3. `clone3` fails with ENOSYS, so glibc falls back to `clone`, whose flags a
//!    filter can see (clone3 passes them in memory): the allow-list admits
//!    `clone` only for a thread (CLONE_VM and CLONE_THREAD, no CLONE_NEW*).
//!
//! One table ([`ALLOWED`]) states every allowed call with its why and,
//! after `where`, the arguments it is allowed with (as Firecracker keeps its
//! policy: reviewed as data, turned into BPF by seccompiler). Argument
//! checks narrow what is allowed to what a Kubernetes client needs:
//! `openat` never for writing (no O_WRONLY, O_RDWR, O_CREAT, O_TRUNC,
//! O_APPEND, O_TMPFILE: after the drop the daemon opens nothing to write,
//! so neither another process's `/proc/<pid>/mem` nor any file); `socket`
//! only AF_INET / AF_INET6 (the API server; not AF_UNIX, so no host D-Bus or
//! container-runtime socket, and no AF_NETLINK, AF_ALG, AF_VSOCK... whose
//! kernel code would be reachable); `socketpair` only the AF_UNIX stream
//! pair tokio's signal driver makes (the same kernel code as `socket` would
//! otherwise run for any family, and a datagram pair could `sendto` any
//! pathname Unix socket); `prlimit64` only reading its own
//! limits; `fcntl` only descriptor and status flags (no F_SETOWN, which
//! would aim SIGIO at another process).
//!
//! The list started from a kube + tokio + rustls client measured with
//! `strace -f -c` minus start-up-only calls (execve, access,
//! arch_prctl...), plus what the daemon's own paths use; the integration tests
//! run the daemon under it.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;

/// A system call in a list, why the daemon needs it (or never may), and
/// what its arguments must be.
pub struct Allowed {
    pub nr: i64,
    pub name: &'static str,
    pub why: &'static str,
    pub only: Only,
}

/// What an allowed call's arguments must be.
pub enum Only {
    /// Any arguments.
    Any,
    /// One of these alternatives, each checks that must all hold.
    OneOf(&'static [&'static [Check]]),
    /// Its first argument is the daemon's own pid (known when installed).
    OwnPid,
}

/// One argument check: `arg & mask == value` (a mask of all ones is
/// equality), on the argument's low 32 bits or all 64.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    pub arg: u8,
    pub wide: bool,
    pub mask: u64,
    pub value: u64,
}

/// Allowed only with one of these alternatives' arguments.
const fn one_of(alternatives: &'static [&'static [Check]]) -> Only {
    Only::OneOf(alternatives)
}

/// The 32-bit argument `arg` is `value`.
const fn eq(arg: u8, value: u64) -> Check {
    masked(arg, u32::MAX as u64, value)
}

/// The 32-bit argument `arg`, masked, is `value`.
const fn masked(arg: u8, mask: u64, value: u64) -> Check {
    Check {
        arg,
        wide: false,
        mask,
        value,
    }
}

/// The 64-bit argument `arg`, masked, is `value`.
const fn masked64(arg: u8, mask: u64, value: u64) -> Check {
    Check {
        arg,
        wide: true,
        mask,
        value,
    }
}

macro_rules! allow {
    ($($name:ident: $why:literal $(where $only:expr)?),* $(,)?) => {
        &[$(Allowed {
            nr: libc::$name as i64,
            name: stringify!($name),
            why: $why,
            only: allow!(@only $($only)?),
        }),*]
    };
    (@only) => { Only::Any };
    (@only $only:expr) => { $only };
}

/// Allowed on every architecture, some only with the arguments after
/// `where` (one of the alternatives, each check of one holding).
pub const ALLOWED: &[Allowed] = allow![
    // memory
    SYS_brk: "malloc",
    SYS_mmap: "malloc, thread stacks",
    SYS_munmap: "malloc, thread stacks",
    SYS_mprotect: "thread stack guard pages",
    SYS_madvise: "malloc returns memory",
    SYS_mremap: "realloc of large buffers",
    // threads and synchronisation
    SYS_clone: "glibc pthread_create after clone3 is refused (threads only: CLONE_VM|CLONE_THREAD, no CLONE_NEW*)"
        where one_of(&[&[masked64(0, CLONE_NS_FLAGS, 0), masked64(0, CLONE_THREAD_FLAGS, CLONE_THREAD_FLAGS)]]),
    SYS_futex: "mutexes, condition variables, thread parking",
    SYS_set_robust_list: "glibc thread start",
    SYS_rseq: "glibc thread start",
    SYS_set_tid_address: "glibc thread start",
    SYS_gettid: "tracing, thread ids",
    SYS_getpid: "tracing, tgkill target",
    SYS_sched_getaffinity: "std::thread::available_parallelism",
    SYS_sched_yield: "spin loops in tokio and std",
    SYS_exit: "thread exit",
    SYS_exit_group: "process exit",
    SYS_tgkill: "abort() on a double panic (own process only)" where Only::OwnPid,
    // signals
    SYS_rt_sigaction: "tokio signal handlers (SIGCHLD, SIGTERM)",
    SYS_rt_sigprocmask: "thread start, abort",
    SYS_rt_sigreturn: "return from a signal handler",
    SYS_sigaltstack: "Rust's stack overflow handler per thread",
    SYS_restart_syscall: "restart after a signal",
    // the event loop
    SYS_epoll_create1: "tokio reactor",
    SYS_epoll_ctl: "tokio reactor",
    SYS_epoll_pwait: "tokio reactor (aarch64, newer libcs)",
    SYS_eventfd2: "tokio waker",
    SYS_ppoll: "poll fallback",
    // files and sockets already open or opened read-only
    SYS_read: "sockets, inotify, token files",
    SYS_write: "sockets, logs",
    SYS_readv: "sockets",
    SYS_writev: "sockets, logs",
    SYS_pread64: "file reads",
    SYS_close: "every fd",
    SYS_fcntl: "F_GETFD/F_SETFD/F_GETFL/F_SETFL/F_DUPFD_CLOEXEC only (non-blocking, close-on-exec)"
        where one_of(&[
            &[eq(1, libc::F_GETFD as u64)],
            &[eq(1, libc::F_SETFD as u64)],
            &[eq(1, libc::F_GETFL as u64)],
            &[eq(1, libc::F_SETFL as u64)],
            &[eq(1, libc::F_DUPFD_CLOEXEC as u64)],
        ]),
    SYS_ioctl: "FIONBIO / FIOCLEX only"
        where one_of(&[&[eq(1, libc::FIONBIO)], &[eq(1, libc::FIOCLEX)]]),
    SYS_openat: "service-account token and CA re-reads; read-only flags only"
        where one_of(&[&[masked(2, OPEN_WRITE_FLAGS, 0)]]),
    SYS_newfstatat: "file metadata",
    SYS_fstat: "file metadata",
    SYS_statx: "file metadata (std)",
    SYS_lseek: "file reads",
    SYS_getcwd: "path resolution in std",
    SYS_readlinkat: "path resolution in std",
    SYS_getdents64: "listing a directory (e.g. a CA certificate directory)",
    SYS_getrandom: "hash map seeds, TLS",
    SYS_prlimit64: "glibc reads its own stack limit when starting a thread (pid 0, no new limit only)"
        where one_of(&[&[eq(0, 0), masked64(2, u64::MAX, 0)]]),
    SYS_uname: "library version checks",
    SYS_prctl: "PR_SET_NAME / PR_GET_NAME only (thread names)"
        where one_of(&[&[eq(0, libc::PR_SET_NAME as u64)], &[eq(0, libc::PR_GET_NAME as u64)]]),
    SYS_wait4: "reap the helper when it exits",
    SYS_waitid: "reap the helper when it exits",
    // networking (the API server; the helper's socketpair)
    SYS_socket: "connections to the API server (AF_INET / AF_INET6 only)"
        where one_of(&[&[eq(0, libc::AF_INET as u64)], &[eq(0, libc::AF_INET6 as u64)]]),
    SYS_socketpair: "tokio signal driver (AF_UNIX, SOCK_STREAM only)"
        where one_of(&[&[
            eq(0, libc::AF_UNIX as u64),
            masked(1, !SOCKETPAIR_TYPE_FLAGS as u32 as u64, libc::SOCK_STREAM as u64),
            eq(2, 0),
        ]]),
    SYS_connect: "connections to the API server",
    SYS_getsockopt: "socket errors after a non-blocking connect",
    SYS_setsockopt: "TCP_NODELAY, keepalive",
    SYS_getpeername: "connection info",
    SYS_getsockname: "connection info",
    SYS_recvfrom: "socket reads",
    SYS_sendto: "socket writes",
    SYS_sendmmsg: "glibc's DNS resolver sends the A and AAAA queries at once",
    SYS_shutdown: "closing connections",
    // time
    SYS_clock_gettime: "timers (when the vDSO is unavailable)",
    SYS_clock_nanosleep: "std::thread::sleep",
    SYS_nanosleep: "std::thread::sleep (older libcs)",
    SYS_getuid: "library start-up checks",
    SYS_geteuid: "library start-up checks",
    SYS_getgid: "library start-up checks",
    SYS_getegid: "library start-up checks",
    SYS_membarrier: "glibc / std synchronisation on newer kernels",
];

/// Allowed only where the architecture has them.
#[cfg(target_arch = "x86_64")]
pub const ALLOWED_ARCH: &[Allowed] = allow![
    SYS_epoll_wait: "tokio reactor",
    SYS_poll: "poll fallback",
    SYS_access: "library start-up checks",
    SYS_arch_prctl: "thread-local storage of new threads",
];
#[cfg(not(target_arch = "x86_64"))]
pub const ALLOWED_ARCH: &[Allowed] = &[];

/// System calls that kill the daemon outright.
pub const KILLED: &[Allowed] = allow![
    SYS_ptrace: "no debugging of other processes",
    SYS_process_vm_readv: "no reading other processes",
    SYS_process_vm_writev: "no writing other processes",
    SYS_setns: "no joining namespaces (the host's in particular)",
    SYS_unshare: "no new namespaces",
    SYS_mount: "no mounts",
    SYS_umount2: "no unmounts",
    SYS_pivot_root: "no root changes",
    SYS_chroot: "no root changes",
    SYS_open_tree: "no mounts (new mount API)",
    SYS_move_mount: "no mounts (new mount API)",
    SYS_fsopen: "no mounts (new mount API)",
    SYS_fsmount: "no mounts (new mount API)",
    SYS_execve: "the daemon never executes anything",
    SYS_execveat: "the daemon never executes anything",
    SYS_bpf: "no BPF programs",
    SYS_perf_event_open: "no perf events",
    SYS_init_module: "no kernel modules",
    SYS_finit_module: "no kernel modules",
    SYS_delete_module: "no kernel modules",
    SYS_kexec_load: "no kexec",
    SYS_kexec_file_load: "no kexec",
    SYS_reboot: "only the helper (via bootc) reboots",
    SYS_keyctl: "no kernel keyrings",
    SYS_add_key: "no kernel keyrings",
    SYS_request_key: "no kernel keyrings",
    SYS_userfaultfd: "a classic exploitation aid",
    SYS_open_by_handle_at: "container escape primitive",
    SYS_name_to_handle_at: "container escape primitive",
    SYS_swapon: "no swap changes",
    SYS_swapoff: "no swap changes",
];

/// What `clone` must have: a thread shares memory and thread group.
const CLONE_THREAD_FLAGS: u64 = (libc::CLONE_VM | libc::CLONE_THREAD) as u64;

/// `openat` flags that open for writing (or create).
pub const OPEN_WRITE_FLAGS: u64 = (libc::O_WRONLY
    | libc::O_RDWR
    | libc::O_CREAT
    | libc::O_TRUNC
    | libc::O_APPEND
    | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u64;

/// The address families `socket` accepts.
pub const SOCKET_FAMILIES: [i32; 2] = [libc::AF_INET, libc::AF_INET6];

/// The flags `socketpair`'s type may carry besides SOCK_STREAM: what mio's
/// `UnixStream::pair` (tokio's signal driver) passes.
const SOCKETPAIR_TYPE_FLAGS: i32 = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;

/// Any of these in clone's flags is refused.
const CLONE_NS_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("building the seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
    #[error("installing the seccomp filter: {0}")]
    Install(#[from] seccompiler::Error),
    #[error("unsupported architecture {0}")]
    Arch(String),
}

impl Check {
    fn condition(&self) -> Result<SeccompCondition, SeccompError> {
        let len = if self.wide {
            SeccompCmpArgLen::Qword
        } else {
            SeccompCmpArgLen::Dword
        };
        let full = if self.wide {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        let op = if self.mask == full {
            SeccompCmpOp::Eq
        } else {
            SeccompCmpOp::MaskedEq(self.mask)
        };
        Ok(SeccompCondition::new(self.arg, len, op, self.value)?)
    }
}

impl Only {
    /// The filter's rules for this call (none: any arguments).
    fn rules(&self, pid: i32) -> Result<Vec<SeccompRule>, SeccompError> {
        let rule = |checks: &[Check]| -> Result<SeccompRule, SeccompError> {
            let conditions = checks
                .iter()
                .map(Check::condition)
                .collect::<Result<_, _>>()?;
            Ok(SeccompRule::new(conditions)?)
        };
        match self {
            Only::Any => Ok(Vec::new()),
            Only::OneOf(alternatives) => alternatives.iter().map(|c| rule(c)).collect(),
            Only::OwnPid => Ok(vec![rule(&[eq(0, u64::from(pid.unsigned_abs()))])?]),
        }
    }
}

fn allow_rules(pid: i32) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
    let mut rules = BTreeMap::new();
    for allowed in ALLOWED.iter().chain(ALLOWED_ARCH) {
        rules.insert(allowed.nr, allowed.only.rules(pid)?);
    }
    // Not refused here: this filter runs first (it was installed last) and
    // its EPERM would win over the clone3 filter's ENOSYS, which glibc needs
    // to see to fall back to clone.
    rules.insert(libc::SYS_clone3, Vec::new());
    Ok(rules)
}

/// The three programs, in installation order: the allow-list last, since
/// once it is in place the prctl/seccomp calls that install a filter are
/// themselves refused. `pid` is the daemon's own
/// (tgkill may only target it).
pub fn programs(pid: i32) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH.to_owned()))?;
    let allow = SeccompFilter::new(
        allow_rules(pid)?,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )?;
    let kill = SeccompFilter::new(
        KILLED.iter().map(|a| (a.nr, Vec::new())).collect(),
        SeccompAction::Allow,
        SeccompAction::KillProcess,
        arch,
    )?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    [clone3, kill, allow]
        .into_iter()
        .map(|f| BpfProgram::try_from(f).map_err(SeccompError::from))
        .collect()
}

/// Installs the filters on the calling thread; threads created later
/// inherit them. Call while single-threaded, after the privilege drop.
pub fn install() -> Result<(), SeccompError> {
    for program in programs(std::process::id() as i32)? {
        seccompiler::apply_filter(&program)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lists_are_disjoint_and_explained() {
        let allowed: Vec<_> = ALLOWED.iter().chain(ALLOWED_ARCH).collect();
        for k in KILLED {
            assert!(
                !allowed.iter().any(|a| a.nr == k.nr),
                "{} is both allowed and killed",
                k.name
            );
        }
        for a in allowed.iter().copied().chain(KILLED) {
            assert!(!a.why.is_empty(), "{} has no reason", a.name);
        }
        let mut nrs: Vec<_> = allowed.iter().map(|a| a.nr).collect();
        nrs.sort_unstable();
        nrs.dedup();
        assert_eq!(nrs.len(), allowed.len(), "duplicate entries");
        assert!(!allowed.iter().any(|a| a.nr == libc::SYS_clone3));
    }

    #[test]
    fn filters_compile() {
        assert_eq!(programs(1).unwrap().len(), 3);
    }
}
