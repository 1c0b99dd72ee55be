//! bootc-helper: the privileged half of the node agent.
//!
//! It serves exactly four RPCs (see `proto/proto/helper.proto`) on a socket
//! inherited from the daemon as fd 3, validates every input before running
//! anything, and runs bootc with a fixed argv inside the host's mount
//! namespace. SECURITY.md at the repository root audits it.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod auth;
pub mod bootc;
pub mod server;
pub mod service;
pub mod status;
pub mod sys;
pub mod updaters;
pub mod validate;

use std::time::Duration;

/// The fd the daemon hands the helper its end of the socketpair on.
pub const SOCKET_FD: i32 = 3;

/// Command line of `bootc-helper`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The daemon's pid: the helper exits if its parent is not (or no longer) it.
    pub parent_pid: i32,
    /// Whose mount namespace and root are the host's (default 1).
    pub host_pid: i32,
    /// Apply's wait for an early bootc failure.
    pub apply_window: Duration,
    /// Which repositories Stage accepts (`--allowed-repository`, repeated)
    /// and whether bootc enforces the signature policy
    /// (`--enforce-container-sigpolicy`).
    pub policy: validate::ImagePolicy,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// Says the version too: `--version` is one of these (the helper's
    /// code budget has no room for a flag of its own).
    #[error("unknown argument {0:?} (bootc-helper {version})", version = env!("CARGO_PKG_VERSION"))]
    Unknown(String),
    #[error("{flag} needs a value")]
    Missing { flag: String },
    /// The flag and its value.
    #[error("{0}: {1:?} is not a valid number")]
    Number(String, String),
    #[error("--parent-pid is required")]
    NoParent,
    #[error(
        "--allowed-repository {0:?}: not a repository (registry/path) or namespace (registry/path/)"
    )]
    Repository(String),
}

/// Checks an `--allowed-repository` value: a repository name under the
/// reference grammar, optionally ending in `/` (a namespace).
fn allowed_repository(value: String) -> Result<String, ArgsError> {
    let name = value.strip_suffix('/').unwrap_or(&value);
    match api::image_ref::ImageRef::parse(name) {
        Ok(r) if r.tag.is_none() && r.digest.is_none() && r.repository() == name => Ok(value),
        _ => Err(ArgsError::Repository(value)),
    }
}

impl Args {
    /// Parses `--parent-pid N [--host-pid N] [--apply-window-ms N]
    /// [--allowed-repository R]... [--enforce-container-sigpolicy]`.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Args, ArgsError> {
        let (mut parent_pid, mut host_pid) = (None, 1);
        let mut apply_window = crate::service::APPLY_WINDOW;
        let mut policy = validate::ImagePolicy::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .ok_or_else(|| ArgsError::Missing { flag: flag.clone() })
            };
            match flag.as_str() {
                "--parent-pid" => parent_pid = Some(number(&flag, value()?)? as i32),
                "--host-pid" => host_pid = number(&flag, value()?)? as i32,
                "--apply-window-ms" => {
                    apply_window = Duration::from_millis(number(&flag, value()?)? as u64)
                }
                "--allowed-repository" => policy
                    .allowed_repositories
                    .push(allowed_repository(value()?)?),
                "--enforce-container-sigpolicy" => policy.enforce_sigpolicy = true,
                _ => return Err(ArgsError::Unknown(flag)),
            }
        }
        Ok(Args {
            parent_pid: parent_pid.ok_or(ArgsError::NoParent)?,
            host_pid,
            apply_window,
            policy,
        })
    }
}

/// A positive number that fits a pid.
fn number(flag: &str, v: String) -> Result<i64, ArgsError> {
    v.parse::<i64>()
        .ok()
        .filter(|n| *n > 0 && *n <= i64::from(i32::MAX))
        .ok_or(ArgsError::Number(flag.to_owned(), v))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    impl Args {
        /// The argv the daemon passes (inverse of [`Args::parse`]).
        pub fn to_argv(&self) -> Vec<String> {
            let mut argv = vec![
                "--parent-pid".into(),
                self.parent_pid.to_string(),
                "--host-pid".into(),
                self.host_pid.to_string(),
                "--apply-window-ms".into(),
                self.apply_window.as_millis().to_string(),
            ];
            for repository in &self.policy.allowed_repositories {
                argv.push("--allowed-repository".into());
                argv.push(repository.clone());
            }
            if self.policy.enforce_sigpolicy {
                argv.push("--enforce-container-sigpolicy".into());
            }
            argv
        }
    }

    #[test]
    fn args_round_trip_and_reject() {
        let mut a = Args {
            parent_pid: 42,
            host_pid: 7,
            apply_window: Duration::from_millis(300),
            policy: validate::ImagePolicy::default(),
        };
        assert_eq!(Args::parse(a.to_argv()).unwrap(), a);
        a.policy.allowed_repositories = vec!["quay.io/acme/os".into(), "localhost:5000/os/".into()];
        a.policy.enforce_sigpolicy = true;
        assert_eq!(Args::parse(a.to_argv()).unwrap(), a);
        let p = |v: &[&str]| Args::parse(v.iter().map(|s| s.to_string()));
        assert_eq!(p(&[]), Err(ArgsError::NoParent));
        assert!(matches!(p(&["--x"]), Err(ArgsError::Unknown(_))));
        assert!(matches!(
            p(&["--parent-pid"]),
            Err(ArgsError::Missing { .. })
        ));
        assert!(matches!(
            p(&["--parent-pid", "-1"]),
            Err(ArgsError::Number(..))
        ));
        assert_eq!(p(&["--parent-pid", "5"]).unwrap().host_pid, 1);
        for bad in [
            "",
            "quay.io/a:v1",
            "quay.io/A",
            "quay.io/a@sha256:00",
            "-x",
            "quay.io/a//",
        ] {
            assert_eq!(
                p(&["--parent-pid", "5", "--allowed-repository", bad]),
                Err(ArgsError::Repository(bad.to_owned())),
                "{bad:?}"
            );
        }
    }
}
