//! Incremental planning: what one plan remembers for the next.
//!
//! A plan's cost is dominated by the per-node steps (membership and each
//! member's verdict), which read one node's own objects and the pool-wide
//! facts. [`Answers`] keeps each node's answers keyed by exactly what they
//! read, so that the next plan recomputes only the nodes whose objects (their
//! `resourceVersion`s), drain, phase clock, conflict, blocking pod or staging permission
//! changed, and everything when a pool-wide fact changes. The answers are the
//! same functions' answers: [`super::plan`] is [`super::plan_incremental`]
//! with an empty `Memo` (the pipeline's), and a property test
//! (`rollout/src/tests/incremental.rs`) requires both to give identical plans
//! over random event sequences.
//!
//! What is never kept: a node whose objects carry no numeric
//! `resourceVersion` (nothing tells their versions apart), a verdict that
//! reports the node stuck (its message counts the minutes), and a verdict
//! timed from "now" rather than from a recorded instant. A kept verdict that
//! waits for an instant (a drain retry, a reboot's grace, a phase deadline)
//! is valid only before it: time changes its answer only there.
//!
//! A kept verdict carries the writes the order step decided for it
//! (`facts::Decided`): a verdict no later step changed brings them to the
//! next plan, where they are not decided again.
//!
//! The entries sit in a list; [`Answers::begin`] looks each of the view's
//! names up once and every step reaches its entry by the row's position, so
//! a plan hashes each name once, however many steps ask about it.

use std::collections::BTreeSet;
use std::sync::Arc;

use api::BootcNodePoolSpec;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::facts::Claim;
use crate::facts::NodeVerdict;
use crate::holds::pause::Pause;
use crate::members::pull_secret::Secret;
use crate::model::{DrainPhase, Target};
use crate::view::{Versions, View};
use crate::{members::staging, reboot::stuck};

/// The pool-wide facts every kept answer depends on; when one changes,
/// nothing kept is used again.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PoolFacts {
    name: String,
    uid: Option<String>,
    spec: BootcNodePoolSpec,
    target: Option<Target>,
    secret: Secret,
    /// Other pools: name, selector, being deleted.
    others: Vec<(String, LabelSelector, bool)>,
    deadlines: stuck::Deadlines,
    /// The pause now: `pausedUntil` ends it with the spec unchanged.
    pause: Pause,
    /// The fleet's switch holds approvals (a slot holder's verdict reads it).
    fleet_holds_approvals: bool,
}

impl PoolFacts {
    pub fn of(view: &View<'_>, target: Option<&Target>, secret: &Secret) -> Self {
        PoolFacts {
            name: view.pool_name.clone(),
            uid: view.pool.metadata.uid.clone(),
            spec: view.pool.spec.clone(),
            target: target.cloned(),
            secret: secret.clone(),
            others: view
                .input
                .other_pools
                .iter()
                .map(|p| {
                    (
                        p.metadata.name.clone().unwrap_or_default(),
                        p.spec.node_selector.clone(),
                        p.metadata.deletion_timestamp.is_some(),
                    )
                })
                .collect(),
            deadlines: view.input.deadlines,
            pause: view.pause,
            fleet_holds_approvals: view.input.gates.fleet_holds_approvals,
        }
    }
}

/// What a member's verdict reads beyond its objects and the pool's facts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct VerdictKey {
    pub versions: Versions,
    pub told: bool,
    pub drain: Option<DrainPhase>,
    pub clock: Option<(stuck::Phase, Timestamp)>,
    pub conflict: Option<BTreeSet<String>>,
    /// The blocking pod on its Node.
    pub blocking: Option<String>,
    /// The answer holds only before this instant.
    pub until: Option<Timestamp>,
}

impl VerdictKey {
    /// Does the key kept match these inputs? (Compared without cloning.)
    pub fn matches(
        &self,
        versions: Versions,
        told: bool,
        drain: Option<&DrainPhase>,
        clock: Option<&(stuck::Phase, Timestamp)>,
        conflict: Option<&BTreeSet<String>>,
        blocking: Option<&str>,
    ) -> bool {
        self.versions == versions
            && self.told == told
            && self.drain.as_ref() == drain
            && self.clock.as_ref() == clock
            && self.conflict.as_ref() == conflict
            && self.blocking.as_deref() == blocking
    }
}

/// One node's kept answers.
#[derive(Clone, Debug, Default)]
struct Entry {
    membership: Option<(Versions, Claim)>,
    staging: Option<(Versions, staging::Member)>,
    verdict: Option<(VerdictKey, Arc<NodeVerdict>)>,
}

/// The per-node answers a plan keeps for the next plan of the same pool
/// (see the module docs); `Memo` (the pipeline's) holds them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Answers {
    facts: Option<PoolFacts>,
    /// Each name's place in `entries`.
    index: foldhash::HashMap<String, usize>,
    entries: Vec<Entry>,
    /// This plan's entry for each of the view's rows: one lookup per name
    /// and plan, however many steps ask.
    at: Vec<usize>,
    /// Answers reused and computed by the last plan (for the tests and logs).
    pub reused: usize,
    pub computed: usize,
}

impl Answers {
    /// Starts a plan: a change of pool-wide facts forgets every answer, and
    /// answers about names gone from the view are dropped now and then.
    pub(crate) fn begin(&mut self, facts: PoolFacts, view: &View<'_>) {
        let forget =
            self.facts.as_ref() != Some(&facts) || self.index.len() > 2 * view.rows.len() + 64;
        if forget {
            self.index.clear();
            self.entries.clear();
            self.facts = Some(facts);
        }
        self.at.clear();
        for (name, _) in &view.rows {
            // Looked up before inserting: a known name costs no copy.
            let at = match self.index.get(*name) {
                Some(at) => *at,
                None => {
                    self.index.insert((*name).to_owned(), self.entries.len());
                    self.entries.push(Entry::default());
                    self.entries.len() - 1
                }
            };
            self.at.push(at);
        }
        self.reused = 0;
        self.computed = 0;
    }

    /// The entry of the view's row `row`.
    fn entry(&mut self, row: usize) -> &mut Entry {
        &mut self.entries[self.at[row]]
    }

    /// The membership answer for the view's row `row`, kept or computed.
    pub(crate) fn membership(
        &mut self,
        row: usize,
        versions: Option<Versions>,
        compute: impl FnOnce() -> Claim,
    ) -> Claim {
        let Some(versions) = versions else {
            self.computed += 1;
            return compute();
        };
        if let Some((kept, answer)) = &self.entry(row).membership
            && *kept == versions
        {
            let answer = answer.clone();
            self.reused += 1;
            return answer;
        }
        self.computed += 1;
        let answer = compute();
        self.entry(row).membership = Some((versions, answer.clone()));
        answer
    }

    /// The member of the view's row `row` as the staging rule sees it,
    /// kept or computed.
    pub(crate) fn staging(
        &mut self,
        row: usize,
        versions: Option<Versions>,
        compute: impl FnOnce() -> staging::Member,
    ) -> staging::Member {
        let Some(versions) = versions else {
            return compute();
        };
        let entry = self.entry(row);
        if let Some((kept, answer)) = entry.staging
            && kept == versions
        {
            return answer;
        }
        let answer = compute();
        entry.staging = Some((versions, answer));
        answer
    }

    /// A kept verdict for the view's row `row` and these inputs, if any.
    pub(crate) fn verdict(
        &mut self,
        row: usize,
        matches: impl Fn(&VerdictKey) -> bool,
    ) -> Option<Arc<NodeVerdict>> {
        let v = match &self.entry(row).verdict {
            Some((k, v)) if matches(k) => Arc::clone(v),
            _ => return None,
        };
        self.reused += 1;
        Some(v)
    }

    /// Keeps a verdict (the caller decides whether it may be kept).
    pub(crate) fn keep_verdict(&mut self, row: usize, key: VerdictKey, v: Arc<NodeVerdict>) {
        self.entry(row).verdict = Some((key, v));
    }

    /// Forgets a verdict (it may not be kept).
    pub(crate) fn forget_verdict(&mut self, row: usize) {
        self.entry(row).verdict = None;
    }
}
