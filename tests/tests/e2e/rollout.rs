//! Rollouts as they should go: the bound on disrupted nodes, rollback, soft
//! reboots, mixed bootc versions, bounded staging, pause and resume, a tag
//! that moves back, a member NotReady on its own, maintenance windows,
//! holds, and a slot given back between two plans of a resting pool.

use super::*;

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
        condition(&p, ConditionType::UpToDate).unwrap().1,
        Reason::AllUpdated
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
async fn pause_holds_then_resume_finishes_and_nodes_join_and_leave() {
    require_root!();
    let options = SimOptions {
        reboot_time: Duration::from_secs(2),
        ..SimOptions::default()
    };
    let (sim, recorder, v1) = started(options, 3).await;

    // Pause before the new image: every node stages, none is given a slot.
    set_paused(&sim, true).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, "paused with all staged", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::Paused && c.2.contains("3 staged"))
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
        table.contains(Reason::Paused.as_str()) || table.contains("False"),
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
    leave_pool(&sim, "sim-node-1").await;
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
        bns,
        "sim-node-1",
        ROLLOUT,
        "BootcNode deleted",
        |b: Option<&BootcNode>| b.is_none(),
    )
    .await
    .unwrap();
    wait_phase(&sim, &joined, Reason::Staged.as_str()).await;
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted while paused"
    );

    // Resume: the rollout finishes on the current members.
    set_paused(&sim, false).await;
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
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

/// A large pool rests between its plans (`pace`; here 6 s, as 2 nodes
/// at `--rest-per-member-micros` of 3 s): a node back on the target gives
/// its slot back at the pool's next look at its changed members, not at its
/// next plan. The node's return falls in the rest that follows its
/// approval, so a look gives its slot back; the rollout ends as any other.
#[tokio::test]
async fn a_node_back_gives_its_slot_back_between_plans_of_a_resting_pool() {
    require_root!();
    let options = SimOptions {
        rest_per_member: Some(Duration::from_secs(3)),
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 2).await;
    let log = std::fs::read_to_string(sim.log_dir().join("controller.log")).unwrap();
    let looks = log.matches("slots given back at a look").count();
    assert!(
        looks >= 1,
        "no slot given back between plans:\n{}",
        diagnostics(&sim).await
    );
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
                && api::conditions::message(&s.conditions, api::ConditionType::UpToDate)
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
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
}

/// A pool whose nodes run both bootc versions (released 1.16, PR #2342's
/// CLI) rolls out like any other: each node is staged (locked on both) and
/// applied with its own bootc's commands.
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
            Some(true),
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
        assert_eq!(
            applies,
            [["upgrade", "--from-downloaded", "--apply"]],
            "{}",
            node.name
        );
        let stages_locked_by_bootc = node
            .host
            .layout
            .read_invocations()
            .iter()
            .any(|i| i.argv.iter().any(|a| a == "--download-only"));
        assert_eq!(
            stages_locked_by_bootc,
            version.has_download_only(),
            "{}",
            node.name
        );
    }
    assert_eq!(seen.len(), 2, "both versions in the pool");
}

/// `maxConcurrentStaging: 1`: a new image is downloaded by one node at a
/// time (each pull takes a while), not by the whole pool at once; the
/// rollout still completes within the bound. Each pull runs with the pool's
/// `stagingWeights` on its stage unit.
#[tokio::test]
async fn staging_is_bounded_to_one_download_at_a_time_with_the_pools_weights() {
    require_root!();
    const PULL_MS: u64 = 1500;
    let (sim, recorder, _v1) = started(SimOptions::default(), 4).await;
    {
        let nodes = sim.nodes.lock().await;
        for n in nodes.iter() {
            std::fs::write(n.host.layout.stage_delay(), PULL_MS.to_string()).unwrap();
        }
    }
    let weights = json!({"io": 30, "cpu": 70});
    let rollout = json!({"maxConcurrentStaging": 1, "stagingWeights": weights});
    sim.patch_pool(json!({ "rollout": rollout })).await.unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 4).await;
    // Every pull ran in a stage unit with the pool's weights.
    {
        let nodes = sim.nodes.lock().await;
        for n in nodes.iter() {
            let history = n.host.layout.systemd().history();
            let stages: Vec<_> = history
                .iter()
                .filter(|u| u.name == "bootc-operator-stage.service")
                .map(|u| u.properties.clone())
                .collect();
            let want = ["IOWeight=30", "CPUWeight=70"];
            assert!(
                !stages.is_empty() && stages.iter().all(|p| *p == want),
                "{}: {stages:?}",
                n.name
            );
        }
    }
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

/// A tag moving A -> B -> A: once the first node has booted B, the tag goes
/// back to A. The nodes that never booted B stay on A and are not rebooted
/// at all; those that booted B go back to A with exactly one more reboot;
/// never more than one node down.
#[tokio::test]
async fn a_tag_moving_a_b_a_reboots_only_the_nodes_that_booted_b_once_more() {
    require_root!();
    let (sim, recorder, a) = started(SimOptions::default(), 5).await;
    let b = sim.push_version("2.0").await.unwrap();
    wait_updated(&sim, &b, 1).await;
    let back = sim.push_version("1.0").await.unwrap();
    assert_eq!(back, a, "the same image, the same digest");
    let a_seen = a.clone();
    wait_pool(&sim, "all back on A", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(a_seen.as_str())
                && s.updated_count == 5
                && api::conditions::message(&s.conditions, api::ConditionType::UpToDate)
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

/// Released bootc (no `switch --download-only`) pre-stages like the PR's:
/// the helper locks its staging with ostree's lock file, so every node
/// downloads the new image in parallel before any reboot slot, and holds it
/// through a reboot nobody asked for. With one slot, every node has staged
/// v2 before the first node applies it. Without the lock file such nodes
/// would be told only when a slot awaits them, one download per wave.
#[tokio::test]
async fn released_bootc_nodes_stage_before_any_slot() {
    require_root!();
    let options = SimOptions {
        bootc_versions: vec![BootcVersion::V1_16],
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 3).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_rolled(&sim, &v2, 3).await;
    let image = sim.pinned(&v2);
    let (mut stages, mut applies) = (Vec::new(), Vec::new());
    for node in sim.nodes.lock().await.iter() {
        // Each node stages v2 once and applies once (the apply names no
        // image: `upgrade --from-downloaded --apply`).
        let of_v2 = |apply: bool| {
            node.host
                .layout
                .read_invocations()
                .iter()
                .filter(|i| apply || i.argv.iter().any(|a| a == &image))
                .filter(|i| i.argv.iter().any(|a| a == "--apply") == apply)
                .map(|i| i.unix_micros)
                .min()
        };
        stages.push(of_v2(false).unwrap_or_else(|| panic!("{} never staged v2", node.name)));
        applies.push(of_v2(true).unwrap_or_else(|| panic!("{} never applied v2", node.name)));
    }
    let (last_stage, first_apply) = (stages.iter().max(), applies.iter().min());
    assert!(
        last_stage < first_apply,
        "a node staged v2 only after the first apply: stages {stages:?}, applies {applies:?}"
    );
    assert_disruption_at_most(&recorder, 1).await;
}

#[tokio::test]
async fn reboots_wait_for_the_maintenance_window_and_staging_does_not() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    let approvals = recorder.approvals().await.unwrap().len();

    // A window that opens in three hours: every node stages, none reboots,
    // and the pool says when the window opens.
    let now = jiff::Timestamp::now();
    let hh_mm = |at: jiff::Timestamp| {
        at.to_zoned(jiff::tz::TimeZone::UTC)
            .strftime("%H:%M")
            .to_string()
    };
    let later = hh_mm(now + jiff::SignedDuration::from_hours(3));
    sim.patch_pool(
        json!({"rollout": {"maintenanceWindows": [{"start": later, "duration": "1h"}]}}),
    )
    .await
    .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, "waiting for the window, all staged", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::OutsideMaintenanceWindow && c.2.contains("3 staged"))
    })
    .await;
    let opens = p
        .status
        .unwrap()
        .next_maintenance_window
        .expect("nextMaintenanceWindow")
        .0;
    let in_three_hours = now + jiff::SignedDuration::from_hours(3);
    let early = in_three_hours - jiff::SignedDuration::from_secs(60);
    assert!(
        early < opens && opens <= in_three_hours,
        "opens at {opens}, now {now}"
    );
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted outside the window"
    );

    // The window moved to now: the rollout finishes, within the bound.
    let started = hh_mm(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60));
    sim.patch_pool(
        json!({"rollout": {"maintenanceWindows": [{"start": started, "duration": "2h"}]}}),
    )
    .await
    .unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
    let p = wait_pool(&sim, "no next window once done", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.next_maintenance_window.is_none())
    })
    .await;
    assert_eq!(
        condition(&p, ConditionType::UpToDate).unwrap().1,
        Reason::AllUpdated
    );
}

#[tokio::test]
async fn a_held_node_waits_staged_while_the_others_update() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    let hold = format!("{}alice", api::labels::HOLD_ANNOTATION_PREFIX);
    // Held as a person would hold it, before the new image.
    kubectl(
        &sim,
        &[
            "annotate",
            "node",
            FIRST,
            &format!("{hold}=kernel debugging"),
        ],
    );
    let v2 = sim.push_version("2.0").await.unwrap();
    let p = wait_pool(&sim, "the others updated, the held one staged", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.2.starts_with("2/3 updated; 0 staging, 1 staged")
                && c.2.contains(&format!(
                    "1 held by {}<who> annotations, given no reboot slot: {FIRST}",
                    api::labels::HOLD_ANNOTATION_PREFIX
                ))
        })
    })
    .await;
    assert_eq!(
        condition(&p, ConditionType::UpToDate).unwrap().1,
        Reason::RolloutInProgress
    );
    let approved = recorder.approvals().await.unwrap();
    assert!(
        !approved.iter().any(|n| n == FIRST),
        "the held node was approved: {approved:?}"
    );

    // The hold removed, it updates too, within the bound.
    kubectl(&sim, &["annotate", "node", FIRST, &format!("{hold}-")]);
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
}

#[tokio::test]
async fn a_pool_waits_for_the_pool_it_depends_on() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 2).await;
    let approvals = recorder.approvals().await.unwrap().len();

    // It depends on a pool that does not exist yet: everything stages,
    // nothing reboots, and the pool names what it waits for.
    sim.patch_pool(json!({"rollout": {"dependsOn": ["infra"]}}))
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_pool(&sim, "waiting for infra, all staged", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.1 == Reason::WaitingForDependencies
                && c.2.contains("2 staged")
                && c.2.contains("(no such pool: infra)")
        })
    })
    .await;
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted before infra"
    );

    // infra appears (selecting no node, it is up to date once reconciled):
    // its status change alone lets the rollout go on.
    let pools: Api<BootcNodePool> = Api::all(sim.admin.clone());
    let mut infra = pools.get(POOL).await.unwrap();
    infra.metadata = kube::api::ObjectMeta {
        name: Some("infra".into()),
        ..Default::default()
    };
    infra.spec.node_selector =
        serde_json::from_value(json!({"matchLabels": {"role": "infra"}})).unwrap();
    infra.spec.rollout.depends_on.clear();
    infra.status = None;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(sim.admin.clone(), api::labels::OPERATOR_NAMESPACE);
    let allow = json!({"metadata": {"annotations": {api::labels::POOLS_ANNOTATION: format!("{POOL},infra")}}});
    secrets
        .patch(
            "os-pull",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(allow),
        )
        .await
        .unwrap();
    pools
        .create(&kube::api::PostParams::default(), &infra)
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
}

#[tokio::test]
async fn node_groups_reboot_in_their_order() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    let before = recorder.approvals().await.unwrap().len();
    // The last node by name goes first, as a person orders a zone first.
    kubectl(&sim, &["label", "node", "sim-node-3", "zone=first"]);
    sim.patch_pool(
        json!({"rollout": {"order": [{"selector": {"matchLabels": {"zone": "first"}}}]}}),
    )
    .await
    .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    // In its slot, Karpenter is told to leave it alone.
    wait_node(
        &sim,
        "sim-node-3",
        "karpenter.sh/do-not-disrupt in its slot",
        api::node_health::karpenter_do_not_disrupt,
    )
    .await;
    rolled_out_within_one(&sim, &recorder, &v2, 3).await;
    let approvals = recorder.approvals().await.unwrap();
    assert_eq!(
        approvals[before..]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["sim-node-3", "sim-node-1", "sim-node-2"],
        "zone first, then the others in name order"
    );
}

#[tokio::test]
async fn max_unavailable_zero_stages_everything_and_reboots_nothing() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 2).await;
    let approvals = recorder.approvals().await.unwrap().len();
    sim.patch_pool(json!({"rollout": {"maxUnavailable": 0}}))
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_pool(&sim, "all staged, no slot", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.2.contains("2 staged")
                && c.2
                    .ends_with("maxUnavailable is 0: members stage, none is given a reboot slot")
        })
    })
    .await;
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        approvals,
        "a node rebooted"
    );
    // What a higher-level operator does next: give slots.
    sim.patch_pool(json!({"rollout": {"maxUnavailable": 1}}))
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
}

/// With `--node-lifecycle-conditions` (and, on 1.37, the API server's
/// `NodeLifecycleConditions` gate), a node in its slot says so in
/// Kubernetes' own words: `MaintenanceInProgress`, then `Drained` once its
/// drain is done; both go back to False when it leaves its slot, and the
/// admission policy lets the controller's status patches through.
#[tokio::test]
async fn nodes_in_slots_carry_the_node_lifecycle_conditions() {
    use api::node_health::{
        DRAIN_IN_PROGRESS, DRAINED, LIFECYCLE_REASON, MAINTENANCE_IN_PROGRESS, lifecycle_condition,
    };
    require_root!();
    let options = SimOptions {
        node_lifecycle_conditions: true,
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    let says = |type_: &'static str, status: bool| {
        move |n: &Node| lifecycle_condition(n, type_) == Some((status, LIFECYCLE_REASON))
    };
    // Drained in its slot: under maintenance, drained, no longer draining.
    let drained = move |n: &Node| {
        says(MAINTENANCE_IN_PROGRESS, true)(n)
            && says(DRAINED, true)(n)
            && says(DRAIN_IN_PROGRESS, false)(n)
    };
    // Either node may take the first slot: both are watched from before
    // the new image, so that neither one's slot passes unseen.
    let second = "sim-node-2";
    let (v2, (), ()) = tokio::join!(
        async { sim.push_version("2.0").await.unwrap() },
        wait_node(&sim, FIRST, "drained in its slot", drained),
        wait_node(&sim, second, "drained in its slot", drained),
    );
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
    for name in [FIRST, second] {
        let maintenance_over = says(MAINTENANCE_IN_PROGRESS, false);
        let drained_over = says(DRAINED, false);
        wait_node(
            &sim,
            name,
            "the lifecycle conditions back to False",
            move |n| maintenance_over(n) && drained_over(n),
        )
        .await;
    }
}

/// Pushes `version` of the OS for amd64 and arm64 and an index over both
/// under the pool's tag: `(index digest, this host's platform digest)`.
async fn push_multi_arch(sim: &Sim, version: &str) -> (String, String) {
    use tests::registry::TestImage;
    use tests::sim::{REPO, TAG};
    let host_arch = tests::fake_bootc::Deployment::of("x@sha256:0").architecture;
    let mut entries = Vec::new();
    for arch in ["amd64", "arm64"] {
        let marker = format!("{version}-{arch}");
        let image = TestImage {
            architecture: arch,
            version,
            marker: &marker,
        };
        let digest = sim
            .registry
            .push_image(REPO, &marker, &image)
            .await
            .unwrap();
        entries.push((arch, digest));
    }
    let pairs: Vec<(&str, &str)> = entries.iter().map(|(a, d)| (*a, d.as_str())).collect();
    let index = sim.registry.push_index(REPO, TAG, &pairs).await.unwrap();
    let mine = entries
        .into_iter()
        .find(|(a, _)| *a == host_arch)
        .unwrap()
        .1;
    (index, mine)
}

/// Hosts installed from the tag of a multi-arch image (bootc reports the
/// tag and its platform's manifest digest) run the pool's first target, the
/// index that tag resolves to: up to date without a slot, a stage or a
/// reboot. The next index rolls to them like any other image, one reboot
/// each. Without the target's platform digests each node would be cordoned,
/// drained and rebooted into what it already ran.
#[tokio::test]
async fn tag_installed_hosts_of_a_multi_arch_image_boot_nothing_they_run() {
    require_root!();
    let mut sim = Sim::start(SimOptions::default()).await.unwrap();
    let recorder = Recorder::start(&sim.cp).await.unwrap();
    let (v1_index, v1_mine) = push_multi_arch(&sim, "1.0").await;
    sim.add_nodes(3, &v1_mine).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_rolled(&sim, &v1_index, 3).await;
    for node in sim.nodes.lock().await.iter() {
        assert!(
            node.host.layout.read_reboots().is_empty(),
            "{} rebooted into what it ran",
            node.name
        );
    }
    assert!(
        recorder.approvals().await.unwrap().is_empty(),
        "a node was approved to reboot into what it ran"
    );
    nothing_cordoned(&sim).await;

    let (v2_index, v2_mine) = push_multi_arch(&sim, "2.0").await;
    wait_rolled(&sim, &v2_index, 3).await;
    for node in sim.nodes.lock().await.iter() {
        let booted = node.host.state().booted.unwrap();
        assert_eq!(booted.digest, v2_mine, "{}", node.name);
        assert_eq!(node.host.layout.read_reboots().len(), 1, "{}", node.name);
    }
    assert_disruption_at_most(&recorder, 1).await;
}

/// `kubectl bootc stop --all --before-approval`: the first node is cordoned
/// in its slot (a PodDisruptionBudget holds its drain: the simulated
/// cluster runs no disruption controller, so the API server refuses every
/// eviction under it) when the fleet is stopped; once the budget is gone
/// and its drain ends, it is not approved to boot, waits cordoned and says
/// why; `resume --all` lets the rollout finish.
#[tokio::test]
async fn the_fleets_switch_before_approval_holds_a_drained_node_in_its_slot() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 2).await;
    sim.patch_pool(json!({"rollout": {"order": [
        {"selector": {"matchLabels": {HOSTNAME_LABEL: FIRST}}},
    ]}}))
    .await
    .unwrap();
    tests::k8s::guarded_pod_on(&sim.admin, FIRST).await.unwrap();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(sim.admin.clone(), "default");
    let approved_before = recorder.approvals().await.unwrap().len();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_node(&sim, FIRST, "cordoned in its slot", |n| {
        n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
    })
    .await;
    let out = kubectl_bootc(&sim, &["stop", "--all", "--before-approval"]);
    assert!(out.contains("nodes in slots wait cordoned"), "{out}");
    // The budget lifted: the drain ends, and the node waits unapproved.
    let _kubelet = kubelet_deletes_evicted(&sim, "default");
    budgets
        .delete(tests::k8s::GUARDED, &Default::default())
        .await
        .unwrap();
    let held = format!("not approved to boot: {FIRST}");
    wait_pool(&sim, "held before its approval", move |p| {
        tests::k8s::condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::FleetStopped.as_str() && c.2.contains(&held))
    })
    .await;
    let why = kubectl_bootc(&sim, &["why", FIRST]);
    assert!(why.starts_with("held by the fleet's switch"), "{why}");
    let approved = recorder.approvals().await.unwrap().len();
    assert_eq!(
        approved, approved_before,
        "approved while the fleet was stopped"
    );

    let out = kubectl_bootc(&sim, &["resume", "--all"]);
    assert!(out.starts_with("fleet resumed"), "{out}");
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
}

/// A drain waits for its evicted pods' ends on a watch of the node's pods,
/// not by listing them again: while the first node's one pod is
/// terminating (no kubelet ends it yet), the controller lists the node's
/// pods no more, and the pod's deletion ends the drain at once and leads to
/// the node's approval. Looking on its schedule instead, the drain listed
/// them 100, 300, 700 and 1,200 ms after its eviction, and saw the end up
/// to half a second late.
#[tokio::test]
async fn a_drain_waits_for_its_evicted_pods_on_a_watch_not_by_listing_again() {
    use k8s_openapi::api::core::v1::Pod;
    require_root!();
    let options = SimOptions {
        audit: true,
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    sim.patch_pool(json!({"rollout": {"order": [
        {"selector": {"matchLabels": {HOSTNAME_LABEL: FIRST}}},
    ]}}))
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(sim.admin.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "slow-to-end"},
        "spec": {"nodeName": FIRST, "automountServiceAccountToken": false,
                 "containers": [{"name": "app", "image": "example.invalid/app:1"}]},
    }))
    .unwrap();
    k8s::create_running_pod(&pods, &pod).await.unwrap();
    let approved_before = recorder.approvals().await.unwrap().len();
    sim.push_version("2.0").await.unwrap();
    k8s::wait_for(
        pods.clone(),
        "slow-to-end",
        ROLLOUT,
        "evicted",
        |p: Option<&Pod>| p.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
    )
    .await
    .unwrap();
    let lists_at_eviction = pod_lists_of(&sim, FIRST);
    assert!(
        lists_at_eviction >= 1,
        "the drain listed no pods of {FIRST}"
    );
    // The window observed (not a synchronisation): the schedule's looks
    // after an eviction fall at 100, 300, 700 and 1,200 ms.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        pod_lists_of(&sim, FIRST),
        lists_at_eviction,
        "the drain listed {FIRST}'s pods again while its one pod was only terminating"
    );
    let gone = kube::api::DeleteParams::default().grace_period(0);
    pods.delete("slow-to-end", &gone).await.unwrap();
    wait_node(&sim, FIRST, "rebooted into v2 and released", |n| {
        !api::node_health::is_cordoned(n)
    })
    .await;
    let approved = recorder.approvals().await.unwrap();
    assert!(approved.len() > approved_before, "{approved:?}");
}

/// The controller's lists of `node`'s pods (a drain's look), from the
/// audit log.
fn pod_lists_of(sim: &Sim, node: &str) -> usize {
    let selector = format!("spec.nodeName%3D{node}");
    sim.cp
        .audit_events()
        .into_iter()
        .filter(|e| {
            e["stage"] == "RequestReceived"
                && e["user"]["username"] == tests::control_plane::CONTROLLER_USER
                && e["verb"] == "list"
                && e["objectRef"]["resource"] == "pods"
                && e["requestURI"]
                    .as_str()
                    .is_some_and(|u| u.contains(&selector))
        })
        .count()
}
