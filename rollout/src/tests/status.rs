//! The pool status, its breakdown, events and stuck nodes.

use super::*;

#[test]
fn status_message_counts_and_deployed_digest() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    let rows: Vec<(&'static str, Bn)> = vec![
        ("u1", bn("u1", NEW, Daemon::Idle(NEW))),
        ("u2", bn("u2", NEW, Daemon::Idle(NEW))),
        ("u3", bn("u3", NEW, Daemon::Idle(NEW))),
        ("u4", bn("u4", NEW, Daemon::Idle(NEW))),
        ("u5", bn("u5", NEW, Daemon::Idle(NEW))),
        ("s1", bn("s1", NEW, Daemon::Staging(OLD))),
        ("s2", bn("s2", NEW, Daemon::Staging(OLD))),
        ("t1", bn("t1", NEW, Daemon::Staged(OLD))),
        ("t2", bn("t2", NEW, Daemon::Staged(OLD))),
        (
            "r1",
            bn("r1", NEW, Daemon::Rebooting(OLD)).approved().slot(false),
        ),
    ];
    for (name, b) in rows {
        w = w.node(node(name, "a", true, name == "r1")).bn(b);
    }
    let p = w.plan();
    let (status, reason, message) = up_to_date(&p);
    assert_eq!(status, "False");
    assert_eq!(reason, Reason::RolloutInProgress);
    assert_eq!(
        message,
        "5/10 updated; 2 staging, 2 staged, 1 rebooting; in reboot slots: r1"
    );
    let s = p.status.clone().unwrap();
    assert_eq!(
        (
            s.node_count,
            s.updated_count,
            s.updating_count,
            s.degraded_count
        ),
        (10, 5, 5, 0)
    );
    assert_eq!(s.deployed_digest, None);
    assert!(s.update_available);
    assert_eq!(degraded_reason(&p), Reason::Healthy);

    // Everyone on the target: AllUpdated, deployedDigest, no update available.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("u1", "a", true, false))
        .bn(bn("u1", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    let s = p.status.clone().unwrap();
    assert_eq!(s.deployed_digest.as_deref(), Some(NEW));
    assert!(!s.update_available);
    assert_eq!(up_to_date(&p).1, Reason::AllUpdated);
    assert_eq!(
        up_to_date(&p).2,
        "1/1 updated; 0 staging, 0 staged, 0 rebooting"
    );
}

/// A node back on the target but not Ready holds its slot: it counts as
/// rebooting, and the pool is not up to date until it is back.
#[test]
fn a_node_on_the_target_not_back_is_still_rebooting() {
    let back = |ready: bool| {
        let n = node("r1", "a", true, true);
        World::new(pool("a", IntOrString::Int(1), false))
            .node(if ready { n } else { down_for(n, 30) })
            .bn(bn("r1", NEW, Daemon::Idle(NEW)).approved().slot(false))
            .node(node("u1", "a", true, false))
            .bn(bn("u1", NEW, Daemon::Idle(NEW)))
            .drain("r1", DrainPhase::Succeeded)
            .plan()
    };
    // (Ready, UpToDate's reason, its message, updatedCount)
    let rows = [
        (
            false,
            Reason::RolloutInProgress,
            "1/2 updated; 0 staging, 0 staged, 1 rebooting; in reboot slots: r1",
            1,
        ),
        (
            true,
            Reason::AllUpdated,
            "2/2 updated; 0 staging, 0 staged, 0 rebooting",
            2,
        ),
    ];
    for (ready, reason, message, updated) in rows {
        let p = back(ready);
        assert_eq!(up_to_date(&p).1, reason, "Ready {ready}");
        assert_eq!(up_to_date(&p).2, message, "Ready {ready}");
        assert_eq!(p.status.unwrap().updated_count, updated, "Ready {ready}");
        let state = p.summary.states["r1"];
        assert_eq!(
            state == NodeState::UpToDate,
            ready,
            "Ready {ready}: {state:?}"
        );
    }
}

/// The rollout's events name the image, how many nodes it concerns and the
/// pace; a pool seen for the first time already up to date has none, and an
/// empty pool has no update available.
#[test]
fn rollout_events_and_the_empty_pool() {
    let w = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .node(node("w3", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)))
        .bn(bn("w2", OLD, Daemon::Idle(OLD)))
        .bn(bn("w3", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    let started: Vec<&str> = p.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        started,
        [format!(
            "rolling out {} to 2 of 3 nodes, at most 2 at a time",
            image(NEW)
        )
        .as_str()]
    );
    // Replanned on the status it wrote: nothing new to say.
    let mut again = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Staging(OLD)));
    again.pool.status = p.status.clone();
    assert!(again.plan().events.is_empty());

    let fresh = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)));
    let p = fresh.plan();
    assert!(p.events.is_empty(), "{:?}", p.events);
    let status = p.status.expect("first status");
    assert!(!status.update_available);

    let empty = World::new(pool("a", IntOrString::Int(1), false));
    let status = empty.plan().status.expect("first status");
    assert!(!status.update_available, "{status:?}");
    assert_eq!(status.node_count, 0);
    let up = status
        .conditions
        .iter()
        .find(|c| c.type_ == ConditionType::UpToDate)
        .expect("an UpToDate condition");
    assert!(up.message.contains("no node is a member"), "{}", up.message);
}

/// Count-only changes of the pool status are coalesced: written at most once
/// per COUNTS_MIN_INTERVAL, with a requeue so that the counts at rest are
/// written; anything else is written at once.
#[test]
fn count_only_status_changes_are_coalesced() {
    let ago = |secs: i64| now() - jiff::SignedDuration::from_secs(secs);
    // The stored status: one node staging, one idle on the target.
    let base = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .bn(bn("w2", NEW, Daemon::Staging(OLD)));
    let stored = base.plan().status.expect("first status");
    let world = |daemon: Bn, last: Option<i64>| {
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(node("w1", "a", true, false))
            .node(node("w2", "a", true, false))
            .bn(bn("w1", NEW, Daemon::Idle(NEW)))
            .bn(daemon);
        w.pool.status = Some(stored.clone());
        w.last_status_write = last.map(ago);
        w
    };
    struct Row {
        name: &'static str,
        /// w2 now.
        w2: Bn,
        /// Seconds since the last status write (None: none since start).
        last: Option<i64>,
        written: bool,
        requeue: Option<Duration>,
    }
    let rows = vec![
        Row {
            name: "nothing changed",
            w2: bn("w2", NEW, Daemon::Staging(OLD)),
            last: Some(1),
            written: false,
            requeue: None,
        },
        Row {
            name: "counts changed just after a write: later",
            w2: bn("w2", NEW, Daemon::Staged(OLD)),
            last: Some(1),
            written: false,
            requeue: Some(COUNTS_MIN_INTERVAL - Duration::from_secs(1)),
        },
        Row {
            name: "counts changed, interval passed: now",
            w2: bn("w2", NEW, Daemon::Staged(OLD)),
            last: Some(5),
            written: true,
            requeue: None,
        },
        Row {
            name: "counts changed, no write since start: now",
            w2: bn("w2", NEW, Daemon::Staged(OLD)),
            last: None,
            written: true,
            requeue: None,
        },
        Row {
            name: "a condition changed (NodeDegraded): now",
            w2: bn("w2", NEW, Daemon::Staging(OLD)).degraded(),
            last: Some(1),
            written: true,
            requeue: None,
        },
        Row {
            name: "the last node updated (AllUpdated): now",
            w2: bn("w2", NEW, Daemon::Idle(NEW)),
            last: Some(1),
            written: true,
            requeue: None,
        },
    ];
    for row in rows {
        let name = row.name;
        let p = world(row.w2, row.last).plan();
        assert_eq!(p.status.is_some(), row.written, "{name}: {:?}", p.status);
        // (Longer requeues are the stuck-phase deadlines'.)
        let coalescing = p.requeue_after.filter(|d| *d <= COUNTS_MIN_INTERVAL);
        assert_eq!(coalescing, row.requeue, "{name}");
        if let Some(s) = p.status {
            assert_ne!(s, stored, "{name}");
        }
    }
    // The counts when they are written are those of the moment.
    let p = world(bn("w2", NEW, Daemon::Staged(OLD)), Some(6)).plan();
    assert_eq!(
        up_to_date(&p).2,
        "1/2 updated; 0 staging, 1 staged, 0 rebooting; in reboot slots: w2"
    );
}

#[test]
fn one_node_stuck_in_its_slot_is_named_on_the_pool_once() {
    // Rebooting for 11 minutes, alone: no halt, but the pool says so.
    let w = World::new(pool("a", IntOrString::Int(2), false))
        .node(down_for(node("r", "a", true, true), 660))
        .node(node("ok", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("ok", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::NodeStuck);
    assert!(
        degraded_message(&p).starts_with("node r rebooting (NotReady) for 11m (deadline 10m): "),
        "{}",
        degraded_message(&p)
    );
    let stuck: Vec<&PlannedEvent> = p
        .events
        .iter()
        .filter(|e| e.reason == event_reasons::NODE_STUCK)
        .collect();
    assert_eq!(stuck.len(), 1, "{:?}", p.events);
    assert!(stuck[0].warning && stuck[0].node.as_deref() == Some("r"));
    // Reported already: no second event.
    let mut again = w;
    again.pool.status = p.status.clone();
    assert!(
        again
            .plan()
            .events
            .iter()
            .all(|e| e.reason != event_reasons::NODE_STUCK)
    );
    // Within the deadline: healthy, and looked at again when it ends.
    let p = World::new(pool("a", IntOrString::Int(2), false))
        .node(down_for(node("r", "a", true, true), 60))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .plan();
    assert_eq!(degraded_reason(&p), Reason::Healthy);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(540)));
    assert_eq!(p.phases.get("r"), Some(&stuck::Phase::Rebooting));
}

/// About 50 s into a silent reboot the node lifecycle controller turns the
/// Node's Ready from False to Unknown: a new transition, which must not
/// start the reboot's clock again.
#[test]
fn a_reboot_is_timed_from_its_first_sight_when_ready_turns_unknown() {
    let mut w = World::new(pool("a", IntOrString::Int(2), false))
        .node(down_for(node("r", "a", true, true), 30))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false));
    w.clock.insert(
        "r".into(),
        (
            stuck::Phase::Rebooting,
            now() - jiff::SignedDuration::from_secs(660),
        ),
    );
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::NodeStuck);
    assert!(
        degraded_message(&p).starts_with("node r rebooting (NotReady) for 11m"),
        "{}",
        degraded_message(&p)
    );
}

#[test]
fn phases_without_a_timestamp_are_timed_by_the_controllers_clock() {
    let long_ago = now() - jiff::SignedDuration::from_secs(31 * 60);
    // Staging for 31 minutes by the clock.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("s", "a", true, false))
        .bn(bn("s", NEW, Daemon::Staging(OLD)));
    assert_eq!(degraded_reason(&w.plan()), Reason::Healthy, "first sight");
    assert_eq!(w.plan().phases.get("s"), Some(&stuck::Phase::Staging));
    w.clock
        .insert("s".into(), (stuck::Phase::Staging, long_ago));
    let p = w.plan();
    assert_eq!(degraded_reason(&p), Reason::NodeStuck);
    assert!(degraded_message(&p).contains("node s staging for 31m"));
    // Approved, Ready, not rebooting for 31 minutes.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("a1", "a", true, true))
        .bn(bn("a1", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .drain("a1", DrainPhase::Succeeded);
    w.clock
        .insert("a1".into(), (stuck::Phase::ApprovedNotRebooting, long_ago));
    assert!(
        degraded_message(&w.plan()).contains("node a1 approved but not rebooting for 31m"),
        "{}",
        degraded_message(&w.plan())
    );
    // A daemon that never answered its spec.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("q", "a", true, false))
        .bn(bn("q", NEW, Daemon::Staged(OLD)).behind());
    w.clock
        .insert("q".into(), (stuck::Phase::DaemonSilent, long_ago));
    assert!(degraded_message(&w.plan()).contains("node q daemon silent"));
}

#[test]
fn the_summary_tells_states_draining_slots_and_halt() {
    let w = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("done", "a", true, false))
        .node(node("draining", "a", true, true))
        .node(node("staged", "a", true, false))
        .node(node("staging", "a", true, false))
        .bn(bn("done", NEW, Daemon::Idle(NEW)))
        .bn(bn("draining", NEW, Daemon::Staged(OLD)).slot(false))
        .bn(bn("staged", NEW, Daemon::Staged(OLD)))
        .bn(bn("staging", NEW, Daemon::Staging(OLD)))
        .drain("draining", DrainPhase::Running);
    let s = w.plan().summary;
    assert_eq!(
        s.states,
        BTreeMap::from([
            ("done".to_owned(), NodeState::UpToDate),
            ("draining".to_owned(), NodeState::Staged),
            ("staged".to_owned(), NodeState::Staged),
            ("staging".to_owned(), NodeState::Staging),
        ])
    );
    // The slot held, and the one this plan hands out: both draining.
    assert_eq!(
        s.draining.iter().map(String::as_str).collect::<Vec<_>>(),
        ["draining", "staged"]
    );
    assert_eq!(
        (s.slots, s.slots_in_use, s.halted, s.paused),
        (2, 2, false, false)
    );

    let w = World::new(pool("a", IntOrString::Int(3), false))
        .node(node("bad1", "a", false, true))
        .node(node("bad2", "a", false, true))
        .bn(bn("bad1", NEW, Daemon::Idle(OLD)).slot(false).degraded())
        .bn(bn("bad2", NEW, Daemon::Idle(OLD)).slot(false).degraded());
    assert!(w.plan().summary.halted);
}
