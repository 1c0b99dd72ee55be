//! The host's own automatic updater: a node whose OS image leaves bootc's
//! update timer on (as Fedora ships it) is refused and named on the pool
//! while the others roll; masked by hand, its daemon sees it without a
//! restart and the node is updated within the bound.

use api::host_updaters::BOOTC_TIMER;

use super::*;

#[tokio::test]
async fn a_node_running_its_own_updater_is_refused_and_named_then_updated_once_masked() {
    require_root!();
    let options = SimOptions {
        updaters_left_on: vec![FIRST.to_owned()],
        ..SimOptions::default()
    };
    let (sim, recorder, v1) = started(options, 3).await;
    let bootc_nodes = Api::<BootcNode>::all(sim.admin.clone());
    let reported = bootc_nodes.get(FIRST).await.unwrap().status.unwrap();
    assert_eq!(reported.host_updaters, vec![BOOTC_TIMER.to_owned()]);

    let v2 = sim.push_version("2.0").await.unwrap();
    let named = format!("node {FIRST} runs its host's own automatic updater {BOOTC_TIMER}");
    let fix = format!("`RUN systemctl mask {BOOTC_TIMER}` in its Containerfile");
    let target = v2.clone();
    wait_pool(
        &sim,
        "the others updated, the node with the timer refused and named",
        move |p| {
            p.status.as_ref().is_some_and(|s| {
                s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count == 2
            }) && condition(p, ConditionType::Degraded).is_some_and(|c| {
                c.0 == "True"
                    && c.1 == Reason::HostUpdaterEnabled
                    && c.2.contains(&named)
                    && c.2.contains(&fix)
            })
        },
    )
    .await;
    // Never told the target, never given a slot, never rebooted.
    let refused = bootc_nodes.get(FIRST).await.unwrap();
    assert_eq!(refused.spec.desired_image, sim.pinned(&v1));
    let approved = recorder.approvals().await.unwrap();
    assert!(!approved.iter().any(|n| n == FIRST), "{approved:?}");
    assert_eq!(sim.reboots().await.get(FIRST).map_or(0, Vec::len), 0);

    // A person masks it by hand: no daemon restart, the node is updated.
    sim.leave_updater_on(FIRST, false).await.unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
    wait_pool(&sim, "no longer degraded", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::Healthy)
    })
    .await;
    let status = bootc_nodes.get(FIRST).await.unwrap().status.unwrap();
    assert!(status.host_updaters.is_empty(), "{status:?}");
}
