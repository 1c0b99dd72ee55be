//! `spec.rollout.silences` with a real Alertmanager: a node's alerts are
//! silenced from before its cordon until it leaves its reboot slot, the
//! other nodes' are not, and an Alertmanager that does not answer holds
//! the first slot and says so.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use tests::alertmanager::Alertmanager;

use super::*;

/// The alert each node fires, as a node exporter's would.
const ALERT: &str = "BootcNodeTest";

/// How long the silences may take to be expired once the rollout is over
/// (they are expired before the uncordon: this is the bound of a wait).
const EXPIRY: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_node_in_its_reboot_slot_is_silenced_at_alertmanager_until_it_leaves_it() {
    require_root!();
    let am = Alertmanager::start().await.unwrap();
    let silent = format!(
        "http://127.0.0.1:{}",
        tests::control_plane::free_port().unwrap()
    );
    let options = SimOptions {
        alertmanager_endpoints: vec![("main".into(), am.url()), ("silent".into(), silent)],
        ..SimOptions::default()
    };
    let (sim, recorder, _v1) = started(options, 2).await;
    let second = "sim-node-2";
    for node in [FIRST, second] {
        am.fire(ALERT, &[("node", node)]).await.unwrap();
    }
    let silences = |endpoint: &str| json!({"rollout": {"silences": {"endpoint": endpoint}}});

    // An Alertmanager that does not answer holds the first slot.
    sim.patch_pool(silences("silent")).await.unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_pool(&sim, "a silent Alertmanager holds the first slot", |p| {
        condition(p, ConditionType::UpToDate).is_some_and(|c| {
            c.1 == Reason::GateUnanswered
                && c.2.contains("2 staged")
                && c.2.contains("spec.rollout.silences could not be checked")
                && c.2
                    .contains(r#"Alertmanager endpoint "silent" could not be reached"#)
        })
    })
    .await;
    nothing_cordoned(&sim).await;
    let why = kubectl_bootc(&sim, &["why", FIRST]);
    assert!(
        why.contains("spec.rollout.silences could not be checked"),
        "{why}"
    );
    let status = kubectl_bootc(&sim, &["status", POOL]);
    assert!(
        status.contains("silenced at Alertmanager endpoint silent"),
        "{status}"
    );

    // A budget keeps the first node draining in its slot, for as long as
    // the test looks.
    let _kubelet = kubelet_deletes_evicted(&sim, "default");
    k8s::guarded_pod_on(&sim.admin, FIRST).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(sim.admin.clone(), "default");
    let cordoned = tokio::spawn(k8s::wait_for(
        Api::<Node>::all(sim.admin.clone()),
        FIRST,
        ROLLOUT,
        "cordoned",
        |n: Option<&Node>| n.is_some_and(api::node_health::is_cordoned),
    ));
    sim.patch_pool(silences("main")).await.unwrap();
    cordoned.await.unwrap().unwrap();

    // Silenced before its cordon: its alert muted, the other node's not.
    assert_eq!(am.silenced(ALERT, "node").await.unwrap(), [FIRST]);
    let found = am.silences().await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["createdBy"], "bootc-operator", "{found:?}");
    let comment = found[0]["comment"].as_str().unwrap_or_default();
    assert!(
        comment.contains(FIRST) && comment.contains(POOL),
        "{comment}"
    );

    // The budget gone, the rollout ends, and so does every silence of ours.
    pdbs.delete(k8s::GUARDED, &Default::default())
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;
    let started = std::time::Instant::now();
    loop {
        let left = am.silences().await.unwrap();
        let muted = am.silenced(ALERT, "node").await.unwrap();
        if left.is_empty() && muted.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < EXPIRY,
            "silences left after the rollout: {left:?}, muting {muted:?}"
        );
        // Alertmanager is asked again shortly.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The controller's Alertmanager client against the real one: a silence of
/// ours found near its end (as a controller that restarted finds it) is
/// renewed, a person's for the same node is left alone, and once the node
/// leaves its slot ours is expired and the person's still stands.
#[tokio::test]
async fn a_silence_found_near_its_end_is_renewed_and_a_persons_is_left_alone() {
    use ::controller::actions::silences::{AlertmanagerEndpoints, SilenceMemory, Silencer};
    use ::rollout::reboot::silences::{CREATED_BY, LENGTH, comment};
    let am = Alertmanager::start().await.unwrap();
    let node = "n1";
    let matcher = format!("node={node}");
    let old = am
        .silence(&[&matcher], CREATED_BY, &comment(POOL, node), "10m")
        .await
        .unwrap();
    let persons = am
        .silence(&[&matcher], "alice", "kernel debugging", "2h")
        .await
        .unwrap();
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {"nodeSelector": {}, "image": {"ref": "quay.io/acme/os:1"},
                 "rollout": {"silences": {"endpoint": "main"}}},
    }))
    .unwrap();
    let endpoint = format!("main={}", am.url());
    let silencer = Silencer::new(AlertmanagerEndpoints::parse([endpoint.as_str()]).unwrap());
    let mut memory = SilenceMemory::default();
    silencer.check(&pool, &mut memory).await.unwrap();
    let holders = BTreeSet::from([node.to_owned()]);
    silencer.sync(&pool, holders, &mut memory).await;

    let ids = |silences: &[serde_json::Value]| -> Vec<String> {
        silences
            .iter()
            .filter_map(|s| s["id"].as_str().map(str::to_owned))
            .collect()
    };
    let found = am.silences().await.unwrap();
    let ours: Vec<&serde_json::Value> = found
        .iter()
        .filter(|s| s["createdBy"] == CREATED_BY)
        .collect();
    assert_eq!(ours.len(), 1, "{found:?}");
    let ends: jiff::Timestamp = ours[0]["endsAt"].as_str().unwrap().parse().unwrap();
    let soon = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(15);
    assert!(
        ends > soon && ends <= jiff::Timestamp::now() + LENGTH,
        "{found:?}"
    );
    assert!(ids(&found).contains(&persons), "{found:?}");
    assert!(
        !ids(&found).contains(&old) || ours[0]["id"] == old.as_str(),
        "{found:?}"
    );

    silencer.sync(&pool, BTreeSet::new(), &mut memory).await;
    let found = am.silences().await.unwrap();
    assert_eq!(ids(&found), [persons], "{found:?}");
}
