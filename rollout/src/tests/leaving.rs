//! Nodes leaving the pool, and a deleted pool's cleanup.

use super::*;
use api::DeletionPolicy;

#[test]
fn leaving_restores_cordon_removes_label_and_deletes_in_that_order() {
    // Label changed mid-slot: the node no longer matches.
    let mut moved = node("w1", "elsewhere", true, true);
    moved
        .labels_mut()
        .insert(MANAGED_LABEL.into(), String::new());
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(moved)
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("w1", DrainPhase::Running);
    let p = w.plan();
    assert_eq!(
        p.writes,
        vec![
            Write::CancelDrain { node: "w1".into() },
            Write::PatchNode {
                name: "w1".into(),
                patch: NodePatch {
                    managed: Some(false),
                    ..NodePatch::UNCORDON
                }
            },
            Write::DeleteBootcNode { name: "w1".into() },
        ]
    );
    assert_eq!(p.status.unwrap().node_count, 0);

    // A deleted Node: only the BootcNode goes.
    let w =
        World::new(pool("a", IntOrString::Int(1), false)).bn(bn("gone", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    assert_eq!(
        p.writes,
        vec![
            Write::CancelDrain {
                node: "gone".into()
            },
            Write::DeleteBootcNode {
                name: "gone".into()
            }
        ]
    );
}

#[test]
fn cleanup_restores_everything() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .node(node("w2", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)).slot(true));
    let nodes = w.recorded_nodes();
    let input = w.input(&nodes);
    let writes = plan_cleanup(&input).writes;
    assert!(writes.contains(&Write::PatchNode {
        name: "w1".into(),
        patch: NodePatch {
            managed: Some(false),
            unschedulable: Some(false),
            mark: Some(false),
            disrupted: Some(false),
            do_not_disrupt: None,
            exclude_lb: None,
        }
    }));
    assert!(writes.contains(&Write::PatchNode {
        name: "w2".into(),
        patch: NodePatch {
            managed: Some(false),
            unschedulable: None,
            mark: None,
            disrupted: Some(false),
            do_not_disrupt: None,
            exclude_lb: None,
        }
    }));
    assert!(writes.contains(&Write::DeleteBootcNode { name: "w1".into() }));
    assert!(writes.contains(&Write::DeleteBootcNode { name: "w2".into() }));
}

#[test]
fn a_node_that_leaves_the_pool_mid_reboot_keeps_its_slot_until_back() {
    let mut moved = rebooting_node("r", "elsewhere");
    moved
        .labels_mut()
        .insert(MANAGED_LABEL.into(), String::new());
    let world = |r: Node, daemon: Daemon| {
        World::new(pool("a", IntOrString::Int(1), false))
            .node(r)
            .node(node("next", "a", true, false))
            .bn(bn("r", NEW, daemon).approved().slot(false))
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
    };
    // Rebooting: it keeps its BootcNode, label, cordon and slot; the
    // approval is withdrawn (its daemon answers it, or reboots).
    let p = world(moved.clone(), Daemon::Rebooting(OLD)).plan();
    assert!(only_withdrawal(&p, "r"), "{:?}", p.writes);
    assert!(
        slotted(&p).is_empty(),
        "a second node disrupted: {:?}",
        p.writes
    );
    let (_, _, message) = up_to_date(&p);
    assert!(
        message.contains("leaving once back from their reboot: r"),
        "{message}"
    );
    // Ready but still approved for an image it does not run: about to go.
    let mut ready = moved.clone();
    ready.status = node("r", "x", true, true).status;
    let p = world(ready.clone(), Daemon::Rebooting(OLD)).plan();
    assert!(only_withdrawal(&p, "r"), "{:?}", p.writes);
    assert!(slotted(&p).is_empty());
    // Back on the image it was told to boot: it leaves (cordon, mark and
    // record in one patch), and the slot goes to the next node.
    let p = world(ready, Daemon::Idle(NEW)).plan();
    assert_eq!(
        node_writes(&p, "r"),
        [
            &Write::CancelDrain { node: "r".into() },
            &Write::PatchNode {
                name: "r".into(),
                patch: NodePatch {
                    managed: Some(false),
                    ..NodePatch::UNCORDON
                }
            },
            &Write::DeleteBootcNode { name: "r".into() },
        ]
    );
    assert_eq!(slotted(&p), ["next"]);
}

#[test]
fn a_pool_deleted_mid_reboot_waits_for_the_node_to_be_back() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("done", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("done", NEW, Daemon::Idle(NEW)));
    let nodes = w.recorded_nodes();
    let input = w.input(&nodes);
    let cleanup = plan_cleanup(&input);
    assert_eq!(cleanup.waiting, ["r"]);
    let (r, done): (Vec<&Write>, Vec<&Write>) =
        cleanup.writes.iter().partition(|w| w.node() == "r");
    assert!(
        matches!(r.as_slice(), [Write::ApplyBootcNode(b)]
            if b.spec.desired_image_state == DesiredImageState::Staged),
        "only the approval withdrawn: {r:?}"
    );
    assert!(done.contains(&&Write::DeleteBootcNode {
        name: "done".into()
    }));
    // The record alone (BootcNode gone too) waits the same way.
    let input = PlanInput {
        bootc_nodes: vec![],
        ..input
    };
    assert_eq!(plan_cleanup(&input).waiting, ["r"]);
}

#[test]
fn a_recorded_node_outside_the_pool_counts_until_ready() {
    // Neither a member nor a BootcNode (both lost mid-reboot, or a
    // restarted controller finding only the Node): the record holds a slot.
    let mut gone = rebooting_node("r", "elsewhere");
    gone.labels_mut().remove(MANAGED_LABEL);
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(gone.clone())
        .node(node("next", "a", true, false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(node_writes(&p, "r").is_empty(), "{:?}", p.writes);
    assert!(slotted(&p).is_empty());
    // Ready: restored (our cordon and the record go), the slot is free.
    gone.status = node("r", "x", true, true).status;
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(gone)
        .node(node("next", "a", true, false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(
        node_writes(&p, "r"),
        [&Write::PatchNode {
            name: "r".into(),
            patch: NodePatch::UNCORDON
        }]
    );
    assert_eq!(slotted(&p), ["next"]);
}

#[test]
fn a_pool_deleted_under_finish_lets_its_slots_finish_and_hands_out_none() {
    let deleted = |policy: DeletionPolicy| {
        let mut w = slot_staged_idle(|_| {});
        w.pool.spec.on_delete = policy;
        w.pool.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        w
    };
    // (spec.onDelete, the nodes it lets finish before the cleanup)
    let rows = [
        (DeletionPolicy::Release, vec![]),
        (DeletionPolicy::Finish, vec!["slot"]),
    ];
    for (policy, want) in rows {
        let w = deleted(policy);
        let nodes = w.recorded_nodes();
        assert_eq!(finishing(&w.input(&nodes)), want, "{policy:?}");
    }
    // Meanwhile the pool is planned as usual but hands out no new slot,
    // and says why on the pool and on the node left waiting.
    let p = deleted(DeletionPolicy::Finish).plan();
    assert!(slotted(&p).is_empty(), "a new slot: {:?}", p.writes);
    assert!(node_writes(&p, "staged").is_empty(), "{:?}", p.writes);
    let (_, reason, message) = up_to_date(&p);
    assert_eq!(reason, Reason::PoolDeleting.as_str());
    assert!(
        message.contains(
            "the pool is being deleted (spec.onDelete: Finish), no new reboot slot; the nodes in reboot slots finish, then every node leaves the pool"
        ),
        "{message}"
    );
    assert_eq!(
        p.summary.standings.members["staged"],
        crate::standing::Standing::PoolDeleting
    );
    // Once no node holds a slot, there is nothing left to finish.
    let mut w = deleted(DeletionPolicy::Finish);
    w.bns.retain(|b| b.name_any() != "slot");
    let nodes = w.recorded_nodes();
    assert!(finishing(&w.input(&nodes)).is_empty());
}
