//! Each member's standing ([`crate::standing`]): one row per kind the
//! planner reaches from objects, then every kind named and rendered.

use super::*;
use crate::standing::{About, Standing};
use api::StandingKind;

fn one() -> IntOrString {
    IntOrString::Int(1)
}

/// `n1` in pool `a`, with `bn`, and its Node Ready or not.
fn alone(pool: BootcNodePool, b: Bn, ready: bool) -> World {
    World::new(pool).node(node("n1", "a", ready, false)).bn(b)
}

fn staged() -> Bn {
    bn("n1", NEW, Daemon::Staged(OLD))
}

fn with_spec(mut p: BootcNodePool, f: impl FnOnce(&mut api::RolloutSpec)) -> BootcNodePool {
    f(&mut p.spec.rollout);
    p
}

fn hold(mut n: Node) -> Node {
    let key = format!("{}alice", api::labels::HOLD_ANNOTATION_PREFIX);
    n.annotations_mut().insert(key, "debugging".into());
    n
}

/// `n1`, slotted (cordoned by us, or approved and rebooting).
fn in_slot(pool: BootcNodePool, b: Bn, ready: bool) -> World {
    World::new(pool)
        .node(node("n1", "a", ready, true))
        .bn(b.slot(false))
}

fn rows() -> Vec<(&'static str, World, StandingKind)> {
    let p = || pool("a", one(), false);
    let mut conflicted = alone(p(), staged(), true);
    let mut everyone = pool("b", one(), false);
    everyone.spec.node_selector = LabelSelector::default();
    conflicted.others.push(everyone);
    let mut updater = alone(p(), bn("n1", OLD, Daemon::Idle(OLD)), true);
    if let Some(s) = updater.bns[0].status.as_mut() {
        s.host_updaters = vec![api::host_updaters::BOOTC_TIMER.into()];
    }
    let mut incompatible = alone(p(), bn("n1", OLD, Daemon::Idle(OLD)), true);
    if let Some(b) = incompatible.bns[0]
        .status
        .as_mut()
        .and_then(|s| s.booted.as_mut())
    {
        b.incompatible = true;
    }
    let mut old_daemon = alone(p(), staged(), true);
    if let Some(s) = old_daemon.bns[0].status.as_mut() {
        s.daemon = Some(api::DaemonStatus {
            version: "0.0.9".into(),
            contract: 0,
        });
    }
    let mut blocked = alone(p(), staged(), true);
    blocked.gates.blocking_pods = Ok(BTreeMap::from([("n1".into(), "batch/etl".into())]));
    let mut down = alone(p(), staged().behind(), true);
    down.gates.daemon_pods = Ok(BTreeMap::from([(
        "n1".into(),
        "bootc-daemon/bootc-daemon-x: CrashLoopBackOff: back-off (restarted 4 times)".into(),
    )]));
    let mut gated = alone(p(), staged(), true);
    gated.gates.alerts = Ok(vec!["NodeDown".into()]);
    let degraded_holder = |n: &'static str| {
        bn(n, NEW, Daemon::Rebooting(OLD))
            .approved()
            .degraded()
            .slot(false)
    };
    vec![
        (
            "on the target",
            alone(p(), bn("n1", NEW, Daemon::Idle(NEW)), true),
            StandingKind::UpToDate,
        ),
        (
            "on the target, Degraded",
            alone(p(), bn("n1", NEW, Daemon::Idle(NEW)).degraded(), true),
            StandingKind::OnTargetDegraded,
        ),
        ("claimed by two pools", conflicted, StandingKind::InConflict),
        ("its host's updater on", updater, StandingKind::HostUpdaters),
        (
            "bootc marks its deployment incompatible",
            incompatible,
            StandingKind::HostIncompatible,
        ),
        ("its daemon too old", old_daemon, StandingKind::DaemonSkew),
        (
            "the staging bound",
            World::new(with_spec(p(), |r| r.max_concurrent_staging = Some(1)))
                .node(node("n1", "a", true, false))
                .node(node("n2", "a", true, false))
                .bn(bn("n1", OLD, Daemon::Idle(OLD)))
                .bn(bn("n2", NEW, Daemon::Staging(OLD))),
            StandingKind::NotTold,
        ),
        (
            "its daemon's pod cannot run",
            down,
            StandingKind::DaemonDown,
        ),
        (
            "its daemon behind",
            alone(p(), staged().behind(), true),
            StandingKind::DaemonBehind,
        ),
        (
            "downloading",
            alone(p(), bn("n1", NEW, Daemon::Staging(OLD)), true),
            StandingKind::Staging,
        ),
        (
            "its BootcNode Degraded",
            alone(p(), staged().degraded(), true),
            StandingKind::Degraded,
        ),
        (
            "told, idle",
            alone(p(), bn("n1", NEW, Daemon::Idle(OLD)), true),
            StandingKind::Told,
        ),
        (
            "a hold",
            World::new(p())
                .node(hold(node("n1", "a", true, false)))
                .bn(staged()),
            StandingKind::Held,
        ),
        ("a blocking pod", blocked, StandingKind::BlockingPod),
        (
            "its Node not Ready",
            alone(p(), staged(), false),
            StandingKind::Unfit,
        ),
        (
            "paused",
            alone(pool("a", one(), true), staged(), true),
            StandingKind::Paused,
        ),
        (
            "halted",
            World::new(pool("a", IntOrString::Int(3), false))
                .node(node("n1", "a", true, false))
                .node(node("n2", "a", true, true))
                .node(node("n3", "a", true, true))
                .bn(staged())
                .bn(degraded_holder("n2"))
                .bn(degraded_holder("n3")),
            StandingKind::Halted,
        ),
        (
            "a pool it depends on is missing",
            alone(
                with_spec(p(), |r| r.depends_on = vec!["infra".into()]),
                staged(),
                true,
            ),
            StandingKind::WaitingForDependencies,
        ),
        (
            "an order that cannot be read",
            alone(
                with_spec(p(), |r| {
                    r.order = vec![serde_json::from_value(json!({"selector": {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}})).unwrap()];
                }),
                staged(),
                true,
            ),
            StandingKind::OrderUnreadable,
        ),
        (
            "a later group",
            World::new(with_spec(p(), |r| {
                r.order = vec![
                    serde_json::from_value(json!({"selector": {"matchLabels": {"zone": "a"}}}))
                        .unwrap(),
                ];
            }))
            .node(node("n1", "a", true, false))
            .node({
                let mut n = node("n2", "a", true, false);
                n.labels_mut().insert("zone".into(), "a".into());
                n
            })
            .bn(staged())
            .bn(bn("n2", NEW, Daemon::Staging(OLD))),
            StandingKind::WaitingForTurn,
        ),
        ("an alert fires", gated, StandingKind::Gated),
        (
            "maxUnavailable 0",
            alone(pool("a", IntOrString::Int(0), false), staged(), true),
            StandingKind::NoSlots,
        ),
        (
            "another member NotReady",
            World::new(p())
                .node(node("n1", "a", true, false))
                .node(node("n2", "a", false, false))
                .bn(staged())
                .bn(bn("n2", NEW, Daemon::Staging(OLD))),
            StandingKind::WaitingForBudget,
        ),
        (
            "every slot held",
            World::new(p())
                .node(node("n1", "a", true, false))
                .node(node("n2", "a", false, true))
                .bn(staged())
                .bn(bn("n2", NEW, Daemon::Rebooting(OLD)).approved().slot(false)),
            StandingKind::WaitingForSlot,
        ),
        (
            "a free slot",
            alone(p(), staged(), true),
            StandingKind::TakingSlot,
        ),
        (
            "in its slot",
            in_slot(p(), staged(), true),
            StandingKind::Draining,
        ),
        (
            "drained, staging",
            in_slot(p(), bn("n1", NEW, Daemon::Staging(OLD)), true)
                .drain("n1", DrainPhase::Succeeded),
            StandingKind::StagingInSlot,
        ),
        (
            "paused in its slot",
            in_slot(pool("a", one(), true), staged(), true),
            StandingKind::HeldByPause,
        ),
        (
            "in its slot, drained, the fleet's switch holding approvals",
            {
                let mut w = in_slot(p(), staged(), true).drain("n1", DrainPhase::Succeeded);
                w.gates.fleet_stop = Some("incident".into());
                w.gates.fleet_holds_approvals = true;
                w
            },
            StandingKind::HeldByFleetStop,
        ),
        (
            "approved",
            in_slot(p(), staged().approved(), true),
            StandingKind::Approved,
        ),
        (
            "rebooting",
            in_slot(p(), bn("n1", NEW, Daemon::Rebooting(OLD)).approved(), false),
            StandingKind::Rebooting,
        ),
        (
            "its reboot failed",
            in_slot(
                p(),
                bn("n1", NEW, Daemon::Idle(OLD)).approved().degraded(),
                true,
            ),
            StandingKind::RebootFailed,
        ),
        (
            "back, NotReady",
            in_slot(p(), bn("n1", NEW, Daemon::Idle(NEW)).approved(), false),
            StandingKind::ComingBack,
        ),
    ]
}

#[test]
fn each_member_stands_where_the_planner_put_it() {
    for (what, world, want) in rows() {
        let plan = world.plan();
        let standing = plan.summary.standings.members.get("n1");
        assert_eq!(
            standing.map(Standing::kind),
            Some(want),
            "{what}: {standing:?}"
        );
    }
}

/// A held or waiting member is named in the pool's message by its standing.
#[test]
fn the_pool_message_renders_the_standings() {
    let plan = World::new(pool("a", one(), false))
        .node(hold(node("n1", "a", true, false)))
        .bn(staged())
        .plan();
    let (_, _, message) = up_to_date(&plan);
    assert!(
        message.contains("1 held by hold.bootc.dev/<who> annotations, given no reboot slot: n1"),
        "{message}"
    );
}

/// A member whose daemon cannot run makes the pool Degraded at once,
/// naming the node and the kubelet's reason; one merely behind does not.
#[test]
fn a_daemon_that_cannot_run_degrades_the_pool() {
    let world = |pods: BTreeMap<String, String>| {
        let mut w = alone(pool("a", one(), false), staged().behind(), true);
        w.gates.daemon_pods = Ok(pods);
        w.plan()
    };
    let down = world(BTreeMap::from([(
        "n1".into(),
        "bootc-daemon/d-1: CrashLoopBackOff: back-off 5m0s (restarted 4 times)".into(),
    )]));
    assert_eq!(degraded_reason(&down), Reason::DaemonNotRunning.as_str());
    let message = degraded_message(&down);
    assert!(
        message.contains("n1 (bootc-daemon/d-1: CrashLoopBackOff"),
        "{message}"
    );
    let behind = world(BTreeMap::new());
    assert_eq!(degraded_reason(&behind), Reason::Healthy.as_str());
}

/// One example of every kind, in [`api::StandingKind::ALL`]'s order.
fn every_kind() -> Vec<Standing> {
    use crate::standing::{AfterFailure, Unfit};
    vec![
        Standing::UpToDate,
        Standing::OnTargetDegraded,
        Standing::InConflict {
            pools: vec!["b".into()],
        },
        Standing::HostUpdaters {
            units: vec!["u.timer".into()],
        },
        Standing::HostIncompatible { why: "w".into() },
        Standing::DaemonSkew(api::daemon_contract::DaemonSkew {
            skew: api::daemon_contract::Skew::TooOld,
            contract: 0,
            version: None,
        }),
        Standing::FailedHealth { check: "c".into() },
        Standing::TargetFailed,
        Standing::NotTold { unlocked: true },
        Standing::DaemonDown { pod: "p".into() },
        Standing::DaemonBehind {
            generation: 3,
            observed: 2,
        },
        Standing::Staging,
        Standing::Degraded,
        Standing::Told { phase: None },
        Standing::Skipped { why: "w".into() },
        Standing::Held {
            holds: vec!["h".into()],
        },
        Standing::BlockingPod { pod: "ns/p".into() },
        Standing::Unfit(Unfit::NotReady),
        Standing::FleetStopped,
        Standing::PoolDeleting,
        Standing::Paused,
        Standing::PausedUntil { until: now() },
        Standing::Halted,
        Standing::WaitingForDependencies,
        Standing::OrderUnreadable,
        Standing::WaitingForTurn { group: 0 },
        Standing::CanaryStep,
        Standing::Gated,
        Standing::OutsideWindow,
        Standing::Blackout,
        Standing::NoSlots,
        Standing::WaitingForBudget,
        Standing::WaitingForSlot,
        Standing::TakingSlot,
        Standing::Draining {
            blocked: None,
            failed: None,
        },
        Standing::StagingInSlot,
        Standing::HeldByPause,
        Standing::HeldByFleetStop,
        Standing::Approved,
        Standing::Rebooting {
            not_ready: true,
            since: None,
        },
        Standing::RebootFailed,
        Standing::Proving {
            waiting: "w".into(),
        },
        Standing::ComingBack,
        Standing::FailedInSlot {
            check: "c".into(),
            then: AfterFailure::Kept,
        },
    ]
}

/// Every kind has its name (the metrics' label) and its own headline: a
/// kind missing from `api::StandingKind` (and so from the metrics) or
/// rendered like another fails here.
#[test]
fn every_standing_is_named_and_rendered_apart() {
    let kinds = every_kind();
    let names: Vec<api::StandingKind> = kinds.iter().map(Standing::kind).collect();
    assert_eq!(
        names,
        api::StandingKind::ALL,
        "api::StandingKind lists every kind, once, in order"
    );
    let about = About {
        name: "n1",
        bn: None,
        now: now(),
    };
    let pool = crate::standing::Pool {
        name: "a".into(),
        ..Default::default()
    };
    let mut headlines = std::collections::BTreeSet::new();
    for kind in &kinds {
        let said = kind.headline(about, &pool);
        assert!(!said.is_empty(), "{kind:?}");
        assert!(
            headlines.insert(said.clone()),
            "{kind:?} is said as another: {said}"
        );
    }
}
