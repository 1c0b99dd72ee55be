//! The shared set-up and checks of the end-to-end tests (`tests/tests/e2e/`):
//! a simulated cluster with a pool rolled out, waits that fail with the
//! cluster's state and the logs' tails, and the checks every rollout ends
//! with (all nodes on the target and booted into it, nothing left cordoned,
//! the disruption bound held over the whole run).
// Test checks: a failure is a panic that says what was expected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use api::Node;
use api::{BootcNode, BootcNodePool, ConditionType, Reason};
use kube::api::{Api, ListParams};

use crate::k8s;
use crate::recorder::Recorder;
use crate::sim::{POOL, POOL_LABEL, Sim, SimOptions};

/// How long any one wait of these tests may take.
pub const ROLLOUT: Duration = Duration::from_secs(120);

pub use crate::k8s::condition;

/// Runs the real `kubectl` as an admin, as a person would, and expects
/// success.
pub fn kubectl(sim: &Sim, args: &[&str]) {
    let out = sim.cp.kubectl().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `kubectl bootc ARGS` as an admin, as a person would, and expects
/// success: its output.
pub fn kubectl_bootc(sim: &Sim, args: &[&str]) -> String {
    let out = std::process::Command::new(crate::fake_host::bin("kubectl-bootc"))
        .args(args)
        .env("KUBECONFIG", sim.cp.kubeconfig(crate::Identity::Admin))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl bootc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Pauses or resumes the pool's rollout.
pub async fn set_paused(sim: &Sim, paused: bool) {
    sim.patch_pool(serde_json::json!({"rollout": {"paused": paused}}))
        .await
        .unwrap();
}

pub async fn wait_pool(
    sim: &Sim,
    what: &str,
    cond: impl Fn(&BootcNodePool) -> bool + Send + 'static,
) -> BootcNodePool {
    let result = k8s::wait_for(
        Api::<BootcNodePool>::all(sim.admin.clone()),
        POOL,
        ROLLOUT,
        what,
        move |p| p.is_some_and(&cond),
    )
    .await;
    match result {
        Ok(p) => p.unwrap(),
        Err(e) => panic!("{e}\n{}", diagnostics(sim).await),
    }
}

/// What a failing test needs to see: the pool, each node, the logs' tails.
pub async fn diagnostics(sim: &Sim) -> String {
    let mut out = String::new();
    if let Ok((pool, bns, nodes)) = sim.snapshot().await {
        out.push_str(&crate::display::render(
            &pool,
            &crate::display::rows(&bns, &nodes),
        ));
        for bn in &bns {
            out.push_str(&format!(
                "{}: spec {:?} annotations {:?}\n",
                bn.metadata.name.clone().unwrap_or_default(),
                bn.spec,
                bn.metadata.annotations
            ));
        }
    }
    let tail = |text: &str, n: usize| text.lines().rev().take(n).collect::<Vec<_>>().join("\n");
    let controller =
        std::fs::read_to_string(sim.log_dir().join("controller.log")).unwrap_or_default();
    out.push_str(&format!(
        "controller log (newest first):\n{}\n",
        tail(&controller, 60)
    ));
    for (node, log) in sim.daemon_logs() {
        out.push_str(&format!(
            "daemon {node} (newest first):\n{}\n",
            tail(&log, 8)
        ));
    }
    out
}

pub async fn wait_rolled(sim: &Sim, digest: &str, nodes: i32) -> BootcNodePool {
    let d = digest.to_owned();
    wait_pool(sim, &format!("all {nodes} nodes on {digest}"), move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.deployed_digest.as_deref() == Some(d.as_str())
                && s.updated_count == nodes
                && s.node_count == nodes
                // Every slot released, too (the message names slot holders).
                && api::conditions::message(&s.conditions, api::ConditionType::UpToDate)
                    .is_some_and(|m| !m.contains("in reboot slots"))
        })
    })
    .await
}

/// Every node runs `image` (`repository@digest`): the digest bootc
/// deployed, whatever reference it was given (a tag, for a host installed
/// from one).
pub async fn booted_everywhere(sim: &Sim, image: &str) {
    let bns = Api::<BootcNode>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for bn in bns {
        let booted = bn.status.and_then(|s| s.booted);
        let digest = booted.as_ref().and_then(|b| b.image_digest.as_deref());
        assert_eq!(
            digest,
            api::image_ref::digest_of(image),
            "{:?} booted {booted:?}",
            bn.metadata.name
        );
    }
}

pub async fn nothing_cordoned(sim: &Sim) {
    let nodes = Api::<Node>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for n in nodes {
        assert!(!is_cordoned(&n), "{:?} left cordoned", n.metadata.name);
        // Nor is Karpenter told to leave it alone.
        assert!(
            !api::node_health::karpenter_do_not_disrupt(&n),
            "{:?} left with karpenter.sh/do-not-disrupt",
            n.metadata.name
        );
    }
}

/// Replays the whole run and fails, with the timeline, if the cluster ever
/// saw more than `max` nodes disrupted at once (NotReady as the kubelets
/// report it, or cordoned); returns its peak. The judge of the real-node
/// tests, where the cluster alone is the judge.
pub async fn assert_cluster_disruption_at_most(
    recorder: &Recorder,
    max: usize,
) -> crate::recorder::Peak {
    let all = BTreeSet::new();
    let seen = recorder.peak(&all, &all).await.unwrap();
    assert!(
        seen.count <= max,
        "the cluster saw more than {max} nodes disrupted at once: {seen:?}\n{}",
        recorder.timeline(seen.resource_version, 40)
    );
    seen
}

/// Replays the whole run and fails, with the timeline, if more than `max`
/// nodes were ever disrupted at once, as the cluster saw it (NotReady or
/// cordoned) or as the operator's records say; returns the cluster's peak.
pub async fn assert_disruption_at_most(recorder: &Recorder, max: usize) -> crate::recorder::Peak {
    let seen = assert_cluster_disruption_at_most(recorder, max).await;
    let all = BTreeSet::new();
    let recorded = recorder.peak_records(&all, &all).await.unwrap();
    assert!(
        recorded.count <= max,
        "the records say more than {max} nodes disrupted at once: {recorded:?}\n{}",
        recorder.timeline(recorded.resource_version, 30)
    );
    seen
}

/// `nodes` nodes on `digest`, nothing left cordoned (nor marked
/// do-not-disrupt for Karpenter), and never more than
/// one node disrupted at once.
pub async fn rolled_out_within_one(sim: &Sim, recorder: &Recorder, digest: &str, nodes: i32) {
    wait_rolled(sim, digest, nodes).await;
    nothing_cordoned(sim).await;
    assert_disruption_at_most(recorder, 1).await;
}

/// The end every one-slot rollout must reach: [`rolled_out_within_one`],
/// and each node booted into `digest`.
pub async fn rolled_out_one_at_a_time(sim: &Sim, recorder: &Recorder, digest: &str, nodes: i32) {
    rolled_out_within_one(sim, recorder, digest, nodes).await;
    booted_everywhere(sim, &sim.pinned(digest)).await;
}

/// Waits until the pool targets `digest` and at least `updated` members
/// run it.
pub async fn wait_updated(sim: &Sim, digest: &str, updated: i32) -> BootcNodePool {
    let target = digest.to_owned();
    let what = format!("{updated} nodes on {digest}");
    wait_pool(sim, &what, move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count >= updated
        })
    })
    .await
}

/// A spec change (a new drain timeout) is observed and the pool is still
/// Degraded for `reason`: whatever the controller sees next, a halt or a
/// stuck node holds.
pub async fn still_degraded_after_a_spec_change(sim: &Sim, reason: Reason) {
    sim.patch_pool(serde_json::json!({"rollout": {"drainTimeoutSeconds": 61}}))
        .await
        .unwrap();
    wait_pool(
        sim,
        &format!("still {reason} after a spec change"),
        move |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.observed_generation == p.metadata.generation)
                && condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == reason)
        },
    )
    .await;
}

/// Waits until BootcNode `name` reports `phase` (its Idle condition's
/// reason).
pub async fn wait_phase(sim: &Sim, name: &str, phase: &'static str) {
    let result = k8s::wait_for(
        Api::<BootcNode>::all(sim.admin.clone()),
        name,
        ROLLOUT,
        phase,
        move |b: Option<&BootcNode>| {
            b.and_then(|b| b.status.as_ref()).is_some_and(|s| {
                api::conditions::reason(&s.conditions, ConditionType::Idle) == Some(phase)
            })
        },
    )
    .await;
    if let Err(e) = result {
        panic!("{e}\n{}", diagnostics(sim).await);
    }
}

/// Takes Node `name` out of the pool: its pool label removed.
pub async fn leave_pool(sim: &Sim, name: &str) {
    Api::<Node>::all(sim.admin.clone())
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"labels": {POOL_LABEL: null}}}),
            ),
        )
        .await
        .unwrap();
}

pub async fn started(options: SimOptions, nodes: usize) -> (Sim, Recorder, String) {
    let mut sim = Sim::start(options).await.unwrap();
    let recorder = Recorder::start(&sim.cp).await.unwrap();
    let v1 = sim.push_version("1.0").await.unwrap();
    sim.add_nodes(nodes, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_rolled(&sim, &v1, i32::try_from(nodes).unwrap()).await;
    (sim, recorder, v1)
}

/// The node that takes the first slot (candidates go in name order).
pub const FIRST: &str = "sim-node-1";

pub async fn wait_node(
    sim: &Sim,
    name: &str,
    what: &str,
    cond: impl Fn(&Node) -> bool + Send + 'static,
) {
    let result = k8s::wait_for(
        Api::<Node>::all(sim.admin.clone()),
        name,
        ROLLOUT,
        what,
        move |n: Option<&Node>| n.is_some_and(&cond),
    )
    .await;
    if let Err(e) = result {
        panic!("{e}\n{}", diagnostics(sim).await);
    }
}

pub use api::node_health::{is_cordoned, is_ready};

/// Back from its reboot: Ready and uncordoned.
pub fn is_back(n: &Node) -> bool {
    is_ready(n) && !is_cordoned(n)
}

/// Back from its reboot and out of the pool: Ready, uncordoned, unlabelled.
pub fn back_and_left(n: &Node) -> bool {
    is_back(n)
        && !n
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(api::labels::MANAGED_LABEL))
}

/// Waits for a `reason` Event published by controller replica `instance`
/// whose note mentions `text`.
pub async fn wait_event_from(sim: &Sim, reason: &str, instance: &str, text: &str) {
    use k8s_openapi::api::events::v1::Event;
    let events: Api<Event> =
        Api::namespaced(sim.admin.clone(), api::labels::CLUSTER_EVENTS_NAMESPACE);
    let deadline = std::time::Instant::now() + ROLLOUT;
    loop {
        let found = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.reporting_instance.as_deref() == Some(instance)
                    && e.note.as_deref().unwrap_or_default().contains(text)
            });
        if found {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {reason} event from {instance} about {text}\n{}",
            diagnostics(sim).await
        );
        // Events are few and not watched by the sim: poll them.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Plays the kubelet for the pods of `namespace`: a pod marked for deletion
/// (evicted) is gone at once.
pub fn kubelet_deletes_evicted(sim: &Sim, namespace: &str) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::ResourceExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let pods: Api<Pod> = Api::namespaced(sim.admin.clone(), namespace);
    tokio::spawn(async move {
        let mut events = watcher(pods.clone(), watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(pod)) = events.next().await {
            if pod.metadata.deletion_timestamp.is_some() {
                let _ = pods
                    .delete(
                        &pod.name_any(),
                        &kube::api::DeleteParams::default().grace_period(0),
                    )
                    .await;
            }
        }
    })
}

/// The label of the workload pods [`play_workload`] runs.
pub const WORKLOAD_LABEL: (&str, &str) = ("app", "driver");

/// Plays the kubelet for one workload pod per node (`default/<node>-driver`,
/// [`WORKLOAD_LABEL`], bound to the node): Ready while its node runs a good
/// image, not Ready from its daemon's `Rebooting` report (the kubelet goes
/// down with the reboot) and while its node runs the image `bad` (a digest)
/// breaks (with `spare_first`, on every node but the first to run it).
/// Returns once every pod exists and is Ready.
pub async fn play_workload(
    sim: &Sim,
    nodes: &[String],
    bad: &str,
    spare_first: bool,
) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::ResourceExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let pods: Api<Pod> = Api::namespaced(sim.admin.clone(), "default");
    // A DaemonSet's pods, as drivers are: a drain leaves them alone (the
    // sim runs no controller manager, so the DaemonSet makes no pods).
    let daemonsets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(sim.admin.clone(), "default");
    let labels = serde_json::json!({WORKLOAD_LABEL.0: WORKLOAD_LABEL.1});
    let ds = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "driver"},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "driver", "image": "example.invalid/driver:1"}]}}},
    }))
    .unwrap();
    let ds = daemonsets
        .create(&kube::api::PostParams::default(), &ds)
        .await
        .unwrap();
    for node in nodes {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{node}-driver"), "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                             "name": "driver", "uid": ds.uid(), "controller": true}]},
            "spec": {"nodeName": node, "automountServiceAccountToken": false,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "driver", "image": "example.invalid/driver:1"}]},
        }))
        .unwrap();
        k8s::create_running_pod(&pods, &pod).await.unwrap();
    }
    let bad = bad.to_owned();
    let bns: Api<BootcNode> = Api::all(sim.admin.clone());
    tokio::spawn(async move {
        let mut ready: std::collections::BTreeMap<String, bool> = Default::default();
        let mut spared: Option<String> = None;
        let mut events = watcher(bns, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(bn)) = events.next().await {
            let name = bn.name_any();
            let runs_bad = bn
                .status
                .as_ref()
                .and_then(|s| s.booted.as_ref())
                .and_then(|b| b.image_digest.as_deref())
                == Some(bad.as_str());
            if runs_bad && spare_first {
                spared.get_or_insert_with(|| name.clone());
            }
            let broken = bn.phase() == Some(api::DaemonPhase::Rebooting)
                || (runs_bad && spared.as_ref() != Some(&name));
            if ready.insert(name.clone(), !broken) == Some(!broken) {
                continue;
            }
            let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
            let status = serde_json::json!({"status": {"conditions": [{"type": api::node_health::NODE_READY,
                "status": if broken { "False" } else { "True" }, "lastTransitionTime": now}]}});
            let _ = pods
                .patch_status(
                    &format!("{name}-driver"),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Strategic(status),
                )
                .await;
        }
    })
}
