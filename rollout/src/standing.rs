//! Where each member stands after a plan, and why: decided once, here, from
//! its verdict and the rollout's pool-wide holds, in one order of
//! precedence ([`decide`]). The pool's status message, the metrics,
//! `kubectl bootc plan`, `status` and `why` all render it ([`Standing`],
//! [`Standing::headline`]); none decides it again. A new hold is one new
//! variant, and each `match` on it below is exhaustive: forgetting to render
//! it does not compile.
//!
//! The order, for a member outside a slot: a conflict between pools;
//! bootc cannot update its host from an image (an incompatible
//! deployment, no image or no digest); on the target; its daemon of a
//! contract this controller does not drive; refused for its host's
//! updater; the target failed (on it, or for the pool); not yet told (the
//! staging bounds); its daemon's pod unable to run, or its daemon behind;
//! still staging; Degraded; not staged; then, staged, the holds that are its own
//! (skipped after a failed drain, a hold annotation, a blocking pod, unfit
//! for a slot: NotReady, no Node, being deleted), then the fleet's switch,
//! then the pool's (paused until resumed, paused until an instant, halted, the pools it depends on,
//! the node order, the canary step, the gates, a blackout, the maintenance
//! windows, `maxUnavailable` 0, the pool's own
//! unavailable nodes, every slot held). In a slot: failed its health gate,
//! proving it, back on the target, its daemon of a contract not driven
//! (unless approved already), approved (applying, rebooting, or its
//! reboot failed), taking the slot this plan hands out, held by a pause,
//! draining, staging.

use std::collections::BTreeMap;

use api::Node;
use api::daemon_contract::DaemonSkew;
use api::{BootcNode, DaemonPhase, StandingKind};
use jiff::Timestamp;

use crate::facts::{Entry, NodeVerdict, Rollout};
use crate::holds::depends::Waiting;
use crate::holds::disruption::Unavailable;
use crate::holds::gates::{Gate, Gates};
use crate::holds::pause::Pause;
use crate::holds::window::Window;
use crate::members::state::NodeState;
use crate::model::Target;

/// Where one member stands, and why (see the module docs for the order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Runs the target, out of any slot.
    UpToDate,
    /// Runs the target, but its BootcNode is Degraded.
    OnTargetDegraded,
    /// Other pools claim it too (their names).
    InConflict {
        pools: Vec<String>,
    },
    /// Its host runs its own automatic updater (the units).
    HostUpdaters {
        units: Vec<String>,
    },
    /// bootc reports a deployment on its host it cannot update from an
    /// image (why, in bootc's words: [`api::unmanageable`]).
    HostIncompatible {
        why: String,
    },
    /// Its daemon speaks a contract this controller does not drive
    /// ([`crate::holds::daemons`]): not told, not approved.
    DaemonSkew(DaemonSkew),
    /// It failed its health gate on the target (the check), outside a slot.
    FailedHealth {
        check: String,
    },
    /// The target failed for the pool: nobody is told it.
    TargetFailed,
    /// Not yet told the target: the staging bounds hold it back (`unlocked`:
    /// its bootc cannot stage locked).
    NotTold {
        unlocked: bool,
    },
    /// Its daemon has not answered its spec, and its pod cannot run (why:
    /// the pod and the kubelet's reason).
    DaemonDown {
        pod: String,
    },
    /// Its daemon has not answered its spec yet.
    DaemonBehind {
        generation: i64,
        observed: i64,
    },
    /// Downloading the target.
    Staging,
    /// Its BootcNode is Degraded.
    Degraded,
    /// Told, not staged, in no phase that says more (its daemon's phase).
    Told {
        phase: Option<DaemonPhase>,
    },
    /// Skipped for this target after its drain failed (why).
    Skipped {
        why: String,
    },
    /// Its Node carries `hold.bootc.dev/<who>` annotations (each shown).
    Held {
        holds: Vec<String>,
    },
    /// Its Node runs a blocking pod (`namespace/name`).
    BlockingPod {
        pod: String,
    },
    /// Staged, but no candidate for a slot.
    Unfit(Unfit),
    /// The fleet's switch is on (`kubectl bootc stop --all`).
    FleetStopped,
    /// The pool is being deleted, its slots finishing (`spec.onDelete:
    /// Finish`): this node is not updated.
    PoolDeleting,
    Paused,
    /// `spec.rollout.pausedUntil`: paused until this instant.
    PausedUntil {
        until: Timestamp,
    },
    /// Too many nodes in slots are unhealthy (`maxUnhealthy`).
    Halted,
    /// The pools of `spec.rollout.dependsOn` are not up to date.
    WaitingForDependencies,
    /// `spec.rollout.order` cannot be read.
    OrderUnreadable,
    /// Its group's turn has not come (its group).
    WaitingForTurn {
        group: usize,
    },
    /// The canary step leaves no room (soaking, or full).
    CanaryStep,
    /// A gate holds (alerts fire, or a gate could not be asked).
    Gated,
    OutsideWindow,
    /// A blackout of `spec.rollout.blackouts` holds new slots (even inside
    /// a window).
    Blackout,
    /// `maxUnavailable` is 0.
    NoSlots,
    /// The pool's own unavailable nodes use the budget up.
    WaitingForBudget,
    /// Every slot is held.
    WaitingForSlot,
    /// Handed a free slot by this plan: cordoned, then drained, next.
    TakingSlot,
    /// In a slot: cordoned and draining (a PodDisruptionBudget refused an
    /// eviction; the drain failed and is tried again).
    Draining {
        blocked: Option<String>,
        failed: Option<String>,
    },
    /// In a slot, drained, still staging the target.
    StagingInSlot,
    /// In a slot, not approved while the pool is paused.
    HeldByPause,
    /// In a slot, not approved while the fleet's switch holds approvals
    /// (`kubectl bootc stop --all --before-approval`).
    HeldByFleetStop,
    /// Approved to boot, waiting for its daemon to apply.
    Approved,
    /// Approved to boot and rebooting: its Node NotReady (since when, if
    /// known), or its daemon applying.
    Rebooting {
        not_ready: bool,
        since: Option<Timestamp>,
    },
    /// Approved to boot, its reboot (or apply) failed: awaits a retry.
    RebootFailed,
    /// Back on the target in its slot, proving it (what its gate waits for).
    Proving {
        waiting: String,
    },
    /// Back on the target in its slot, released once Ready and back.
    ComingBack,
    /// Failed its health gate on the target in its slot (the check).
    FailedInSlot {
        check: String,
        then: AfterFailure,
    },
}

/// Why a staged member takes no slot of its own accord.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfit {
    NoNode,
    NotReady,
    Deleting,
}

/// What a member failed on the target in its slot does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// `onFailure: Rollback`: it boots the image it ran before.
    RollingBack,
    /// `onFailure: Rollback`, but bootc reports no image it ran before.
    NoRollback,
    /// Kept in its slot, cordoned, for a person.
    Kept,
}

/// What the pool-wide standings are rendered with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    /// The target as a person reads it (the pool's `status.targetSummary`).
    pub target: String,
    pub max_concurrent_staging: Option<usize>,
    pub stage_ahead: Option<usize>,
    /// The members staging now.
    pub staging_now: Vec<String>,
    /// Why the rollout halted.
    pub unhealthy_in_slots: Vec<String>,
    pub dependencies: Waiting,
    /// The names of `spec.rollout.order`'s groups, and whose turn it is:
    /// the group and its members behind.
    pub groups: Vec<String>,
    pub turn: Option<(String, Vec<String>)>,
    /// The canary step, as the pool says it.
    pub batch: Option<String>,
    pub gate: Gate,
    pub window: Window,
    /// The pool's pause now.
    pub pause: Pause,
    /// The fleet's switch, while on (who and why).
    pub fleet_stop: Option<String>,
    /// `maxUnavailable` as the pool spells it, and the slots it gives.
    pub max_unavailable: String,
    pub slots: usize,
    /// The slot holders after the plan (name, its daemon's phase), then the
    /// nodes disrupted by the pool that left it, not back yet.
    pub holders: Vec<(String, Option<DaemonPhase>)>,
    pub not_back: Vec<String>,
    /// The members unavailable for reasons of their own.
    pub unavailable: Vec<(String, Unavailable)>,
}

/// Every member's standing, and the pool's facts they are rendered with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Standings {
    pub members: BTreeMap<String, Standing>,
    pub pool: Pool,
}

impl Standings {
    /// The members whose standing `pred` holds, in name order.
    pub fn names(&self, pred: impl Fn(&Standing) -> bool) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, s)| pred(s))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

impl Standing {
    /// The kind, as the metrics and `kubectl bootc status -o json` name it.
    pub fn kind(&self) -> StandingKind {
        match self {
            Standing::UpToDate => StandingKind::UpToDate,
            Standing::OnTargetDegraded => StandingKind::OnTargetDegraded,
            Standing::InConflict { .. } => StandingKind::InConflict,
            Standing::HostUpdaters { .. } => StandingKind::HostUpdaters,
            Standing::HostIncompatible { .. } => StandingKind::HostIncompatible,
            Standing::DaemonSkew(_) => StandingKind::DaemonSkew,
            Standing::FailedHealth { .. } => StandingKind::FailedHealth,
            Standing::TargetFailed => StandingKind::TargetFailed,
            Standing::NotTold { .. } => StandingKind::NotTold,
            Standing::DaemonDown { .. } => StandingKind::DaemonDown,
            Standing::DaemonBehind { .. } => StandingKind::DaemonBehind,
            Standing::Staging => StandingKind::Staging,
            Standing::Degraded => StandingKind::Degraded,
            Standing::Told { .. } => StandingKind::Told,
            Standing::Skipped { .. } => StandingKind::Skipped,
            Standing::Held { .. } => StandingKind::Held,
            Standing::BlockingPod { .. } => StandingKind::BlockingPod,
            Standing::Unfit(_) => StandingKind::Unfit,
            Standing::FleetStopped => StandingKind::FleetStopped,
            Standing::PoolDeleting => StandingKind::PoolDeleting,
            Standing::Paused => StandingKind::Paused,
            Standing::PausedUntil { .. } => StandingKind::PausedUntil,
            Standing::Halted => StandingKind::Halted,
            Standing::WaitingForDependencies => StandingKind::WaitingForDependencies,
            Standing::OrderUnreadable => StandingKind::OrderUnreadable,
            Standing::WaitingForTurn { .. } => StandingKind::WaitingForTurn,
            Standing::CanaryStep => StandingKind::CanaryStep,
            Standing::Gated => StandingKind::Gated,
            Standing::OutsideWindow => StandingKind::OutsideWindow,
            Standing::Blackout => StandingKind::Blackout,
            Standing::NoSlots => StandingKind::NoSlots,
            Standing::WaitingForBudget => StandingKind::WaitingForBudget,
            Standing::WaitingForSlot => StandingKind::WaitingForSlot,
            Standing::TakingSlot => StandingKind::TakingSlot,
            Standing::Draining { .. } => StandingKind::Draining,
            Standing::StagingInSlot => StandingKind::StagingInSlot,
            Standing::HeldByPause => StandingKind::HeldByPause,
            Standing::HeldByFleetStop => StandingKind::HeldByFleetStop,
            Standing::Approved => StandingKind::Approved,
            Standing::Rebooting { .. } => StandingKind::Rebooting,
            Standing::RebootFailed => StandingKind::RebootFailed,
            Standing::Proving { .. } => StandingKind::Proving,
            Standing::ComingBack => StandingKind::ComingBack,
            Standing::FailedInSlot { .. } => StandingKind::FailedInSlot,
        }
    }

    /// Does the member hold a reboot slot once the plan's writes are made?
    pub fn in_slot(&self) -> bool {
        matches!(
            self,
            Standing::TakingSlot
                | Standing::Draining { .. }
                | Standing::StagingInSlot
                | Standing::HeldByPause
                | Standing::HeldByFleetStop
                | Standing::Approved
                | Standing::Rebooting { .. }
                | Standing::RebootFailed
                | Standing::Proving { .. }
                | Standing::ComingBack
                | Standing::FailedInSlot { .. }
        )
    }
}

/// Every member's standing after the plan (see the module docs).
pub(crate) fn decide(
    pool: Pool,
    target: &Target,
    rollout: &Rollout<'_>,
    conflicts: &BTreeMap<String, std::collections::BTreeSet<String>>,
    gates: &Gates,
    mut members: BTreeMap<String, Standing>,
) -> Standings {
    let facts = PoolFacts {
        target,
        rollout,
        pool: &pool,
        gates,
    };
    rollout
        .verdicts
        .refill(&mut members, |e| match conflicts.get(e.name) {
            Some(pools) if !e.verdict.owned.in_slot => Standing::InConflict {
                pools: pools.iter().cloned().collect(),
            },
            _ => of(&facts, e),
        });
    Standings { members, pool }
}

/// What [`of`] reads besides the member.
struct PoolFacts<'a> {
    target: &'a Target,
    rollout: &'a Rollout<'a>,
    pool: &'a Pool,
    gates: &'a Gates,
}

/// One member's standing.
fn of(facts: &PoolFacts<'_>, e: &Entry<'_>) -> Standing {
    let v = &*e.verdict;
    if v.owned.in_slot {
        return in_slot(facts, e.row.node, e.row.bn, v);
    }
    if let Some(why) = &v.waits().host_incompatible {
        return Standing::HostIncompatible { why: why.clone() };
    }
    if v.runs_target {
        return match v.state {
            NodeState::Degraded => Standing::OnTargetDegraded,
            _ => Standing::UpToDate,
        };
    }
    if let Some(skew) = &v.daemon_skew {
        return Standing::DaemonSkew(skew.clone());
    }
    if !v.waits().host_updaters.is_empty() {
        return Standing::HostUpdaters {
            units: v.waits().host_updaters.clone(),
        };
    }
    if let Some((digest, check)) = &v.owned.health_failed
        && *digest == facts.target.digest
    {
        return Standing::FailedHealth {
            check: check.clone(),
        };
    }
    if facts.rollout.target_failed.is_some() {
        return Standing::TargetFailed;
    }
    not_staged(facts, e.name, e.row.bn, v).unwrap_or_else(|| staged(facts, e))
}

/// A member outside a slot not (yet) staged with the target: None when it is.
fn not_staged(
    facts: &PoolFacts<'_>,
    name: &str,
    bn: Option<&BootcNode>,
    v: &NodeVerdict,
) -> Option<Standing> {
    let Some(bn) = bn.filter(|_| v.owned.spec.desired_image == facts.target.image) else {
        let unlocked = bn
            .and_then(|b| b.status.as_ref())
            .and_then(|s| s.download_only_supported)
            == Some(false);
        return Some(Standing::NotTold { unlocked });
    };
    if bn.daemon_behind()
        && let Some(pod) = facts.gates.daemon_down(name)
    {
        return Some(Standing::DaemonDown {
            pod: pod.to_owned(),
        });
    }
    if bn.daemon_behind() {
        return Some(Standing::DaemonBehind {
            generation: bn.metadata.generation.unwrap_or(0),
            observed: bn
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0),
        });
    }
    match v.state {
        NodeState::Staging => Some(Standing::Staging),
        NodeState::Degraded => Some(Standing::Degraded),
        NodeState::Staged => None,
        NodeState::Pending | NodeState::Rebooting | NodeState::UpToDate => Some(Standing::Told {
            phase: v.daemon_phase,
        }),
    }
}

/// A staged member outside a slot: its own holds, then the pool's.
fn staged(facts: &PoolFacts<'_>, e: &Entry<'_>) -> Standing {
    let v = &*e.verdict;
    if let Some((_, why)) = &v.owned.skipped {
        return Standing::Skipped { why: why.clone() };
    }
    let node = e.row.node;
    if v.held {
        let holds = node
            .into_iter()
            .flat_map(api::node_health::holds)
            .map(|h| h.to_string())
            .collect();
        return Standing::Held { holds };
    }
    if let Some(pod) = &v.waits().blocked_by {
        return Standing::BlockingPod { pod: pod.clone() };
    }
    if let Some(unfit) = unfit(node) {
        return Standing::Unfit(unfit);
    }
    pool_hold(facts, e.name)
}

/// Why a staged, healthy member's Node keeps it from a slot (None: nothing).
fn unfit(node: Option<&Node>) -> Option<Unfit> {
    let Some(node) = node else {
        return Some(Unfit::NoNode);
    };
    if !api::node_health::is_ready(node) {
        Some(Unfit::NotReady)
    } else if node.metadata.deletion_timestamp.is_some() {
        Some(Unfit::Deleting)
    } else {
        None
    }
}

/// What of the pool holds a candidate back from a slot.
fn pool_hold(facts: &PoolFacts<'_>, name: &str) -> Standing {
    let rollout = facts.rollout;
    if rollout.deleting {
        Standing::PoolDeleting
    } else if rollout.fleet_stop.is_some() {
        Standing::FleetStopped
    } else if let Some(until) = rollout.pause.ends() {
        Standing::PausedUntil { until }
    } else if rollout.pause.holds() {
        Standing::Paused
    } else if rollout.halted {
        Standing::Halted
    } else if !rollout.dependencies.is_met() {
        Standing::WaitingForDependencies
    } else if rollout.groups.is_none() {
        Standing::OrderUnreadable
    } else if let Some(group) = rollout.out_of_turn.get(name) {
        Standing::WaitingForTurn { group: *group }
    } else if rollout.batch.room == Some(0) {
        Standing::CanaryStep
    } else if !rollout.gate.is_open() {
        Standing::Gated
    } else if let Window::Blackout { .. } = rollout.window {
        Standing::Blackout
    } else if !rollout.window.allows_new_slots() {
        Standing::OutsideWindow
    } else if facts.pool.slots == 0 {
        Standing::NoSlots
    } else if rollout.waiting_for_budget.is_some() {
        Standing::WaitingForBudget
    } else {
        Standing::WaitingForSlot
    }
}

/// A slot holder's standing.
fn in_slot(
    facts: &PoolFacts<'_>,
    node: Option<&Node>,
    bn: Option<&BootcNode>,
    v: &NodeVerdict,
) -> Standing {
    if let Some((digest, check)) = &v.owned.health_failed
        && *digest == facts.target.digest
    {
        let then = if v.rolling_back {
            AfterFailure::RollingBack
        } else if v.no_rollback {
            AfterFailure::NoRollback
        } else {
            AfterFailure::Kept
        };
        return Standing::FailedInSlot {
            check: check.clone(),
            then,
        };
    }
    if let Some(waiting) = &v.waits().proving {
        return Standing::Proving {
            waiting: waiting.clone(),
        };
    }
    if v.runs_target {
        return Standing::ComingBack;
    }
    if let Some(skew) = v.daemon_skew.as_ref().filter(|_| !v.owned.approved()) {
        return Standing::DaemonSkew(skew.clone());
    }
    if v.owned.approved() {
        let not_ready = node.and_then(api::node_health::not_ready_since);
        return if bn.is_some_and(BootcNode::awaits_retry) {
            Standing::RebootFailed
        } else if let Some(since) = not_ready {
            Standing::Rebooting {
                not_ready: true,
                since,
            }
        } else if v.daemon_phase == Some(DaemonPhase::Rebooting) {
            Standing::Rebooting {
                not_ready: false,
                since: bn.and_then(BootcNode::phase_since),
            }
        } else {
            Standing::Approved
        };
    }
    if !crate::reboot::slots::holds_slot(node, bn, &facts.pool.name) {
        // No record of the slot yet: this plan hands it out.
        Standing::TakingSlot
    } else if v.held_by_pause {
        Standing::HeldByPause
    } else if v.held_by_fleet_stop {
        Standing::HeldByFleetStop
    } else if v.draining {
        Standing::Draining {
            blocked: v.waits().drain_blocked.clone(),
            failed: v.waits().drain_failure.clone(),
        }
    } else {
        Standing::StagingInSlot
    }
}

/// How long from `since` to `now`, as a person says it ("45s", "3m",
/// "5h", "2d").
pub fn age(since: Timestamp, now: Timestamp) -> String {
    let secs = now.duration_since(since).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// The member a headline is about: its name, its BootcNode (for how long
/// it has been in its phase) and the time.
#[derive(Clone, Copy, Debug)]
pub struct About<'a> {
    pub name: &'a str,
    pub bn: Option<&'a BootcNode>,
    pub now: Timestamp,
}

impl About<'_> {
    /// " for 3m": how long its daemon has been in its phase.
    fn since(&self) -> String {
        self.bn
            .and_then(BootcNode::phase_since)
            .map_or(String::new(), |t| format!(" for {}", age(t, self.now)))
    }

    fn phase(&self) -> String {
        match self.bn.and_then(BootcNode::phase) {
            Some(p) => p.to_string(),
            None => "unknown".to_owned(),
        }
    }
}

impl Standing {
    /// The one line that says where the member stands and what would move
    /// it (`kubectl bootc why`'s first line, `status`'s WHY column, the
    /// members a preview leaves behind).
    pub fn headline(&self, about: About<'_>, pool: &Pool) -> String {
        let name = about.name;
        let since = about.since();
        match self {
            Standing::UpToDate => format!("up to date: runs the target {}", pool.target),
            Standing::OnTargetDegraded => format!("runs the target {}", pool.target),
            Standing::InConflict { pools } => conflict(name, &pool.name, pools),
            Standing::HostUpdaters { units } => crate::holds::updaters::message(name, units),
            Standing::DaemonSkew(skew) => crate::holds::daemons::message(name, skew),
            Standing::HostIncompatible { why } => {
                format!("bootc cannot update its host from an image: {why}")
            }
            Standing::FailedHealth { check } => format!(
                "failed its health gate (spec.health): {check}; the pool gives this image to no node: `kubectl bootc retry {name}` judges it again, or point the pool at another image"
            ),
            Standing::TargetFailed => format!(
                "the target failed its health gate for pool {} (spec.health): no node is given it; a new image, or `kubectl bootc retry {}`, clears it",
                pool.name, pool.name
            ),
            Standing::NotTold { unlocked } => not_told(pool, *unlocked),
            Standing::DaemonDown { pod } => format!(
                "its daemon cannot run, so nothing is asked of the node: {pod}; fix the pod (`kubectl describe pod`), the daemon's log says why it exits"
            ),
            Standing::DaemonBehind {
                generation,
                observed,
            } => format!(
                "its daemon has not answered its spec yet (generation {generation}, last status for {observed}): is the bootc-daemon pod running on {name}?"
            ),
            Standing::Staging => format!("staging: downloading the target{since}"),
            Standing::Degraded => "a Degraded node is given no reboot slot".to_owned(),
            Standing::Told { .. } => format!(
                "told the target, its daemon in phase {}{since}",
                about.phase()
            ),
            Standing::Skipped { why } => format!(
                "skipped for this target: its drain failed ({why}) and the pool releases such nodes (spec.rollout.onDrainTimeout: Release); `kubectl bootc retry {name}` drains it again"
            ),
            Standing::Unfit(unfit) => unfit.says().to_owned(),
            Standing::TakingSlot => format!(
                "staged{since}, a reboot slot is free for it: it takes it now (cordoned, then drained)"
            ),
            Standing::Draining { blocked, failed } => draining(blocked, failed),
            Standing::StagingInSlot => format!("in a reboot slot, still staging the target{since}"),
            Standing::HeldByPause => match pool.pause.ends() {
                Some(at) => format!(
                    "held by the pause: in a reboot slot (cordoned), not approved to boot until {at} (spec.rollout.pausedUntil), in {}",
                    age(about.now, at)
                ),
                None => format!(
                    "held by the pause: in a reboot slot (cordoned), not approved to boot until `kubectl bootc resume {}`",
                    pool.name
                ),
            },
            Standing::Approved => format!(
                "approved to boot, waiting for its daemon to apply (phase {}{since})",
                about.phase()
            ),
            Standing::Rebooting { not_ready, since } => rebooting(*not_ready, *since, about.now),
            Standing::RebootFailed => format!(
                "approved to boot, but its reboot (or apply) failed: `kubectl bootc retry {name}` tries the same image again, or point the pool at another image"
            ),
            Standing::Proving { waiting } => format!(
                "back on the target, proving it in its reboot slot (spec.health): {waiting}"
            ),
            Standing::ComingBack => "back on the target in its reboot slot: the slot is released once the Node is Ready and uncordoned".to_owned(),
            Standing::FailedInSlot { check, then } => format!(
                "failed its health gate (spec.health): {check}; {}",
                then.says(name)
            ),
            Standing::Paused => format!(
                "the pool is paused (spec.rollout.paused): staged, but no new reboot slot is handed out until `kubectl bootc resume {}`",
                pool.name
            ),
            Standing::FleetStopped => fleet_stopped(pool),
            Standing::HeldByFleetStop => held_by_fleet_stop(pool),
            Standing::PoolDeleting => pool_deleting(name),
            Standing::PausedUntil { until } => format!(
                "the pool is paused until {until} (spec.rollout.pausedUntil), in {}: staged, but no new reboot slot is handed out before; then the rollout goes on by itself",
                age(about.now, *until)
            ),
            Standing::Halted => format!(
                "the rollout is halted: {} nodes in reboot slots are unhealthy (Degraded or not Ready): {}",
                pool.unhealthy_in_slots.len(),
                pool.unhealthy_in_slots.join(", ")
            ),
            Standing::Held { .. }
            | Standing::BlockingPod { .. }
            | Standing::WaitingForDependencies
            | Standing::OrderUnreadable
            | Standing::WaitingForTurn { .. }
            | Standing::CanaryStep
            | Standing::Gated
            | Standing::OutsideWindow
            | Standing::Blackout
            | Standing::NoSlots
            | Standing::WaitingForBudget
            | Standing::WaitingForSlot => {
                format!("staged{since}, {}", held_by(self, pool, about.now))
            }
        }
    }
}

/// What holds a staged member back from a slot, after "staged for 3m, "
/// (the standings [`Standing::headline`] words so).
fn held_by(standing: &Standing, pool: &Pool, now: Timestamp) -> String {
    match standing {
        Standing::Held { holds } => format!(
            "held: given no reboot slot while its Node carries {}; it takes one once they are removed",
            holds.join(", ")
        ),
        Standing::BlockingPod { pod } => format!(
            "its Node runs {pod}, a blocking pod ({}): given no reboot slot until it is gone",
            crate::holds::gates::BLOCKING_PODS_FIELD
        ),
        Standing::WaitingForDependencies => pool.dependencies.message(),
        Standing::OrderUnreadable => {
            "spec.rollout.order cannot be read (see the pool's Degraded): no new reboot slot"
                .to_owned()
        }
        Standing::WaitingForTurn { group } => turn(pool, *group),
        Standing::CanaryStep => format!(
            "no room in the canary step (spec.rollout.batches): {}",
            pool.batch.as_deref().unwrap_or("the step is full")
        ),
        Standing::Gated => format!("held by the pool's gate: {}", pool.gate.message()),
        Standing::OutsideWindow => outside_window(pool.window, now),
        Standing::Blackout => blackout(pool.window, now),
        Standing::NoSlots => {
            "maxUnavailable is 0: members stage, none is given a reboot slot".to_owned()
        }
        Standing::WaitingForBudget => format!(
            "no new reboot slot while these nodes are unavailable: {}",
            unavailable(pool)
        ),
        _ => format!("waiting for a reboot slot: {}", slot_holders(pool)),
    }
}

fn conflict(name: &str, own: &str, others: &[String]) -> String {
    let mut pools: Vec<&str> = others.iter().map(String::as_str).collect();
    pools.push(own);
    pools.sort_unstable();
    pools.dedup();
    format!(
        "in conflict: pools {} all claim {name}, and a node belongs to one pool only (the pools say Degraded/{}): it gets no new image or reboot slot until one pool alone selects it; change the others' spec.nodeSelector, or the Node's labels",
        pools.join(", "),
        api::Reason::NodeConflict
    )
}

fn not_told(pool: &Pool, unlocked: bool) -> String {
    let mut bounds = Vec::new();
    if let Some(n) = pool.max_concurrent_staging {
        bounds.push(format!(
            "maxConcurrentStaging {n} (staging now: {})",
            list(&pool.staging_now)
        ));
    }
    if let Some(n) = pool.stage_ahead {
        bounds.push(format!("stageAhead {n} (beyond the free reboot slots)"));
    }
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

fn draining(blocked: &Option<String>, failed: &Option<String>) -> String {
    let mut s = "in a reboot slot: cordoned and draining (pods are evicted)".to_owned();
    if let Some(b) = blocked {
        s.push_str(&format!(
            "; an eviction refused by a PodDisruptionBudget (retrying): {b}"
        ));
    }
    if let Some(f) = failed {
        s.push_str(&format!("; its drain failed, tried again: {f}"));
    }
    s
}

fn rebooting(not_ready: bool, since: Option<Timestamp>, now: Timestamp) -> String {
    let how_long = since.map_or(String::new(), |t| format!(" for {}", age(t, now)));
    if not_ready {
        format!("rebooting: approved to boot, the Node NotReady{how_long}")
    } else {
        format!("rebooting: its daemon applies the target{how_long}")
    }
}

fn turn(pool: &Pool, group: usize) -> String {
    let name = |g: usize| {
        pool.groups
            .get(g)
            .cloned()
            .unwrap_or_else(|| "the nodes in no group of spec.rollout.order".to_owned())
    };
    match &pool.turn {
        Some((turn, behind)) => format!(
            "waiting for its turn: it is in {}, and {turn} has nodes not yet on the target: {}",
            name(group),
            behind.join(", ")
        ),
        None => format!("waiting for its turn: it is in {}", name(group)),
    }
}

fn pool_deleting(name: &str) -> String {
    format!(
        "the pool is being deleted (spec.onDelete: Finish): the nodes in its reboot slots finish, no new slot is handed out, and {name} leaves the pool on the image it runs"
    )
}

fn held_by_fleet_stop(pool: &Pool) -> String {
    format!(
        "held by the fleet's switch ({}: {}): in a reboot slot (cordoned), not approved to boot until `kubectl bootc resume --all`",
        api::labels::FLEET_STOP_ANNOTATION,
        pool.fleet_stop.as_deref().unwrap_or_default()
    )
}

fn fleet_stopped(pool: &Pool) -> String {
    format!(
        "the fleet is stopped ({}: {}): staged, but no pool hands out a new reboot slot until `kubectl bootc resume --all`",
        api::labels::FLEET_STOP_ANNOTATION,
        pool.fleet_stop.as_deref().unwrap_or_default()
    )
}

fn blackout(window: Window, now: Timestamp) -> String {
    let next = match window {
        Window::Blackout {
            ends: Some(ends),
            opens,
        } => {
            let from = opens.map_or_else(
                || "no window opens after it".to_owned(),
                |at| format!("new slots from {at}, in {}", age(now, at)),
            );
            format!("it ends at {ends}, in {}; {from}", age(now, ends))
        }
        _ => "a blackout cannot be read (see the pool's Degraded)".to_owned(),
    };
    format!(
        "in a blackout of the pool (spec.rollout.blackouts): staged, but no new reboot slot until it ends; {next}"
    )
}

fn outside_window(window: Window, now: Timestamp) -> String {
    let next = match window {
        Window::Closed { opens: Some(at) } => {
            format!("the next opens at {at}, in {}", age(now, at))
        }
        _ => "a window cannot be read (see the pool's Degraded)".to_owned(),
    };
    format!(
        "outside the pool's maintenance windows (spec.rollout.maintenanceWindows): no new reboot slot until one opens; {next}"
    )
}

fn unavailable(pool: &Pool) -> String {
    let names: Vec<String> = pool
        .unavailable
        .iter()
        .map(|(n, why)| format!("{n} ({})", why.as_str()))
        .collect();
    list(&names)
}

/// Who uses the pool's disruption budget, as the plan counts it: "maxUnavailable 1;
/// slots held by n2 (Rebooting)[; also unavailable: n3 (NotReady)]".
pub fn slot_holders(pool: &Pool) -> String {
    let mut holders: Vec<String> = pool
        .holders
        .iter()
        .map(|(n, phase)| match phase {
            Some(p) => format!("{n} ({p})"),
            None => format!("{n} (unknown)"),
        })
        .collect();
    holders.extend(
        pool.not_back
            .iter()
            .map(|n| format!("{n} (disrupted, not back yet)")),
    );
    let mut text = format!(
        "maxUnavailable {}; slots held by {}",
        pool.max_unavailable,
        list(&holders)
    );
    if !pool.unavailable.is_empty() {
        text.push_str(&format!("; also unavailable: {}", unavailable(pool)));
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

impl Unfit {
    fn says(self) -> &'static str {
        match self {
            Unfit::NoNode => "a member without its Node is given no reboot slot",
            Unfit::NotReady => "a NotReady node is given no reboot slot until it is Ready",
            Unfit::Deleting => "a Node being deleted is given no reboot slot",
        }
    }
}

impl AfterFailure {
    fn says(self, name: &str) -> String {
        match self {
            AfterFailure::RollingBack => {
                "it is booting the image it ran before (onFailure: Rollback)".to_owned()
            }
            AfterFailure::NoRollback => {
                "bootc reports no image it ran before: it stays in its reboot slot".to_owned()
            }
            AfterFailure::Kept => format!(
                "it stays in its reboot slot, cordoned, for a person: `kubectl bootc retry {name}` judges it again, or point the pool at another image"
            ),
        }
    }
}
