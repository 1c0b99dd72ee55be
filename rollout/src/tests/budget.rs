//! The slot budget: `maxUnavailable` and the pool's own unavailable nodes.

use super::*;

#[test]
fn max_unavailable_int_and_percentage() {
    let pct = |s: &str| IntOrString::String(s.into());
    // (value, members, slots): percentages round up.
    let rows: Vec<(IntOrString, usize, usize)> = vec![
        (IntOrString::Int(1), 10, 1),
        (IntOrString::Int(3), 10, 3),
        (IntOrString::Int(20), 5, 20),
        (IntOrString::Int(0), 5, 0),
        (pct("25%"), 10, 3),
        (pct("20%"), 10, 2),
        (pct("10%"), 5, 1),
        (pct("50%"), 5, 3),
        (pct("100%"), 7, 7),
        (pct("1%"), 300, 3),
        (pct("1%"), 0, 0),
        (pct("0%"), 10, 0),
    ];
    for (v, n, want) in rows {
        assert_eq!(max_unavailable(&v, n), Ok(want), "{v:?} of {n}");
    }
    assert!(max_unavailable(&IntOrString::Int(-1), 3).is_err());
    assert!(max_unavailable(&pct("abc"), 3).is_err());
    assert!(max_unavailable(&pct("101%"), 3).is_err());
}

#[test]
fn max_unhealthy_int_and_percentage() {
    let pct = |s: &str| Some(IntOrString::String(s.into()));
    // (value, members, unhealthy holders that halt)
    let rows: Vec<(Option<IntOrString>, usize, usize)> = vec![
        (None, 10, 2),
        (Some(IntOrString::Int(1)), 10, 1),
        (Some(IntOrString::Int(5)), 10, 5),
        (pct("10%"), 5, 1),
        (pct("25%"), 10, 3),
        (pct("1%"), 0, 1),
    ];
    for (v, n, want) in rows {
        assert_eq!(max_unhealthy(v.as_ref(), n), Ok(want), "{v:?} of {n}");
    }
    for bad in [IntOrString::Int(0), IntOrString::String("0%".into())] {
        let e = max_unhealthy(Some(&bad), 3).unwrap_err();
        assert!(e.starts_with("spec.rollout.maxUnhealthy"), "{e}");
    }
}

#[test]
fn max_unavailable_zero_stages_every_member_and_reboots_none() {
    let p = World::new(pool("a", IntOrString::Int(0), false))
        .node(node("n1", "a", true, false))
        .node(node("n2", "a", true, false))
        .bn(bn("n1", NEW, Daemon::Staged(OLD)))
        .bn(bn("n2", OLD, Daemon::Idle(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert_eq!(
        applied(&p, "n2").map(|b| b.spec.desired_image.clone()),
        Some(image(NEW).into()),
        "every member is told the target"
    );
    let (_, reason, message) = up_to_date(&p);
    assert_eq!(reason, Reason::RolloutInProgress);
    assert!(
        message.ends_with("; maxUnavailable is 0: members stage, none is given a reboot slot"),
        "{message}"
    );
    assert_eq!(degraded_reason(&p), Reason::Healthy);
}

#[test]
fn max_unavailable_caps_slots_including_holders() {
    let mut w = World::new(pool("a", IntOrString::Int(2), false));
    for name in ["n1", "n2", "n3", "n4"] {
        w = w.node(node(name, "a", true, false));
    }
    let w = w
        .bn(bn("n1", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("n2", NEW, Daemon::Staged(OLD)))
        .bn(bn("n3", NEW, Daemon::Staged(OLD)))
        .bn(bn("n4", NEW, Daemon::Staged(OLD)));
    assert_eq!(
        w.plan()
            .writes
            .iter()
            .filter(
                |w| matches!(w, Write::PatchNode { patch, .. } if patch.disrupted == Some(true))
            )
            .count(),
        1
    );
    assert_eq!(slotted(&w.plan()), vec!["n2".to_owned()]);

    // 50% of 4 = 2 slots, none held: two nodes get one.
    let mut w2 = World::new(pool("a", IntOrString::String("50%".into()), false));
    for name in ["n1", "n2", "n3", "n4"] {
        w2 = w2.node(node(name, "a", true, false)).bn(bn(
            match name {
                "n1" => "n1",
                "n2" => "n2",
                "n3" => "n3",
                _ => "n4",
            },
            NEW,
            Daemon::Staged(OLD),
        ));
    }
    assert_eq!(slotted(&w2.plan()).len(), 2);
}

#[test]
fn the_pools_own_unavailable_nodes_use_the_budget() {
    // A member NotReady on its own: no new slot, and the message says why.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("down", "a", false, false))
        .node(node("next", "a", true, false))
        .bn(bn("down", NEW, Daemon::Idle(OLD)))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    let (_, _, message) = up_to_date(&p);
    assert!(
        message
            .ends_with("; no new reboot slot while these nodes are unavailable: down (NotReady)"),
        "{message}"
    );
    // Two slots: one left for the others.
    let p = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("down", "a", false, false))
        .node(node("n1", "a", true, false))
        .node(node("n2", "a", true, false))
        .bn(bn("down", NEW, Daemon::Idle(OLD)))
        .bn(bn("n1", NEW, Daemon::Staged(OLD)))
        .bn(bn("n2", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), ["n1"]);
    // An admin's cordon on an up-to-date member uses the budget too...
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("adm", "a", true, true))
        .node(node("next", "a", true, false))
        .bn(bn("adm", NEW, Daemon::Idle(NEW)))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert!(up_to_date(&p).2.ends_with("adm (cordoned)"));
    // ...and an admin-cordoned node that needs the update takes the slot
    // first: it disrupts nothing more.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("a-next", "a", true, false))
        .node(node("adm", "a", true, true))
        .bn(bn("a-next", NEW, Daemon::Staged(OLD)))
        .bn(bn("adm", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), ["adm"]);
}
