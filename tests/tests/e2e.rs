//! End to end on the simulated cluster: the real controller, the real
//! daemons and helpers on fake bootc hosts that pull from a real registry,
//! a real API server. A recorder watches every Node and BootcNode change to
//! prove the disruption bound over the whole run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use api::labels::HOSTNAME_LABEL;
use api::{BootcNode, BootcNodePool, DesiredImageState, event_reasons, reasons};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::json;
use tests::fake_bootc::{BootcVersion, Fault, UnplannedReboot};
use tests::recorder::Recorder;
use tests::sim::{POOL, Sim, SimOptions};
use tests::{k8s, require_root};

const ROLLOUT: Duration = Duration::from_secs(120);

fn condition(p: &BootcNodePool, type_: &str) -> Option<(String, String, String)> {
    let s = p.status.as_ref()?;
    api::conditions::find(&s.conditions, type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_pool(
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
async fn diagnostics(sim: &Sim) -> String {
    let mut out = String::new();
    if let Ok((pool, bns, nodes)) = sim.snapshot().await {
        out.push_str(&tests::display::render(
            &pool,
            &tests::display::rows(&bns, &nodes),
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

async fn wait_rolled(sim: &Sim, digest: &str, nodes: i32) -> BootcNodePool {
    let d = digest.to_owned();
    wait_pool(sim, &format!("all {nodes} nodes on {digest}"), move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.deployed_digest.as_deref() == Some(d.as_str())
                && s.updated_count == nodes
                && s.node_count == nodes
                // Every slot released, too (the message names slot holders).
                && api::conditions::message(&s.conditions, api::reasons::UP_TO_DATE)
                    .is_some_and(|m| !m.contains("in reboot slots"))
        })
    })
    .await
}

async fn booted_everywhere(sim: &Sim, image: &str) {
    let bns = Api::<BootcNode>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for bn in bns {
        let booted = bn.status.and_then(|s| s.booted).and_then(|b| b.image);
        assert_eq!(booted.as_deref(), Some(image), "{:?}", bn.metadata.name);
    }
}

async fn nothing_cordoned(sim: &Sim) {
    let nodes = Api::<Node>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for n in nodes {
        let cordoned = n.spec.and_then(|s| s.unschedulable).unwrap_or(false);
        assert!(!cordoned, "{:?} left cordoned", n.metadata.name);
    }
}

/// Replays the whole run and fails, with the timeline, if more than `max`
/// nodes were ever disrupted at once, as the cluster saw it (NotReady or
/// cordoned) or as the operator's records say; returns the cluster's peak.
async fn assert_disruption_at_most(recorder: &Recorder, max: usize) -> tests::recorder::Peak {
    let all = BTreeSet::new();
    let seen = recorder.peak(&all, &all).await.unwrap();
    assert!(
        seen.count <= max,
        "the cluster saw more than {max} nodes disrupted at once: {seen:?}\n{}",
        recorder.timeline(seen.resource_version, 30)
    );
    let recorded = recorder.peak_records(&all, &all).await.unwrap();
    assert!(
        recorded.count <= max,
        "the records say more than {max} nodes disrupted at once: {recorded:?}\n{}",
        recorder.timeline(recorded.resource_version, 30)
    );
    seen
}

/// The end every one-slot rollout must reach: `nodes` nodes on `digest`,
/// each booted into it, nothing left cordoned, and never more than one node
/// disrupted at once.
async fn rolled_out_one_at_a_time(sim: &Sim, recorder: &Recorder, digest: &str, nodes: i32) {
    wait_rolled(sim, digest, nodes).await;
    booted_everywhere(sim, &sim.pinned(digest)).await;
    nothing_cordoned(sim).await;
    assert_disruption_at_most(recorder, 1).await;
}

async fn started(options: SimOptions, nodes: usize) -> (Sim, Recorder, String) {
    let mut sim = Sim::start(options).await.unwrap();
    let recorder = Recorder::start(&sim.cp).await.unwrap();
    let v1 = sim.push_version("1.0").await.unwrap();
    sim.add_nodes(nodes, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_rolled(&sim, &v1, i32::try_from(nodes).unwrap()).await;
    (sim, recorder, v1)
}

#[tokio::test]
async fn rollout_then_rollback_never_exceeds_max_unavailable() {
    require_root!();
    let options = SimOptions {
        max_unavailable: json!(2),
        ..SimOptions::default()
    };
    let (sim, recorder, v1) = started(options, 5).await;

    let v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_rolled(&sim, &v2, 5).await;
    assert_eq!(
        condition(&p, reasons::UP_TO_DATE).unwrap().1,
        reasons::ALL_UPDATED
    );
    booted_everywhere(&sim, &sim.pinned(&v2)).await;
    nothing_cordoned(&sim).await;

    // Rollback: the pool is pointed back at v1's digest.
    sim.patch_pool(json!({"image": {"ref": sim.pinned(&v1)}}))
        .await
        .unwrap();
    wait_rolled(&sim, &v1, 5).await;
    booted_everywhere(&sim, &sim.pinned(&v1)).await;
    nothing_cordoned(&sim).await;

    let peak = assert_disruption_at_most(&recorder, 2).await;
    assert!(peak.count >= 1, "the recorder saw no disruption at all");
    // Every node rebooted exactly once per update.
    let approvals = recorder.approvals().await.unwrap();
    assert_eq!(approvals.len(), 10, "{approvals:?}");
}

#[tokio::test]
async fn staging_failures_on_two_nodes_degrade_the_pool_and_block_nobody_else() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 4).await;
    let approvals_before = recorder.approvals().await.unwrap().len();
    {
        let nodes = sim.nodes.lock().await;
        for n in nodes.iter().take(2) {
            n.host.layout.set_fault(Some(Fault::PullError)).unwrap();
        }
    }
    let _v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, "two nodes degraded", |p| {
        p.status.as_ref().is_some_and(|s| s.degraded_count >= 2)
    })
    .await;
    let (status, reason, message) = condition(&p, reasons::DEGRADED).unwrap();
    assert_eq!(status, "True");
    assert_eq!(reason, reasons::NODE_DEGRADED, "{message}");
    assert!(
        message.contains("sim-node-1") || message.contains("connection refused"),
        "{message}"
    );

    // The two healthy nodes still update: unhealthy nodes outside slots
    // block nothing.
    let p = wait_pool(&sim, "healthy nodes updated", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 2)
    })
    .await;
    assert_eq!(p.status.unwrap().degraded_count, 2);
    let approved: BTreeSet<String> = recorder
        .approvals()
        .await
        .unwrap()
        .split_off(approvals_before)
        .into_iter()
        .collect();
    assert!(
        !approved.contains("sim-node-1") && !approved.contains("sim-node-2"),
        "a failed node was rebooted: {approved:?}"
    );
    assert_disruption_at_most(&recorder, 1).await;
}

/// `bootc status` failing on one host (a broken bootc) and answering that
/// another is not deployed via bootc: each BootcNode says so (its reason
/// and bootc's words) and the pool names both, nothing is staged on them
/// while the healthy node updates, and once status answers again they
/// recover and update too.
#[tokio::test]
async fn hosts_whose_bootc_status_fails_are_reported_and_recover() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    let (broken, foreign) = ("sim-node-2", "sim-node-3");
    let foreign_state = {
        let nodes = sim.nodes.lock().await;
        nodes[1]
            .host
            .layout
            .set_status_fault(Some(tests::fake_bootc::BROKEN_STATUS))
            .unwrap();
        let layout = &nodes[2].host.layout;
        let state = layout.read_state().unwrap();
        layout.write_state(&Default::default()).unwrap();
        state
    };
    // Their daemons restart (a pod restart) and read the host first.
    sim.restart_daemon(broken).await.unwrap();
    sim.restart_daemon(foreign).await.unwrap();
    let p = wait_pool(&sim, "two nodes degraded", |p| {
        p.status.as_ref().is_some_and(|s| s.degraded_count == 2)
    })
    .await;
    let (_, reason, message) = condition(&p, reasons::DEGRADED).unwrap();
    assert_eq!(reason, reasons::NODE_DEGRADED, "{message}");
    assert!(
        message.contains(broken) && message.contains(foreign),
        "{message}"
    );
    let bns: Api<BootcNode> = Api::all(sim.admin.clone());
    for (name, reason, words) in [
        (
            broken,
            api::reasons::BOOTC_STATUS_FAILED,
            tests::fake_bootc::BROKEN_STATUS,
        ),
        (
            foreign,
            api::reasons::NOT_A_BOOTC_HOST,
            "not deployed via bootc",
        ),
    ] {
        let status = bns.get(name).await.unwrap().status.unwrap();
        let c = api::conditions::find(&status.conditions, api::reasons::DEGRADED).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", reason));
        assert!(c.message.contains(words), "{name}: {}", c.message);
    }

    // A new image: the healthy node updates; nothing is staged on the two.
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_pool(&sim, "the healthy node on v2", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 1)
    })
    .await;
    {
        let nodes = sim.nodes.lock().await;
        for n in &nodes[1..] {
            let staged = n
                .host
                .layout
                .read_invocations()
                .into_iter()
                .filter(|i| i.argv.iter().any(|a| a.contains(&v2)))
                .count();
            assert_eq!(staged, 0, "{} was staged", n.name);
        }
        // Repaired: bootc answers again (a host change wakes the daemon of
        // the host now deployed; the broken one reads again on its own).
        nodes[1].host.layout.set_status_fault(None).unwrap();
        let layout = &nodes[2].host.layout;
        layout.write_state(&foreign_state).unwrap();
        std::fs::File::open(layout.ostree_bootc())
            .unwrap()
            .set_modified(std::time::SystemTime::now())
            .unwrap();
    }
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
}

#[tokio::test]
async fn an_image_that_breaks_two_nodes_halts_the_rollout() {
    require_root!();
    let options = SimOptions {
        max_unavailable: json!(2),
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 5).await;
    let before = recorder.approvals().await.unwrap().len();
    // v2 breaks whichever nodes boot it first: they never come back Ready.
    sim.break_after_reboot(&[
        "sim-node-1",
        "sim-node-2",
        "sim-node-3",
        "sim-node-4",
        "sim-node-5",
    ])
    .await;
    let _v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, reasons::ROLLOUT_HALTED, |p| {
        condition(p, reasons::DEGRADED)
            .is_some_and(|c| c.0 == "True" && c.1 == reasons::ROLLOUT_HALTED)
    })
    .await;
    let message = condition(&p, reasons::DEGRADED).unwrap().2;
    let approved = recorder.approvals().await.unwrap().split_off(before);
    assert_eq!(
        approved.len(),
        2,
        "exactly the two slotted nodes rebooted: {approved:?}"
    );
    for name in &approved {
        assert!(
            message.contains(name.as_str()),
            "{message} does not name {name}"
        );
    }
    // The halt holds: the other three stay staged and are never approved,
    // whatever the controller sees next (a resync or any event).
    sim.patch_pool(json!({"rollout": {"drainTimeoutSeconds": 61}}))
        .await
        .unwrap();
    wait_pool(&sim, "still halted after a spec change", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == p.metadata.generation)
            && condition(p, reasons::DEGRADED).is_some_and(|c| c.1 == reasons::ROLLOUT_HALTED)
    })
    .await;
    assert_eq!(
        recorder.approvals().await.unwrap().split_off(before).len(),
        2,
        "a third node was rebooted"
    );
    assert_disruption_at_most(&recorder, 2).await;
}

#[tokio::test]
async fn controller_killed_and_daemon_killed_mid_staging_the_rollout_completes() {
    require_root!();
    let options = SimOptions {
        reboot_time: Duration::from_secs(3),
        ..SimOptions::default()
    };
    let (mut sim, recorder, _v1) = started(options, 4).await;
    {
        // Node 4 pulls slowly, so that its daemon can be killed mid-staging.
        let nodes = sim.nodes.lock().await;
        std::fs::write(nodes[3].host.layout.stage_delay(), "4000").unwrap();
    }
    let v2 = sim.push_version("2.0").await.unwrap();
    k8s::wait_for(
        Api::<BootcNode>::all(sim.admin.clone()),
        "sim-node-4",
        ROLLOUT,
        "node 4 staging",
        |b: Option<&BootcNode>| {
            b.and_then(|b| b.status.as_ref()).is_some_and(|s| {
                api::conditions::reason(&s.conditions, reasons::IDLE) == Some(reasons::STAGING)
            })
        },
    )
    .await
    .unwrap();
    sim.restart_daemon("sim-node-4").await.unwrap();

    // A first node in its slot: kill the controller and start a new one.
    let target = v2.clone();
    wait_pool(&sim, "one node on v2", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count >= 1
        })
    })
    .await;
    sim.kill_controller();
    sim.start_controller().await.unwrap();

    rolled_out_one_at_a_time(&sim, &recorder, &v2, 4).await;
}

/// The API server is restarted with two nodes done: its RBAC cache answers
/// 403 for a few seconds, then every watch gets 410 Expired and relists. The
/// controller's caches must come back within seconds (each watch backs off on
/// its own; no watch error may pause the controller's other streams) and the
/// rollout must finish without ever exceeding maxUnavailable.
#[tokio::test]
async fn api_server_restarted_mid_rollout_the_rollout_completes() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 4).await;
    let mut sim = sim;
    let v2 = sim.push_version("2.0").await.unwrap();
    let target = v2.clone();
    wait_pool(&sim, "two nodes on v2", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count >= 2
        })
    })
    .await;
    sim.cp.restart_apiserver().await.unwrap();
    wait_rolled(&sim, &v2, 4).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

#[tokio::test]
async fn pause_holds_then_resume_finishes_and_nodes_join_and_leave() {
    require_root!();
    let options = SimOptions {
        reboot_time: Duration::from_secs(2),
        ..SimOptions::default()
    };
    let (sim, recorder, v1) = started(options, 3).await;

    // Pause before the new image: every node stages, none is given a slot.
    sim.patch_pool(json!({"rollout": {"paused": true}}))
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, "paused with all staged", |p| {
        condition(p, reasons::UP_TO_DATE)
            .is_some_and(|c| c.1 == reasons::PAUSED && c.2.contains("3 staged"))
    })
    .await;
    assert_eq!(
        p.status.as_ref().unwrap().target_digest.as_deref(),
        Some(v2.as_str()),
        "tag resolution stops while paused"
    );
    let approvals = recorder.approvals().await.unwrap().len();

    // kubectl shows what a user expects.
    let out = sim
        .cp
        .kubectl()
        .args(["get", "bnp", POOL])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(reasons::PAUSED) || table.contains("False"),
        "{table}"
    );
    let out = sim.cp.kubectl().args(["get", "bn"]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let staged_rows = table
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(4) == Some(DesiredImageState::Staged.as_str()))
        .count();
    assert_eq!(staged_rows, 3, "the STATE column:\n{table}");

    // A node joins while paused (booted on v1); one leaves.
    let joined = sim.add_nodes(1, &v1).await.unwrap().remove(0);
    let nodes: Api<Node> = Api::all(sim.admin.clone());
    nodes
        .patch(
            "sim-node-1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {tests::sim::POOL_LABEL: null}}}),
            ),
        )
        .await
        .unwrap();
    k8s::wait_for(
        nodes.clone(),
        "sim-node-1",
        ROLLOUT,
        "managed label removed",
        |n: Option<&Node>| {
            n.is_some_and(|n| {
                !n.metadata
                    .labels
                    .clone()
                    .unwrap_or_default()
                    .contains_key(api::labels::MANAGED_LABEL)
            })
        },
    )
    .await
    .unwrap();
    let bns: Api<BootcNode> = Api::all(sim.admin.clone());
    k8s::wait_for(
        bns.clone(),
        "sim-node-1",
        ROLLOUT,
        "BootcNode deleted",
        |b: Option<&BootcNode>| b.is_none(),
    )
    .await
    .unwrap();
    k8s::wait_for(
        bns.clone(),
        &joined,
        ROLLOUT,
        "the new node staged",
        |b: Option<&BootcNode>| {
            b.and_then(|b| b.status.as_ref()).is_some_and(|s| {
                api::conditions::reason(&s.conditions, reasons::IDLE) == Some(reasons::STAGED)
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted while paused"
    );

    // Resume: the rollout finishes on the current members.
    sim.patch_pool(json!({"rollout": {"paused": false}}))
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 3).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

#[tokio::test]
async fn allow_soft_reboot_is_soft_on_capable_nodes_only() {
    require_root!();
    let options = SimOptions {
        reboot_policy: "AllowSoftReboot".into(),
        max_unavailable: json!("100%"),
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    {
        let nodes = sim.nodes.lock().await;
        std::fs::write(nodes[1].host.layout.no_soft_reboot(), "").unwrap();
    }
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_rolled(&sim, &v2, 2).await;
    assert_disruption_at_most(&recorder, 2).await;
    let nodes = sim.nodes.lock().await;
    let soft: Vec<Vec<bool>> = nodes
        .iter()
        .map(|n| {
            n.host
                .layout
                .read_reboots()
                .iter()
                .map(|r| r.soft)
                .collect()
        })
        .collect();
    assert_eq!(
        soft,
        vec![vec![true], vec![false]],
        "capable node soft, incapable node full"
    );
}

// Every way a node can leave its slot mid-reboot: it keeps counting as
// disrupted until it is back, as the cluster sees it.

/// The node that takes the first slot (candidates go in name order).
const FIRST: &str = "sim-node-1";

async fn wait_node(
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

fn is_ready(node: &Node) -> bool {
    tests::display::node_ready(node)
}

/// Back from its reboot and out of the pool: Ready, uncordoned, unlabelled.
fn back_and_left(n: &Node) -> bool {
    is_ready(n)
        && !n
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
        && !n
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(api::labels::MANAGED_LABEL))
}

/// Three nodes on v1, one slot, reboots slow enough to act in the middle
/// of one: v2 is pushed and this returns once the first node is NotReady.
async fn first_node_rebooting() -> (Sim, Recorder, String, String) {
    let options = SimOptions {
        reboot_time: Duration::from_secs(6),
        ..SimOptions::default()
    };
    let (sim, recorder, v1) = started(options, 3).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_node(&sim, FIRST, "NotReady (rebooting)", |n| !is_ready(n)).await;
    (sim, recorder, v1, v2)
}

#[tokio::test]
async fn a_node_that_leaves_the_pool_mid_reboot_counts_until_it_is_back() {
    require_root!();
    let (sim, recorder, _v1, v2) = first_node_rebooting().await;
    Api::<Node>::all(sim.admin.clone())
        .patch(
            FIRST,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {tests::sim::POOL_LABEL: null}}}),
            ),
        )
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 2).await;
    // It left once it was back: unlabelled, uncordoned, its BootcNode gone.
    wait_node(&sim, FIRST, "left the pool", back_and_left).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

#[tokio::test]
async fn a_bootc_node_deleted_mid_reboot_counts_until_it_is_back() {
    require_root!();
    let (sim, recorder, _v1, v2) = first_node_rebooting().await;
    Api::<BootcNode>::all(sim.admin.clone())
        .delete(FIRST, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
}

#[tokio::test]
async fn a_pool_paused_mid_reboot_holds_the_others_until_resumed() {
    require_root!();
    let (sim, recorder, _v1, v2) = first_node_rebooting().await;
    let approvals = recorder.approvals().await.unwrap().len();
    sim.patch_pool(json!({"rollout": {"paused": true}}))
        .await
        .unwrap();
    // The rebooting node comes back and gives its slot back; nobody else
    // takes one while paused.
    wait_node(&sim, FIRST, "back and uncordoned", |n| {
        is_ready(n)
            && !n
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false)
    })
    .await;
    wait_pool(&sim, "paused, the first node updated", |p| {
        condition(p, reasons::UP_TO_DATE)
            .is_some_and(|c| c.1 == reasons::PAUSED && c.2.starts_with("1/3 updated"))
    })
    .await;
    nothing_cordoned(&sim).await;
    assert_eq!(recorder.approvals().await.unwrap().len(), approvals);
    sim.patch_pool(json!({"rollout": {"paused": false}}))
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 3).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

#[tokio::test]
async fn a_target_changed_mid_reboot_keeps_the_node_counted() {
    require_root!();
    let (sim, recorder, v1, _v2) = first_node_rebooting().await;
    // Roll back to v1 while the first node boots v2.
    sim.patch_pool(json!({"image": {"ref": sim.pinned(&v1)}}))
        .await
        .unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v1, 3).await;
}

/// A node that leaves the pool's selector (not its labels) mid-reboot.
#[tokio::test]
async fn a_selector_changed_mid_reboot_keeps_the_node_counted_until_back() {
    require_root!();
    let (sim, recorder, _v1, v2) = first_node_rebooting().await;
    sim.patch_pool(json!({"nodeSelector": {
        "matchLabels": {tests::sim::POOL_LABEL: POOL},
        "matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "NotIn", "values": [FIRST]}],
    }}))
    .await
    .unwrap();
    wait_rolled(&sim, &v2, 2).await;
    wait_node(&sim, FIRST, "left the pool once back", back_and_left).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

/// The pool deleted while its node reboots: the finalizer waits for the
/// node to be back, then uncordons and unlabels it.
#[tokio::test]
async fn a_pool_deleted_mid_reboot_waits_for_the_node_to_be_back() {
    require_root!();
    let (sim, recorder, _v1, _v2) = first_node_rebooting().await;
    let pools: Api<BootcNodePool> = Api::all(sim.admin.clone());
    pools.delete(POOL, &Default::default()).await.unwrap();
    let gone = k8s::wait_for(
        pools,
        POOL,
        ROLLOUT,
        "pool deleted",
        |p: Option<&BootcNodePool>| p.is_none(),
    )
    .await;
    if let Err(e) = gone {
        panic!("{e}\n{}", diagnostics(&sim).await);
    }
    let node = Api::<Node>::all(sim.admin.clone())
        .get(FIRST)
        .await
        .unwrap();
    assert!(is_ready(&node), "the pool went before its node was back");
    assert!(back_and_left(&node), "{:?}", node.metadata.labels);
    let left = Api::<BootcNode>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(left.is_empty(), "BootcNodes left: {left:?}");
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

/// The controller restarted while the node in the slot reboots: the new
/// one keeps it counted from the records and hands out no other slot.
#[tokio::test]
async fn a_controller_restarted_mid_reboot_keeps_the_node_counted() {
    require_root!();
    let (mut sim, recorder, _v1, v2) = first_node_rebooting().await;
    sim.kill_controller();
    sim.start_controller().await.unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
}

/// The budget is about the pool's health: a member NotReady on its own
/// uses it, so with `maxUnavailable: 1` no node is taken down meanwhile
/// (the pool says which node holds the rollout), and the rollout goes on
/// once it is Ready again. The recorder counts that member too.
#[tokio::test]
async fn a_member_not_ready_on_its_own_holds_new_slots() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    let down = "sim-node-3";
    tests::daemon_player::set_ready(&sim.admin, down, false)
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    let target = v2.clone();
    let p = wait_pool(&sim, "the rollout held by the NotReady member", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(target.as_str())
                && api::conditions::message(&s.conditions, api::reasons::UP_TO_DATE)
                    .is_some_and(|m| m.contains("unavailable: sim-node-3 (NotReady)"))
        })
    })
    .await;
    assert_eq!(p.status.unwrap().updated_count, 0);
    assert!(
        recorder.approvals().await.unwrap().is_empty(),
        "a node rebooted while another was NotReady"
    );
    nothing_cordoned(&sim).await;
    tests::daemon_player::set_ready(&sim.admin, down, true)
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 3).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

/// A one-node cluster: the controller's own pod runs on the node it
/// updates. The drain leaves it alone (evicted, it could only come back to
/// the cordoned node or stay Pending), the update completes and the node
/// ends uncordoned.
#[tokio::test]
async fn a_one_node_cluster_updates_and_ends_uncordoned() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 1).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(sim.admin.clone(), api::labels::OPERATOR_NAMESPACE);
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "bootc-controller-0", "labels": {
            api::labels::APP_NAME_LABEL: api::labels::CONTROLLER_APP_NAME}},
        "spec": {"nodeName": FIRST, "automountServiceAccountToken": false,
                 "containers": [{"name": "controller", "image": "example.invalid/bootc-operator:1",
                     // The operator's namespace enforces the `restricted` level.
                     "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                         "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                         "seccompProfile": {"type": "RuntimeDefault"}}}]},
    }))
    .unwrap();
    pods.create(&kube::api::PostParams::default(), &pod)
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_rolled(&sim, &v2, 1).await;
    nothing_cordoned(&sim).await;
    let pod = pods.get("bootc-controller-0").await.unwrap();
    assert!(
        pod.metadata.deletion_timestamp.is_none(),
        "the controller's own pod was evicted"
    );
    assert_disruption_at_most(&recorder, 1).await;
}

/// A pool whose nodes run both bootc versions (1.16 without locked staging,
/// PR #2342's CLI with it) rolls out like any other: each node is staged and
/// applied with its own bootc's commands, and says which staging it has.
#[tokio::test]
async fn a_pool_mixing_bootc_versions_rolls_out() {
    require_root!();
    let options = SimOptions {
        bootc_versions: vec![BootcVersion::V1_16, BootcVersion::Pr],
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 4).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 4).await;
    let bns: Vec<BootcNode> = Api::<BootcNode>::all(sim.admin.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let nodes = sim.nodes.lock().await;
    let mut seen = BTreeSet::new();
    for node in nodes.iter() {
        let version = node.host.layout.version();
        seen.insert(version.name());
        let bn = bns
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(node.name.as_str()))
            .unwrap();
        assert_eq!(
            bn.status.as_ref().unwrap().download_only_supported,
            Some(version.locked_staging()),
            "{}",
            node.name
        );
        let applies: Vec<Vec<String>> = node
            .host
            .layout
            .read_invocations()
            .into_iter()
            .map(|i| i.argv)
            .filter(|a| a.iter().any(|x| x == "--apply"))
            .collect();
        assert_eq!(applies.len(), 1, "{}: {applies:?}", node.name);
        assert_eq!(
            applies[0].iter().any(|a| a == "--from-downloaded"),
            version.locked_staging(),
            "{}: {applies:?}",
            node.name
        );
    }
    assert_eq!(seen.len(), 2, "both versions in the pool");
}

/// An unplanned reboot injected on a node in the middle of a rollout (an
/// orderly one on a bootc 1.16 node, which boots whatever is staged there):
/// the rollout still completes with every node on the new image, and a node
/// that booted it outside a reboot slot says so in its status.
#[tokio::test]
async fn an_unplanned_reboot_mid_rollout_on_a_bootc_1_16_node() {
    require_root!();
    let options = SimOptions {
        bootc_versions: vec![BootcVersion::V1_16],
        ..SimOptions::default()
    };
    let (sim, _recorder, _v1) = started(options, 3).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    let target = sim.pinned(&v2);
    // A node that has the new image staged while another node holds the
    // one reboot slot: it cannot be approved before that node has rebooted,
    // come back and been released (seconds), so the reboot injected now is
    // one nobody asked for.
    let nodes: Api<BootcNode> = Api::all(sim.admin.clone());
    let in_slot = |bn: &BootcNode| {
        bn.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(api::labels::IN_REBOOT_SLOT_ANNOTATION))
    };
    let deadline = std::time::Instant::now() + ROLLOUT;
    let victim = loop {
        let list = nodes.list(&Default::default()).await.unwrap().items;
        let staged = list.iter().find(|bn| {
            bn.spec.desired_image == target
                && bn.spec.desired_image_state == api::DesiredImageState::Staged
                && !in_slot(bn)
                && bn
                    .status
                    .as_ref()
                    .and_then(|s| s.staged.as_ref())
                    .is_some_and(|s| s.is_image(&target))
        });
        if let Some(bn) = staged
            && list
                .iter()
                .any(|other| other.metadata.name != bn.metadata.name && in_slot(other))
        {
            break bn.metadata.name.clone().unwrap();
        }
        if list.iter().all(|bn| {
            bn.status
                .as_ref()
                .and_then(|s| s.booted.as_ref())
                .is_some_and(|b| b.is_image(&target))
        }) {
            // Nothing was ever staged ahead of its turn (the controller
            // holds unlocked nodes back): inject on the last node anyway.
            break list.last().unwrap().metadata.name.clone().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            diagnostics(&sim).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let reboot = sim
        .reboot_unplanned(&victim, UnplannedReboot::Orderly)
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 3).await;
    booted_everywhere(&sim, &target).await;
    nothing_cordoned(&sim).await;
    if reboot.applied_staged {
        let bn = nodes.get(&victim).await.unwrap();
        let idle = api::conditions::find(&bn.status.unwrap().conditions, api::reasons::IDLE)
            .unwrap()
            .clone();
        assert!(
            idle.message.starts_with(daemon::machine::UNPLANNED_BOOT),
            "{victim}: {}\n{reboot:?}\n{}",
            idle.message,
            sim.daemon_logs().get(&victim).cloned().unwrap_or_default()
        );
    }
}

/// Waits for a `reason` Event published by controller replica `instance`
/// whose note mentions `text`.
async fn wait_event_from(sim: &Sim, reason: &str, instance: &str, text: &str) {
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
fn kubelet_deletes_evicted(sim: &Sim, namespace: &str) -> tokio::task::JoinHandle<()> {
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

/// Two controller replicas, each on its own node (anti-affinity). The
/// leader's node is drained first, and its drain blocks on a workload's
/// PodDisruptionBudget; the drain leaves the leader's own pod alone. The
/// leader then dies in the middle of the drain (its process killed, as an
/// eviction or a crash would); the other replica takes the Lease, resumes
/// the drain from the durable records (the slot, the cordon, the
/// disruption record), and once the budget allows it the rollout goes on.
/// Each replica stops while its node reboots and starts again with it (the
/// same pod, so the same identity). The recorder confirms the bound held at
/// every revision, and nothing is left cordoned.
#[tokio::test]
async fn the_leader_killed_mid_drain_the_other_replica_resumes() {
    require_root!();
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let options = SimOptions {
        controller_replicas: 2,
        ..SimOptions::default()
    };
    let (mut sim, recorder, _v1) = started(options, 3).await;
    assert_eq!(
        sim.leader().await.unwrap(),
        Some(0),
        "replica 0 leads, on {FIRST}"
    );
    let _kubelet = kubelet_deletes_evicted(&sim, "default");
    let pods: Api<Pod> = Api::namespaced(sim.admin.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"nodeName": FIRST, "automountServiceAccountToken": false,
                 "containers": [{"name": "web", "image": "example.invalid/web:1"}]},
    }))
    .unwrap();
    k8s::create_running_pod(&pods, &pod).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(sim.admin.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    pdbs.create(&kube::api::PostParams::default(), &pdb)
        .await
        .unwrap();

    let v2 = sim.push_version("2.0").await.unwrap();
    wait_event_from(
        &sim,
        event_reasons::DRAIN_BLOCKED,
        "sim-controller-0",
        "default/web",
    )
    .await;
    let controller_pods: Api<Pod> =
        Api::namespaced(sim.admin.clone(), api::labels::OPERATOR_NAMESPACE);
    let own = controller_pods.get("bootc-controller-0").await.unwrap();
    assert!(
        own.metadata.deletion_timestamp.is_none(),
        "the drain evicted the leader's own pod"
    );

    // The leader dies mid-drain; the other replica takes over and drains.
    sim.kill_replica(0);
    sim.wait_leader(1).await.unwrap();
    wait_event_from(
        &sim,
        event_reasons::DRAIN_BLOCKED,
        "sim-controller-1",
        "default/web",
    )
    .await;
    pdbs.delete("web", &Default::default()).await.unwrap();

    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
    let approvals = recorder.approvals().await.unwrap();
    let mut v2_approvals = approvals.clone();
    v2_approvals.sort();
    assert_eq!(
        v2_approvals,
        ["sim-node-1", "sim-node-2", "sim-node-3"],
        "each node rebooted once for v2: {approvals:?}"
    );
    for i in 0..2 {
        let pod = controller_pods
            .get(&format!("bootc-controller-{i}"))
            .await
            .unwrap();
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "replica {i}'s pod was evicted"
        );
    }
    sim.kill_controller();
}

/// `maxConcurrentStaging: 1`: a new image is downloaded by one node at a
/// time (each pull takes a while), not by the whole pool at once; the
/// rollout still completes within the bound.
#[tokio::test]
async fn staging_is_bounded_to_one_download_at_a_time() {
    require_root!();
    const PULL_MS: u64 = 1500;
    let (sim, recorder, _v1) = started(SimOptions::default(), 4).await;
    {
        let nodes = sim.nodes.lock().await;
        for n in nodes.iter() {
            std::fs::write(n.host.layout.stage_delay(), PULL_MS.to_string()).unwrap();
        }
    }
    sim.patch_pool(json!({"rollout": {"maxConcurrentStaging": 1}}))
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_rolled(&sim, &v2, 4).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
    // Each node's pulls of v2, as [start, start + PULL_MS) in microseconds:
    // at no moment did two run at once.
    let mut pulls: Vec<(u64, u64, String)> = Vec::new();
    {
        let nodes = sim.nodes.lock().await;
        for n in nodes.iter() {
            for i in n.host.layout.read_invocations() {
                let stage = i.argv.first().is_some_and(|a| a == "switch")
                    && i.argv.iter().any(|a| a.contains(&v2))
                    && !i.argv.iter().any(|a| a == "--apply" || a == "--help");
                if stage {
                    pulls.push((
                        i.unix_micros,
                        i.unix_micros + PULL_MS * 1000,
                        n.name.clone(),
                    ));
                }
            }
        }
    }
    pulls.sort();
    assert!(pulls.len() >= 4, "{pulls:?}");
    for pair in pulls.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "two pulls at once: {} and {}\n{pulls:?}",
            pair[0].2,
            pair[1].2
        );
    }
}

/// The pool's pull Secret deleted mid-rollout: a pool-wide credentials
/// problem, reported once on the pool. It is not every node's problem: the
/// nodes that need no download (on the target, or staged and approved)
/// stay healthy, their reboots go on, and once the Secret is back the
/// pool is healthy again.
#[tokio::test]
async fn a_deleted_pull_secret_is_reported_on_the_pool_and_degrades_no_node() {
    require_root!();
    let options = SimOptions {
        reboot_time: Duration::from_secs(6),
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 3).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    let target = v2.clone();
    // Every node has staged v2 (with the Secret), and one is updated.
    wait_pool(&sim, "one node on v2", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count >= 1
        })
    })
    .await;
    let pinned = sim.pinned(&v2);
    for name in ["sim-node-2", "sim-node-3"] {
        let pinned = pinned.clone();
        k8s::wait_for(
            Api::<BootcNode>::all(sim.admin.clone()),
            name,
            ROLLOUT,
            "v2 staged or booted",
            move |b: Option<&BootcNode>| {
                b.and_then(|b| b.status.as_ref()).is_some_and(|s| {
                    [s.staged.as_ref(), s.booted.as_ref()]
                        .into_iter()
                        .flatten()
                        .any(|e| e.is_image(&pinned))
                })
            },
        )
        .await
        .unwrap();
    }
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(sim.admin.clone(), api::labels::OPERATOR_NAMESPACE);
    let secret = secrets.get("os-pull").await.unwrap();
    secrets
        .delete("os-pull", &Default::default())
        .await
        .unwrap();
    // Reported on the pool (the tag cannot be resolved without it either:
    // the registry's 401 comes with it).
    let p = wait_pool(&sim, "the missing Secret on the pool", |p| {
        condition(p, reasons::DEGRADED).is_some_and(|c| {
            c.0 == "True" && c.2.contains("Secret bootc-operator/os-pull not found")
        })
    })
    .await;
    let reason = condition(&p, reasons::DEGRADED).map(|c| c.1);
    assert_eq!(reason.as_deref(), Some(api::reasons::PULL_SECRET_NOT_FOUND));
    assert_eq!(p.status.unwrap().degraded_count, 0);
    // The staged nodes still reboot into v2: their reboots need no download.
    let p = wait_pool(&sim, "all on v2 without the Secret", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 3)
    })
    .await;
    let status = p.status.unwrap();
    assert_eq!(status.degraded_count, 0, "{:?}", status.conditions);
    for bn in Api::<BootcNode>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let s = bn.status.unwrap();
        assert!(
            !api::conditions::is_true(&s.conditions, api::reasons::DEGRADED),
            "{:?}: {:?}",
            bn.metadata.name,
            api::conditions::message(&s.conditions, api::reasons::DEGRADED)
        );
    }
    let mut again = secret;
    again.metadata = kube::api::ObjectMeta {
        name: Some("os-pull".into()),
        ..Default::default()
    };
    secrets
        .create(&kube::api::PostParams::default(), &again)
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 3).await;
    let p = wait_pool(&sim, "healthy again", |p| {
        condition(p, reasons::DEGRADED).is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(p.status.unwrap().degraded_count, 0);
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
}

/// Stuck is never silent: a node whose reboot never ends (it stays NotReady)
/// is named on the pool (Degraded, `NodeStuck`: the node, the phase, for how
/// long) with one Warning Event, and keeps its slot: nobody else reboots.
/// The deadlines are scaled to seconds (`--stuck-deadline-scale`).
#[tokio::test]
async fn a_node_that_never_comes_back_is_reported_stuck() {
    require_root!();
    let options = SimOptions {
        // Rebooting: 10 minutes -> 6 seconds.
        stuck_deadline_scale: 0.01,
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 3).await;
    let before = recorder.approvals().await.unwrap().len();
    sim.break_after_reboot(&["sim-node-1", "sim-node-2", "sim-node-3"])
        .await;
    let _v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, reasons::NODE_STUCK, |p| {
        condition(p, reasons::DEGRADED).is_some_and(|c| {
            c.0 == "True" && c.1 == reasons::NODE_STUCK && c.2.contains("rebooting (NotReady)")
        })
    })
    .await;
    let message = condition(&p, reasons::DEGRADED).unwrap().2;
    let approved = recorder.approvals().await.unwrap().split_off(before);
    assert_eq!(approved.len(), 1, "one slot, one reboot: {approved:?}");
    let stuck = &approved[0];
    let named = format!("node {stuck} rebooting (NotReady) for ");
    assert!(message.contains(&named), "{message} does not say {named}");
    assert!(message.contains("(deadline 6s)"), "{message}");
    wait_event_from(
        &sim,
        api::event_reasons::NODE_STUCK,
        "sim-controller",
        &named,
    )
    .await;
    {
        use k8s_openapi::api::events::v1::Event;
        let events: Api<Event> =
            Api::namespaced(sim.admin.clone(), api::labels::CLUSTER_EVENTS_NAMESPACE);
        let list = events.list(&ListParams::default()).await.unwrap().items;
        let stuck_events: Vec<&Event> = list
            .iter()
            .filter(|e| e.reason.as_deref() == Some(api::event_reasons::NODE_STUCK))
            .filter(|e| e.note.as_deref().unwrap_or_default().contains(&named))
            .collect();
        assert!(
            stuck_events
                .iter()
                .all(|e| e.type_.as_deref() == Some("Warning")),
            "{stuck_events:?}"
        );
    }
    // The slot is kept: a spec change observed later still finds the node
    // stuck and nobody else approved.
    sim.patch_pool(json!({"rollout": {"drainTimeoutSeconds": 61}}))
        .await
        .unwrap();
    wait_pool(&sim, "still stuck after a spec change", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == p.metadata.generation)
            && condition(p, reasons::DEGRADED).is_some_and(|c| c.1 == reasons::NODE_STUCK)
    })
    .await;
    assert_eq!(
        recorder.approvals().await.unwrap().split_off(before),
        approved,
        "a second node was rebooted while the first was stuck"
    );
    assert_disruption_at_most(&recorder, 1).await;
}

/// A tag moving A -> B -> A: once the first node has booted B, the tag goes
/// back to A. The nodes that never booted B stay on A and are not rebooted
/// at all; those that booted B go back to A with exactly one more reboot;
/// never more than one node down.
#[tokio::test]
async fn a_tag_moving_a_b_a_reboots_only_the_nodes_that_booted_b_once_more() {
    require_root!();
    let (sim, recorder, a) = started(SimOptions::default(), 5).await;
    let b = sim.push_version("2.0").await.unwrap();
    let b_seen = b.clone();
    wait_pool(&sim, "a node on B", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(b_seen.as_str()) && s.updated_count >= 1
        })
    })
    .await;
    let back = sim.push_version("1.0").await.unwrap();
    assert_eq!(back, a, "the same image, the same digest");
    let a_seen = a.clone();
    wait_pool(&sim, "all back on A", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(a_seen.as_str())
                && s.updated_count == 5
                && api::conditions::message(&s.conditions, api::reasons::UP_TO_DATE)
                    .is_some_and(|m| !m.contains("in reboot slots"))
        })
    })
    .await;
    booted_everywhere(&sim, &sim.pinned(&a)).await;
    nothing_cordoned(&sim).await;
    let (pinned_a, pinned_b) = (sim.pinned(&a), sim.pinned(&b));
    let reboots = sim.reboots().await;
    let images: std::collections::BTreeMap<&String, Vec<&str>> = reboots
        .iter()
        .map(|(n, r)| (n, r.iter().map(|r| r.image.as_str()).collect()))
        .collect();
    for (node, booted) in &images {
        assert!(
            booted.is_empty() || *booted == [pinned_b.as_str(), pinned_a.as_str()],
            "{node} rebooted into {booted:?} (B is {pinned_b}, A is {pinned_a})"
        );
    }
    let went_to_b = images.values().filter(|r| !r.is_empty()).count();
    assert!(went_to_b >= 1, "{images:?}");
    assert!(
        went_to_b < 5,
        "the tag moved back once one node ran B, yet all booted B: {images:?}"
    );
    assert_disruption_at_most(&recorder, 1).await;
}

/// bootc 1.16 cannot download without staging (no `--download-only`), and a
/// staged deployment is what any reboot boots: such a node is told the new
/// image only when a free slot awaits it. With one slot, each node stages
/// only after the previous one has rebooted (its `--apply`).
#[tokio::test]
async fn bootc_1_16_nodes_stage_only_when_a_slot_awaits_them() {
    require_root!();
    let options = SimOptions {
        bootc_versions: vec![BootcVersion::V1_16],
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 3).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_rolled(&sim, &v2, 3).await;
    let image = sim.pinned(&v2);
    // Per node: when it first staged v2, when it applied it.
    let mut runs: Vec<(u64, u64, String)> = Vec::new();
    for node in sim.nodes.lock().await.iter() {
        let invocations = node.host.layout.read_invocations();
        let of_v2 = |apply: bool| {
            invocations
                .iter()
                .filter(|i| i.argv.iter().any(|a| a == "switch"))
                .filter(|i| i.argv.iter().any(|a| a == &image))
                .filter(|i| i.argv.iter().any(|a| a == "--apply") == apply)
                .map(|i| i.unix_micros)
                .min()
        };
        let (stage, apply) = (of_v2(false), of_v2(true));
        runs.push((
            stage.unwrap_or_else(|| panic!("{} never staged v2", node.name)),
            apply.unwrap_or_else(|| panic!("{} never applied v2", node.name)),
            node.name.clone(),
        ));
    }
    runs.sort();
    for pair in runs.windows(2) {
        assert!(
            pair[1].0 > pair[0].1,
            "{} staged before {} rebooted, with no slot free: {runs:?}",
            pair[1].2,
            pair[0].2
        );
    }
    assert_disruption_at_most(&recorder, 1).await;
}
