//! Drains through the Eviction API (policy/v1) against a real API server: a
//! PodDisruptionBudget that blocks then allows, and a pod that never leaves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use api::BootcNode;
use api::Node;
use common::*;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;

fn pdb_api(admin: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("policy", "v1", "PodDisruptionBudget"),
        "poddisruptionbudgets",
    );
    Api::namespaced_with(admin.clone(), ns, &ar)
}

/// A PodDisruptionBudget in `apps` that allows no eviction of the `app=web`
/// pod (minAvailable 1). Returns the API to change it.
async fn budget_for_web(admin: &kube::Client) -> Api<DynamicObject> {
    let pdbs = pdb_api(admin, "apps");
    let pdb: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    pdbs
}

/// Waits for the controller's report that the budget refused the eviction.
async fn wait_drain_blocked(admin: &kube::Client, ctl: &ControllerProc) {
    if tokio::time::timeout(
        std::time::Duration::from_secs(20),
        wait_event(admin, event_reasons::DRAIN_BLOCKED, "apps/web"),
    )
    .await
    .is_err()
    {
        panic!("no DrainBlocked event; controller log:\n{}", ctl.log_text());
    }
}

#[tokio::test]
async fn a_budget_blocks_the_drain_then_allows_it() {
    let Cluster {
        env,
        recorder: _,
        player: _player,
        mut ctl,
    } = Setup::workers(&["n1"]).start().await;
    create_namespace(&env.admin, "apps").await;
    create_pod(&env.admin, "apps", "web", "n1", json!({"app": "web"})).await;
    // A DaemonSet pod and a mirror pod are left alone.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.admin.clone(), "apps");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "ds-pod", "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u-ds", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "example.invalid/ds:1"}]},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let pdbs = budget_for_web(&env.admin).await;
    let _kubelet = kubelet_deletes(&env.admin, "apps", set(&["web"]));
    create_pool(&env.admin, &workers_pool(1)).await;

    // The budget refuses: the drain says so and waits; no approval yet.
    wait_drain_blocked(&env.admin, &ctl).await;
    // The pool names the pod and the budget at the first refusal.
    wait_pool(&env.admin, "workers", "the refusal named", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.2.contains("an eviction refused by a PodDisruptionBudget (retrying): n1: apps/web (")
                && c.2.contains("disruption budget web")
        })
    })
    .await;
    let bn = bootc_node(&env.admin, "n1").await.unwrap();
    assert_eq!(bn.spec.desired_image_state, api::DesiredImageState::Staged);
    assert!(is_cordoned(&node(&env.admin, "n1").await));

    // The disruption controller (played here) allows one disruption.
    let current = pdbs.get("web").await.unwrap();
    let generation = current.metadata.generation.unwrap_or(1);
    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "observedGeneration": generation, "disruptionsAllowed": 1,
            "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2,
        }})),
    )
    .await
    .unwrap();

    wait_rolled(&env.admin, "workers", NEW, 1).await;
    assert!(pods.get_opt("web").await.unwrap().is_none(), "evicted");
    let ds = pods.get("ds-pod").await.unwrap();
    assert!(
        ds.metadata.deletion_timestamp.is_none(),
        "DaemonSet pod left alone"
    );
    assert!(!is_cordoned(&node(&env.admin, "n1").await));
    ctl.terminate().await;
}

#[tokio::test]
async fn a_pod_that_never_leaves_times_the_drain_out() {
    let Cluster {
        env,
        recorder: _,
        player: _player,
        mut ctl,
    } = Setup::workers(&["n1"]).start().await;
    create_namespace(&env.admin, "apps").await;
    // No kubelet deletes it: evicted, it stays Terminating forever.
    create_pod(&env.admin, "apps", "stuck", "n1", json!({"app": "stuck"})).await;
    let mut p = workers_pool(1);
    p.spec.rollout.drain_timeout_seconds = 2;
    create_pool(&env.admin, &p).await;
    let p = wait_pool(&env.admin, "workers", Reason::DrainTimedOut.as_str(), |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::DrainTimedOut)
    })
    .await;
    let (_, _, message) = condition(&p, ConditionType::Degraded).unwrap();
    assert!(message.contains("apps/stuck"), "{message}");
    assert!(message.contains("timed out after 2s"), "{message}");
    wait_event(&env.admin, event_reasons::DRAIN_FAILED, "apps/stuck").await;
    // The node keeps its slot, cordoned, and is not approved.
    let bn = bootc_node(&env.admin, "n1").await.unwrap();
    assert_eq!(bn.spec.desired_image_state, api::DesiredImageState::Staged);
    assert!(is_cordoned(&node(&env.admin, "n1").await));
    ctl.terminate().await;
}

/// `onDrainTimeout: Release`: the node whose drain fails is uncordoned and
/// skipped for the target, the next node takes the slot at once, the pool
/// names the skipped node; `kubectl bootc retry`'s annotation drains it
/// again.
#[tokio::test]
async fn a_failed_drain_releases_and_skips_the_node_when_the_pool_says_so() {
    let Cluster {
        env,
        recorder: _,
        player: _player,
        mut ctl,
    } = Setup::workers(&["n1", "n2"]).start().await;
    create_namespace(&env.admin, "apps").await;
    // No kubelet deletes it: evicted, it stays Terminating.
    create_pod(&env.admin, "apps", "stuck", "n1", json!({"app": "stuck"})).await;
    let mut p = workers_pool(1);
    p.spec.rollout.drain_timeout_seconds = 2;
    p.spec.rollout.on_drain_timeout = api::DrainTimeoutPolicy::Release;
    create_pool(&env.admin, &p).await;

    let p = wait_pool(&env.admin, "workers", "n1 skipped, n2 updated", |p| {
        p.status.as_ref().is_some_and(|s| s.updated_count == 1)
            && condition(p, ConditionType::Degraded).is_some_and(|c| {
                c.1 == Reason::DrainTimedOut && c.2.contains("skipped for this target")
            })
    })
    .await;
    let (_, _, message) = condition(&p, ConditionType::Degraded).unwrap();
    assert!(
        message.contains("n1: ") && message.contains("apps/stuck"),
        "{message}"
    );
    let n1_node = node(&env.admin, "n1").await;
    assert!(!is_cordoned(&n1_node), "n1 left cordoned");
    assert_eq!(disrupted_by(&n1_node), None, "n1 keeps its slot");
    let n1 = bootc_node(&env.admin, "n1").await.unwrap();
    assert!(
        n1.skipped().is_some_and(|(digest, _)| digest == NEW),
        "{:?}",
        n1.metadata.annotations
    );

    // The retry request: the skip is cleared, n1 takes the slot again.
    Api::<BootcNode>::all(env.admin.clone())
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {api::labels::RETRY_ANNOTATION: "now"}}}),
            ),
        )
        .await
        .unwrap();
    tests::k8s::wait_for(
        Api::<BootcNode>::all(env.admin.clone()),
        "n1",
        WAIT,
        "n1's skip cleared",
        |b| b.is_some_and(|b| b.skipped().is_none()),
    )
    .await
    .unwrap();
    tests::k8s::wait_for(
        Api::<Node>::all(env.admin.clone()),
        "n1",
        WAIT,
        "n1 in a slot again",
        |n| n.is_some_and(|n| disrupted_by(n).is_some()),
    )
    .await
    .unwrap();
    ctl.terminate().await;
}

/// The pool is deleted while a budget holds its node's drain: the finalizer
/// stops the drain and gives the node back (uncordoned, unlabelled, its
/// BootcNode gone), and the pod the budget protects is never evicted.
#[tokio::test]
async fn pool_deleted_mid_drain_stops_the_drain_and_restores_the_node() {
    let Cluster {
        env,
        recorder: _,
        player: _player,
        mut ctl,
    } = Setup::workers(&["n1"]).start().await;
    create_namespace(&env.admin, "apps").await;
    create_pod(&env.admin, "apps", "web", "n1", json!({"app": "web"})).await;
    budget_for_web(&env.admin).await;
    create_pool(&env.admin, &workers_pool(1)).await;
    wait_drain_blocked(&env.admin, &ctl).await;
    assert!(is_cordoned(&node(&env.admin, "n1").await));

    let pools = Api::<api::BootcNodePool>::all(env.admin.clone());
    pools.delete("workers", &Default::default()).await.unwrap();
    tests::k8s::wait_for(pools, "workers", WAIT, "pool deleted", |p| p.is_none())
        .await
        .unwrap();

    // The finalizer ran: the drain was stopped before the pool went away.
    let log = ctl.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("drain cancelled") && l.contains("n1")),
        "no drain cancellation logged:\n{log}"
    );
    let n1 = node(&env.admin, "n1").await;
    assert!(!is_cordoned(&n1), "n1 left cordoned");
    assert!(!is_managed(&n1), "n1 keeps the managed label");
    assert!(bootc_node(&env.admin, "n1").await.is_none());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.admin.clone(), "apps");
    let web = pods.get("web").await.unwrap();
    assert!(web.metadata.deletion_timestamp.is_none(), "web was evicted");
    ctl.terminate().await;
}
