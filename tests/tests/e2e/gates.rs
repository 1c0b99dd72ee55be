//! The gates outside the pool's objects, driven as a person would: a
//! blocking pod keeps its node from rebooting while the others update; a
//! firing alert in a real Prometheus, or a Prometheus that does not
//! answer, holds every reboot while the nodes stage.

use k8s_openapi::api::core::v1::Pod;
use tests::prometheus::{ALERT, Prometheus, SEVERITY};

use super::*;

#[tokio::test]
async fn a_node_running_a_blocking_pod_waits_staged_while_the_others_update() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    // The pods of a batch job block their node, in namespaces of the data
    // team only.
    kubectl(&sim, &["label", "namespace", "default", "team=data"]);
    let pods: Api<Pod> = Api::namespaced(sim.admin.clone(), "default");
    let etl: Pod = serde_json::from_value(json!({
        "metadata": {"name": "etl-1", "labels": {"app": "etl"}},
        "spec": {"nodeName": FIRST, "automountServiceAccountToken": false,
                 "containers": [{"name": "etl", "image": "example.invalid/etl:1"}]},
    }))
    .unwrap();
    k8s::create_running_pod(&pods, &etl).await.unwrap();
    sim.patch_pool(json!({"disruption": {"blockingPods": {
        "selector": {"matchLabels": {"app": "etl"}},
        "namespaceSelector": {"matchLabels": {"team": "data"}},
    }}}))
    .await
    .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_pool(&sim, "the others updated, the blocked one staged", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.1 == Reason::RolloutInProgress
                && c.2.starts_with("2/3 updated; 0 staging, 1 staged")
                && c.2.contains(&format!(
                    "1 run blocking pods (spec.disruption.blockingPods), given no reboot slot: {FIRST} (default/etl-1)"
                ))
        })
    })
    .await;
    let approved = recorder.approvals().await.unwrap();
    assert!(
        !approved.iter().any(|n| n == FIRST),
        "the blocked node was approved: {approved:?}"
    );

    // The job done (its pod gone), the node updates too, within the bound.
    pods.delete("etl-1", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
}

#[tokio::test]
async fn a_firing_alert_or_a_silent_prometheus_holds_reboots_and_staging_goes_on() {
    require_root!();
    let prometheus = Prometheus::start(true).await.unwrap();
    let silent = format!(
        "http://127.0.0.1:{}",
        tests::control_plane::free_port().unwrap()
    );
    let options = SimOptions {
        alert_gate_endpoints: vec![("main".into(), prometheus.url()), ("silent".into(), silent)],
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    let approvals = recorder.approvals().await.unwrap().len();
    let gate = |endpoint: &str| {
        json!({"rollout": {"alertGate": {
            "endpoint": endpoint,
            "matchers": [format!("severity=\"{SEVERITY}\"")],
        }}})
    };
    sim.patch_pool(gate("main")).await.unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_pool(&sim, "the alert holds reboots, all staged", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.1 == Reason::AlertFiring && c.2.contains("2 staged") && c.2.contains(ALERT)
        })
    })
    .await;

    // A Prometheus that does not answer holds them too, and says so.
    sim.patch_pool(gate("silent")).await.unwrap();
    wait_pool(&sim, "a silent Prometheus holds reboots", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.1 == Reason::GateUnanswered
                && c.2.contains("spec.rollout.alertGate could not be checked")
        })
    })
    .await;
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted while the gate held"
    );

    // Back to the real one, and the alert resolves: the rollout finishes.
    sim.patch_pool(gate("main")).await.unwrap();
    prometheus.set_firing(false).await.unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
}

#[tokio::test]
async fn a_pause_then_a_blackout_end_by_themselves_with_no_write() {
    require_root!();
    // Pinned by digest and a tag never re-polled: nothing but the plan's
    // own look-again brings the controller back to the pool.
    let options = SimOptions {
        tag_interval: Duration::from_secs(3600),
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    let approvals = recorder.approvals().await.unwrap().len();
    let now = jiff::Timestamp::now();
    // Paused for 30 s, then a change freeze to the first whole minute at
    // least 30 s after that (blackouts are wall-clock minutes, here UTC).
    let until = now + jiff::SignedDuration::from_secs(30);
    let minute = (until.as_second() + 30 + 59) / 60 * 60;
    let freeze_ends = jiff::Timestamp::from_second(minute).unwrap();
    let civil = |t: jiff::Timestamp| {
        t.to_zoned(jiff::tz::TimeZone::UTC)
            .strftime("%Y-%m-%dT%H:%M")
            .to_string()
    };
    let v2 = sim.push_version("2.0").await.unwrap();
    sim.patch_pool(json!({
        "image": {"ref": sim.pinned(&v2)},
        "rollout": {
            "pausedUntil": until.to_string(),
            "blackouts": [{
                "start": civil(now - jiff::SignedDuration::from_hours(1)),
                "end": civil(freeze_ends),
            }],
        },
    }))
    .await
    .unwrap();

    // The pause first (it wins over the blackout), every node staged.
    wait_pool(&sim, "paused until, all staged", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::PausedUntil && c.2.contains("2 staged"))
    })
    .await;
    assert!(
        jiff::Timestamp::now() < until,
        "staging outlasted the pause"
    );
    // Past the pause, with no write: the blackout holds, and says when
    // new slots may go on.
    let p = wait_pool(&sim, "the blackout, after the pause", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| c.1 == Reason::Blackout)
    })
    .await;
    assert_eq!(
        p.status.unwrap().next_maintenance_window.map(|t| t.0),
        Some(freeze_ends)
    );
    assert!(jiff::Timestamp::now() < freeze_ends);
    let why = kubectl_bootc(&sim, &["why", FIRST]);
    assert!(why.contains("in a blackout of the pool"), "{why}");
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted while paused or in the blackout"
    );

    // Past the blackout, with no write: the rollout finishes.
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
    assert!(jiff::Timestamp::now() >= freeze_ends);
}

#[tokio::test]
async fn load_balancers_are_told_in_the_cordons_write_and_an_admins_label_stays() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 2).await;
    let lb = api::labels::EXCLUDE_FROM_LBS_LABEL;
    // An admin took the first node out of the load balancers before.
    kubectl(&sim, &["label", "node", FIRST, &format!("{lb}=")]);
    let second = "sim-node-2";
    let nodes: Api<Node> = Api::all(sim.admin.clone());
    let labelled = |n: &Node| {
        n.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(lb))
    };
    // The first write that cordons the second node carries the label.
    let cordoned = tokio::spawn(k8s::wait_for(
        nodes.clone(),
        second,
        ROLLOUT,
        "cordoned",
        |n: Option<&Node>| n.is_some_and(api::node_health::is_cordoned),
    ));
    let v2 = sim.push_version("2.0").await.unwrap();
    let at_cordon = cordoned.await.unwrap().unwrap().unwrap();
    assert!(
        labelled(&at_cordon),
        "cordoned without the label: {:?}",
        at_cordon.metadata.labels
    );
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
    // Released: ours is gone with its mark, the admin's stays.
    let after: Vec<Node> = nodes.list(&ListParams::default()).await.unwrap().items;
    for n in &after {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        assert_eq!(
            labelled(n),
            name == FIRST,
            "{name}: {:?}",
            n.metadata.labels
        );
        assert!(api::node_health::lb_excluded_by(n).is_none(), "{name}");
    }
}
