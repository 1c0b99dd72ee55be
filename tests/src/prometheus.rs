//! A real Prometheus (Debian's `prometheus`) on loopback, with one alert
//! whose firing the test turns on and off: its rule file is rewritten and
//! Prometheus reloads it on SIGHUP. `promtool` asks it what fires.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::control_plane::free_port;

/// The test's alert, and the label the gate matches it by.
pub const ALERT: &str = "BootcGateTest";
pub const SEVERITY: &str = "critical";

/// How long Prometheus may take to start, or to act on a reload.
const WAIT: Duration = Duration::from_secs(60);

/// A running Prometheus, killed on drop.
pub struct Prometheus {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

/// The rule file: the test's alert fires while `firing` (its expression
/// has a sample) and not otherwise.
fn rules(firing: bool) -> String {
    let expr = if firing {
        "vector(1)"
    } else {
        "vector(1) == 0"
    };
    format!(
        "groups:\n- name: gate\n  interval: 1s\n  rules:\n  - alert: {ALERT}\n    expr: {expr}\n    labels:\n      severity: {SEVERITY}\n"
    )
}

impl Prometheus {
    /// Starts Prometheus with the test's alert firing or not.
    pub async fn start(firing: bool) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("rules.yaml"), rules(firing))?;
        std::fs::write(
            dir.path().join("prometheus.yaml"),
            "global:\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\n",
        )?;
        let port = free_port()?;
        let child = Command::new("prometheus")
            .current_dir(dir.path())
            .arg("--config.file=prometheus.yaml")
            .arg(format!("--storage.tsdb.path={}", data(&dir).display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log"))?)
            .spawn()
            .context("starting prometheus (Debian's package; tests/scripts/install-deps.sh)")?;
        let prometheus = Prometheus { child, dir, port };
        prometheus.wait_firing(firing).await?;
        Ok(prometheus)
    }

    /// Where the controller asks it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Turns the alert on or off and waits until Prometheus says so.
    pub async fn set_firing(&self, firing: bool) -> Result<()> {
        std::fs::write(self.dir.path().join("rules.yaml"), rules(firing))?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id())?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP)?;
        self.wait_firing(firing).await
    }

    /// Waits until the alert fires (or does not), as `promtool` reads it.
    async fn wait_firing(&self, firing: bool) -> Result<()> {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < WAIT {
            let out = tokio::process::Command::new("promtool")
                .args(["query", "instant", &self.url()])
                .arg(format!(
                    "ALERTS{{alertname=\"{ALERT}\",alertstate=\"firing\"}}"
                ))
                .output()
                .await
                .context("running promtool")?;
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && stdout.contains(ALERT) == firing {
                return Ok(());
            }
            last = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
            // Prometheus evaluates every second: ask again shortly.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let log =
            std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default();
        bail!(
            "the alert did not become firing={firing} within {WAIT:?}; promtool: {last}; log: {log}"
        )
    }
}

fn data(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("data")
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
