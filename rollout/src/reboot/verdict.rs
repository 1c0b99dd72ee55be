//! Step 5, each member's verdict: what one plan decides for each member,
//! from its own Node, BootcNode and drain and the pool-wide facts (target,
//! told set, pool spec, time). A slot holder is released once back
//! ([`super::slots`]) or held: kept cordoned and drained, approved to boot
//! once drained and staged (not while paused, nor while the fleet's switch
//! holds approvals), and counted for the
//! unhealthy halt ([`crate::holds::halt`]). A member outside a slot is not
//! approved, its drain stops, and, staged and healthy, it is a candidate
//! for a free slot (handed out by `slots::hand_out`) unless held; a hold
//! releases a holder not yet approved to boot. Each
//! member's phase is timed for the stuck deadlines ([`crate::reboot::stuck`]).
//!
//! A failed drain is reported and tried again after [`DRAIN_RETRY`]. A
//! pause holds the slots it finds: a holder drained but not yet approved
//! stays cordoned until the resume (the `UpToDate/Paused` message names it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use api::Node;
use api::labels::MANAGED_LABEL;
use api::{BootcNode, DesiredImageState, DrainTimeoutPolicy, HealthFailurePolicy, HealthSpec};
use kube_core::ResourceExt;

use crate::holds::budget::Limits;
use crate::holds::disruption::{self, Budget, Unavailable};
use crate::members::leaving::Leavers;
use crate::members::membership::Membership;
use crate::members::pull_secret::Secret;
use crate::members::state::{self, NodeState, classify, runs_target};
use crate::model::{DrainPhase, NodePatch, Target, Write};
use crate::reboot::health_gate::{self, Proof};
use crate::reboot::stuck;
use crate::view::{Row, View, Walk};
use crate::{
    holds::batches, holds::daemons, holds::halt, holds::updaters, members::spec, reboot::cordon,
    reboot::lifecycle, reboot::slots,
};
use jiff::Timestamp;

use crate::facts::{Counted, Decided, Entry, Failure, NodeVerdict, Rollout};
use crate::memo::{Answers, VerdictKey};

/// How long after a failed drain the controller tries again.
pub const DRAIN_RETRY: Duration = Duration::from_secs(60);

/// The pool-wide facts a member's verdict reads.
struct Pool<'v, 'a> {
    view: &'v View<'a>,
    target: &'v Target,
    secret: &'v Secret,
    conflicts: &'v BTreeMap<String, BTreeSet<String>>,
    paused: bool,
    /// The fleet's switch holds approvals too.
    fleet_holds_approvals: bool,
    /// The target failed for the pool: enough members failed their health
    /// gate on it, or a person confirmed it ([`health_gate::fails_for_pool`]):
    /// nobody is told it any more.
    target_failed: bool,
}

/// Every member's verdict, and the budget and halt they add up to.
pub(crate) fn verdicts<'m>(
    view: &View<'m>,
    target: &Target,
    members: &Membership<'m>,
    leavers: &Leavers,
    secret: &Secret,
    limits: Limits,
    memo: &mut Answers,
) -> Rollout<'m> {
    // Told before this plan: who is newly told waits for the budget
    // ([`spec::tell`]).
    let staging = spec::staging_members(view, members, target, memo);
    let marked = failed_members(view, members, target);
    let pool = Pool {
        view,
        target,
        secret,
        conflicts: &members.conflicts,
        paused: view.pause.holds(),
        fleet_holds_approvals: view.input.gates.fleet_holds_approvals,
        target_failed: health_gate::fails_for_pool(view.pool, target, marked.len()),
    };
    let mut out = Rollout {
        budget: Budget::new(limits.slots),
        pause: view.pause,
        ..Rollout::default()
    };
    for name in &leavers.not_back {
        out.budget.hold(name);
    }
    // Members come in name order: each map is walked once, not searched.
    let mut drains = Walk::of(&view.input.drains);
    let mut clock = Walk::of(&view.input.phase_clock);
    let mut conflicts = Walk::of(&members.conflicts);
    for (at, seen) in members.rows.iter().zip(&staging) {
        let (name, row) = view.rows[*at];
        let reads = Reads {
            told: seen.already_told() && !pool.target_failed,
            drain: drains.get(name),
            clock: clock.get(name),
            conflict: conflicts.get(name),
            blocking: view.input.gates.blocking_pod(name),
        };
        let v = memoized(&pool, (*at, name, row), reads, memo);
        match v.counted {
            Some(Counted::Holder) => out.budget.hold(name),
            Some(Counted::Member) => out.budget.member(name, v.unavailable),
            None => {}
        }
        if v.unhealthy_in_slot {
            out.unhealthy_in_slots.push(name.to_owned());
        }
        // Members come in name order: the verdicts stay sorted.
        out.verdicts.push(Entry {
            name,
            row,
            verdict: v,
        });
    }
    out.halted = halt::halted(out.unhealthy_in_slots.len(), limits.max_unhealthy);
    out.staging = staging;
    let witnesses = with_newly_failed(marked, &out, target);
    if health_gate::fails_for_pool(view.pool, target, witnesses.len()) {
        out.target_failed = witnesses.into_iter().next().map(|f| Failure {
            new: !recorded(view, target),
            ..f
        });
    } else {
        out.lone_witnesses = witnesses;
    }
    out
}

/// Has the pool recorded its target as failed (`status.failedImages`)?
fn recorded(view: &View<'_>, target: &Target) -> bool {
    let pool = view.pool;
    pool.status.as_ref().is_some_and(|s| {
        health_gate::recorded_failure(&s.failed_images, &pool.spec.image.reference, target)
            .is_some()
    })
}

/// Where the rollout stands in `spec.rollout.batches` ([`batches`]), from
/// the verdicts; steps that cannot be read hold every new slot.
pub(crate) fn batching(
    view: &View<'_>,
    target: &Target,
    rollout: &Rollout<'_>,
    problems: &mut Vec<crate::model::Problem>,
) -> batches::Batching {
    let spec = &view.pool.spec.rollout;
    if spec.batches.is_empty() {
        return batches::Batching::default();
    }
    let members: Vec<batches::Member<'_>> = rollout
        .verdicts
        .iter()
        .map(|e| batches::Member {
            name: e.name,
            updated: e.verdict.runs_target && !e.verdict.owned.in_slot,
            in_slot: e.verdict.owned.in_slot,
            healthy: e.row.node.is_some_and(api::node_health::is_ready)
                && e.verdict.state != NodeState::Degraded,
        })
        .collect();
    match batches::limits(&spec.batches, members.len()) {
        Ok(limits) => {
            let previous = view.current.batch.as_ref();
            batches::step(
                &limits,
                spec,
                previous,
                &target.digest,
                &members,
                view.input.now,
            )
        }
        Err(e) => {
            problems.push((api::Reason::InvalidSpec, e));
            batches::Batching {
                room: Some(0),
                ..batches::Batching::default()
            }
        }
    }
}

/// The members (by name) marked failed on the target by their health gate
/// before this plan: the mark lives on the BootcNode, which a controller
/// restart does not lose.
fn failed_members(view: &View<'_>, members: &Membership<'_>, target: &Target) -> Vec<Failure> {
    members
        .rows
        .iter()
        .filter_map(|at| {
            let (name, row) = view.rows[*at];
            let (_, check) = row
                .bn
                .filter(|bn| health_gate::failed_on(bn, target))?
                .health_failed()?;
            Some(Failure {
                node: name.to_owned(),
                check: check.to_owned(),
                new: false,
            })
        })
        .collect()
}

/// `marked`, then the members this plan found failed on the target, each
/// node once: the distinct witnesses of the target's failure.
fn with_newly_failed(
    mut marked: Vec<Failure>,
    rollout: &Rollout<'_>,
    target: &Target,
) -> Vec<Failure> {
    for e in rollout.verdicts.iter() {
        let Some((digest, check)) = e.verdict.owned.health_failed.as_ref() else {
            continue;
        };
        if *digest == target.digest && !marked.iter().any(|f| f.node == e.name) {
            marked.push(Failure {
                node: e.name.to_owned(),
                check: check.clone(),
                new: true,
            });
        }
    }
    marked
}

/// What a member's verdict reads besides its objects and the pool's facts.
struct Reads<'m> {
    told: bool,
    drain: Option<&'m DrainPhase>,
    clock: Option<&'m (stuck::Phase, Timestamp)>,
    conflict: Option<&'m BTreeSet<String>>,
    /// The blocking pod on its Node (see [`crate::holds::gates`]).
    blocking: Option<&'m str>,
}

/// One member's verdict, kept from the previous plan when nothing it reads
/// has changed (see [`super::memo`]).
fn memoized(
    pool: &Pool<'_, '_>,
    (at, name, row): (usize, &str, Row<'_>),
    reads: Reads<'_>,
    memo: &mut Answers,
) -> Arc<NodeVerdict> {
    let now = pool.view.input.now;
    let Reads {
        told,
        drain,
        clock,
        conflict,
        blocking,
    } = reads;
    let versions = row.versions;
    if let Some(versions) = versions
        && let Some(v) = memo.verdict(at, |k| {
            k.matches(versions, told, drain, clock, conflict, blocking)
                && k.until.is_none_or(|until| now < until)
        })
    {
        return v;
    }
    memo.computed += 1;
    let v = Arc::new(of(pool, name, row, told));
    match versions.filter(|_| v.keepable) {
        Some(versions) => {
            let key = VerdictKey {
                versions,
                told,
                drain: drain.cloned(),
                clock: clock.cloned(),
                conflict: conflict.cloned(),
                blocking: blocking.map(str::to_owned),
                until: v.recheck_at,
            };
            memo.keep_verdict(at, key, Arc::clone(&v));
        }
        None => memo.forget_verdict(at),
    }
    v
}

/// One member's verdict (see the module docs).
fn of(pool: &Pool<'_, '_>, name: &str, row: Row<'_>, told: bool) -> NodeVerdict {
    let view = pool.view;
    let (node, existing) = (row.node, row.bn);
    let mut owned = spec::desired(view.pool, existing, told, pool.target, pool.secret);
    slots::reclaim(&mut owned, node, &view.pool_name);
    let state = existing.map_or(NodeState::Pending, |bn| classify(bn, pool.target));
    let mut v = NodeVerdict {
        owned,
        applied: None,
        state,
        daemon_phase: existing.and_then(BootcNode::phase),
        runs_target: existing.is_some_and(|bn| runs_target(bn, pool.target)),
        pre: Vec::new(),
        post: Vec::new(),
        counted: None,
        unavailable: node.and_then(Unavailable::of_member),
        unhealthy_in_slot: false,
        candidate: false,
        held: false,
        daemon_skew: daemons::skewed(existing),
        no_rollback: false,
        rolling_back: false,
        held_by_pause: false,
        held_by_fleet_stop: false,
        draining: false,
        waits: None,
        requeue: None,
        phase: None,
        stuck: None,
        recheck_at: None,
        keepable: true,
        decided: Decided::default(),
    };
    let ready = node.is_some_and(api::node_health::is_ready);
    let healthy = ready && state != NodeState::Degraded;
    let in_flight = existing.is_none_or(disruption::reboot_in_flight);
    v.held = node.is_some_and(api::node_health::is_held);
    if let Some(why) = existing.and_then(BootcNode::unmanageable) {
        v.waits_mut().host_incompatible = Some(why);
    }
    if let Some(pod) = view.input.gates.blocking_pod(name) {
        v.waits_mut().blocked_by = Some(pod.to_owned());
    }
    let refusing = updaters::refusing(existing, v.runs_target, v.owned.in_slot);
    if !refusing.is_empty() {
        v.waits_mut().host_updaters = refusing;
    }
    let drain_failed = drain_failure(pool, name);
    let health = view.pool.spec.health.as_ref();
    if !v.owned.in_slot {
        outside_slot(pool, name, node, healthy, &mut v);
    } else if failed_on_target(pool, &v) {
        failed_in_slot(pool, (name, node, existing), healthy && !in_flight, &mut v);
    } else if let Some(health) = health.filter(|_| v.runs_target && !in_flight) {
        prove(pool, (name, node, existing), health, &mut v);
    } else if slots::releasable(v.runs_target, healthy, in_flight) {
        release(pool, name, node, &mut v);
    } else if slots::released_before_boot(
        v.held || drain_failed.is_some(),
        v.owned.approved(),
        v.runs_target,
    ) {
        release(pool, name, node, &mut v);
        if let Some(why) = drain_failed {
            // `onDrainTimeout: Release`: the node is skipped for the target.
            v.owned.skipped = Some((pool.target.digest.clone(), format!("{name}: {why}")));
        }
    } else {
        hold(pool, (name, node, existing), &mut v);
    }
    if let Some(node) = node
        && !node.labels().contains_key(MANAGED_LABEL)
    {
        let label = NodePatch {
            managed: Some(true),
            ..NodePatch::default()
        };
        v.post.insert(
            0,
            Write::PatchNode {
                name: name.to_owned(),
                patch: label,
            },
        );
    }
    withhold_approval(existing, &mut v);
    time_phase(pool, name, node, existing, ready, &mut v);
    v.applied = Some(v.owned.applied(existing));
    // Kept with the verdict: no spare room (a Vec grows by four writes).
    v.pre.shrink_to_fit();
    v.post.shrink_to_fit();
    match v.requeue.map(|d| pool.view.input.now.checked_add(d)) {
        None => {}
        Some(Ok(at)) => v.recheck_at = Some(at),
        Some(Err(_)) => v.keepable = false,
    }
    v
}

/// A daemon this controller does not drive is never approved to boot by
/// it ([`daemons`]), whichever step would approve it (a drained slot
/// holder, a rollback); an approval its BootcNode already carries stands,
/// as the daemon may be applying it.
fn withhold_approval(existing: Option<&BootcNode>, v: &mut NodeVerdict) {
    if v.daemon_skew.is_some() && v.owned.approved() && !existing.is_some_and(BootcNode::approved) {
        v.owned.spec.desired_image_state = DesiredImageState::Staged;
        v.rolling_back = false;
    }
}

/// The failure of the member's drain when the pool releases a node whose
/// drain failed (`spec.rollout.onDrainTimeout: Release`).
fn drain_failure<'p>(pool: &'p Pool<'_, '_>, name: &str) -> Option<&'p str> {
    if pool.view.pool.spec.rollout.on_drain_timeout != DrainTimeoutPolicy::Release {
        return None;
    }
    match pool.view.input.drains.get(name) {
        Some(DrainPhase::Failed { message, .. }) => Some(message),
        _ => None,
    }
}

/// Rule 2: the node is back; its Node is restored (its slot record goes
/// with the uncordon) before its BootcNode's approval is withdrawn.
fn release(pool: &Pool<'_, '_>, name: &str, node: Option<&Node>, v: &mut NodeVerdict) {
    if let Some(node) = node {
        let patch = cordon::release(node, &pool.view.pool_name, v.owned.was_cordoned.as_deref());
        if patch.as_ref().is_none_or(|p| p.unschedulable.is_none()) {
            // Still cordoned (an admin's cordon): unavailable.
            v.counted = Some(Counted::Member);
        }
        if let Some(patch) = patch {
            v.pre.push(Write::PatchNode {
                name: name.to_owned(),
                patch,
            });
        }
        // The slot ends: the pool's lifecycle conditions go back to False,
        // with the flag on or off (it may have been turned off meanwhile).
        v.post
            .extend(lifecycle::write(name, node, lifecycle::Stage::Out));
    }
    v.owned.in_slot = false;
    v.owned.was_cordoned = None;
    v.owned.spec.desired_image_state = DesiredImageState::Staged;
    if pool.view.input.drains.contains_key(name) {
        v.post.push(Write::CancelDrain {
            node: name.to_owned(),
        });
    }
}

/// A slot holder not back yet: counted for the halt; until approved, kept
/// cordoned, recorded and drained, then approved once drained and staged.
fn hold(pool: &Pool<'_, '_>, (name, node, bn): Member<'_>, v: &mut NodeVerdict) {
    v.counted = Some(Counted::Holder);
    let holder = halt::Holder {
        degraded: v.state == NodeState::Degraded,
        ready: node.is_some_and(api::node_health::is_ready),
        // Rebooting into what it is told: the target, or back.
        rebooting: v.owned.approved() && !bn.is_some_and(|bn| bn.runs(&v.owned.spec.desired_image)),
        not_ready_since: node.and_then(state::not_ready_since),
    };
    let (unhealthy, recheck) = halt::unhealthy(holder, pool.view.input.now);
    v.unhealthy_in_slot = unhealthy;
    requeue(&mut v.requeue, recheck);
    if v.owned.approved() || v.runs_target {
        return;
    }
    v.held_by_pause = pool.paused;
    v.held_by_fleet_stop = pool.fleet_holds_approvals;
    if let Some(patch) = node.and_then(|n| cordon::keep(n, &pool.view.pool_name)) {
        v.post.push(Write::PatchNode {
            name: name.to_owned(),
            patch,
        });
    }
    drain_progress(pool, name, v);
}

/// A slot holder's drain, until it is approved to boot.
fn drain_progress(pool: &Pool<'_, '_>, name: &str, v: &mut NodeVerdict) {
    let input = pool.view.input;
    match input.drains.get(name) {
        None => {
            v.draining = true;
            v.post.push(Write::StartDrain {
                node: name.to_owned(),
            });
        }
        Some(DrainPhase::Running) => v.draining = true,
        Some(DrainPhase::Blocked { message }) => {
            v.draining = true;
            v.waits_mut().drain_blocked = Some(format!("{name}: {message}"));
        }
        Some(DrainPhase::Succeeded) => {
            // Drained and staged: approved to boot (a pause, or the
            // fleet's switch with its flag, holds it).
            if v.state == NodeState::Staged && !pool.paused && !pool.fleet_holds_approvals {
                v.owned.spec.desired_image_state = DesiredImageState::Booted;
                v.rolling_back = true;
            }
        }
        Some(DrainPhase::Failed { message, at }) => {
            v.draining = true;
            v.waits_mut().drain_failure = Some(format!("{name}: {message}"));
            let since = input.now.duration_since(*at).unsigned_abs();
            if since >= DRAIN_RETRY {
                v.post.push(Write::StartDrain {
                    node: name.to_owned(),
                });
            } else {
                requeue(&mut v.requeue, Some(DRAIN_RETRY.saturating_sub(since)));
            }
        }
    }
}

/// A member's name, Node and BootcNode.
type Member<'a> = (&'a str, Option<&'a Node>, Option<&'a BootcNode>);

/// Is the member marked failed on the target by its health gate?
fn failed_on_target(pool: &Pool<'_, '_>, v: &NodeVerdict) -> bool {
    v.owned
        .health_failed
        .as_ref()
        .is_some_and(|(digest, _)| *digest == pool.target.digest)
}

/// A slot holder back on the target, before the health gate
/// ([`proving`]): released once it passes, held while it settles, failed
/// for the target past the timeout.
fn prove(pool: &Pool<'_, '_>, member: Member<'_>, health: &HealthSpec, v: &mut NodeVerdict) {
    let (name, node, bn) = member;
    let (Some(n), Some(b)) = (node, bn) else {
        return hold(pool, member, v);
    };
    let input = pool.view.input;
    let checked = health_gate::check(health, n, b, input.gates.health_pods_on(name));
    // Pods and the clock decide: asked again at every plan.
    v.keepable = false;
    match health_gate::assess(health, &checked, b.phase_since(), input.now) {
        Proof::Passed => release(pool, name, node, v),
        Proof::Settling { waiting, recheck } => {
            v.waits_mut().proving = Some(waiting);
            requeue(&mut v.requeue, Some(recheck));
            hold(pool, member, v);
        }
        Proof::Failed { check } => {
            v.owned.health_failed = Some((pool.target.digest.clone(), check));
            failed_in_slot(pool, member, false, v);
        }
    }
}

/// A slot holder failed on the target by its health gate: under
/// `onFailure: Rollback` approved to boot the image it ran before, and
/// released once it runs it (`back`: Ready, not Degraded, no reboot in
/// flight); under `Halt` kept in its slot for a person.
fn failed_in_slot(pool: &Pool<'_, '_>, member: Member<'_>, back: bool, v: &mut NodeVerdict) {
    let (name, node, bn) = member;
    let rolls_back = pool
        .view
        .pool
        .spec
        .health
        .as_ref()
        .is_some_and(|h| h.on_failure == HealthFailurePolicy::Rollback);
    v.keepable = false;
    if rolls_back && let Some(bn) = bn {
        match health_gate::back_to(bn, pool.target) {
            Some(image) => {
                spec::point_at(&mut v.owned, image);
                // Released only once the image failed for the pool: until
                // then the node keeps its slot, the only witness.
                if back && pool.target_failed && bn.runs(&v.owned.spec.desired_image) {
                    return release(pool, name, node, v);
                }
                v.owned.spec.desired_image_state = DesiredImageState::Booted;
                v.rolling_back = true;
            }
            None => v.no_rollback = true,
        }
    }
    hold(pool, member, v);
}

/// A member outside any slot: approval belongs to a slot, its drain stops,
/// and staged and healthy it is a candidate (rule 1).
fn outside_slot(
    pool: &Pool<'_, '_>,
    name: &str,
    node: Option<&Node>,
    healthy: bool,
    v: &mut NodeVerdict,
) {
    if node.is_some() {
        v.counted = Some(Counted::Member);
    }
    v.owned.spec.desired_image_state = DesiredImageState::Staged;
    if pool.view.input.drains.contains_key(name) {
        v.post.push(Write::CancelDrain {
            node: name.to_owned(),
        });
    }
    let deleting = node.is_some_and(|n| n.metadata.deletion_timestamp.is_some());
    let in_conflict = pool.conflicts.contains_key(name);
    let staged = v.state == NodeState::Staged;
    let held_back = v.held
        || v.waits().blocked_by.is_some()
        || !v.waits().host_updaters.is_empty()
        || v.waits().host_incompatible.is_some()
        || v.daemon_skew.is_some()
        || v.owned.skipped.is_some()
        || v.owned.health_failed.is_some();
    v.candidate = slots::candidate(staged, healthy, deleting, in_conflict, held_back);
}

/// Times the member's phase (see [`stuck`]): past its deadline it is stuck;
/// before, the pool is looked at again when it would be.
fn time_phase(
    pool: &Pool<'_, '_>,
    name: &str,
    node: Option<&Node>,
    existing: Option<&BootcNode>,
    ready: bool,
    v: &mut NodeVerdict,
) {
    let input = pool.view.input;
    let facts = stuck::Facts {
        in_slot: v.owned.in_slot,
        approved: v.owned.approved(),
        ready,
        runs_target: v.runs_target,
        degraded: v.state == NodeState::Degraded,
        staging: v.state == NodeState::Staging,
        daemon_behind: existing.is_some_and(BootcNode::daemon_behind),
    };
    let Some(phase) = stuck::phase_of(facts) else {
        return;
    };
    v.phase = Some(phase);
    let first_seen = match input.phase_clock.get(name) {
        Some((seen, since)) if *seen == phase => Some(*since),
        _ => None,
    };
    let on_node = node
        .filter(|_| phase.on_the_node())
        .and_then(state::not_ready_since);
    // The earlier of the two (see `stuck`): either may be missing.
    let since = first_seen.into_iter().chain(on_node).min();
    // Timed from now, the answer moves with the clock: not kept.
    v.keepable &= since.is_some();
    let deadlines = (input.deadlines).for_pool(input.pool.spec.rollout.deadlines.as_ref());
    match stuck::assess(
        deadlines,
        name,
        phase,
        since.unwrap_or(input.now),
        input.now,
    ) {
        Ok(s) => {
            v.keepable = false;
            v.stuck = Some(s);
        }
        Err(left) => requeue(&mut v.requeue, Some(left)),
    }
}

/// Keeps the sooner of two requeues.
pub(crate) fn requeue(at: &mut Option<Duration>, after: Option<Duration>) {
    if let Some(after) = after {
        *at = Some(at.map_or(after, |r| r.min(after)));
    }
}
