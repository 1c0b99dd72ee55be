//! A real Alertmanager (Debian's `prometheus-alertmanager`) on loopback,
//! alone (no gossip: `--cluster.listen-address=`), its state in a temporary
//! directory. The tests talk to it with its own client, `amtool`: they post
//! alerts and read which are silenced, and which silences are in force.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::control_plane::free_port;

/// How long Alertmanager may take to start.
const WAIT: Duration = Duration::from_secs(60);

/// Its configuration: every alert goes to a receiver that sends nothing.
const CONFIG: &str = "route:\n  receiver: none\nreceivers:\n- name: none\n";

/// A running Alertmanager, killed on drop.
pub struct Alertmanager {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Alertmanager {
    /// Starts Alertmanager and waits until its API answers.
    pub async fn start() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("alertmanager.yaml"), CONFIG)?;
        let port = free_port()?;
        let child = Command::new("prometheus-alertmanager")
            .current_dir(dir.path())
            .arg("--config.file=alertmanager.yaml")
            .arg(format!("--storage.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("alertmanager.log"))?)
            .spawn()
            .context(
                "starting prometheus-alertmanager (Debian's package; tests/scripts/install-deps.sh)",
            )?;
        let am = Alertmanager { child, dir, port };
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < WAIT {
            match am.amtool(&["silence", "query"]).await {
                Ok(_) => return Ok(am),
                Err(e) => last = format!("{e:#}"),
            }
            // Starting: ask again shortly.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!(
            "Alertmanager did not answer within {WAIT:?}: {last}; log: {}",
            am.log()
        )
    }

    /// Where the controller reaches it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("alertmanager.log")).unwrap_or_default()
    }

    /// `amtool ARGS -o json` against it; its output, parsed.
    async fn amtool(&self, args: &[&str]) -> Result<Value> {
        let out = tokio::process::Command::new("amtool")
            .args(args)
            .arg(format!("--alertmanager.url={}", self.url()))
            .args(["--output", "json"])
            .output()
            .await
            .context("running amtool")?;
        if !out.status.success() {
            bail!(
                "amtool {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "amtool {args:?} answered {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Posts a firing alert `alertname` with these labels, for an hour.
    pub async fn fire(&self, alertname: &str, labels: &[(&str, &str)]) -> Result<()> {
        // Firing for an hour, past any test (not Alertmanager's 5 min).
        let end = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
        let mut args = vec![
            "alert".to_owned(),
            "add".to_owned(),
            format!("--end={end}"),
            alertname.to_owned(),
        ];
        args.extend(labels.iter().map(|(k, v)| format!("{k}={v}")));
        let out = tokio::process::Command::new("amtool")
            .args(&args)
            .arg(format!("--alertmanager.url={}", self.url()))
            .output()
            .await
            .context("running amtool")?;
        if !out.status.success() {
            bail!("amtool {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// Makes a silence as a person would: `matchers` (`label=value`), its
    /// author and comment, for `duration` (such as `10m`); its id.
    pub async fn silence(
        &self,
        matchers: &[&str],
        author: &str,
        comment: &str,
        duration: &str,
    ) -> Result<String> {
        let out = tokio::process::Command::new("amtool")
            .args(["silence", "add"])
            .args([
                "--author",
                author,
                "--comment",
                comment,
                "--duration",
                duration,
            ])
            .args(matchers)
            .arg(format!("--alertmanager.url={}", self.url()))
            .output()
            .await
            .context("running amtool")?;
        if !out.status.success() {
            bail!(
                "amtool silence add: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The values of `label` of the alerts named `alertname` that a
    /// silence mutes now, as Alertmanager reads them.
    pub async fn silenced(&self, alertname: &str, label: &str) -> Result<Vec<String>> {
        let alerts = self
            .amtool(&["alert", "query", "--silenced", alertname])
            .await?;
        let alerts = alerts.as_array().cloned().unwrap_or_default();
        Ok(alerts
            .iter()
            .filter(|a| {
                a["status"]["silencedBy"]
                    .as_array()
                    .is_some_and(|s| !s.is_empty())
            })
            .filter_map(|a| a["labels"][label].as_str().map(str::to_owned))
            .collect())
    }

    /// The silences in force (active or pending): each one's `createdBy`,
    /// comment and matchers, as JSON.
    pub async fn silences(&self) -> Result<Vec<Value>> {
        let all = self.amtool(&["silence", "query"]).await?;
        Ok(all.as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
