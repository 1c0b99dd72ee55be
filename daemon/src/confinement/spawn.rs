//! Starting bootc-helper: a socketpair, then fork and exec with the helper's
//! end as fd 3 and SIGKILL as its parent-death signal. Runs while the daemon
//! is still root and single-threaded.

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("socketpair: {0}")]
    Socketpair(nix::Error),
    #[error("cannot start the helper {path}: {source}")]
    Exec { path: PathBuf, source: io::Error },
}

/// What the helper is told (see helper::Args).
#[derive(Debug, Clone, Default)]
pub struct HelperOptions {
    pub path: PathBuf,
    pub host_pid: i32,
    pub apply_window: Duration,
    /// Repositories (or `registry/path/` namespaces) the helper may stage
    /// from; empty: any.
    pub allowed_repositories: Vec<String>,
    /// Have bootc enforce the host's container signature policy.
    pub enforce_sigpolicy: bool,
}

/// The helper's command line, given the daemon's pid.
pub fn helper_argv(opts: &HelperOptions, daemon_pid: u32) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        "--parent-pid".into(),
        daemon_pid.to_string(),
        "--host-pid".into(),
        opts.host_pid.to_string(),
        "--apply-window-ms".into(),
        opts.apply_window.as_millis().to_string(),
    ];
    for repository in &opts.allowed_repositories {
        argv.push("--allowed-repository".into());
        argv.push(repository.clone());
    }
    if opts.enforce_sigpolicy {
        argv.push("--enforce-container-sigpolicy".into());
    }
    argv
}

/// Where the helper is by default: beside the daemon's own binary.
pub fn default_helper_path() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("bootc-helper")))
        .unwrap_or_else(|| PathBuf::from("/usr/bin/bootc-helper"))
}

/// The running helper.
#[derive(Debug)]
pub struct HelperProcess {
    child: Child,
}

impl HelperProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resolves when the helper has exited (and reaps it). Needs a tokio
    /// runtime with signals enabled.
    pub async fn exited(mut self) -> io::Result<ExitStatus> {
        let mut sigchld = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())?;
        loop {
            // Checked after registering, so an exit before it is not missed.
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            sigchld.recv().await;
        }
    }
}

/// Starts the helper. Returns it and the daemon's end of the socketpair.
pub fn start(opts: &HelperOptions) -> Result<(HelperProcess, UnixStream), SpawnError> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(SpawnError::Socketpair)?;
    let exec = |path: &Path| {
        let mut cmd = Command::new(path);
        cmd.args(helper_argv(opts, std::process::id()))
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        super::sys::pass_fd3_and_pdeathsig(&mut cmd, theirs);
        // `cmd` (and with it the daemon's copy of the helper's end) is
        // dropped on return, so the helper's exit shows as EOF here.
        cmd.spawn()
    };
    let child = exec(&opts.path).map_err(|source| SpawnError::Exec {
        path: opts.path.clone(),
        source,
    })?;
    tracing::info!(pid = child.id(), path = %opts.path.display(), "started bootc-helper");
    Ok((HelperProcess { child }, UnixStream::from(ours)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv() {
        let mut o = HelperOptions {
            path: "/x".into(),
            host_pid: 1,
            apply_window: Duration::from_millis(5000),
            ..HelperOptions::default()
        };
        assert_eq!(
            helper_argv(&o, 9),
            [
                "--parent-pid",
                "9",
                "--host-pid",
                "1",
                "--apply-window-ms",
                "5000"
            ]
        );
        o.allowed_repositories = vec!["quay.io/a/os".into()];
        o.enforce_sigpolicy = true;
        assert_eq!(
            helper_argv(&o, 9)[6..],
            [
                "--allowed-repository",
                "quay.io/a/os",
                "--enforce-container-sigpolicy"
            ]
        );
    }
}
