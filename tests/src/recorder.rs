//! Replays etcd's own history of Nodes and BootcNodes to prove the
//! disruption bound: at no revision were more nodes disrupted than allowed.
//!
//! Two judges replay the same history:
//!
//! * what the cluster sees ([`Recorder::peak`]): a node is disrupted at a
//!   revision when its Node is NotReady (once it has been Ready: a node
//!   still joining is not yet available to lose) or cordoned without the
//!   test having cordoned it, whatever the operator's records say;
//! * the operator's records ([`Recorder::peak_records`]): its Node carries
//!   a reboot slot's record (`bootc.dev/disrupted-by`) or is cordoned
//!   without the test having cordoned it, or its BootcNode is approved to
//!   boot (`desiredImageState: Booted`).
//!
//! The history comes from etcd (`etcdctl watch --rev=1`), not from API
//! watches: a watch that breaks (an API server restart, a 410 Expired) and
//! relists sees only the latest state and loses the writes in between,
//! which would make the replay wrong in either direction. etcd keeps every
//! revision (the test API server stores JSON and never compacts), and a
//! resourceVersion is an etcd revision, so the replay is exact.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use anyhow::{Context, bail};
use api::labels::DISRUPTED_BY_ANNOTATION;
use base64::Engine;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::control_plane::ControlPlane;

#[derive(Clone, Debug)]
enum Obs {
    Node {
        rv: u64,
        name: String,
        cordoned: bool,
        /// The Ready condition: None while the Node has none.
        ready: Option<bool>,
        /// A reboot slot's record (`bootc.dev/disrupted-by`).
        slot: bool,
        deleted: bool,
    },
    Bootc {
        rv: u64,
        name: String,
        approved: bool,
        /// Its Degraded condition is True.
        degraded: bool,
        deleted: bool,
    },
}

impl Obs {
    fn rv(&self) -> u64 {
        match self {
            Obs::Node { rv, .. } | Obs::Bootc { rv, .. } => *rv,
        }
    }
}

/// Which view of disruption a replay judges by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Judge {
    /// Node Ready and `spec.unschedulable`: what the cluster sees.
    Cluster,
    /// The operator's slot and approval records, and cordons.
    Records,
}

/// One node's state during a replay.
#[derive(Clone, Copy, Debug, Default)]
struct NodeState {
    cordoned: bool,
    not_ready: bool,
    was_ready: bool,
    /// A slot's record on its Node.
    slot: bool,
    /// An approval on its BootcNode.
    approved: bool,
}

impl NodeState {
    fn disrupted(self, judge: Judge) -> bool {
        match judge {
            Judge::Cluster => self.cordoned || self.not_ready,
            Judge::Records => self.cordoned || self.slot || self.approved,
        }
    }
}

/// A moment of maximum disruption.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    pub count: usize,
    pub nodes: BTreeSet<String>,
    pub resource_version: u64,
}

/// Reads Node and BootcNode history from the control plane's etcd.
pub struct Recorder {
    etcd: String,
    /// The revision when the recorder started: earlier writes are the test's
    /// set-up, replayed for state but not judged.
    start: u64,
    log: Mutex<Vec<Obs>>,
}

const NODE_PREFIX: &str = "/registry/minions/";
const BOOTC_NODE_PREFIX: &str = "/registry/node.bootc.dev/bootcnodes/";

/// One etcd event as the recorder sees it; None for keys it ignores.
fn observe(key: &str, rv: u64, value: Option<&Value>) -> Option<Obs> {
    let deleted = value.is_none();
    if let Some(name) = key.strip_prefix(NODE_PREFIX) {
        let cordoned = value
            .and_then(|v| v.pointer("/spec/unschedulable"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let ready = value
            .and_then(|v| v.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter().find(|c| {
                    c.get("type").and_then(Value::as_str) == Some(api::node_health::NODE_READY)
                })
            })
            .map(|c| c.get("status").and_then(Value::as_str) == Some("True"));
        let slot = value
            .and_then(|v| v.pointer("/metadata/annotations"))
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(DISRUPTED_BY_ANNOTATION));
        return Some(Obs::Node {
            rv,
            name: name.to_owned(),
            cordoned,
            ready,
            slot,
            deleted,
        });
    }
    let name = key.strip_prefix(BOOTC_NODE_PREFIX)?;
    let approved = value
        .and_then(|v| v.pointer("/spec/desiredImageState"))
        .and_then(Value::as_str)
        == Some("Booted");
    let degraded = value
        .and_then(|v| v.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(api::ConditionType::Degraded.as_str())
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    Some(Obs::Bootc {
        rv,
        name: name.to_owned(),
        approved,
        degraded,
        deleted,
    })
}

/// Parses one line of `etcdctl watch -w json`: the response's header
/// revision and its events.
fn parse_watch_line(line: &str) -> anyhow::Result<(u64, Vec<Obs>, u64)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let resp: Value = serde_json::from_str(line).context("etcdctl output is not JSON")?;
    let header_rev = resp
        .pointer("/Header/revision")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut out = Vec::new();
    let mut last = 0;
    for ev in resp
        .get("Events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kv = ev.get("kv").context("etcd event without kv")?;
        let key = kv.get("key").and_then(Value::as_str).unwrap_or_default();
        let key = String::from_utf8(b64.decode(key)?)?;
        let rev = kv
            .get("mod_revision")
            .and_then(Value::as_u64)
            .context("etcd event without mod_revision")?;
        last = last.max(rev);
        let is_delete = ev.get("type").and_then(Value::as_u64) == Some(1);
        let value = if is_delete {
            None
        } else {
            let raw = b64.decode(kv.get("value").and_then(Value::as_str).unwrap_or(""))?;
            if !(key.starts_with(NODE_PREFIX) || key.starts_with(BOOTC_NODE_PREFIX)) {
                continue;
            }
            Some(serde_json::from_slice::<Value>(&raw).with_context(|| {
                format!("{key} at revision {rev} is not JSON (API server storage media type?)")
            })?)
        };
        out.extend(observe(&key, rev, value.as_ref()));
    }
    Ok((header_rev, out, last))
}

async fn etcd_revision(endpoint: &str) -> anyhow::Result<u64> {
    let out = tokio::process::Command::new(crate::binaries::etcdctl()?)
        .args([
            &format!("--endpoints={endpoint}"),
            "endpoint",
            "status",
            "-w",
            "json",
        ])
        .output()
        .await
        .context("running etcdctl")?;
    if !out.status.success() {
        bail!(
            "etcdctl endpoint status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    v.pointer("/0/Status/header/revision")
        .and_then(Value::as_u64)
        .context("etcdctl endpoint status without a revision")
}

impl Recorder {
    /// Starts recording from the current revision.
    pub async fn start(cp: &ControlPlane) -> anyhow::Result<Self> {
        let etcd = cp.etcd_endpoint();
        let start = etcd_revision(&etcd).await?;
        Ok(Recorder {
            etcd,
            start,
            log: Mutex::new(Vec::new()),
        })
    }

    /// Reads the history up to now (every write made before this call).
    async fn sync(&self) -> anyhow::Result<()> {
        let mut child = tokio::process::Command::new(crate::binaries::etcdctl()?)
            .args([
                &format!("--endpoints={}", self.etcd),
                "watch",
                "--prefix",
                "--rev=1",
                "-w",
                "json",
                "",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("running etcdctl watch")?;
        let stdout = child.stdout.take().context("etcdctl stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut log = Vec::new();
        // The first response's header carries the revision at the time of
        // the call: read until an event at or past it.
        let mut until = None;
        let read = async {
            while let Some(line) = lines.next_line().await? {
                if line.trim().is_empty() {
                    continue;
                }
                let (header_rev, obs, last) = parse_watch_line(&line)?;
                let want = *until.get_or_insert(header_rev);
                log.extend(obs);
                if last >= want {
                    return Ok(());
                }
            }
            bail!("etcdctl watch ended before the history was read")
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), read)
            .await
            .context("reading etcd's history took over 60 s")??;
        let _ = child.kill().await;
        log.sort_by_key(Obs::rv);
        if let Ok(mut l) = self.log.lock() {
            *l = log;
        }
        Ok(())
    }

    /// Replays everything seen so far in resourceVersion order and returns
    /// the moment when the cluster saw the most disrupted nodes among
    /// `nodes` (all nodes when empty): NotReady (after having been Ready) or
    /// cordoned. Nodes in `admin_cordoned` were cordoned by the test itself:
    /// their cordon alone does not count.
    pub async fn peak(
        &self,
        nodes: &BTreeSet<String>,
        admin_cordoned: &BTreeSet<String>,
    ) -> anyhow::Result<Peak> {
        self.replay(nodes, admin_cordoned, Judge::Cluster).await
    }

    /// The same replay, judged by the operator's records: a slot, an
    /// approval, or a cordon (not the test's).
    pub async fn peak_records(
        &self,
        nodes: &BTreeSet<String>,
        admin_cordoned: &BTreeSet<String>,
    ) -> anyhow::Result<Peak> {
        self.replay(nodes, admin_cordoned, Judge::Records).await
    }

    /// The higher of the two judges' peaks (the cluster's, the records').
    pub async fn worst_peak(
        &self,
        nodes: &BTreeSet<String>,
        admin_cordoned: &BTreeSet<String>,
    ) -> anyhow::Result<Peak> {
        let seen = self.peak(nodes, admin_cordoned).await?;
        let recorded = self.peak_records(nodes, admin_cordoned).await?;
        Ok(if recorded.count > seen.count {
            recorded
        } else {
            seen
        })
    }

    async fn replay(
        &self,
        nodes: &BTreeSet<String>,
        admin_cordoned: &BTreeSet<String>,
        judge: Judge,
    ) -> anyhow::Result<Peak> {
        self.sync().await?;
        let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        let mut state: BTreeMap<String, NodeState> = BTreeMap::new();
        let mut peak = Peak::default();
        for obs in &log {
            match obs {
                Obs::Node {
                    name,
                    cordoned,
                    ready,
                    slot,
                    deleted,
                    ..
                } => {
                    let s = state.entry(name.clone()).or_default();
                    s.cordoned = *cordoned && !*deleted && !admin_cordoned.contains(name);
                    s.slot = *slot && !*deleted;
                    s.was_ready |= *ready == Some(true);
                    s.not_ready = !*deleted && s.was_ready && *ready != Some(true);
                    if *deleted {
                        s.was_ready = false;
                    }
                }
                Obs::Bootc {
                    name,
                    approved,
                    deleted,
                    ..
                } => {
                    state.entry(name.clone()).or_default().approved = *approved && !*deleted;
                }
            }
            let now: BTreeSet<String> = state
                .iter()
                .filter(|(n, s)| s.disrupted(judge) && (nodes.is_empty() || nodes.contains(*n)))
                .map(|(n, _)| n.clone())
                .collect();
            if obs.rv() >= self.start && now.len() > peak.count {
                peak = Peak {
                    count: now.len(),
                    nodes: now,
                    resource_version: obs.rv(),
                };
            }
        }
        Ok(peak)
    }

    /// The observations up to `rv` (the last `n`) as last read, for failure
    /// messages.
    pub fn timeline(&self, rv: u64, n: usize) -> String {
        let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        let upto: Vec<String> = log
            .iter()
            .filter(|o| o.rv() <= rv)
            .map(|o| format!("{o:?}"))
            .collect();
        upto[upto.len().saturating_sub(n)..].join("\n")
    }

    /// The BootcNodes whose Degraded condition was True at any revision
    /// since the recorder started.
    pub async fn ever_degraded(&self) -> anyhow::Result<BTreeSet<String>> {
        self.sync().await?;
        let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        Ok(log
            .into_iter()
            .filter(|o| o.rv() >= self.start)
            .filter_map(|o| match o {
                Obs::Bootc {
                    name,
                    degraded: true,
                    ..
                } => Some(name),
                _ => None,
            })
            .collect())
    }

    /// Every approval to boot since the recorder started (a BootcNode going
    /// from not approved to approved, or approved when it started), in
    /// order: a node rebooted twice appears twice.
    pub async fn approvals(&self) -> anyhow::Result<Vec<String>> {
        self.sync().await?;
        let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        let mut state: BTreeMap<String, bool> = BTreeMap::new();
        let mut out = Vec::new();
        let mut at_start_counted = false;
        for obs in log {
            if !at_start_counted && obs.rv() >= self.start {
                // Approved at the start counts as an approval seen.
                out.extend(state.iter().filter(|(_, a)| **a).map(|(n, _)| n.clone()));
                at_start_counted = true;
            }
            if let Obs::Bootc {
                name,
                approved,
                deleted,
                ..
            } = obs
            {
                let now = approved && !deleted;
                let before = state.insert(name.clone(), now).unwrap_or(false);
                if now && !before && at_start_counted {
                    out.push(name);
                }
            }
        }
        if !at_start_counted {
            out.extend(state.iter().filter(|(_, a)| **a).map(|(n, _)| n.clone()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn reads_etcdctl_watch_json() {
        // The shape `etcdctl watch -w json` prints (etcd 3.4): keys and
        // values base64, PUT events without a type, DELETE with type 1.
        let node = serde_json::json!({"metadata": {"annotations": {DISRUPTED_BY_ANNOTATION: "p"}},
            "spec": {"unschedulable": true}, "status": {"conditions": [
            {"type": api::node_health::NODE_READY, "status": "False"}]}})
        .to_string();
        let bn = serde_json::json!({"spec": {"desiredImageState": api::DesiredImageState::Booted},
            "status": {"conditions": [{"type": api::ConditionType::Degraded.as_str(), "status": "True"}]}})
        .to_string();
        let line = serde_json::json!({
            "Header": {"revision": 12},
            "Events": [
                {"kv": {"key": b64("/registry/minions/n1"), "mod_revision": 10, "value": b64(&node)}},
                {"kv": {"key": b64("/registry/node.bootc.dev/bootcnodes/n1"), "mod_revision": 11, "value": b64(&bn)}},
                {"kv": {"key": b64("/registry/leases/x"), "mod_revision": 11, "value": b64("\u{0}binary")}},
                {"type": 1, "kv": {"key": b64("/registry/node.bootc.dev/bootcnodes/n2"), "mod_revision": 12}},
            ],
        })
        .to_string();
        let (header, obs, last) = parse_watch_line(&line).unwrap();
        assert_eq!((header, last), (12, 12));
        let shown: Vec<String> = obs.iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(
            shown,
            [
                r#"Node { rv: 10, name: "n1", cordoned: true, ready: Some(false), slot: true, deleted: false }"#,
                r#"Bootc { rv: 11, name: "n1", approved: true, degraded: true, deleted: false }"#,
                r#"Bootc { rv: 12, name: "n2", approved: false, degraded: false, deleted: true }"#,
            ]
        );
    }
}
