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
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

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

/// Time limit of one `systemctl` query.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the `systemd-run` of an apply may wait for the reboot after the
/// answer before it is killed (only the client: the unit is systemd's).
const APPLY_CLIENT_LIMIT: Duration = Duration::from_secs(3600);

/// The two mutating bootc runs, each in its own fixed-name unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitOp {
    Stage,
    Apply,
}

impl UnitOp {
    fn stem(self) -> &'static str {
        match self {
            UnitOp::Stage => "stage",
            UnitOp::Apply => "apply",
        }
    }

    /// The unit's fixed name.
    pub fn unit(self) -> String {
        format!("bootc-operator-{}.service", self.stem())
    }
}

/// The words of `line` (no argument written here has a space).
fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// `systemd-run` around a bootc argv: a transient service with a fixed
/// name, collected when it ends (so the name is free again, also after a
/// failure), waited for (its exit status is bootc's), its output in files
/// (`/run/bootc-operator/<op>.stdout|stderr`), with `properties` of the
/// caller's (validated: a stage's weights) before the command.
///
/// The service type is `simple`: its start job is done once systemd has
/// forked, so `--wait` always ends with the main process's own exit status.
/// With `exec`, a bootc that fails at once can fail the start job itself,
/// and systemd-run then exits 1 with a message of its own instead (seen on
/// systemd 252 in 2 of 6 runs; `SERVICE_TYPE` in the tests' fake systemd
/// does it every time).
pub fn unit_argv(op: UnitOp, properties: &[String], bootc_argv: &[String]) -> Vec<String> {
    let (unit, out) = (
        op.unit(),
        format!("/{}/{}", OUTPUT_DIRS.join("/"), op.stem()),
    );
    let mut argv = words(&format!(
        "--unit={unit} --collect --wait --quiet --service-type=simple \
         --property=StandardOutput=truncate:{out}.stdout \
         --property=StandardError=truncate:{out}.stderr {} -- {BOOTC}",
        properties.join(" ")
    ));
    argv.extend_from_slice(bootc_argv);
    argv
}

/// `systemd-run` around a read: a transient service with a generated name,
/// its stdout and stderr piped back to the helper, waited for (its exit
/// status is bootc's, see [`unit_argv`] on the service type), collected.
pub fn read_unit_argv(bootc_argv: &[String]) -> Vec<String> {
    let mut argv = words(&format!(
        "--collect --wait --quiet --pipe --service-type=simple -- {BOOTC}"
    ));
    argv.extend_from_slice(bootc_argv);
    argv
}

/// `systemctl <verb> <unit>`: `is-active`, or `stop` (a stage past its
/// time limit).
pub fn systemctl_argv(verb: &str, op: UnitOp) -> Vec<String> {
    vec![verb.to_owned(), op.unit()]
}

/// Does `systemctl is-active` say the unit is (still) running?
pub fn unit_busy(is_active_stdout: &str) -> bool {
    let state = is_active_stdout.trim();
    "active activating deactivating reloading refreshing"
        .split(' ')
        .any(|busy| busy == state)
}

/// Most stdout kept from one bootc run (status JSON is a few KiB).
pub const STDOUT_MAX: usize = 1024 * 1024;
/// Most stderr kept from one bootc run.
pub const STDERR_MAX: usize = 64 * 1024;
/// Most of bootc's stderr put into an RPC error (its tail: bootc prints the
/// error chain last).
pub const ERROR_TEXT_MAX: usize = 1024;

pub fn status_argv() -> Vec<String> {
    words("status --format=json --format-version=1")
}

pub fn help_argv() -> Vec<String> {
    words("switch --help")
}

/// `bootc switch --download-only -- <image>`, or on a bootc without
/// `--download-only`, `bootc switch -- <image>` (locked by ostree's lock
/// file, see `crate::auth`); `--enforce-container-sigpolicy` right before
/// `--` when asked (the host's `containers-policy.json` then decides). The
/// image has been validated; `--` is there regardless.
pub fn stage_argv(image: &str, download_only: bool, enforce_sigpolicy: bool) -> Vec<String> {
    let download = download_only.then_some("--download-only");
    let sig = enforce_sigpolicy.then_some("--enforce-container-sigpolicy");
    let args = download.into_iter().chain(sig).chain(["--", image]);
    std::iter::once("switch")
        .chain(args)
        .map(str::to_owned)
        .collect()
}

/// Applies what was staged: `bootc upgrade --from-downloaded --apply
/// [--soft-reboot=auto]` (bootc v1.12+), whatever staged it. It unlocks a
/// staged deployment locked by `--download-only` (and then ostree's lock
/// file), handles the soft reboot, and reboots; it fetches nothing and does
/// not check which image is staged (the caller does).
pub fn apply_argv(soft_reboot: bool) -> Vec<String> {
    let mut argv = words("upgrade --from-downloaded --apply");
    argv.extend(soft_reboot.then(|| "--soft-reboot=auto".to_owned()));
    argv
}

/// Does `bootc switch --help` show the locked-staging flags?
pub fn help_supports_download_only(help: &str) -> bool {
    help.contains("--download-only") && help.contains("--from-downloaded")
}

/// The tail of bootc's stderr for an error message, on a char boundary,
/// its control characters escaped (it relays registries' error bodies, and
/// ends up on an admin's terminal).
pub fn error_text(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = api::text::escape_controls(text.trim());
    if text.len() <= ERROR_TEXT_MAX {
        return text.into_owned();
    }
    let start = (text.len() - ERROR_TEXT_MAX..text.len()).find(|i| text.is_char_boundary(*i));
    format!("...{}", &text[start.unwrap_or(text.len())..])
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot open /proc/{0}/ns/mnt (the host mount namespace): {1}")]
    Namespace(i32, std::io::Error),
    #[error("cannot start bootc in the host mount namespace: {0}")]
    Spawn(std::io::Error),
    /// The argv, and the time limit.
    #[error("bootc {0:?} did not finish within {1:?}")]
    Timeout(Vec<String>, Duration),
    #[error("waiting for bootc failed: {0}")]
    Wait(std::io::Error),
    /// The argv, bootc's exit status, and its stderr (see [`error_text`]).
    #[error("bootc {0:?} failed ({1}): {2}")]
    Failed(Vec<String>, ExitStatus, String),
    #[error("cannot prepare the units' output directory: {0}")]
    Output(String),
    /// The unit, and what that means for the call.
    #[error("{0} is running (started before this helper): {1}")]
    Busy(String, String),
}

/// Where and how bootc runs.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The process whose mount namespace is the host's (PID 1 in production).
    pub host_pid: i32,
}

/// A finished client: its exit status, stdout and stderr (bounded).
type Finished = (ExitStatus, Vec<u8>, Vec<u8>);

impl Runner {
    /// `/proc/<pid>/root`: the host's filesystem as seen from its own mount
    /// namespace (auth file, boot id).
    pub fn host_root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.host_pid))
    }

    /// Runs `program` (`systemd-run` or `systemctl`) in the host's mount
    /// namespace to completion, killing it at `timeout`.
    pub(crate) async fn run_program(
        &self,
        program: &str,
        argv: &[String],
        timeout: Duration,
    ) -> Result<Finished, RunError> {
        let ns = std::fs::File::open(format!("/proc/{}/ns/mnt", self.host_pid))
            .map_err(|e| RunError::Namespace(self.host_pid, e))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(argv).env_clear().env("PATH", FIXED_PATH);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::sys::join_mount_ns_before_exec(&mut cmd, ns.into());
        let mut child = cmd.kill_on_drop(true).spawn().map_err(RunError::Spawn)?;
        let group = child.id();
        let stdout = read_bounded(child.stdout.take(), STDOUT_MAX);
        let stderr = read_bounded(child.stderr.take(), STDERR_MAX);
        let all = async { tokio::join!(child.wait(), stdout, stderr) };
        let (status, stdout, stderr) = tokio::time::timeout(timeout, all).await.map_err(|_| {
            // The client and whatever it started in the helper's process
            // group; a unit's own processes are stopped by `run_in_unit`.
            group.into_iter().for_each(crate::sys::kill_group);
            RunError::Timeout(argv.to_vec(), timeout)
        })?;
        Ok((status.map_err(RunError::Wait)?, stdout, stderr))
    }

    /// Runs a bootc read to completion in a transient unit with its output
    /// piped back (`systemd-run` is killed at `timeout`; the read is short):
    /// its stdout.
    pub async fn run(&self, argv: &[String], timeout: Duration) -> Result<Vec<u8>, RunError> {
        tracing::info!(?argv, "running bootc");
        let (status, stdout, stderr) = self
            .run_program(SYSTEMD_RUN, &read_unit_argv(argv), timeout)
            .await?;
        failed(argv, status, &stderr)?;
        Ok(stdout)
    }

    /// Is `op`'s unit running (`systemctl is-active`)?
    pub async fn unit_running(&self, op: UnitOp) -> Result<bool, RunError> {
        let argv = systemctl_argv("is-active", op);
        let (_, stdout, _) = self.run_program(SYSTEMCTL, &argv, CLIENT_TIMEOUT).await?;
        Ok(unit_busy(&String::from_utf8_lossy(&stdout)))
    }

    /// Waits until `op`'s unit is not running: one started by an earlier
    /// helper (the daemon restarted) is waited for, never run twice.
    async fn wait_unit_idle(&self, op: UnitOp, deadline: Instant) -> Result<(), RunError> {
        let unit = op.unit();
        for poll in 0.. {
            if !self.unit_running(op).await? {
                break;
            }
            if poll == 0 {
                tracing::info!(unit, "found running, started before this helper: waiting");
            }
            if Instant::now() + UNIT_POLL > deadline {
                return Err(RunError::Busy(
                    unit,
                    "still running at the time limit".into(),
                ));
            }
            tokio::time::sleep(UNIT_POLL).await;
        }
        Ok(())
    }

    /// The error for a failed unit run: bootc's stderr from its file, or
    /// systemd-run's own when the unit did not start. The directory is
    /// opened (and created) before the run, with no symlink followed below
    /// the host root.
    fn unit_failed(
        dir: &std::os::fd::OwnedFd,
        op: UnitOp,
        argv: &[String],
        (status, _, run_stderr): Finished,
    ) -> Result<(), RunError> {
        let file = format!("{}.stderr", op.stem());
        let stderr = crate::auth::read_tail_nofollow(dir, &file, STDERR_MAX);
        let stderr = Some(stderr).filter(|s| !s.is_empty()).unwrap_or(run_stderr);
        failed(argv, status, &stderr)
    }

    fn output_dir(&self) -> Result<std::os::fd::OwnedFd, RunError> {
        let dir = crate::auth::open_host_dir(&self.host_root(), &OUTPUT_DIRS);
        dir.map(|(fd, _)| fd)
            .map_err(|e| RunError::Output(e.to_string()))
    }

    /// Runs bootc `argv` to completion in `op`'s transient unit on the host
    /// with `properties` (see [`unit_argv`]), after any run of that unit an
    /// earlier helper started has ended. At `limit` the unit is stopped.
    pub async fn run_in_unit(
        &self,
        (op, properties): (UnitOp, &[String]),
        argv: &[String],
        limit: Duration,
    ) -> Result<(), RunError> {
        let deadline = Instant::now() + limit;
        let dir = self.output_dir()?;
        self.wait_unit_idle(op, deadline).await?;
        tracing::info!(unit = op.unit(), ?argv, "running bootc in a transient unit");
        let left = deadline.saturating_duration_since(Instant::now());
        let (run, stop) = (unit_argv(op, properties, argv), systemctl_argv("stop", op));
        match self.run_program(SYSTEMD_RUN, &run, left).await {
            Err(RunError::Timeout(..)) => {
                let stopped = self.run_program(SYSTEMCTL, &stop, CLIENT_TIMEOUT).await;
                tracing::warn!(unit = op.unit(), ?stopped, "time limit: unit stopped");
                Err(RunError::Timeout(argv.to_vec(), limit))
            }
            run => Self::unit_failed(&dir, op, argv, run?),
        }
    }

    /// Starts the apply in its transient unit. bootc's `--apply` does not
    /// return on a real host (it waits for the machine to go down), so this
    /// answers once bootc has either exited successfully or is still running
    /// after `window`; a failure within the window is returned with bootc's
    /// stderr. An apply unit already running (an earlier helper's) means
    /// the reboot is under way: nothing is started again.
    pub async fn apply(&self, argv: &[String], window: Duration) -> Result<(), RunError> {
        let unit = UnitOp::Apply.unit();
        if self.unit_running(UnitOp::Apply).await? {
            tracing::info!(unit, "an earlier helper's apply runs: reboot under way");
            return Ok(());
        }
        if self.unit_running(UnitOp::Stage).await? {
            let what = "not applying while a stage runs".into();
            return Err(RunError::Busy(UnitOp::Stage.unit(), what));
        }
        let dir = self.output_dir()?;
        tracing::info!(unit, ?argv, "running bootc apply in a transient unit");
        // A task of its own: systemd-run waits for the unit (and is reaped)
        // after the answer, whenever the machine goes down.
        let (runner, unit_argv) = (self.clone(), unit_argv(UnitOp::Apply, &[], argv));
        let mut run = tokio::spawn(async move {
            runner
                .run_program(SYSTEMD_RUN, &unit_argv, APPLY_CLIENT_LIMIT)
                .await
        });
        match tokio::time::timeout(window, &mut run).await {
            Err(_) => tracing::info!("bootc apply still running: reboot under way"),
            Ok(joined) => {
                let finished = joined.map_err(|e| RunError::Wait(std::io::Error::other(e)))??;
                Self::unit_failed(&dir, UnitOp::Apply, argv, finished)?;
                tracing::info!("bootc apply exited 0");
            }
        }
        Ok(())
    }
}

/// `Err(Failed)` unless `status` is a success.
pub(crate) fn failed(argv: &[String], status: ExitStatus, stderr: &[u8]) -> Result<(), RunError> {
    if status.success() {
        return Ok(());
    }
    Err(RunError::Failed(argv.to_vec(), status, error_text(stderr)))
}

/// Reads a pipe to its end, keeping at most `max` bytes (and discarding the
/// rest, so that the child never blocks on a full pipe).
async fn read_bounded<R: AsyncRead + Unpin>(pipe: Option<R>, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = (&mut pipe).take(max as u64).read_to_end(&mut kept).await;
        let _ = tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await;
    }
    kept
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
            stage_argv(IMG, true, false),
            ["switch", "--download-only", "--", IMG]
        );
        assert_eq!(stage_argv(IMG, false, false), ["switch", "--", IMG]);
        assert_eq!(
            apply_argv(false),
            ["upgrade", "--from-downloaded", "--apply"]
        );
        assert_eq!(
            apply_argv(true),
            [
                "upgrade",
                "--from-downloaded",
                "--apply",
                "--soft-reboot=auto"
            ]
        );
    }

    #[test]
    fn unit_argv_is_fixed() {
        assert_eq!(
            unit_argv(
                UnitOp::Stage,
                &crate::validate::stage_weights(50, 20).unwrap(),
                &stage_argv(IMG, true, false)
            ),
            [
                "--unit=bootc-operator-stage.service",
                "--collect",
                "--wait",
                "--quiet",
                "--service-type=simple",
                "--property=StandardOutput=truncate:/run/bootc-operator/stage.stdout",
                "--property=StandardError=truncate:/run/bootc-operator/stage.stderr",
                "--property=IOWeight=50",
                "--property=CPUWeight=20",
                "--",
                "bootc",
                "switch",
                "--download-only",
                "--",
                IMG
            ]
        );
        assert_eq!(
            unit_argv(UnitOp::Apply, &[], &apply_argv(false))[0],
            "--unit=bootc-operator-apply.service"
        );
        assert_eq!(
            systemctl_argv("is-active", UnitOp::Stage),
            ["is-active", "bootc-operator-stage.service"]
        );
        assert_eq!(
            systemctl_argv("stop", UnitOp::Apply),
            ["stop", "bootc-operator-apply.service"]
        );
        assert!(unit_busy("active\n") && unit_busy("activating"));
        assert!(!unit_busy("inactive\n") && !unit_busy("failed") && !unit_busy(""));
    }

    #[test]
    fn sigpolicy_goes_before_the_image() {
        assert_eq!(
            stage_argv(IMG, true, true),
            [
                "switch",
                "--download-only",
                "--enforce-container-sigpolicy",
                "--",
                IMG
            ]
        );
        assert_eq!(
            stage_argv(IMG, false, true),
            ["switch", "--enforce-container-sigpolicy", "--", IMG]
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

    #[test]
    fn error_text_escapes_terminal_sequences() {
        let stderr = b"error: 500: registry says: \x1b]0;OWNED\x07\x1b[2K\x1b[1Ahidden\n";
        let t = error_text(stderr);
        assert_eq!(
            t,
            "error: 500: registry says: \\u{1b}]0;OWNED\\u{7}\\u{1b}[2K\\u{1b}[1Ahidden"
        );
    }
}
