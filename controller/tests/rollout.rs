//! The controller against a real API server: the test plays the daemons
//! (tests::daemon_player) and the kubelet, and a recorder proves the
//! disruption bound over the whole test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use api::Node;
use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tests::daemon_player::{DaemonPlayer, PlayerOptions};

/// Five nodes, maxUnavailable 2: never more than two disrupted at once, a
/// node the admin cordoned before stays cordoned, everything ends updated.
#[tokio::test]
async fn five_nodes_roll_two_at_a_time() {
    let names = ["n1", "n2", "n3", "n4", "n5"];
    let Cluster {
        env,
        recorder,
        player: _player,
        mut ctl,
    } = Setup::workers(&names)
        .cordoned(&["n3"])
        .pool(workers_pool(2))
        .start()
        .await;

    let p = wait_rolled(&env.admin, "workers", NEW, 5).await;
    let s = p.status.unwrap();
    assert_eq!(s.target_digest.as_deref(), Some(NEW));
    assert!(!s.update_available);
    assert_eq!(s.observed_generation, p.metadata.generation);
    let peak = recorder
        .worst_peak(&set(&names), &set(&["n3"]))
        .await
        .unwrap();
    assert!(peak.count <= 2, "disruption bound broken: {peak:?}");
    assert!(peak.count >= 1);
    assert_eq!(recorder.approvals().await.unwrap().len(), 5);

    for n in names {
        let node = node(&env.admin, n).await;
        assert!(is_managed(&node), "{n} labelled");
        assert_eq!(is_cordoned(&node), n == "n3", "{n} cordon state restored");
        assert_eq!(disrupted_by(&node), None, "{n}: its slot's record removed");
        let bn = bootc_node(&env.admin, n).await.unwrap();
        assert!(bn.annotations_empty(), "{n} annotations removed");
        assert_eq!(bn.spec.desired_image, image(NEW));
    }

    // The pool's Events tell the rollout's story in two, and a
    // healthy node's update adds none (the write budget of BENCHMARKS.md's targets).
    // Published just after the status that shows the rollout complete.
    wait_event(
        &env.admin,
        event_reasons::ROLLOUT_COMPLETE,
        "all 5 nodes run",
    )
    .await;
    let events: Api<Event> =
        Api::namespaced(env.admin.clone(), api::labels::CLUSTER_EVENTS_NAMESPACE);
    // The pool's Events only: the API server publishes its own in the same
    // namespace (a ClusterIP repair, at its own time).
    let pool_kind = api::BootcNodePool::kind(&());
    let mut all: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(&*pool_kind))
        .collect();
    all.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    let reasons: Vec<String> = all.iter().filter_map(|e| e.reason.clone()).collect();
    assert_eq!(
        reasons,
        [
            event_reasons::ROLLOUT_STARTED,
            event_reasons::ROLLOUT_COMPLETE
        ],
        "events: {:?}",
        all.iter().map(|e| &e.note).collect::<Vec<_>>()
    );
    assert!(all.iter().all(|e| e.related.is_none()), "{all:?}");
    assert_eq!(
        all[0].note.as_deref(),
        Some(
            format!(
                "rolling out {} to 5 of 5 nodes, at most 2 at a time",
                image(NEW)
            )
            .as_str()
        )
    );
    // `kubectl describe bnp` shows them, as README.md says.
    let out = env
        .cp
        .kubectl()
        .args(["describe", "bnp", "workers"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let events = text.split_once("\nEvents:").map(|(_, e)| e).unwrap_or("");
    assert!(
        out.status.success()
            && events.contains(event_reasons::ROLLOUT_STARTED)
            && events.contains(event_reasons::ROLLOUT_COMPLETE),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ctl.terminate().await;
}

trait AnnotationsEmpty {
    fn annotations_empty(&self) -> bool;
}

impl AnnotationsEmpty for api::BootcNode {
    fn annotations_empty(&self) -> bool {
        use kube::ResourceExt;
        !self.legacy_slot_record()
            && !self
                .annotations()
                .contains_key(api::labels::WAS_CORDONED_ANNOTATION)
    }
}

/// SIGKILL mid-rollout, then a new process: slots survive in annotations,
/// the bound holds across the restart, and the rollout completes.
#[tokio::test]
async fn restart_mid_rollout_keeps_slots() {
    let names = ["n1", "n2", "n3", "n4"];
    // n2 holds its slot (its daemon ignores the approval) until the restart.
    let Cluster {
        env,
        recorder,
        player: held,
        mut ctl,
    } = Setup::workers(&names)
        .ignore_approval(&["n2"])
        .controller("ctl1", &[])
        .pool(workers_pool(1))
        .start()
        .await;
    tests::k8s::wait_for(
        Api::<api::BootcNode>::all(env.admin.clone()),
        "n2",
        WAIT,
        "n2 approved in its slot",
        |b| b.is_some_and(api::BootcNode::approved),
    )
    .await
    .unwrap();
    ctl.kill().await;
    // The daemon of n2 now reboots while no controller runs.
    drop(held);
    let _player = DaemonPlayer::start(
        env.admin.clone(),
        PlayerOptions {
            initial_image: image(OLD),
            ..PlayerOptions::default()
        },
    );
    let mut ctl2 = ControllerProc::spawn(&env, "ctl2", &[]);
    wait_rolled(&env.admin, "workers", NEW, 4).await;
    let peak = recorder.worst_peak(&set(&names), &set(&[])).await.unwrap();
    assert!(peak.count <= 1, "bound broken across the restart: {peak:?}");
    let approvals = recorder.approvals().await.unwrap();
    assert_eq!(approvals.len(), 4, "one approval per node: {approvals:?}");
    for n in names {
        let node = node(&env.admin, n).await;
        assert!(!is_cordoned(&node), "{n} uncordoned");
    }
    ctl2.terminate().await;
}

/// A BootcNode deleted while its node holds a slot: the slot's record and
/// our cordon's mark are on the Node, so the recreated BootcNode keeps the
/// slot and the node ends uncordoned.
#[tokio::test]
async fn bootc_node_deleted_mid_slot_leaves_nothing_cordoned() {
    let names = ["n1", "n2"];
    let Cluster {
        env,
        recorder: _,
        player: held,
        mut ctl,
    } = Setup::workers(&names)
        .ignore_approval(&names)
        .pool(workers_pool(1))
        .start()
        .await;
    let bns = Api::<api::BootcNode>::all(env.admin.clone());
    let holder = {
        use futures::TryStreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let nodes = Api::<Node>::all(env.admin.clone());
        let mut events =
            std::pin::pin!(watcher(nodes, watcher::Config::default()).applied_objects());
        tokio::time::timeout(WAIT, async {
            while let Some(n) = events.try_next().await.unwrap() {
                if disrupted_by(&n).is_some() {
                    return n.name_any();
                }
            }
            panic!("the Node watch ended");
        })
        .await
        .expect("a node takes the slot")
    };
    tests::k8s::wait_for(
        Api::<Node>::all(env.admin.clone()),
        &holder,
        WAIT,
        "the slot holder cordoned",
        |n| n.is_some_and(is_cordoned),
    )
    .await
    .unwrap();
    bns.delete(&holder, &Default::default()).await.unwrap();
    drop(held);
    let _player = DaemonPlayer::start(
        env.admin.clone(),
        PlayerOptions {
            initial_image: image(OLD),
            ..PlayerOptions::default()
        },
    );
    wait_rolled(&env.admin, "workers", NEW, 2).await;
    for n in names {
        let node = node(&env.admin, n).await;
        assert!(
            !is_cordoned(&node),
            "{n} left cordoned: {:?}",
            node.metadata.annotations
        );
        assert!(
            !node
                .annotations()
                .contains_key(api::labels::CORDONED_BY_ANNOTATION),
            "{n} keeps the mark"
        );
    }
    ctl.terminate().await;
}

/// A label removed mid-rollout: the node leaves the pool: BootcNode deleted,
/// managed label removed, cordon restored, slot freed for the others.
#[tokio::test]
async fn label_removed_mid_rollout_releases_the_node() {
    let names = ["n1", "n2", "n3"];
    let Cluster {
        env,
        recorder,
        player: _player,
        mut ctl,
    } = Setup::workers(&names)
        .ignore_approval(&["n1"])
        .pool(workers_pool(1))
        .start()
        .await;
    tests::k8s::wait_for(
        Api::<api::BootcNode>::all(env.admin.clone()),
        "n1",
        WAIT,
        "n1 approved in its slot",
        |b| b.is_some_and(api::BootcNode::approved),
    )
    .await
    .unwrap();
    assert!(is_cordoned(&node(&env.admin, "n1").await));

    Api::<k8s_openapi::api::core::v1::Node>::all(env.admin.clone())
        .patch(
            "n1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"pool": null}}})),
        )
        .await
        .unwrap();
    tests::k8s::wait_for(
        Api::<api::BootcNode>::all(env.admin.clone()),
        "n1",
        WAIT,
        "n1's BootcNode deleted",
        |b| b.is_none(),
    )
    .await
    .unwrap();
    let n1 = node(&env.admin, "n1").await;
    assert!(!is_managed(&n1), "managed label removed");
    assert!(!is_cordoned(&n1), "cordon restored");

    wait_rolled(&env.admin, "workers", NEW, 2).await;
    let peak = recorder.worst_peak(&set(&names), &set(&[])).await.unwrap();
    assert!(peak.count <= 1, "{peak:?}");
    ctl.terminate().await;
}

/// Two pools selecting one node: neither takes it, both report
/// NodeConflict naming the other, and their other nodes roll.
#[tokio::test]
async fn overlapping_pools_report_conflict_and_roll_the_rest() {
    let Cluster {
        env,
        recorder: _,
        player: _player,
        mut ctl,
    } = Setup::default()
        .node("a1", &[("role", "worker")])
        .node("a2", &[("role", "worker")])
        .node("b1", &[("zone", "z1")])
        .pool(pool(
            "alpha",
            json!({"role": "worker"}),
            &image(NEW),
            json!(1),
        ))
        .pool(pool("beta", json!({"zone": "z1"}), &image(NEW), json!(1)))
        .start()
        .await;
    wait_rolled(&env.admin, "alpha", NEW, 2).await;
    wait_rolled(&env.admin, "beta", NEW, 1).await;

    // Now a node that both select.
    create_node(
        &env.admin,
        "shared",
        &[("role", "worker"), ("zone", "z1")],
        false,
    )
    .await;
    for (pool, other) in [("alpha", "beta"), ("beta", "alpha")] {
        let p = wait_pool(&env.admin, pool, Reason::NodeConflict.as_str(), move |p| {
            condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::NodeConflict)
        })
        .await;
        let (_, _, message) = condition(&p, ConditionType::Degraded).unwrap();
        assert!(message.contains("node shared"), "{message}");
        assert!(message.contains(other), "{pool} names {other}: {message}");
    }
    assert!(bootc_node(&env.admin, "shared").await.is_none());
    assert!(!is_managed(&node(&env.admin, "shared").await));
    // The uncontested nodes stay rolled.
    for n in ["a1", "a2", "b1"] {
        let bn = bootc_node(&env.admin, n).await.unwrap();
        assert_eq!(
            bn.status.unwrap().booted.unwrap().image.as_deref(),
            Some(image(NEW).as_str())
        );
    }
    ctl.terminate().await;
}

/// Two nodes fail after taking slots: no third slot, even with room for
/// one, and the pool says RolloutHalted.
#[tokio::test]
async fn two_failed_nodes_halt_the_rollout() {
    let names = ["n1", "n2", "n3", "n4"];
    let Cluster {
        env,
        recorder,
        player: _player,
        mut ctl,
    } = Setup::workers(&names)
        .fail_after_reboot(&names)
        .pool(workers_pool(2))
        .start()
        .await;
    wait_pool(&env.admin, "workers", "RolloutHalted, two degraded", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::RolloutHalted)
            && p.status.as_ref().is_some_and(|s| s.degraded_count == 2)
    })
    .await;
    wait_event(&env.admin, event_reasons::ROLLOUT_HALTED, "unhealthy").await;

    // Room for a third slot: still none is given.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"rollout": {"maxUnavailable": 3}}}),
    )
    .await;
    let p = wait_pool(&env.admin, "workers", "new generation observed", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == p.metadata.generation)
    })
    .await;
    assert_eq!(
        condition(&p, ConditionType::Degraded).unwrap().1,
        Reason::RolloutHalted
    );
    let approvals = recorder.approvals().await.unwrap();
    assert_eq!(approvals.len(), 2, "no third slot: {approvals:?}");
    let slotted = futures::future::join_all(names.iter().map(|n| node(&env.admin, n)))
        .await
        .into_iter()
        .filter(|n| disrupted_by(n).is_some())
        .count();
    assert_eq!(slotted, 2);
    assert_eq!(p.status.unwrap().degraded_count, 2);
    ctl.terminate().await;
}

/// Pause (staging goes on, no slot), resume, roll back, delete the pool:
/// nothing left cordoned or labelled.
#[tokio::test]
async fn pause_resume_rollback_and_delete() {
    let names = ["n1", "n2", "n3"];
    // n2 is cordoned by the admin: it uses one of the two slots' worth of
    // the budget (see rollout/src/holds/disruption.rs), one is left to roll.
    let mut p = workers_pool(2);
    p.spec.rollout.paused = true;
    let Cluster {
        env,
        recorder,
        player: _player,
        mut ctl,
    } = Setup::workers(&names)
        .cordoned(&["n2"])
        .pool(p)
        .start()
        .await;
    let p = wait_pool(&env.admin, "workers", "paused with all staged", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::Paused && c.2.contains("3 staged"))
    })
    .await;
    assert_eq!(
        condition(&p, ConditionType::UpToDate).unwrap().2,
        "0/3 updated; 0 staging, 3 staged, 0 rebooting"
    );
    assert!(recorder.approvals().await.unwrap().is_empty());

    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"rollout": {"paused": false}}}),
    )
    .await;
    wait_rolled(&env.admin, "workers", NEW, 3).await;

    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": image(OLD)}}}),
    )
    .await;
    wait_rolled(&env.admin, "workers", OLD, 3).await;
    assert_eq!(
        recorder.approvals().await.unwrap().len(),
        6,
        "each node rebooted twice"
    );

    Api::<api::BootcNodePool>::all(env.admin.clone())
        .delete("workers", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    tests::k8s::wait_for(
        Api::<api::BootcNodePool>::all(env.admin.clone()),
        "workers",
        WAIT,
        "pool deleted",
        |p| p.is_none(),
    )
    .await
    .unwrap();
    for n in names {
        let node = node(&env.admin, n).await;
        assert!(!is_managed(&node), "{n} unlabelled");
        assert_eq!(is_cordoned(&node), n == "n2", "{n} cordon as before");
        assert!(
            bootc_node(&env.admin, n).await.is_none(),
            "{n} BootcNode deleted"
        );
    }
    let peak = recorder
        .worst_peak(&set(&names), &set(&["n2"]))
        .await
        .unwrap();
    assert!(
        peak.count <= 2,
        "{peak:?}\n{}\n{}",
        recorder.timeline(peak.resource_version, 25),
        ctl.log_text()
            .lines()
            .filter(|l| l.contains("patched Node")
                || l.contains("applied")
                || l.contains("deleted"))
            .map(|l| l.chars().take(300).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    );
    ctl.terminate().await;
}

/// The Secret watch: rotating the pull secret bumps pullSecretHash, which
/// names the Secret's version (uid and resourceVersion), never a hash of its
/// content (every BootcNode reader sees it).
#[tokio::test]
async fn pull_secret_rotation_bumps_the_hash() {
    use k8s_openapi::api::core::v1::Secret;
    let env = env().await;
    create_node(&env.admin, "n1", &[("pool", "workers")], false).await;
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), "bootc-operator");
    let secret = |auth: &str| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "pull", "annotations": {api::labels::POOLS_ANNOTATION: "workers"}},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": format!("{{\"auths\":{{\"quay.io\":{{\"auth\":\"{auth}\"}}}}}}")},
        }))
        .unwrap()
    };
    secrets
        .create(&kube::api::PostParams::default(), &secret("one"))
        .await
        .unwrap();
    let mut ctl = ControllerProc::spawn(&env, "ctl", &[]);
    let mut p = workers_pool(1);
    p.spec.pull_secret_ref = Some(api::SecretReference {
        name: "pull".into(),
        namespace: "bootc-operator".into(),
    });
    create_pool(&env.admin, &p).await;
    let bn = tests::k8s::wait_for(
        Api::<api::BootcNode>::all(env.admin.clone()),
        "n1",
        WAIT,
        "hash set",
        |b| b.is_some_and(|b| b.spec.pull_secret_hash.is_some()),
    )
    .await
    .unwrap()
    .unwrap();
    let first = bn.spec.pull_secret_hash.clone().unwrap();
    let stored = secrets.get("pull").await.unwrap();
    assert_eq!(
        Some(&first),
        api::pull_secret::version(&stored.metadata).as_ref()
    );
    assert!(!first.starts_with("sha256:"), "{first}");
    assert_eq!(bn.spec.pull_secret_ref.unwrap().name, "pull");
    secrets
        .replace("pull", &kube::api::PostParams::default(), &{
            let mut s = secrets.get("pull").await.unwrap();
            s.data = None;
            s.string_data = secret("two").string_data;
            s
        })
        .await
        .unwrap();
    let f = first.clone();
    tests::k8s::wait_for(
        Api::<api::BootcNode>::all(env.admin.clone()),
        "n1",
        WAIT,
        "hash changed",
        move |b| b.is_some_and(|b| b.spec.pull_secret_hash.as_deref().is_some_and(|h| h != f)),
    )
    .await
    .unwrap();
    ctl.terminate().await;
}
