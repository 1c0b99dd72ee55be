//! The API server's write throughput, measured by a plain client: the
//! second term of the benchmark's ideal rollout time (an infinitely fast
//! controller still has to get the rollout's writes through the API server).
//!
//! The probe makes the kinds of writes a rollout makes, in the rollout's
//! proportions, against the same API server, its admission policies and the
//! rollout's own objects, as the same users:
//!
//! - BootcNode server-side applies as the controller (an approval given,
//!   then withdrawn: `desiredImageState`);
//! - Node merge patches as the controller (cordon with the pool's marks,
//!   then uncordon);
//! - BootcNode status server-side applies as the played daemons write them
//!   (the whole status, a condition's message changed);
//! - Node status strategic merge patches as the played kubelet writes them
//!   (NotReady, then Ready);
//! - the pool's status server-side applies and Events (created) as the
//!   controller.
//!
//! [`Mix`] is what a set of writes is made of (verb, resource, patch type,
//! share, mean body size), read from the API server's own counters, so that
//! the probe's can be printed next to the rollout's.
//!
//! Nothing may react to these writes: the caller stops the controller and
//! the players first. [`Watchers`] keeps open the watches they held on the
//! written kinds, so that every write still fans out as it did.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use std::collections::BTreeMap;

use api::labels::{
    CLUSTER_EVENTS_NAMESPACE, CONTROLLER_MANAGER, CORDONED_BY_ANNOTATION, DAEMON_MANAGER,
    DISRUPTED_BY_ANNOTATION,
};
use api::{BootcNode, BootcNodePool, DesiredImageState};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::daemon_player::ready_body;

/// A kind of write a rollout makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteKind {
    /// The controller's server-side apply of a BootcNode.
    BootcNodeApply,
    /// The daemon's server-side apply of its BootcNode's status.
    BootcNodeStatus,
    /// The controller's merge patch of a Node (cordon, uncordon).
    NodePatch,
    /// The kubelet's strategic merge patch of its Node's status (Ready).
    NodeStatus,
    /// The controller's server-side apply of the pool's status.
    PoolStatus,
    /// The controller's Events (events.k8s.io), created.
    Event,
}

impl WriteKind {
    pub const ALL: [WriteKind; 6] = [
        WriteKind::BootcNodeApply,
        WriteKind::BootcNodeStatus,
        WriteKind::NodePatch,
        WriteKind::NodeStatus,
        WriteKind::PoolStatus,
        WriteKind::Event,
    ];

    /// The resource as the API server's request counter names it.
    pub fn resource(self) -> &'static str {
        match self {
            WriteKind::BootcNodeApply => "bootcnodes",
            WriteKind::BootcNodeStatus => "bootcnodes/status",
            WriteKind::NodePatch => "nodes",
            WriteKind::NodeStatus => "nodes/status",
            WriteKind::PoolStatus => "bootcnodepools/status",
            WriteKind::Event => "events",
        }
    }

    /// The verb as the API server's request counter names it.
    pub fn verb(self) -> &'static str {
        match self {
            WriteKind::BootcNodeApply | WriteKind::BootcNodeStatus | WriteKind::PoolStatus => {
                "APPLY"
            }
            WriteKind::NodePatch | WriteKind::NodeStatus => "PATCH",
            WriteKind::Event => "POST",
        }
    }

    /// The kind of the write with this counter's resource and verb.
    pub fn of(resource: &str, verb: &str) -> Option<WriteKind> {
        WriteKind::ALL
            .into_iter()
            .find(|k| k.resource() == resource && k.verb() == verb)
    }
}

/// The body's type of a write, as the rollout's writers send it (the API
/// server's counters tell the verb, not the patch type): the controller's
/// and the daemon's applies, the controller's merge patches of Nodes, the
/// kubelet's strategic merge patches of their status, the rest as their
/// verb says.
pub fn patch_type(resource: &str, verb: &str) -> &'static str {
    match (verb, resource) {
        ("APPLY", _) => "apply",
        ("PATCH", "nodes/status") => "strategic",
        ("PATCH", _) => "merge",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("DELETE" | "DELETECOLLECTION", _) => "delete",
        _ => "?",
    }
}

/// One write of the probe: the `seq`-th write of `kind` to the `target`-th
/// node's object, the `nth` of its kind (the pool's writes, to one object,
/// count by `nth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub kind: WriteKind,
    pub target: usize,
    pub seq: usize,
    pub nth: usize,
}

/// `total` writes in the proportions of `counts` (largest remainder), spread
/// round-robin over `targets` nodes, the kinds interleaved evenly so that
/// any stretch of the probe has the rollout's mix.
pub fn plan(counts: &[(WriteKind, f64)], total: usize, targets: usize) -> Vec<Job> {
    let sum: f64 = counts.iter().map(|(_, c)| c.max(0.0)).sum();
    if targets == 0 || total == 0 || sum <= 0.0 {
        return Vec::new();
    }
    let exact: Vec<f64> = counts
        .iter()
        .map(|(_, c)| c.max(0.0) / sum * total as f64)
        .collect();
    let mut share: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut by_remainder: Vec<usize> = (0..counts.len()).collect();
    by_remainder.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let short = total - share.iter().sum::<usize>();
    for &i in by_remainder.iter().take(short) {
        share[i] += 1;
    }
    // Each job's place is the middle of its share of the run.
    let mut placed: Vec<(f64, Job)> = Vec::with_capacity(total);
    for (&(kind, _), &n) in counts.iter().zip(&share) {
        for j in 0..n {
            let at = (j as f64 + 0.5) / n as f64;
            let job = Job {
                kind,
                target: j % targets,
                seq: j / targets,
                nth: j,
            };
            placed.push((at, job));
        }
    }
    placed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.kind.cmp(&b.1.kind)));
    placed.into_iter().map(|(_, job)| job).collect()
}

/// The controller's apply of `bn` for the `seq`-th probe write: even writes
/// approve it to boot, odd ones withdraw the approval.
pub fn bootc_node_apply(bn: &BootcNode, seq: usize) -> Value {
    let take = seq.is_multiple_of(2);
    let mut spec = bn.spec.clone();
    spec.desired_image_state = if take {
        DesiredImageState::Booted
    } else {
        DesiredImageState::Staged
    };
    let annotations = bn.metadata.annotations.clone().unwrap_or_default();
    json!({
        "apiVersion": BootcNode::api_version(&()),
        "kind": BootcNode::kind(&()),
        "metadata": {
            "name": bn.name_any(),
            "annotations": annotations,
            "ownerReferences": bn.metadata.owner_references.clone().unwrap_or_default(),
        },
        "spec": spec,
    })
}

/// The controller's Node patch for the `seq`-th probe write: even writes
/// cordon with the pool's marks, odd ones uncordon and clear them.
pub fn node_patch(pool: &str, seq: usize) -> Value {
    let on = seq.is_multiple_of(2);
    let mark = if on { json!(pool) } else { Value::Null };
    json!({
        "spec": {"unschedulable": if on { json!(true) } else { Value::Null }},
        "metadata": {"annotations": {
            CORDONED_BY_ANNOTATION: mark.clone(),
            DISRUPTED_BY_ANNOTATION: mark,
        }},
    })
}

/// The daemon's apply of `bn`'s status for the `seq`-th probe write: the
/// whole status as the daemon applies it, each condition's message naming
/// the probe write (so that every write changes the object).
pub fn status_apply(bn: &BootcNode, seq: usize) -> Value {
    let mut status = bn.status.clone().unwrap_or_default();
    for c in &mut status.conditions {
        c.message = format!("write probe {seq}").into();
    }
    json!({
        "apiVersion": BootcNode::api_version(&()),
        "kind": BootcNode::kind(&()),
        "status": status,
    })
}

/// The controller's apply of the pool's status for the `nth` probe write:
/// the status as it is, one more node updating on even writes (so that
/// consecutive writes differ).
pub fn pool_status_apply(pool: &BootcNodePool, nth: usize) -> Value {
    let mut status = pool.status.clone().unwrap_or_default();
    if nth.is_multiple_of(2) {
        status.updating_count += 1;
    }
    json!({
        "apiVersion": BootcNodePool::api_version(&()),
        "kind": BootcNodePool::kind(&()),
        "status": status,
    })
}

/// An Event as the controller publishes one about `pool` and a node
/// (`controller/src/actions/events.rs`), the `nth` of the probe.
pub fn event(pool: &BootcNodePool, node: &str, nth: usize, now: jiff::Timestamp) -> Value {
    let name = pool.metadata.name.clone().unwrap_or_default();
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": format!("{name}.{:x}{nth:x}", now.as_nanosecond()),
                     "namespace": CLUSTER_EVENTS_NAMESPACE},
        "action": api::event_reasons::ROLLOUT_STARTED,
        "reason": api::event_reasons::ROLLOUT_STARTED,
        "note": format!("rolling out {} to its nodes, probe write {nth}", name),
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "regarding": {"apiVersion": BootcNodePool::api_version(&()),
                      "kind": BootcNodePool::kind(&()), "name": name,
                      "uid": pool.metadata.uid.clone()},
        "related": {"apiVersion": "v1", "kind": "Node", "name": node},
        "reportingController": format!("node.bootc.dev/{CONTROLLER_MANAGER}"),
        "reportingInstance": "write-probe",
        "type": "Normal",
    })
}

/// One write request as the API server's request counter names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WriteKey {
    /// The API group ("" for the core group).
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    /// APPLY, PATCH, POST, PUT, DELETE or DELETECOLLECTION.
    pub verb: String,
}

impl WriteKey {
    /// The labels the API server's body-size histogram files this write
    /// under: its group, the resource without subresource, and the body's
    /// verb (apply is a patch).
    pub fn body_key(&self) -> BodyKey {
        let resource = self.resource.split('/').next().unwrap_or_default();
        let verb = match self.verb.as_str() {
            "APPLY" | "PATCH" => "patch",
            "POST" => "create",
            "PUT" => "update",
            _ => "delete",
        };
        (self.group.clone(), resource.to_owned(), verb.to_owned())
    }
}

/// The body-size histogram's labels: group, resource, verb.
pub type BodyKey = (String, String, String);

const WRITE_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// Writes the API server served: its counters, as read from `/metrics`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Served {
    /// Requests, by what they wrote.
    pub requests: BTreeMap<WriteKey, f64>,
    /// Request bodies, by the body-size histogram's labels: (count, bytes).
    pub bodies: BTreeMap<BodyKey, (f64, f64)>,
}

/// The API server's `/metrics` text, read as `admin`.
pub async fn metrics_text(admin: &kube::Client) -> Result<String> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    admin
        .request_text(req)
        .await
        .context("reading the API server's /metrics")
}

/// The value of label `name` in `labels` (`a="x",b="y"`).
pub fn label(labels: &str, name: &str) -> String {
    labels
        .split(',')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\""))
        .map(|v| v.trim_end_matches('"').to_owned())
        .unwrap_or_default()
}

/// The labels and value of a sample of `metric` (None: another metric).
pub fn sample<'a>(line: &'a str, metric: &str) -> Option<(&'a str, f64)> {
    let rest = line.strip_prefix(metric)?.strip_prefix('{')?;
    let (labels, value) = rest.rsplit_once("} ")?;
    Some((labels, value.trim().parse().ok()?))
}

impl Served {
    /// The write requests (`apiserver_request_total`) and request bodies
    /// (`apiserver_request_body_size_bytes`) in a `/metrics` text.
    pub fn parse(metrics: &str) -> Served {
        let mut served = Served::default();
        for line in metrics.lines() {
            if let Some((labels, n)) = sample(line, "apiserver_request_total") {
                let verb = label(labels, "verb");
                if !WRITE_VERBS.contains(&verb.as_str()) {
                    continue;
                }
                let (resource, sub) = (label(labels, "resource"), label(labels, "subresource"));
                let key = WriteKey {
                    group: label(labels, "group"),
                    resource: if sub.is_empty() {
                        resource
                    } else {
                        format!("{resource}/{sub}")
                    },
                    verb,
                };
                *served.requests.entry(key).or_default() += n;
            }
            for (metric, count) in [
                ("apiserver_request_body_size_bytes_count", true),
                ("apiserver_request_body_size_bytes_sum", false),
            ] {
                if let Some((labels, n)) = sample(line, metric) {
                    let key = (
                        label(labels, "group"),
                        label(labels, "resource"),
                        label(labels, "verb"),
                    );
                    let e = served.bodies.entry(key).or_default();
                    if count { e.0 += n } else { e.1 += n }
                }
            }
        }
        served
    }

    /// What was served since `earlier`.
    pub fn since(&self, earlier: &Served) -> Served {
        let requests = self
            .requests
            .iter()
            .map(|(k, n)| (k.clone(), n - earlier.requests.get(k).unwrap_or(&0.0)))
            .filter(|(_, n)| *n > 0.0)
            .collect();
        let bodies = self
            .bodies
            .iter()
            .map(|(k, (c, b))| {
                let (c0, b0) = earlier.bodies.get(k).copied().unwrap_or_default();
                (k.clone(), (c - c0, b - b0))
            })
            .filter(|(_, (c, _))| *c > 0.0)
            .collect();
        Served { requests, bodies }
    }

    /// Write requests to `resource` (`resource/subresource`), any verb.
    pub fn writes_to(&self, resource: &str) -> f64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.resource == resource)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn total(&self) -> f64 {
        self.requests.values().sum()
    }

    /// The writes the probe can make, by kind, as many as were served.
    pub fn by_kind(&self) -> Vec<(WriteKind, f64)> {
        WriteKind::ALL
            .iter()
            .map(|k| {
                let n = self
                    .requests
                    .iter()
                    .filter(|(w, _)| WriteKind::of(&w.resource, &w.verb) == Some(*k))
                    .map(|(_, n)| n)
                    .sum();
                (*k, n)
            })
            .collect()
    }
}

/// One kind of write in a [`Mix`].
#[derive(Clone, Debug, PartialEq)]
pub struct MixRow {
    pub key: WriteKey,
    pub patch_type: &'static str,
    /// This kind's share of all writes (0..1).
    pub share: f64,
    /// Mean body size of the writes the API server files under the same
    /// body label (a resource's writes and its status's share one).
    pub mean_body: Option<f64>,
}

/// What a set of writes is made of, kind by kind, largest share first.
pub fn mix(served: &Served) -> Vec<MixRow> {
    let total = served.total().max(f64::MIN_POSITIVE);
    let mut rows: Vec<MixRow> = served
        .requests
        .iter()
        .map(|(key, n)| MixRow {
            key: key.clone(),
            patch_type: patch_type(&key.resource, &key.verb),
            share: n / total,
            mean_body: served
                .bodies
                .get(&key.body_key())
                .filter(|(c, _)| *c > 0.0)
                .map(|(c, b)| b / c),
        })
        .collect();
    rows.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.key.cmp(&b.key)));
    rows
}

/// The rollout's mix next to the probe's, one line a kind (every kind of
/// either): `verb resource (patch type)`, then share and mean body bytes
/// of each.
pub fn mix_lines(rollout: &[MixRow], probe: &[MixRow]) -> Vec<(String, String)> {
    let mut keys: Vec<&WriteKey> = rollout.iter().map(|r| &r.key).collect();
    for r in probe {
        if !keys.contains(&&r.key) {
            keys.push(&r.key);
        }
    }
    let cell = |rows: &[MixRow], key: &WriteKey| {
        rows.iter().find(|r| &r.key == key).map_or_else(
            || "-".to_owned(),
            |r| {
                let body = r
                    .mean_body
                    .map_or_else(|| "?".to_owned(), |b| format!("{b:.0} B"));
                format!("{:.1}% {body}", r.share * 100.0)
            },
        )
    };
    keys.into_iter()
        .map(|key| {
            let what = format!(
                "{} {} ({})",
                key.verb,
                key.resource,
                patch_type(&key.resource, &key.verb)
            );
            (
                what,
                format!("{} | {}", cell(rollout, key), cell(probe, key)),
            )
        })
        .collect()
}

/// Who writes: the controller's identity for its writes, the admin for the
/// played daemons' and kubelet's (as the players do).
#[derive(Clone)]
pub struct Clients {
    pub controller: kube::Client,
    pub admin: kube::Client,
}

/// What one probe run did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub made: usize,
    pub failed: usize,
    pub first_error: Option<String>,
    pub seconds: f64,
    /// Writes made and their bodies' bytes, by kind (as the client sent them).
    pub bytes: BTreeMap<WriteKind, (usize, usize)>,
}

impl Outcome {
    /// Writes served per second.
    pub fn throughput(&self) -> f64 {
        self.made as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// The objects the probe writes: the nodes' BootcNodes (each named after
/// its Node) and their pool.
pub struct Targets<'a> {
    pub nodes: &'a [BootcNode],
    pub pool: &'a BootcNodePool,
}

/// The body of `job` against `bn` and the pool.
fn body(job: Job, bn: &BootcNode, pool: &BootcNodePool) -> Value {
    let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
    match job.kind {
        WriteKind::BootcNodeApply => bootc_node_apply(bn, job.seq),
        WriteKind::BootcNodeStatus => status_apply(bn, job.seq),
        WriteKind::NodePatch => node_patch(pool_name, job.seq),
        WriteKind::NodeStatus => ready_body(job.seq % 2 == 1),
        WriteKind::PoolStatus => pool_status_apply(pool, job.nth),
        WriteKind::Event => event(pool, &bn.name_any(), job.nth, jiff::Timestamp::now()),
    }
}

/// Makes one write; returns the size of its body.
async fn write(clients: &Clients, pool: &BootcNodePool, bn: &BootcNode, job: Job) -> Result<usize> {
    let name = bn.name_any();
    let body = body(job, bn, pool);
    let size = serde_json::to_vec(&body)?.len();
    let as_controller = PatchParams {
        field_manager: Some(CONTROLLER_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let bootc_nodes = |c: &kube::Client| Api::<BootcNode>::all(c.clone());
    let nodes = |c: &kube::Client| Api::<Node>::all(c.clone());
    match job.kind {
        WriteKind::BootcNodeApply => {
            let params = PatchParams::apply(CONTROLLER_MANAGER).force();
            let _ = bootc_nodes(&clients.controller)
                .patch(&name, &params, &Patch::Apply(&body))
                .await?;
        }
        WriteKind::BootcNodeStatus => {
            let params = PatchParams::apply(DAEMON_MANAGER).force();
            let _ = bootc_nodes(&clients.admin)
                .patch_status(&name, &params, &Patch::Apply(&body))
                .await?;
        }
        WriteKind::NodePatch => {
            let _ = nodes(&clients.controller)
                .patch(&name, &as_controller, &Patch::Merge(&body))
                .await?;
        }
        WriteKind::NodeStatus => {
            let _ = nodes(&clients.admin)
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&body))
                .await?;
        }
        WriteKind::PoolStatus => {
            let params = PatchParams::apply(CONTROLLER_MANAGER).force();
            let _ = Api::<BootcNodePool>::all(clients.controller.clone())
                .patch_status(&pool.name_any(), &params, &Patch::Apply(&body))
                .await?;
        }
        WriteKind::Event => {
            let event: Event = serde_json::from_value(body)?;
            let _ = Api::<Event>::namespaced(clients.controller.clone(), CLUSTER_EVENTS_NAMESPACE)
                .create(&PostParams::default(), &event)
                .await?;
        }
    }
    Ok(size)
}

/// Makes `jobs` against `targets` with `concurrency` writes in flight;
/// times the whole run.
pub async fn run(
    clients: &Clients,
    targets: &Targets<'_>,
    jobs: &[Job],
    concurrency: usize,
) -> Outcome {
    let failed = AtomicUsize::new(0);
    let first_error = std::sync::Mutex::new(None::<String>);
    let bytes = std::sync::Mutex::new(BTreeMap::<WriteKind, (usize, usize)>::new());
    let started = Instant::now();
    let writes = jobs.iter().filter_map(|job| {
        let bn = targets.nodes.get(job.target)?;
        Some(async {
            match write(clients, targets.pool, bn, *job).await {
                Ok(size) => {
                    if let Ok(mut b) = bytes.lock() {
                        let e = b.entry(job.kind).or_default();
                        *e = (e.0 + 1, e.1 + size);
                    }
                }
                Err(e) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut first) = first_error.lock() {
                        first.get_or_insert_with(|| {
                            format!("{:?} {}: {e:#}", job.kind, bn.name_any())
                        });
                    }
                }
            }
        })
    });
    futures::stream::iter(writes)
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<()>>()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let failed = failed.into_inner();
    Outcome {
        made: jobs.len().saturating_sub(failed),
        failed,
        first_error: first_error.into_inner().ok().flatten(),
        seconds,
        bytes: bytes.into_inner().unwrap_or_default(),
    }
}

/// Watches that stand in for the stopped controller's and players' on the
/// written kinds (BootcNodes: the controller and the player; Nodes: the
/// controller), each draining its events; stopped when dropped.
pub struct Watchers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn drain<K>(api: Api<K>, listed: tokio::sync::mpsc::Sender<()>) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            if let Ok(watcher::Event::InitDone) = event {
                let _ = listed.send(()).await;
            }
        }
    })
}

impl Watchers {
    /// Starts the watches and returns once each has listed its objects
    /// (the lists are not part of the timed writes).
    pub async fn start(admin: &kube::Client, timeout: Duration) -> Result<Watchers> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(3);
        let tasks = vec![
            drain(Api::<BootcNode>::all(admin.clone()), tx.clone()),
            drain(Api::<BootcNode>::all(admin.clone()), tx.clone()),
            drain(Api::<Node>::all(admin.clone()), tx),
        ];
        let watchers = Watchers { tasks };
        let listed = async {
            for _ in 0..watchers.tasks.len() {
                rx.recv().await;
            }
        };
        tokio::time::timeout(timeout, listed)
            .await
            .context("the probe's watches did not list their objects in time")?;
        Ok(watchers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(jobs: &[Job], kind: WriteKind) -> usize {
        jobs.iter().filter(|j| j.kind == kind).count()
    }

    #[test]
    fn the_plan_keeps_the_rollouts_proportions_and_total() {
        let counts = [
            (WriteKind::BootcNodeApply, 4000.0),
            (WriteKind::BootcNodeStatus, 4000.0),
            (WriteKind::NodePatch, 2000.0),
            (WriteKind::NodeStatus, 2000.0),
        ];
        // (total, want per kind in the order of `counts`)
        let rows = [
            (12_000, [4000, 4000, 2000, 2000]),
            (600, [200, 200, 100, 100]),
            (7, [3, 2, 1, 1]),
            (0, [0, 0, 0, 0]),
        ];
        for (total, want) in rows {
            let jobs = plan(&counts, total, 1000);
            assert_eq!(jobs.len(), total, "total {total}");
            for ((kind, _), want) in counts.iter().zip(want) {
                assert_eq!(count(&jobs, *kind), want, "{kind:?} of {total}");
            }
        }
    }

    #[test]
    fn every_stretch_of_the_plan_has_the_mix() {
        let counts = [
            (WriteKind::BootcNodeApply, 2.0),
            (WriteKind::NodePatch, 1.0),
            (WriteKind::NodeStatus, 0.0),
        ];
        let jobs = plan(&counts, 3000, 500);
        for stretch in jobs.chunks(30) {
            assert_eq!(count(stretch, WriteKind::BootcNodeApply), 20);
            assert_eq!(count(stretch, WriteKind::NodePatch), 10);
            assert_eq!(count(stretch, WriteKind::NodeStatus), 0);
        }
    }

    #[test]
    fn writes_go_round_robin_and_each_objects_writes_alternate() {
        let jobs = plan(&[(WriteKind::NodePatch, 1.0)], 5, 2);
        let at: Vec<(usize, usize, usize)> =
            jobs.iter().map(|j| (j.target, j.seq, j.nth)).collect();
        assert_eq!(at, [(0, 0, 0), (1, 0, 1), (0, 1, 2), (1, 1, 3), (0, 2, 4)]);
        assert!(plan(&[(WriteKind::NodePatch, 1.0)], 5, 0).is_empty());
        assert!(plan(&[(WriteKind::NodePatch, 0.0)], 5, 2).is_empty());
    }

    fn bootc_node() -> BootcNode {
        serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
            "metadata": {"name": "n1", "annotations": {"keep": "me"},
                         "ownerReferences": [{"apiVersion": "node.bootc.dev/v1alpha1",
                             "kind": "BootcNodePool", "name": "p", "uid": "u"}]},
            "spec": {"desiredImage": "r/os@sha256:aa"},
            "status": {"conditions": [{"type": "T", "status": "True", "reason": "R",
                "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap()
    }

    /// Consecutive writes to one object differ (else the API server would
    /// skip them as no-ops), and each keeps what the object's writer keeps.
    #[test]
    fn consecutive_writes_to_an_object_change_it() {
        let bn = bootc_node();
        let take = bootc_node_apply(&bn, 0);
        let release = bootc_node_apply(&bn, 1);
        assert_eq!(
            take["spec"]["desiredImageState"],
            DesiredImageState::Booted.as_str()
        );
        assert_eq!(
            release["spec"]["desiredImageState"],
            DesiredImageState::Staged.as_str()
        );
        for body in [&take, &release] {
            assert_eq!(body["metadata"]["annotations"]["keep"], "me");
            assert_eq!(body["metadata"]["ownerReferences"][0]["name"], "p");
            assert_eq!(body["spec"]["desiredImage"], "r/os@sha256:aa");
        }
        assert_ne!(node_patch("p", 0), node_patch("p", 1));
        assert_eq!(node_patch("p", 0)["spec"]["unschedulable"], true);
        let (s0, s1) = (status_apply(&bn, 0), status_apply(&bn, 1));
        assert_ne!(s0, s1);
        assert_eq!(s0["kind"], "BootcNode");
        assert_eq!(s0["status"]["conditions"][0]["reason"], "R");
        let pool: BootcNodePool = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"nodeSelector": {}, "image": {"ref": "r/os:1"}},
        }))
        .unwrap();
        assert_ne!(pool_status_apply(&pool, 0), pool_status_apply(&pool, 1));
        let now = jiff::Timestamp::now();
        let (e0, e1) = (event(&pool, "n1", 0, now), event(&pool, "n1", 1, now));
        assert_ne!(e0["metadata"]["name"], e1["metadata"]["name"]);
        assert_eq!(e0["regarding"]["name"], "p");
        let _: Event = serde_json::from_value(e0).unwrap();
    }

    #[test]
    fn each_kind_is_found_by_its_counters_resource_and_verb() {
        for kind in WriteKind::ALL {
            assert_eq!(WriteKind::of(kind.resource(), kind.verb()), Some(kind));
        }
        // (resource, verb, kind, patch type)
        let rows = [
            (
                "bootcnodes",
                "APPLY",
                Some(WriteKind::BootcNodeApply),
                "apply",
            ),
            ("bootcnodes", "PATCH", None, "merge"),
            (
                "bootcnodes/status",
                "APPLY",
                Some(WriteKind::BootcNodeStatus),
                "apply",
            ),
            ("nodes", "PATCH", Some(WriteKind::NodePatch), "merge"),
            (
                "nodes/status",
                "PATCH",
                Some(WriteKind::NodeStatus),
                "strategic",
            ),
            (
                "bootcnodepools/status",
                "APPLY",
                Some(WriteKind::PoolStatus),
                "apply",
            ),
            ("events", "POST", Some(WriteKind::Event), "create"),
            ("leases", "PUT", None, "update"),
        ];
        for (resource, verb, kind, patch) in rows {
            assert_eq!(WriteKind::of(resource, verb), kind, "{verb} {resource}");
            assert_eq!(patch_type(resource, verb), patch, "{verb} {resource}");
        }
    }

    fn key(group: &str, resource: &str, verb: &str) -> WriteKey {
        WriteKey {
            group: group.into(),
            resource: resource.into(),
            verb: verb.into(),
        }
    }

    #[test]
    fn a_writes_body_is_filed_under_its_group_resource_and_body_verb() {
        // (key, body label)
        let rows = [
            (
                key("node.bootc.dev", "bootcnodes", "APPLY"),
                ("node.bootc.dev", "bootcnodes", "patch"),
            ),
            (
                key("node.bootc.dev", "bootcnodes/status", "APPLY"),
                ("node.bootc.dev", "bootcnodes", "patch"),
            ),
            (key("", "nodes/status", "PATCH"), ("", "nodes", "patch")),
            (
                key("events.k8s.io", "events", "POST"),
                ("events.k8s.io", "events", "create"),
            ),
            (
                key("coordination.k8s.io", "leases", "PUT"),
                ("coordination.k8s.io", "leases", "update"),
            ),
        ];
        for (k, (group, resource, verb)) in rows {
            let want = (group.to_owned(), resource.to_owned(), verb.to_owned());
            assert_eq!(k.body_key(), want, "{k:?}");
        }
    }

    const METRICS: &str = r#"# HELP apiserver_request_total x
apiserver_request_total{code="200",component="apiserver",dry_run="",group="node.bootc.dev",resource="bootcnodes",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 30
apiserver_request_total{code="409",component="apiserver",dry_run="",group="node.bootc.dev",resource="bootcnodes",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="node.bootc.dev",resource="bootcnodes",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 99
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 8
apiserver_request_body_size_bytes_sum{group="node.bootc.dev",resource="bootcnodes",verb="patch"} 7.2e+04
apiserver_request_body_size_bytes_count{group="node.bootc.dev",resource="bootcnodes",verb="patch"} 72
apiserver_request_body_size_bytes_bucket{group="",resource="nodes",verb="patch",le="+Inf"} 8
apiserver_request_body_size_bytes_sum{group="",resource="nodes",verb="patch"} 2400
apiserver_request_body_size_bytes_count{group="",resource="nodes",verb="patch"} 8
"#;

    #[test]
    fn the_metrics_give_the_writes_and_their_bodies() {
        let served = Served::parse(METRICS);
        let want_requests = [
            (key("", "nodes/status", "PATCH"), 8.0),
            (key("node.bootc.dev", "bootcnodes", "APPLY"), 32.0),
            (key("node.bootc.dev", "bootcnodes/status", "APPLY"), 40.0),
        ];
        assert_eq!(served.requests, want_requests.into_iter().collect());
        assert_eq!(
            served.bodies[&("node.bootc.dev".into(), "bootcnodes".into(), "patch".into())],
            (72.0, 72000.0)
        );
        assert_eq!(served.writes_to("bootcnodes"), 32.0);
        assert_eq!(served.total(), 80.0);
        let by_kind: BTreeMap<_, _> = served.by_kind().into_iter().collect();
        assert_eq!(by_kind[&WriteKind::BootcNodeStatus], 40.0);
        assert_eq!(by_kind[&WriteKind::NodePatch], 0.0);
        // Since an earlier reading: only what changed.
        let earlier = Served::parse(&METRICS.replace("} 40\n", "} 10\n"));
        let delta = served.since(&earlier);
        assert_eq!(delta.total(), 30.0);
        assert!(delta.bodies.is_empty());
    }

    #[test]
    fn the_mix_gives_each_kinds_share_and_mean_body() {
        let rows = mix(&Served::parse(METRICS));
        let got: Vec<(String, &str, String, Option<f64>)> = rows
            .iter()
            .map(|r| {
                (
                    r.key.resource.clone(),
                    r.patch_type,
                    format!("{:.2}", r.share),
                    r.mean_body,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "bootcnodes/status".into(),
                    "apply",
                    "0.50".into(),
                    Some(1000.0)
                ),
                ("bootcnodes".into(), "apply", "0.40".into(), Some(1000.0)),
                (
                    "nodes/status".into(),
                    "strategic",
                    "0.10".into(),
                    Some(300.0)
                ),
            ]
        );
        assert!(mix(&Served::default()).is_empty());
    }

    #[test]
    fn the_mixes_are_printed_side_by_side() {
        let rollout = mix(&Served::parse(METRICS));
        let probe = vec![MixRow {
            key: key("", "nodes", "PATCH"),
            patch_type: "merge",
            share: 1.0,
            mean_body: None,
        }];
        let lines = mix_lines(&rollout, &probe);
        assert_eq!(
            lines,
            [
                (
                    "APPLY bootcnodes/status (apply)".to_owned(),
                    "50.0% 1000 B | -".to_owned()
                ),
                (
                    "APPLY bootcnodes (apply)".to_owned(),
                    "40.0% 1000 B | -".to_owned()
                ),
                (
                    "PATCH nodes/status (strategic)".to_owned(),
                    "10.0% 300 B | -".to_owned()
                ),
                ("PATCH nodes (merge)".to_owned(), "- | 100.0% ?".to_owned()),
            ]
        );
    }
}
