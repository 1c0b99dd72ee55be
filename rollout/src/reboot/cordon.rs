//! Cordon record and restore: nothing is left cordoned.
//!
//! A slot's cordon is recorded twice: `bootc.dev/was-cordoned` on the BootcNode
//! (the Node's state before the slot) and `bootc.dev/cordoned-by: <pool>` on
//! the Node itself, written in the same patch as the cordon, with the pool's
//! disruption record (`bootc.dev/disrupted-by`, see [`crate::holds::disruption`]). A
//! cordon an admin had put there before is kept: the slot then writes the
//! disruption record alone. When the node leaves its slot, the pool, or a
//! deleted pool, our cordon is lifted if the record says it is ours, or, when
//! the BootcNode and its record were lost, if the Node's mark says so; the mark
//! and the disruption record go in the same patch as the uncordon. A cordon is
//! never put back: an admin's that was lifted meanwhile stays lifted (one rule
//! for all three: `lifts`). Karpenter's `karpenter.sh/do-not-disrupt`
//! follows the disruption record in the same patches: set with it (with the
//! pool's mark `bootc.dev/do-not-disrupt-by`) unless someone else had set
//! it, removed with it only when the mark says it is ours. The label
//! `node.kubernetes.io/exclude-from-external-load-balancers` does the same
//! (its mark `bootc.dev/lb-excluded-by`): the load balancers stop sending
//! to the node in the cordon's write, before its drain, and a label an
//! admin had set stays as it was. Every
//! [`NodePatch`] field is decided here: the actuator writes each one as it
//! is.

use api::BootcNode;
use api::Node;
use api::labels::{MANAGED_LABEL, WAS_CORDONED_ANNOTATION};
use kube_core::ResourceExt;

use crate::facts::Rollout;
use crate::holds::disruption::{self, cordoned_for};
use crate::members::membership::owner_pool;
use crate::model::{NodePatch, Write};
use crate::view::View;
use api::node_health::{
    do_not_disrupt_by, excluded_from_lbs, is_cordoned, karpenter_do_not_disrupt, lb_excluded_by,
};

impl NodePatch {
    /// Lift a cordon of ours: the node is back (the mark and the
    /// disruption record go with it).
    pub const UNCORDON: NodePatch = NodePatch {
        managed: None,
        unschedulable: Some(false),
        mark: Some(false),
        disrupted: Some(false),
        do_not_disrupt: None,
        exclude_lb: None,
    };
    /// Cordon for a reboot slot, marked as ours, with the disruption record.
    pub const SLOT_CORDON: NodePatch = NodePatch {
        managed: None,
        unschedulable: Some(true),
        mark: Some(true),
        disrupted: Some(true),
        do_not_disrupt: None,
        exclude_lb: None,
    };
    /// The disruption record alone: on a node an admin had cordoned (its
    /// slot starts), or off it (back, and the cordon stays the admin's).
    pub const fn record(disrupted: bool) -> NodePatch {
        NodePatch {
            managed: None,
            unschedulable: None,
            mark: None,
            disrupted: Some(disrupted),
            do_not_disrupt: None,
            exclude_lb: None,
        }
    }

    /// Karpenter's `do-not-disrupt` and the load balancers' exclusion
    /// label follow the disruption record: each set with it unless someone
    /// else already set it, removed with it when ours (its mark says so).
    #[must_use]
    pub fn with_karpenter(mut self, node: &Node, pool: &str) -> NodePatch {
        match self.disrupted {
            Some(true) => {
                self.do_not_disrupt = (!karpenter_do_not_disrupt(node)).then_some(true);
                self.exclude_lb = (!excluded_from_lbs(node)).then_some(true);
            }
            Some(false) => {
                self.do_not_disrupt = (do_not_disrupt_by(node) == Some(pool)).then_some(false);
                self.exclude_lb = (lb_excluded_by(node) == Some(pool)).then_some(false);
            }
            None => {}
        }
        self
    }
}

/// `bootc.dev/was-cordoned` on the BootcNode, if recorded.
pub fn was_cordoned(bn: &BootcNode) -> Option<bool> {
    bn.annotations()
        .get(WAS_CORDONED_ANNOTATION)
        .map(|v| v == "true")
}

/// Was the Node cordoned before `pool`'s slot? A cordon with our mark is
/// ours (from a slot whose BootcNode record was lost): it was not.
pub fn prior(node: &Node, pool: &str) -> bool {
    is_cordoned(node) && !cordoned_for(node, pool)
}

/// The patch that puts or keeps a slotted node cordoned and recorded, if
/// needed.
pub fn keep(node: &Node, pool: &str) -> Option<NodePatch> {
    let patch = if !is_cordoned(node) {
        NodePatch::SLOT_CORDON
    } else if !disruption::recorded_for(node, pool) {
        NodePatch::record(true)
    } else {
        return None;
    };
    Some(patch.with_karpenter(node, pool))
}

/// The patch that ends a node's disruption once it is back: lift our cordon
/// (unless `was_cordoned` says an admin's was there first; without the
/// record, our mark tells) and remove the record, in one write.
pub fn release(node: &Node, pool: &str, was_cordoned: Option<&str>) -> Option<NodePatch> {
    let patch = if lifts(node, Some(pool), was_cordoned.map(|prior| prior == "true")) {
        NodePatch::UNCORDON
    } else if disruption::recorded_for(node, pool) {
        NodePatch::record(false)
    } else {
        return None;
    };
    Some(patch.with_karpenter(node, pool))
}

/// Is the cordon on `node` ours to lift? It is there, and the BootcNode's
/// record (`prior`: was the node cordoned before the slot?) says no one else
/// had put it there; without the record, our mark on the Node says it is
/// ours. A cordon is only ever lifted, never put back: an admin who lifted
/// their own cordon meanwhile is not overruled. The one rule for a release
/// and for a node that leaves.
fn lifts(node: &Node, pool: Option<&str>, prior: Option<bool>) -> bool {
    let ours = match prior {
        Some(prior) => !prior,
        None => pool.is_some_and(|p| cordoned_for(node, p)),
    };
    ours && is_cordoned(node)
}

/// The patch that restores a Node whose BootcNode leaves its pool: our
/// cordon lifted as a release would (`lifts`), the mark, the disruption
/// record and the managed label removed.
pub fn on_leave(bn: &BootcNode, node: &Node) -> NodePatch {
    let pool = owner_pool(bn).map(|(pool, _)| pool);
    let ours = |f: fn(&Node, &str) -> bool| pool.as_deref().is_some_and(|p| f(node, p));
    let mut patch = NodePatch {
        managed: node.labels().contains_key(MANAGED_LABEL).then_some(false),
        disrupted: ours(disruption::recorded_for).then_some(false),
        ..NodePatch::default()
    };
    if lifts(node, pool.as_deref(), was_cordoned(bn)) {
        // An uncordon takes our mark with it.
        patch.unschedulable = Some(false);
        patch.mark = Some(false);
    } else if ours(cordoned_for) {
        patch.mark = Some(false);
    }
    if ours(|n, p| do_not_disrupt_by(n) == Some(p)) {
        patch.do_not_disrupt = Some(false);
    }
    if ours(|n, p| lb_excluded_by(n) == Some(p)) {
        patch.exclude_lb = Some(false);
    }
    patch
}

/// A cordon of ours on a member outside any slot (its slot record was lost
/// with its BootcNode) is lifted, unless the member's writes before its
/// BootcNode apply already uncordon it.
pub(crate) fn lift_strays(view: &View<'_>, rollout: &mut Rollout<'_>) {
    for entry in rollout.verdicts.iter_mut() {
        let (Some(node), v) = (entry.row.node, &*entry.verdict) else {
            continue;
        };
        let uncordoning = v.pre.iter().any(
            |w| matches!(w, Write::PatchNode { patch, .. } if patch.unschedulable == Some(false)),
        );
        if !v.owned.in_slot && !uncordoning && cordoned_for(node, &view.pool_name) {
            let name = entry.name;
            entry.verdict_mut().pre.push(Write::PatchNode {
                name: name.to_owned(),
                patch: NodePatch::UNCORDON.with_karpenter(node, &view.pool_name),
            });
        }
    }
}

/// The patch that restores a Node a deleted pool marked or recorded without
/// a BootcNode, once it is back: our cordon lifted, marks and label gone.
pub fn on_cleanup(node: &Node, pool: &str) -> NodePatch {
    let mut patch = release(node, pool, None).unwrap_or_default();
    patch.managed = node.labels().contains_key(MANAGED_LABEL).then_some(false);
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::labels::{
        CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION, DO_NOT_DISRUPT_BY_ANNOTATION,
        KARPENTER_DO_NOT_DISRUPT_ANNOTATION,
    };

    /// A Node: cordoned or not, with our mark and our record or not.
    fn n(cordoned: bool, mark: bool, record: bool) -> Node {
        let mut node = crate::holds::disruption::tests::node(true, cordoned);
        if mark {
            node.annotations_mut()
                .insert(CORDONED_BY_ANNOTATION.into(), "a".into());
        }
        if record {
            node.annotations_mut()
                .insert(DISRUPTED_BY_ANNOTATION.into(), "a".into());
        }
        node
    }

    /// `node` with Karpenter's do-not-disrupt, set by us or someone else.
    fn karpenter(mut node: Node, ours: bool) -> Node {
        let annotations = node.annotations_mut();
        annotations.insert(KARPENTER_DO_NOT_DISRUPT_ANNOTATION.into(), "true".into());
        if ours {
            annotations.insert(DO_NOT_DISRUPT_BY_ANNOTATION.into(), "a".into());
        }
        node
    }

    #[test]
    fn entering_and_releasing_a_slot() {
        let set = |p: NodePatch| NodePatch {
            do_not_disrupt: Some(true),
            exclude_lb: Some(true),
            ..p
        };
        let (cordon, record) = (
            Some(set(NodePatch::SLOT_CORDON)),
            Some(set(NodePatch::record(true))),
        );
        // (what, Node (cordoned, our mark, our record), patch)
        #[rustfmt::skip]
        let keep_rows = [
            ("uncordoned: cordon, mark, record, Karpenter's", n(false, false, false), cordon),
            ("an admin's cordon: the record alone, Karpenter's", n(true, false, false), record),
            ("Karpenter's set by someone else: left alone", karpenter(n(false, false, false), false), Some(NodePatch { exclude_lb: Some(true), ..NodePatch::SLOT_CORDON })),
            ("already ours", n(true, true, true), None),
        ];
        for (what, node, want) in keep_rows {
            assert_eq!(keep(&node, "a"), want, "{what}");
        }
        const UNCORDON: Option<NodePatch> = Some(NodePatch::UNCORDON);
        const UNRECORD: Option<NodePatch> = Some(NodePatch::record(false));
        // (what, Node, was-cordoned record, patch)
        #[rustfmt::skip]
        let release_rows = [
            ("ours by the record", n(true, true, true), Some("false"), UNCORDON),
            ("an admin's by the record", n(true, false, true), Some("true"), UNRECORD),
            ("record lost, our mark", n(true, true, true), None, UNCORDON),
            ("record lost, no mark", n(true, false, true), None, UNRECORD),
            ("nothing of ours left", n(false, false, false), Some("false"), None),
            ("ours, with our Karpenter's", karpenter(n(true, true, true), true), Some("false"),
                Some(NodePatch { do_not_disrupt: Some(false), ..NodePatch::UNCORDON })),
            ("someone else's Karpenter's stays", karpenter(n(true, true, true), false), Some("false"), UNCORDON),
        ];
        for (what, node, was, want) in release_rows {
            assert_eq!(release(&node, "a", was), want, "{what}");
        }
        // A node that leaves: the same rule, and an admin's uncordon stands.
        let owned = |was: Option<&str>| {
            let mut bn: BootcNode = serde_json::from_value(serde_json::json!({
                "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
                "metadata": {"name": "n", "ownerReferences": [{"apiVersion": "node.bootc.dev/v1alpha1",
                    "kind": "BootcNodePool", "name": "a", "uid": "uid-a"}]},
                "spec": {"desiredImage": "quay.io/os@sha256:1"},
            }))
            .unwrap();
            if let Some(was) = was {
                bn.annotations_mut()
                    .insert(WAS_CORDONED_ANNOTATION.into(), was.into());
            }
            bn
        };
        let lifted = |mark| NodePatch {
            unschedulable: Some(false),
            mark,
            ..NodePatch::default()
        };
        // (what, Node, was-cordoned record, patch)
        #[rustfmt::skip]
        let leave_rows = [
            ("ours by the record", n(true, false, false), Some("false"), lifted(Some(false))),
            ("an admin's by the record", n(true, false, false), Some("true"), NodePatch::default()),
            ("an admin's, lifted by them meanwhile", n(false, false, false), Some("true"), NodePatch::default()),
            ("ours, lifted by an admin meanwhile", n(false, false, false), Some("false"), NodePatch::default()),
            ("record lost, our mark", n(true, true, false), None, lifted(Some(false))),
            ("record lost, no mark", n(true, false, false), None, NodePatch::default()),
            ("an admin's by the record, our mark too", n(true, true, false), Some("true"), NodePatch { mark: Some(false), ..NodePatch::default() }),
            ("our Karpenter's goes too", karpenter(n(true, false, false), true), Some("true"), NodePatch { do_not_disrupt: Some(false), ..NodePatch::default() }),
            ("someone else's stays", karpenter(n(true, false, false), false), Some("true"), NodePatch::default()),
        ];
        for (what, node, was, want) in leave_rows {
            assert_eq!(on_leave(&owned(was), &node), want, "{what}");
        }
        assert!(prior(&n(true, false, false), "a"));
        assert!(
            !prior(&n(true, true, false), "a"),
            "our mark: not an admin's"
        );
    }
}
