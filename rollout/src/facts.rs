//! The facts one step of a plan hands to the next: a node's membership
//! claim, each member's verdict, and the rollout those verdicts add up to.
//! Types only: the steps that decide them import this module, never each
//! other's types, so that no step reaches back into one before it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use api::Node;
use jiff::Timestamp;

use crate::holds::batches::Batching;
use crate::holds::depends::Waiting;
use crate::holds::disruption::{Budget, Unavailable};
use crate::holds::gates::Gate;
use crate::holds::groups::Groups;
use crate::holds::pause::Pause;
use crate::holds::window::Window;
use crate::members::owned::Owned;
use crate::members::staging;
use crate::members::state::NodeState;
use crate::model::Write;
use crate::reboot::stuck::{self, Stuck};
use crate::view::Row;

/// One node's answer to "is it a member?" (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    pub member: bool,
    /// The other pools that claim it too.
    pub conflict: Option<BTreeSet<String>>,
}

/// How a member counts in the disruption budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counted {
    /// It holds one of the pool's slots.
    Holder,
    /// A member, counted if it is unavailable for a reason of its own.
    Member,
}

/// One member's verdict.
#[derive(Clone, Debug)]
pub(crate) struct NodeVerdict {
    /// Its BootcNode's owned fields after this plan.
    pub owned: Owned,
    /// Does its BootcNode already carry `owned` (see [`Owned::applied`])?
    /// Decided with the verdict, whose BootcNode a kept verdict shares;
    /// None once a later step changed `owned`.
    pub applied: Option<bool>,
    pub state: NodeState,
    /// The phase its daemon reports ([`api::BootcNode::phase`]), read once
    /// with the verdict: the standings ask it of every member at every plan.
    pub daemon_phase: Option<api::DaemonPhase>,
    pub runs_target: bool,
    /// Writes before its BootcNode apply (a release's Node restore).
    pub pre: Vec<Write>,
    /// Writes after it (label, cordon, drain).
    pub post: Vec<Write>,
    pub counted: Option<Counted>,
    /// Its own unavailability (NotReady, cordoned), for the budget.
    pub unavailable: Option<Unavailable>,
    pub unhealthy_in_slot: bool,
    pub candidate: bool,
    /// Its Node carries a hold (`hold.bootc.dev/<who>`).
    pub held: bool,
    /// Its daemon, when this controller does not drive its contract
    /// ([`crate::holds::daemons`]): not told, no slot, never approved by this plan.
    pub daemon_skew: Option<api::daemon_contract::DaemonSkew>,
    /// Failed on the target under `onFailure: Rollback`, but bootc reports
    /// no image it ran before: held in its slot instead.
    pub no_rollback: bool,
    /// Failed on the target, approved to boot the image it ran before.
    pub rolling_back: bool,
    /// Held cordoned and unapproved in its slot by a pause.
    pub held_by_pause: bool,
    /// Held cordoned and unapproved in its slot by the fleet's switch
    /// (`kubectl bootc stop --all --before-approval`).
    pub held_by_fleet_stop: bool,
    /// Cordoned in its slot and not yet drained.
    pub draining: bool,
    /// What it waits for, said in words, when anything (see [`Waits`]).
    pub waits: Option<Box<Waits>>,
    /// Look at the pool again after this long (from the plan that made the
    /// verdict; see [`NodeVerdict::requeue_at`]).
    pub requeue: Option<Duration>,
    pub phase: Option<stuck::Phase>,
    pub stuck: Option<Stuck>,
    /// Its answer does not depend on the time before this instant (the
    /// requeue, absolute); see [`super::memo`].
    pub recheck_at: Option<Timestamp>,
    /// It may be kept for the next plan: not stuck (the message counts the
    /// minutes) and not timed from "now" (see [`super::memo`]).
    pub keepable: bool,
    /// Its writes, once the order step has decided them (see [`Decided`]).
    pub decided: Decided,
}

/// What a member waits for, said in words. Few members wait so, and the
/// memo keeps a verdict for every member: out of line, these texts cost a
/// pointer when absent (a verdict of 20,000 fits a smaller allocation).
#[derive(Clone, Debug, Default)]
pub(crate) struct Waits {
    /// The blocking pod its Node runs (`namespace/name`), which keeps it
    /// from taking a slot.
    pub blocked_by: Option<String>,
    /// Why bootc cannot update its host from an image
    /// ([`api::BootcNode::unmanageable`]): Degraded, never up to date, not
    /// told, no slot.
    pub host_incompatible: Option<String>,
    /// The automatic updaters its host runs, which refuse it the target
    /// ([`crate::holds::updaters`]).
    pub host_updaters: Vec<String>,
    /// What its health gate waits for, while it settles in its slot.
    pub proving: Option<String>,
    /// Its drain goes on, but a PodDisruptionBudget refused an eviction.
    pub drain_blocked: Option<String>,
    pub drain_failure: Option<String>,
}

/// No wait to explain.
static NO_WAITS: Waits = Waits {
    blocked_by: None,
    host_incompatible: None,
    host_updaters: Vec::new(),
    proving: None,
    drain_blocked: None,
    drain_failure: None,
};

/// One member's writes as the order step decides them
/// (step 7, `order.rs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MemberWrites {
    /// They release the member's slot (made before everyone else's).
    pub releasing: bool,
    /// Writes before its BootcNode apply, the apply if anything changed,
    /// writes after it.
    pub writes: Vec<Write>,
}

/// A verdict's writes, decided once and kept with it: they read only the
/// verdict, its member's objects and the pool's facts, which is what the
/// memo keeps a verdict for, so a verdict kept and left unchanged by the
/// later steps has the same writes in the next plan and they are not
/// decided again. A copy starts undecided (a later step changes a shared
/// verdict only through a copy: [`Entry::verdict_mut`]).
#[derive(Debug, Default)]
pub(crate) struct Decided(OnceLock<MemberWrites>);

impl Clone for Decided {
    /// Undecided: a copy is made to be changed.
    fn clone(&self) -> Self {
        Decided::default()
    }
}

impl Decided {
    /// The writes decided, deciding them with `decide` the first time.
    pub fn get_or_init(&self, decide: impl FnOnce() -> MemberWrites) -> &MemberWrites {
        self.0.get_or_init(decide)
    }
}

impl NodeVerdict {
    /// What it waits for, said in words.
    pub fn waits(&self) -> &Waits {
        self.waits.as_deref().unwrap_or(&NO_WAITS)
    }

    /// To say what it waits for (only once there is something to say).
    pub fn waits_mut(&mut self) -> &mut Waits {
        self.waits.get_or_insert_default()
    }

    /// The state the pool's status and metrics report: a member that runs
    /// the target but still holds its reboot slot once this plan's writes
    /// are made (it is not back: NotReady, or not yet released) is still
    /// rebooting, so that neither `UpToDate` nor `RolloutComplete` is said
    /// while a node the rollout rebooted is not back.
    pub fn reported_state(&self) -> NodeState {
        match self.state {
            NodeState::UpToDate if self.owned.in_slot => NodeState::Rebooting,
            state => state,
        }
    }

    /// When the pool should be looked at again for this member, seen from
    /// `now`: a kept verdict's requeue counts down to its recheck instant.
    pub fn requeue_at(&self, now: Timestamp) -> Option<Duration> {
        match self.recheck_at {
            Some(at) => Some(at.duration_since(now).unsigned_abs()),
            None => self.requeue,
        }
    }
}

/// One member's verdict, with its objects (the later steps read them
/// without looking them up again).
#[derive(Clone, Debug)]
pub(crate) struct Entry<'a> {
    pub name: &'a str,
    pub row: Row<'a>,
    /// Shared with the memo: a kept verdict is copied only when a later
    /// step changes it (a slot handed out, a stray cordon lifted).
    pub verdict: Arc<NodeVerdict>,
}

impl Entry<'_> {
    /// The verdict, to change: copied first if the memo shares it, and its
    /// writes decided again (the one way a step changes a verdict).
    pub fn verdict_mut(&mut self) -> &mut NodeVerdict {
        let v = Arc::make_mut(&mut self.verdict);
        v.decided = Decided::default();
        v
    }
}

/// The members' verdicts, in name order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Verdicts<'a>(Vec<Entry<'a>>);

impl<'a> Verdicts<'a> {
    /// Adds the next member's verdict (members come in name order).
    pub fn push(&mut self, entry: Entry<'a>) {
        self.0.push(entry);
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.0.binary_search_by(|e| e.name.cmp(name)).ok()
    }

    pub fn get(&self, name: &str) -> Option<&NodeVerdict> {
        self.position(name).map(|i| &*self.0[i].verdict)
    }

    /// The member's Node and verdict, to change (copied first if the memo
    /// shares it).
    pub fn entry_mut(&mut self, name: &str) -> Option<(Option<&'a Node>, &mut NodeVerdict)> {
        let i = self.position(name)?;
        let entry = &mut self.0[i];
        Some((entry.row.node, entry.verdict_mut()))
    }

    /// The member at `i` (the verdicts' order), to change.
    pub fn at_mut(&mut self, i: usize) -> Option<&mut Entry<'a>> {
        self.0.get_mut(i)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry<'a>> {
        self.0.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry<'a>> {
        self.0.iter_mut()
    }

    pub fn values(&self) -> impl Iterator<Item = &NodeVerdict> {
        self.0.iter().map(|e| &*e.verdict)
    }

    /// Sets `map` to each member's `value`, by name ([`refill`]).
    pub fn refill<V>(&self, map: &mut BTreeMap<String, V>, value: impl FnMut(&Entry<'a>) -> V) {
        refill(map, &self.0, |e| e.name, value);
    }
}

/// Sets `map` to each item's `value` under its `name` (the items in name
/// order, each name once). When `map` holds exactly these names (a plan's
/// per-member map handed back for the pool's next plan) the values are
/// replaced in place, and no name is copied or map node allocated again.
pub(crate) fn refill<T, V>(
    map: &mut BTreeMap<String, V>,
    items: &[T],
    name: impl Fn(&T) -> &str,
    mut value: impl FnMut(&T) -> V,
) {
    let same = map.len() == items.len() && map.keys().zip(items).all(|(k, i)| k == name(i));
    if same {
        for (slot, item) in map.values_mut().zip(items) {
            *slot = value(item);
        }
    } else {
        *map = items
            .iter()
            .map(|i| (name(i).to_owned(), value(i)))
            .collect();
    }
}

/// The verdicts, and what slot assignment made of them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rollout<'a> {
    pub verdicts: Verdicts<'a>,
    /// Slot holders that count for the halt, in name order.
    pub unhealthy_in_slots: Vec<String>,
    pub halted: bool,
    /// Slots are free but the pool's own unavailable nodes use the budget up.
    pub waiting_for_budget: Option<String>,
    /// The disruption budget as the verdicts leave it.
    pub budget: Budget,
    /// `spec.rollout.paused` or `pausedUntil`, now.
    pub pause: Pause,
    /// The maintenance windows and blackouts now: outside them no new slot is handed out.
    pub window: Window,
    /// The pools of `spec.rollout.dependsOn` this pool waits for.
    pub dependencies: Waiting,
    /// The alert gate, or a gate that could not be asked.
    pub gate: Gate,
    /// The fleet's switch, while set (who and why): no new slot.
    pub fleet_stop: Option<String>,
    /// The pool is being deleted and lets its slots finish
    /// (`spec.onDelete: Finish`): no new slot.
    pub deleting: bool,
    /// The node groups of `spec.rollout.order`; None when one cannot be
    /// read (no new slot then).
    pub groups: Option<Groups>,
    /// Candidates left out because their group's turn has not come: the
    /// group whose turn it is and its members behind the target.
    pub waiting_for_turn: Option<(String, Vec<String>)>,
    /// Those candidates, each with its group.
    pub out_of_turn: BTreeMap<&'a str, usize>,
    /// Each member as the staging rule sees it, in the verdicts' order.
    pub staging: Vec<staging::Member>,
    /// The target failed for the pool (enough members failed their health
    /// gate on it, or a person confirmed it): no new slot, and nobody is
    /// told the target.
    pub target_failed: Option<Failure>,
    /// Members that failed their health gate on the target, too few to
    /// fail it for the pool (`spec.health.nodesToFailImage`): each keeps
    /// its slot, and the pool names them.
    pub lone_witnesses: Vec<Failure>,
    /// The canary step of `spec.rollout.batches` and the room it leaves.
    pub batch: Batching,
}

/// A member failed on the target by its health gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub node: String,
    pub check: String,
    /// Found by this plan (the pool has not recorded it yet).
    pub new: bool,
}

impl Rollout<'_> {
    /// May new reboot slots be handed out now? Not while the pool is
    /// paused or halted, nor with every slot held, nor outside the
    /// maintenance windows, nor while it waits for the pools it depends on,
    /// cannot read its node order, a gate holds it, the fleet is stopped or
    /// the pool is being deleted.
    pub fn hands_out(&self) -> bool {
        self.slots_free()
            && self.window.allows_new_slots()
            && self.dependencies.is_met()
            && self.groups.is_some()
            && self.gate.is_open()
            && self.fleet_stop.is_none()
            && !self.deleting
            && self.target_failed.is_none()
            && self.batch.room != Some(0)
    }

    /// Are slots free for the rollout, whenever a window lets them be
    /// handed out?
    fn slots_free(&self) -> bool {
        !self.pause.holds() && !self.halted && !self.budget.full()
    }

    /// The free slots a new slot for each member could come from, in the
    /// verdicts' order: the slot hand-out's answer
    /// ([`super::slots::hand_out`], [`Budget::free_for`]), which the staging
    /// rule reads too ([`spec::tell`]). A closed maintenance window, pools
    /// not yet up to date, the node order and the gates do not count: the
    /// nodes that take the next slots stage before they may take them.
    pub fn free_slots_each(&self) -> Vec<usize> {
        if self.slots_free() {
            self.budget
                .free_for_each(self.verdicts.iter().map(|e| e.name))
        } else {
            vec![0; self.verdicts.len()]
        }
    }

    /// The members whose verdict `pred` holds, in name order.
    pub fn names(&self, pred: impl Fn(&NodeVerdict) -> bool) -> Vec<String> {
        self.verdicts
            .iter()
            .filter(|e| pred(&e.verdict))
            .map(|e| e.name.to_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_of_decided_writes_is_undecided() {
        let decided = Decided::default();
        let writes = MemberWrites {
            releasing: true,
            writes: vec![Write::StartDrain { node: "a".into() }],
        };
        assert_eq!(*decided.get_or_init(|| writes.clone()), writes);
        // Decided once: a second decision is not asked for.
        assert_eq!(
            *decided.get_or_init(|| unreachable!("decided again")),
            writes
        );
        // A copy is made to be changed: its writes are decided again.
        let copy = decided.clone();
        assert_eq!(
            *copy.get_or_init(MemberWrites::default),
            MemberWrites::default()
        );
    }

    /// A map refilled with the same names keeps its keys (the same
    /// allocations: nothing copied); any other names replace them.
    #[test]
    fn a_map_refilled_with_the_same_names_keeps_its_keys() {
        fn name<'i>(i: &'i (&'static str, u32)) -> &'i str {
            i.0
        }
        let value = |i: &(&'static str, u32)| i.1;
        let key_at = |m: &BTreeMap<String, u32>| -> Vec<*const u8> {
            m.keys().map(|k| k.as_ptr()).collect()
        };
        let mut map = BTreeMap::new();
        refill(&mut map, &[("a", 1), ("b", 2)], name, value);
        let kept = key_at(&map);
        // (what, items, map after)
        type Items<'a> = &'a [(&'static str, u32)];
        let rows: [(&str, Items, Items); 4] = [
            ("new values", &[("a", 3), ("b", 4)], &[("a", 3), ("b", 4)]),
            (
                "one name swapped",
                &[("a", 5), ("c", 6)],
                &[("a", 5), ("c", 6)],
            ),
            (
                "one more",
                &[("a", 1), ("c", 2), ("d", 3)],
                &[("a", 1), ("c", 2), ("d", 3)],
            ),
            ("none", &[], &[]),
        ];
        for (what, items, want) in rows {
            let before = key_at(&map);
            refill(&mut map, items, name, value);
            let got: Vec<(&str, u32)> = map.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            assert_eq!(got, want, "{what}");
            let same_names = before.len() == items.len() && what == "new values";
            assert_eq!(key_at(&map) == before, same_names, "{what}: keys kept");
        }
        assert_eq!(kept.len(), 2);
    }
}
