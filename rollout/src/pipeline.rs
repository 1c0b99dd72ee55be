//! The pipeline of the crate docs: each step in turn, each reading what
//! the steps before found. The one module that imports every step.

use crate::facts::Rollout;
use crate::memo::{self, Answers};
use crate::model::{PlanInput, Problem, Write};
use crate::order::Writes;
use crate::status::{self, Plan, Spare, Summary};
use crate::{
    holds::budget, holds::depends, holds::gates, holds::groups, holds::window, members::leaving,
    members::membership, members::pull_secret, members::spec, order, reboot::cordon,
    reboot::health_gate, reboot::lifecycle, reboot::slots, reboot::verdict, target, view,
};

/// What one plan keeps for the next plan of the same pool: each node's
/// answers ([`memo`]), and the plan's per-member maps once handed back
/// ([`Memo::recycle`]).
#[derive(Clone, Debug, Default)]
pub struct Memo {
    answers: Answers,
    spare: Spare,
}

impl Memo {
    /// Hands a plan's summary back once read: the pool's next plan refills
    /// its per-member maps (each member's state and standing) in place, and
    /// copies no member's name again while membership holds.
    pub fn recycle(&mut self, summary: Summary) {
        self.spare = summary.into();
    }

    /// How many answers the last plan reused and computed (for the tests
    /// and logs).
    pub fn reused_and_computed(&self) -> (usize, usize) {
        (self.answers.reused, self.answers.computed)
    }
}

/// Decides what to do for one pool, from scratch: the pipeline of the module
/// docs. The reference for [`plan_incremental`].
pub fn plan(input: &PlanInput<'_>) -> Plan {
    plan_incremental(input, &mut Memo::default())
}

/// The slots a look at some of the pool's members frees now: the plan of
/// those members alone, reduced to the writes that lift a slot's record from
/// a Node ([`Write::frees_slot`]), each the first write the plan makes for
/// its node. The runtime looks at the members that changed while the pool
/// rests between two whole plans, so a node back on the target gives its
/// slot back within a look, not a whole plan later; the rest of its release
/// (the approval withdrawn, the drain and lifecycle conditions ended) waits
/// for the next whole plan.
///
/// Freeing a slot only lowers the disruption, and each such write is the one
/// the whole pool's plan would make first for its node: the verdict is the
/// member's own (its objects, its drain, the pool's target and spec). A test
/// checks it against [`plan`] of the whole pool after random events. The
/// one part of a verdict that reads other nodes' answers, the health gate's
/// pods, is the runtime's to give: it does not look at a pool with a gate.
pub fn releases(input: &PlanInput<'_>) -> Writes {
    let [first, _] = plan(input).writes.into_waves();
    let freeing = first
        .into_iter()
        .filter_map(|node| node.into_iter().next())
        .filter(Write::frees_slot)
        .collect();
    Writes::grouped(freeing)
}

/// [`plan`], reusing the per-node answers `memo` kept from the previous
/// plan of the same pool where their inputs have not changed (see [`memo`]).
pub fn plan_incremental(input: &PlanInput<'_>, kept: &mut Memo) -> Plan {
    let memo = &mut kept.answers;
    let view = view::View::of(input);
    let mut problems: Vec<Problem> = Vec::new();
    let mut target = target::in_force(&input.target, &view.current, &mut problems);
    if let Some((back, problem)) = target
        .as_ref()
        .and_then(|t| health_gate::pool_back_to(view.pool, t))
    {
        target = Some(back);
        problems.push(problem);
    }
    let secret = pull_secret::checked(input, &mut problems);
    memo.begin(memo::PoolFacts::of(&view, target.as_ref(), &secret), &view);
    let members = membership::of(&view, memo, &mut problems);
    let leavers = leaving::leavers(&view, &members);
    let limits = budget::limits(&view.pool.spec.rollout, members.names.len(), &mut problems);
    let window = window::of(&view.pool.spec.rollout, input.now, &mut problems);
    let dependencies = depends::check(view.pool, &input.other_pools, &mut problems);
    let groups = groups::Groups::of_pool(&view.pool.spec.rollout.order, &mut problems);
    let mut rollout = match &target {
        Some(target) => {
            let mut rollout =
                verdict::verdicts(&view, target, &members, &leavers, &secret, limits, memo);
            rollout.window = window;
            rollout.dependencies = dependencies;
            rollout.groups = groups;
            rollout.gate = gates::Gate::of(&input.gates);
            rollout.fleet_stop = input.gates.fleet_stop.clone();
            rollout.deleting = view.pool.metadata.deletion_timestamp.is_some();
            rollout.batch = verdict::batching(&view, target, &rollout, &mut problems);
            spec::tell(&view, target, &mut rollout);
            slots::hand_out(&view, &mut rollout);
            cordon::lift_strays(&view, &mut rollout);
            if input.node_lifecycle_conditions {
                lifecycle::mark(&view, &mut rollout);
            }
            rollout
        }
        None => {
            target::report_none(view.pool, &mut problems);
            Rollout::default()
        }
    };
    let writes = order::writes(&view, &leavers.writes, &mut rollout);
    status::report(
        &view,
        status::Facts {
            target: target.as_ref(),
            members: &members,
            leavers,
            rollout,
            slots: limits.slots,
            spare: std::mem::take(&mut kept.spare),
        },
        problems,
        writes,
    )
}
