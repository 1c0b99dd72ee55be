//! Every way a node can leave its slot mid-reboot: it keeps counting as
//! disrupted until it is back, as the cluster sees it.

use super::*;

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

/// The two other nodes roll out to `digest`; the first leaves the pool once
/// back (Ready, uncordoned, unlabelled, its BootcNode gone); never more
/// than one node down.
async fn the_others_roll_out_and_it_leaves_once_back(sim: &Sim, recorder: &Recorder, digest: &str) {
    wait_rolled(sim, digest, 2).await;
    wait_node(sim, FIRST, "left the pool once back", back_and_left).await;
    nothing_cordoned(sim).await;
    assert_disruption_at_most(recorder, 1).await;
}

#[tokio::test]
async fn a_node_that_leaves_the_pool_mid_reboot_counts_until_it_is_back() {
    require_root!();
    let (sim, recorder, _v1, v2) = first_node_rebooting().await;
    leave_pool(&sim, FIRST).await;
    the_others_roll_out_and_it_leaves_once_back(&sim, &recorder, &v2).await;
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
    set_paused(&sim, true).await;
    // The rebooting node comes back and gives its slot back; nobody else
    // takes one while paused.
    wait_node(&sim, FIRST, "back and uncordoned", is_back).await;
    wait_pool(&sim, "paused, the first node updated", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::Paused && c.2.starts_with("1/3 updated"))
    })
    .await;
    nothing_cordoned(&sim).await;
    assert_eq!(recorder.approvals().await.unwrap().len(), approvals);
    set_paused(&sim, false).await;
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
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
    the_others_roll_out_and_it_leaves_once_back(&sim, &recorder, &v2).await;
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
