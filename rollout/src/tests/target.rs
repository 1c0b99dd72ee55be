//! The fail-closed target.

use super::*;

#[test]
fn a_tag_keeps_the_previous_target_and_reports_it() {
    let problem = TargetProblem {
        reason: Reason::InvalidSpec,
        message: "tag resolution not yet available".into(),
    };
    // No previous target: no BootcNode is created.
    let mut w =
        World::new(pool("a", IntOrString::Int(1), false)).node(node("w1", "a", true, false));
    w.target = Err(problem.clone());
    let p = w.plan();
    assert!(applied(&p, "w1").is_none());
    assert_eq!(degraded_reason(&p), Reason::InvalidSpec);
    assert!(degraded_message(&p).contains("tag resolution not yet available"));

    // A previous target stays in force (fail closed).
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)));
    w.pool.status = Some(BootcNodePoolStatus {
        target_digest: Some(OLD.into()),
        target_image: Some(image(OLD)),
        ..BootcNodePoolStatus::default()
    });
    w.target = Err(problem);
    let p = w.plan();
    assert!(p.writes.is_empty());
    let s = p.status.unwrap();
    assert_eq!(s.target_digest.as_deref(), Some(OLD));
}

/// Before the pool has a target (its tag does not resolve), its members are
/// counted and shown (the NODES column, the UpToDate message), though none
/// is told anything.
#[test]
fn members_are_counted_before_there_is_a_target() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .node(node("w3", "b", true, false));
    w.target = Err(TargetProblem {
        reason: Reason::RegistryUntrusted,
        message: "registry r.test presented a certificate that is not trusted".into(),
    });
    let p = w.plan();
    assert!(p.writes.is_empty(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::RegistryUntrusted);
    let s = p.status.unwrap();
    assert_eq!((s.node_count, s.target_digest), (2, None));
    let up = s
        .conditions
        .iter()
        .find(|c| c.type_ == ConditionType::UpToDate)
        .unwrap();
    assert_eq!(
        up.message,
        "0/2 updated; 2 members wait for a target image (Degraded says why)"
    );
}

#[test]
fn rollback_is_the_same_cycle() {
    // Target changed back to OLD: the updated node must stage OLD again; the
    // node still on OLD is up to date.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .bn(bn("w2", NEW, Daemon::Staging(OLD)));
    w.target = Ok(target(OLD));
    let p = w.plan();
    assert_eq!(applied(&p, "w1").unwrap().spec.desired_image, image(OLD));
    assert_eq!(applied(&p, "w2").unwrap().spec.desired_image, image(OLD));
    let s = p.status.unwrap();
    assert_eq!(s.updated_count, 1);
}
