//! Running bootc inside the host's mount namespace: the exact argument
//! vectors (pure, unit-tested) and the runner (empty environment, fixed
//! PATH, bounded output, timeouts).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The only environment bootc gets: a fixed PATH (systemd's default) for the
/// programs bootc itself runs. Notably no `container` variable, which would
/// make bootc believe it runs in a container.
pub const FIXED_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Looked up on [`FIXED_PATH`] inside the host's mount namespace.
pub const BOOTC: &str = "bootc";

/// Most stdout kept from one bootc run (status JSON is a few KiB).
pub const STDOUT_MAX: usize = 1024 * 1024;
/// Most stderr kept from one bootc run.
pub const STDERR_MAX: usize = 64 * 1024;
/// Most of bootc's stderr put into an RPC error (its tail: bootc prints the
/// error chain last).
pub const ERROR_TEXT_MAX: usize = 1024;

pub fn status_argv() -> Vec<String> {
    ["status", "--format=json", "--format-version=1"]
        .map(String::from)
        .to_vec()
}

pub fn help_argv() -> Vec<String> {
    ["switch", "--help"].map(String::from).to_vec()
}

/// `bootc switch --download-only -- <image>` (locked), or on a bootc without
/// `--download-only`, `bootc switch -- <image>` (unlocked). The image has
/// been validated; `--` is there regardless.
pub fn stage_argv(image: &str, download_only: bool) -> Vec<String> {
    let mut argv = vec!["switch".to_owned()];
    if download_only {
        argv.push("--download-only".to_owned());
    }
    argv.push("--".to_owned());
    argv.push(image.to_owned());
    argv
}

/// Applies what was staged. Locked staging: `bootc switch --from-downloaded
/// --apply [--soft-reboot=auto]`. Unlocked staging (old bootc): `bootc switch
/// --apply -- <image>` (the same image again: bootc finds it staged and
/// reboots; old bootc has no soft reboot).
pub fn apply_argv(staged_image: &str, locked: bool, soft_reboot: bool) -> Vec<String> {
    if locked {
        let mut argv: Vec<String> = ["switch", "--from-downloaded", "--apply"]
            .map(String::from)
            .to_vec();
        if soft_reboot {
            argv.push("--soft-reboot=auto".to_owned());
        }
        argv
    } else {
        ["switch", "--apply", "--", staged_image]
            .map(String::from)
            .to_vec()
    }
}

/// Does `bootc switch --help` show the locked-staging flags?
pub fn help_supports_download_only(help: &str) -> bool {
    help.contains("--download-only") && help.contains("--from-downloaded")
}

/// The tail of bootc's stderr for an error message, on a char boundary.
pub fn error_text(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.len() <= ERROR_TEXT_MAX {
        return text.to_owned();
    }
    let mut start = text.len() - ERROR_TEXT_MAX;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot open the host mount namespace {path}: {source}")]
    Namespace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start bootc in the host mount namespace: {0}")]
    Spawn(std::io::Error),
    #[error("bootc {argv:?} did not finish within {timeout:?}")]
    Timeout {
        argv: Vec<String>,
        timeout: Duration,
    },
    #[error("waiting for bootc failed: {0}")]
    Wait(std::io::Error),
    #[error("bootc {argv:?} failed ({status}): {stderr}")]
    Failed {
        argv: Vec<String>,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// Where and how bootc runs.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The process whose mount namespace is the host's (PID 1 in production).
    pub host_pid: i32,
}

/// Output of a finished bootc run.
#[derive(Debug)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// How an [`Runner::apply`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// bootc exited 0 (it returned before the machine went down).
    Exited,
    /// bootc is still running after the window: the reboot is under way.
    StillRunning,
}

impl Runner {
    /// `/proc/<pid>/ns/mnt` of the host.
    pub fn ns_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/mnt", self.host_pid))
    }

    /// `/proc/<pid>/root`: the host's filesystem as seen from its own mount
    /// namespace (auth file, boot id).
    pub fn host_root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.host_pid))
    }

    fn command(&self, argv: &[String]) -> Result<tokio::process::Command, RunError> {
        let path = self.ns_path();
        let ns =
            std::fs::File::open(&path).map_err(|source| RunError::Namespace { path, source })?;
        let mut cmd = tokio::process::Command::new(BOOTC);
        cmd.args(argv)
            .env_clear()
            .env("PATH", FIXED_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::sys::join_mount_ns_before_exec(&mut cmd, ns.into());
        Ok(cmd)
    }

    /// Runs bootc to completion (killing it at `timeout`).
    pub async fn run(&self, argv: &[String], timeout: Duration) -> Result<Output, RunError> {
        let mut cmd = self.command(argv)?;
        cmd.kill_on_drop(true);
        tracing::info!(?argv, "running bootc");
        let mut child = cmd.spawn().map_err(RunError::Spawn)?;
        let group = child.id();
        let stdout = read_bounded(child.stdout.take(), STDOUT_MAX);
        let stderr = read_bounded(child.stderr.take(), STDERR_MAX);
        let all = async { tokio::join!(child.wait(), stdout, stderr) };
        let (status, stdout, stderr) = tokio::time::timeout(timeout, all).await.map_err(|_| {
            group.into_iter().for_each(crate::sys::kill_group);
            RunError::Timeout {
                argv: argv.to_vec(),
                timeout,
            }
        })?;
        let status = status.map_err(RunError::Wait)?;
        if !status.success() {
            return Err(RunError::Failed {
                argv: argv.to_vec(),
                status,
                stderr: error_text(&stderr),
            });
        }
        Ok(Output { stdout, stderr })
    }

    /// Starts the apply. bootc's `--apply` does not return on a real host (it
    /// waits for the machine to go down), so this answers once bootc has
    /// either exited successfully or is still running after `window`; a
    /// failure within the window is returned with bootc's stderr.
    pub async fn apply(&self, argv: &[String], window: Duration) -> Result<ApplyOutcome, RunError> {
        let mut cmd = self.command(argv)?;
        tracing::info!(?argv, "running bootc apply");
        let mut child = cmd.spawn().map_err(RunError::Spawn)?;
        let stdout = tokio::spawn(read_bounded(child.stdout.take(), STDOUT_MAX));
        let stderr = tokio::spawn(read_bounded(child.stderr.take(), STDERR_MAX));
        match tokio::time::timeout(window, child.wait()).await {
            Ok(status) => {
                let status = status.map_err(RunError::Wait)?;
                drop(stdout);
                let stderr = stderr.await.unwrap_or_default();
                if status.success() {
                    Ok(ApplyOutcome::Exited)
                } else {
                    Err(RunError::Failed {
                        argv: argv.to_vec(),
                        status,
                        stderr: error_text(&stderr),
                    })
                }
            }
            Err(_) => {
                // Keep draining its pipes and reap it, whenever that is.
                let argv = argv.to_vec();
                tokio::spawn(async move {
                    let status = child.wait().await;
                    let stderr = stderr.await.unwrap_or_default();
                    tracing::warn!(?argv, ?status, stderr = %error_text(&stderr), "bootc apply returned");
                });
                Ok(ApplyOutcome::StillRunning)
            }
        }
    }
}

/// Reads a pipe to its end, keeping at most `max` bytes (and discarding the
/// rest, so that the child never blocks on a full pipe).
async fn read_bounded<R: AsyncRead + Unpin>(pipe: Option<R>, max: usize) -> Vec<u8> {
    let Some(mut pipe) = pipe else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMG: &str =
        "quay.io/a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn argv_is_fixed() {
        assert_eq!(
            status_argv(),
            ["status", "--format=json", "--format-version=1"]
        );
        assert_eq!(
            stage_argv(IMG, true),
            ["switch", "--download-only", "--", IMG]
        );
        assert_eq!(stage_argv(IMG, false), ["switch", "--", IMG]);
        assert_eq!(
            apply_argv(IMG, true, false),
            ["switch", "--from-downloaded", "--apply"]
        );
        assert_eq!(
            apply_argv(IMG, true, true),
            [
                "switch",
                "--from-downloaded",
                "--apply",
                "--soft-reboot=auto"
            ]
        );
        assert_eq!(
            apply_argv(IMG, false, true),
            ["switch", "--apply", "--", IMG]
        );
    }

    #[test]
    fn detects_download_only() {
        assert!(help_supports_download_only(
            "Usage: bootc switch [OPTIONS] <TARGET>\n  --download-only  ...\n  --from-downloaded ..."
        ));
        assert!(!help_supports_download_only(
            "Usage: bootc switch [OPTIONS] <TARGET>\n  --apply"
        ));
    }

    #[test]
    fn error_text_keeps_the_tail() {
        let long = format!("{}error: the end", "x".repeat(5000));
        let t = error_text(long.as_bytes());
        assert!(t.ends_with("error: the end"));
        assert!(t.len() <= ERROR_TEXT_MAX + 3);
        assert_eq!(error_text(b"  short\n"), "short");
    }
}
