//! The pool reconciler's decisions, as a pure function.
//!
//! [`plan`] takes everything the controller knows about one pool (the pool,
//! the Nodes its selector matches and the Nodes of the BootcNodes it owns,
//! those BootcNodes, the other pools, the pull secret's hash, the drains in
//! flight and the time) and returns the writes that bring the world closer to
//! the pool's intent, the events to publish and the status to report. It does
//! no I/O; the actuator makes the writes in order and stops at the first
//! failure, so every ordering below is chosen to be safe to interrupt:
//!
//! * entering a slot writes the BootcNode annotations (slot marker and the
//!   prior cordon state) before cordoning the Node;
//! * leaving a slot, or the pool, restores the Node's cordon state before the
//!   annotations (or the BootcNode) that record it are removed.
//!
//! `maxUnavailable` is an integer (at least 1) or a percentage of the pool's
//! member nodes, rounded down, and never less than 1: "25%" of 10 nodes is 2
//! slots, "10%" of 5 nodes is 1.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::conditions::{self, ConditionUpdate};
use api::labels::{IN_REBOOT_SLOT_ANNOTATION, WAS_CORDONED_ANNOTATION};
use api::reasons;
use api::{BootcNode, BootcNodePool, BootcNodePoolStatus, BootcNodeSpec, DesiredImageState};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::core::{Expression, Selector, SelectorExt};
use kube::{Resource, ResourceExt};

use crate::disruption::{
    self, Budget, cordoned_by, is_cordoned as node_unschedulable, is_ready as node_ready,
};
use crate::staging;
use crate::stuck::{self, Stuck};

/// Pool Degraded reason: a drain did not finish within `drainTimeoutSeconds`.
pub const DRAIN_TIMED_OUT: &str = "DrainTimedOut";
/// Degraded reason: `spec.pullSecretRef` names a Secret that does not exist.
pub const PULL_SECRET_NOT_FOUND: &str = "PullSecretNotFound";
/// How long after a failed drain the controller tries again.
pub const DRAIN_RETRY: Duration = Duration::from_secs(60);
/// The shortest time between two pool status writes that change nothing but
/// the node counts (and the breakdown message that spells them out). Such a
/// change is written once this has passed since the last status write, so
/// that the counts at rest are always accurate; every other change (target,
/// conditions, generation) is written at once.
pub const COUNTS_MIN_INTERVAL: Duration = Duration::from_secs(5);
/// How long a node approved to boot may stay NotReady before it counts as
/// unhealthy for rule 3: being NotReady is what a reboot looks like, and
/// two nodes rebooting together are not evidence of a bad image. A node
/// that came back on the target and is still NotReady counts at once.
pub const REBOOT_GRACE: Duration = Duration::from_secs(600);

/// The image the pool's nodes should run, from the `resolve_target` step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `sha256:...`: for a multi-arch image, the index digest.
    pub digest: String,
    /// `repository@digest`: what BootcNodes are told to run.
    pub image: String,
}

/// Why the pool has no (new) target: a Degraded reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetProblem {
    pub reason: &'static str,
    pub message: String,
}

/// What the controller knows about a drain of a node of this pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainPhase {
    Running,
    Succeeded,
    /// Gave up (timeout or error) at `at`; `message` names what blocked.
    Failed {
        message: String,
        at: Timestamp,
    },
}

/// Everything [`plan`] decides from.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    pub pool: &'a BootcNodePool,
    /// The outcome of target resolution. On a problem the previous target in
    /// `pool.status` stays in force (fail closed).
    pub target: Result<Target, TargetProblem>,
    /// The Nodes the selector matches, plus the Nodes of owned BootcNodes.
    pub nodes: Vec<&'a Node>,
    /// The BootcNodes named after those Nodes, and every BootcNode this pool owns.
    pub bootc_nodes: Vec<&'a BootcNode>,
    /// Every other pool (for NodeConflict).
    pub other_pools: Vec<&'a BootcNodePool>,
    /// `sha256:<hex>` of the referenced pull secret's data, if it exists.
    pub pull_secret_hash: Option<String>,
    /// Drains of this pool's nodes, by node name.
    pub drains: BTreeMap<String, DrainPhase>,
    /// The operator's namespace: the only one pull secrets may live in.
    pub operator_namespace: &'a str,
    /// When this controller last wrote the pool's status (None: not since
    /// it started).
    pub last_status_write: Option<Timestamp>,
    pub now: Timestamp,
    /// When each member entered the phase it waits in, as far as the
    /// controller remembers (see [`stuck`]).
    pub phase_clock: stuck::Clock,
}

/// Changes to a Node's `bootc.dev/managed` label and `spec.unschedulable`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePatch {
    /// Some(true): set the managed label; Some(false): remove it.
    pub managed: Option<bool>,
    /// Some(value): set `spec.unschedulable`.
    pub unschedulable: Option<bool>,
    /// A cordon of our own (a reboot slot): mark the Node with
    /// `bootc.dev/cordoned-by: <pool>`. An uncordon always removes the mark.
    pub ours: bool,
    /// Some(true): write the pool's disruption record
    /// (`bootc.dev/disrupted-by`); Some(false): remove it (the node is back).
    pub disrupted: Option<bool>,
}

impl NodePatch {
    /// Lift a cordon of ours: the node is back (the mark and the
    /// disruption record go with it).
    pub const UNCORDON: NodePatch = NodePatch {
        managed: None,
        unschedulable: Some(false),
        ours: false,
        disrupted: Some(false),
    };
    /// Cordon for a reboot slot, marked as ours, with the disruption record.
    pub const SLOT_CORDON: NodePatch = NodePatch {
        managed: None,
        unschedulable: Some(true),
        ours: true,
        disrupted: Some(true),
    };
    /// The disruption record alone: on a node an admin had cordoned (its
    /// slot starts), or off it (back, and the cordon stays the admin's).
    pub const fn record(disrupted: bool) -> NodePatch {
        NodePatch {
            managed: None,
            unschedulable: None,
            ours: false,
            disrupted: Some(disrupted),
        }
    }
}

/// One write, in the order the actuator must make them.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Server-side apply of the fields the controller owns on a BootcNode
    /// (owner reference, slot annotations, spec).
    ApplyBootcNode(Box<BootcNodeApply>),
    DeleteBootcNode {
        name: String,
    },
    PatchNode {
        name: String,
        patch: NodePatch,
    },
    StartDrain {
        node: String,
    },
    CancelDrain {
        node: String,
    },
}

/// A Kubernetes Event to publish once the writes before it succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub reason: &'static str,
    pub message: String,
    pub warning: bool,
    /// The node concerned, if any.
    pub node: Option<String>,
}

/// Event reasons (in `api`, where `kubectl bootc history` reads them too).
pub use api::event_reasons;

/// The planner's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub writes: Vec<Write>,
    pub events: Vec<PlannedEvent>,
    /// The new status, when it differs from the pool's current one.
    pub status: Option<BootcNodePoolStatus>,
    /// Reconcile again after this long even if nothing changes (a drain retry).
    pub requeue_after: Option<Duration>,
    /// The phase each member waits in (the runtime's clock ticks with it).
    pub phases: BTreeMap<String, stuck::Phase>,
    /// What the plan saw, for the metrics.
    pub summary: Summary,
}

/// The pool as the plan saw it: each member's state and the reboot slots.
/// Read by the metrics, never by the actuator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Each member's state, by node name.
    pub states: BTreeMap<String, NodeState>,
    /// Slot holders that are cordoned and not yet drained (drain running or
    /// failed): what a person calls draining.
    pub draining: BTreeSet<String>,
    /// The reboot slots `maxUnavailable` allows.
    pub slots: usize,
    /// The nodes holding a slot once the plan's writes are made.
    pub slots_in_use: usize,
    /// Rule 3 stopped new slots.
    pub halted: bool,
    pub paused: bool,
}

/// Where a node is in its update cycle, as the controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeState {
    Degraded,
    UpToDate,
    Pending,
    Staging,
    Staged,
    Rebooting,
}

/// Since when the Node has been not Ready (its Ready condition's last
/// transition), if it is not Ready.
fn not_ready_since(node: &Node) -> Option<jiff::Timestamp> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => None,
        Some(c) => Some(
            c.last_transition_time
                .as_ref()
                .map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0),
        ),
        None => Some(jiff::Timestamp::UNIX_EPOCH),
    }
}

fn bn_degraded(bn: &BootcNode) -> bool {
    bn.status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, reasons::DEGRADED))
}

/// Does the node boot `target`? Compares the reference bootc was given and
/// the digest it reports (for a single-manifest image they are the same
/// digest; for an index, the reference carries the index digest).
pub fn runs_target(bn: &BootcNode, target: &Target) -> bool {
    bn.status
        .as_ref()
        .and_then(|s| s.booted.as_ref())
        .is_some_and(|b| {
            b.image.as_deref() == Some(target.image.as_str())
                || b.image_digest.as_deref() == Some(target.digest.as_str())
        })
}

/// Classifies a BootcNode against the target (the effective-state table).
pub fn classify(bn: &BootcNode, target: &Target) -> NodeState {
    if bn_degraded(bn) {
        return NodeState::Degraded;
    }
    if runs_target(bn, target) {
        return NodeState::UpToDate;
    }
    // The spec is about to change, or the daemon has not seen the last one.
    if bn.spec.desired_image != target.image {
        return NodeState::Pending;
    }
    let Some(status) = bn.status.as_ref() else {
        return NodeState::Pending;
    };
    if let (Some(observed), Some(generation)) = (status.observed_generation, bn.metadata.generation)
        && observed < generation
    {
        return NodeState::Pending;
    }
    let idle = conditions::find(&status.conditions, reasons::IDLE);
    match idle {
        Some(c) if c.status == "False" => match c.reason.as_str() {
            reasons::STAGING => NodeState::Staging,
            reasons::STAGED => {
                let staged_matches = status.staged.as_ref().is_none_or(|s| {
                    s.image.as_deref() == Some(target.image.as_str())
                        || s.image_digest.as_deref() == Some(target.digest.as_str())
                });
                if staged_matches {
                    NodeState::Staged
                } else {
                    NodeState::Staging
                }
            }
            reasons::REBOOTING => NodeState::Rebooting,
            _ => NodeState::Pending,
        },
        _ => NodeState::Pending,
    }
}

/// The number of reboot slots for `members` nodes (see the module docs).
pub fn max_unavailable(value: &IntOrString, members: usize) -> Result<usize, String> {
    match value {
        IntOrString::Int(n) if *n >= 1 => Ok(usize::try_from(*n).unwrap_or(1)),
        IntOrString::Int(n) => Err(format!(
            "spec.rollout.maxUnavailable must be at least 1, got {n}"
        )),
        IntOrString::String(s) => {
            let pct = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| {
                    format!(
                        "spec.rollout.maxUnavailable {s:?} is neither an integer nor a percentage 1%-100%"
                    )
                })?;
            Ok((members * pct / 100).max(1))
        }
    }
}

/// `spec.nodeSelector` as a selector, or an error naming the expression that
/// does not parse, with its key, operator and values.
pub fn parse_selector(selector: &LabelSelector) -> Result<Selector, String> {
    Selector::try_from(selector.clone()).map_err(|error| {
        let bad = selector
            .match_expressions
            .iter()
            .flatten()
            .enumerate()
            .find_map(|(i, r)| Expression::try_from(r.clone()).err().map(|e| (i, r, e)));
        match bad {
            Some((i, r, e)) => format!(
                "spec.nodeSelector.matchExpressions[{i}] (key {:?}, operator {:?}, values {:?}): {e}",
                r.key,
                r.operator,
                r.values.as_deref().unwrap_or_default()
            ),
            None => format!("spec.nodeSelector: {error}"),
        }
    })
}

/// Does `pool`'s selector select `node`? An unparsable selector selects nothing.
pub fn selects(pool: &BootcNodePool, node: &Node) -> bool {
    match Selector::try_from(pool.spec.node_selector.clone()) {
        Ok(sel) => sel.matches(node.labels()),
        Err(_) => false,
    }
}

/// Is `bn` owned by `pool` (owner reference by uid, or by name without one)?
pub fn owned_by(bn: &BootcNode, pool: &BootcNodePool) -> bool {
    owner_pool(bn).is_some_and(|(name, uid)| match (&pool.metadata.uid, uid) {
        (Some(p), Some(u)) => *p == u,
        _ => name == pool.name_any(),
    })
}

/// The name and uid of the pool that owns `bn`, if any.
pub fn owner_pool(bn: &BootcNode) -> Option<(String, Option<String>)> {
    bn.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "BootcNodePool")
        .map(|o| {
            (
                o.name.clone(),
                Some(o.uid.clone()).filter(|u| !u.is_empty()),
            )
        })
}

fn owner_reference(pool: &BootcNodePool) -> OwnerReference {
    OwnerReference {
        api_version: "node.bootc.dev/v1alpha1".into(),
        kind: "BootcNodePool".into(),
        name: pool.name_any(),
        uid: pool.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The fields the controller owns on a BootcNode: what it server-side
/// applies (with the owner reference to the pool).
#[derive(Clone, Debug, PartialEq)]
pub struct BootcNodeApply {
    pub name: String,
    pub owner: OwnerReference,
    /// The slot and prior-cordon annotations.
    pub annotations: BTreeMap<String, String>,
    pub spec: BootcNodeSpec,
}

impl BootcNodeApply {
    pub fn in_slot(&self) -> bool {
        self.annotations.contains_key(IN_REBOOT_SLOT_ANNOTATION)
    }
}

/// The fields the controller owns on a BootcNode, as a comparable value.
#[derive(Clone, Debug, PartialEq)]
struct Owned {
    spec: BootcNodeSpec,
    in_slot: bool,
    was_cordoned: Option<String>,
}

impl Owned {
    fn of(bn: &BootcNode) -> Self {
        let ann = bn.annotations();
        Owned {
            spec: bn.spec.clone(),
            in_slot: ann.contains_key(IN_REBOOT_SLOT_ANNOTATION),
            was_cordoned: ann.get(WAS_CORDONED_ANNOTATION).cloned(),
        }
    }

    fn to_apply(&self, name: &str, pool: &BootcNodePool) -> BootcNodeApply {
        let mut annotations = BTreeMap::new();
        if self.in_slot {
            annotations.insert(IN_REBOOT_SLOT_ANNOTATION.to_owned(), "true".to_owned());
        }
        if let Some(w) = &self.was_cordoned {
            annotations.insert(WAS_CORDONED_ANNOTATION.to_owned(), w.clone());
        }
        BootcNodeApply {
            name: name.to_owned(),
            owner: owner_reference(pool),
            annotations,
            spec: self.spec.clone(),
        }
    }
}

fn was_cordoned(bn: &BootcNode) -> Option<bool> {
    bn.annotations()
        .get(WAS_CORDONED_ANNOTATION)
        .map(|v| v == "true")
}

/// The writes that take one owned BootcNode out of the pool: restore the
/// cordon state, remove the label, stop its drain, delete the BootcNode.
fn leave_writes(bn: &BootcNode, node: Option<&Node>, writes: &mut Vec<Write>) {
    let name = bn.name_any();
    writes.push(Write::CancelDrain { node: name.clone() });
    if let Some(node) = node {
        let mut patch = NodePatch::default();
        if node.labels().contains_key(api::labels::MANAGED_LABEL) {
            patch.managed = Some(false);
        }
        if owner_pool(bn).is_some_and(|(pool, _)| disruption::recorded_for(node, &pool)) {
            patch.disrupted = Some(false);
        }
        match was_cordoned(bn) {
            Some(prior) if prior != node_unschedulable(node) => {
                patch.unschedulable = Some(prior);
            }
            Some(_) => {}
            // The record is lost (the BootcNode was recreated): our mark on
            // the Node still tells a cordon of ours.
            None => {
                if owner_pool(bn).is_some_and(|(pool, _)| cordoned_by(node, &pool)) {
                    patch.unschedulable = Some(false);
                }
            }
        }
        if patch != NodePatch::default() {
            writes.push(Write::PatchNode {
                name: name.clone(),
                patch,
            });
        }
    }
    writes.push(Write::DeleteBootcNode { name });
}

/// Owned BootcNodes whose node is gone or no longer selected leave the pool
/// (writes and a `NodeLeft` event into `out`), except a node this pool
/// disrupted that is not back yet (see [`disruption`]): it keeps its
/// BootcNode, its label and its slot, and leaves once it is back. Returns
/// those nodes.
fn plan_leavers(
    pool: &BootcNodePool,
    nodes: &BTreeMap<String, &Node>,
    bns: &BTreeMap<String, &BootcNode>,
    members: &BTreeSet<&String>,
    conflicts: &BTreeMap<String, BTreeSet<String>>,
    out: &mut Plan,
) -> Vec<String> {
    let pool_name = pool.name_any();
    let mut not_back = Vec::new();
    for (name, bn) in bns {
        if !owned_by(bn, pool) || members.contains(name) || conflicts.contains_key(name) {
            continue;
        }
        let node = nodes.get(name).copied();
        if let Some(node) = node
            && holds_slot(node, bn, &pool_name)
            && !disruption::is_back(node, Some(bn))
        {
            not_back.push(name.clone());
            out.writes.extend(withdraw_approval(bn, pool));
            continue;
        }
        leave_writes(bn, node, &mut out.writes);
        out.events.push(PlannedEvent {
            reason: event_reasons::NODE_LEFT,
            message: format!("node {name} left pool {pool_name}"),
            warning: false,
            node: Some(name.clone()),
        });
    }
    // A node with this pool's record and neither membership nor BootcNode
    // (both lost mid-reboot): back once Ready, then restored.
    for (name, node) in nodes {
        if bns.contains_key(name)
            || members.contains(name)
            || !disruption::recorded_for(node, &pool_name)
        {
            continue;
        }
        if !disruption::is_back(node, None) {
            not_back.push(name.clone());
        } else if let Some(patch) = back_patch(node, &pool_name, None) {
            out.writes.push(Write::PatchNode {
                name: name.clone(),
                patch,
            });
        }
    }
    not_back
}

/// A node leaving mid-slot (the pool, or a deleted pool) is told not to
/// boot: either its daemon already started the reboot (it says Rebooting,
/// and the node is waited for), or it answers the withdrawal and the node
/// is back at once (see `disruption::reboot_in_flight`).
fn withdraw_approval(bn: &BootcNode, pool: &BootcNodePool) -> Option<Write> {
    let mut owned = Owned::of(bn);
    if owned.spec.desired_image_state != DesiredImageState::Booted {
        return None;
    }
    owned.spec.desired_image_state = DesiredImageState::Staged;
    Some(Write::ApplyBootcNode(Box::new(
        owned.to_apply(&bn.name_any(), pool),
    )))
}

/// Does the node hold a slot of `pool` (its BootcNode's slot record, or the
/// Node's disruption record)?
fn holds_slot(node: &Node, bn: &BootcNode, pool: &str) -> bool {
    bn.annotations().contains_key(IN_REBOOT_SLOT_ANNOTATION) || disruption::recorded_for(node, pool)
}

/// Was the Node cordoned before `pool`'s slot? A cordon with our mark is
/// ours (from a slot whose BootcNode record was lost): it was not.
fn prior_cordon(node: &Node, pool: &str) -> bool {
    node_unschedulable(node) && !cordoned_by(node, pool)
}

/// The patch that keeps a slotted node cordoned and recorded, if needed.
fn slot_patch(node: &Node, pool: &str) -> Option<NodePatch> {
    if !node_unschedulable(node) {
        Some(NodePatch::SLOT_CORDON)
    } else if !disruption::recorded_for(node, pool) {
        Some(NodePatch::record(true))
    } else {
        None
    }
}

/// The patch that ends a node's disruption once it is back: lift our cordon
/// (unless `was_cordoned` says an admin's was there first) and remove the
/// record, in one write.
fn back_patch(node: &Node, pool: &str, was_cordoned: Option<&str>) -> Option<NodePatch> {
    let ours = match was_cordoned {
        Some(prior) => prior != "true",
        None => cordoned_by(node, pool),
    };
    if ours && node_unschedulable(node) {
        Some(NodePatch::UNCORDON)
    } else if disruption::recorded_for(node, pool) {
        Some(NodePatch::record(false))
    } else {
        None
    }
}

/// Hands free reboot slots to `candidates` within the disruption budget
/// (already unavailable candidates first): the slot record on the
/// BootcNode, then the cordon with the disruption record, then the drain.
fn assign_slots(
    candidates: &[String],
    budget: &mut Budget,
    nodes: &BTreeMap<String, &Node>,
    pool: &str,
    desired: &mut BTreeMap<String, Owned>,
    post: &mut BTreeMap<String, Vec<Write>>,
) {
    let mut ordered = candidates.to_vec();
    budget.order(&mut ordered);
    for name in ordered {
        let (Some(node), Some(owned)) = (nodes.get(&name), desired.get_mut(&name)) else {
            continue;
        };
        if !budget.admits(&name) {
            continue;
        }
        budget.take(&name);
        owned.in_slot = true;
        owned.was_cordoned = Some(prior_cordon(node, pool).to_string());
        let writes = post.entry(name.clone()).or_default();
        if let Some(patch) = slot_patch(node, pool) {
            writes.push(Write::PatchNode {
                name: name.clone(),
                patch,
            });
        }
        writes.push(Write::StartDrain { node: name });
    }
}

/// What a deleted pool's cleanup does now, and what it waits for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cleanup {
    pub writes: Vec<Write>,
    /// Nodes this pool disrupted that are not back yet: their cleanup (and
    /// the pool's finalizer) waits for them, so that they keep counting as
    /// disrupted while they reboot.
    pub waiting: Vec<String>,
}

/// The writes that undo everything the pool did, for its deletion.
pub fn plan_cleanup(input: &PlanInput<'_>) -> Cleanup {
    let nodes: BTreeMap<String, &Node> = input.nodes.iter().map(|n| (n.name_any(), *n)).collect();
    let pool_name = input.pool.name_any();
    let mut out = Cleanup::default();
    for bn in input
        .bootc_nodes
        .iter()
        .filter(|bn| owned_by(bn, input.pool))
    {
        let node = nodes.get(&bn.name_any()).copied();
        if let Some(node) = node
            && holds_slot(node, bn, &pool_name)
            && !disruption::is_back(node, Some(bn))
        {
            out.waiting.push(bn.name_any());
            out.writes.extend(withdraw_approval(bn, input.pool));
            continue;
        }
        leave_writes(bn, node, &mut out.writes);
    }
    // A node still carrying this pool's cordon mark or disruption record
    // without a BootcNode (deleted and not yet recreated) is restored by the
    // mark alone, once it is back.
    for (name, node) in &nodes {
        let has_bn = input
            .bootc_nodes
            .iter()
            .any(|bn| bn.name_any() == *name && owned_by(bn, input.pool));
        let ours = cordoned_by(node, &pool_name) || disruption::recorded_for(node, &pool_name);
        if has_bn || !ours {
            continue;
        }
        if !disruption::is_back(node, None) {
            out.waiting.push(name.clone());
            continue;
        }
        let mut patch = back_patch(node, &pool_name, None).unwrap_or_default();
        patch.managed = node
            .labels()
            .contains_key(api::labels::MANAGED_LABEL)
            .then_some(false);
        out.writes.push(Write::PatchNode {
            name: name.clone(),
            patch,
        });
    }
    out
}

/// Per-state counts for the status message.
#[derive(Default)]
struct Counts {
    updated: usize,
    staging: usize,
    staged: usize,
    rebooting: usize,
    pending: usize,
    degraded: usize,
}

/// Decides what to do for one pool. See the module docs.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let pool = input.pool;
    let pool_name = pool.name_any();
    let mut out = Plan::default();
    let nodes: BTreeMap<String, &Node> = input.nodes.iter().map(|n| (n.name_any(), *n)).collect();
    let bns: BTreeMap<String, &BootcNode> = input
        .bootc_nodes
        .iter()
        .map(|b| (b.name_any(), *b))
        .collect();
    let current = pool.status.clone().unwrap_or_default();
    let mut problems: Vec<(&'static str, String)> = Vec::new();

    // 1. The target: resolved, or the previous one kept (fail closed).
    let target = match &input.target {
        Ok(t) => Some(t.clone()),
        Err(p) => {
            problems.push((p.reason, p.message.clone()));
            match (&current.target_digest, &current.target_image) {
                (Some(digest), Some(image)) => Some(Target {
                    digest: digest.clone(),
                    image: image.clone(),
                }),
                _ => None,
            }
        }
    };
    // The pull secret the nodes are told about: none when the reference is
    // invalid (every daemon would refuse it and turn Degraded).
    let pull_secret_ref = match &pool.spec.pull_secret_ref {
        Some(r) if r.namespace != input.operator_namespace => {
            problems.push((
                reasons::INVALID_SPEC,
                format!(
                    "spec.pullSecretRef.namespace must be the operator's namespace {}, not {:?}",
                    input.operator_namespace, r.namespace
                ),
            ));
            None
        }
        Some(r) => {
            if input.pull_secret_hash.is_none() {
                problems.push((
                    PULL_SECRET_NOT_FOUND,
                    format!(
                        "spec.pullSecretRef: Secret {}/{} not found",
                        r.namespace, r.name
                    ),
                ));
            }
            Some(r.clone())
        }
        None => None,
    };
    let (selector, selector_error) = match parse_selector(&pool.spec.node_selector) {
        Ok(s) => (Some(s), None),
        Err(message) => (None, Some(message)),
    };
    // Other pools' selectors, parsed once (an unparsable one selects nothing).
    let other_selectors: Vec<(String, Selector)> = input
        .other_pools
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            Selector::try_from(p.spec.node_selector.clone())
                .ok()
                .map(|s| (p.name_any(), s))
        })
        .collect();
    if let Some(message) = selector_error {
        problems.push((reasons::INVALID_SPEC, message));
    }

    // 2. Membership.
    let mut members: Vec<String> = Vec::new();
    let mut conflicts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut to_create: BTreeSet<String> = BTreeSet::new();
    for (name, node) in &nodes {
        // An unparsable selector changes no membership (fail closed): the
        // pool keeps the nodes it has and takes no new ones.
        let selected = match &selector {
            Some(s) => s.matches(node.labels()),
            None => bns.get(name).is_some_and(|bn| owned_by(bn, pool)),
        };
        if !selected {
            continue;
        }
        let others: BTreeSet<String> = other_selectors
            .iter()
            .filter(|(_, s)| s.matches(node.labels()))
            .map(|(name, _)| name.clone())
            .collect();
        match bns.get(name) {
            Some(bn) if owned_by(bn, pool) => {
                if !others.is_empty() {
                    conflicts.insert(name.clone(), others);
                }
                members.push(name.clone());
            }
            Some(bn) => {
                let owner = owner_pool(bn)
                    .map(|(n, _)| n)
                    .unwrap_or_else(|| "an unknown owner".to_owned());
                let mut all = others;
                all.insert(owner);
                conflicts.insert(name.clone(), all);
            }
            None if !others.is_empty() => {
                conflicts.insert(name.clone(), others);
            }
            None => {
                if target.is_some() {
                    to_create.insert(name.clone());
                    members.push(name.clone());
                }
            }
        }
    }
    let member_set: BTreeSet<&String> = members.iter().collect();
    let not_back = plan_leavers(pool, &nodes, &bns, &member_set, &conflicts, &mut out);

    // Drains of nodes that are no longer slotted members are stopped below.
    let slots = match max_unavailable(&pool.spec.rollout.max_unavailable, members.len()) {
        Ok(n) => n,
        Err(e) => {
            problems.push((reasons::INVALID_SPEC, e));
            1
        }
    };
    let paused = pool.spec.rollout.paused;

    let mut counts = Counts::default();
    let mut budget = Budget::new(slots);
    for name in &not_back {
        budget.hold(name);
    }
    let mut unhealthy_in_slots: Vec<String> = Vec::new();
    let mut drain_failures: Vec<String> = Vec::new();
    let mut candidates: Vec<String> = Vec::new();
    let mut degraded_nodes: Vec<String> = Vec::new();
    // Slot holders a pause keeps cordoned and unapproved, for the message.
    let mut held_by_pause: Vec<String> = Vec::new();
    // Per node: (desired owned fields, writes before the BootcNode apply,
    // writes after it).
    let mut desired: BTreeMap<String, Owned> = BTreeMap::new();
    let mut pre: BTreeMap<String, Vec<Write>> = BTreeMap::new();
    let mut post: BTreeMap<String, Vec<Write>> = BTreeMap::new();
    let mut requeue: Option<Duration> = None;
    let mut all_run_target = !members.is_empty();
    // Slots are free but the pool's own unavailable nodes use the budget up.
    let mut waiting_for_budget: Option<String> = None;
    let mut stuck_nodes: Vec<Stuck> = Vec::new();

    if let Some(target) = &target {
        let held = not_back.len();
        let told = told_members(pool, &members, &bns, &nodes, target, slots, held);
        for name in &members {
            let node = nodes.get(name).copied();
            let existing = bns.get(name).copied();
            let mut owned = match existing {
                Some(bn) => Owned::of(bn),
                None => Owned {
                    spec: BootcNodeSpec {
                        desired_image: target.image.clone(),
                        desired_image_state: DesiredImageState::Staged,
                        reboot_policy: pool.spec.disruption.reboot_policy,
                        pull_secret_ref: None,
                        pull_secret_hash: None,
                    },
                    in_slot: false,
                    was_cordoned: None,
                },
            };
            // Spec sync: the target, or what it runs while it waits to be
            // told (see `staging`).
            let image = match existing {
                Some(bn) if !told.contains(name) => kept_image(bn),
                _ => target.image.clone(),
            };
            if owned.spec.desired_image != image {
                owned.spec.desired_image = image;
                owned.spec.desired_image_state = DesiredImageState::Staged;
            }
            owned.spec.reboot_policy = pool.spec.disruption.reboot_policy;
            sync_pull_secret(&mut owned.spec, existing, pull_secret_ref.as_ref(), input);

            let state = existing.map_or(NodeState::Pending, |bn| classify(bn, target));
            let runs = existing.is_some_and(|bn| runs_target(bn, target));
            if !runs {
                all_run_target = false;
            }
            out.summary.states.insert(name.clone(), state);
            match state {
                NodeState::Degraded => {
                    counts.degraded += 1;
                    degraded_nodes.push(name.clone());
                }
                NodeState::UpToDate => counts.updated += 1,
                NodeState::Pending => counts.pending += 1,
                NodeState::Staging => counts.staging += 1,
                NodeState::Staged => counts.staged += 1,
                NodeState::Rebooting => counts.rebooting += 1,
            }
            let ready = node.is_some_and(node_ready);
            let degraded = state == NodeState::Degraded;
            let healthy = ready && !degraded;
            let drain = input.drains.get(name);
            if let Some(node) = node
                && disruption::recorded_for(node, &pool_name)
                && !owned.in_slot
            {
                // Disrupted by our slot, whose BootcNode record was lost
                // (deleted, recreated): the slot is taken back.
                owned.in_slot = true;
                owned.was_cordoned = Some(prior_cordon(node, &pool_name).to_string());
            }

            if owned.in_slot {
                let in_flight = existing.is_none_or(disruption::reboot_in_flight);
                if runs && healthy && !in_flight {
                    // Rule 2: release only when updated, not Degraded, Ready,
                    // and with no reboot in flight: the node is back.
                    if let Some(node) = node {
                        let patch = back_patch(node, &pool_name, owned.was_cordoned.as_deref());
                        if patch.as_ref().is_none_or(|p| p.unschedulable.is_none()) {
                            // Still cordoned (an admin's cordon): unavailable.
                            budget.member(name, node);
                        }
                        if let Some(patch) = patch {
                            pre.entry(name.clone()).or_default().push(Write::PatchNode {
                                name: name.clone(),
                                patch,
                            });
                        }
                    }
                    owned.in_slot = false;
                    owned.was_cordoned = None;
                    owned.spec.desired_image_state = DesiredImageState::Staged;
                    if drain.is_some() {
                        post.entry(name.clone())
                            .or_default()
                            .push(Write::CancelDrain { node: name.clone() });
                    }
                } else {
                    budget.hold(name);
                    // Rule 3 counts Degraded nodes, and NotReady ones unless
                    // they are simply rebooting (approved, not yet on the
                    // target) within REBOOT_GRACE.
                    let rebooting_since = node.and_then(not_ready_since).filter(|_| {
                        owned.spec.desired_image_state == DesiredImageState::Booted && !runs
                    });
                    let still_rebooting = rebooting_since.is_some_and(|since| {
                        let down = input.now.duration_since(since).unsigned_abs();
                        if down < REBOOT_GRACE {
                            let left = REBOOT_GRACE.saturating_sub(down);
                            requeue = Some(requeue.map_or(left, |r| r.min(left)));
                            true
                        } else {
                            false
                        }
                    });
                    if degraded || (!healthy && !still_rebooting) {
                        unhealthy_in_slots.push(name.clone());
                    }
                    if owned.spec.desired_image_state == DesiredImageState::Staged && !runs {
                        if paused {
                            held_by_pause.push(name.clone());
                        }
                        // Keep the node cordoned, recorded and drained
                        // until approval.
                        if let Some(patch) = node.and_then(|n| slot_patch(n, &pool_name)) {
                            post.entry(name.clone())
                                .or_default()
                                .push(Write::PatchNode {
                                    name: name.clone(),
                                    patch,
                                });
                        }
                        match drain {
                            None => {
                                out.summary.draining.insert(name.clone());
                                post.entry(name.clone())
                                    .or_default()
                                    .push(Write::StartDrain { node: name.clone() });
                            }
                            Some(DrainPhase::Running) => {
                                out.summary.draining.insert(name.clone());
                            }
                            Some(DrainPhase::Succeeded) => {
                                // No event: SlotAssigned announced the
                                // disruption, the daemon's Rebooting shows it.
                                if state == NodeState::Staged && !paused {
                                    owned.spec.desired_image_state = DesiredImageState::Booted;
                                }
                            }
                            Some(DrainPhase::Failed { message, at }) => {
                                out.summary.draining.insert(name.clone());
                                drain_failures.push(format!("{name}: {message}"));
                                let since = input.now.duration_since(*at).unsigned_abs();
                                if since >= DRAIN_RETRY {
                                    post.entry(name.clone())
                                        .or_default()
                                        .push(Write::StartDrain { node: name.clone() });
                                } else {
                                    let left = DRAIN_RETRY.saturating_sub(since);
                                    requeue = Some(requeue.map_or(left, |r| r.min(left)));
                                }
                            }
                        }
                    }
                }
            } else {
                if let Some(node) = node {
                    budget.member(name, node);
                }
                // Approval belongs to a slot.
                owned.spec.desired_image_state = DesiredImageState::Staged;
                if drain.is_some() {
                    post.entry(name.clone())
                        .or_default()
                        .push(Write::CancelDrain { node: name.clone() });
                }
                let deleting = node.is_some_and(|n| n.metadata.deletion_timestamp.is_some());
                if state == NodeState::Staged
                    && healthy
                    && !deleting
                    && !conflicts.contains_key(name)
                {
                    candidates.push(name.clone());
                }
            }
            // Label the member node.
            if let Some(node) = node
                && !node.labels().contains_key(api::labels::MANAGED_LABEL)
            {
                post.entry(name.clone()).or_default().insert(
                    0,
                    Write::PatchNode {
                        name: name.clone(),
                        patch: NodePatch {
                            managed: Some(true),
                            ..NodePatch::default()
                        },
                    },
                );
            }
            let facts = stuck::Facts {
                in_slot: owned.in_slot,
                approved: owned.spec.desired_image_state == DesiredImageState::Booted,
                ready,
                runs_target: runs,
                degraded,
                staging: state == NodeState::Staging,
                daemon_behind: existing.is_some_and(daemon_behind),
            };
            watch_phase(
                name,
                facts,
                node,
                input,
                &mut out.phases,
                &mut stuck_nodes,
                &mut requeue,
            );
            desired.insert(name.clone(), owned);
        }

        // Rule 3: two unhealthy slotted nodes stop new assignments.
        let halted = unhealthy_in_slots.len() >= 2;
        out.summary.halted = halted;
        if !paused && !halted {
            assign_slots(
                &candidates,
                &mut budget,
                &nodes,
                &pool_name,
                &mut desired,
                &mut post,
            );
            // The new slot holders are cordoned and about to drain.
            out.summary.draining.extend(
                candidates
                    .iter()
                    .filter(|c| desired.get(*c).is_some_and(|o| o.in_slot))
                    .cloned(),
            );
            if let Some(others) = budget.blocked_by_others().filter(|_| {
                candidates
                    .iter()
                    .any(|c| desired.get(c).is_some_and(|o| !o.in_slot))
            }) {
                waiting_for_budget = Some(others);
            }
        }
        // A cordon of ours on a node outside any slot (its slot record was
        // lost with its BootcNode) is lifted: nothing is left cordoned.
        for (name, owned) in &desired {
            let Some(node) = nodes.get(name) else {
                continue;
            };
            let uncordoning = pre.get(name).is_some_and(|ws| {
                ws.iter().any(|w| {
                    matches!(w, Write::PatchNode { patch, .. } if patch.unschedulable == Some(false))
                })
            });
            if !owned.in_slot && !uncordoning && cordoned_by(node, &pool_name) {
                pre.entry(name.clone()).or_default().push(Write::PatchNode {
                    name: name.clone(),
                    patch: NodePatch::UNCORDON,
                });
            }
        }
        if halted {
            report_halt(
                &unhealthy_in_slots,
                &current,
                &mut problems,
                &mut out.events,
            );
        }

        // Emit per-node writes in order: pre, apply, post. Nodes leaving a
        // slot go first, so that their uncordon and slot release land before
        // any new slot is taken: at no instant are more nodes disrupted than
        // maxUnavailable, even between two writes of this plan. (The actuator
        // runs nodes concurrently but keeps this: see `actuator::waves`.)
        let was_in_slot = |name: &String| bns.get(name).is_some_and(|bn| Owned::of(bn).in_slot);
        let mut order: Vec<(&String, &Owned)> = desired.iter().collect();
        let releasing = |name: &String, owned: &Owned| was_in_slot(name) && !owned.in_slot;
        order.sort_by_key(|(name, owned)| if releasing(name, owned) { 0 } else { 1 });
        for (name, owned) in order {
            if let Some(w) = pre.remove(name) {
                out.writes.extend(w);
            }
            let changed = bns.get(name).is_none_or(|bn| {
                Owned::of(bn) != *owned
                    || !bn
                        .meta()
                        .owner_references
                        .as_ref()
                        .is_some_and(|o| o.iter().any(|o| o.kind == "BootcNodePool"))
            });
            if changed || to_create.contains(name) {
                out.writes
                    .push(Write::ApplyBootcNode(Box::new(owned.to_apply(name, pool))));
            }
            if let Some(w) = post.remove(name) {
                out.writes.extend(w);
            }
        }
    } else {
        all_run_target = false;
        if problems.is_empty() {
            problems.push((
                reasons::INVALID_SPEC,
                format!(
                    "spec.image.ref {:?}: no target image",
                    pool.spec.image.reference
                ),
            ));
        }
    }

    out.summary.slots = slots;
    out.summary.paused = paused;
    out.summary.slots_in_use = desired.values().filter(|o| o.in_slot).count();

    // Running drains of nodes that hold no slot in this pool stop.
    for (name, phase) in &input.drains {
        let slotted = desired.get(name).is_some_and(|o| o.in_slot);
        let already = out
            .writes
            .iter()
            .any(|w| matches!(w, Write::CancelDrain { node } if node == name));
        if !slotted && !already && *phase == DrainPhase::Running {
            out.writes.push(Write::CancelDrain { node: name.clone() });
        }
    }

    // 4. Status.
    if !conflicts.is_empty() {
        let text: Vec<String> = conflicts
            .iter()
            .map(|(node, pools)| {
                format!(
                    "node {node} is also selected by pool(s) {}",
                    pools.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        problems.push((reasons::NODE_CONFLICT, text.join("; ")));
    }
    report_stuck(&stuck_nodes, &current, &mut problems, &mut out.events);
    if !drain_failures.is_empty() {
        problems.push((DRAIN_TIMED_OUT, drain_failures.join("; ")));
    }
    if !degraded_nodes.is_empty() {
        problems.push((
            reasons::NODE_DEGRADED,
            format!("degraded nodes: {}", degraded_nodes.join(", ")),
        ));
    }
    let degraded_cond = degraded_condition(&mut problems);

    let total = members.len();
    let slotted: Vec<&str> = desired
        .iter()
        .filter(|(_, o)| o.in_slot && !paused)
        .map(|(n, _)| n.as_str())
        .collect();
    let breakdown = breakdown(
        &counts,
        total,
        &slotted,
        &not_back,
        waiting_for_budget.as_deref(),
    );
    let up_to_date = if target.is_some() && counts.updated == total {
        ConditionUpdate::new(reasons::UP_TO_DATE, true, reasons::ALL_UPDATED, breakdown)
    } else if paused {
        // A pause holds the slots it finds: say which nodes stay cordoned.
        let message = if held_by_pause.is_empty() {
            breakdown
        } else {
            format!(
                "{breakdown}; held cordoned in reboot slots until resumed: {}",
                held_by_pause.join(", ")
            )
        };
        ConditionUpdate::new(reasons::UP_TO_DATE, false, reasons::PAUSED, message)
    } else {
        ConditionUpdate::new(
            reasons::UP_TO_DATE,
            false,
            reasons::ROLLOUT_IN_PROGRESS,
            breakdown,
        )
    };

    let generation = pool.metadata.generation;
    let mut status = current.clone();
    status.observed_generation = generation;
    status.target_digest = target.as_ref().map(|t| t.digest.clone());
    status.target_image = target.as_ref().map(|t| t.image.clone());
    status.target_summary = target
        .as_ref()
        .map(|t| target_summary(t, &input.bootc_nodes));
    if all_run_target && let Some(t) = &target {
        status.deployed_digest = Some(t.digest.clone());
    }
    // An empty pool has nothing to update, whatever it last deployed.
    status.update_available = total > 0
        && status.target_digest.is_some()
        && status.target_digest != status.deployed_digest;
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    status.node_count = count(total);
    status.updated_count = count(counts.updated);
    status.updating_count =
        count(counts.staging + counts.staged + counts.rebooting + counts.pending);
    status.degraded_count = count(counts.degraded);
    let now = Time(input.now);
    conditions::apply(&mut status.conditions, &up_to_date, generation, &now);
    conditions::apply(&mut status.conditions, &degraded_cond, generation, &now);
    for c in crate::health::kstatus_conditions(&up_to_date, &degraded_cond) {
        conditions::apply(&mut status.conditions, &c, generation, &now);
    }
    if let Some(t) = &target {
        out.events.extend(milestones(
            &current,
            t,
            total,
            counts.updated,
            slots,
            paused,
        ));
    }
    if status != current {
        let since_last = input
            .last_status_write
            .map(|at| input.now.duration_since(at).unsigned_abs());
        match since_last {
            Some(since) if since < COUNTS_MIN_INTERVAL && counts_only(&current, &status) => {
                // Coalesced with the changes to come; written by the requeue.
                let left = COUNTS_MIN_INTERVAL.saturating_sub(since);
                requeue = Some(requeue.map_or(left, |r| r.min(left)));
            }
            _ => out.status = Some(status),
        }
    }
    out.requeue_after = requeue;
    out
}

/// The pull-secret fields of a member's spec. A pool-wide credentials
/// problem (the referenced Secret missing, or not a docker config) is
/// reported once on the pool and is not passed on: an existing BootcNode
/// keeps the fields it has (its host keeps the auth file it has), so that
/// nodes do not all turn Degraded over it and a node on the target stays
/// healthy; staging goes on with the credentials each host already has.
fn sync_pull_secret(
    spec: &mut BootcNodeSpec,
    existing: Option<&BootcNode>,
    pull_secret_ref: Option<&api::SecretReference>,
    input: &PlanInput<'_>,
) {
    let invalid = input
        .target
        .as_ref()
        .is_err_and(|p| p.reason == reasons::INVALID_PULL_SECRET);
    let broken = pull_secret_ref.is_some() && (input.pull_secret_hash.is_none() || invalid);
    if broken && let Some(bn) = existing {
        spec.pull_secret_ref = bn.spec.pull_secret_ref.clone();
        spec.pull_secret_hash = bn.spec.pull_secret_hash.clone();
        return;
    }
    spec.pull_secret_ref = pull_secret_ref.cloned().filter(|_| !broken);
    spec.pull_secret_hash = spec
        .pull_secret_ref
        .as_ref()
        .and_then(|_| input.pull_secret_hash.clone());
}

/// The members told the target (see [`staging`]).
fn told_members(
    pool: &BootcNodePool,
    members: &[String],
    bns: &BTreeMap<String, &BootcNode>,
    nodes: &BTreeMap<String, &Node>,
    target: &Target,
    slots: usize,
    held_elsewhere: usize,
) -> BTreeSet<String> {
    let pool_name = pool.name_any();
    let view: Vec<staging::Member> = members
        .iter()
        .map(|name| {
            let bn = bns.get(name).copied();
            let node = nodes.get(name).copied();
            let status = bn.and_then(|b| b.status.as_ref());
            staging::Member {
                name: name.clone(),
                told: bn.is_none_or(|b| b.spec.desired_image == target.image),
                runs_target: bn.is_some_and(|b| runs_target(b, target)),
                staged: bn.is_some_and(|b| classify(b, target) == NodeState::Staged),
                in_slot: bn
                    .zip(node)
                    .is_some_and(|(b, n)| holds_slot(n, b, &pool_name)),
                unlocked: status.and_then(|s| s.download_only_supported) == Some(false),
            }
        })
        .collect();
    let holders = view.iter().filter(|m| m.in_slot).count() + held_elsewhere;
    let bounds = staging::Bounds::of(&pool.spec.rollout);
    staging::told(&view, bounds, slots.saturating_sub(holders))
}

/// What a member waiting to be told the target is kept on: the image it
/// runs (its BootcNode's desired image while it has not reported one).
fn kept_image(bn: &BootcNode) -> String {
    bn.status
        .as_ref()
        .and_then(|s| s.booted.as_ref())
        .and_then(|b| b.image.clone())
        .unwrap_or_else(|| bn.spec.desired_image.clone())
}

/// Has the daemon not reported on its BootcNode's current spec?
fn daemon_behind(bn: &BootcNode) -> bool {
    match &bn.status {
        None => true,
        Some(s) => matches!(
            (s.observed_generation, bn.metadata.generation),
            (Some(seen), Some(generation)) if seen < generation
        ),
    }
}

/// Times a member's phase (see [`stuck`]): past its deadline it is stuck;
/// before, the pool is looked at again when it would be.
fn watch_phase(
    name: &str,
    facts: stuck::Facts,
    node: Option<&Node>,
    input: &PlanInput<'_>,
    phases: &mut BTreeMap<String, stuck::Phase>,
    stuck_nodes: &mut Vec<Stuck>,
    requeue: &mut Option<Duration>,
) {
    let Some(phase) = stuck::phase_of(facts) else {
        return;
    };
    phases.insert(name.to_owned(), phase);
    let since = if phase.clocked() {
        match input.phase_clock.get(name) {
            Some((seen, since)) if *seen == phase => *since,
            _ => input.now,
        }
    } else {
        node.and_then(not_ready_since).unwrap_or(input.now)
    };
    match stuck::assess(name, phase, since, input.now) {
        Ok(s) => stuck_nodes.push(s),
        Err(left) => *requeue = Some(requeue.map_or(left, |r| r.min(left))),
    }
}

/// Rule 3's halt on the pool's Degraded condition, and one Warning Event
/// when it starts.
fn report_halt(
    unhealthy_in_slots: &[String],
    current: &BootcNodePoolStatus,
    problems: &mut Vec<(&'static str, String)>,
    events: &mut Vec<PlannedEvent>,
) {
    problems.push((
        reasons::ROLLOUT_HALTED,
        format!(
            "rollout halted: {} nodes in reboot slots are unhealthy (Degraded or not Ready): {}",
            unhealthy_in_slots.len(),
            unhealthy_in_slots.join(", ")
        ),
    ));
    if conditions::reason(&current.conditions, reasons::DEGRADED) != Some(reasons::ROLLOUT_HALTED) {
        events.push(PlannedEvent {
            reason: event_reasons::ROLLOUT_HALTED,
            message: format!(
                "no new reboot slots: unhealthy nodes in slots: {}",
                unhealthy_in_slots.join(", ")
            ),
            warning: true,
            node: None,
        });
    }
}

/// Stuck nodes go on the pool's Degraded condition, and each one newly
/// stuck in its phase gets one Warning Event.
fn report_stuck(
    stuck_nodes: &[Stuck],
    current: &BootcNodePoolStatus,
    problems: &mut Vec<(&'static str, String)>,
    events: &mut Vec<PlannedEvent>,
) {
    if stuck_nodes.is_empty() {
        return;
    }
    let reported = conditions::message(&current.conditions, reasons::DEGRADED).unwrap_or("");
    for s in stuck_nodes {
        if !reported.contains(&s.key()) {
            events.push(PlannedEvent {
                reason: event_reasons::NODE_STUCK,
                message: s.message(),
                warning: true,
                node: Some(s.node.clone()),
            });
        }
    }
    let messages: Vec<String> = stuck_nodes.iter().map(Stuck::message).collect();
    problems.push((reasons::NODE_STUCK, messages.join("; ")));
}

/// The target as a person reads it: the version label bootc reports for it
/// (from a node that runs it) and the digest's first 12 hex digits.
pub fn target_summary(target: &Target, bootc_nodes: &[&BootcNode]) -> String {
    let short: String = target.digest.chars().take("sha256:".len() + 12).collect();
    let version = bootc_nodes
        .iter()
        .filter(|bn| runs_target(bn, target))
        .find_map(|bn| bn.status.as_ref()?.booted.as_ref()?.version.clone());
    match version {
        Some(v) => format!("{v} ({short})"),
        None => short,
    }
}

/// The Degraded condition: the most important problem's reason, and every
/// problem's message.
fn degraded_condition(problems: &mut [(&'static str, String)]) -> ConditionUpdate {
    let rank = |r: &str| match r {
        reasons::INVALID_SPEC => 0,
        reasons::NODE_CONFLICT => 2,
        reasons::ROLLOUT_HALTED => 3,
        reasons::NODE_STUCK => 4,
        DRAIN_TIMED_OUT => 5,
        reasons::NODE_DEGRADED => 6,
        _ => 1,
    };
    problems.sort_by_key(|(r, _)| rank(r));
    match problems.first() {
        Some((reason, _)) => {
            let message: Vec<&str> = problems.iter().map(|(_, m)| m.as_str()).collect();
            ConditionUpdate::new(reasons::DEGRADED, true, reason, message.join("; "))
        }
        None => ConditionUpdate::new(reasons::DEGRADED, false, reasons::HEALTHY, "no issues"),
    }
}

/// "5/10 updated; 2 staging, 2 staged, 1 rebooting" and what holds the
/// rollout: the nodes in reboot slots (`slotted`; a pause names them its
/// own way), nodes that left mid-reboot, the pool's own unavailable nodes.
fn breakdown(
    counts: &Counts,
    total: usize,
    slotted: &[&str],
    not_back: &[String],
    waiting_for_budget: Option<&str>,
) -> String {
    if total == 0 {
        return "0 nodes: no node is a member (none matches spec.nodeSelector, or each one that does is in conflict)".to_owned();
    }
    let mut s = format!(
        "{}/{} updated; {} staging, {} staged, {} rebooting",
        counts.updated, total, counts.staging, counts.staged, counts.rebooting
    );
    if counts.pending > 0 {
        s.push_str(&format!(", {} pending", counts.pending));
    }
    if counts.degraded > 0 {
        s.push_str(&format!(", {} degraded", counts.degraded));
    }
    if !slotted.is_empty() {
        s.push_str(&format!("; in reboot slots: {}", slotted.join(", ")));
    }
    if !not_back.is_empty() {
        s.push_str(&format!(
            "; left the pool, leaving once back from their reboot: {}",
            not_back.join(", ")
        ));
    }
    if let Some(others) = waiting_for_budget {
        s.push_str(&format!(
            "; no new reboot slot while these nodes are unavailable: {others}"
        ));
    }
    s
}

/// The pool's Normal events: a rollout starts when the pool adopts a target
/// that some members do not run, and is complete when they all do.
fn milestones(
    current: &BootcNodePoolStatus,
    target: &Target,
    total: usize,
    updated: usize,
    slots: usize,
    paused: bool,
) -> Option<PlannedEvent> {
    let adopted_now = current.target_digest.as_deref() != Some(target.digest.as_str());
    let behind = total.saturating_sub(updated);
    if adopted_now && behind > 0 {
        return Some(PlannedEvent {
            reason: event_reasons::ROLLOUT_STARTED,
            message: format!(
                "rolling out {} to {behind} of {total} nodes, at most {slots} at a time{}",
                target.image,
                if paused { " (paused)" } else { "" }
            ),
            warning: false,
            node: None,
        });
    }
    let was_complete =
        conditions::reason(&current.conditions, reasons::UP_TO_DATE) == Some(reasons::ALL_UPDATED);
    // A pool seen for the first time already up to date rolled nothing out.
    let rolled = current.target_digest.is_some() && !was_complete;
    (total > 0 && behind == 0 && rolled).then(|| PlannedEvent {
        reason: event_reasons::ROLLOUT_COMPLETE,
        message: format!("all {total} nodes run {}", target.image),
        warning: false,
        node: None,
    })
}

/// Do `old` and `new` differ only in the node counts and the UpToDate
/// message that spells them out (same status and reason)?
fn counts_only(old: &BootcNodePoolStatus, new: &BootcNodePoolStatus) -> bool {
    let strip = |s: &BootcNodePoolStatus| {
        let mut s = s.clone();
        s.node_count = 0;
        s.updated_count = 0;
        s.updating_count = 0;
        s.degraded_count = 0;
        // Ready and Reconciling copy UpToDate's message (crate::health).
        for c in &mut s.conditions {
            if [reasons::UP_TO_DATE, reasons::READY, reasons::RECONCILING]
                .contains(&c.type_.as_str())
            {
                c.message.clear();
            }
        }
        s
    };
    strip(old) == strip(new)
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
