//! Running bootc inside the host's mount namespace: the exact argument
//! vectors (pure, unit-tested) and the runner (empty environment, fixed
//! PATH, bounded output, timeouts).
//!
//! Every bootc run is a transient systemd unit on the host, so that bootc,
//! its image proxy and a pull's page cache live in the host's cgroup and
//! journal, not the daemon pod's (a pod memory limit would OOM-kill a pull,
//! and the kubelet kills the pod's processes whenever it restarts or rolls
//! the DaemonSet); the pod holds only the daemon, the helper and the
//! short-lived `systemd-run` / `systemctl` clients. The reads (`bootc
//! status`, `bootc switch --help`) get a generated unit name and their
//! output piped back. The two mutating runs (Stage's pull, Apply) get a
//! fixed unit name each and their output in files: such a unit outlives the
//! helper, and a restarted helper finds it running and waits for it instead
//! of starting a second bootc.

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
/// Starts bootc's mutating runs in a transient unit (host's PATH).
pub const SYSTEMD_RUN: &str = "systemd-run";
/// Asks whether a unit is running, and stops one that timed out.
pub const SYSTEMCTL: &str = "systemctl";

/// Below the host root: where the units' stdout and stderr go
/// (`/run/bootc-operator/<op>.stdout|stderr`), for the helper to report.
pub const OUTPUT_DIRS: [&str; 2] = ["run", "bootc-operator"];

/// How often a restarted helper looks whether a unit it found running
/// has finished (a `systemctl is-active` each time).
pub const UNIT_POLL: Duration = Duration::from_millis(500);

/// The two mutating bootc runs, each in its own fixed-name unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitOp {
    Stage,
    Apply,
}

impl UnitOp {
    /// The unit's fixed name.
    pub fn unit(self) -> &'static str {
        match self {
            UnitOp::Stage => "bootc-operator-stage.service",
            UnitOp::Apply => "bootc-operator-apply.service",
        }
    }

    fn stem(self) -> &'static str {
        match self {
            UnitOp::Stage => "stage",
            UnitOp::Apply => "apply",
        }
    }

    /// The output files' names in [`OUTPUT_DIRS`].
    pub fn stdout_file(self) -> String {
        format!("{}.stdout", self.stem())
    }

    pub fn stderr_file(self) -> String {
        format!("{}.stderr", self.stem())
    }
}

/// `systemd-run` around a bootc argv: a transient service with a fixed
/// name, collected when it ends (so the name is free again, also after a
/// failure), waited for (its exit status is bootc's), its output in files.
pub fn unit_argv(op: UnitOp, bootc_argv: &[String]) -> Vec<String> {
    let dir = format!("/{}", OUTPUT_DIRS.join("/"));
    let mut argv = vec![
        format!("--unit={}", op.unit()),
        "--collect".to_owned(),
        "--wait".to_owned(),
        "--quiet".to_owned(),
        "--service-type=exec".to_owned(),
        format!(
            "--property=StandardOutput=truncate:{dir}/{}",
            op.stdout_file()
        ),
        format!(
            "--property=StandardError=truncate:{dir}/{}",
            op.stderr_file()
        ),
        "--".to_owned(),
        BOOTC.to_owned(),
    ];
    argv.extend(bootc_argv.iter().cloned());
    argv
}

/// `systemd-run` around a read: a transient service with a generated name,
/// its stdout and stderr piped back to the helper, waited for (its exit
/// status is bootc's), collected.
pub fn read_unit_argv(bootc_argv: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "--collect",
        "--wait",
        "--quiet",
        "--pipe",
        "--service-type=exec",
        "--",
        BOOTC,
    ]
    .map(String::from)
    .to_vec();
    argv.extend(bootc_argv.iter().cloned());
    argv
}

/// `systemctl is-active <unit>`.
pub fn is_active_argv(op: UnitOp) -> Vec<String> {
    vec!["is-active".to_owned(), op.unit().to_owned()]
}

/// `systemctl stop <unit>` (a stage past its time limit).
pub fn stop_argv(op: UnitOp) -> Vec<String> {
    vec!["stop".to_owned(), op.unit().to_owned()]
}

/// Does `systemctl is-active` say the unit is (still) running?
pub fn unit_busy(is_active_stdout: &str) -> bool {
    matches!(
        is_active_stdout.trim(),
        "active" | "activating" | "deactivating" | "reloading" | "refreshing"
    )
}

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
    #[error("cannot prepare the units' output directory: {0}")]
    Output(String),
    #[error("{unit} is running (started before this helper): {what}")]
    Busy { unit: &'static str, what: String },
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

    fn command_of(
        &self,
        program: &str,
        argv: &[String],
    ) -> Result<tokio::process::Command, RunError> {
        let path = self.ns_path();
        let ns =
            std::fs::File::open(&path).map_err(|source| RunError::Namespace { path, source })?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(argv)
            .env_clear()
            .env("PATH", FIXED_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::sys::join_mount_ns_before_exec(&mut cmd, ns.into());
        Ok(cmd)
    }

    /// Runs `program` to completion (killing it at `timeout`): its status
    /// and bounded output.
    async fn run_program(
        &self,
        program: &str,
        argv: &[String],
        timeout: Duration,
    ) -> Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>), RunError> {
        let mut cmd = self.command_of(program, argv)?;
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(RunError::Spawn)?;
        let group = child.id();
        let stdout = read_bounded(child.stdout.take(), STDOUT_MAX);
        let stderr = read_bounded(child.stderr.take(), STDERR_MAX);
        let all = async { tokio::join!(child.wait(), stdout, stderr) };
        let (status, stdout, stderr) = tokio::time::timeout(timeout, all).await.map_err(|_| {
            // The client and whatever it started in the helper's process
            // group; a unit's own processes are stopped by `run_in_unit`.
            group.into_iter().for_each(crate::sys::kill_group);
            RunError::Timeout {
                argv: argv.to_vec(),
                timeout,
            }
        })?;
        Ok((status.map_err(RunError::Wait)?, stdout, stderr))
    }

    /// Runs a bootc read to completion in a transient unit with its output
    /// piped back (`systemd-run` is killed at `timeout`; the read is short).
    pub async fn run(&self, argv: &[String], timeout: Duration) -> Result<Output, RunError> {
        tracing::info!(?argv, "running bootc");
        let (status, stdout, stderr) = self
            .run_program(SYSTEMD_RUN, &read_unit_argv(argv), timeout)
            .await?;
        if !status.success() {
            return Err(RunError::Failed {
                argv: argv.to_vec(),
                status,
                stderr: error_text(&stderr),
            });
        }
        Ok(Output { stdout, stderr })
    }

    /// Is `op`'s unit running (`systemctl is-active`)?
    pub async fn unit_running(&self, op: UnitOp) -> Result<bool, RunError> {
        let (_, stdout, _) = self
            .run_program(SYSTEMCTL, &is_active_argv(op), UNIT_QUERY_TIMEOUT)
            .await?;
        Ok(unit_busy(&String::from_utf8_lossy(&stdout)))
    }

    /// Waits until `op`'s unit is not running: one started by an earlier
    /// helper (the daemon restarted) is waited for, never run twice.
    async fn wait_unit_idle(
        &self,
        op: UnitOp,
        deadline: tokio::time::Instant,
    ) -> Result<(), RunError> {
        let mut logged = false;
        while self.unit_running(op).await? {
            if !logged {
                tracing::info!(
                    unit = op.unit(),
                    "found running (started before this helper); waiting for it to end"
                );
                logged = true;
            }
            if tokio::time::Instant::now() + UNIT_POLL > deadline {
                return Err(RunError::Busy {
                    unit: op.unit(),
                    what: "still running at the time limit".to_owned(),
                });
            }
            tokio::time::sleep(UNIT_POLL).await;
        }
        Ok(())
    }

    /// The units' output directory on the host, created if missing, with
    /// no symlink followed below the host root.
    fn output_dir(&self) -> Result<std::os::fd::OwnedFd, RunError> {
        crate::auth::open_host_dir(&self.host_root(), &OUTPUT_DIRS)
            .map(|(fd, _)| fd)
            .map_err(|e| RunError::Output(e.to_string()))
    }

    /// What the unit printed, and the error for a failed run (bootc's
    /// stderr, or systemd-run's own when the unit did not start).
    fn unit_output(
        dir: &std::os::fd::OwnedFd,
        op: UnitOp,
        argv: &[String],
        status: std::process::ExitStatus,
        run_stderr: &[u8],
    ) -> Result<Output, RunError> {
        let stdout = crate::auth::read_tail_nofollow(dir, &op.stdout_file(), STDOUT_MAX);
        let stderr = crate::auth::read_tail_nofollow(dir, &op.stderr_file(), STDERR_MAX);
        if status.success() {
            return Ok(Output { stdout, stderr });
        }
        let text = if stderr.is_empty() {
            run_stderr
        } else {
            &stderr
        };
        Err(RunError::Failed {
            argv: argv.to_vec(),
            status,
            stderr: error_text(text),
        })
    }

    /// Runs bootc `argv` to completion in `op`'s transient unit on the host
    /// (after any run of that unit an earlier helper started has ended).
    /// At `timeout` the unit is stopped.
    pub async fn run_in_unit(
        &self,
        op: UnitOp,
        argv: &[String],
        timeout: Duration,
    ) -> Result<Output, RunError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let dir = self.output_dir()?;
        self.wait_unit_idle(op, deadline).await?;
        tracing::info!(unit = op.unit(), ?argv, "running bootc in a transient unit");
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match self
            .run_program(SYSTEMD_RUN, &unit_argv(op, argv), left)
            .await
        {
            Err(RunError::Timeout { .. }) => {
                let stopped = self
                    .run_program(SYSTEMCTL, &stop_argv(op), UNIT_QUERY_TIMEOUT)
                    .await;
                tracing::warn!(unit = op.unit(), ?stopped, "time limit: unit stopped");
                Err(RunError::Timeout {
                    argv: argv.to_vec(),
                    timeout,
                })
            }
            Err(e) => Err(e),
            Ok((status, _, run_stderr)) => Self::unit_output(&dir, op, argv, status, &run_stderr),
        }
    }

    /// Starts the apply in its transient unit. bootc's `--apply` does not
    /// return on a real host (it waits for the machine to go down), so this
    /// answers once bootc has either exited successfully or is still running
    /// after `window`; a failure within the window is returned with bootc's
    /// stderr. An apply unit already running (an earlier helper's) means
    /// the reboot is under way: nothing is started again.
    pub async fn apply(&self, argv: &[String], window: Duration) -> Result<ApplyOutcome, RunError> {
        if self.unit_running(UnitOp::Apply).await? {
            tracing::info!(
                unit = UnitOp::Apply.unit(),
                "an apply started before this helper is running: the reboot is under way"
            );
            return Ok(ApplyOutcome::StillRunning);
        }
        if self.unit_running(UnitOp::Stage).await? {
            return Err(RunError::Busy {
                unit: UnitOp::Stage.unit(),
                what: "not applying while a stage runs".to_owned(),
            });
        }
        let dir = self.output_dir()?;
        let mut cmd = self.command_of(SYSTEMD_RUN, &unit_argv(UnitOp::Apply, argv))?;
        tracing::info!(
            unit = UnitOp::Apply.unit(),
            ?argv,
            "running bootc apply in a transient unit"
        );
        let mut child = cmd.spawn().map_err(RunError::Spawn)?;
        let stdout = tokio::spawn(read_bounded(child.stdout.take(), STDOUT_MAX));
        let stderr = tokio::spawn(read_bounded(child.stderr.take(), STDERR_MAX));
        match tokio::time::timeout(window, child.wait()).await {
            Ok(status) => {
                let status = status.map_err(RunError::Wait)?;
                drop(stdout);
                let run_stderr = stderr.await.unwrap_or_default();
                Self::unit_output(&dir, UnitOp::Apply, argv, status, &run_stderr)?;
                Ok(ApplyOutcome::Exited)
            }
            Err(_) => {
                // Keep draining systemd-run's pipes and reap it, whenever
                // that is; the unit itself is systemd's.
                let argv = argv.to_vec();
                tokio::spawn(async move {
                    let status = child.wait().await;
                    let stderr = stderr.await.unwrap_or_default();
                    tracing::warn!(?argv, ?status, stderr = %error_text(&stderr), "systemd-run for the apply returned");
                });
                Ok(ApplyOutcome::StillRunning)
            }
        }
    }
}

/// Time limit of one `systemctl` query.
const UNIT_QUERY_TIMEOUT: Duration = Duration::from_secs(30);

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
    fn unit_argv_is_fixed() {
        assert_eq!(
            unit_argv(UnitOp::Stage, &stage_argv(IMG, true)),
            [
                "--unit=bootc-operator-stage.service",
                "--collect",
                "--wait",
                "--quiet",
                "--service-type=exec",
                "--property=StandardOutput=truncate:/run/bootc-operator/stage.stdout",
                "--property=StandardError=truncate:/run/bootc-operator/stage.stderr",
                "--",
                "bootc",
                "switch",
                "--download-only",
                "--",
                IMG
            ]
        );
        assert_eq!(
            unit_argv(UnitOp::Apply, &apply_argv(IMG, true, false))[0],
            "--unit=bootc-operator-apply.service"
        );
        assert_eq!(
            is_active_argv(UnitOp::Stage),
            ["is-active", "bootc-operator-stage.service"]
        );
        assert_eq!(
            stop_argv(UnitOp::Apply),
            ["stop", "bootc-operator-apply.service"]
        );
        assert!(unit_busy("active\n") && unit_busy("activating"));
        assert!(!unit_busy("inactive\n") && !unit_busy("failed") && !unit_busy(""));
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
