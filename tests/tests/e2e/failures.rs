//! Nodes and images that fail: each failure is reported where it belongs
//! (the node, the pool), the rollout halts or goes on as the rules say, and
//! what recovers rolls out.

use super::*;

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
    let (status, reason, message) = condition(&p, ConditionType::Degraded).unwrap();
    assert_eq!(status, "True");
    assert_eq!(reason, Reason::NodeDegraded, "{message}");
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

/// A member whose daemon cannot run (its pod crash-loops) makes the pool
/// Degraded at once, naming the node and the kubelet's reason, while the
/// other members are healthy; `kubectl bootc`'s standing says the same.
#[tokio::test]
async fn a_daemon_that_cannot_run_is_named_on_the_pool() {
    require_root!();
    let (sim, _recorder, _v1) = started(SimOptions::default(), 2).await;
    let broken = sim.add_node_whose_daemon_cannot_run().await.unwrap();
    let p = wait_pool(&sim, "Degraded for the daemon", |p| {
        condition(p, ConditionType::Degraded)
            .is_some_and(|(_, reason, _)| reason == Reason::DaemonNotRunning)
    })
    .await;
    let (status, _, message) = condition(&p, ConditionType::Degraded).unwrap();
    assert_eq!(status, "True");
    assert!(message.contains(&broken), "{message}");
    assert!(message.contains("CrashLoopBackOff"), "{message}");
    let status = p.status.unwrap();
    assert_eq!(status.node_count, 3, "the node is counted");
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
    let (_, reason, message) = condition(&p, ConditionType::Degraded).unwrap();
    assert_eq!(reason, Reason::NodeDegraded, "{message}");
    assert!(
        message.contains(broken) && message.contains(foreign),
        "{message}"
    );
    let bns: Api<BootcNode> = Api::all(sim.admin.clone());
    for (name, reason, words) in [
        (
            broken,
            api::Reason::BootcStatusFailed,
            tests::fake_bootc::BROKEN_STATUS,
        ),
        (
            foreign,
            api::Reason::NotABootcHost,
            "not deployed via bootc",
        ),
    ] {
        let status = bns.get(name).await.unwrap().status.unwrap();
        let c = api::conditions::find(&status.conditions, api::ConditionType::Degraded).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", reason.as_str())
        );
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
    let p = wait_pool(&sim, Reason::RolloutHalted.as_str(), |p| {
        condition(p, ConditionType::Degraded)
            .is_some_and(|c| c.0 == "True" && c.1 == Reason::RolloutHalted)
    })
    .await;
    let message = condition(&p, ConditionType::Degraded).unwrap().2;
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
    still_degraded_after_a_spec_change(&sim, Reason::RolloutHalted).await;
    assert_eq!(
        recorder.approvals().await.unwrap().split_off(before).len(),
        2,
        "a third node was rebooted"
    );
    assert_disruption_at_most(&recorder, 2).await;
}

/// A pool's own deadlines (`spec.rollout.deadlines`) name a node stuck in
/// its phase, in place of the operator's (minutes): one whose download
/// never ends (staging), and one whose daemon stopped answering (daemon
/// silent). Neither holds a slot, so the third node updates meanwhile.
#[tokio::test]
async fn a_pools_own_deadlines_name_a_node_stuck_staging_and_one_whose_daemon_is_silent() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    const SECOND: &str = "sim-node-2";
    {
        let nodes = sim.nodes.lock().await;
        let first = nodes.iter().find(|n| n.name == FIRST).unwrap();
        std::fs::write(first.host.layout.stage_delay(), "600000").unwrap();
    }
    sim.stop_daemon(SECOND).await.unwrap();
    // Above the daemon's first Staging report (5 s), so that the slow
    // download is timed as staging, not as a silent daemon.
    sim.patch_pool(json!({"rollout": {"deadlines": {
        "stagingSeconds": 3, "daemonSilentSeconds": 20,
    }}}))
    .await
    .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    for (node, phase, deadline) in [
        (FIRST, "staging", "3s"),
        (SECOND, "daemon silent (no status for its spec)", "20s"),
    ] {
        let named = format!("node {node} {phase} for ");
        let deadline = format!("(deadline {deadline})");
        wait_pool(&sim, &named.clone(), move |p| {
            condition(p, ConditionType::Degraded).is_some_and(|c| {
                c.1 == Reason::NodeStuck && c.2.contains(&named) && c.2.contains(&deadline)
            })
        })
        .await;
    }
    wait_updated(&sim, &v2, 1).await;
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
    let p = wait_pool(&sim, Reason::NodeStuck.as_str(), |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.0 == "True" && c.1 == Reason::NodeStuck && c.2.contains("rebooting (NotReady)")
        })
    })
    .await;
    let message = condition(&p, ConditionType::Degraded).unwrap().2;
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
    still_degraded_after_a_spec_change(&sim, Reason::NodeStuck).await;
    assert_eq!(
        recorder.approvals().await.unwrap().split_off(before),
        approved,
        "a second node was rebooted while the first was stuck"
    );
    assert_disruption_at_most(&recorder, 1).await;
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
    // Every node has staged v2 (with the Secret), and one is updated.
    wait_updated(&sim, &v2, 1).await;
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
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.0 == "True" && c.2.contains("Secret bootc-operator/os-pull not found")
        })
    })
    .await;
    let reason = condition(&p, ConditionType::Degraded).map(|c| c.1);
    assert_eq!(
        reason.as_deref(),
        Some(api::Reason::PullSecretNotFound.as_str())
    );
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
            !api::conditions::is_true(&s.conditions, api::ConditionType::Degraded),
            "{:?}: {:?}",
            bn.metadata.name,
            api::conditions::message(&s.conditions, api::ConditionType::Degraded)
        );
    }
    let mut again = secret;
    again.metadata = kube::api::ObjectMeta {
        name: Some("os-pull".into()),
        annotations: again.metadata.annotations.take(),
        ..Default::default()
    };
    secrets
        .create(&kube::api::PostParams::default(), &again)
        .await
        .unwrap();
    wait_rolled(&sim, &v2, 3).await;
    let p = wait_pool(&sim, "healthy again", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(p.status.unwrap().degraded_count, 0);
    nothing_cordoned(&sim).await;
    assert_disruption_at_most(&recorder, 1).await;
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
    let deadline = std::time::Instant::now() + ROLLOUT;
    let victim = loop {
        let list = nodes.list(&Default::default()).await.unwrap().items;
        let slotted = k8s::slot_holders(&sim.admin).await.unwrap();
        let in_slot =
            |bn: &BootcNode| slotted.contains(&bn.metadata.name.clone().unwrap_or_default());
        let staged = list.iter().find(|bn| {
            bn.spec.desired_image == target
                && !bn.approved()
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
        if list.iter().all(|bn| bn.runs(&target)) {
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
        let idle = api::conditions::find(&bn.status.unwrap().conditions, api::ConditionType::Idle)
            .unwrap()
            .clone();
        assert!(
            idle.message
                .starts_with(daemon::agent::machine::UNPLANNED_BOOT),
            "{victim}: {}\n{reboot:?}\n{}",
            idle.message,
            sim.daemon_logs().get(&victim).cloned().unwrap_or_default()
        );
    }
}

/// `spec.rollout.maxUnhealthy` sets the halt's threshold: with it at 1, one
/// node that never comes back Ready from the new image halts the rollout
/// (the default, 2, would not: the other slot would go on to the next
/// nodes). Four nodes, two slots: sim-node-1 breaks, sim-node-2 updates and
/// leaves its slot, and once the pool says `RolloutHalted` naming
/// sim-node-1 alone, sim-node-3 and sim-node-4 are never approved. Those two
/// are held (`hold.bootc.dev/`) until the halt shows, so that neither takes
/// a slot before the broken node's return is seen (the slot sim-node-2
/// frees would otherwise race it); then the holds go and only the halt
/// keeps them out.
#[tokio::test]
async fn max_unhealthy_one_halts_on_the_first_broken_node() {
    require_root!();
    let options = SimOptions {
        max_unavailable: json!(2),
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 4).await;
    sim.patch_pool(json!({"rollout": {"maxUnhealthy": 1}}))
        .await
        .unwrap();
    spec_observed(&sim).await;
    let hold = format!("{}e2e", api::labels::HOLD_ANNOTATION_PREFIX);
    let kept_out = ["sim-node-3", "sim-node-4"];
    for node in kept_out {
        kubectl(
            &sim,
            &["annotate", "node", node, &format!("{hold}=until the halt")],
        );
    }
    let before = recorder.approvals().await.unwrap().len();
    sim.break_after_reboot(&[FIRST]).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    let target = sim.pinned(&v2);

    // Halted by sim-node-1 alone. (sim-node-2 may count for a moment too,
    // back on v2 a little before its Node is Ready again: wait for the
    // halt's lasting form.)
    let p = wait_pool(&sim, "halted by sim-node-1 alone", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.0 == "True"
                && c.1 == Reason::RolloutHalted
                && c.2.contains("1 nodes in reboot slots are unhealthy")
                && c.2.contains(FIRST)
        })
    })
    .await;
    let message = condition(&p, ConditionType::Degraded).unwrap().2;
    assert!(!message.contains("sim-node-2"), "{message}");
    // The healthy one of the two slotted nodes updates and leaves its slot.
    let t = target.clone();
    let result = k8s::wait_for(
        Api::<BootcNode>::all(sim.admin.clone()),
        "sim-node-2",
        ROLLOUT,
        "on v2, out of its slot",
        move |b: Option<&BootcNode>| b.is_some_and(|b| b.runs(&t)),
    )
    .await
    .and(
        k8s::wait_for(
            Api::<Node>::all(sim.admin.clone()),
            "sim-node-2",
            ROLLOUT,
            "out of its slot",
            |n: Option<&Node>| n.is_some_and(|n| api::node_health::disrupted_by(n).is_none()),
        )
        .await,
    );
    if let Err(e) = result {
        panic!("{e}\n{}", diagnostics(&sim).await);
    }
    wait_node(&sim, "sim-node-2", "back", is_back).await;

    // The holds lifted: the controller sees it (the pool names no hold any
    // more) and still hands out no slot.
    for node in kept_out {
        kubectl(&sim, &["annotate", "node", node, &format!("{hold}-")]);
    }
    let p = wait_pool(&sim, "the holds lifted, still halted", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| !c.2.contains(api::labels::HOLD_ANNOTATION_PREFIX))
            && condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::RolloutHalted)
    })
    .await;
    let up_to_date = condition(&p, ConditionType::UpToDate).unwrap();
    assert_ne!(up_to_date.1, Reason::AllUpdated, "{}", up_to_date.2);
    still_degraded_after_a_spec_change(&sim, Reason::RolloutHalted).await;

    let mut approved = recorder.approvals().await.unwrap().split_off(before);
    approved.sort();
    assert_eq!(
        approved,
        [FIRST, "sim-node-2"],
        "only the two first slotted nodes rebooted"
    );
    for name in k8s::slot_holders(&sim.admin).await.unwrap() {
        assert!(
            !kept_out.contains(&name.as_str()),
            "{name} was given a slot after the halt"
        );
    }
    assert_disruption_at_most(&recorder, 2).await;
}

/// `spec.rollout.onDrainTimeout: Release`: a drain that a
/// PodDisruptionBudget blocks past `drainTimeoutSeconds` releases its node
/// (uncordoned, `bootc.dev/skipped` on its BootcNode naming the pod), the
/// slot goes on to the other nodes, which update, and the pool stays
/// `Degraded/DrainTimedOut` saying the node was skipped and is not up to
/// date. Once a person removes the budget and runs `kubectl bootc retry`,
/// the node is drained again and updates: every node on the target,
/// nothing cordoned, one node disrupted at a time throughout.
#[tokio::test]
async fn a_drain_timeout_under_release_skips_the_node_until_a_retry() {
    require_root!();
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    // Short, as the test needs; long enough for the retried drain's
    // eviction and deletion (well under a second here).
    sim.patch_pool(json!({"rollout": {
        "drainTimeoutSeconds": 3,
        "onDrainTimeout": api::DrainTimeoutPolicy::Release,
    }}))
    .await
    .unwrap();
    spec_observed(&sim).await;
    let _kubelet = kubelet_deletes_evicted(&sim, "default");
    let pods: Api<Pod> = Api::namespaced(sim.admin.clone(), "default");
    k8s::guarded_pod_on(&sim.admin, FIRST).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(sim.admin.clone(), "default");
    let before = recorder.approvals().await.unwrap().len();
    let v2 = sim.push_version("2.0").await.unwrap();

    // The two others update; sim-node-1 is skipped for v2.
    let p = wait_pool(&sim, "two updated, sim-node-1 skipped", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.updated_count == 2
                && api::conditions::message(&s.conditions, ConditionType::UpToDate)
                    .is_some_and(|m| !m.contains("in reboot slots"))
        }) && condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.0 == "True" && c.1 == Reason::DrainTimedOut && c.2.contains("skipped")
        })
    })
    .await;
    let (_, _, message) = condition(&p, ConditionType::Degraded).unwrap();
    assert!(
        message.contains(&format!("{FIRST}: drain of node {FIRST} timed out"))
            && message.contains("default/web"),
        "{message}"
    );
    let (status, reason, up_to_date) = condition(&p, ConditionType::UpToDate).unwrap();
    assert_eq!(status, "False", "{up_to_date}");
    assert_ne!(reason, Reason::AllUpdated, "{up_to_date}");
    let bn = Api::<BootcNode>::all(sim.admin.clone())
        .get(FIRST)
        .await
        .unwrap();
    let (digest, why) = bn.skipped().expect("sim-node-1 carries no skip");
    assert_eq!(digest, v2);
    assert!(why.contains("default/web"), "{why}");
    assert!(!bn.approved(), "{:?}", bn.spec);
    assert!(!k8s::slot_holders(&sim.admin).await.unwrap().contains(FIRST));
    nothing_cordoned(&sim).await;
    assert!(
        pods.get_opt(k8s::GUARDED).await.unwrap().is_some(),
        "web evicted"
    );
    let approved = recorder.approvals().await.unwrap().split_off(before);
    assert!(
        !approved.iter().any(|n| n == FIRST),
        "the skipped node rebooted: {approved:?}"
    );

    // A person removes the budget and asks for a retry.
    pdbs.delete(k8s::GUARDED, &Default::default())
        .await
        .unwrap();
    let out = std::process::Command::new(tests::fake_host::bin("kubectl-bootc"))
        .args(["retry", FIRST])
        .env("KUBECONFIG", sim.cp.kubeconfig(tests::Identity::Admin))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl bootc retry: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
    let p = wait_pool(&sim, "healthy again", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&p, ConditionType::UpToDate).unwrap().1,
        Reason::AllUpdated
    );
    let bn = Api::<BootcNode>::all(sim.admin.clone())
        .get(FIRST)
        .await
        .unwrap();
    assert_eq!(bn.skipped(), None);
    assert!(
        pods.get_opt(k8s::GUARDED).await.unwrap().is_none(),
        "web not evicted"
    );
    let mut approved = recorder.approvals().await.unwrap().split_off(before);
    approved.sort();
    assert_eq!(
        approved,
        [FIRST, "sim-node-2", "sim-node-3"],
        "each node rebooted once for v2"
    );
}

/// Waits until the controller has seen the pool's spec as it is now.
async fn spec_observed(sim: &Sim) {
    wait_pool(sim, "the spec observed", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == p.metadata.generation)
    })
    .await;
}

/// Every host's `layout` gets the flag file `flag` names: each behaves so
/// whichever node takes the slot first.
async fn on_every_host(sim: &Sim, flag: fn(&tests::fake_bootc::Layout) -> std::path::PathBuf) {
    let nodes = sim.nodes.lock().await;
    for n in nodes.iter() {
        std::fs::write(flag(&n.host.layout), "").unwrap();
    }
}

/// The node the pool names stuck in `phase` past `deadline` (its Degraded
/// `NodeStuck` message), once it does: it is the one node approved since
/// `before`, and nobody else was (it keeps its slot). Returns it.
async fn the_one_approved_is_named_stuck(
    sim: &Sim,
    recorder: &Recorder,
    before: usize,
    phase: &'static str,
    deadline: &'static str,
) -> String {
    let p = wait_pool(sim, phase, move |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.1 == Reason::NodeStuck
                && c.2.contains(&format!(" {phase} for "))
                && c.2.contains(&format!("(deadline {deadline})"))
        })
    })
    .await;
    let approved = recorder.approvals().await.unwrap().split_off(before);
    assert_eq!(approved.len(), 1, "one slot, one approval: {approved:?}");
    let message = condition(&p, ConditionType::Degraded).unwrap().2;
    let named = format!("node {} {phase} for ", approved[0]);
    assert!(message.contains(&named), "{message} does not say {named}");
    approved[0].clone()
}

/// A pool's own `approvedSeconds` names a node approved to boot whose
/// reboot never comes (its host's `systemctl reboot` does nothing): stuck
/// "approved but not rebooting", still Ready and cordoned in its slot,
/// which it keeps: nobody else is approved.
#[tokio::test]
async fn a_pools_own_deadline_names_a_node_approved_whose_reboot_never_comes() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    on_every_host(&sim, tests::fake_bootc::Layout::reboot_refused).await;
    sim.patch_pool(json!({"rollout": {"deadlines": {"approvedSeconds": 3}}}))
        .await
        .unwrap();
    spec_observed(&sim).await;
    let before = recorder.approvals().await.unwrap().len();
    let _v2 = sim.push_version("2.0").await.unwrap();
    let stuck = the_one_approved_is_named_stuck(
        &sim,
        &recorder,
        before,
        "approved but not rebooting",
        "3s",
    )
    .await;
    let node = Api::<Node>::all(sim.admin.clone())
        .get(&stuck)
        .await
        .unwrap();
    assert!(is_ready(&node) && is_cordoned(&node), "{:?}", node.spec);
    assert_disruption_at_most(&recorder, 1).await;
}

/// A pool's own `notOnTargetSeconds` names a node back from its reboot on
/// the image it ran (the host crashed on its way down: nothing finalized),
/// which its daemon reports Degraded: stuck "back but not on the target",
/// in its slot, which it keeps: nobody else is approved.
#[tokio::test]
async fn a_pools_own_deadline_names_a_node_back_but_not_on_the_target() {
    require_root!();
    let (sim, recorder, v1) = started(SimOptions::default(), 3).await;
    on_every_host(&sim, tests::fake_bootc::Layout::reboot_crashes).await;
    sim.patch_pool(json!({"rollout": {"deadlines": {"notOnTargetSeconds": 3}}}))
        .await
        .unwrap();
    spec_observed(&sim).await;
    let before = recorder.approvals().await.unwrap().len();
    let _v2 = sim.push_version("2.0").await.unwrap();
    let stuck = the_one_approved_is_named_stuck(
        &sim,
        &recorder,
        before,
        "back but not on the target",
        "3s",
    )
    .await;
    let bn = Api::<BootcNode>::all(sim.admin.clone())
        .get(&stuck)
        .await
        .unwrap();
    let booted = bn.status.as_ref().and_then(|s| s.booted.as_ref());
    assert_eq!(
        booted.and_then(|b| b.image_digest.as_deref()),
        Some(v1.as_str()),
        "{booted:?}"
    );
    assert!(bn.degraded().is_some(), "{:?}", bn.status);
    assert!(
        k8s::slot_holders(&sim.admin)
            .await
            .unwrap()
            .contains(&stuck),
        "{stuck} keeps its slot"
    );
    assert_disruption_at_most(&recorder, 1).await;
}
