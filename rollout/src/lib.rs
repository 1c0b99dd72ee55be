//! The rollout's decisions: pure functions of what the cluster shows.
//!
//! This crate has no client, no runtime and no clock of its own (the time is
//! an input). The controller plans with it, and `kubectl bootc` answers
//! `why` and `status` with the same functions, so the two cannot disagree.
//! It may import only `api`.
//!
//! [`plan`] takes everything the controller knows about one pool (the pool,
//! the Nodes its selector matches and the Nodes of the BootcNodes it owns,
//! those BootcNodes, the other pools, the pull secret's hash, the drains in
//! flight and the time) and returns the writes that bring the world closer to
//! the pool's intent, the events to publish and the status to report. It is
//! a pipeline of named steps, each the one home of its rules
//! (`docs/design.md` maps every rule to its step):
//!
//! 1. [`target`]: the image in force, or the previous one kept (fail closed);
//! 2. [`pull_secret`]: the credentials the nodes are told about;
//! 3. [`membership`]: members, conflicts, and the nodes that leave
//!    ([`leaving`]);
//! 4. [`budget`]: how many reboot slots `maxUnavailable` gives;
//! 5. [`verdict`]: each member's spec ([`spec`]), state ([`state`]), slot
//!    release or hold ([`slots`], [`halt`]), drain and approval; then who
//!    is newly told the target, within the slots the budget leaves free
//!    ([`spec::tell`]);
//! 6. [`slots`]: free slots handed to staged candidates within the budget,
//!    then a cordon of ours left outside any slot lifted ([`cordon`]);
//! 7. [`order`]: the writes, grouped by node and in the order that keeps
//!    the disruption bound, which the actuator only executes;
//! 8. [`status`]: the pool's status, conditions and events.
//!
//! The rules those steps apply, each in its own module:
//! [`disruption`] (who counts as disrupted, when a node is back, when a new
//! slot may be handed out), [`staging`] (which members are told the target),
//! [`stuck`] (each phase a node waits in, its deadline and next step),
//! [`health`] (the kstatus conditions), and [`cordon`] (the cordon a slot
//! puts on a Node, and its restoration).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::labels::IN_REBOOT_SLOT_ANNOTATION;
use api::{BootcNode, BootcNodePool, BootcNodePoolStatus, BootcNodeSpec};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

pub mod budget;
pub mod cordon;
pub mod disruption;
pub mod halt;
pub mod health;
pub mod leaving;
pub mod membership;
mod memo;
pub mod order;
mod owned;
pub mod pull_secret;
pub mod slots;
pub mod spec;
pub mod staging;
pub mod state;
pub mod status;
pub mod stuck;
pub mod target;
pub mod verdict;
mod view;

pub use budget::max_unavailable;
pub use halt::NOT_READY_WHILE_REBOOTING;
pub use leaving::plan_cleanup;
pub use membership::{owned_by, owner_pool, parse_selector, selects};
pub use memo::Memo;
pub use order::Writes;
pub use state::{NodeState, classify, runs_target};
pub use status::{COUNTS_MIN_INTERVAL, target_summary};
pub use verdict::DRAIN_RETRY;

/// The image the pool's nodes should run, from the `resolve_target` step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `sha256:...`: for a multi-arch image, the index digest.
    pub digest: String,
    /// `repository@digest`: what BootcNodes are told to run.
    pub image: String,
}

/// Why the pool has no (new) target: a Degraded reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetProblem {
    pub reason: &'static str,
    pub message: String,
}

/// The pool's pull secret as the controller's cache has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretSeen {
    /// Its version (`api::pull_secret::version`), what the nodes are told.
    pub version: String,
    /// Does it opt in to this pool (`api::pull_secret::allows`)?
    pub allows_pool: bool,
}

/// What the controller knows about a drain of a node of this pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainPhase {
    Running,
    Succeeded,
    /// Gave up (timeout or error) at `at`; `message` names what blocked.
    Failed {
        message: String,
        at: Timestamp,
    },
}

/// Everything [`plan`] decides from.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    pub pool: &'a BootcNodePool,
    /// The outcome of target resolution. On a problem the previous target in
    /// `pool.status` stays in force (fail closed).
    pub target: Result<Target, TargetProblem>,
    /// The Nodes the selector matches, plus the Nodes of owned BootcNodes.
    pub nodes: Vec<&'a Node>,
    /// The BootcNodes named after those Nodes, and every BootcNode this pool owns.
    pub bootc_nodes: Vec<&'a BootcNode>,
    /// Every other pool (for NodeConflict).
    pub other_pools: Vec<&'a BootcNodePool>,
    /// The referenced pull secret, if it exists.
    pub pull_secret: Option<SecretSeen>,
    /// Drains of this pool's nodes, by node name.
    pub drains: BTreeMap<String, DrainPhase>,
    /// The operator's namespace: the only one pull secrets may live in.
    pub operator_namespace: &'a str,
    /// When this controller last wrote the pool's status (None: not since
    /// it started).
    pub last_status_write: Option<Timestamp>,
    pub now: Timestamp,
    /// When each member entered the phase it waits in, as far as the
    /// controller remembers (see [`stuck`]).
    /// Shared with the runtime, which keeps it between plans.
    pub phase_clock: std::sync::Arc<stuck::Clock>,
    /// The stuck deadlines in force.
    pub deadlines: stuck::Deadlines,
}

/// Changes to a Node's `bootc.dev/managed` label, `spec.unschedulable` and
/// the pool's marks on it. Every field is decided by the planner (see
/// [`cordon`]); the actuator turns each into its merge patch as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePatch {
    /// Some(true): set the managed label; Some(false): remove it.
    pub managed: Option<bool>,
    /// Some(value): set `spec.unschedulable`.
    pub unschedulable: Option<bool>,
    /// Some(true): mark the cordon as the pool's own
    /// (`bootc.dev/cordoned-by: <pool>`); Some(false): remove the mark.
    pub mark: Option<bool>,
    /// Some(true): write the pool's disruption record
    /// (`bootc.dev/disrupted-by`); Some(false): remove it (the node is back).
    pub disrupted: Option<bool>,
}

/// One write; a node's writes are made in the order [`order`] gives them.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Server-side apply of the fields the controller owns on a BootcNode
    /// (owner reference, slot annotations, spec).
    ApplyBootcNode(Box<BootcNodeApply>),
    DeleteBootcNode {
        name: String,
    },
    PatchNode {
        name: String,
        patch: NodePatch,
    },
    StartDrain {
        node: String,
    },
    CancelDrain {
        node: String,
    },
}

impl Write {
    /// The node the write is about.
    pub fn node(&self) -> &str {
        match self {
            Write::ApplyBootcNode(bn) => &bn.name,
            Write::DeleteBootcNode { name } | Write::PatchNode { name, .. } => name,
            Write::StartDrain { node } | Write::CancelDrain { node } => node,
        }
    }
}

/// The fields the controller owns on a BootcNode: what it server-side
/// applies (with the owner reference to the pool).
#[derive(Clone, Debug, PartialEq)]
pub struct BootcNodeApply {
    pub name: String,
    pub owner: OwnerReference,
    /// The slot and prior-cordon annotations.
    pub annotations: BTreeMap<String, String>,
    pub spec: BootcNodeSpec,
}

impl BootcNodeApply {
    pub fn in_slot(&self) -> bool {
        self.annotations.contains_key(IN_REBOOT_SLOT_ANNOTATION)
    }
}

/// A Kubernetes Event to publish once the writes before it succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub reason: &'static str,
    pub message: String,
    pub warning: bool,
    /// The node concerned, if any.
    pub node: Option<String>,
}

/// Event reasons (in `api`, where `kubectl bootc history` reads them too).
pub use api::event_reasons;

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
}

/// What a deleted pool's cleanup does now, and what it waits for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cleanup {
    pub writes: Writes,
    /// Nodes this pool disrupted that are not back yet: their cleanup (and
    /// the pool's finalizer) waits for them, so that they keep counting as
    /// disrupted while they reboot.
    pub waiting: Vec<String>,
}

/// A Degraded problem: its reason and message (see [`status`]).
pub type Problem = (&'static str, String);

/// Decides what to do for one pool, from scratch: the pipeline of the module
/// docs. The reference for [`plan_incremental`].
pub fn plan(input: &PlanInput<'_>) -> Plan {
    plan_incremental(input, &mut Memo::default())
}

/// [`plan`], reusing the per-node answers `memo` kept from the previous
/// plan of the same pool where their inputs have not changed (see [`memo`]).
pub fn plan_incremental(input: &PlanInput<'_>, memo: &mut Memo) -> Plan {
    let view = view::View::of(input);
    let mut problems: Vec<Problem> = Vec::new();
    let target = target::in_force(&input.target, &view.current, &mut problems);
    let secret = pull_secret::checked(input, &mut problems);
    memo.begin(memo::PoolFacts::of(&view, target.as_ref(), &secret), &view);
    let members = membership::of(&view, target.is_some(), memo, &mut problems);
    let leavers = leaving::leavers(&view, &members);
    let slots = budget::slots(&view.pool.spec.rollout, members.names.len(), &mut problems);
    let rollout = match &target {
        Some(target) => {
            let mut rollout =
                verdict::verdicts(&view, target, &members, &leavers, &secret, slots, memo);
            spec::tell(&view, target, &mut rollout);
            slots::hand_out(&view, &mut rollout);
            cordon::lift_strays(&view, &mut rollout);
            rollout
        }
        None => {
            target::report_none(view.pool, &mut problems);
            verdict::Rollout::default()
        }
    };
    let writes = order::writes(&view, &leavers.writes, &rollout);
    status::report(
        &view,
        status::Facts {
            target: target.as_ref(),
            members: &members,
            leavers,
            rollout,
            slots,
        },
        problems,
        writes,
    )
}

#[cfg(any(test, feature = "test-support"))]
pub mod test_rng;
#[cfg(test)]
mod tests;
