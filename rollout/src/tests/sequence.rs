//! Order across pools (`dependsOn`) and within one (`order`): new slots
//! wait for their turn; staging does not.

use super::*;

/// A pool named `name`, up to date on its current spec or not, depending
/// on `on`.
fn other(name: &str, up_to_date: bool, on: &[&str]) -> BootcNodePool {
    let mut p = pool(name, IntOrString::Int(1), false);
    p.spec.rollout.depends_on = on.iter().map(|s| (*s).to_owned()).collect();
    p.metadata.generation = Some(2);
    let reason = if up_to_date {
        Reason::AllUpdated
    } else {
        Reason::RolloutInProgress
    };
    let mut status = BootcNodePoolStatus::default();
    conditions::apply(
        &mut status.conditions,
        &conditions::ConditionUpdate::new(ConditionType::UpToDate, up_to_date, reason, "m"),
        Some(2),
        &Time(now()),
    );
    p.status = Some(status);
    p
}

#[test]
fn a_pool_takes_no_slot_until_the_pools_it_depends_on_are_up_to_date() {
    let world = |on: &[&str], others: Vec<BootcNodePool>| {
        let mut p = pool("a", IntOrString::Int(2), false);
        p.spec.rollout.depends_on = on.iter().map(|s| (*s).to_owned()).collect();
        p.spec.rollout.stage_ahead = Some(0);
        let mut w = World::new(p)
            .node(node("staged", "a", true, false))
            .node(node("idle", "a", true, false))
            .bn(bn("staged", NEW, Daemon::Staged(OLD)))
            .bn(bn("idle", OLD, Daemon::Idle(OLD)));
        w.others = others;
        w.plan()
    };
    // (what, dependsOn, other pools, a new slot, UpToDate reason, message
    //  has, Degraded reason)
    type Row = (
        &'static str,
        Vec<&'static str>,
        Vec<BootcNodePool>,
        bool,
        Reason,
        &'static str,
        Reason,
    );
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("infra up to date", vec!["infra"], vec![other("infra", true, &[])], true, Reason::RolloutInProgress, "in reboot slots: staged", Reason::Healthy),
        ("infra rolling out", vec!["infra"], vec![other("infra", false, &[])], false, Reason::WaitingForDependencies,
            "no new reboot slot until the pools of spec.rollout.dependsOn are up to date (not yet up to date: infra)", Reason::Healthy),
        ("no such pool", vec!["infra", "ghost"], vec![other("infra", true, &[])], false, Reason::WaitingForDependencies,
            "(no such pool: ghost)", Reason::Healthy),
        ("a cycle", vec!["infra"], vec![other("infra", true, &["a"])], false, Reason::WaitingForDependencies,
            "a cycle: a -> infra -> a", Reason::DependencyCycle),
    ];
    for (what, on, others, new_slot, reason, says, degraded) in rows {
        let p = world(&on, others);
        holds_slots_not_staging(&p, what, new_slot, reason, says);
        assert_eq!(degraded_reason(&p), degraded, "{what}");
    }
}

/// A member in zone `zone`.
fn zoned(name: &str, zone: &str) -> Node {
    let mut n = node(name, "a", true, false);
    n.labels_mut().insert("zone".into(), zone.into());
    n
}

#[test]
fn node_groups_take_their_slots_in_turn() {
    let ordered = |a2: Daemon| {
        let mut p = pool("a", IntOrString::Int(3), false);
        p.spec.rollout.order = vec![
            serde_json::from_value(json!({"selector": {"matchLabels": {"zone": "a"}}})).unwrap(),
            serde_json::from_value(json!({"selector": {"matchLabels": {"zone": "b"}}})).unwrap(),
        ];
        World::new(p)
            .node(zoned("a1", "a"))
            .node(zoned("a2", "a"))
            .node(zoned("b1", "b"))
            .node(node("c1", "a", true, false))
            .bn(bn("a1", NEW, Daemon::Idle(NEW)))
            .bn(bn("a2", NEW, a2))
            .bn(bn("b1", NEW, Daemon::Staged(OLD)))
            .bn(bn("c1", NEW, Daemon::Staged(OLD)))
            .plan()
    };
    // Zone a has a2 behind: only it takes a slot; b1 and c1 wait, and the
    // pool says for whom.
    let p = ordered(Daemon::Staged(OLD));
    assert_eq!(slotted(&p), ["a2"]);
    let (_, reason, message) = up_to_date(&p);
    assert_eq!(reason, Reason::RolloutInProgress);
    assert!(
        message.ends_with("; later groups wait for the turn of group 1 of spec.rollout.order, whose nodes not yet on the target are: a2"),
        "{message}"
    );
    // a2 still staging: nobody takes a slot, the others stage meanwhile.
    let p = ordered(Daemon::Staging(OLD));
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    // Zone a done: zone b's turn, then the nodes in no group.
    let p = ordered(Daemon::Idle(NEW));
    assert_eq!(slotted(&p), ["b1"]);
    assert!(up_to_date(&p).2.contains(
        "the turn of group 2 of spec.rollout.order, whose nodes not yet on the target are: b1"
    ));
}

#[test]
fn an_order_that_cannot_be_read_holds_every_slot() {
    let mut p = pool("a", IntOrString::Int(3), false);
    p.spec.rollout.order = vec![
        serde_json::from_value(json!({"selector": {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}}))
            .unwrap(),
    ];
    let p = World::new(p)
        .node(zoned("a1", "a"))
        .bn(bn("a1", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::InvalidSpec);
    assert!(degraded_message(&p).contains("spec.rollout.order[0].selector.matchExpressions[0]"));
}
