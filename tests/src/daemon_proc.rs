//! Running `bootc-daemon` (with its real helper) against a fake host, and
//! reading its log as a stream of events. No API server: the daemon is given
//! a kubeconfig naming a closed loopback port, so its BootcNode watch just
//! backs off while the process model (helper, drop, filter, host watch) is
//! exercised. `tests::node_agent` runs it against a real API server.

use crate::fake_host::{FakeHost, bin};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The daemon's log line once it runs unprivileged, has read the host's
/// status through the helper, and has started its loop.
pub const READY: &str = "watching BootcNode";

/// The helper's log line for each `bootc status` it runs.
pub const HELPER_RAN_STATUS: &str = "running bootc argv=[\"status\"";

const NO_API_SERVER: &str = "apiVersion: v1
kind: Config
clusters:
- name: none
  cluster:
    server: http://127.0.0.1:1
users:
- name: none
  user: {}
contexts:
- name: none
  context:
    cluster: none
    user: none
current-context: none
";

/// A running daemon. Killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct DaemonProcess {
    pub child: Child,
    _kubeconfig: tempfile::NamedTempFile,
    lines: mpsc::Receiver<String>,
    /// Every log line read so far.
    pub log: Vec<String>,
    reaped: bool,
}

impl DaemonProcess {
    /// Starts the daemon against `host` (host root = the host directory,
    /// helper targeting the host's namespace holder).
    pub fn start(host: &FakeHost) -> std::io::Result<DaemonProcess> {
        Self::start_with_helper(host, &bin("bootc-helper"))
    }

    /// [`DaemonProcess::start`] with another `--helper` (e.g. `fd-probe`).
    pub fn start_with_helper(
        host: &FakeHost,
        helper: &std::path::Path,
    ) -> std::io::Result<DaemonProcess> {
        let kubeconfig = tempfile::NamedTempFile::new()?;
        std::fs::write(kubeconfig.path(), NO_API_SERVER)?;
        let mut child = Command::new(bin("bootc-daemon"))
            .args(["--node-name", "privsep-test"])
            .arg("--kubeconfig")
            .arg(kubeconfig.path())
            .arg("--helper")
            .arg(helper)
            .arg("--host-root")
            .arg(host.root())
            .args(["--host-pid", &host.pid().to_string()])
            .args(["--apply-window-ms", "500"])
            .args(["--allowed-repository", daemon::agent::repositories::ANY])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let (tx, lines) = mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(DaemonProcess {
            child,
            _kubeconfig: kubeconfig,
            lines,
            log: Vec::new(),
            reaped: false,
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for the next log line containing `needle` (an event, not a
    /// sleep); fails with the log so far on timeout or when the log ends.
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return Ok(line);
                    }
                }
                Err(e) => {
                    return Err(format!(
                        "no log line with {needle:?} ({e}); log:\n{}",
                        self.log.join("\n")
                    ));
                }
            }
        }
    }

    /// The helper's pid (the daemon's only child).
    pub fn helper_pid(&self) -> Option<i32> {
        let pid = self.pid();
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// Waits for the daemon to exit, at most `timeout` (the wait runs on a
    /// thread; its result is the event).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let pid = nix::unistd::Pid::from_raw(self.pid());
        // Reaped here, not through `Child`: Drop must not signal the pid again.
        let status = wait_pid(pid, timeout)?;
        self.reaped = true;
        Ok(status)
    }
}

/// Waits for a child (or an orphan reparented to this subreaper) to exit.
pub fn wait_pid(pid: nix::unistd::Pid, timeout: Duration) -> Result<ExitStatus, String> {
    use std::os::unix::process::ExitStatusExt;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(nix::sys::wait::waitpid(pid, None));
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(nix::sys::wait::WaitStatus::Exited(_, code))) => Ok(ExitStatus::from_raw(code << 8)),
        Ok(Ok(nix::sys::wait::WaitStatus::Signaled(_, sig, _))) => {
            Ok(ExitStatus::from_raw(sig as i32))
        }
        Ok(other) => Err(format!("waitpid({pid}): {other:?}")),
        Err(_) => Err(format!("pid {pid} still running after {timeout:?}")),
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
