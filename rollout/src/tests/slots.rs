//! Slot entry and release (rules 1 and 2), drains and approval.

use super::*;

#[test]
fn slot_rule_1_only_healthy_staged_nodes_take_slots() {
    let w = World::new(pool("a", IntOrString::Int(5), false))
        .node(node("staging", "a", true, false))
        .node(node("degraded", "a", true, false))
        .node(node("notready", "a", false, false))
        .node(node("pending", "a", true, false))
        .node(node("staged", "a", true, false))
        .bn(bn("staging", NEW, Daemon::Staging(OLD)))
        .bn(bn("degraded", NEW, Daemon::Staged(OLD)).degraded())
        .bn(bn("notready", NEW, Daemon::Staged(OLD)))
        .bn(bn("pending", NEW, Daemon::Idle(OLD)))
        .bn(bn("staged", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert_eq!(slotted(&p), vec!["staged".to_owned()]);
    // Entering: one write, the cordon with the slot record, before the
    // drain; nothing written on the BootcNode.
    let i_cordon = p
        .writes
        .iter()
        .position(|w| {
            matches!(w, Write::PatchNode { name, patch } if name == "staged" && patch.unschedulable == Some(true))
        })
        .unwrap();
    let i_drain = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::StartDrain { node } if node == "staged"))
        .unwrap();
    assert!(i_cordon < i_drain);
    assert_eq!(slot_record(&p, "staged"), Some(true));
    assert!(applied(&p, "staged").is_none(), "{:?}", p.writes);
    // Unhealthy nodes outside slots do not block; the pool reports them.
    assert_eq!(degraded_reason(&p), Reason::NodeDegraded);
    assert!(degraded_message(&p).contains("degraded"));
}

#[test]
fn an_admin_cordoned_node_is_recorded_and_not_cordoned_again() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert!(applied(&p, "w1").is_none(), "{:?}", p.writes);
    // Not cordoned again: only the disruption record is written.
    let patches: Vec<&NodePatch> = p
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::PatchNode { patch, .. } => Some(patch),
            _ => None,
        })
        .collect();
    let record = NodePatch {
        do_not_disrupt: Some(true),
        exclude_lb: Some(true),
        ..NodePatch::record(true)
    };
    assert_eq!(patches, [&record]);
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
}

#[test]
fn a_drained_node_is_approved_unless_paused() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("w1", DrainPhase::Succeeded);
    let p = w.plan();
    let a = applied(&p, "w1").unwrap();
    assert_eq!(a.spec.desired_image_state, DesiredImageState::Booted);
    assert_eq!(slot_record(&p, "w1"), None, "{:?}", p.writes);
    // This pool's first plan announces the rollout; the approval is no event.
    assert!(
        p.events
            .iter()
            .all(|e| e.reason == event_reasons::ROLLOUT_STARTED),
        "approval is no event: {:?}",
        p.events
    );

    let mut paused = w;
    paused.pool.spec.rollout.paused = true;
    let p = paused.plan();
    assert!(applied(&p, "w1").is_none(), "{:?}", p.writes);
    let (_, reason, message) = up_to_date(&p);
    assert_eq!(reason, Reason::Paused);
    assert!(
        message.ends_with("; held cordoned in reboot slots until resumed: w1"),
        "{message}"
    );

    // Still draining: nothing yet. Not yet drained after a restart: drain again.
    let running = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("w1", DrainPhase::Running);
    assert!(running.plan().writes.is_empty());
    let restarted = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false));
    assert_eq!(slotted(&restarted.plan()), vec!["w1".to_owned()]);
}

#[test]
fn a_failed_drain_is_reported_and_retried_later() {
    let at = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(1_000_000 - 10);
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain(
            "w1",
            DrainPhase::Failed {
                message: "still blocking: default/stuck".into(),
                at,
            },
        );
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::DrainTimedOut);
    assert!(degraded_message(&p).contains("default/stuck"));
    assert!(slotted(&p).is_empty());
    assert_eq!(p.requeue_after, Some(Duration::from_secs(50)));
}

#[test]
fn slot_rule_2_release_only_when_updated_healthy_and_ready() {
    // Runs the target but NotReady: holds the slot.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", false, true))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert!(applied(&p, "w1").is_none());
    assert!(slotted(&p).is_empty(), "slot still held");

    // Degraded after the reboot: holds the slot.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Idle(NEW))
            .approved()
            .slot(false)
            .degraded());
    assert!(applied(&w.plan(), "w1").is_none());

    // Ready and updated: uncordon first, then drop the annotations; the next
    // Staged node takes the freed slot in the same pass.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    let i_uncordon = p
        .writes
        .iter()
        .position(|w| {
            matches!(w, Write::PatchNode { name, patch } if name == "w1" && patch.unschedulable == Some(false))
        })
        .expect("uncordon");
    let i_release = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::ApplyBootcNode(b) if b.name == "w1"))
        .unwrap();
    assert!(i_uncordon < i_release);
    let a = applied(&p, "w1").unwrap();
    assert!(a.annotations.is_empty());
    assert_eq!(a.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(slotted(&p), vec!["w2".to_owned()]);

    // Was cordoned by the admin before: stays cordoned.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(true));
    let p = w.plan();
    // Only the disruption record goes; the cordon stays the admin's.
    assert!(p.writes.iter().all(|w| !matches!(w,
        Write::PatchNode { patch, .. } if *patch != NodePatch::record(false))));
    assert!(applied(&p, "w1").unwrap().annotations.is_empty());
}

#[test]
fn pause_stops_new_slots_but_not_staging() {
    let w = World::new(pool("a", IntOrString::Int(3), true))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    // Staging goes on: the spec still moves to the new image.
    assert_eq!(applied(&p, "w1").unwrap().spec.desired_image, image(NEW));
    assert!(slotted(&p).is_empty());
    let (status, reason, _) = up_to_date(&p);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", Reason::Paused.as_str())
    );
}

#[test]
fn a_bootc_node_deleted_mid_reboot_takes_its_slot_back() {
    // The BootcNode is gone: recreated, its slot taken back from the Node's
    // record, the cordon kept, no other slot.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    applied(&p, "r").expect("recreated");
    assert_eq!(slot_record(&p, "r"), None, "{:?}", p.writes);
    assert!(!uncordons(&p, "r"), "{:?}", p.writes);
    assert!(!slotted(&p).contains(&"next".to_owned()), "{:?}", p.writes);
    // Recreated and its daemon not yet back: still held.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Nothing))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(!uncordons(&p, "r"), "{:?}", p.writes);
    assert!(!slotted(&p).contains(&"next".to_owned()), "{:?}", p.writes);
    // Back on the target and Ready: released, and the next node goes.
    let mut back = rebooting_node("r", "a");
    back.status = node("r", "a", true, true).status;
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(back)
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Idle(NEW)))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(node_writes(&p, "r").contains(&&Write::PatchNode {
        name: "r".into(),
        patch: NodePatch::UNCORDON
    }));
    assert_eq!(slotted(&p), ["next"]);
}

#[test]
fn a_target_withdrawn_mid_reboot_keeps_the_slot_until_the_daemon_answers() {
    // Approved for NEW, the pool rolled back to OLD, which the node runs.
    // Its daemon's last word (Staged, for the approving spec) may have been
    // followed by the apply: the slot is kept.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("r", "a", true, true))
        .node(node("next", "a", true, false))
        .bn(bn("r", OLD, Daemon::Staged(OLD)).slot(false).behind())
        .bn(bn("next", NEW, Daemon::Staged(OLD)));
    w.target = Ok(target(OLD));
    let p = w.plan();
    assert!(!uncordons(&p, "r"), "{:?}", p.writes);
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    // Same while it says Rebooting.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("r", "a", true, true))
        .bn(bn("r", OLD, Daemon::Rebooting(OLD)).slot(false).behind());
    w.target = Ok(target(OLD));
    assert!(!uncordons(&w.plan(), "r"));
    // The daemon answered the new spec (Idle on OLD): released.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("r", "a", true, true))
        .bn(bn("r", OLD, Daemon::Idle(OLD)).slot(false).behind());
    w.target = Ok(target(OLD));
    assert!(uncordons(&w.plan(), "r"));
}

#[test]
fn a_pause_mid_reboot_keeps_the_slot() {
    let p = World::new(pool("a", IntOrString::Int(1), true))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(node_writes(&p, "r").is_empty(), "{:?}", p.writes);
    // Resumed: the slot is still taken.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
}

/// `n` held by `who` (`hold.bootc.dev/<who>: <reason>`).
fn held(mut n: Node, who: &str) -> Node {
    let key = format!("{}{who}", api::labels::HOLD_ANNOTATION_PREFIX);
    n.annotations_mut().insert(key, "debugging".into());
    n
}

#[test]
fn a_held_node_takes_no_slot_and_a_hold_releases_a_slot_not_yet_approved() {
    // `drained` is in its slot, drained, about to be approved; `approved`
    // is approved and rebooting; `waiting` is staged outside any slot.
    let world = |hold: &[&str]| {
        let maybe = |n: Node, name: &str| {
            if hold.contains(&name) {
                held(n, "alice")
            } else {
                n
            }
        };
        World::new(pool("a", IntOrString::Int(3), false))
            .node(maybe(
                marked(node("drained", "a", true, true), "a"),
                "drained",
            ))
            .node(maybe(rebooting_node("approved", "a"), "approved"))
            .node(maybe(node("waiting", "a", true, false), "waiting"))
            .bn(bn("drained", NEW, Daemon::Staged(OLD)).slot(false))
            .bn(bn("approved", NEW, Daemon::Rebooting(OLD))
                .approved()
                .slot(false))
            .bn(bn("waiting", NEW, Daemon::Staged(OLD)))
            .drain("drained", DrainPhase::Succeeded)
    };
    // No hold: the drained one is approved, the waiting one takes a slot.
    let p = world(&[]).plan();
    assert_eq!(
        applied(&p, "drained").map(|b| b.spec.desired_image_state),
        Some(DesiredImageState::Booted)
    );
    assert_eq!(slotted(&p), ["waiting"]);

    // Every node held: the waiting one takes no slot; the drained one is
    // released (uncordoned, its slot record gone, its drain cancelled); the
    // approved one finishes.
    let p = world(&["drained", "approved", "waiting"]).plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert!(uncordons(&p, "drained"), "{:?}", node_writes(&p, "drained"));
    assert_eq!(slot_record(&p, "drained"), Some(false));
    // Never approved: nothing to withdraw, no write on its BootcNode.
    assert!(applied(&p, "drained").is_none(), "{:?}", p.writes);
    assert!(
        node_writes(&p, "drained")
            .iter()
            .any(|w| matches!(w, Write::CancelDrain { .. }))
    );
    assert!(
        node_writes(&p, "approved").is_empty(),
        "{:?}",
        node_writes(&p, "approved")
    );
    let (_, _, message) = up_to_date(&p);
    assert!(
        // The approved one is named where it stands: in its slot.
        message.contains("in reboot slots: approved; 2 held by hold.bootc.dev/<who> annotations, given no reboot slot: drained, waiting"),
        "{message}"
    );
}

#[test]
fn a_failed_drain_releases_and_skips_the_node_when_the_pool_says_so() {
    let world = |policy: api::DrainTimeoutPolicy, skipped_for: Option<&str>| {
        let mut p = pool("a", IntOrString::Int(1), false);
        p.spec.rollout.on_drain_timeout = policy;
        let mut w = World::new(p)
            .node(marked(node("blocked", "a", true, true), "a"))
            .node(node("next", "a", true, false))
            .bn(bn("blocked", NEW, Daemon::Staged(OLD)).slot(false))
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
            .drain(
                "blocked",
                DrainPhase::Failed {
                    message: "pod apps/web would not leave".into(),
                    at: now(),
                },
            );
        if let Some(digest) = skipped_for {
            // Released and skipped by an earlier plan.
            w.nodes[0] = node("blocked", "a", true, false);
            w.slots.clear();
            w.bns[0] = bn("blocked", NEW, Daemon::Staged(OLD)).build();
            let ann = w.bns[0].annotations_mut();
            ann.insert(api::labels::SKIPPED_ANNOTATION.into(), digest.into());
            ann.insert(
                api::labels::SKIPPED_BECAUSE_ANNOTATION.into(),
                "blocked: gone".into(),
            );
            w.drains.clear();
        }
        w.plan()
    };
    // Retry (the default): the node keeps its slot, cordoned.
    let p = world(api::DrainTimeoutPolicy::Retry, None);
    assert!(!uncordons(&p, "blocked"));
    assert!(slotted(&p).is_empty());
    // Release: uncordoned, slot freed, skipped for this target with the
    // failure named; the slot goes to the next node at once.
    let p = world(api::DrainTimeoutPolicy::Release, None);
    assert!(uncordons(&p, "blocked"), "{:?}", node_writes(&p, "blocked"));
    let released = applied(&p, "blocked").expect("blocked applied");
    assert_eq!(slot_record(&p, "blocked"), Some(false));
    assert_eq!(
        released
            .annotations
            .get(api::labels::SKIPPED_ANNOTATION)
            .map(String::as_str),
        Some(NEW)
    );
    assert_eq!(
        released
            .annotations
            .get(api::labels::SKIPPED_BECAUSE_ANNOTATION)
            .map(String::as_str),
        Some("blocked: pod apps/web would not leave")
    );
    assert_eq!(slotted(&p), ["next"]);
    assert_eq!(degraded_reason(&p), Reason::DrainTimedOut);
    assert!(degraded_message(&p).contains("skipped for this target after their drain failed"));
    // Skipped for this target: no slot for it, the pool is not up to date.
    let p = world(api::DrainTimeoutPolicy::Release, Some(NEW));
    assert_eq!(slotted(&p), ["next"]);
    assert!(degraded_message(&p).contains("blocked: gone"));
    // Skipped for an older target: a new target clears it.
    let p = world(api::DrainTimeoutPolicy::Release, Some(OLD));
    let cleared = applied(&p, "blocked").expect("the skip removed");
    assert!(
        !cleared
            .annotations
            .contains_key(api::labels::SKIPPED_ANNOTATION)
    );
    assert_eq!(slotted(&p), ["blocked"]);
}

#[test]
fn a_drain_a_budget_holds_is_named_on_the_pool() {
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("n1", "a", true, true), "a"))
        .bn(bn("n1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain(
            "n1",
            DrainPhase::Blocked {
                message:
                    "apps/web (The disruption budget web needs 1 healthy pods and has 1 currently)"
                        .into(),
            },
        )
        .plan();
    // Still draining: no new drain, no approval, no cancel.
    assert!(
        node_writes(&p, "n1")
            .iter()
            .all(|w| !matches!(w, Write::StartDrain { .. } | Write::CancelDrain { .. }))
    );
    let (_, reason, message) = up_to_date(&p);
    assert_eq!(reason, Reason::RolloutInProgress);
    assert!(
        message.ends_with("; draining, an eviction refused by a PodDisruptionBudget (retrying): n1: apps/web (The disruption budget web needs 1 healthy pods and has 1 currently)"),
        "{message}"
    );
}

/// The lifecycle conditions `plan` writes on `name` (type, status).
fn lifecycle_writes(plan: &Plan, name: &str) -> Vec<(&'static str, bool)> {
    node_writes(plan, name)
        .into_iter()
        .filter_map(|w| match w {
            Write::PatchNodeConditions { conditions, .. } => Some(conditions),
            _ => None,
        })
        .flatten()
        .map(|c| (c.type_, c.status))
        .collect()
}

#[test]
fn with_lifecycle_conditions_a_slot_tells_its_node_its_stage() {
    use api::node_health::{DRAIN_IN_PROGRESS, DRAINED, MAINTENANCE_IN_PROGRESS};
    let world = |on: bool| {
        let mut w = World::new(pool("a", IntOrString::Int(2), false))
            .node(node("new", "a", true, false))
            .node(marked(node("drained", "a", true, true), "a"))
            .bn(bn("new", NEW, Daemon::Staged(OLD)))
            .bn(bn("drained", NEW, Daemon::Staged(OLD)).slot(false))
            .drain("drained", DrainPhase::Succeeded);
        w.node_lifecycle_conditions = on;
        w.plan()
    };
    let p = world(true);
    assert_eq!(
        lifecycle_writes(&p, "new"),
        [(MAINTENANCE_IN_PROGRESS, true), (DRAIN_IN_PROGRESS, true)]
    );
    assert_eq!(
        lifecycle_writes(&p, "drained"),
        [(MAINTENANCE_IN_PROGRESS, true), (DRAINED, true)]
    );
    // Off (the default): no such write.
    let p = world(false);
    assert!(lifecycle_writes(&p, "new").is_empty());
    assert!(lifecycle_writes(&p, "drained").is_empty());
}

#[test]
fn a_release_clears_the_pools_lifecycle_conditions_even_with_the_flag_off() {
    use api::node::NodeCondition;
    use api::node_health::{DRAINED, LIFECYCLE_REASON, MAINTENANCE_IN_PROGRESS};
    // Back on the target, Ready: released. Its Node still says what the
    // pool set while the flag was on.
    let mut back = marked(node("w1", "a", true, true), "a");
    let status = back.status.get_or_insert_default();
    for type_ in [MAINTENANCE_IN_PROGRESS, DRAINED] {
        status
            .conditions
            .get_or_insert_default()
            .push(NodeCondition {
                type_: type_.into(),
                status: "True".into(),
                reason: Some(LIFECYCLE_REASON.into()),
                ..NodeCondition::default()
            });
    }
    for on in [false, true] {
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(back.clone())
            .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(false));
        w.node_lifecycle_conditions = on;
        let p = w.plan();
        assert_eq!(
            lifecycle_writes(&p, "w1"),
            [(MAINTENANCE_IN_PROGRESS, false), (DRAINED, false)],
            "flag {on}: {:?}",
            p.writes
        );
    }
}

#[test]
fn a_slot_recorded_on_the_bootc_node_before_an_upgrade_is_kept_and_moved_to_the_node() {
    // 0.1.0 recorded a slot on the BootcNode first, then on the Node.
    let legacy = |b: Bn| {
        let mut b = b.build();
        let ann = b.annotations_mut();
        ann.insert(api::labels::IN_REBOOT_SLOT_ANNOTATION.into(), "true".into());
        ann.insert(api::labels::WAS_CORDONED_ANNOTATION.into(), "false".into());
        b
    };
    // (what, the Node carries the slot record, the Node write)
    let rows = [
        ("both records: the old one goes, nothing else", true, None),
        (
            "the BootcNode's alone: the Node's is written",
            false,
            Some(true),
        ),
    ];
    for (what, on_node, node_write) in rows {
        let n = marked(node("w1", "a", true, true), "a");
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(if on_node { in_slot_of(n, "a") } else { n })
            .node(node("next", "a", true, false))
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
            .drain("w1", DrainPhase::Running);
        w.bns.push(legacy(bn("w1", NEW, Daemon::Staged(OLD))));
        let p = w.plan();
        assert!(slotted(&p).is_empty(), "{what}: the slot is still w1's");
        assert_eq!(slot_record(&p, "w1"), node_write, "{what}: {:?}", p.writes);
        assert!(!uncordons(&p, "w1"), "{what}");
        let apply = applied(&p, "w1").expect("the old record removed");
        assert!(apply.annotations.is_empty(), "{what}: {apply:?}");
    }
}
