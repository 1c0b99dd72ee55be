//! The health gate ([`crate::reboot::health_gate`]): a slot holder back on the target
//! keeps its slot until its checks hold for `settleSeconds`; past
//! `timeoutSeconds` it fails, is rolled back in its slot or kept there, and
//! no other node is given the image.

use api::labels::{HEALTH_FAILED_ANNOTATION, HEALTH_FAILED_BECAUSE_ANNOTATION};
use api::{HealthFailurePolicy, HealthSpec};

use super::*;
use crate::holds::gates::{Gates, PodSeen};
use crate::reboot::health_gate::{Checked, Proof, assess};

fn ago(secs: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(secs)
}

fn spec(on_failure: HealthFailurePolicy) -> HealthSpec {
    serde_json::from_value(json!({
        "pods": [{"namespace": "gpu", "selector": {"matchLabels": {"app": "driver"}}}],
        "settleSeconds": 60,
        "timeoutSeconds": 300,
        "onFailure": on_failure,
        // These tables are about one node's gate: its failure is the
        // pool's (the default, 2, is below).
        "nodesToFailImage": 1,
    }))
    .unwrap()
}

/// The driver pod on `first`: Ready or not, since `secs` ago.
fn driver(ready: bool, secs: i64) -> Gates {
    let pod = PodSeen {
        entry: 0,
        name: "gpu/driver-first".into(),
        ready,
        since: Some(ago(secs)),
    };
    Gates {
        health_pods: Ok(BTreeMap::from([("first".to_owned(), vec![pod])])),
        ..Gates::default()
    }
}

/// `first` reported `runs` (its phase since `booted` seconds ago, bootc's
/// rollback entry OLD), in its slot and approved; `second` staged, waiting
/// for the one slot.
fn world(on_failure: HealthFailurePolicy, gates: Gates, booted: i64, runs: &'static str) -> World {
    let first = bn("first", NEW, Daemon::Idle(runs)).approved().slot(false);
    world_of(first, on_failure, gates, booted)
}

/// [`world`] with `first` as given.
fn world_of(first: Bn, on_failure: HealthFailurePolicy, gates: Gates, booted: i64) -> World {
    let mut p = pool("a", IntOrString::Int(1), false);
    p.spec.health = Some(spec(on_failure));
    let mut w = World::new(p)
        .node(marked(node("first", "a", true, true), "a"))
        .node(node("second", "a", true, false))
        .bn(first)
        .bn(bn("second", NEW, Daemon::Staged(OLD)));
    let first = &mut w.bns[0];
    let status = first.status.as_mut().unwrap();
    status.conditions[0].last_transition_time = Time(ago(booted));
    status.rollback = Some(BootEntryStatus {
        image: Some(image(OLD).into()),
        image_digest: Some(OLD.into()),
        ..BootEntryStatus::default()
    });
    w.gates = gates;
    w
}

/// Marks `first` failed on `digest`, as a plan before did.
fn failed_before(mut w: World, digest: &str, desired: &str) -> World {
    let first = &mut w.bns[0];
    first.spec.desired_image = image(desired).into();
    first.annotations_mut().extend([
        (HEALTH_FAILED_ANNOTATION.to_owned(), digest.to_owned()),
        (
            HEALTH_FAILED_BECAUSE_ANNOTATION.to_owned(),
            "pod gpu/driver-first Ready".to_owned(),
        ),
    ]);
    w
}

#[test]
fn the_gate_settles_waits_and_fails() {
    let s = spec(HealthFailurePolicy::Halt);
    let checked = |failing: &[&str], since: i64| Checked {
        failing: failing.iter().map(|f| (*f).to_owned()).collect(),
        since: Some(ago(since)),
        unanswered: None,
    };
    let settling = |recheck: u64| move |p: &Proof| matches!(p, Proof::Settling { recheck: r, .. } if r.as_secs() == recheck);
    // (what, checks, booted secs ago, answer)
    type Row = (&'static str, Checked, i64, Box<dyn Fn(&Proof) -> bool>);
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("held for the settle", checked(&[], 61), 100, Box::new(|p| *p == Proof::Passed)),
        ("held, counted from the boot", checked(&[], 500), 61, Box::new(|p| *p == Proof::Passed)),
        ("held 20s of 60s", checked(&[], 20), 100, Box::new(settling(40))),
        ("a check fails, in time", checked(&["pod p Ready"], 5), 100, Box::new(settling(5))),
        ("a check fails near the timeout", checked(&["pod p Ready"], 5), 298, Box::new(settling(2))),
        ("a check fails past the timeout", checked(&["pod p Ready"], 5), 300,
            Box::new(|p| matches!(p, Proof::Failed { check } if check == "pod p Ready not shown within timeoutSeconds 300"))),
        ("held, not long enough, past the timeout", checked(&[], 30), 300,
            Box::new(|p| matches!(p, Proof::Failed { check } if check.starts_with("the checks held only 30s")))),
        ("unanswered, past the timeout", Checked { unanswered: Some("forbidden".into()), ..Checked::default() }, 900,
            Box::new(settling(5))),
    ];
    for (what, checked, booted, want) in rows {
        let got = assess(&s, &checked, Some(ago(booted)), now());
        assert!(want(&got), "{what}: {got:?}");
    }
}

#[test]
fn a_node_proves_the_target_before_its_slot_is_released() {
    use HealthFailurePolicy::Halt;
    let no_pods = Gates {
        health_pods: Ok(BTreeMap::new()),
        ..Gates::default()
    };
    // (what, world, first released, UpToDate message has)
    #[rustfmt::skip]
    let rows: Vec<(&str, World, bool, &str)> = vec![
        ("passes", world(Halt, driver(true, 100), 120, NEW), true, "in reboot slots: second"),
        ("settles", world(Halt, driver(true, 30), 120, NEW), false,
            "proving the target (spec.health), in their reboot slots: first: settling: every check holds, 30s of 60s"),
        ("waits for its pod", world(Halt, driver(false, 10), 120, NEW), false,
            "first: waiting for pod gpu/driver-first Ready (180s left of 300s)"),
        ("waits for a pod to exist", world(Halt, no_pods, 120, NEW), false,
            "waiting for a pod of spec.health.pods[0] in gpu"),
        ("a mark for another image is no failure", failed_before(world(Halt, driver(true, 100), 120, NEW), OLD, NEW),
            true, "in reboot slots: second"),
    ];
    for (what, w, released, says) in rows {
        let p = w.plan();
        assert_eq!(uncordons(&p, "first"), released, "{what}: {:?}", p.writes);
        assert_eq!(
            slotted(&p) == ["second"],
            released,
            "{what}: {:?}",
            p.writes
        );
        let (_, reason, message) = up_to_date(&p);
        assert_eq!(reason, Reason::RolloutInProgress, "{what}");
        assert!(message.contains(says), "{what}: {message}");
        if !released {
            assert!(
                p.requeue_after
                    .is_some_and(|r| r <= Duration::from_secs(30)),
                "{what}"
            );
        }
    }
}

#[test]
fn a_node_that_fails_is_rolled_back_or_kept_and_no_other_is_given_the_image() {
    use HealthFailurePolicy::{Halt, Rollback};
    // (what, policy, first's spec after: image and approval, Degraded reason, says)
    #[rustfmt::skip]
    let rows = [
        (Rollback, OLD, true, Reason::RolledBack, "it is booting the image it ran before"),
        (Halt, NEW, true, Reason::HealthCheckFailed, "it stays in its reboot slot, cordoned, for a person to look at"),
    ];
    for (policy, back_to, approved, reason, says) in rows {
        let what = format!("{policy:?}");
        let p = world(policy, driver(false, 10), 300, NEW).plan();
        let first = applied(&p, "first").expect("first is marked");
        assert_eq!(first.spec.desired_image, image(back_to), "{what}");
        assert_eq!(first.spec.approved(), approved, "{what}");
        assert_eq!(slot_record(&p, "first"), None, "{what}: keeps its slot");
        assert_eq!(
            first
                .annotations
                .get(HEALTH_FAILED_ANNOTATION)
                .map(String::as_str),
            Some(NEW),
            "{what}"
        );
        assert!(
            !uncordons(&p, "first") && slotted(&p).is_empty(),
            "{what}: {:?}",
            p.writes
        );
        // The staged node is told back to what it runs, by the next plan
        // (which reads the mark).
        let next = failed_before(world(policy, driver(false, 10), 300, NEW), NEW, back_to).plan();
        let second = applied(&next, "second").expect("second is told back");
        assert_eq!(second.spec.desired_image, image(OLD), "{what}");
        assert!(slotted(&next).is_empty(), "{what}: {:?}", next.writes);
        assert_eq!(degraded_reason(&p), reason, "{what}");
        let message = degraded_message(&p);
        assert!(message.contains("node first failed its health gate on the target (spec.health): pod gpu/driver-first Ready not shown within timeoutSeconds 300"), "{what}: {message}");
        assert!(message.contains(says), "{what}: {message}");
        let failed = &p.status.as_ref().unwrap().failed_images;
        assert_eq!(
            failed
                .iter()
                .map(|f| (f.digest.as_str(), f.node.as_str()))
                .collect::<Vec<_>>(),
            [(NEW, "first")],
            "{what}"
        );
        assert!(
            p.events
                .iter()
                .any(|e| e.reason == api::event_reasons::HEALTH_CHECK_FAILED),
            "{what}"
        );
    }
}

#[test]
fn a_node_back_on_the_image_it_ran_before_leaves_its_slot_and_the_image_stays_failed() {
    let mut w = failed_before(
        world(HealthFailurePolicy::Rollback, driver(false, 10), 30, OLD),
        NEW,
        OLD,
    );
    let recorded = api::FailedImage {
        reference: w.pool.spec.image.reference.clone(),
        digest: NEW.into(),
        node: "first".into(),
        check: "pod gpu/driver-first Ready".into(),
        at: Time(ago(20)),
    };
    w.pool.status = Some(BootcNodePoolStatus {
        failed_images: vec![recorded.clone()],
        ..BootcNodePoolStatus::default()
    });
    let p = w.plan();
    assert!(uncordons(&p, "first"), "{:?}", p.writes);
    let first = applied(&p, "first").expect("first leaves its slot");
    assert_eq!(slot_record(&p, "first"), Some(false));
    assert_eq!(first.spec.desired_image, image(OLD));
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::RolledBack);
    assert!(degraded_message(&p).contains("it was booted back into the image it ran before"));
    // Recorded before: no second record, no second event.
    assert_eq!(p.status.as_ref().unwrap().failed_images, [recorded]);
    assert!(
        p.events
            .iter()
            .all(|e| e.reason != api::event_reasons::HEALTH_CHECK_FAILED)
    );
}

#[test]
fn a_new_image_clears_the_mark() {
    let mut w = failed_before(
        world(HealthFailurePolicy::Rollback, driver(true, 100), 120, OLD),
        OLD,
        OLD,
    );
    w.target = Ok(target(NEW));
    let p = w.plan();
    let first = applied(&p, "first").expect("first is written");
    assert!(!first.annotations.contains_key(HEALTH_FAILED_ANNOTATION));
    assert_ne!(degraded_reason(&p), Reason::RolledBack);
}

#[test]
fn with_rollback_updated_the_pool_rolls_back_to_its_last_completed_image() {
    let record = |digest: &str, outcome: api::RolloutOutcome| api::RolloutRecord {
        digest: digest.into(),
        image: image(digest),
        platform_digests: Vec::new(),
        started: Time(ago(600)),
        nodes: 2,
        ended: Some(Time(ago(300))),
        outcome: Some(outcome),
        updated: 2,
        failed: 0,
    };
    let world = |rollback_updated: bool| {
        let mut w = world(HealthFailurePolicy::Rollback, driver(true, 100), 120, OLD);
        w.pool.spec.health.as_mut().unwrap().rollback_updated = rollback_updated;
        // `first` went back to OLD; `second` had updated to NEW before.
        w.bns[0].spec.desired_image = image(OLD).into();
        w.bns[1] = bn("second", NEW, Daemon::Idle(NEW)).build();
        let reference = w.pool.spec.image.reference.clone();
        w.pool.status = Some(BootcNodePoolStatus {
            failed_images: vec![api::FailedImage {
                reference,
                digest: NEW.into(),
                node: "first".into(),
                check: "pod gpu/driver-first Ready not shown within timeoutSeconds 300".into(),
                at: Time(ago(200)),
            }],
            rollouts: vec![
                record(NEW, api::RolloutOutcome::Failed),
                record(OLD, api::RolloutOutcome::Completed),
            ],
            ..BootcNodePoolStatus::default()
        });
        w
    };
    let p = world(true).plan();
    let status = p.status.as_ref().unwrap();
    assert_eq!(status.target_digest.as_deref(), Some(OLD));
    let second = applied(&p, "second").expect("second is told back");
    assert_eq!(second.spec.desired_image, image(OLD));
    assert_eq!(degraded_reason(&p), Reason::RolledBack);
    assert!(
        degraded_message(&p).contains("spec.health.rollbackUpdated: the pool rolls back to"),
        "{}",
        degraded_message(&p)
    );
    // A rollback is a rollout like any: it is recorded.
    assert_eq!(status.rollouts[0].digest, OLD);
    assert_eq!(status.rollouts[0].outcome, None);
    // Without it, the node already on NEW stays there.
    let p = world(false).plan();
    assert_eq!(
        p.status.as_ref().unwrap().target_digest.as_deref(),
        Some(NEW)
    );
    assert!(applied(&p, "second").is_none_or(|b| b.spec.desired_image == image(NEW)));
}

/// The review's case (issue 46): `first` holds the slot on NEW, its Node
/// Ready and its driver pod Ready for 100 s, only its own daemon's Degraded
/// set, past `timeoutSeconds`; `second` already runs NEW; `rollbackUpdated`
/// on, OLD the last completed rollout. With the default
/// `nodesToFailImage` (2), one node's word fails nothing for the pool: it
/// keeps its slot and is named as the only witness; a second node's failure,
/// or a person's confirmation, fails the image for the pool.
#[test]
fn one_nodes_own_report_does_not_fail_the_image_for_the_pool() {
    let completed = |digest: &str| api::RolloutRecord {
        digest: digest.into(),
        image: image(digest),
        started: Time(ago(900)),
        nodes: 2,
        ended: Some(Time(ago(800))),
        outcome: Some(api::RolloutOutcome::Completed),
        updated: 2,
        failed: 0,
        platform_digests: Vec::new(),
    };
    let world = || {
        let first = bn("first", NEW, Daemon::Idle(NEW))
            .approved()
            .slot(false)
            .degraded();
        let mut w = world_of(first, HealthFailurePolicy::Rollback, driver(true, 100), 400);
        let health = w.pool.spec.health.as_mut().unwrap();
        health.nodes_to_fail_image = None;
        health.rollback_updated = true;
        w.bns[1] = bn("second", NEW, Daemon::Idle(NEW)).build();
        w.pool.status = Some(BootcNodePoolStatus {
            rollouts: vec![completed(OLD)],
            ..BootcNodePoolStatus::default()
        });
        w
    };
    let lone = |p: &Plan, what: &str| {
        let status = p.status.as_ref().unwrap();
        assert!(
            status.failed_images.is_empty(),
            "{what}: {:?}",
            status.failed_images
        );
        assert_eq!(status.target_digest.as_deref(), Some(NEW), "{what}");
        assert!(
            applied(p, "second").is_none_or(|b| b.spec.desired_image == image(NEW)),
            "{what}: second is told back"
        );
        let message = degraded_message(p);
        assert!(
            message.contains("only 1 of the 2 nodes spec.health.nodesToFailImage asks for")
                && message
                    .contains("first (BootcNode not Degraded not shown within timeoutSeconds 300)")
                && message.contains("bootc.dev/confirm-image-failure="),
            "{what}: {message}"
        );
    };
    // The plan that fails `first`: marked on its own BootcNode, in its slot.
    let p = world().plan();
    let first = applied(&p, "first").expect("first is marked");
    assert_eq!(
        first
            .annotations
            .get(HEALTH_FAILED_ANNOTATION)
            .map(String::as_str),
        Some(NEW)
    );
    assert_eq!(slot_record(&p, "first"), None, "keeps its slot");
    lone(&p, "failing");
    // The next plans read the mark: still one witness, the slot kept.
    let marked = || {
        let mut w = failed_before(world(), NEW, OLD);
        w.bns[0].annotations_mut().insert(
            HEALTH_FAILED_BECAUSE_ANNOTATION.to_owned(),
            "BootcNode not Degraded not shown within timeoutSeconds 300".to_owned(),
        );
        w
    };
    let p = marked().plan();
    lone(&p, "marked");
    assert!(!uncordons(&p, "first"), "{:?}", p.writes);

    // A person confirms it: failed for the pool, recorded once.
    let mut w = marked();
    w.pool.annotations_mut().insert(
        api::labels::CONFIRM_IMAGE_FAILURE_ANNOTATION.to_owned(),
        NEW.to_owned(),
    );
    let p = w.plan();
    let failed = &p.status.as_ref().unwrap().failed_images;
    assert_eq!(
        failed
            .iter()
            .map(|f| (f.digest.as_str(), f.node.as_str()))
            .collect::<Vec<_>>(),
        [(NEW, "first")]
    );
    // A second node's failure on NEW does it too.
    let mut w = marked();
    w.bns[1].annotations_mut().extend([
        (HEALTH_FAILED_ANNOTATION.to_owned(), NEW.to_owned()),
        (
            HEALTH_FAILED_BECAUSE_ANNOTATION.to_owned(),
            "Node Ready not shown".to_owned(),
        ),
    ]);
    let p = w.plan();
    assert_eq!(p.status.as_ref().unwrap().failed_images.len(), 1);
    assert_ne!(degraded_message(&p), "", "failed for the pool");
    assert!(
        !degraded_message(&p).contains("only 1 of"),
        "{}",
        degraded_message(&p)
    );
}

#[test]
fn a_rollback_to_a_deployment_installed_from_a_tag_is_written_pinned() {
    // bootc's rollback entry is the deployment `bootc install` left: its
    // image is the tag, its digest what the tag gave.
    let from_tag = |digest: Option<&str>| {
        let mut w = world(HealthFailurePolicy::Rollback, driver(false, 10), 300, NEW);
        let rollback = w.bns[0].status.as_mut().unwrap().rollback.as_mut().unwrap();
        rollback.image = Some("quay.io/acme/os:prod".into());
        rollback.image_digest = digest.map(Into::into);
        w
    };
    let p = from_tag(Some(OLD)).plan();
    let first = applied(&p, "first").expect("first is rolled back");
    assert_eq!(first.spec.desired_image, image(OLD));
    assert!(first.spec.approved());
    assert_eq!(slot_record(&p, "first"), None, "keeps its slot");
    assert_eq!(degraded_reason(&p), Reason::RolledBack);
    // No digest: nothing bootc could be told; it stays for a person, on
    // the image it was told.
    let p = from_tag(None).plan();
    let first = applied(&p, "first").expect("first is marked");
    assert_eq!(first.spec.desired_image, image(NEW));
    assert_eq!(degraded_reason(&p), Reason::HealthCheckFailed);
    assert!(
        degraded_message(&p).contains("bootc reports no image it ran before with its digest"),
        "{}",
        degraded_message(&p)
    );
}
