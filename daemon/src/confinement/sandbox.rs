//! The daemon's filesystem sandbox (Landlock), installed after the privilege
//! drop and before the seccomp filter. After it, the daemon may read only
//! what a Kubernetes client needs and write no file at all:
//!
//! - the in-cluster service-account directory (token re-reads, CA);
//! - the resolver and CA configuration under `/etc`;
//! - the system libraries (glibc loads its NSS modules when resolving);
//! - its own `/proc/<pid>` (`/proc/self`).
//!
//! Everything else, notably every other process's `/proc/<pid>/{environ,
//! root,fd,mem}` and the host's root, is refused by the kernel even where
//! the uid would allow it. Landlock also keeps the daemon from connecting to
//! abstract Unix sockets made outside its sandbox, and from binding TCP
//! ports.
//!
//! Kernels without Landlock (before 5.13, or booted without it in `lsm=`)
//! run the daemon without this layer: the seccomp filter's `openat` flag
//! check still refuses every open for writing. The start-up log says which
//! protections are active ([`Protections`]).

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use std::path::PathBuf;

/// The Landlock ABI the ruleset is written for (Linux 6.12: filesystem,
/// TCP bind, scopes). Older kernels get the subset they support.
const TARGET_ABI: ABI = ABI::V6;

/// The in-cluster service-account directory (kube reads the token, CA and
/// namespace there, and re-reads the token as the kubelet rotates it).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Read-only paths, each with why the daemon reads below it. Missing ones
/// are skipped.
pub const READABLE: &[(&str, &str)] = &[
    (
        SERVICE_ACCOUNT_DIR,
        "the service-account token, CA and namespace",
    ),
    ("/etc/hosts", "name resolution"),
    ("/etc/resolv.conf", "name resolution"),
    ("/etc/nsswitch.conf", "name resolution"),
    ("/etc/host.conf", "name resolution"),
    ("/etc/gai.conf", "address selection"),
    ("/etc/ssl", "system CA certificates"),
    ("/etc/pki", "system CA certificates"),
    ("/etc/ca-certificates", "system CA certificates"),
    (
        "/usr/share/ca-certificates",
        "system CA certificates (link targets)",
    ),
    ("/lib", "glibc's NSS modules, loaded when resolving"),
    ("/lib64", "glibc's NSS modules, loaded when resolving"),
    ("/usr/lib", "glibc's NSS modules, loaded when resolving"),
    ("/usr/lib64", "glibc's NSS modules, loaded when resolving"),
    ("/proc/self", "its own process information"),
];

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("building the Landlock ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
}

/// What Landlock enforces, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandlockState {
    /// Every requested restriction (on a kernel with ABI >= 6).
    Full { abi: i32 },
    /// Some of them (an older Landlock).
    Partial { abi: i32 },
    /// None: the kernel has no Landlock, or it is not enabled.
    Unavailable { reason: &'static str },
}

impl std::fmt::Display for LandlockState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LandlockState::Full { abi } => write!(f, "enforced (ABI {abi})"),
            LandlockState::Partial { abi } => write!(f, "partially enforced (ABI {abi})"),
            LandlockState::Unavailable { reason } => write!(f, "unavailable ({reason})"),
        }
    }
}

impl LandlockState {
    /// As the daemon reports it on its BootcNode (`status.landlock`).
    pub fn status(&self) -> api::LandlockStatus {
        use api::LandlockState as S;
        let (state, abi) = match self {
            LandlockState::Full { abi } => (S::Enforced, Some(*abi)),
            LandlockState::Partial { abi } => (S::Partial, Some(*abi)),
            LandlockState::Unavailable { .. } => (S::Unavailable, None),
        };
        let message = (state != S::Enforced).then(|| self.to_string());
        api::LandlockStatus {
            state,
            abi,
            message,
        }
    }
}

/// The protections in force after start-up, logged once.
#[derive(Debug, Clone)]
pub struct Protections {
    pub landlock: LandlockState,
    pub seccomp: bool,
}

fn state(status: &landlock::RestrictionStatus) -> LandlockState {
    let abi = match &status.landlock {
        LandlockStatus::Available { effective_abi, .. } => *effective_abi as i32,
        LandlockStatus::NotEnabled => {
            return LandlockState::Unavailable {
                reason: "not enabled at boot",
            };
        }
        LandlockStatus::NotImplemented => {
            return LandlockState::Unavailable {
                reason: "not built into this kernel",
            };
        }
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => LandlockState::Full { abi },
        RulesetStatus::PartiallyEnforced => LandlockState::Partial { abi },
        RulesetStatus::NotEnforced => LandlockState::Unavailable {
            reason: "not supported by this kernel",
        },
    }
}

/// Restricts the calling thread (and threads it creates later) to reading
/// [`READABLE`]. Call while single-threaded, after the privilege drop.
pub fn install() -> Result<LandlockState, SandboxError> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let paths: Vec<PathBuf> = READABLE.iter().map(|(p, _)| PathBuf::from(p)).collect();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))?
        .handle_access(AccessNet::BindTcp)?
        // Not Scope::Signal: it also stops the kernel's parent-death signal,
        // sent from the dying daemon's context, from reaching the helper
        // (which started outside the sandbox). The seccomp filter keeps the
        // daemon from signalling anyone else (no kill, tgkill only itself,
        // no F_SETOWN).
        .scope(Scope::AbstractUnixSocket)?
        .create()?
        .add_rules(path_beneath_rules(paths, read))?
        .restrict_self()?;
    Ok(state(&status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_readable_path_is_absolute_and_explained() {
        use std::path::{Component, Path};
        let proc = Path::new("/proc");
        for (path, why) in READABLE {
            let p = Path::new(path);
            assert!(p.is_absolute(), "{path}");
            assert!(!why.is_empty(), "{path} has no reason");
            // Compared by components: "/proc" and "/" hold every process's
            // /proc/<pid>, "/proc/../proc" is /proc again.
            assert!(
                p.components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
                "{path} is not in normal form"
            );
            assert!(!proc.starts_with(p), "{path} holds all of /proc");
            assert!(
                !p.starts_with(proc) || p == Path::new("/proc/self"),
                "{path} is below /proc but not /proc/self"
            );
        }
    }

    #[test]
    fn state_is_described() {
        assert_eq!(
            LandlockState::Full { abi: 6 }.to_string(),
            "enforced (ABI 6)"
        );
        assert_eq!(
            LandlockState::Unavailable {
                reason: "not enabled at boot"
            }
            .to_string(),
            "unavailable (not enabled at boot)"
        );
    }
}
