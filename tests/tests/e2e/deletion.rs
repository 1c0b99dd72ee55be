//! What a pool's deletion leaves of a rollout in progress
//! (`spec.onDelete`), as the cluster and the hosts see it: nothing
//! cordoned, no load balancer exclusion, and no staged image that would
//! boot unasked.

use super::*;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

/// Three nodes on v1, one slot, `spec.onDelete: policy`, the first node
/// first (`spec.rollout.order`); a PodDisruptionBudget holds its drain. v2 is pushed; once
/// the first node is cordoned in its slot with v2 staged unlocked (any
/// reboot would boot it), the pool is deleted. Returns v1 and v2, and the
/// approvals recorded before v2.
async fn deleted_while_draining(
    policy: api::DeletionPolicy,
) -> (Sim, Recorder, (String, String), usize) {
    let (sim, recorder, v1) = started(SimOptions::default(), 3).await;
    // The first node's group goes first: the others wait staged for
    // their turn, which comes once it runs v2.
    sim.patch_pool(json!({"onDelete": policy, "rollout": {"order": [
        {"selector": {"matchLabels": {HOSTNAME_LABEL: FIRST}}},
    ]}}))
    .await
    .unwrap();
    k8s::guarded_pod_on(&sim.admin, FIRST).await.unwrap();
    let before = recorder.approvals().await.unwrap().len();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_node(&sim, FIRST, "cordoned in its slot", |n| {
        is_cordoned(n) && excluded_from_lbs(n)
    })
    .await;
    let staged = v2.clone();
    host(&sim, FIRST, "v2 staged", move |s| {
        s.staged.as_ref().is_some_and(|d| d.digest == staged)
    })
    .await;
    sim.unlock_staged(FIRST).await.unwrap();
    Api::<BootcNodePool>::all(sim.admin.clone())
        .delete(POOL, &Default::default())
        .await
        .unwrap();
    (sim, recorder, (v1, v2), before)
}

fn excluded_from_lbs(n: &Node) -> bool {
    n.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(api::labels::EXCLUDE_FROM_LBS_LABEL))
}

/// Waits until node `name`'s host satisfies `cond`.
async fn host(
    sim: &Sim,
    name: &str,
    what: &str,
    cond: impl Fn(&tests::fake_bootc::State) -> bool,
) -> tests::fake_bootc::State {
    match sim.wait_host(name, what, ROLLOUT, cond).await {
        Ok(state) => state,
        Err(e) => panic!("{e}\n{}", diagnostics(sim).await),
    }
}

async fn wait_pool_gone(sim: &Sim) {
    let gone = k8s::wait_for(
        Api::<BootcNodePool>::all(sim.admin.clone()),
        POOL,
        ROLLOUT,
        "pool deleted",
        |p: Option<&BootcNodePool>| p.is_none(),
    )
    .await;
    if let Err(e) = gone {
        panic!("{e}\n{}", diagnostics(sim).await);
    }
}

/// Every node out of the pool as the cluster sees it: Ready, uncordoned,
/// unlabelled, no load balancer exclusion, no BootcNode left.
async fn every_node_left(sim: &Sim) {
    let nodes = Api::<Node>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for n in &nodes {
        assert!(back_and_left(n), "{:?}: {:?}", n.metadata.name, n.spec);
        assert!(
            !excluded_from_lbs(n),
            "{:?} still excluded",
            n.metadata.name
        );
    }
    nothing_cordoned(sim).await;
    let left = Api::<BootcNode>::all(sim.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(left.is_empty(), "BootcNodes left: {left:?}");
}

/// The nodes outside the slot were never approved, and what their hosts
/// hold boots v1: rebooted by hand, the second boots what it ran (its v2,
/// if staged, was locked and is discarded). Checked last: the reboot
/// disrupts it.
async fn the_others_untouched(sim: &Sim, recorder: &Recorder, before: usize, v1: &str) {
    let approved = recorder.approvals().await.unwrap().split_off(before);
    assert!(
        approved.iter().all(|n| n == FIRST),
        "a node outside the slot approved: {approved:?}\n{}\n{}",
        recorder.timeline(u64::MAX, 60),
        diagnostics(sim).await
    );
    boots_what_it_ran(sim, "sim-node-2", v1).await;
}

/// Node `name`, rebooted by hand (an orderly reboot), boots `v1`.
async fn boots_what_it_ran(sim: &Sim, name: &str, v1: &str) {
    let reboot = sim
        .reboot_unplanned(name, UnplannedReboot::Orderly)
        .await
        .unwrap();
    let state = host(sim, name, "rebooted, nothing staged", |s| {
        s.staged.is_none()
    })
    .await;
    assert_eq!(
        state.booted.map(|b| b.digest).as_deref(),
        Some(v1),
        "{name} booted another image: {reboot:?}"
    );
}

/// `spec.onDelete: Release` (the default): the node in its slot is
/// released at once, undrained: uncordoned, no load balancer exclusion,
/// out of the pool, and its host told back to the image it runs (pinned
/// by digest) over the unlocked v2, so that a reboot boots v1.
#[tokio::test]
async fn a_pool_deleted_under_release_frees_its_slot_at_once_and_boots_nothing_new() {
    require_root!();
    let (sim, recorder, (v1, _v2), before) =
        deleted_while_draining(api::DeletionPolicy::Release).await;
    wait_pool_gone(&sim).await;
    every_node_left(&sim).await;
    let pinned = sim.pinned(&v1);
    host(&sim, FIRST, "told back to v1", move |s| {
        s.staged.as_ref().is_some_and(|d| d.image == pinned)
    })
    .await;
    assert_disruption_at_most(&recorder, 1).await;
    the_others_untouched(&sim, &recorder, before, &v1).await;
    boots_what_it_ran(&sim, FIRST, &v1).await;
}

/// `spec.onDelete: Finish`: the pool stays, saying why (`PoolDeleting`,
/// the nodes outside the slot named by `kubectl bootc why`), until the node
/// in its slot has finished: drained once the budget allows it, rebooted
/// into v2, back; then every node is released. No other node is given a
/// slot meanwhile.
#[tokio::test]
async fn a_pool_deleted_under_finish_lets_its_slot_finish_then_releases_every_node() {
    require_root!();
    let (sim, recorder, (v1, v2), before) =
        deleted_while_draining(api::DeletionPolicy::Finish).await;
    wait_pool(&sim, "deleting, its slot finishing", |p| {
        p.metadata.deletion_timestamp.is_some()
            && condition(p, ConditionType::UpToDate).is_some_and(|c| {
                c.1 == Reason::PoolDeleting && c.2.contains("the nodes in reboot slots finish")
            })
    })
    .await;
    wait_phase(&sim, "sim-node-2", Reason::Staged.as_str()).await;
    let why = kubectl_bootc(&sim, &["why", "sim-node-2"]);
    assert!(
        why.contains("the pool is being deleted (spec.onDelete: Finish)"),
        "{why}"
    );
    // The budget lifted: the drain ends, the node reboots into v2.
    let _kubelet = kubelet_deletes_evicted(&sim, "default");
    Api::<PodDisruptionBudget>::namespaced(sim.admin.clone(), "default")
        .delete(k8s::GUARDED, &Default::default())
        .await
        .unwrap();
    wait_pool_gone(&sim).await;
    every_node_left(&sim).await;
    let state = host(&sim, FIRST, "booted v2", |_| true).await;
    assert_eq!(state.booted.unwrap().digest, v2, "the slot did not finish");
    assert_disruption_at_most(&recorder, 1).await;
    the_others_untouched(&sim, &recorder, before, &v1).await;
}
