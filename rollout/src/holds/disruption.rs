//! The disruption bound, as the cluster sees it: which nodes count against a
//! pool's `maxUnavailable`, when a node is back, and whether a new reboot
//! slot may be handed out. Pure functions; the planner calls them.
//!
//! **Disrupted.** A node is disrupted by a pool from the moment the pool's
//! reboot slot cordons it until it is [back](is_back): Ready, uncordoned
//! (unless an admin had cordoned it before), and with no reboot in flight
//! (it runs the image it was told to boot, or it was never told to boot one,
//! or the approval was withdrawn and its daemon acknowledged that before
//! starting a reboot). The durable record is the Node's
//! `bootc.dev/disrupted-by: <pool>` annotation: written in the same patch as
//! the slot's cordon (alone, on a node an admin had cordoned) and removed in
//! the same patch as the uncordon. It lives on the Node, not on the
//! BootcNode, so it survives the node leaving the pool, its BootcNode being
//! deleted or recreated, the pool's selector or target changing, a pause,
//! the pool's deletion and a controller restart: until the record goes, the
//! node takes one of the pool's `maxUnavailable` slots.
//!
//! **The budget** ([`Budget::admits`]). A pool's *unavailable* nodes are the
//! nodes it disrupted (slot holders and recorded nodes not yet back) plus its
//! members that are NotReady or cordoned for any other reason, an admin's
//! cordon included: the cluster cannot schedule on them either. A new slot is
//! handed out only when
//!
//! 1. fewer than `maxUnavailable` nodes hold this pool's slots or records, and
//! 2. the candidate is already unavailable (an admin-cordoned node: slotting
//!    it disrupts nothing more), or fewer than `maxUnavailable` of the pool's
//!    nodes are unavailable.
//!
//! Candidates that are already unavailable go first. So with
//! `maxUnavailable: 1`, a member an admin cordoned (and not in a slot) holds
//! the rollout of the other members until it is uncordoned or takes the slot
//! itself (it does when it is staged), and a member that went NotReady on its
//! own holds it until it is Ready again; the pool's UpToDate message names
//! them.

use std::collections::{BTreeMap, BTreeSet};

use api::BootcNode;
use api::Node;
use api::node_health::{cordoned_by, disrupted_by, is_cordoned, is_ready};

/// Does the Node carry `pool`'s disruption record?
pub fn recorded_for(node: &Node, pool: &str) -> bool {
    disrupted_by(node) == Some(pool)
}

/// Is the Node cordoned with `pool`'s own mark (a slot's cordon)?
pub fn cordoned_for(node: &Node, pool: &str) -> bool {
    cordoned_by(node) == Some(pool)
}

/// Could a reboot of this node still be under way, as far as its BootcNode
/// tells?
///
/// * It is approved to boot (`desiredImageState: Booted`) an image it does
///   not run yet, and its daemon does not report that it gave up (Degraded:
///   a reboot onto the wrong image is not retried for the same spec).
/// * Or its daemon's last report, for an older spec, says Staged or
///   Rebooting: it may have read an approval since withdrawn (a new target,
///   a rollback to what it runs) and started the apply. Its next report, for
///   the current spec, settles it: the daemon writes every phase change.
pub fn reboot_in_flight(bn: &BootcNode) -> bool {
    if bn.approved() && !bn.runs(&bn.spec.desired_image) && !bn.is_degraded() {
        return true;
    }
    // No status at all reports no phase: nothing was started.
    bn.status.is_some()
        && bn.daemon_behind()
        && matches!(
            bn.phase(),
            Some(api::DaemonPhase::Staged | api::DaemonPhase::Rebooting)
        )
}

/// Is a node this pool disrupted back? Ready, and no reboot in flight as
/// far as its BootcNode tells (`bn`: None when it has none). The uncordon
/// that goes with the end of a disruption is written with the record's
/// removal, so "uncordoned" holds from that write on.
pub fn is_back(node: &Node, bn: Option<&BootcNode>) -> bool {
    is_ready(node) && !bn.is_some_and(reboot_in_flight)
}

/// Why a node counts as unavailable to the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unavailable {
    /// This pool disrupted it (a slot, or a record not yet cleared).
    Disrupted,
    NotReady,
    /// Cordoned by someone else (an admin, another tool).
    Cordoned,
}

impl Unavailable {
    /// How the UpToDate message names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::Disrupted => "rebooting or in a slot",
            Unavailable::NotReady => "NotReady",
            Unavailable::Cordoned => "cordoned",
        }
    }

    /// A member's own unavailability (not counting this pool's disruption).
    pub fn of_member(node: &Node) -> Option<Unavailable> {
        if !is_ready(node) {
            Some(Unavailable::NotReady)
        } else if is_cordoned(node) {
            Some(Unavailable::Cordoned)
        } else {
            None
        }
    }
}

/// The pool's disruption budget for one plan (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    max: usize,
    /// Nodes holding this pool's slots or records.
    holders: BTreeSet<String>,
    /// Every unavailable node (holders included), with why.
    unavailable: BTreeMap<String, Unavailable>,
}

impl Budget {
    pub fn new(max: usize) -> Self {
        Budget {
            max,
            ..Budget::default()
        }
    }

    /// A node that holds one of this pool's slots or records.
    pub fn hold(&mut self, name: &str) {
        self.holders.insert(name.to_owned());
        self.unavailable
            .insert(name.to_owned(), Unavailable::Disrupted);
    }

    /// A member, counted if it is unavailable for a reason of its own
    /// (`Unavailable::of_member`).
    pub fn member(&mut self, name: &str, own: Option<Unavailable>) {
        if let Some(why) = own {
            self.unavailable.entry(name.to_owned()).or_insert(why);
        }
    }

    pub fn holders(&self) -> usize {
        self.holders.len()
    }

    /// May `candidate` take a new slot now?
    pub fn admits(&self, candidate: &str) -> bool {
        self.free_for(candidate) > 0
    }

    /// How many new slots the budget leaves for `candidate`: the slots not
    /// held, and, unless the candidate is already unavailable (slotting it
    /// disrupts nothing more), no more than the pool's unavailable nodes
    /// leave. The one answer behind [`Budget::admits`] and the staging rule
    /// for hosts that cannot stage locked.
    pub fn free_for(&self, candidate: &str) -> usize {
        self.free_given(self.unavailable.contains_key(candidate))
    }

    /// [`Budget::free_for`] each of `names`, given in name order: one walk
    /// along the unavailable nodes rather than a search per name (a plan
    /// asks it of every member).
    pub fn free_for_each<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<usize> {
        let mut unavailable = self.unavailable.keys().peekable();
        names
            .map(|name| {
                while unavailable.next_if(|u| u.as_str() < name).is_some() {}
                let own = unavailable.peek().is_some_and(|u| u.as_str() == name);
                self.free_given(own)
            })
            .collect()
    }

    /// The new slots for a candidate already unavailable (`own`) or not.
    fn free_given(&self, own: bool) -> usize {
        let free = self.max.saturating_sub(self.holders.len());
        if own {
            free
        } else {
            free.min(self.max.saturating_sub(self.unavailable.len()))
        }
    }

    /// Are all the slots held? Then no candidate is admitted.
    pub fn full(&self) -> bool {
        self.holders.len() >= self.max
    }

    /// Orders candidates: already unavailable ones first (they cost nothing).
    /// Once one is not admitted, none after it is: the counts only grow.
    pub fn order(&self, candidates: &mut [&str]) {
        candidates.sort_by_key(|c| !self.unavailable.contains_key(*c));
    }

    /// Gives `candidate` a slot.
    pub fn take(&mut self, candidate: &str) {
        self.hold(candidate);
    }

    /// When slots are free but the pool's own unavailable nodes use the
    /// budget up: "a (NotReady), b (cordoned)", for the UpToDate message.
    pub fn blocked_by_others(&self) -> Option<String> {
        let others: Vec<String> = self
            .unavailable
            .iter()
            .filter(|(_, why)| **why != Unavailable::Disrupted)
            .map(|(name, why)| format!("{name} ({})", why.as_str()))
            .collect();
        let blocked = self.holders.len() < self.max && self.unavailable.len() >= self.max;
        (blocked && !others.is_empty()).then(|| others.join(", "))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use api::test_support::NodeBuilder;

    /// A Node, Ready or not, cordoned or not (the planner's tests build on it).
    pub(crate) fn node(ready: bool, cordoned: bool) -> Node {
        NodeBuilder::new("n")
            .unschedulable(cordoned)
            .ready(ready)
            .build()
    }

    #[test]
    fn the_budget_counts_slots_and_the_pools_own_unavailable_nodes() {
        // (max, holders, members (name, ready, cordoned), candidate, admitted)
        type Row = (
            &'static str,
            usize,
            &'static [&'static str],
            &'static [(&'static str, bool, bool)],
            &'static str,
            bool,
        );
        let rows: &[Row] = &[
            (
                "a free slot, nobody down",
                1,
                &[],
                &[("c", true, false)],
                "c",
                true,
            ),
            (
                "the slot held",
                1,
                &["h"],
                &[("c", true, false)],
                "c",
                false,
            ),
            (
                "a member NotReady on its own uses the budget",
                1,
                &[],
                &[("down", false, false), ("c", true, false)],
                "c",
                false,
            ),
            (
                "an admin's cordon uses the budget",
                1,
                &[],
                &[("adm", true, true), ("c", true, false)],
                "c",
                false,
            ),
            (
                "an admin-cordoned candidate costs nothing",
                1,
                &[],
                &[("adm", true, true)],
                "adm",
                true,
            ),
            (
                "two slots, one down on its own: one more",
                2,
                &[],
                &[("down", false, false), ("c", true, false)],
                "c",
                true,
            ),
            (
                "two slots, one held and one down: none",
                2,
                &["h"],
                &[("down", false, false), ("c", true, false)],
                "c",
                false,
            ),
            (
                "already unavailable, but every slot held",
                1,
                &["h"],
                &[("adm", true, true)],
                "adm",
                false,
            ),
        ];
        for (name, max, holders, members, candidate, want) in rows {
            let mut b = Budget::new(*max);
            for h in *holders {
                b.hold(h);
            }
            for (m, ready, cordoned) in *members {
                b.member(m, Unavailable::of_member(&node(*ready, *cordoned)));
            }
            assert_eq!(b.admits(candidate), *want, "{name}");
            // Asked of every name in one walk: the same answers.
            let mut names: Vec<&str> = holders.to_vec();
            names.extend(members.iter().map(|m| m.0));
            names.extend(["0-first", candidate, "z-last"]);
            names.sort_unstable();
            names.dedup();
            let each: Vec<usize> = names.iter().map(|n| b.free_for(n)).collect();
            assert_eq!(b.free_for_each(names.iter().copied()), each, "{name}");
        }
    }

    #[test]
    fn already_unavailable_candidates_go_first_and_blockers_are_named() {
        let mut b = Budget::new(1);
        b.member("adm", Unavailable::of_member(&node(true, true)));
        b.member("x", Unavailable::of_member(&node(true, false)));
        let mut c = vec!["x", "adm"];
        b.order(&mut c);
        assert_eq!(c, ["adm", "x"]);
        assert_eq!(b.blocked_by_others().as_deref(), Some("adm (cordoned)"));
        b.take("adm");
        assert!(!b.admits("x"));
        assert_eq!(
            b.blocked_by_others(),
            None,
            "blocked by the slot, not others"
        );
    }
}
