//! Canary batches ([`crate::holds::batches`]) in the plan: the step's room caps
//! the slots under `maxUnavailable`, a finished step soaks, and a soak that
//! ends with too few healthy nodes holds the rollout naming them.

use api::BatchStatus;

use super::*;

/// Four members with two slots and steps [1, "50%"] soaking 60 s: `a` in
/// the state given, the others staged.
fn world(a: Bn, a_ready: bool, batch: Option<BatchStatus>) -> World {
    let mut p = pool("a", IntOrString::Int(2), false);
    p.spec.rollout.batches = vec![IntOrString::Int(1), IntOrString::String("50%".into())];
    p.spec.rollout.soak_seconds = 60;
    p.status = Some(BootcNodePoolStatus {
        batch,
        ..BootcNodePoolStatus::default()
    });
    let mut w = World::new(p).node(node("a", "a", a_ready, false)).bn(a);
    for name in ["b", "c", "d"] {
        w = w.node(node(name, "a", true, false)).bn(bn(
            Box::leak(name.to_owned().into_boxed_str()),
            NEW,
            Daemon::Staged(OLD),
        ));
    }
    w
}

fn soaking(secs: i64) -> Option<BatchStatus> {
    Some(BatchStatus {
        digest: NEW.into(),
        step: 0,
        limit: 1,
        soaking_since: Some(Time(now() - jiff::SignedDuration::from_secs(secs))),
        healthy: 1,
        updated: 1,
    })
}

#[test]
fn each_step_caps_the_slots_then_soaks() {
    let staged = || bn("a", NEW, Daemon::Staged(OLD));
    let updated = || bn("a", NEW, Daemon::Idle(NEW));
    // (what, world, slotted, UpToDate message has, status.batch step)
    #[rustfmt::skip]
    let rows: Vec<(&str, World, Vec<&str>, &str, i32)> = vec![
        ("the first step: one slot of two", world(staged(), true, None), vec!["a"],
            "canary step 1 of 2 (1 nodes)", 0),
        ("its node updated: the soak starts", world(updated(), true, None), vec![],
            "canary step 1 of 2 (1 nodes): soaking, 60s left, 1/1 updated nodes healthy", 0),
        ("soaking", world(updated(), true, soaking(45)), vec![],
            "soaking, 15s left", 0),
        ("soaked: the next step's room", world(updated(), true, soaking(60)), vec!["b"],
            "canary step 2 of 2 (2 nodes)", 1),
    ];
    for (what, w, want, says, step) in rows {
        let p = w.plan();
        assert_eq!(slotted(&p), want, "{what}: {:?}", p.writes);
        let (_, _, message) = up_to_date(&p);
        assert!(message.contains(says), "{what}: {message}");
        let batch = p
            .status
            .as_ref()
            .and_then(|s| s.batch.as_ref())
            .expect("status.batch");
        assert_eq!(batch.step, step, "{what}");
        if want.is_empty() {
            assert!(
                p.requeue_after
                    .is_some_and(|r| r <= Duration::from_secs(60)),
                "{what}"
            );
        }
    }
}

#[test]
fn a_soak_that_ends_unhealthy_holds_the_rollout_naming_the_nodes() {
    let p = world(bn("a", NEW, Daemon::Idle(NEW)), false, soaking(60)).plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::BatchFailed);
    assert!(
        degraded_message(&p).contains("canary step 1 of 2 failed (spec.rollout.batches): 0/1 updated nodes healthy, below successThreshold 100%; no new reboot slot until enough are healthy again or a new image: not healthy: a"),
        "{}",
        degraded_message(&p)
    );
}
