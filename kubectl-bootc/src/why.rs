//! `kubectl bootc why NODE`: the chain of reasons a node is not updating,
//! most important first. The first line is the headline (`status` shows it
//! in its WHY column); the lines after it are the evidence.
//!
//! The answer follows the planner's decisions, made with its own functions:
//! the target in force ([`crate::target`]), the node's state
//! ([`rollout::classify`]), whether it runs the target
//! ([`rollout::runs_target`]), whether it holds a slot
//! ([`rollout::slots::holds_slot`]), whether it may take one
//! ([`rollout::slots::candidate`]), whether its host's own updater refuses
//! it ([`rollout::updaters`]) and who is unavailable
//! ([`rollout::disruption::Unavailable`]).

use api::node_health::{cordoned_by, holds, is_cordoned, is_ready, not_ready_since};
use api::{BootcNode, BootcNodePool, ConditionType, DaemonPhase, Reason, event_reasons};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use rollout::disruption::Unavailable;
use rollout::window::Window;
use rollout::{NodeState, Target};

use crate::{
    Snapshot, age, holds_slot, phase_label, pool_condition, pool_condition_any, pool_of, window,
};

/// Why node `name` is (or is not) updating, at `now`.
pub fn why(snap: &Snapshot, name: &str, now: jiff::Timestamp) -> Vec<String> {
    why_lines(snap, name, now)
        .into_iter()
        .map(crate::shown)
        .collect()
}

fn why_lines(snap: &Snapshot, name: &str, now: jiff::Timestamp) -> Vec<String> {
    let node = snap.node(name);
    let conflict = conflict(snap, name, node, snap.bootc_node(name));
    let Some(bn) = snap.bootc_node(name) else {
        return conflict.map_or_else(|| not_a_member(snap, name, node), |c| vec![c]);
    };
    let Some(pool) = pool_of(bn).and_then(|p| snap.pool(p)) else {
        return vec![format!(
            "{name}'s pool {} no longer exists: the controller removes its BootcNode",
            pool_of(bn).unwrap_or("<none>")
        )];
    };
    let mut out = Vec::from_iter(conflict);
    member(snap, pool, bn, node, now, &mut out);
    out
}

/// A node more than one pool claims, as the planner decides it for each
/// pool ([`rollout::membership::conflict`]): the pools and what to do (None:
/// no conflict).
fn conflict(
    snap: &Snapshot,
    name: &str,
    node: Option<&Node>,
    bn: Option<&BootcNode>,
) -> Option<String> {
    let node = node?;
    let mut pools = std::collections::BTreeSet::new();
    for pool in &snap.pools {
        let others: Vec<&BootcNodePool> = snap
            .pools
            .iter()
            .filter(|o| o.name_any() != pool.name_any())
            .collect();
        if let Some(claims) = rollout::membership::conflict(pool, node, bn, &others) {
            pools.insert(pool.name_any());
            pools.extend(claims);
        }
    }
    let pools: Vec<String> = pools.into_iter().collect();
    (!pools.is_empty()).then(|| {
        format!(
            "in conflict: pools {} all claim {name}, and a node belongs to one pool only (the pools say Degraded/{}): it gets no new image or reboot slot until one pool alone selects it; change the others' spec.nodeSelector, or the Node's labels",
            pools.join(", "),
            Reason::NodeConflict
        )
    })
}

/// A node with no BootcNode: which pools its labels match.
fn not_a_member(snap: &Snapshot, name: &str, node: Option<&Node>) -> Vec<String> {
    use kube::core::SelectorExt;
    let Some(node) = node else {
        return vec![format!("there is no Node named {name}")];
    };
    let matching: Vec<String> = snap
        .pools
        .iter()
        .filter(|p| {
            kube::core::Selector::try_from(p.spec.node_selector.clone())
                .is_ok_and(|s| s.matches(node.labels()))
        })
        .map(|p| p.name_any())
        .collect();
    vec![match matching.as_slice() {
        [] => {
            format!("{name} is not in any pool: no BootcNodePool's nodeSelector matches its labels")
        }
        [one] => format!(
            "{name}'s labels match pool {one}, but it has no BootcNode yet: the controller has not taken it in (is bootc-controller running?)"
        ),
        many => format!(
            "{name}'s labels match pools {}: a node belongs to one pool only (the pools say Degraded/{})",
            many.join(", "),
            Reason::NodeConflict
        ),
    }]
}

fn member(
    snap: &Snapshot,
    pool: &BootcNodePool,
    bn: &BootcNode,
    node: Option<&Node>,
    now: jiff::Timestamp,
    out: &mut Vec<String>,
) {
    let pool_name = pool.name_any();
    let status = pool.status.clone().unwrap_or_default();
    if pool.metadata.deletion_timestamp.is_some() {
        out.push(format!(
            "pool {pool_name} is being deleted: its nodes are uncordoned and released, none is updated"
        ));
        return;
    }
    let Some(target) = crate::target(pool) else {
        let problem = pool_condition(pool, ConditionType::Degraded)
            .map_or(String::new(), |(r, m)| format!(": {r}: {m}"));
        out.push(format!("pool {pool_name} has no target image yet{problem}"));
        return;
    };
    let shown = status.target_summary.as_deref().unwrap_or(&target.image);
    let state = rollout::classify(bn, &target);
    let runs = rollout::runs_target(bn, &target);
    let slot = holds_slot(snap, bn, &pool_name);
    if state == NodeState::UpToDate && !slot {
        out.push(format!("up to date: runs the target {shown}"));
        evidence(snap, pool, bn, node, now, out);
        return;
    }
    if let Some(c) = bn.degraded() {
        out.push(format!(
            "the node is Degraded ({}): {}",
            c.reason, c.message
        ));
    }
    let refusing = rollout::updaters::refusing(Some(bn), runs, slot);
    if runs && !slot {
        // Degraded on the target: the pool counts it Degraded, not updated.
        out.push(format!("runs the target {shown}"));
    } else if !refusing.is_empty() {
        out.push(rollout::updaters::message(&bn.name_any(), &refusing));
    } else if bn.spec.desired_image != target.image {
        out.push(not_told(snap, pool, bn));
    } else if bn.daemon_behind() {
        out.push(format!(
            "its daemon has not answered its spec yet (generation {}, last status for {}): is the bootc-daemon pod running on {}?",
            bn.metadata.generation.unwrap_or(0),
            bn.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0),
            bn.name_any()
        ));
    } else if slot {
        in_a_slot(snap, pool, bn, node, (state, runs), now, out);
    } else {
        waiting(snap, pool, bn, node, &target, now, out);
    }
    evidence(snap, pool, bn, node, now, out);
}

/// What the pool and the Node add: a stuck report naming the node, the Node
/// not Ready or cordoned.
fn evidence(
    _snap: &Snapshot,
    pool: &BootcNodePool,
    bn: &BootcNode,
    node: Option<&Node>,
    now: jiff::Timestamp,
    out: &mut Vec<String>,
) {
    let name = bn.name_any();
    if let Some((reason, message)) = pool_condition(pool, ConditionType::Degraded)
        && reason == Reason::NodeStuck
        && message.contains(&name)
    {
        out.push(format!("stuck: {message}"));
    }
    let Some(node) = node else {
        out.push(format!("there is no Node named {name} (deleted?)"));
        return;
    };
    if let Some(since) = not_ready_since(node) {
        let how_long = since.map_or(String::new(), |t| format!(" for {}", age(t, now)));
        out.push(format!("Node {name} is NotReady{how_long}"));
    }
    if is_cordoned(node) {
        let by = cordoned_by(node).map_or(
            "by someone else (an admin?): it counts against maxUnavailable".to_owned(),
            |p| format!("by the reboot slot of pool {p}"),
        );
        out.push(format!("Node {name} is cordoned {by}"));
    }
}

/// Not yet told the target: the pool's staging bounds hold it back.
fn not_told(snap: &Snapshot, pool: &BootcNodePool, bn: &BootcNode) -> String {
    let rollout = &pool.spec.rollout;
    let staging: Vec<String> = snap
        .members(&pool.name_any())
        .filter(|m| m.phase() == Some(DaemonPhase::Staging))
        .map(|m| m.name_any())
        .collect();
    let mut bounds = Vec::new();
    if let Some(n) = rollout.max_concurrent_staging {
        bounds.push(format!(
            "maxConcurrentStaging {n} (staging now: {})",
            list(&staging)
        ));
    }
    if let Some(n) = rollout.stage_ahead {
        bounds.push(format!("stageAhead {n} (beyond the free reboot slots)"));
    }
    let unlocked = bn.status.as_ref().and_then(|s| s.download_only_supported) == Some(false);
    if unlocked {
        bounds.push(
            "its bootc cannot stage locked (no --download-only): it stages only when a free reboot slot awaits it"
                .to_owned(),
        );
    }
    if bounds.is_empty() {
        "not yet told the target: the controller tells it on its next pass".to_owned()
    } else {
        format!(
            "not yet told the target, held by the staging bounds: {}",
            bounds.join("; ")
        )
    }
}

/// In a slot (`state` and `runs`: the planner's state of the node and
/// whether it runs the target).
fn in_a_slot(
    snap: &Snapshot,
    pool: &BootcNodePool,
    bn: &BootcNode,
    node: Option<&Node>,
    (state, runs): (NodeState, bool),
    now: jiff::Timestamp,
    out: &mut Vec<String>,
) {
    let since = bn
        .phase_since()
        .map_or(String::new(), |t| format!(" for {}", age(t, now)));
    if let Some((_, check)) = bn.health_failed() {
        out.push(format!(
            "failed its health gate (spec.health): {check}; the pool gives this image to no node: `kubectl bootc retry {}` judges it again, or point the pool at another image",
            bn.name_any()
        ));
    } else if runs && let Some(health) = &pool.spec.health {
        out.push(proving(snap, pool, bn, node, health, now));
    } else if runs {
        out.push(
            "back on the target in its reboot slot: the slot is released once the Node is Ready and uncordoned"
                .to_owned(),
        );
    } else if bn.awaits_retry() {
        out.push(format!(
            "approved to boot, but its reboot (or apply) failed: `kubectl bootc retry {}` tries the same image again, or point the pool at another image",
            bn.name_any()
        ));
    } else if bn.approved() {
        let down = node.and_then(not_ready_since);
        out.push(match (down, bn.phase()) {
            (Some(t), _) => format!(
                "rebooting: approved to boot, the Node NotReady{}",
                t.map_or(String::new(), |t| format!(" for {}", age(t, now)))
            ),
            (None, Some(DaemonPhase::Rebooting)) => {
                format!("rebooting: its daemon applies the target{since}")
            }
            (None, _) => format!(
                "approved to boot, waiting for its daemon to apply (phase {}{since})",
                phase_label(bn, "unknown")
            ),
        });
    } else if pool.spec.rollout.paused {
        out.push(format!(
            "held by the pause: in a reboot slot (cordoned), not approved to boot until `kubectl bootc resume {}`",
            pool.name_any()
        ));
    } else if state == NodeState::Staging {
        // Not approved until staged (the planner's `drain_progress`).
        out.push(format!("in a reboot slot, still staging the target{since}"));
    } else {
        out.push("in a reboot slot: cordoned and draining (pods are evicted)".to_owned());
        if let Some(drain) = last_drain_problem(snap, pool, &bn.name_any()) {
            out.push(drain);
        }
    }
}

/// A slot holder back on the target, before its health gate: what the
/// planner's gate says of it now ([`rollout::proving`]).
fn proving(
    snap: &Snapshot,
    pool: &BootcNodePool,
    bn: &BootcNode,
    node: Option<&Node>,
    health: &api::HealthSpec,
    now: jiff::Timestamp,
) -> String {
    let Some(node) = node else {
        return "back on the target in its reboot slot; its Node is gone".to_owned();
    };
    let pods = snap.health_pods(pool, &bn.name_any());
    let pods = pods.as_deref().map_err(String::as_str);
    let checked = rollout::proving::check(health, node, bn, pods);
    match rollout::proving::assess(health, &checked, bn.phase_since(), now) {
        rollout::proving::Proof::Passed => {
            "back on the target and past its health gate: its reboot slot is released".to_owned()
        }
        rollout::proving::Proof::Settling { waiting, .. } => {
            format!("back on the target, proving it in its reboot slot (spec.health): {waiting}")
        }
        rollout::proving::Proof::Failed { check } => {
            format!("back on the target, failing its health gate (spec.health): {check}")
        }
    }
}

/// The newest drain Warning about the node (DrainBlocked, DrainFailed).
fn last_drain_problem(snap: &Snapshot, pool: &BootcNodePool, node: &str) -> Option<String> {
    crate::history::pool_events(snap, &pool.name_any())
        .into_iter()
        .rfind(|e| {
            matches!(
                e.reason.as_deref(),
                Some(event_reasons::DRAIN_BLOCKED | event_reasons::DRAIN_FAILED)
            ) && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(node)
        })
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default()
            )
        })
}

/// Not in a slot and told the target: staging, or waiting for a slot.
fn waiting(
    snap: &Snapshot,
    pool: &BootcNodePool,
    bn: &BootcNode,
    node: Option<&Node>,
    target: &Target,
    now: jiff::Timestamp,
    out: &mut Vec<String>,
) {
    let since = bn
        .phase_since()
        .map_or(String::new(), |t| format!(" for {}", age(t, now)));
    let pool_name = pool.name_any();
    let state = rollout::classify(bn, target);
    // The planner's state: a daemon that says Staged for another image than
    // the target is still staging it.
    if state == NodeState::Staging || bn.phase() == Some(DaemonPhase::Staging) {
        out.push(format!("staging: downloading the target{since}"));
        return;
    }
    if bn.phase() != Some(DaemonPhase::Staged) {
        out.push(format!("phase {}{since}", phase_label(bn, "unknown")));
        return;
    }
    // Rule 1, as the planner applies it (conflicts are named on the pool).
    let ready = node.is_some_and(is_ready);
    let deleting = node.is_some_and(|n| n.metadata.deletion_timestamp.is_some());
    let healthy = ready && state != NodeState::Degraded;
    if let Some((_, why)) = bn.skipped().filter(|(digest, _)| *digest == target.digest) {
        out.push(format!(
            "skipped for this target: its drain failed ({why}) and the pool releases such nodes (spec.rollout.onDrainTimeout: Release); `kubectl bootc retry {}` drains it again",
            bn.name_any()
        ));
        return;
    }
    let holds: Vec<String> = node
        .into_iter()
        .flat_map(holds)
        .map(|hold| hold.to_string())
        .collect();
    let blocking = snap.blocking_pod(pool, &bn.name_any());
    let held = !holds.is_empty() || !matches!(blocking, Ok(None));
    let staged = state == NodeState::Staged;
    let candidate = rollout::slots::candidate(staged, healthy, deleting, false, held);
    if !holds.is_empty() {
        out.push(format!(
            "staged{since}, held: given no reboot slot while its Node carries {}; it takes one once they are removed",
            holds.join(", ")
        ));
    } else if let Some(why) = blocked(&blocking) {
        out.push(format!("staged{since}, {why}"));
    } else if pool.spec.rollout.paused {
        out.push(format!(
            "the pool is paused (spec.rollout.paused): staged, but no new reboot slot is handed out until `kubectl bootc resume {pool_name}`"
        ));
    } else if let Some((reason, message)) = pool_condition(pool, ConditionType::Degraded)
        && reason == Reason::RolloutHalted
    {
        out.push(format!("the rollout is halted: {message}"));
    } else if let Some(waiting) = dependencies(snap, pool) {
        out.push(format!("staged{since}, {}", waiting.message()));
    } else if let Some(turn) = turn(snap, pool, node, target) {
        out.push(format!("staged{since}, {turn}"));
    } else if let Some(gate) = gated(pool) {
        out.push(format!("staged{since}, {gate}"));
    } else if let Window::Closed { opens } = window(pool, now) {
        let next = opens.map_or(
            "a window cannot be read (see the pool's Degraded)".to_owned(),
            |at| format!("the next opens at {at}, in {}", age(now, at)),
        );
        out.push(format!(
            "staged{since}, outside the pool's maintenance windows (spec.rollout.maintenanceWindows): no new reboot slot until one opens; {next}"
        ));
    } else if let Some(why) = (!candidate).then(|| no_slot(state, node, ready, deleting)) {
        out.push(why.to_owned());
    } else {
        out.push(format!(
            "staged{since}, waiting for a reboot slot: {}",
            slot_holders(snap, pool)
        ));
    }
    if let Some((_, message)) = pool_condition_any(pool, ConditionType::UpToDate) {
        out.push(format!("pool {pool_name}: {message}"));
    }
}

/// Why a blocking pod keeps the node from a slot (None: none does).
fn blocked(blocking: &Result<Option<String>, String>) -> Option<String> {
    match blocking {
        Ok(None) => None,
        Ok(Some(pod)) => Some(format!(
            "its Node runs {pod}, a blocking pod (spec.disruption.blockingPods): given no reboot slot until it is gone"
        )),
        Err(e) => Some(format!(
            "the pool's blocking pods cannot be read, so no node takes a reboot slot: {e}"
        )),
    }
}

/// What the pool's gates say, as the controller last asked them (the
/// plugin does not ask Prometheus itself; None: no gate holds).
fn gated(pool: &BootcNodePool) -> Option<String> {
    let (reason, message) = pool_condition_any(pool, ConditionType::UpToDate)?;
    let reason = Reason::parse(reason)?;
    [Reason::AlertFiring, Reason::GateUnanswered]
        .contains(&reason)
        .then(|| {
            let gate = message
                .split("; ")
                .find(|part| part.contains("no new reboot slot"));
            format!(
                "no new reboot slot while the pool's gate holds: {}",
                gate.unwrap_or(message)
            )
        })
}

/// The pools of `spec.rollout.dependsOn` the pool waits for, as the
/// planner reads them (None: none).
fn dependencies(snap: &Snapshot, pool: &BootcNodePool) -> Option<rollout::depends::Waiting> {
    let others: Vec<&BootcNodePool> = snap
        .pools
        .iter()
        .filter(|p| p.name_any() != pool.name_any())
        .collect();
    let waiting = rollout::depends::check(pool, &others, &mut Vec::new());
    (!waiting.is_met()).then_some(waiting)
}

/// Why the member on `node` waits for its group's turn in
/// `spec.rollout.order`, as the planner orders the groups (None: it does
/// not).
fn turn(
    snap: &Snapshot,
    pool: &BootcNodePool,
    node: Option<&Node>,
    target: &Target,
) -> Option<String> {
    let groups = rollout::groups::Groups::read(&pool.spec.rollout.order).ok()?;
    let group_of = |name: &str| groups.of(snap.node(name).map(ResourceExt::labels));
    let pool_name = pool.name_any();
    let members: Vec<(&str, usize, bool)> = snap
        .members(&pool_name)
        .map(|bn| {
            let name = bn.metadata.name.as_deref().unwrap_or_default();
            (name, group_of(name), rollout::runs_target(bn, target))
        })
        .collect();
    let turn = rollout::groups::turn(members)?;
    let mine = groups.of(node.map(ResourceExt::labels));
    (!groups.is_empty() && mine > turn.group).then(|| {
        format!(
            "waiting for its turn: it is in {}, and {} has nodes not yet on the target: {}",
            groups.name(mine),
            groups.name(turn.group),
            turn.behind.join(", ")
        )
    })
}

/// Why a staged member is not a candidate for a slot (rule 1: healthy,
/// its Node not being deleted).
fn no_slot(state: NodeState, node: Option<&Node>, ready: bool, deleting: bool) -> &'static str {
    if state == NodeState::Degraded {
        "a Degraded node is given no reboot slot"
    } else if node.is_none() {
        "a member without its Node is given no reboot slot"
    } else if !ready {
        "a NotReady node is given no reboot slot until it is Ready"
    } else if deleting {
        "a Node being deleted is given no reboot slot"
    } else {
        "not a candidate for a reboot slot"
    }
}

/// Who uses the pool's disruption budget, as the planner counts it: slot
/// holders (members holding a slot, other Nodes recorded as disrupted by
/// the pool) and other unavailable members (NotReady, cordoned).
pub fn slot_holders(snap: &Snapshot, pool: &BootcNodePool) -> String {
    let pool_name = pool.name_any();
    let mut holders: Vec<String> = snap
        .members(&pool_name)
        .filter(|m| holds_slot(snap, m, &pool_name))
        .map(|m| format!("{} ({})", m.name_any(), phase_label(m, "unknown")))
        .collect();
    for node in &snap.nodes {
        let name = node.name_any();
        let recorded = rollout::disruption::recorded_for(node, &pool_name);
        if recorded && !holders.iter().any(|h| h.starts_with(&format!("{name} "))) {
            holders.push(format!("{name} (disrupted, not back yet)"));
        }
    }
    let unavailable: Vec<String> = snap
        .members(&pool_name)
        .filter(|m| !holds_slot(snap, m, &pool_name))
        .filter_map(|m| {
            let why = Unavailable::of_member(snap.node(&m.name_any())?)?;
            Some(format!("{} ({})", m.name_any(), why.as_str()))
        })
        .collect();
    let max = match &pool.spec.rollout.max_unavailable {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => n.to_string(),
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s.clone(),
    };
    let mut text = format!("maxUnavailable {max}; slots held by {}", list(&holders));
    if !unavailable.is_empty() {
        text.push_str(&format!("; also unavailable: {}", unavailable.join(", ")));
    }
    text
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    /// Each case: the headline of `why` contains every wanted piece.
    fn check(cases: Vec<(&str, Snapshot, &str, Vec<&str>)>) {
        for (name, snap, node, wants) in cases {
            let lines = why(&snap, node, now());
            let headline = lines.first().cloned().unwrap_or_default();
            for want in wants {
                assert!(
                    headline.contains(want),
                    "{name}: {headline:?} lacks {want:?}; all: {lines:#?}"
                );
            }
        }
    }

    #[test]
    fn the_headline_names_what_blocks_a_node_outside_a_slot() {
        check(vec![
            (
                "no node",
                snapshot(vec![], vec![], vec![]),
                "ghost",
                vec!["there is no Node named ghost"],
            ),
            (
                "no pool matches",
                snapshot(
                    vec![pool("workers", false)],
                    vec![],
                    vec![node("n1", true, false)],
                ),
                "n1",
                vec!["n1 is not in any pool"],
            ),
            (
                "up to date",
                alone(bn("n1", V2, Phase::Idle), true, false),
                "n1",
                vec!["up to date: runs the target 2.0 (sha256:222222222222)"],
            ),
            (
                "paused",
                alone_in(
                    pool("workers", true),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec!["the pool is paused", "kubectl bootc resume workers"],
            ),
            (
                "held twice",
                snapshot(
                    vec![pool("workers", true)],
                    vec![bn("n1", V1, Phase::Staged)],
                    vec![held(
                        held(node("n1", true, false), "alice", "kernel debugging"),
                        "batch",
                        "",
                    )],
                ),
                "n1",
                vec![
                    "held: given no reboot slot while its Node carries",
                    "hold.bootc.dev/alice (kernel debugging), hold.bootc.dev/batch;",
                ],
            ),
            (
                "on a blocking pod",
                Snapshot {
                    pods: vec![
                        pod_on("n1", "batch", "etl-7", "etl"),
                        pod_on("n1", "apps", "web", "web"),
                    ],
                    ..alone_in(
                        blocking_etl(pool("workers", false)),
                        bn("n1", V1, Phase::Staged),
                        true,
                        false,
                    )
                },
                "n1",
                vec![
                    "staged for 3m, its Node runs batch/etl-7, a blocking pod (spec.disruption.blockingPods): given no reboot slot until it is gone",
                ],
            ),
            (
                "a blocking pod elsewhere: waiting for a slot as usual",
                Snapshot {
                    pods: vec![pod_on("n9", "batch", "etl-7", "etl")],
                    ..alone_in(
                        blocking_etl(pool("workers", false)),
                        bn("n1", V1, Phase::Staged),
                        true,
                        false,
                    )
                },
                "n1",
                vec!["waiting for a reboot slot"],
            ),
            (
                "an alert fires",
                alone_in(
                    alerting(pool("workers", false), "NodeDown"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec![
                    "staged for 3m, no new reboot slot while the pool's gate holds: alerts fire (spec.rollout.alertGate), no new reboot slot until they resolve: NodeDown",
                ],
            ),
            (
                "waiting for another pool",
                alone_in(
                    depending(pool("workers", false), "infra"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec![
                    "staged for 3m, no new reboot slot until the pools of spec.rollout.dependsOn are up to date (no such pool: infra)",
                ],
            ),
            (
                "waiting for its group's turn",
                snapshot(
                    vec![ordered(pool("workers", false), "zone", "a")],
                    vec![bn("n1", V1, Phase::Staged), bn("n2", V1, Phase::Staging)],
                    vec![
                        node("n1", true, false),
                        labelled(node("n2", true, false), "zone", "a"),
                    ],
                ),
                "n1",
                vec![
                    "waiting for its turn: it is in the nodes in no group of spec.rollout.order, and group 1 of spec.rollout.order has nodes not yet on the target: n2",
                ],
            ),
            (
                "outside the maintenance windows",
                alone_in(
                    windowed(pool("workers", false), "22:00"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec![
                    "outside the pool's maintenance windows (spec.rollout.maintenanceWindows)",
                    "the next opens at 2026-11-23T22:00:00Z, in 5h",
                ],
            ),
            (
                "inside one: waiting for a slot as usual",
                alone_in(
                    windowed(pool("workers", false), "15:00"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec!["waiting for a reboot slot"],
            ),
            (
                "waiting for a slot held by another node",
                snapshot(
                    vec![pool("workers", false)],
                    vec![
                        bn("n1", V1, Phase::Staged),
                        slotted(bn("n2", V1, Phase::Rebooting), true),
                    ],
                    vec![node("n1", true, false), node("n2", false, true)],
                ),
                "n1",
                vec![
                    "waiting for a reboot slot",
                    "maxUnavailable 1; slots held by n2 (Rebooting)",
                ],
            ),
        ]);
    }

    #[test]
    fn the_headline_names_the_slot_or_what_holds_the_node_back() {
        check(vec![
            (
                "rebooting",
                alone(slotted(bn("n2", V1, Phase::Rebooting), true), false, true),
                "n2",
                vec!["rebooting: approved to boot, the Node NotReady for 3m"],
            ),
            (
                "draining",
                alone(slotted(bn("n2", V1, Phase::Staged), false), true, true),
                "n2",
                vec!["in a reboot slot: cordoned and draining"],
            ),
            (
                "degraded after a failed reboot",
                alone(
                    degrade(
                        slotted(bn("n2", V1, Phase::Idle), true),
                        "rebooted into the wrong image",
                    ),
                    true,
                    true,
                ),
                "n2",
                vec!["the node is Degraded (Error): rebooted into the wrong image"],
            ),
            (
                "halted",
                alone_in(
                    halted(pool("workers", false), "n3 and n4 are unhealthy"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec!["the rollout is halted: n3 and n4 are unhealthy"],
            ),
            (
                "daemon silent",
                alone(behind(bn("n1", V1, Phase::Staged)), true, false),
                "n1",
                vec!["its daemon has not answered its spec yet (generation 3, last status for 2)"],
            ),
            (
                "held by the staging bound",
                snapshot(
                    vec![staging_bound(pool("workers", false), 1)],
                    vec![
                        told(bn("n1", V1, Phase::Idle), V1),
                        bn("n2", V1, Phase::Staging),
                    ],
                    vec![node("n1", true, false), node("n2", true, false)],
                ),
                "n1",
                vec!["held by the staging bounds: maxConcurrentStaging 1 (staging now: n2)"],
            ),
        ]);
    }

    /// Where the plugin once read an object its own way, it now says what
    /// the planner decides.
    #[test]
    fn the_headline_follows_the_planners_rules() {
        // The slot record lost (BootcNode recreated), the Node still
        // recorded as disrupted by the pool: the planner holds its slot.
        let mut recorded = node("n2", false, true);
        recorded.annotations_mut().insert(
            api::labels::DISRUPTED_BY_ANNOTATION.into(),
            "workers".into(),
        );
        let mut approved = bn("n2", V1, Phase::Rebooting);
        approved.spec.desired_image_state = api::DesiredImageState::Booted;
        let lost_record = snapshot(vec![pool("workers", false)], vec![approved], vec![recorded]);
        // Degraded on the target: the pool counts it Degraded, not updated.
        let degraded_on_target = alone(
            degrade(bn("n1", V2, Phase::Idle), "bootc status failed"),
            true,
            false,
        );
        // The daemon says Staged, but for another image than the target.
        let mut other_staged = bn("n1", V1, Phase::Staged);
        other_staged.status.as_mut().unwrap().staged = Some(api::BootEntryStatus {
            image: Some(format!("r.example/acme/os@{V1}")),
            image_digest: Some(V1.into()),
            ..api::BootEntryStatus::default()
        });
        // A staged member whose Node is being deleted takes no slot.
        let mut deleting = node("n1", true, false);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
        let being_deleted = snapshot(
            vec![pool("workers", false)],
            vec![bn("n1", V1, Phase::Staged)],
            vec![deleting],
        );
        check(vec![
            (
                "slot record lost, disruption recorded",
                lost_record.clone(),
                "n2",
                vec!["rebooting: approved to boot, the Node NotReady for 3m"],
            ),
            (
                "Degraded on the target",
                degraded_on_target.clone(),
                "n1",
                vec!["the node is Degraded (Error): bootc status failed"],
            ),
            (
                "staged for another image",
                alone(other_staged, true, false),
                "n1",
                vec!["staging: downloading the target for 3m"],
            ),
        ]);
        let lines = why(&degraded_on_target, "n1", now());
        assert_eq!(
            lines.get(1).map(String::as_str),
            Some("runs the target 2.0 (sha256:222222222222)"),
            "{lines:#?}"
        );
        let lines = why(&being_deleted, "n1", now());
        assert_eq!(
            lines.first().map(String::as_str),
            Some("a Node being deleted is given no reboot slot"),
            "{lines:#?}"
        );
        let table = crate::status(&lost_record, Some("workers"), now());
        assert!(
            table.contains("Slots:    maxUnavailable 1; slots held by n2 (Rebooting)\n"),
            "{table}"
        );
        let row = table
            .lines()
            .find(|l| l.starts_with("n2 "))
            .unwrap_or_default();
        assert!(row.contains(" yes "), "the SLOT column: {row}");
    }

    /// n1 labelled for `workers` and for `canary`, whose BootcNode
    /// `owner` owns (None: it has none yet), on `booted`.
    fn claimed_twice(owner: Option<&str>, booted: &str, phase: Phase) -> Snapshot {
        use kube::Resource;
        let mut canary = pool("canary", false);
        canary.spec.node_selector.match_labels =
            Some([("canary".to_owned(), "yes".to_owned())].into());
        let n1 = labelled(
            labelled(node("n1", true, false), "pool", "workers"),
            "canary",
            "yes",
        );
        let bns = owner
            .map(|owner| {
                let mut b = bn("n1", booted, phase);
                if owner == "canary" {
                    b.metadata.owner_references =
                        Some(vec![canary.controller_owner_ref(&()).unwrap()]);
                }
                b
            })
            .into_iter()
            .collect();
        snapshot(vec![pool("workers", false), canary], bns, vec![n1])
    }

    #[test]
    fn a_node_two_pools_claim_says_the_conflict_first() {
        let conflict = vec![
            "in conflict: pools canary, workers all claim n1",
            api::Reason::NodeConflict.as_str(),
            "change the others' spec.nodeSelector, or the Node's labels",
        ];
        check(vec![
            (
                "staged, waiting",
                claimed_twice(Some("workers"), V1, Phase::Staged),
                "n1",
                conflict.clone(),
            ),
            (
                "up to date",
                claimed_twice(Some("workers"), V2, Phase::Idle),
                "n1",
                conflict.clone(),
            ),
            (
                "owned by the other pool",
                claimed_twice(Some("canary"), V1, Phase::Staged),
                "n1",
                conflict.clone(),
            ),
            (
                "no BootcNode yet",
                claimed_twice(None, V1, Phase::Idle),
                "n1",
                conflict,
            ),
        ]);
        // The evidence follows: what the owning pool's rollout says of it.
        let lines = why(
            &claimed_twice(Some("workers"), V1, Phase::Staged),
            "n1",
            now(),
        );
        assert!(
            lines.len() > 1 && lines[1].starts_with("staged"),
            "{lines:#?}"
        );
        // One pool alone: no conflict.
        let alone = alone(bn("n1", V1, Phase::Staged), true, false);
        assert!(!why(&alone, "n1", now()).join("\n").contains("conflict"));
    }

    #[test]
    fn a_failed_reboot_points_at_retry() {
        let snap = alone(
            degrade(
                slotted(bn("n2", V1, Phase::Rebooting), true),
                "rebooted into the wrong image",
            ),
            true,
            true,
        );
        let lines = why(&snap, "n2", now());
        assert_eq!(
            lines.get(1).map(String::as_str),
            Some(
                "approved to boot, but its reboot (or apply) failed: `kubectl bootc retry n2` tries the same image again, or point the pool at another image"
            ),
            "{lines:#?}"
        );
        assert_eq!(crate::retry_refusal(&snap, "n2", now()), None);
        let healthy = alone(slotted(bn("n2", V1, Phase::Rebooting), true), false, true);
        let refusal = crate::retry_refusal(&healthy, "n2", now()).unwrap();
        assert!(
            refusal.starts_with("n2 does not await a retry: rebooting: approved to boot"),
            "{refusal}"
        );
    }

    #[test]
    fn a_node_whose_host_runs_its_own_updater_names_the_unit_and_the_fix() {
        let timer = api::host_updaters::BOOTC_TIMER;
        let mut refused = bn("n1", V1, Phase::Idle);
        if let Some(s) = refused.status.as_mut() {
            s.host_updaters = vec![timer.to_owned()];
        }
        let lines = why(&alone(refused, true, false), "n1", now());
        let headline = lines.first().cloned().unwrap_or_default();
        assert!(
            headline.starts_with(&format!(
                "node n1 runs its host's own automatic updater {timer}, which would reboot it outside any reboot slot"
            )) && headline.contains(&format!("`RUN systemctl mask {timer}` in its Containerfile")),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_node_skipped_after_its_drain_failed_points_at_retry() {
        let mut skipped = bn("n1", V1, Phase::Staged);
        let ann = skipped.annotations_mut();
        ann.insert(api::labels::SKIPPED_ANNOTATION.into(), V2.into());
        ann.insert(
            api::labels::SKIPPED_BECAUSE_ANNOTATION.into(),
            "n1: pod apps/web would not leave".into(),
        );
        let snap = alone(skipped, true, false);
        let lines = why(&snap, "n1", now());
        assert_eq!(
            lines.first().map(String::as_str),
            Some(
                "skipped for this target: its drain failed (n1: pod apps/web would not leave) and the pool releases such nodes (spec.rollout.onDrainTimeout: Release); `kubectl bootc retry n1` drains it again"
            ),
            "{lines:#?}"
        );
        assert_eq!(crate::retry_refusal(&snap, "n1", now()), None);
    }

    #[test]
    fn the_evidence_follows_the_headline() {
        let snap = alone_in(
            stuck(pool("workers", false), "n2"),
            slotted(bn("n2", V1, Phase::Rebooting), true),
            false,
            true,
        );
        let lines = why(&snap, "n2", now());
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("stuck: n2 has been rebooting")),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l == "Node n2 is NotReady for 3m"),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l == "Node n2 is cordoned by the reboot slot of pool workers"),
            "{lines:#?}"
        );
    }
}
