//! Cordon record and restore.

use super::*;

#[test]
fn a_cordon_of_ours_is_known_by_its_mark_when_the_bootc_node_was_lost() {
    // The slot cordon carries the mark.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(p.writes.iter().any(|w| matches!(w,
        Write::PatchNode { patch, .. } if patch.unschedulable == Some(true) && patch.mark == Some(true))));

    // The BootcNode was deleted mid-slot and recreated without its
    // annotations; the node since rebooted into the target. Our cordon is
    // lifted, not taken for an admin's.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .plan();
    assert!(uncordons(&p, "w1"), "{:?}", p.writes);

    // Still staged: it takes a slot again, its cordon still ours by the
    // mark (the slot record written alone).
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
    assert_eq!(slot_record(&p, "w1"), Some(true));
    assert!(!uncordons(&p, "w1"));

    // Another pool's mark, or none (an admin's cordon), is left alone.
    for n in [
        marked(node("w1", "a", true, true), "b"),
        node("w1", "a", true, true),
    ] {
        let p = World::new(pool("a", IntOrString::Int(1), false))
            .node(n)
            .bn(bn("w1", NEW, Daemon::Idle(NEW)))
            .plan();
        assert!(!uncordons(&p, "w1"), "{:?}", p.writes);
    }

    // The pool deleted while the BootcNode is gone: the mark alone restores.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"));
    let input = w.input(&w.nodes);
    assert_eq!(
        plan_cleanup(&input).writes,
        vec![Write::PatchNode {
            name: "w1".into(),
            patch: NodePatch {
                managed: Some(false),
                ..NodePatch::UNCORDON
            }
        }]
    );

    // Leaving the pool without the record: the mark restores the node.
    let mut moved = marked(node("w1", "elsewhere", true, true), "a");
    moved
        .labels_mut()
        .insert(MANAGED_LABEL.into(), String::new());
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(moved)
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .plan();
    assert!(uncordons(&p, "w1"), "{:?}", p.writes);
}

/// `node` with `node.kubernetes.io/exclude-from-external-load-balancers`,
/// set by `pool` (its mark) or by an admin (None).
fn lb_excluded(mut n: Node, by: Option<&str>) -> Node {
    n.labels_mut()
        .insert(api::labels::EXCLUDE_FROM_LBS_LABEL.into(), String::new());
    if let Some(pool) = by {
        n.annotations_mut().insert(
            api::labels::LB_EXCLUDED_BY_ANNOTATION.into(),
            pool.to_owned(),
        );
    }
    n
}

/// Of a node's write that starts or ends its disruption: (the cordon, the
/// load balancers' label).
type Told = Option<(Option<bool>, Option<bool>)>;

/// The node's patch that (un)cordons it, and what it says of the label.
fn lb_in_cordon_write(p: &Plan, name: &str) -> Told {
    p.writes.iter().find_map(|w| match w {
        Write::PatchNode { name: n, patch } if n == name && patch.disrupted.is_some() => {
            Some((patch.unschedulable, patch.exclude_lb))
        }
        _ => None,
    })
}

#[test]
fn load_balancers_are_told_in_the_cordons_write_and_only_ours_is_removed() {
    let staged = |n: Node| {
        World::new(pool("a", IntOrString::Int(1), false))
            .node(n)
            .bn(bn("w1", NEW, Daemon::Staged(OLD)))
            .plan()
    };
    let back = |n: Node| {
        World::new(pool("a", IntOrString::Int(1), false))
            .node(n)
            .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(false))
            .plan()
    };
    let ours = |n: Node| lb_excluded(n, Some("a"));
    let slotted_node = || marked(node("w1", "a", true, true), "a");
    // (what, plan, the disruption write: (cordon, the label))
    #[rustfmt::skip]
    let rows: Vec<(&str, Plan, Told)> = vec![
        ("a slot: set with the cordon", staged(node("w1", "a", true, false)), Some((Some(true), Some(true)))),
        ("an admin's label: left as it was", staged(lb_excluded(node("w1", "a", true, false), None)), Some((Some(true), None))),
        ("back: removed with the uncordon", back(ours(slotted_node())), Some((Some(false), Some(false)))),
        ("back, an admin's label: left", back(lb_excluded(slotted_node(), None)), Some((Some(false), None))),
        ("back, another pool's label: left", back(lb_excluded(slotted_node(), Some("b"))), Some((Some(false), None))),
    ];
    for (what, p, want) in rows {
        assert_eq!(lb_in_cordon_write(&p, "w1"), want, "{what}: {:?}", p.writes);
    }

    // Leaving the pool, and the pool's cleanup: ours goes, an admin's stays.
    let leaving = |n: Node| {
        let mut n = n;
        n.labels_mut().clear();
        World::new(pool("a", IntOrString::Int(1), false))
            .node(n)
            .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
            .plan()
    };
    let removes = |p: &Plan| {
        p.writes.iter().any(|w| {
            matches!(w, Write::PatchNode { name, patch } if name == "w1" && patch.exclude_lb == Some(false))
        })
    };
    assert!(removes(&leaving(ours(slotted_node()))), "leaving");
    assert!(
        !removes(&leaving(lb_excluded(slotted_node(), None))),
        "leaving, an admin's"
    );
    let cleanup = |n: Node| {
        let w = World::new(pool("a", IntOrString::Int(1), false)).node(n);
        let input = w.input(&w.nodes);
        plan_cleanup(&input).writes
    };
    let gone = cleanup(ours(slotted_node()));
    assert!(
        gone.iter().any(|w| matches!(w, Write::PatchNode { patch, .. } if patch.exclude_lb == Some(false) && patch.unschedulable == Some(false))),
        "cleanup: {gone:?}"
    );
    let kept = cleanup(lb_excluded(slotted_node(), None));
    assert!(
        !kept
            .iter()
            .any(|w| matches!(w, Write::PatchNode { patch, .. } if patch.exclude_lb.is_some())),
        "cleanup, an admin's: {kept:?}"
    );
}
