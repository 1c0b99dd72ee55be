//! Writes in a safe order, and how few there are.

use super::*;

#[test]
fn nothing_is_written_when_nothing_changes() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .bn(bn("w2", NEW, Daemon::Staging(OLD)));
    let first = w.plan();
    assert!(first.writes.is_empty(), "{:?}", first.writes);
    w.pool.status = first.status;
    let second = w.plan();
    assert!(second.writes.is_empty());
    assert_eq!(second.status, None, "status unchanged: no write");
    assert!(second.events.is_empty());
}

#[test]
fn a_released_slot_is_written_before_the_next_one_is_taken() {
    // w9 leaves its slot, w1 (sorting first) takes it in the same pass: all
    // of w9's writes come first, so that no instant shows two nodes in one
    // slot (the e2e recorder caught this between two writes).
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w9", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .bn(bn("w9", NEW, Daemon::Idle(NEW)).approved().slot(false));
    let p = w.plan();
    let pos =
        |pred: &dyn Fn(&Write) -> bool| p.writes.iter().position(pred).expect("write present");
    let w9_uncordon = pos(
        &|w| matches!(w, Write::PatchNode { name, patch } if name == "w9" && patch.unschedulable == Some(false)),
    );
    let w9_release = pos(&|w| matches!(w, Write::ApplyBootcNode(b) if b.name == "w9"));
    // w1's slot is one write: the cordon with the slot record.
    let w1_slot = pos(
        &|w| matches!(w, Write::PatchNode { name, patch } if name == "w1" && patch.unschedulable == Some(true) && patch.disrupted == Some(true)),
    );
    assert!(applied(&p, "w1").is_none(), "{:#?}", p.writes);
    assert!(
        w9_uncordon < w9_release && w9_release < w1_slot,
        "{:#?}",
        p.writes
    );
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
}

/// The actuator runs different nodes' writes concurrently: its waves keep
/// every node's own order and still free a slot before taking the next one.
#[test]
fn the_actuators_waves_keep_the_release_before_the_new_slot() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .node(node("w9", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .bn(bn("w2", OLD, Daemon::Idle(OLD)))
        .bn(bn("w9", NEW, Daemon::Idle(NEW)).approved().slot(false));
    let p = w.plan();
    let [first, second] = p.writes.waves();
    let names = |wave: &[Vec<Write>]| -> Vec<String> {
        wave.iter().map(|ws| ws[0].node().to_owned()).collect()
    };
    // w9's release and w2's new target lift or add nothing; w1's slot does.
    assert_eq!(names(first), ["w9", "w2"], "{:#?}", p.writes);
    assert_eq!(names(second), ["w1"]);
    // Each node's writes keep the planner's order.
    for wave in [first, second] {
        for ws in wave {
            let node = ws[0].node();
            let planned: Vec<&Write> = p.writes.iter().filter(|w| w.node() == node).collect();
            let made: Vec<&Write> = ws.iter().collect();
            assert_eq!(made, planned, "{node}");
        }
    }
    let w1: Vec<&str> = second[0]
        .iter()
        .map(|w| match w {
            Write::ApplyBootcNode(_) => "slot",
            Write::PatchNode { .. } => "cordon",
            Write::StartDrain { .. } => "drain",
            _ => "other",
        })
        .collect();
    // The slot is the cordon's write: nothing on the BootcNode.
    assert_eq!(w1, ["cordon", "drain"]);
}

/// One node's whole update, step by step, each step planned on the pool
/// status the step before wrote: a BootcNode write for the target, the
/// approval and its withdrawal at the release; the slot taken with the
/// cordon and released with the uncordon, one Node write each; and two
/// events about the pool (the rollout starts, every member runs the
/// target), none per node.
#[test]
fn one_node_update_writes_and_events() {
    let bn_writes = |p: &Plan| {
        p.writes
            .iter()
            .filter(|w| matches!(w, Write::ApplyBootcNode(_)))
            .count()
    };
    let node_writes = |p: &Plan| {
        p.writes
            .iter()
            .filter(|w| matches!(w, Write::PatchNode { .. }))
            .count()
    };
    type Step = (&'static str, Bn, bool, bool, Option<DrainPhase>);
    #[rustfmt::skip]
    let steps: Vec<(Step, usize, usize, Vec<&str>)> = vec![
        // ((step, BootcNode, cordoned, Ready, drain), BootcNode writes, Node writes, events)
        (("new target", bn("w1", OLD, Daemon::Idle(OLD)), false, true, None), 1, 0, vec![event_reasons::ROLLOUT_STARTED]),
        (("staging", bn("w1", NEW, Daemon::Staging(OLD)), false, true, None), 0, 0, vec![]),
        (("staged: slot, cordon, drain", bn("w1", NEW, Daemon::Staged(OLD)), false, true, None), 0, 1, vec![]),
        (("draining", bn("w1", NEW, Daemon::Staged(OLD)).slot(false), true, true, Some(DrainPhase::Running)), 0, 0, vec![]),
        (("drained: approval", bn("w1", NEW, Daemon::Staged(OLD)).slot(false), true, true, Some(DrainPhase::Succeeded)), 1, 0, vec![]),
        (("rebooting", bn("w1", NEW, Daemon::Rebooting(OLD)).slot(false).approved(), true, false, Some(DrainPhase::Succeeded)), 0, 0, vec![]),
        // Not complete while the node is not back.
        (("back but not Ready: the slot is held", bn("w1", NEW, Daemon::Idle(NEW)).slot(false).approved(), true, false, Some(DrainPhase::Succeeded)), 0, 0, vec![]),
        (("Ready: uncordon and release", bn("w1", NEW, Daemon::Idle(NEW)).slot(false).approved(), true, true, Some(DrainPhase::Succeeded)), 1, 1, vec![event_reasons::ROLLOUT_COMPLETE]),
        (("done", bn("w1", NEW, Daemon::Idle(NEW)), false, true, None), 0, 0, vec![]),
    ];
    let mut status: Option<BootcNodePoolStatus> = None;
    let (mut total_bn, mut total_node, mut total_events) = (0, 0, 0);
    for ((name, b, cordoned, ready, drain), bn_want, node_want, events_want) in steps {
        let n = node("w1", "a", true, cordoned);
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(if ready { n } else { down_for(n, 30) })
            .bn(b);
        w.pool.status = status.clone();
        if let Some(d) = drain {
            w = w.drain("w1", d);
        }
        let p = w.plan();
        let reasons: Vec<&str> = p.events.iter().map(|e| e.reason).collect();
        assert_eq!(bn_writes(&p), bn_want, "{name}: {:?}", p.writes);
        assert_eq!(node_writes(&p), node_want, "{name}: {:?}", p.writes);
        assert_eq!(reasons, events_want, "{name}: {:?}", p.events);
        assert!(p.events.iter().all(|e| e.node.is_none()), "{name}");
        if p.status.is_some() {
            status = p.status;
        }
        total_bn += bn_want;
        total_node += node_want;
        total_events += events_want.len();
    }
    assert_eq!((total_bn, total_node, total_events), (3, 2, 2));
}
