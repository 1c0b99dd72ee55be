//! Kubernetes' Node lifecycle conditions (KEP-5683), set on a member's Node
//! while it holds a reboot slot when the controller runs with
//! `--node-lifecycle-conditions` (off by default: each change is one more
//! write, a status patch of the Node):
//!
//! * in a slot and draining: `MaintenanceInProgress` and `DrainInProgress`
//!   True, `Drained` False;
//! * in a slot and drained (its drain succeeded, or it is approved to
//!   boot): `MaintenanceInProgress` and `Drained` True, `DrainInProgress`
//!   False;
//! * outside a slot: each one the pool set (reason
//!   [`api::node_health::LIFECYCLE_REASON`]) goes back to False; one another
//!   actor set is left alone, as a cordon of someone else's is. A release
//!   and a node leaving the pool clear them even with the flag off (it may
//!   have been turned off while nodes held slots).
//!
//! Only what differs from the Node is written, all in one patch; the
//! conditions the pool sets carry its reason.

use api::Node;
use api::node_health::lifecycle_condition;
use api::node_health::{DRAIN_IN_PROGRESS, DRAINED, LIFECYCLE_REASON, MAINTENANCE_IN_PROGRESS};

use crate::facts::Rollout;
use crate::model::{DrainPhase, LifecycleCondition, Write};
use crate::view::View;

/// Where a member stands, as the lifecycle conditions tell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// In a reboot slot, its drain not yet done.
    Draining,
    /// In a reboot slot, drained (or approved to boot).
    Drained,
    /// Outside any slot.
    Out,
}

impl Stage {
    pub fn of(in_slot: bool, drained: bool) -> Stage {
        match (in_slot, drained) {
            (false, _) => Stage::Out,
            (true, false) => Stage::Draining,
            (true, true) => Stage::Drained,
        }
    }

    /// Each condition's status at this stage (None outside a slot: only
    /// the pool's own go back to False).
    fn wanted(self) -> [(&'static str, Option<bool>); 3] {
        let (maintenance, draining, drained) = match self {
            Stage::Draining => (Some(true), Some(true), Some(false)),
            Stage::Drained => (Some(true), Some(false), Some(true)),
            Stage::Out => (None, None, None),
        };
        [
            (MAINTENANCE_IN_PROGRESS, maintenance),
            (DRAIN_IN_PROGRESS, draining),
            (DRAINED, drained),
        ]
    }
}

/// The step after the slots are handed out: each member's Node told its
/// stage, where it differs.
pub(crate) fn mark(view: &View<'_>, rollout: &mut Rollout<'_>) {
    for entry in rollout.verdicts.iter_mut() {
        let Some(node) = entry.row.node else { continue };
        let v = &entry.verdict;
        // A release already says it (see the module docs).
        let told = v
            .post
            .iter()
            .any(|w| matches!(w, Write::PatchNodeConditions { .. }));
        if told {
            continue;
        }
        let drain_done = matches!(
            view.input.drains.get(entry.name),
            Some(DrainPhase::Succeeded)
        );
        let stage = Stage::of(v.owned.in_slot, v.owned.approved() || drain_done);
        if let Some(write) = write(entry.name, node, stage) {
            entry.verdict_mut().post.push(write);
        }
    }
}

/// The write that tells `node` its `stage`, if it says something else.
pub(crate) fn write(name: &str, node: &Node, stage: Stage) -> Option<Write> {
    let conditions = changes(node, stage);
    (!conditions.is_empty()).then(|| Write::PatchNodeConditions {
        name: name.to_owned(),
        conditions,
    })
}

/// The conditions to write on `node` for `stage`: those that differ (empty:
/// nothing to write).
pub fn changes(node: &Node, stage: Stage) -> Vec<LifecycleCondition> {
    stage
        .wanted()
        .into_iter()
        .filter_map(|(type_, want)| {
            let have = lifecycle_condition(node, type_);
            let status = match (want, have) {
                // Outside a slot: back to False, only those the pool set.
                (None, Some((true, reason))) if reason == LIFECYCLE_REASON => false,
                (None, _) => return None,
                (Some(want), Some((have, reason)))
                    if want == have && reason == LIFECYCLE_REASON =>
                {
                    return None;
                }
                // Absent and not wanted True: nothing to say.
                (Some(false), None) => return None,
                (Some(want), _) => want,
            };
            Some(LifecycleCondition { type_, status })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::test_support::NodeBuilder;

    fn node(conditions: &[(&str, bool, &str)]) -> Node {
        conditions
            .iter()
            .fold(NodeBuilder::new("n"), |n, (t, s, r)| {
                n.condition(t, if *s { "True" } else { "False" }).reason(r)
            })
            .build()
    }

    fn says(changes: Vec<LifecycleCondition>) -> Vec<(&'static str, bool)> {
        changes.into_iter().map(|c| (c.type_, c.status)).collect()
    }

    #[test]
    fn a_slot_says_maintenance_then_drained_and_its_end_clears_only_ours() {
        let ours = LIFECYCLE_REASON;
        let draining = [
            (MAINTENANCE_IN_PROGRESS, true, ours),
            (DRAIN_IN_PROGRESS, true, ours),
        ];
        let drained = [
            (MAINTENANCE_IN_PROGRESS, true, ours),
            (DRAIN_IN_PROGRESS, false, ours),
            (DRAINED, true, ours),
        ];
        // (what, the Node's conditions, the stage, what is written)
        type Row<'a> = (
            &'a str,
            Vec<(&'a str, bool, &'a str)>,
            Stage,
            Vec<(&'a str, bool)>,
        );
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("a new slot", vec![], Stage::Draining,
                vec![(MAINTENANCE_IN_PROGRESS, true), (DRAIN_IN_PROGRESS, true)]),
            ("still draining: nothing", draining.to_vec(), Stage::Draining, vec![]),
            ("drained", draining.to_vec(), Stage::Drained,
                vec![(DRAIN_IN_PROGRESS, false), (DRAINED, true)]),
            ("still drained: nothing", drained.to_vec(), Stage::Drained, vec![]),
            ("released", drained.to_vec(), Stage::Out,
                vec![(MAINTENANCE_IN_PROGRESS, false), (DRAINED, false)]),
            ("never in a slot: nothing", vec![], Stage::Out, vec![]),
            ("another actor's maintenance is left alone", vec![(MAINTENANCE_IN_PROGRESS, true, "Firmware")], Stage::Out, vec![]),
            ("a slot takes another actor's condition over", vec![(DRAIN_IN_PROGRESS, true, "KubectlDrain")], Stage::Draining,
                vec![(MAINTENANCE_IN_PROGRESS, true), (DRAIN_IN_PROGRESS, true)]),
        ];
        for (what, conditions, stage, want) in rows {
            assert_eq!(says(changes(&node(&conditions), stage)), want, "{what}");
        }
    }
}
