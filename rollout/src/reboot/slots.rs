//! Slot entry and release (rules 1 and 2).
//!
//! * Entry: a member that is Staged, healthy (Ready, not Degraded), not
//!   being deleted, not in conflict and not held back (a
//!   `hold.bootc.dev/<who>` annotation on its Node,
//!   [`api::node_health::holds`], or skipped for the target after its drain
//!   failed under `onDrainTimeout: Release`) is a candidate; free slots go to
//!   candidates within the disruption budget ([`crate::holds::disruption::Budget`]),
//!   already unavailable ones first, unless the pool is paused or halted
//!   ([`crate::holds::halt`]). Entering a slot is one write: the Node's
//!   cordon with the pool's disruption record, the slot record
//!   ([`super::cordon`]); then the drain starts.
//! * Release: a slot holder leaves its slot only once it is back: on the
//!   target, not Degraded, Ready, and with no reboot in flight. The write
//!   that restores its Node removes the record, and its approval is
//!   withdrawn after. A hold releases a holder the same way while it is not
//!   yet approved to boot (it has not rebooted: its cordon is lifted and
//!   its drain stops); one approved finishes its reboot. So does a failed
//!   drain under `onDrainTimeout: Release`, which also skips the node for
//!   the target.
//! * The record lives on the Node, so a BootcNode deleted and recreated
//!   keeps its slot. A slot record of 0.1.0 on the BootcNode is a slot too
//!   (an upgrade keeps it; the Node's record is written and the old one
//!   removed).

use api::BootcNode;
use api::Node;
use kube_core::ResourceExt;

use crate::facts::{Rollout, Verdicts};
use crate::holds::disruption::{self, Budget};
use crate::holds::groups;
use crate::members::owned::Owned;
use crate::model::Write;
use crate::reboot::cordon;
use crate::view::View;

/// Does the node hold a slot of `pool`: its Node's disruption record (or
/// its BootcNode's slot record of 0.1.0)? Either object may be missing.
pub fn holds_slot(node: Option<&Node>, bn: Option<&BootcNode>, pool: &str) -> bool {
    bn.is_some_and(BootcNode::legacy_slot_record)
        || node.is_some_and(|node| disruption::recorded_for(node, pool))
}

/// Rule 1: may a member outside any slot take a free one? Staged, healthy
/// (Ready, not Degraded), its Node not being deleted, in no conflict, and
/// not held back (a hold on its Node, or skipped for this target after a
/// failed drain).
pub fn candidate(
    staged: bool,
    healthy: bool,
    deleting: bool,
    in_conflict: bool,
    held: bool,
) -> bool {
    staged && healthy && !deleting && !in_conflict && !held
}

/// Rule 2, before the boot: is a slot holder released because it is held
/// back (a hold on its Node, or its drain failed under `onDrainTimeout:
/// Release`)? Only before it is approved to boot and while not on the
/// target: a node approved may be rebooting, and finishes.
pub fn released_before_boot(held_back: bool, approved: bool, runs_target: bool) -> bool {
    held_back && !approved && !runs_target
}

/// Rule 2: may a slot holder be released? Only once updated, healthy
/// (Ready, not Degraded) and with no reboot in flight: the node is back.
pub fn releasable(runs_target: bool, healthy: bool, reboot_in_flight: bool) -> bool {
    runs_target && healthy && !reboot_in_flight
}

/// A member whose Node carries the pool's disruption record holds its slot.
pub(crate) fn reclaim(owned: &mut Owned, node: Option<&Node>, pool: &str) {
    if node.is_some_and(|node| disruption::recorded_for(node, pool)) {
        owned.in_slot = true;
    }
}

/// Step 6, rule 1: unless the pool is paused or halted, free slots go to
/// the candidates within the budget; the new holders are cordoned and about
/// to drain.
pub(crate) fn hand_out<'a>(view: &View<'_>, rollout: &mut Rollout<'a>) {
    // With every slot held nobody is admitted, and nothing waits on others.
    if !rollout.hands_out() {
        return;
    }
    let candidates: Vec<&'a str> = rollout
        .verdicts
        .iter()
        .filter(|e| e.verdict.candidate)
        .map(|e| e.name)
        .collect();
    let candidates = in_turn(candidates, rollout);
    let total = candidates.len();
    let room = rollout.batch.room.unwrap_or(usize::MAX);
    let taken = assign(
        candidates,
        (&mut rollout.budget, room),
        &view.pool_name,
        &mut rollout.verdicts,
    );
    let left_out = taken < total;
    rollout.waiting_for_budget = rollout.budget.blocked_by_others().filter(|_| left_out);
}

/// The candidates of the group whose turn it is ([`crate::holds::groups`]); the
/// others wait, and the rollout says for whom.
fn in_turn<'a>(candidates: Vec<&'a str>, rollout: &mut Rollout<'a>) -> Vec<&'a str> {
    let Some(groups) = rollout.groups.as_ref().filter(|g| !g.is_empty()) else {
        return candidates;
    };
    // Each member's group, in name order (the verdicts' order).
    let members: Vec<(&'a str, usize, bool)> = rollout
        .verdicts
        .iter()
        .map(|e| {
            let labels = e.row.node.map(ResourceExt::labels);
            (e.name, groups.of(labels), e.verdict.runs_target)
        })
        .collect();
    let Some(turn) = groups::turn(members.iter().copied()) else {
        return candidates;
    };
    let group_of = |name: &str| {
        members
            .binary_search_by(|(n, _, _)| (*n).cmp(name))
            .map_or(usize::MAX, |i| members[i].1)
    };
    let (now, later): (Vec<&str>, Vec<&str>) = candidates
        .into_iter()
        .partition(|name| group_of(name) <= turn.group);
    if !later.is_empty() {
        rollout.out_of_turn = later.iter().map(|n| (*n, group_of(n))).collect();
        rollout.waiting_for_turn = Some((groups.name(turn.group), turn.behind));
    }
    now
}

/// Hands free reboot slots to `candidates` within the disruption budget
/// and at most `room` of them (the canary step's, [`crate::holds::batches`];
/// already unavailable candidates first): the cordon with the disruption
/// record (the slot record), then the drain.
/// Returns how many took a slot.
fn assign(
    mut candidates: Vec<&str>,
    (budget, room): (&mut Budget, usize),
    pool: &str,
    verdicts: &mut Verdicts<'_>,
) -> usize {
    budget.order(&mut candidates);
    let mut taken = 0;
    for name in candidates {
        // The canary step's room, then the budget.
        if taken >= room || !budget.admits(name) {
            // Nobody after it is admitted either (see `Budget::order`).
            break;
        }
        let Some((Some(node), v)) = verdicts.entry_mut(name) else {
            continue;
        };
        budget.take(name);
        v.owned.in_slot = true;
        if let Some(patch) = cordon::keep(node, pool) {
            v.post.push(Write::PatchNode {
                name: name.to_owned(),
                patch,
            });
        }
        v.post.push(Write::StartDrain {
            node: name.to_owned(),
        });
        v.draining = true;
        taken += 1;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_staged_healthy_members_are_candidates() {
        // (staged, healthy, Node being deleted, in conflict, held, candidate)
        let rows = [
            (true, true, false, false, false, true),
            (false, true, false, false, false, false),
            (true, false, false, false, false, false),
            (true, true, true, false, false, false),
            (true, true, false, true, false, false),
            (true, true, false, false, true, false),
        ];
        for (staged, healthy, deleting, conflict, held, want) in rows {
            let got = candidate(staged, healthy, deleting, conflict, held);
            assert_eq!(got, want, "{staged} {healthy} {deleting} {conflict} {held}");
        }
    }

    #[test]
    fn a_hold_releases_only_a_holder_not_yet_approved() {
        // (held, approved, runs the target, released)
        let rows = [
            (true, false, false, true),
            (false, false, false, false),
            (true, true, false, false),
            (true, false, true, false),
        ];
        for (held, approved, runs, want) in rows {
            assert_eq!(
                released_before_boot(held, approved, runs),
                want,
                "{held} {approved} {runs}"
            );
        }
    }

    #[test]
    fn release_only_when_back() {
        // (runs the target, healthy, reboot in flight, released)
        let rows = [
            (true, true, false, true),
            (false, true, false, false),
            (true, false, false, false),
            (true, true, true, false),
        ];
        for (runs, healthy, in_flight, want) in rows {
            assert_eq!(
                releasable(runs, healthy, in_flight),
                want,
                "{runs} {healthy} {in_flight}"
            );
        }
    }
}
