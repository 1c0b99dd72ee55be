//! Each member's spec: pull secret and staging bounds.

use super::*;

#[test]
fn spec_sync_resets_approval_and_copies_pool_fields() {
    let mut pl = pool("a", IntOrString::Int(1), false);
    pl.spec.disruption.reboot_policy = RebootPolicy::AllowSoftReboot;
    pl.spec.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    });
    let mut w =
        World::new(pl)
            .node(node("w1", "a", true, true))
            .bn(bn("w1", OLD, Daemon::Rebooting(OLD)).approved().slot(false));
    w.secret_hash = Some("sha256:abc".into());
    let p = w.plan();
    let apply = applied(&p, "w1").expect("spec synced");
    assert_eq!(apply.spec.desired_image, image(NEW));
    assert_eq!(apply.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(apply.spec.reboot_policy, RebootPolicy::AllowSoftReboot);
    assert_eq!(apply.spec.pull_secret_ref.as_ref().unwrap().name, "pull");
    assert_eq!(apply.spec.pull_secret_hash.as_deref(), Some("sha256:abc"));
    // The slot is kept across the target change.
    assert_eq!(slot_record(&p, "w1"), None, "{:?}", p.writes);
}

#[test]
fn a_pull_secret_outside_the_operator_namespace_is_invalid() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    w.pool.spec.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: "default".into(),
    });
    w.secret_hash = Some("sha256:abc".into());
    let w = w
        .node(node("w1", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)));
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::InvalidSpec);
    assert!(
        degraded_message(&p).contains(
            "spec.pullSecretRef.namespace must be the operator's namespace bootc-operator, not \"default\""
        ),
        "{}",
        degraded_message(&p)
    );
    // The nodes are not told about a Secret their daemons would refuse.
    let spec = &applied(&p, "w1").unwrap().spec;
    assert_eq!(spec.pull_secret_ref, None);
    assert_eq!(spec.pull_secret_hash, None);
}

#[test]
fn a_missing_pull_secret_is_reported_on_the_pool() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)));
    w.pool.spec.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    });
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::PullSecretNotFound);
    assert_eq!(
        degraded_message(&p),
        "spec.pullSecretRef: Secret bootc-operator/pull not found"
    );
    // The registry's refusal that comes with it (the tag cannot be resolved
    // without the Secret) is named after it, not before.
    w.target = Err(TargetProblem {
        reason: Reason::RegistryUnauthorized,
        message: "registry refused the credentials".into(),
    });
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::PullSecretNotFound);
    assert!(degraded_message(&p).contains("registry refused"));
    w.target = World::new(pool("a", IntOrString::Int(1), false)).target;
    // Once it exists, the problem is gone and its hash reaches the node.
    w.secret_hash = Some("sha256:abc".into());
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::Healthy);
    assert_eq!(
        applied(&p, "w1").unwrap().spec.pull_secret_hash.as_deref(),
        Some("sha256:abc")
    );
}

#[test]
fn a_pool_wide_credentials_problem_is_not_passed_to_the_nodes() {
    let secret = SecretReference {
        name: "pull".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    };
    let with_secret = |mut b: BootcNode| {
        b.spec.pull_secret_ref = Some(secret.clone());
        b.spec.pull_secret_hash = Some("sha256:old".into());
        b
    };
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("done", "a", true, false))
        .node(node("staging", "a", true, false));
    w.bns
        .push(with_secret(bn("done", NEW, Daemon::Idle(NEW)).build()));
    w.bns
        .push(with_secret(bn("staging", OLD, Daemon::Idle(OLD)).build()));
    w.pool.spec.pull_secret_ref = Some(secret.clone());
    // The Secret deleted: reported on the pool; the node on the target is
    // not touched, the other moves to the target with the secret it has.
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::PullSecretNotFound);
    assert!(applied(&p, "done").is_none(), "{:?}", p.writes);
    let a = applied(&p, "staging").unwrap();
    assert_eq!(a.spec.desired_image, image(NEW));
    assert_eq!(a.spec.pull_secret_hash.as_deref(), Some("sha256:old"));
    // Not a docker config: the same.
    w.secret_hash = Some("sha256:new".into());
    w.target = Err(TargetProblem {
        reason: Reason::InvalidPullSecret,
        message: "Secret bootc-operator/pull has no .dockerconfigjson".into(),
    });
    w.pool.status = Some(BootcNodePoolStatus {
        target_digest: Some(NEW.into()),
        target_image: Some(image(NEW)),
        ..BootcNodePoolStatus::default()
    });
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::InvalidPullSecret);
    assert!(applied(&p, "done").is_none(), "{:?}", p.writes);
    assert_eq!(
        applied(&p, "staging")
            .unwrap()
            .spec
            .pull_secret_hash
            .as_deref(),
        Some("sha256:old")
    );
    // Fixed: the new hash reaches every node.
    w.target = Ok(target(NEW));
    let p = w.plan();
    assert_eq!(
        applied(&p, "done")
            .unwrap()
            .spec
            .pull_secret_hash
            .as_deref(),
        Some("sha256:new")
    );
}

#[test]
fn staging_is_bounded_and_unlocked_hosts_stage_only_for_a_slot() {
    // One download at a time: the first member is told, the others stay on
    // what they run.
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    for n in ["n1", "n2", "n3"] {
        w = w.node(node(n, "a", true, false)).bn(bn(
            match n {
                "n1" => "n1",
                "n2" => "n2",
                _ => "n3",
            },
            OLD,
            Daemon::Idle(OLD),
        ));
    }
    w.pool.spec.rollout.max_concurrent_staging = Some(1);
    let p = w.plan();
    assert_eq!(applied(&p, "n1").unwrap().spec.desired_image, image(NEW));
    assert!(applied(&p, "n2").is_none() && applied(&p, "n3").is_none());
    // Unset: every member at once, as before.
    w.pool.spec.rollout.max_concurrent_staging = None;
    let p = w.plan();
    assert!(["n1", "n2", "n3"].iter().all(|n| applied(&p, n).is_some()));

    // A host whose bootc cannot stage locked waits while the slot is held,
    // and a told one whose target moved away is put back on what it runs.
    let unlocked = |mut b: BootcNode| {
        if let Some(s) = b.status.as_mut() {
            s.download_only_supported = Some(false);
        }
        b
    };
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("holder", "a", true, true))
        .node(node("u", "a", true, false))
        .bn(bn("holder", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false));
    w.bns
        .push(unlocked(bn("u", OLD, Daemon::Idle(OLD)).build()));
    let p = w.plan();
    assert!(
        applied(&p, "u").is_none(),
        "told while no slot is free: {:?}",
        p.writes
    );
    // The slot free: told.
    let mut w = World::new(pool("a", IntOrString::Int(1), false)).node(node("u", "a", true, false));
    w.bns
        .push(unlocked(bn("u", OLD, Daemon::Idle(OLD)).build()));
    assert_eq!(
        applied(&w.plan(), "u").unwrap().spec.desired_image,
        image(NEW)
    );
}

#[test]
fn a_tag_moving_a_b_a_reboots_nobody_twice() {
    // B (NEW) was told and staged everywhere, one node took the slot and
    // was drained but not approved; the tag moves back to A (OLD).
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("slot", "a", true, true))
        .node(node("s", "a", true, false))
        .bn(bn("slot", NEW, Daemon::Staged(OLD)).slot(false))
        .bn(bn("s", NEW, Daemon::Staged(OLD)))
        .drain("slot", DrainPhase::Succeeded);
    w.target = Ok(target(OLD));
    let p = w.plan();
    for n in ["slot", "s"] {
        let a = applied(&p, n).unwrap();
        assert_eq!(a.spec.desired_image, image(OLD), "{n}");
        assert_eq!(a.spec.desired_image_state, DesiredImageState::Staged, "{n}");
    }
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
}

/// A BootcNode whose bootc cannot stage locked.
fn unlocked(b: Bn) -> BootcNode {
    let mut b = b.build();
    if let Some(s) = b.status.as_mut() {
        s.download_only_supported = Some(false);
    }
    b
}

#[test]
fn unlocked_hosts_are_told_only_for_a_slot_the_hand_out_would_give() {
    // (name, maxUnavailable, paused, extra members (Node, BootcNode),
    //  is the unlocked idle host "u" told the target)
    type Row = (&'static str, i32, bool, Vec<(Node, BootcNode)>, bool);
    let idle = |n: &'static str| bn(n, OLD, Daemon::Idle(OLD)).build();
    let in_slot_unhealthy = |n: &'static str| {
        (
            in_slot_of(node(n, "a", true, true), "a"),
            bn(n, NEW, Daemon::Idle(NEW)).approved().degraded().build(),
        )
    };
    let rows: Vec<Row> = vec![
        ("a free slot: told", 1, false, vec![], true),
        ("paused: no slot awaits it", 3, true, vec![], false),
        (
            "halted: two unhealthy slot holders",
            3,
            false,
            vec![in_slot_unhealthy("bad1"), in_slot_unhealthy("bad2")],
            false,
        ),
        (
            "one unhealthy slot holder, no halt: a slot is free",
            3,
            false,
            vec![in_slot_unhealthy("bad1")],
            true,
        ),
        (
            "an admin-cordoned member uses the budget",
            1,
            false,
            vec![(node("adm", "a", true, true), idle("adm"))],
            false,
        ),
        (
            "a NotReady member uses the budget",
            1,
            false,
            vec![(node("down", "a", false, false), idle("down"))],
            false,
        ),
        (
            "two slots, one NotReady member: one left",
            2,
            false,
            vec![(node("down", "a", false, false), idle("down"))],
            true,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, max, paused, extra, want) in rows {
        let mut w =
            World::new(pool("a", IntOrString::Int(max), paused)).node(node("u", "a", true, false));
        w.bns.push(unlocked(bn("u", OLD, Daemon::Idle(OLD))));
        for (n, b) in extra {
            w.nodes.push(n);
            w.bns.push(b);
        }
        let told = applied(&w.plan(), "u").is_some_and(|a| a.spec.desired_image == image(NEW));
        if told != want {
            wrong.push(format!("{name}: told {told}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn an_admin_cordoned_unlocked_host_is_told_for_the_slot_it_costs_nothing_to_take() {
    // Its own cordon uses the budget, but slotting it disrupts nothing more:
    // told, so that it can stage and take the slot (the hand-out's rule).
    let mut w = World::new(pool("a", IntOrString::Int(1), false)).node(node("u", "a", true, true));
    w.bns.push(unlocked(bn("u", OLD, Daemon::Idle(OLD))));
    assert_eq!(
        applied(&w.plan(), "u").map(|a| a.spec.desired_image.clone()),
        Some(image(NEW).into())
    );
}

#[test]
fn a_pull_secret_that_does_not_opt_in_to_the_pool_is_refused() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("new", "a", true, false))
        .node(node("had", "a", true, false))
        .bn(bn("had", OLD, Daemon::Idle(OLD)));
    w.pool.spec.pull_secret_ref = Some(SecretReference {
        name: "webhook-tls".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    });
    // "had" was told an earlier Secret: it keeps it.
    w.bns[0].spec.pull_secret_ref = Some(SecretReference {
        name: "old".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    });
    w.bns[0].spec.pull_secret_hash = Some("u-old/1".into());
    w.secret_hash = Some("u-1/7".into());
    w.secret_refused = true;
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::PullSecretNotAllowed);
    let message = degraded_message(&p);
    assert!(
        message.contains("bootc-operator/webhook-tls")
            && message.contains(
                "kubectl annotate secret -n bootc-operator webhook-tls bootc.dev/pools=a"
            ),
        "{message}"
    );
    // Nobody is told about it.
    let new = &applied(&p, "new").unwrap().spec;
    assert_eq!(
        (&new.pull_secret_ref, &new.pull_secret_hash),
        (&None, &None)
    );
    let had = applied(&p, "had").map_or(w.bns[0].spec.clone(), |a| a.spec.clone());
    assert_eq!(had.pull_secret_ref.unwrap().name, "old");
    // Opted in: used, its version told.
    w.secret_refused = false;
    let p = w.plan();
    assert_ne!(degraded_reason(&p), Reason::PullSecretNotAllowed);
    let new = &applied(&p, "new").unwrap().spec;
    assert_eq!(new.pull_secret_hash.as_deref(), Some("u-1/7"));
}
