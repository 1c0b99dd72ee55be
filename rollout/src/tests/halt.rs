//! The unhealthy halt (rule 3).

use super::*;

#[test]
fn slot_rule_3_two_unhealthy_slotted_nodes_halt_the_rollout() {
    let w = World::new(pool("a", IntOrString::Int(3), false))
        .node(node("bad1", "a", false, true))
        .node(node("bad2", "a", true, true))
        .node(node("next", "a", true, false))
        .bn(bn("bad1", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false))
        .bn(bn("bad2", NEW, Daemon::Idle(NEW))
            .approved()
            .slot(false)
            .degraded())
        .bn(bn("next", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert!(slotted(&p).is_empty(), "no third slot: {:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::RolloutHalted);
    assert!(degraded_message(&p).contains("bad1"));
    assert!(degraded_message(&p).contains("bad2"));
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == event_reasons::ROLLOUT_HALTED && e.warning)
    );

    // One unhealthy slotted node does not halt.
    let w = World::new(pool("a", IntOrString::Int(3), false))
        .node(node("bad1", "a", false, true))
        .node(node("next", "a", true, false))
        .bn(bn("bad1", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)));
    assert_eq!(slotted(&w.plan()), vec!["next".to_owned()]);
}

#[test]
fn slot_rule_3_nodes_rebooting_within_the_grace_are_not_unhealthy() {
    let rebooting =
        |name: &'static str| bn(name, NEW, Daemon::Rebooting(OLD)).approved().slot(false);
    let world = |down: i64, second_daemon: Daemon| {
        World::new(pool("a", IntOrString::Int(3), false))
            .node(down_for(node("r1", "a", true, true), down))
            .node(down_for(node("r2", "a", true, true), down))
            .node(node("next", "a", true, false))
            .bn(rebooting("r1"))
            .bn(bn("r2", NEW, second_daemon).approved().slot(false))
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
    };
    // Two approved nodes NotReady for 30 s: they are rebooting. The third
    // slot is given, and the pool comes back when the grace would end.
    let p = world(30, Daemon::Rebooting(OLD)).plan();
    assert_eq!(slotted(&p), vec!["next".to_owned()]);
    assert_eq!(degraded_reason(&p), Reason::Healthy);
    assert!(
        p.requeue_after
            .is_some_and(|d| d <= NOT_READY_WHILE_REBOOTING - Duration::from_secs(30))
    );

    // Past the grace, both count: the rollout halts.
    let secs = i64::try_from(NOT_READY_WHILE_REBOOTING.as_secs()).unwrap() + 1;
    let p = world(secs, Daemon::Rebooting(OLD)).plan();
    assert!(slotted(&p).is_empty());
    assert_eq!(degraded_reason(&p), Reason::RolloutHalted);

    // Back on the target but NotReady is unhealthy at once (the image came
    // up and the node did not): with one still rebooting, no halt yet...
    let p = world(30, Daemon::Idle(NEW)).plan();
    assert_eq!(degraded_reason(&p), Reason::Healthy);
    // ...and with both back on the target and NotReady, it halts.
    let p = World::new(pool("a", IntOrString::Int(3), false))
        .node(down_for(node("r1", "a", true, true), 30))
        .node(down_for(node("r2", "a", true, true), 30))
        .node(node("next", "a", true, false))
        .bn(bn("r1", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("r2", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty());
    assert_eq!(degraded_reason(&p), Reason::RolloutHalted);
}

#[test]
fn max_unhealthy_sets_how_many_unhealthy_holders_halt() {
    // Two unhealthy slot holders and a staged candidate, under each limit:
    // (maxUnhealthy, halted)
    let rows = [
        (None, true),
        (Some(IntOrString::Int(1)), true),
        (Some(IntOrString::Int(3)), false),
        (Some(IntOrString::String("50%".into())), true),
        (Some(IntOrString::String("100%".into())), false),
    ];
    for (max, halted) in rows {
        let mut p = pool("a", IntOrString::Int(3), false);
        p.spec.rollout.max_unhealthy = max.clone();
        let plan = World::new(p)
            .node(node("bad1", "a", true, true))
            .node(node("bad2", "a", true, true))
            .node(node("next", "a", true, false))
            .bn(bn("bad1", NEW, Daemon::Idle(NEW))
                .approved()
                .slot(false)
                .degraded())
            .bn(bn("bad2", NEW, Daemon::Idle(NEW))
                .approved()
                .slot(false)
                .degraded())
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
            .plan();
        assert_eq!(
            slotted(&plan).is_empty(),
            halted,
            "{max:?}: {:?}",
            plan.writes
        );
        assert_eq!(
            degraded_reason(&plan) == Reason::RolloutHalted,
            halted,
            "{max:?}"
        );
    }
}
