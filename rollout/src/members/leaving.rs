//! Nodes that leave: an owned BootcNode whose Node is gone, no longer
//! selected or in conflict leaves the pool, and a deleted pool's cleanup
//! takes every node out. Leaving restores the Node ([`crate::reboot::cordon`]),
//! removes the managed label, stops the drain and deletes the BootcNode, in
//! that order, with a `NodeLeft` event.
//!
//! A node this pool disrupted that is not back yet (see
//! [`crate::holds::disruption`]) does not leave mid-reboot: its approval is
//! withdrawn (its daemon either already started the reboot and is waited
//! for, or answers and is back at once), and it keeps its BootcNode, label,
//! cordon and slot until it is back. A node with the pool's record and
//! neither membership nor BootcNode is restored by the record alone, once
//! back.

use std::sync::Arc;

use api::Node;
use api::{BootcNode, BootcNodePool, DeletionPolicy, DesiredImageState};
use kube_core::ResourceExt;

use crate::holds::disruption::{self, cordoned_for};
use crate::members::membership::{Membership, owned_by};
use crate::members::owned::{Owned, owner_reference};
use crate::model::{PlanInput, PlannedEvent, Write, event_reasons};
use crate::order::Writes;
use crate::reboot::slots::holds_slot;
use crate::view::{Row, View};
use crate::{order, reboot::cordon, reboot::lifecycle};

/// What a deleted pool's cleanup does now, and what it waits for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cleanup {
    pub writes: Writes,
    /// Nodes this pool disrupted that are not back yet: their cleanup (and
    /// the pool's finalizer) waits for them, so that they keep counting as
    /// disrupted while they reboot.
    pub waiting: Vec<String>,
}

/// What the leaving nodes need.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Leavers {
    pub writes: Vec<Write>,
    pub events: Vec<PlannedEvent>,
    /// Nodes that left mid-reboot and still hold a slot until back.
    pub not_back: Vec<String>,
}

/// The nodes that leave the pool in this plan (see the module docs).
pub(crate) fn leavers(view: &View<'_>, members: &Membership) -> Leavers {
    let pool = view.pool;
    let pool_name = &view.pool_name;
    let mut out = Leavers::default();
    // Both in name order: membership is read by walking the members along.
    let mut member = members.names.iter().peekable();
    for (name, row) in &view.rows {
        let Some(bn) = row.bn else { continue };
        while member.next_if(|m| **m < *name).is_some() {}
        let is_member = member.peek().is_some_and(|m| *m == name);
        if is_member || members.conflicts.contains_key(*name) || !owned_by(bn, pool) {
            continue;
        }
        let node = row.node;
        if let Some(node) = node
            && holds_slot(Some(node), Some(bn), pool_name)
            && !disruption::is_back(node, Some(bn))
        {
            out.not_back.push((*name).to_owned());
            out.writes.extend(withdraw_approval(bn, pool));
            continue;
        }
        leave(bn, node, &mut out.writes);
        out.events.push(PlannedEvent {
            reason: event_reasons::NODE_LEFT,
            message: format!("node {name} left pool {pool_name}"),
            warning: false,
            node: Some((*name).to_owned()),
        });
    }
    for (name, row) in &view.rows {
        let Some(node) = row.node else { continue };
        if row.bn.is_some() || members.contains(name) || !disruption::recorded_for(node, pool_name)
        {
            continue;
        }
        if !disruption::is_back(node, None) {
            out.not_back.push((*name).to_owned());
        } else if let Some(patch) = cordon::release(node, pool_name, None) {
            out.writes.push(Write::PatchNode {
                name: (*name).to_owned(),
                patch,
            });
        }
    }
    out
}

/// The writes that take one owned BootcNode out of the pool: stop its
/// drain, restore the Node, delete the BootcNode.
fn leave(bn: &BootcNode, node: Option<&Node>, writes: &mut Vec<Write>) {
    let name = bn.name_any();
    writes.push(Write::CancelDrain { node: name.clone() });
    if let Some(node) = node {
        let patch = cordon::on_leave(bn, node);
        if patch != crate::model::NodePatch::default() {
            writes.push(Write::PatchNode {
                name: name.clone(),
                patch,
            });
        }
        writes.extend(lifecycle::write(&name, node, lifecycle::Stage::Out));
    }
    writes.push(Write::DeleteBootcNode { name });
}

/// A node leaving mid-slot (the pool, or a deleted pool) is told not to
/// boot: either its daemon already started the reboot (it says Rebooting,
/// and the node is waited for), or it answers the withdrawal and the node
/// is back at once (see `disruption::reboot_in_flight`).
fn withdraw_approval(bn: &BootcNode, pool: &BootcNodePool) -> Option<Write> {
    let mut owned = Owned::of(bn);
    if !owned.spec.approved() {
        return None;
    }
    owned.spec.desired_image_state = DesiredImageState::Staged;
    let owner = Arc::new(owner_reference(pool));
    Some(Write::ApplyBootcNode(Arc::new(
        owned.to_apply(&bn.name_any(), &owner),
    )))
}

/// The nodes a deleted pool lets finish before its cleanup
/// (`spec.onDelete: Finish`): its members in reboot slots. Until none is
/// left the pool is planned as usual, with no new slot
/// ([`crate::facts::Rollout::deleting`]); then [`plan_cleanup`] releases
/// every node. Empty under Release: the cleanup runs at once.
pub fn finishing(input: &PlanInput<'_>) -> Vec<String> {
    if input.pool.spec.on_delete != DeletionPolicy::Finish {
        return Vec::new();
    }
    let view = View::of(input);
    view.rows
        .iter()
        .filter(|(_, row)| {
            let (Some(node), Some(bn)) = (row.node, row.bn) else {
                return false;
            };
            owned_by(bn, input.pool) && holds_slot(Some(node), Some(bn), &view.pool_name)
        })
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

/// The writes that undo everything the pool did, for its deletion.
pub fn plan_cleanup(input: &PlanInput<'_>) -> Cleanup {
    let view = View::of(input);
    let pool_name = &view.pool_name;
    let mut writes = Vec::new();
    let mut waiting = Vec::new();
    // The row's BootcNode, if this pool owns it.
    fn owned<'r>(row: &Row<'r>, pool: &BootcNodePool) -> Option<&'r BootcNode> {
        row.bn.filter(|bn| owned_by(bn, pool))
    }
    for (name, row) in &view.rows {
        let Some(bn) = owned(row, input.pool) else {
            continue;
        };
        let node = row.node;
        if let Some(node) = node
            && holds_slot(Some(node), Some(bn), pool_name)
            && !disruption::is_back(node, Some(bn))
        {
            waiting.push((*name).to_owned());
            writes.extend(withdraw_approval(bn, input.pool));
            continue;
        }
        leave(bn, node, &mut writes);
    }
    // A node still carrying this pool's cordon mark or disruption record
    // without a BootcNode (deleted and not yet recreated) is restored by the
    // mark alone, once it is back.
    for (name, row) in &view.rows {
        let Some(node) = row.node else { continue };
        let ours = cordoned_for(node, pool_name) || disruption::recorded_for(node, pool_name);
        if owned(row, input.pool).is_some() || !ours {
            continue;
        }
        if !disruption::is_back(node, None) {
            waiting.push((*name).to_owned());
            continue;
        }
        writes.push(Write::PatchNode {
            name: (*name).to_owned(),
            patch: cordon::on_cleanup(node, pool_name),
        });
    }
    Cleanup {
        writes: order::Writes::grouped(writes),
        waiting,
    }
}
