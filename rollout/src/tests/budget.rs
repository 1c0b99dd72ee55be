//! The slot budget: `maxUnavailable` and the pool's own unavailable nodes.

use super::*;

#[test]
fn max_unavailable_int_and_percentage() {
    let rows: Vec<(IntOrString, usize, usize)> = vec![
        (IntOrString::Int(1), 10, 1),
        (IntOrString::Int(3), 10, 3),
        (IntOrString::Int(20), 5, 20),
        (IntOrString::String("25%".into()), 10, 2),
        (IntOrString::String("10%".into()), 5, 1),
        (IntOrString::String("50%".into()), 5, 2),
        (IntOrString::String("100%".into()), 7, 7),
        (IntOrString::String("1%".into()), 0, 1),
    ];
    for (v, n, want) in rows {
        assert_eq!(max_unavailable(&v, n), Ok(want), "{v:?} of {n}");
    }
    assert!(max_unavailable(&IntOrString::Int(0), 3).is_err());
    assert!(max_unavailable(&IntOrString::String("abc".into()), 3).is_err());
    assert!(max_unavailable(&IntOrString::String("0%".into()), 3).is_err());
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
            .filter(|w| matches!(w, Write::ApplyBootcNode(b) if b.in_slot()))
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
