//! The health gate (`spec.health`) driven as a person would: an image that
//! breaks a workload pod is caught on the first node, booted back there,
//! and never approved on a second; a new image clears the failure.

use super::*;

/// A health gate on the workload pods [`play_workload`] runs, settling
/// 2 s within 8 s, rolling a failed node back (and, with
/// `rollback_updated`, the nodes already updated). One node's failure is
/// the pool's here (`nodesToFailImage: 1`): the image breaks every node.
fn rollback_gate(rollback_updated: bool) -> serde_json::Value {
    json!({"health": {
        "pods": [{"namespace": "default", "selector": {"matchLabels": {WORKLOAD_LABEL.0: WORKLOAD_LABEL.1}}}],
        "settleSeconds": 2,
        "timeoutSeconds": 8,
        "onFailure": "Rollback",
        "rollbackUpdated": rollback_updated,
        "nodesToFailImage": 1,
    }})
}

#[tokio::test]
async fn an_image_that_breaks_a_workload_is_rolled_back_on_the_first_node_and_reaches_no_other() {
    require_root!();
    let (sim, recorder, v1) = started(SimOptions::default(), 2).await;
    let nodes: Vec<String> = (1..=2).map(|i| format!("sim-node-{i}")).collect();
    // Under a tag of its own: the pool follows `stable`, and takes v2 only
    // once the gate is set.
    let v2 = sim.push_version_tagged("2.0", "broken").await.unwrap();
    // The kubelet player breaks the workload on nodes that run v2.
    let _workload = play_workload(&sim, &nodes, &v2, false).await;
    sim.patch_pool(rollback_gate(false)).await.unwrap();
    let approvals_before = recorder.approvals().await.unwrap().len();
    sim.patch_pool(json!({"image": {"ref": sim.pinned(&v2)}}))
        .await
        .unwrap();

    let p = wait_pool(
        &sim,
        "the failed node booted back, the pool Degraded",
        |p| {
            condition(p, ConditionType::Degraded).is_some_and(|c| {
                c.1 == Reason::RolledBack
                    && c.2
                        .contains("it was booted back into the image it ran before")
            })
        },
    )
    .await;
    let status = p.status.unwrap();
    let failed: Vec<(&str, &str)> = status
        .failed_images
        .iter()
        .map(|f| (f.digest.as_str(), f.node.as_str()))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    let (digest, failed_node) = failed[0];
    assert_eq!(digest, v2);
    assert!(
        status.failed_images[0]
            .check
            .contains("-driver Ready not shown within timeoutSeconds 8"),
        "{:?}",
        status.failed_images[0]
    );
    // One node approved for v2 (its rollback is the same slot's approval),
    // the other never.
    let approvals = recorder.approvals().await.unwrap();
    assert_eq!(
        approvals[approvals_before..],
        [failed_node.to_owned()],
        "{approvals:?}"
    );
    wait_node(&sim, failed_node, "back and uncordoned", is_back).await;
    booted_everywhere(&sim, &sim.pinned(&v1)).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
    let bn = Api::<BootcNode>::all(sim.admin.clone())
        .get(failed_node)
        .await
        .unwrap();
    assert_eq!(bn.health_failed().map(|(d, _)| d), Some(v2.as_str()));

    // A new image clears the failure and rolls out, within the bound.
    let v3 = sim.push_version("3.0").await.unwrap();
    sim.patch_pool(json!({"image": {"ref": sim.pinned(&v3)}}))
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v3, 2).await;

    // The pool's status keeps the story, whatever becomes of the Events.
    let pool = wait_rolled(&sim, &v3, 2).await;
    let rollouts: Vec<(String, Option<api::RolloutOutcome>)> = pool
        .status
        .unwrap()
        .rollouts
        .into_iter()
        .map(|r| (r.digest, r.outcome))
        .collect();
    assert_eq!(
        rollouts[..2],
        [
            (v3.clone(), Some(api::RolloutOutcome::Completed)),
            (v2.clone(), Some(api::RolloutOutcome::Failed)),
        ],
        "{rollouts:?}"
    );
}

/// A canary pool of 10 with steps [1, "50%", "100%"]: the first node soaks
/// healthy, the second step's nodes go NotReady after their update, and at
/// the end of its soak the rollout holds itself, naming them; no node past
/// the step is approved.
#[tokio::test]
async fn a_failing_canary_step_holds_the_rollout_naming_its_nodes() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 10).await;
    let approvals_before = recorder.approvals().await.unwrap().len();
    sim.patch_pool(json!({"rollout": {
        "maxUnavailable": "100%",
        "batches": [1, "50%", "100%"],
        "soakSeconds": 10,
        "successThreshold": 60,
    }}))
    .await
    .unwrap();
    let v2 = sim.push_version_tagged("2.0", "canary").await.unwrap();
    let broken = break_after_the_first_update(&sim, &v2);
    sim.patch_pool(json!({"image": {"ref": sim.pinned(&v2)}}))
        .await
        .unwrap();
    let p = wait_pool(&sim, "the second step failed its soak", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::BatchFailed)
    })
    .await;
    broken.abort();
    let message = condition(&p, ConditionType::Degraded).unwrap().2;
    assert!(
        message.contains("canary step 2 of 3 failed (spec.rollout.batches): 1/5 updated nodes healthy, below successThreshold 60%"),
        "{message}"
    );
    let approvals = recorder.approvals().await.unwrap();
    let approved = &approvals[approvals_before..];
    assert_eq!(approved.len(), 5, "{approved:?}");
    // The four of the second step are named, the first is not.
    for node in &approved[1..] {
        assert!(message.contains(node.as_str()), "{node}: {message}");
    }
    assert!(!message.contains(&format!("{} ", approved[0])) && !message.ends_with(&approved[0]));
    let batch = p.status.unwrap().batch.unwrap();
    assert_eq!(
        (batch.step, batch.limit, batch.updated, batch.healthy),
        (1, 5, 5, 1)
    );
}

/// Sets NotReady every node that runs `digest` out of its slot, but the
/// first one: an image that breaks nodes after their update, on all but
/// the canary.
fn break_after_the_first_update(sim: &Sim, digest: &str) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use kube::ResourceExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let bns: Api<BootcNode> = Api::all(sim.admin.clone());
    let admin = sim.admin.clone();
    let digest = digest.to_owned();
    tokio::spawn(async move {
        let mut first: Option<String> = None;
        let mut broken = BTreeSet::new();
        let mut events = watcher(bns, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(bn)) = events.next().await {
            let runs = bn
                .status
                .as_ref()
                .and_then(|s| s.booted.as_ref())
                .and_then(|b| b.image_digest.as_deref())
                == Some(digest.as_str());
            if !runs
                || tests::k8s::slot_holders(&admin)
                    .await
                    .is_ok_and(|s| s.contains(&bn.name_any()))
            {
                continue;
            }
            let name = bn.name_any();
            if first.get_or_insert_with(|| name.clone()) != &name && broken.insert(name.clone()) {
                tests::daemon_player::set_ready(&admin, &name, false)
                    .await
                    .unwrap();
            }
        }
    })
}

/// With `rollbackUpdated`, a node that updated before another failed goes
/// back too: the whole pool returns to the image it ran, one slot at a
/// time, and the pool's record says so.
#[tokio::test]
async fn with_rollback_updated_the_nodes_already_updated_go_back_too() {
    require_root!();
    let (sim, recorder, v1) = started(SimOptions::default(), 2).await;
    let nodes: Vec<String> = (1..=2).map(|i| format!("sim-node-{i}")).collect();
    let v2 = sim.push_version_tagged("2.0", "broken").await.unwrap();
    // The first node to run v2 stays healthy; the second breaks.
    let _workload = play_workload(&sim, &nodes, &v2, true).await;
    sim.patch_pool(rollback_gate(true)).await.unwrap();
    sim.patch_pool(json!({"image": {"ref": sim.pinned(&v2)}}))
        .await
        .unwrap();
    let back = v1.clone();
    let p = wait_pool(&sim, "the pool back on v1", move |p| {
        p.status.as_ref().is_some_and(|s| {
            // The rollouts of v1 (the first), v2 (failed), v1 (the way back).
            s.target_digest.as_deref() == Some(back.as_str())
                && s.updated_count == 2
                && s.rollouts.len() == 3
                && s.rollouts[0].digest == back
                && s.rollouts[0].outcome == Some(api::RolloutOutcome::Completed)
        })
    })
    .await;
    assert!(condition(&p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::RolledBack));
    let status = p.status.unwrap();
    assert_eq!(status.rollouts[1].digest, v2);
    assert_eq!(
        status.rollouts[1].outcome,
        Some(api::RolloutOutcome::Failed)
    );
    booted_everywhere(&sim, &sim.pinned(&v1)).await;
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;

    // A person's retry of the pool (what `kubectl bootc retry POOL`
    // writes): the failure is cleared and v2 rolls out again.
    kubectl(&sim, &["annotate", "bnp", POOL, "bootc.dev/retry=now"]);
    let again = v2.clone();
    let p = wait_pool(&sim, "v2 given again after the retry", move |p| {
        let retried = !p
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(api::labels::RETRY_ANNOTATION));
        p.status.as_ref().is_some_and(|s| {
            retried
                && s.target_digest.as_deref() == Some(again.as_str())
                && s.rollouts.len() == 4
                && s.rollouts[0].digest == again
        })
    })
    .await;
    assert!(p.status.unwrap().failed_images.is_empty());
}
