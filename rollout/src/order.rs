//! Step 7, writes in a safe order. The actuator makes a plan's writes as
//! this module arranges them and decides nothing about their order:
//!
//! * One node's writes are made in order, stopping at its first failure, so
//!   each is safe to interrupt: entering a slot is one write (the cordon
//!   and the slot record on the Node), made before its drain starts;
//!   leaving a slot restores the Node (and removes the record) before the
//!   BootcNode's approval is withdrawn, and leaving the pool before the
//!   BootcNode goes.
//! * Different nodes' writes run concurrently, in two waves: nodes whose
//!   writes lift or keep a disruption (releases, approvals, new targets)
//!   before nodes whose writes add one (a cordon, a disruption record, a
//!   drain). So a slot is freed before the next one is taken, and at no
//!   instant are more nodes disrupted than `maxUnavailable`, even between
//!   two writes of one plan and when a wave of 100 slots turns over in one
//!   pass. Within the first wave, slot releases come first.

use std::collections::HashMap;

use crate::facts::{Entry, Rollout};
use crate::model::Write;
use crate::reboot::slots::holds_slot;
use crate::view::View;

/// A plan's writes: per node, in the node's order, in two waves (see the
/// module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Writes {
    waves: [Vec<Vec<Write>>; 2],
}

impl Writes {
    /// Groups `writes` by node (in order of first appearance, each node's
    /// in the given order) and splits the nodes into the two waves.
    pub(crate) fn grouped(writes: Vec<Write>) -> Self {
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut per_node: Vec<Vec<Write>> = Vec::new();
        for w in writes {
            let i = *index.entry(w.node().to_owned()).or_insert_with(|| {
                per_node.push(Vec::new());
                per_node.len() - 1
            });
            per_node[i].push(w);
        }
        let (second, first): (Vec<_>, Vec<_>) =
            per_node.into_iter().partition(|ws| ws.iter().any(disrupts));
        Writes {
            waves: [first, second],
        }
    }

    /// The waves, each a list of nodes' writes: every write of the first
    /// wave is made before any of the second starts.
    pub fn waves(&self) -> &[Vec<Vec<Write>>; 2] {
        &self.waves
    }

    /// Every write, in an order that keeps the guarantees of the module docs
    /// when made one at a time.
    pub fn iter(&self) -> impl Iterator<Item = &Write> {
        self.waves.iter().flatten().flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.waves.iter().all(Vec::is_empty)
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn contains(&self, w: &Write) -> bool {
        self.iter().any(|x| x == w)
    }
}

impl PartialEq<Vec<Write>> for Writes {
    fn eq(&self, other: &Vec<Write>) -> bool {
        self.iter().eq(other.iter())
    }
}

/// Does this write add a disruption (a cordon, a disruption record, a drain)?
fn disrupts(w: &Write) -> bool {
    match w {
        Write::PatchNode { patch, .. } => {
            patch.unschedulable == Some(true) || patch.disrupted == Some(true)
        }
        Write::StartDrain { .. } => true,
        _ => false,
    }
}

/// The plan's writes: the leavers', then each member's (writes before its
/// BootcNode apply, the apply if anything changed, writes after it), slot
/// releases first; then running drains of nodes that hold no slot stop.
pub(crate) fn writes(view: &View<'_>, leavers: &[Write], rollout: &Rollout<'_>) -> Writes {
    let mut flat = leavers.to_vec();
    let pool = view.pool_name.as_str();
    let releasing = |e: &&Entry<'_>| {
        !e.verdict.owned.in_slot
            && e.row.node.is_some()
            && e.row.bn.is_some()
            && holds_slot(e.row.node, e.row.bn, pool)
    };
    // Releases first, the rest in name order (a stable partition).
    let (mut members, rest): (Vec<_>, Vec<_>) = rollout.verdicts.iter().partition(releasing);
    members.extend(rest);
    for Entry { name, row, verdict } in members {
        flat.extend(verdict.pre.iter().cloned());
        if !verdict
            .applied
            .unwrap_or_else(|| verdict.owned.applied(row.bn))
        {
            let apply = verdict.owned.to_apply(name, view.pool);
            flat.push(Write::ApplyBootcNode(Box::new(apply)));
        }
        flat.extend(verdict.post.iter().cloned());
    }
    for (name, phase) in &view.input.drains {
        let slotted = rollout.verdicts.get(name).is_some_and(|v| v.owned.in_slot);
        let already = flat
            .iter()
            .any(|w| matches!(w, Write::CancelDrain { node } if node == name));
        if !slotted && !already && phase.running() {
            flat.push(Write::CancelDrain { node: name.clone() });
        }
    }
    Writes::grouped(flat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodePatch;

    fn patch(node: &str, patch: NodePatch) -> Write {
        Write::PatchNode {
            name: node.into(),
            patch,
        }
    }

    #[test]
    fn nodes_that_add_a_disruption_go_in_the_second_wave() {
        let take = || Write::StartDrain { node: "t".into() };
        let cancel = |n: &str| Write::CancelDrain { node: n.into() };
        let writes = Writes::grouped(vec![
            patch("t", NodePatch::SLOT_CORDON),
            patch("r", NodePatch::UNCORDON),
            take(),
            patch("a", NodePatch::record(true)),
            cancel("r"),
            cancel("x"),
        ]);
        let nodes = |wave: &[Vec<Write>]| -> Vec<String> {
            wave.iter().map(|ws| ws[0].node().to_owned()).collect()
        };
        let [first, second] = writes.waves();
        assert_eq!(nodes(first), ["r", "x"]);
        assert_eq!(nodes(second), ["t", "a"]);
        // A node's writes stay together and in order.
        assert_eq!(first[0], [patch("r", NodePatch::UNCORDON), cancel("r")]);
        assert_eq!(second[0], [patch("t", NodePatch::SLOT_CORDON), take()]);
        assert_eq!(writes.len(), 6);
    }
}
