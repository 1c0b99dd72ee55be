//! The API server's write throughput, measured by a plain client: the
//! second term of the benchmark's ideal rollout time (an infinitely fast
//! controller still has to get the rollout's writes through the API server).
//!
//! The probe makes the kinds of writes a rollout makes, in the rollout's
//! proportions, against the same API server, its admission policies and the
//! rollout's own objects, as the same users:
//!
//! - BootcNode server-side applies as the controller (a reboot slot taken,
//!   then released: `desiredImageState` and the slot annotation);
//! - Node merge patches as the controller (cordon with the pool's marks,
//!   then uncordon);
//! - BootcNode status merge patches as the played daemons write them (the
//!   conditions' messages change);
//! - Node status patches as the played kubelet writes them (NotReady, then
//!   Ready).
//!
//! Nothing may react to these writes: the caller stops the controller and
//! the players first. [`Watchers`] keeps open the watches they held on the
//! written kinds, so that every write still fans out as it did.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use api::labels::{
    CONTROLLER_MANAGER, CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION, IN_REBOOT_SLOT_ANNOTATION,
};
use api::{BootcNode, DesiredImageState};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::daemon_player::set_ready;

/// A kind of write a rollout makes to a node's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteKind {
    /// The controller's server-side apply of a BootcNode.
    BootcNodeApply,
    /// The daemon's status patch of its BootcNode.
    BootcNodeStatus,
    /// The controller's merge patch of a Node (cordon, uncordon).
    NodePatch,
    /// The kubelet's patch of its Node's status (Ready).
    NodeStatus,
}

impl WriteKind {
    pub const ALL: [WriteKind; 4] = [
        WriteKind::BootcNodeApply,
        WriteKind::BootcNodeStatus,
        WriteKind::NodePatch,
        WriteKind::NodeStatus,
    ];

    /// The resource as the API server's request counter names it.
    pub fn resource(self) -> &'static str {
        match self {
            WriteKind::BootcNodeApply => "bootcnodes",
            WriteKind::BootcNodeStatus => "bootcnodes/status",
            WriteKind::NodePatch => "nodes",
            WriteKind::NodeStatus => "nodes/status",
        }
    }
}

/// One write of the probe: the `seq`-th write of `kind` to the `target`-th
/// node's object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub kind: WriteKind,
    pub target: usize,
    pub seq: usize,
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
            };
            placed.push((at, job));
        }
    }
    placed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.kind.cmp(&b.1.kind)));
    placed.into_iter().map(|(_, job)| job).collect()
}

/// The controller's apply of `bn` for the `seq`-th probe write: even writes
/// take a reboot slot (Booted, slot annotation), odd ones release it.
pub fn bootc_node_apply(bn: &BootcNode, seq: usize) -> Value {
    let take = seq.is_multiple_of(2);
    let mut spec = bn.spec.clone();
    spec.desired_image_state = if take {
        DesiredImageState::Booted
    } else {
        DesiredImageState::Staged
    };
    let mut annotations = bn.metadata.annotations.clone().unwrap_or_default();
    if take {
        annotations.insert(IN_REBOOT_SLOT_ANNOTATION.to_owned(), "true".to_owned());
    } else {
        annotations.remove(IN_REBOOT_SLOT_ANNOTATION);
    }
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

/// A daemon-style status patch of `bn`: its conditions as they are, each
/// message naming the probe write (so that every write changes the object).
pub fn status_patch(bn: &BootcNode, seq: usize) -> Value {
    let mut conditions = bn
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    for c in &mut conditions {
        c.message = format!("write probe {seq}");
    }
    json!({"status": {"conditions": conditions}})
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
}

impl Outcome {
    /// Writes served per second.
    pub fn throughput(&self) -> f64 {
        self.made as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

async fn write(clients: &Clients, pool: &str, bn: &BootcNode, job: Job) -> Result<()> {
    let name = bn.name_any();
    let as_controller = PatchParams {
        field_manager: Some(CONTROLLER_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match job.kind {
        WriteKind::BootcNodeApply => {
            let params = PatchParams::apply(CONTROLLER_MANAGER).force();
            let body = bootc_node_apply(bn, job.seq);
            Api::<BootcNode>::all(clients.controller.clone())
                .patch(&name, &params, &Patch::Apply(&body))
                .await?;
        }
        WriteKind::BootcNodeStatus => {
            let body = status_patch(bn, job.seq);
            Api::<BootcNode>::all(clients.admin.clone())
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await?;
        }
        WriteKind::NodePatch => {
            let body = node_patch(pool, job.seq);
            Api::<Node>::all(clients.controller.clone())
                .patch(&name, &as_controller, &Patch::Merge(&body))
                .await?;
        }
        WriteKind::NodeStatus => set_ready(&clients.admin, &name, job.seq % 2 == 1).await?,
    }
    Ok(())
}

/// Makes `jobs` against `targets` (BootcNodes, each named after its Node)
/// with `concurrency` writes in flight; times the whole run.
pub async fn run(
    clients: &Clients,
    pool: &str,
    targets: &[BootcNode],
    jobs: &[Job],
    concurrency: usize,
) -> Outcome {
    let failed = AtomicUsize::new(0);
    let first_error = std::sync::Mutex::new(None::<String>);
    let started = Instant::now();
    let writes = jobs.iter().filter_map(|job| {
        let bn = targets.get(job.target)?;
        Some(async {
            if let Err(e) = write(clients, pool, bn, *job).await {
                failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = first_error.lock() {
                    first.get_or_insert_with(|| format!("{:?} {}: {e:#}", job.kind, bn.name_any()));
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
        let at: Vec<(usize, usize)> = jobs.iter().map(|j| (j.target, j.seq)).collect();
        assert_eq!(at, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]);
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
            take["metadata"]["annotations"][IN_REBOOT_SLOT_ANNOTATION],
            "true"
        );
        assert_eq!(
            release["spec"]["desiredImageState"],
            DesiredImageState::Staged.as_str()
        );
        assert!(release["metadata"]["annotations"][IN_REBOOT_SLOT_ANNOTATION].is_null());
        for body in [&take, &release] {
            assert_eq!(body["metadata"]["annotations"]["keep"], "me");
            assert_eq!(body["metadata"]["ownerReferences"][0]["name"], "p");
            assert_eq!(body["spec"]["desiredImage"], "r/os@sha256:aa");
        }
        assert_ne!(node_patch("p", 0), node_patch("p", 1));
        assert_eq!(node_patch("p", 0)["spec"]["unschedulable"], true);
        let (s0, s1) = (status_patch(&bn, 0), status_patch(&bn, 1));
        assert_ne!(s0, s1);
        assert_eq!(s0["status"]["conditions"][0]["reason"], "R");
    }
}
