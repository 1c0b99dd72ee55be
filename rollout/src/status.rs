//! Step 8, the pool's status: the counts and their breakdown, the
//! conditions (UpToDate, Degraded with every problem, and the kstatus ones),
//! the rollout's events, and when the status is written.
//!
//! The `UpToDate` message is the breakdown: "5/10 updated; 2 staging, 2
//! staged, 1 rebooting", then what holds the rollout: the nodes in reboot
//! slots (a pause names the ones it holds cordoned), nodes that left
//! mid-reboot, the pool's own unavailable nodes; outside the maintenance
//! windows the reason is `OutsideMaintenanceWindow`, the message says when
//! the next opens, and so does `status.nextMaintenanceWindow`; while a
//! gate holds it is `AlertFiring` or `GateUnanswered` ([`crate::holds::gates`]),
//! and members on a blocking pod are named with the pod. `Degraded` carries the most
//! important problem's reason and every problem's message (members refused
//! for their host's own updater among them: [`crate::holds::updaters`]). A change that
//! touches only the counts (and the breakdown) is written at most every
//! [`COUNTS_MIN_INTERVAL`], and always once things settle; target,
//! conditions and generation are written at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::conditions::{self, ConditionUpdate};
use api::labels::HOLD_ANNOTATION_PREFIX;
use api::{BootcNode, BootcNodePoolStatus, ConditionType, Reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::facts::{Failure, Rollout};
use crate::holds::depends::Waiting;
use crate::holds::gates::{BLOCKING_PODS_FIELD, GATE_RECHECK, Gate};
use crate::holds::pause::Pause;
use crate::holds::window::Window;
use crate::members::leaving::Leavers;
use crate::members::membership::Membership;
use crate::members::state::{NodeState, runs_target};
use crate::model::{PlannedEvent, Problem, Target, event_reasons};
use crate::order::Writes;
use crate::reboot::stuck::Stuck;
use crate::reboot::verdict::requeue;
use crate::standing::{self, Standing, Standings};
use crate::view::View;
use crate::{holds::daemons, holds::halt, holds::updaters, reboot::stuck};

/// The planner's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub writes: Writes,
    pub events: Vec<PlannedEvent>,
    /// The new status, when it differs from the pool's current one.
    pub status: Option<BootcNodePoolStatus>,
    /// Reconcile again after this long even if nothing changes (a drain retry).
    pub requeue_after: Option<Duration>,
    /// The phase each member waits in (the runtime's clock ticks with it).
    pub phases: BTreeMap<String, stuck::Phase>,
    /// What the plan saw, for the metrics.
    pub summary: Summary,
}

/// The pool as the plan saw it: each member's state and the reboot slots.
/// Read by the metrics, never by the actuator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each member's state, by node name.
    pub states: BTreeMap<String, NodeState>,
    /// Slot holders that are cordoned and not yet drained (drain running or
    /// failed): what a person calls draining.
    pub draining: BTreeSet<String>,
    /// The reboot slots `maxUnavailable` allows.
    pub slots: usize,
    /// The nodes holding a slot once the plan's writes are made.
    pub slots_in_use: usize,
    /// Rule 3 stopped new slots.
    pub halted: bool,
    pub paused: bool,
    /// Where each member stands, and why ([`crate::standing`]).
    pub standings: Standings,
}

/// The shortest time between two pool status writes that change nothing but
/// the node counts (and the breakdown message that spells them out). Such a
/// change is written once this has passed since the last status write, so
/// that the counts at rest are always accurate; every other change (target,
/// conditions, generation) is written at once.
pub const COUNTS_MIN_INTERVAL: Duration = Duration::from_secs(5);

/// A plan's per-member maps, handed back once read (`Memo::recycle`)
/// for the pool's next plan to refill in place.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spare {
    pub states: BTreeMap<String, NodeState>,
    pub standings: BTreeMap<String, Standing>,
}

impl From<Summary> for Spare {
    fn from(summary: Summary) -> Self {
        Spare {
            states: summary.states,
            standings: summary.standings.members,
        }
    }
}

/// What the earlier steps found, for the status.
pub(crate) struct Facts<'a> {
    pub target: Option<&'a Target>,
    pub members: &'a Membership<'a>,
    pub leavers: Leavers,
    pub rollout: Rollout<'a>,
    pub slots: usize,
    /// The last plan's per-member maps, to refill.
    pub spare: Spare,
}

/// Per-state counts for the status message.
#[derive(Default)]
struct Counts {
    updated: usize,
    staging: usize,
    staged: usize,
    rebooting: usize,
    pending: usize,
    degraded: usize,
}

impl Counts {
    fn of(states: impl Iterator<Item = NodeState>) -> Self {
        let mut c = Counts::default();
        for s in states {
            *match s {
                NodeState::Degraded => &mut c.degraded,
                NodeState::UpToDate => &mut c.updated,
                NodeState::Pending => &mut c.pending,
                NodeState::Staging => &mut c.staging,
                NodeState::Staged => &mut c.staged,
                NodeState::Rebooting => &mut c.rebooting,
            } += 1;
        }
        c
    }
}

/// The plan: the writes, with the status, events and summary they lead to.
pub(crate) fn report(
    view: &View<'_>,
    facts: Facts<'_>,
    mut problems: Vec<Problem>,
    writes: Writes,
) -> Plan {
    let Facts {
        target,
        members,
        leavers,
        rollout,
        slots,
        spare,
    } = facts;
    let current = &view.current;
    let paused = view.pause.holds();
    let verdicts = &rollout.verdicts;
    let mut events = leavers.events;
    problems.extend(lone_witnesses(view, target, &rollout));
    let counts = Counts::of(verdicts.values().map(|v| v.reported_state()));
    let total = members.names.len();
    let standings = target.map_or_else(Standings::default, |t| {
        decide(
            view,
            t,
            members,
            (&leavers.not_back, &rollout),
            slots,
            spare.standings,
        )
    });
    problems.extend(daemons_down(&standings));
    let degraded_cond = degraded(&rollout, members, current, &mut problems, &mut events);
    let slotted = if paused {
        Vec::new()
    } else {
        standings.names(Standing::in_slot)
    };
    let message = breakdown(
        &counts,
        total,
        Waits {
            slotted: &slotted,
            standings: &standings,
            not_back: &leavers.not_back,
            waiting_for_budget: rollout.waiting_for_budget.as_deref(),
            waiting_for_turn: rollout.waiting_for_turn.as_ref(),
            batch: rollout.batch.message(),
            no_slots: slots == 0,
        },
    );
    let message = before_a_target(target, total).unwrap_or(message);
    let done = target.is_some() && counts.updated == total;
    let up_to_date = up_to_date(
        done,
        Holding {
            fleet_stop: rollout.fleet_stop.as_deref(),
            deleting: rollout.deleting,
            pause: view.pause,
            dependencies: &rollout.dependencies,
            window: rollout.window,
            gate: &rollout.gate,
            held_by_pause: &standings.names(|s| *s == Standing::HeldByPause),
            held_by_fleet: &standings.names(|s| *s == Standing::HeldByFleetStop),
            slotted: !slotted.is_empty(),
        },
        message,
    );

    let all_run_target = target.is_some() && total > 0 && verdicts.values().all(|v| v.runs_target);
    let mut status = new_status(
        view,
        target,
        all_run_target,
        &counts,
        total,
        &up_to_date,
        &degraded_cond,
    );
    keep_records(view, (target, total, counts.updated), &rollout, &mut status);
    let waiting_for_window = !done && !paused;
    let opens = rollout.window.opens().map(Time);
    status.next_maintenance_window = opens.filter(|_| waiting_for_window);
    if let Some(t) = target {
        events.extend(milestones(current, t, total, counts.updated, slots, paused));
    }
    let gated = !rollout.gate.is_open()
        || standings
            .members
            .values()
            .any(|s| matches!(s, Standing::BlockingPod { .. }));
    let mut requeue_after = look_again(view, &rollout, waiting_for_window, gated);
    let status = coalesce(view, status, &mut requeue_after);
    Plan {
        writes,
        events,
        status,
        requeue_after,
        phases: verdicts
            .iter()
            .filter_map(|e| e.verdict.phase.map(|p| (e.name.to_owned(), p)))
            .collect(),
        summary: summary(&rollout, (slots, paused), standings, spare.states),
    }
}

/// What the plan saw, for the metrics: each member's state written into
/// `states` (the last plan's map, refilled).
fn summary(
    rollout: &Rollout<'_>,
    (slots, paused): (usize, bool),
    standings: Standings,
    mut states: BTreeMap<String, NodeState>,
) -> Summary {
    let verdicts = &rollout.verdicts;
    verdicts.refill(&mut states, |e| e.verdict.reported_state());
    Summary {
        states,
        draining: rollout.names(|v| v.draining).into_iter().collect(),
        slots,
        slots_in_use: verdicts.values().filter(|v| v.owned.in_slot).count(),
        halted: rollout.halted,
        paused,
        standings,
    }
}

/// Every member's standing ([`standing::decide`]), with the pool's facts
/// they are rendered with.
fn decide(
    view: &View<'_>,
    target: &Target,
    members: &Membership<'_>,
    (not_back, rollout): (&[String], &Rollout<'_>),
    slots: usize,
    spare: BTreeMap<String, Standing>,
) -> Standings {
    let spec = &view.pool.spec.rollout;
    let groups = crate::holds::groups::Groups::read(&spec.order).unwrap_or_default();
    let pool = standing::Pool {
        name: view.pool_name.clone(),
        target: target_summary(target, &view.input.bootc_nodes),
        max_concurrent_staging: spec
            .max_concurrent_staging
            .and_then(|n| usize::try_from(n).ok()),
        stage_ahead: spec.stage_ahead.and_then(|n| usize::try_from(n).ok()),
        staging_now: rollout.names(|v| v.state == NodeState::Staging),
        unhealthy_in_slots: rollout.unhealthy_in_slots.clone(),
        dependencies: rollout.dependencies.clone(),
        groups: (0..spec.order.len()).map(|g| groups.name(g)).collect(),
        turn: rollout.waiting_for_turn.clone(),
        batch: rollout.batch.message(),
        gate: rollout.gate.clone(),
        window: rollout.window,
        pause: view.pause,
        fleet_stop: rollout.fleet_stop.clone(),
        max_unavailable: max_unavailable_text(&spec.max_unavailable),
        slots,
        holders: rollout
            .verdicts
            .iter()
            .filter(|e| e.verdict.owned.in_slot)
            .map(|e| (e.name.to_owned(), e.verdict.daemon_phase))
            .collect(),
        not_back: not_back.to_vec(),
        unavailable: rollout
            .verdicts
            .iter()
            .filter(|e| !e.verdict.owned.in_slot)
            .filter_map(|e| Some((e.name.to_owned(), e.verdict.unavailable?)))
            .collect(),
    };
    standing::decide(
        pool,
        target,
        rollout,
        &members.conflicts,
        &view.input.gates,
        spare,
    )
}

/// The members whose daemon pod cannot run: one problem naming each node
/// and its pod's reason.
fn daemons_down(standings: &Standings) -> Option<Problem> {
    let down: Vec<String> = standings
        .members
        .iter()
        .filter_map(|(name, s)| match s {
            Standing::DaemonDown { pod } => Some(format!("{name} ({pod})")),
            _ => None,
        })
        .collect();
    (!down.is_empty()).then(|| {
        (
            Reason::DaemonNotRunning,
            format!(
                "the bootc-daemon pod cannot run on {} nodes, which are asked nothing until it does: {}",
                down.len(),
                down.join("; ")
            ),
        )
    })
}

/// `maxUnavailable` as the pool spells it.
fn max_unavailable_text(max: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> String {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match max {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// The UpToDate message of members before any target (it does not resolve
/// yet): counted, and none is told an image.
fn before_a_target(target: Option<&Target>, total: usize) -> Option<String> {
    (target.is_none() && total > 0).then(|| {
        format!("0/{total} updated; {total} members wait for a target image (Degraded says why)")
    })
}

/// What the status keeps beyond this plan: a member newly failed on the
/// target first in `status.failedImages`, the canary step, the rollouts
/// ([`crate::members::history`]); `members` and `updated` count the pool's members.
fn keep_records(
    view: &View<'_>,
    (target, members, updated): (Option<&Target>, usize, usize),
    rollout: &Rollout<'_>,
    status: &mut BootcNodePoolStatus,
) {
    status.batch.clone_from(&rollout.batch.status);
    status.dependencies.clone_from(&rollout.dependencies.found);
    let Some(t) = target else {
        return;
    };
    let seen = crate::members::history::Seen {
        target: t,
        members,
        updated,
        failed: rollout.target_failed.is_some(),
        now: view.input.now,
    };
    status.rollouts = crate::members::history::record(&status.rollouts, seen);
    if let Some(f) = rollout.target_failed.as_ref().filter(|f| f.new) {
        let record = api::FailedImage {
            reference: view.pool.spec.image.reference.clone(),
            digest: t.digest.clone(),
            node: f.node.clone(),
            check: f.check.clone(),
            at: Time(view.input.now),
        };
        status.failed_images =
            crate::reboot::health_gate::with_failure(&status.failed_images, record);
    }
}

/// When to plan the pool again without an event: the members' own
/// instants, the end of a `pausedUntil` and, while members are behind the
/// target (not paused), the next change of the maintenance windows or
/// blackouts and the gates' next question while one holds them.
fn look_again(
    view: &View<'_>,
    rollout: &Rollout<'_>,
    behind: bool,
    gated: bool,
) -> Option<Duration> {
    let now = view.input.now;
    let mut requeue_after = None;
    for v in rollout.verdicts.values() {
        requeue(&mut requeue_after, v.requeue_at(now));
    }
    // `pausedUntil` ends by itself: the pool goes on with no write.
    let instants = [
        view.pause.ends(),
        rollout.window.changes_at().filter(|_| behind),
    ];
    for at in instants.into_iter().flatten() {
        requeue(
            &mut requeue_after,
            Some(at.duration_since(now).unsigned_abs()),
        );
    }
    if behind && gated {
        requeue(&mut requeue_after, Some(GATE_RECHECK));
    }
    requeue(&mut requeue_after, rollout.batch.soak_left);
    requeue_after
}

/// The members that failed on the target too few to fail it for the pool,
/// as the pool names them ([`crate::reboot::health_gate::lone_witnesses`]).
fn lone_witnesses(
    view: &View<'_>,
    target: Option<&Target>,
    rollout: &Rollout<'_>,
) -> Option<Problem> {
    let t = target.filter(|_| !rollout.lone_witnesses.is_empty())?;
    Some(crate::reboot::health_gate::lone_witnesses(
        view.pool,
        t,
        &rollout.lone_witnesses,
    ))
}

/// The Degraded condition from every problem: those of the earlier steps
/// (`problems`), then the halt, conflicts, stuck nodes, failed drains and
/// Degraded nodes; with the halt's and stuck nodes' events.
fn degraded(
    rollout: &Rollout<'_>,
    members: &Membership<'_>,
    current: &BootcNodePoolStatus,
    problems: &mut Vec<Problem>,
    events: &mut Vec<PlannedEvent>,
) -> ConditionUpdate {
    let verdicts = &rollout.verdicts;
    if rollout.halted {
        halt::report(&rollout.unhealthy_in_slots, current, problems, events);
    }
    if let Some(failure) = &rollout.target_failed {
        report_failure(rollout, failure, problems, events);
    }

    if let Some(failed) = rollout.batch.failure() {
        problems.push((Reason::BatchFailed, failed));
    }
    problems.extend(members.conflict_problem());
    let stuck: Vec<&Stuck> = verdicts.values().filter_map(|v| v.stuck.as_ref()).collect();
    report_stuck(&stuck, current, problems, events);
    let drain_failures: Vec<&str> = verdicts
        .values()
        .filter_map(|v| v.waits().drain_failure.as_deref())
        .collect();
    if !drain_failures.is_empty() {
        problems.push((Reason::DrainTimedOut, drain_failures.join("; ")));
    }
    let skipped: Vec<&str> = verdicts
        .values()
        .filter_map(|v| v.owned.skipped.as_ref().map(|(_, why)| why.as_str()))
        .collect();
    if !skipped.is_empty() {
        problems.push((
            Reason::DrainTimedOut,
            format!(
                "skipped for this target after their drain failed (spec.rollout.onDrainTimeout: Release; `kubectl bootc retry NODE` drains one again): {}",
                skipped.join("; ")
            ),
        ));
    }
    let refused: Vec<(&str, &[String])> = rollout
        .verdicts
        .iter()
        .filter(|e| !e.verdict.waits().host_updaters.is_empty())
        .map(|e| (e.name, e.verdict.waits().host_updaters.as_slice()))
        .collect();
    problems.extend(updaters::problem(&refused));
    let incompatible: Vec<String> = rollout
        .verdicts
        .iter()
        .filter_map(|e| {
            Some(format!(
                "node {}: {}",
                e.name,
                e.verdict.waits().host_incompatible.as_ref()?
            ))
        })
        .collect();
    if !incompatible.is_empty() {
        problems.push((Reason::HostIncompatible, incompatible.join("; ")));
    }
    let skewed: Vec<(&str, &api::daemon_contract::DaemonSkew)> = rollout
        .verdicts
        .iter()
        .filter(|e| !e.verdict.runs_target)
        .filter_map(|e| Some((e.name, e.verdict.daemon_skew.as_ref()?)))
        .collect();
    problems.extend(daemons::problems(&skewed));
    let degraded = rollout.names(|v| v.state == NodeState::Degraded);
    if !degraded.is_empty() {
        problems.push((
            Reason::NodeDegraded,
            format!("degraded nodes: {}", degraded.join(", ")),
        ));
    }
    degraded_condition(problems)
}

/// A member failed its health gate on the target: the pool is Degraded,
/// `RolledBack` while the node goes or went back to what it ran before,
/// else `HealthCheckFailed`; a new failure gets one Warning Event.
fn report_failure(
    rollout: &Rollout<'_>,
    failure: &Failure,
    problems: &mut Vec<Problem>,
    events: &mut Vec<PlannedEvent>,
) {
    let Failure { node, check, new } = failure;
    let v = rollout.verdicts.get(node);
    let (reason, after) = match v {
        Some(v) if v.rolling_back => (Reason::RolledBack, "it is booting the image it ran before"),
        Some(v) if !v.runs_target && !v.owned.in_slot => (
            Reason::RolledBack,
            "it was booted back into the image it ran before",
        ),
        Some(v) if v.no_rollback => (
            Reason::HealthCheckFailed,
            "bootc reports no image it ran before with its digest: it stays in its reboot slot",
        ),
        _ => (
            Reason::HealthCheckFailed,
            "it stays in its reboot slot, cordoned, for a person to look at",
        ),
    };
    let message = format!(
        "node {node} failed its health gate on the target (spec.health): {check}; {after}; no node is given this image (a new one, or `kubectl bootc retry POOL` or `kubectl bootc retry {node}`, clears it)"
    );
    if *new {
        events.push(PlannedEvent {
            reason: event_reasons::HEALTH_CHECK_FAILED,
            message: message.clone(),
            warning: true,
            node: Some(node.clone()),
        });
    }
    problems.push((reason, message));
}

/// What holds new slots back, for the UpToDate condition.
struct Holding<'a> {
    /// The fleet's switch, while on (who and why).
    fleet_stop: Option<&'a str>,
    /// The pool is being deleted, its slots finishing.
    deleting: bool,
    pause: Pause,
    dependencies: &'a Waiting,
    window: Window,
    gate: &'a Gate,
    /// The nodes a pause holds cordoned in their slots.
    held_by_pause: &'a [String],
    /// The nodes the fleet's switch holds cordoned in their slots.
    held_by_fleet: &'a [String],
    /// Some nodes are in reboot slots.
    slotted: bool,
}

/// The UpToDate condition: every member on the target, paused (naming the
/// nodes a pause holds cordoned), waiting for the pools it depends on,
/// outside the maintenance windows (saying when the next opens), held by a
/// gate (firing alerts, or a gate that could not be asked) or in progress.
fn up_to_date(done: bool, holding: Holding<'_>, breakdown: String) -> ConditionUpdate {
    if holding.deleting {
        ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::PoolDeleting,
            format!(
                "{breakdown}; the pool is being deleted (spec.onDelete: Finish), no new reboot slot{}, then every node leaves the pool",
                finishing(holding.slotted)
            ),
        )
    } else if done {
        ConditionUpdate::new(ConditionType::UpToDate, true, Reason::AllUpdated, breakdown)
    } else if let Some(why) = holding.fleet_stop {
        ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::FleetStopped,
            format!(
                "{breakdown}; the fleet is stopped ({}: {why}), no new reboot slot until `kubectl bootc resume --all`{}",
                api::labels::FLEET_STOP_ANNOTATION,
                if holding.held_by_fleet.is_empty() {
                    finishing(holding.slotted).to_owned()
                } else {
                    let held = holding.held_by_fleet.join(", ");
                    format!("; held cordoned in reboot slots, not approved to boot: {held}")
                }
            ),
        )
    } else if holding.pause.holds() {
        // A pause holds the slots it finds: say which nodes stay cordoned.
        let (reason, until) = match holding.pause.ends() {
            Some(at) => (Reason::PausedUntil, format!("until {at}")),
            None => (Reason::Paused, "until resumed".to_owned()),
        };
        let message = if holding.held_by_pause.is_empty() {
            match holding.pause.ends() {
                Some(at) => format!("{breakdown}; paused until {at} (spec.rollout.pausedUntil)"),
                None => breakdown,
            }
        } else {
            format!(
                "{breakdown}; held cordoned in reboot slots {until}: {}",
                holding.held_by_pause.join(", ")
            )
        };
        ConditionUpdate::new(ConditionType::UpToDate, false, reason, message)
    } else if !holding.dependencies.is_met() {
        ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::WaitingForDependencies,
            format!("{breakdown}; {}", holding.dependencies.message()),
        )
    } else if let Window::Blackout { ends, opens } = holding.window {
        let next = match (ends, opens) {
            (Some(ends), Some(opens)) => format!("it ends at {ends}, new slots from {opens}"),
            (Some(ends), None) => format!("it ends at {ends}"),
            (None, _) => "a blackout cannot be read (see Degraded)".to_owned(),
        };
        ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::Blackout,
            format!(
                "{breakdown}; in a blackout (spec.rollout.blackouts), no new reboot slot: {next}{}",
                finishing(holding.slotted)
            ),
        )
    } else if let Window::Closed { opens } = holding.window {
        let next = match opens {
            Some(at) => format!("the next opens at {at}"),
            None => "a window cannot be read (see Degraded)".to_owned(),
        };
        ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::OutsideMaintenanceWindow,
            format!(
                "{breakdown}; outside the maintenance windows, no new reboot slot: {next}{}",
                finishing(holding.slotted)
            ),
        )
    } else if !holding.gate.is_open() {
        let reason = match holding.gate {
            Gate::AlertsFiring(_) => Reason::AlertFiring,
            _ => Reason::GateUnanswered,
        };
        let message = format!("{breakdown}; {}", holding.gate.message());
        ConditionUpdate::new(ConditionType::UpToDate, false, reason, message)
    } else {
        ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::RolloutInProgress,
            breakdown,
        )
    }
}

/// What a closed window or a blackout says of the nodes in slots.
fn finishing(slotted: bool) -> &'static str {
    if slotted {
        "; the nodes in reboot slots finish"
    } else {
        ""
    }
}

/// The pool's status after this plan.
fn new_status(
    view: &View<'_>,
    target: Option<&Target>,
    all_run_target: bool,
    counts: &Counts,
    total: usize,
    up_to_date: &ConditionUpdate,
    degraded: &ConditionUpdate,
) -> BootcNodePoolStatus {
    let generation = view.pool.metadata.generation;
    let mut status = view.current.clone();
    status.observed_generation = generation;
    status.target_digest = target.map(|t| t.digest.clone());
    status.target_image = target.map(|t| t.image.clone());
    status.target_platform_digests = target.map_or_else(Vec::new, |t| t.platform_digests.clone());
    status.target_kubelet_version = target.and_then(|t| t.kubelet.clone());
    status.target_summary = target.map(|t| target_summary(t, &view.input.bootc_nodes));
    if all_run_target && let Some(t) = target {
        status.deployed_digest = Some(t.digest.clone());
    }
    // An empty pool has nothing to update, whatever it last deployed.
    status.update_available = total > 0
        && status.target_digest.is_some()
        && status.target_digest != status.deployed_digest;
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    status.node_count = count(total);
    status.updated_count = count(counts.updated);
    status.updating_count =
        count(counts.staging + counts.staged + counts.rebooting + counts.pending);
    status.degraded_count = count(counts.degraded);
    let now = Time(view.input.now);
    conditions::apply(&mut status.conditions, up_to_date, generation, &now);
    conditions::apply(&mut status.conditions, degraded, generation, &now);
    for c in crate::kstatus::kstatus_conditions(up_to_date, degraded) {
        conditions::apply(&mut status.conditions, &c, generation, &now);
    }
    if let Some(t) = target {
        let kubelet = crate::holds::os_guard::kubelet_condition(t.kubelet.as_deref());
        conditions::apply(&mut status.conditions, &kubelet, generation, &now);
    }
    status
}

/// The status to write now, if it changed: a change of the counts alone
/// within [`COUNTS_MIN_INTERVAL`] of the last write waits for the requeue.
fn coalesce(
    view: &View<'_>,
    status: BootcNodePoolStatus,
    requeue_after: &mut Option<Duration>,
) -> Option<BootcNodePoolStatus> {
    let current = &view.current;
    if status == *current {
        return None;
    }
    let input = view.input;
    let since_last = input
        .last_status_write
        .map(|at| input.now.duration_since(at).unsigned_abs());
    match since_last {
        Some(since) if since < COUNTS_MIN_INTERVAL && counts_only(current, &status) => {
            // Coalesced with the changes to come; written by the requeue.
            requeue(
                requeue_after,
                Some(COUNTS_MIN_INTERVAL.saturating_sub(since)),
            );
            None
        }
        _ => Some(status),
    }
}

/// Stuck nodes go on the pool's Degraded condition, and each one newly
/// stuck in its phase gets one Warning Event.
fn report_stuck(
    stuck_nodes: &[&Stuck],
    current: &BootcNodePoolStatus,
    problems: &mut Vec<Problem>,
    events: &mut Vec<PlannedEvent>,
) {
    if stuck_nodes.is_empty() {
        return;
    }
    let reported = conditions::message(&current.conditions, ConditionType::Degraded).unwrap_or("");
    for s in stuck_nodes {
        if !reported.contains(&s.key()) {
            events.push(PlannedEvent {
                reason: event_reasons::NODE_STUCK,
                message: s.message(),
                warning: true,
                node: Some(s.node.clone()),
            });
        }
    }
    let messages: Vec<String> = stuck_nodes.iter().map(|s| s.message()).collect();
    problems.push((Reason::NodeStuck, messages.join("; ")));
}

/// The target as a person reads it: the version label bootc reports for it
/// (from a node that runs it) and the digest's first 12 hex digits.
pub fn target_summary(target: &Target, bootc_nodes: &[&BootcNode]) -> String {
    let short: String = target.digest.chars().take("sha256:".len() + 12).collect();
    // The version first: it is cheaper to ask, and often absent everywhere.
    let version = bootc_nodes.iter().find_map(|bn| {
        let version = bn.status.as_ref()?.booted.as_ref()?.version.as_ref()?;
        runs_target(bn, target).then(|| version.clone())
    });
    match version {
        Some(v) => format!("{v} ({short})"),
        None => short,
    }
}

/// The Degraded condition: the most important problem's reason, and every
/// problem's message.
fn degraded_condition(problems: &mut [Problem]) -> ConditionUpdate {
    let rank = |r: Reason| match r {
        Reason::InvalidSpec => 0,
        // Before the registry's refusal it causes.
        Reason::PullSecretNotFound | Reason::PullSecretNotAllowed | Reason::InvalidPullSecret => 1,
        Reason::NodeConflict => 3,
        Reason::RolloutHalted | Reason::DependencyCycle => 4,
        Reason::RolledBack | Reason::HealthCheckFailed | Reason::BatchFailed => 4,
        Reason::NodeStuck | Reason::DaemonNotRunning => 5,
        Reason::DrainTimedOut
        | Reason::HostUpdaterEnabled
        | Reason::HostIncompatible
        | Reason::DaemonTooOld
        | Reason::DaemonTooNew => 6,
        Reason::NodeDegraded => 7,
        _ => 2,
    };
    problems.sort_by_key(|(r, _)| rank(*r));
    match problems.first() {
        Some((reason, _)) => {
            let message: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
            ConditionUpdate::new(ConditionType::Degraded, true, *reason, message.join("; "))
        }
        None => ConditionUpdate::new(ConditionType::Degraded, false, Reason::Healthy, "no issues"),
    }
}

/// What the rollout waits on, for the breakdown.
struct Waits<'a> {
    /// The nodes in reboot slots (a pause names them its own way).
    slotted: &'a [String],
    /// Where each member stands: the holds of its own it is named with.
    standings: &'a Standings,
    /// Nodes that left mid-reboot.
    not_back: &'a [String],
    /// The pool's own unavailable nodes, when they use the budget up.
    waiting_for_budget: Option<&'a str>,
    /// The group whose turn it is, and its members behind, when members of
    /// later groups wait for it.
    waiting_for_turn: Option<&'a (String, Vec<String>)>,
    /// The canary step ([`crate::holds::batches`]).
    batch: Option<String>,
    /// `maxUnavailable` is 0.
    no_slots: bool,
}

/// The members named for a hold of their own, from their standings:
/// held, on a blocking pod, draining against a PodDisruptionBudget,
/// proving the target.
#[derive(Default)]
struct Named {
    held: Vec<String>,
    blocked: Vec<String>,
    drains_blocked: Vec<String>,
    proving: Vec<String>,
}

impl Named {
    fn of(standings: &Standings) -> Self {
        let mut named = Named::default();
        for (name, s) in &standings.members {
            match s {
                Standing::Held { .. } => named.held.push(name.clone()),
                Standing::BlockingPod { pod } => named.blocked.push(format!("{name} ({pod})")),
                Standing::Draining {
                    blocked: Some(b), ..
                } => named.drains_blocked.push(b.clone()),
                Standing::Proving { waiting } => named.proving.push(format!("{name}: {waiting}")),
                _ => {}
            }
        }
        named
    }
}

/// "5/10 updated; 2 staging, 2 staged, 1 rebooting" and what the rollout
/// waits on ([`Waits`]).
fn breakdown(counts: &Counts, total: usize, waits: Waits<'_>) -> String {
    let Waits {
        slotted,
        standings,
        not_back,
        waiting_for_budget,
        waiting_for_turn,
        batch,
        no_slots,
    } = waits;
    let Named {
        held,
        blocked,
        drains_blocked,
        proving,
    } = Named::of(standings);
    if total == 0 {
        return "0 nodes: no node is a member (none matches spec.nodeSelector, or each one that does is in conflict)".to_owned();
    }
    let mut s = format!(
        "{}/{} updated; {} staging, {} staged, {} rebooting",
        counts.updated, total, counts.staging, counts.staged, counts.rebooting
    );
    if counts.pending > 0 {
        s.push_str(&format!(", {} pending", counts.pending));
    }
    if counts.degraded > 0 {
        s.push_str(&format!(", {} degraded", counts.degraded));
    }
    if !slotted.is_empty() {
        s.push_str(&format!("; in reboot slots: {}", slotted.join(", ")));
    }
    if !held.is_empty() {
        s.push_str(&format!(
            "; {} held by {HOLD_ANNOTATION_PREFIX}<who> annotations, given no reboot slot: {}",
            held.len(),
            held.join(", ")
        ));
    }
    if !blocked.is_empty() {
        s.push_str(&format!(
            "; {} run blocking pods ({BLOCKING_PODS_FIELD}), given no reboot slot: {}",
            blocked.len(),
            blocked.join(", ")
        ));
    }
    if !not_back.is_empty() {
        s.push_str(&format!(
            "; left the pool, leaving once back from their reboot: {}",
            not_back.join(", ")
        ));
    }
    if let Some(others) = waiting_for_budget {
        s.push_str(&format!(
            "; no new reboot slot while these nodes are unavailable: {others}"
        ));
    }
    if !drains_blocked.is_empty() {
        s.push_str(&format!(
            "; draining, an eviction refused by a PodDisruptionBudget (retrying): {}",
            drains_blocked.join("; ")
        ));
    }
    if let Some(batch) = batch {
        s.push_str(&format!("; {batch}"));
    }
    if !proving.is_empty() {
        s.push_str(&format!(
            "; proving the target (spec.health), in their reboot slots: {}",
            proving.join("; ")
        ));
    }
    if let Some((group, behind)) = waiting_for_turn {
        s.push_str(&format!(
            "; later groups wait for the turn of {group}, whose nodes not yet on the target are: {}",
            behind.join(", ")
        ));
    }
    if no_slots && counts.updated < total {
        s.push_str("; maxUnavailable is 0: members stage, none is given a reboot slot");
    }
    s
}

/// The pool's Normal events: a rollout starts when the pool adopts a target
/// that some members do not run, and is complete when they all do.
fn milestones(
    current: &BootcNodePoolStatus,
    target: &Target,
    total: usize,
    updated: usize,
    slots: usize,
    paused: bool,
) -> Option<PlannedEvent> {
    let adopted_now = current.target_digest.as_deref() != Some(target.digest.as_str());
    let behind = total.saturating_sub(updated);
    if adopted_now && behind > 0 {
        return Some(PlannedEvent {
            reason: event_reasons::ROLLOUT_STARTED,
            message: format!(
                "rolling out {} to {behind} of {total} nodes, at most {slots} at a time{}",
                target.image,
                if paused { " (paused)" } else { "" }
            ),
            warning: false,
            node: None,
        });
    }
    let was_complete = conditions::reason(&current.conditions, ConditionType::UpToDate)
        == Some(Reason::AllUpdated.as_str());
    // A pool seen for the first time already up to date rolled nothing out.
    let rolled = current.target_digest.is_some() && !was_complete;
    (total > 0 && behind == 0 && rolled).then(|| PlannedEvent {
        reason: event_reasons::ROLLOUT_COMPLETE,
        message: format!("all {total} nodes run {}", target.image),
        warning: false,
        node: None,
    })
}

/// Do `old` and `new` differ only in the node counts and the UpToDate
/// message that spells them out (same status and reason)?
fn counts_only(old: &BootcNodePoolStatus, new: &BootcNodePoolStatus) -> bool {
    let strip = |s: &BootcNodePoolStatus| {
        let mut s = s.clone();
        s.node_count = 0;
        s.updated_count = 0;
        s.updating_count = 0;
        s.degraded_count = 0;
        // Ready and Reconciling copy UpToDate's message (crate::kstatus).
        for c in &mut s.conditions {
            if [
                ConditionType::UpToDate,
                ConditionType::Ready,
                ConditionType::Reconciling,
            ]
            .map(ConditionType::as_str)
            .contains(&c.type_.as_str())
            {
                c.message = Default::default();
            }
        }
        s
    };
    strip(old) == strip(new)
}
