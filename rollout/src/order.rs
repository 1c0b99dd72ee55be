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

use std::sync::Arc;

use crate::facts::{Entry, MemberWrites, Rollout};
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
        let (at, nodes) = node_groups(&writes);
        let mut per_node: Vec<Vec<Write>> = vec![Vec::new(); nodes];
        for (w, i) in writes.into_iter().zip(at) {
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

    /// The waves, owned: a maker drops each node's writes once made.
    pub fn into_waves(self) -> [Vec<Vec<Write>>; 2] {
        self.waves
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

/// Each write's node, numbered in order of first appearance, and how
/// many nodes (the names borrowed: nothing is copied to group them).
fn node_groups(writes: &[Write]) -> (Vec<usize>, usize) {
    let mut index: foldhash::HashMap<&str, usize> = foldhash::HashMap::default();
    let at = writes
        .iter()
        .map(|w| {
            let next = index.len();
            *index.entry(w.node()).or_insert(next)
        })
        .collect();
    (at, index.len())
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

/// The plan's writes: the leavers', then each member's ([`member`]),
/// slot releases first; then running drains of nodes that hold no slot
/// stop.
pub(crate) fn writes(view: &View<'_>, leavers: &[Write], rollout: &mut Rollout<'_>) -> Writes {
    let mut flat = leavers.to_vec();
    // Releases first, the rest in name order.
    let mut rest = Vec::new();
    for e in rollout.verdicts.iter_mut() {
        let MemberWrites { releasing, writes } = decided(view, e);
        if releasing {
            flat.extend(writes);
        } else {
            rest.extend(writes);
        }
    }
    flat.append(&mut rest);
    let stray = stray_drains(view, rollout, &flat);
    flat.extend(stray);
    Writes::grouped(flat)
}

/// A member's writes ([`member`]), kept with its verdict when the memo
/// shares it (the next plan may find them there); a verdict nobody shares
/// reaches no later plan, and its writes are not kept.
fn decided(view: &View<'_>, e: &mut Entry<'_>) -> MemberWrites {
    if Arc::get_mut(&mut e.verdict).is_some() {
        return member(view, e);
    }
    e.verdict.decided.get_or_init(|| member(view, e)).clone()
}

/// One member's writes: those before its BootcNode apply, the apply if
/// anything changed, those after it; and whether they release its slot.
/// They read only the verdict, the member's objects and the pool's name
/// and uid, so that a verdict the memo keeps keeps them too
/// ([`crate::facts::Decided`]).
fn member(view: &View<'_>, e: &Entry<'_>) -> MemberWrites {
    let Entry { name, row, verdict } = e;
    let releasing = !verdict.owned.in_slot
        && row.node.is_some()
        && row.bn.is_some()
        && holds_slot(row.node, row.bn, &view.pool_name);
    let apply = (!verdict
        .applied
        .unwrap_or_else(|| verdict.owned.applied(row.bn)))
    .then(|| Write::ApplyBootcNode(Arc::new(verdict.owned.to_apply(name, &view.owner))));
    // Exactly as long as needed: a pool's every member may hold its writes
    // (20,000 new BootcNodes, each with its Node's label).
    let len = verdict.pre.len() + usize::from(apply.is_some()) + verdict.post.len();
    let mut writes = Vec::with_capacity(len);
    writes.extend(verdict.pre.iter().cloned());
    writes.extend(apply);
    writes.extend(verdict.post.iter().cloned());
    MemberWrites { releasing, writes }
}

/// A running drain of a node that holds no slot stops, unless a write of
/// the plan already stops it.
fn stray_drains(view: &View<'_>, rollout: &Rollout<'_>, flat: &[Write]) -> Vec<Write> {
    let stopped = |name: &str| {
        flat.iter()
            .any(|w| matches!(w, Write::CancelDrain { node } if node == name))
    };
    view.input
        .drains
        .iter()
        .filter(|(name, phase)| {
            phase.running()
                && !rollout.verdicts.get(name).is_some_and(|v| v.owned.in_slot)
                && !stopped(name)
        })
        .map(|(name, _)| Write::CancelDrain { node: name.clone() })
        .collect()
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

    #[test]
    fn writes_are_numbered_by_their_node_in_order_of_first_appearance() {
        let drain = |n: &str| Write::StartDrain { node: n.into() };
        // (the writes' nodes, each write's group, how many nodes)
        let rows: [(&[&str], &[usize], usize); 4] = [
            (&[], &[], 0),
            (&["a"], &[0], 1),
            (&["b", "a", "b", "c"], &[0, 1, 0, 2], 3),
            (&["a", "a", "a"], &[0, 0, 0], 1),
        ];
        for (nodes, want, count) in rows {
            let writes: Vec<Write> = nodes.iter().map(|n| drain(n)).collect();
            assert_eq!(node_groups(&writes), (want.to_vec(), count), "{nodes:?}");
        }
    }
}
