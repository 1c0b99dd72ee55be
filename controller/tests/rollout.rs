//! The controller against a real API server: the test plays the daemons
//! (tests::daemon_player) and the kubelet, and a recorder proves the
//! disruption bound over the whole test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;
use tests::daemon_player::{DaemonPlayer, PlayerOptions};
use tests::recorder::Recorder;

/// Five nodes, maxUnavailable 2: never more than two disrupted at once, a
/// node the admin cordoned before stays cordoned, everything ends updated.
#[tokio::test]
async fn five_nodes_roll_two_at_a_time() {
    let env = env().await;
    let names = ["n1", "n2", "n3", "n4", "n5"];
    for n in names {
        create_node(&env.admin, n, &[("pool", "workers")], n == "n3").await;
    }
    let recorder = Recorder::start(env.admin.clone()).await.unwrap();
    let _player = DaemonPlayer::start(
        env.admin.clone(),
        PlayerOptions {
            initial_image: image(OLD),
            ..PlayerOptions::default()
        },
    );
    let mut ctl = ControllerProc::spawn(&env, "ctl", &[]);
    create_pool(
        &env.admin,
        &pool("workers", json!({"pool": "workers"}), &image(NEW), json!(2)),
    )
    .await;

    let p = wait_rolled(&env.admin, "workers", NEW, 5).await;
    let s = p.status.unwrap();
    assert_eq!(s.target_digest.as_deref(), Some(NEW));
    assert!(!s.update_available);
    assert_eq!(s.observed_generation, p.metadata.generation);

    let peak = recorder.peak(&set(&names), &set(&["n3"]));
    assert!(peak.count <= 2, "disruption bound broken: {peak:?}");
    assert!(peak.count >= 1);
    assert_eq!(recorder.approvals().len(), 5);

    for n in names {
        let node = node(&env.admin, n).await;
        assert!(is_managed(&node), "{n} labelled");
        assert_eq!(is_cordoned(&node), n == "n3", "{n} cordon state restored");
        let bn = bootc_node(&env.admin, n).await.unwrap();
        assert!(bn.annotations_empty(), "{n} annotations removed");
        assert_eq!(bn.spec.desired_image, image(NEW));
    }

    // Events in the operator namespace tell the story.
    let events: Api<Event> = Api::namespaced(env.admin.clone(), "bootc-operator");
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for want in [
        "SlotAssigned",
        "DrainStarted",
        "DrainFinished",
        "RebootApproved",
        "NodeUpdated",
    ] {
        assert!(
            reasons.iter().any(|r| r == want),
            "event {want} in {reasons:?}; log:\n{}",
            ctl.log_text()
                .lines()
                .filter(|l| l.contains("event"))
                .take(5)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    ctl.terminate().await;
}

trait AnnotationsEmpty {
    fn annotations_empty(&self) -> bool;
}

impl AnnotationsEmpty for api::BootcNode {
    fn annotations_empty(&self) -> bool {
        use kube::ResourceExt;
        !self
            .annotations()
            .contains_key(api::labels::IN_REBOOT_SLOT_ANNOTATION)
            && !self
                .annotations()
                .contains_key(api::labels::WAS_CORDONED_ANNOTATION)
    }
}
