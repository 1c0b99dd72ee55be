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
//! 4. [`budget`]: how many reboot slots `maxUnavailable` gives and how
//!    many unhealthy holders `maxUnhealthy` tolerates; whether a new one
//!    may be handed out now: [`window`] (maintenance windows),
//!    [`depends`] (the pools this one waits for) and [`gates`] (alerts,
//!    blocking pods); the node order ([`groups`]);
//! 5. [`verdict`]: each member's spec ([`spec`]), state ([`state`]), slot
//!    release or hold ([`slots`], [`halt`]), drain and approval; then who
//!    is newly told the target, within the slots the budget leaves free
//!    ([`spec::tell`]);
//! 6. [`slots`]: free slots handed to the staged candidates of the group
//!    whose turn it is ([`groups`]) within the budget and the canary step
//!    ([`batches`]), then a cordon of
//!    ours left outside any slot lifted ([`cordon`]); with
//!    `--node-lifecycle-conditions`, each Node told its stage
//!    ([`lifecycle`]);
//! 7. [`order`]: the writes, grouped by node and in the order that keeps
//!    the disruption bound, which the actuator only executes;
//! 8. [`status`]: where each member stands, and why ([`standing`]: decided
//!    once, rendered by the pool's status, the metrics and `kubectl
//!    bootc`), the pool's status, conditions and events.
//!
//! The rules those steps apply, each in its own module:
//! [`disruption`] (who counts as disrupted, when a node is back, when a new
//! slot may be handed out), [`staging`] (which members are told the target),
//! [`stuck`] (each phase a node waits in, its deadline and next step),
//! [`updaters`] (a member whose host runs its own automatic updater is
//! refused: not told, no slot), [`daemons`] (a member whose daemon speaks
//! a contract this controller does not drive: not told, never approved),
//! [`health`] (the kstatus conditions), and [`cordon`] (the cordon a slot
//! puts on a Node, and its restoration).
//!
//! No step reaches back: the plan's vocabulary is in [`model`] and the facts
//! one step hands to the next in `facts`, below every step; only the
//! pipeline (`pipeline.rs`) imports the steps, and only the preview of the
//! rollout ahead ([`preview`]) runs the pipeline again
//! (`tests/tests/layers.rs` checks that no import goes round in a circle).

// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod batches;
pub mod budget;
pub mod cordon;
pub mod daemons;
pub mod depends;
pub mod disruption;
mod facts;
pub mod gates;
pub mod groups;
pub mod halt;
pub mod health;
pub mod history;
pub mod leaving;
pub mod lifecycle;
pub mod membership;
mod memo;
pub mod model;
pub mod order;
pub mod os_guard;
mod owned;
pub mod pause;
mod pipeline;
pub mod preview;
pub mod proving;
pub mod pull_secret;
mod selector;
pub mod slots;
pub mod spec;
pub mod staging;
pub mod standing;
pub mod state;
pub mod status;
pub mod stuck;
pub mod target;
pub mod updaters;
pub mod verdict;
mod view;
pub mod window;

pub use budget::{max_unavailable, max_unhealthy};
pub use halt::NOT_READY_WHILE_REBOOTING;
pub use leaving::plan_cleanup;
pub use membership::{owned_by, owner_pool, parse_selector, selects};
pub use memo::Memo;
pub use order::Writes;
pub use state::{NodeState, classify, runs_target};
pub use status::{COUNTS_MIN_INTERVAL, target_summary};
pub use verdict::DRAIN_RETRY;

pub use leaving::Cleanup;
pub use model::{
    BootcNodeApply, DrainPhase, LifecycleCondition, NodePatch, PlanInput, PlannedEvent, Problem,
    SecretSeen, Target, TargetProblem, Write, event_reasons,
};
pub use standing::{Standing, Standings};
pub use status::{Plan, Summary};

pub use pipeline::{plan, plan_incremental};

#[cfg(any(test, feature = "test-support"))]
pub mod test_rng;
#[cfg(test)]
mod tests;
