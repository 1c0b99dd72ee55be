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
//! 2. [`pull_secret`](members::pull_secret): the credentials the nodes are told about;
//! 3. [`membership`](members::membership): members, conflicts, and the nodes that leave
//!    ([`leaving`](members::leaving));
//! 4. [`budget`](holds::budget): how many reboot slots `maxUnavailable` gives and how
//!    many unhealthy holders `maxUnhealthy` tolerates; whether a new one
//!    may be handed out now: [`window`](holds::window) (maintenance windows),
//!    [`depends`](holds::depends) (the pools this one waits for) and [`gates`](holds::gates) (alerts,
//!    blocking pods); the node order ([`groups`](holds::groups));
//! 5. [`verdict`](reboot::verdict): each member's spec ([`spec`](members::spec)), state ([`state`](members::state)), slot
//!    release or hold ([`slots`](reboot::slots), [`halt`](holds::halt)), drain and approval; then who
//!    is newly told the target, within the slots the budget leaves free
//!    ([`spec::tell`](members::spec::tell));
//! 6. [`slots`](reboot::slots): free slots handed to the staged candidates of the group
//!    whose turn it is ([`groups`](holds::groups)) within the budget and the canary step
//!    ([`batches`](holds::batches)), then a cordon of
//!    ours left outside any slot lifted ([`cordon`](reboot::cordon)); with
//!    `--node-lifecycle-conditions`, each Node told its stage
//!    ([`lifecycle`](reboot::lifecycle));
//! 7. [`order`]: the writes, grouped by node and in the order that keeps
//!    the disruption bound, which the actuator only executes;
//! 8. [`status`]: where each member stands, and why ([`standing`]: decided
//!    once, rendered by the pool's status, the metrics and `kubectl
//!    bootc`), the pool's status, conditions and events.
//!
//! The rules those steps apply, each in its own module:
//! [`disruption`](holds::disruption) (who counts as disrupted, when a node is back, when a new
//! slot may be handed out), [`staging`](members::staging) (which members are told the target),
//! [`stuck`](reboot::stuck) (each phase a node waits in, its deadline and next step),
//! [`updaters`](holds::updaters) (a member whose host runs its own automatic updater is
//! refused: not told, no slot), [`daemons`](holds::daemons) (a member whose daemon speaks
//! a contract this controller does not drive: not told, never approved),
//! [`kstatus`] (the kstatus conditions), and [`cordon`](reboot::cordon) (the cordon a slot
//! puts on a Node, and its restoration).
//!
//! The rules live in three rooms: [`holds`] (what holds a node, a target or
//! new slots: windows, pauses, dependencies, gates, groups, batches, halts,
//! the budget, and the guards), [`members`] (who is in the pool, what each
//! runs and is told) and [`reboot`] (a slot's life: slots, verdicts,
//! cordons, the health gate, deadlines). Where a member stands, and why, is
//! decided once in [`standing`].
//!
//! No step reaches back: the plan's vocabulary is in [`model`] and the facts
//! one step hands to the next in `facts`, below every step; only the
//! pipeline (`pipeline.rs`) imports the steps, and only the preview of the
//! rollout ahead ([`preview`]) runs the pipeline again
//! (`tests/tests/layers.rs` checks that no import goes round in a circle).

// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod facts;
pub mod holds;
pub mod kstatus;
pub mod members;
mod memo;
pub mod model;
pub mod order;
mod pipeline;
pub mod preview;
pub mod reboot;
pub mod standing;
pub mod status;
pub mod target;
mod view;

pub use holds::budget::{max_unavailable, max_unhealthy};
pub use holds::halt::NOT_READY_WHILE_REBOOTING;
pub use members::leaving::{finishing, plan_cleanup};
pub use members::membership::{owned_by, owner_pool, parse_selector, selects};
pub use members::state::{NodeState, classify, runs_target};
pub use order::Writes;
pub use reboot::verdict::DRAIN_RETRY;
pub use status::{COUNTS_MIN_INTERVAL, target_summary};

pub use members::leaving::Cleanup;
pub use model::{
    BootcNodeApply, DrainPhase, LifecycleCondition, NodePatch, PlanInput, PlannedEvent, Problem,
    SecretSeen, Target, TargetProblem, Write, event_reasons,
};
pub use standing::{Standing, Standings};
pub use status::{Plan, Summary};

pub use pipeline::{Memo, plan, plan_incremental, releases};

#[cfg(any(test, feature = "test-support"))]
pub mod test_rng;
#[cfg(test)]
mod tests;
