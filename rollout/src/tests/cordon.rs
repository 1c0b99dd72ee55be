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

    // Still staged: it takes a slot again, recorded as not cordoned before.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
    let annotations = &applied(&p, "w1").unwrap().annotations;
    assert_eq!(
        annotations.get(WAS_CORDONED_ANNOTATION).map(String::as_str),
        Some("false")
    );
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
