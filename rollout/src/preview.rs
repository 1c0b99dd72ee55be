//! The rollout ahead (`kubectl bootc plan`): what the pool would do, wave
//! by wave, computed by the plan itself (`crate::pipeline`) on a copy of the cluster's
//! objects where every write lands at once, every drain succeeds at once,
//! and every daemon stages and boots what it is told at once (no failure,
//! no reboot time). Waits the plan asks for (a canary soak, a health gate's
//! settle) pass on the copy's clock; a wait for something outside the
//! pool's objects (a closed maintenance window, a hold, a blocking pod, a
//! firing alert, a pool depended on, a failed image) stops the preview,
//! which then says what holds the rest, in the pool's own words.
//!
//! Writing nothing, it reads only what the controller's plan reads.

use std::collections::BTreeMap;
use std::time::Duration;

use api::Node;
use api::labels::{
    CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION, DO_NOT_DISRUPT_BY_ANNOTATION,
    EXCLUDE_FROM_LBS_LABEL, KARPENTER_DO_NOT_DISRUPT_ANNOTATION, LB_EXCLUDED_BY_ANNOTATION,
    MANAGED_LABEL,
};
use api::{
    BootEntryStatus, BootcNode, BootcNodePool, BootcNodeStatus, ConditionType, DaemonPhase,
    conditions,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube_core::ResourceExt;

use crate::holds::gates::Gates;
use crate::model::{DrainPhase, NodePatch, PlanInput, SecretSeen, Target, Write};

/// What the preview starts from: copies of what the plan reads.
#[derive(Clone, Debug)]
pub struct Start {
    pub pool: BootcNodePool,
    pub nodes: Vec<Node>,
    pub bootc_nodes: Vec<BootcNode>,
    pub other_pools: Vec<BootcNodePool>,
    pub pull_secret: Option<SecretSeen>,
    pub gates: Gates,
    pub operator_namespace: String,
    pub now: Timestamp,
}

/// The rollout ahead.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preview {
    /// The nodes given reboot slots together, wave after wave.
    pub waves: Vec<Vec<String>>,
    /// Members not on the target at the end, with what holds them (the
    /// pool's UpToDate reason and message); None: every member updated.
    pub held: Option<(String, String)>,
    /// Where each member stands at the end (by the last plan).
    pub standings: crate::standing::Standings,
}

/// How many plans a preview makes at most (each member takes a few).
const PLANS_PER_MEMBER: usize = 8;
/// The longest wait on the copy's clock before the preview stops.
const LONGEST_WAIT: Duration = Duration::from_secs(24 * 3600);

/// The rollout of `target` ahead (see the module docs).
pub fn preview(mut start: Start, target: &Target) -> Preview {
    let mut drains: BTreeMap<String, DrainPhase> = BTreeMap::new();
    let mut out = Preview::default();
    let budget = PLANS_PER_MEMBER * (start.nodes.len() + 1);
    for _ in 0..budget {
        let plan = crate::pipeline::plan(&input(&start, target, &drains));
        let wave: Vec<String> = plan
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::StartDrain { node } => Some(node.clone()),
                _ => None,
            })
            .collect();
        if !wave.is_empty() {
            out.waves.push(wave);
        }
        if let Some(status) = plan.status.clone() {
            start.pool.status = Some(status);
        }
        out.standings = plan.summary.standings;
        let pool = start.pool.name_any();
        let wrote = !plan.writes.is_empty();
        for write in plan.writes.iter() {
            land(write, &pool, &mut start, &mut drains);
        }
        let played = play_daemons(&mut start.bootc_nodes, start.now);
        if !wrote && !played {
            match plan.requeue_after.filter(|d| *d <= LONGEST_WAIT) {
                Some(wait) if !wait.is_zero() => {
                    start.now = start.now.checked_add(wait).unwrap_or(start.now);
                }
                _ => break,
            }
        }
    }
    out.held = held(&start.pool);
    out
}

/// Where each member stands now: the plan run once on the copy, with no
/// drain in flight.
pub fn standings(start: &Start, target: &Target) -> crate::standing::Standings {
    crate::pipeline::plan(&input(start, target, &BTreeMap::new()))
        .summary
        .standings
}

/// What the plan reads of the copy.
pub(crate) fn input<'a>(
    start: &'a Start,
    target: &Target,
    drains: &BTreeMap<String, DrainPhase>,
) -> PlanInput<'a> {
    PlanInput {
        pool: &start.pool,
        target: Ok(target.clone()),
        nodes: start.nodes.iter().collect(),
        bootc_nodes: start.bootc_nodes.iter().collect(),
        other_pools: start.other_pools.iter().collect(),
        pull_secret: start.pull_secret.clone(),
        drains: drains.clone(),
        operator_namespace: &start.operator_namespace,
        last_status_write: None,
        now: start.now,
        phase_clock: std::sync::Arc::default(),
        deadlines: crate::reboot::stuck::Deadlines::default(),
        gates: start.gates.clone(),
        node_lifecycle_conditions: false,
    }
}

/// What holds the members behind, as the pool's UpToDate says it (None:
/// every member is updated).
fn held(pool: &BootcNodePool) -> Option<(String, String)> {
    let status = pool.status.as_ref()?;
    let c = conditions::find(&status.conditions, ConditionType::UpToDate)?;
    (c.status != "True").then(|| (c.reason.to_string(), c.message.to_string()))
}

/// One write, landed on the copy at once (a drain succeeds at once).
pub(crate) fn land(
    write: &Write,
    pool: &str,
    start: &mut Start,
    drains: &mut BTreeMap<String, DrainPhase>,
) {
    match write {
        Write::ApplyBootcNode(apply) => {
            if !start.bootc_nodes.iter().any(|b| b.name_any() == apply.name) {
                let created = BootcNode::new(&apply.name, apply.spec.clone());
                start.bootc_nodes.push(created);
            }
            for bn in start
                .bootc_nodes
                .iter_mut()
                .filter(|b| b.name_any() == apply.name)
            {
                apply_owned(bn, apply);
            }
        }
        Write::DeleteBootcNode { name } => start.bootc_nodes.retain(|b| b.name_any() != *name),
        Write::PatchNode { name, patch } => {
            if let Some(node) = start.nodes.iter_mut().find(|n| n.name_any() == *name) {
                patch_node(node, patch, pool);
            }
        }
        Write::PatchNodeConditions { .. } => {}
        Write::StartDrain { node } => {
            drains.insert(node.clone(), DrainPhase::Succeeded);
        }
        Write::CancelDrain { node } => {
            drains.remove(node);
        }
    }
}

/// The controller's fields of a BootcNode, as its server-side apply sets
/// them: the spec, the owner, and exactly its annotations among ours.
fn apply_owned(bn: &mut BootcNode, apply: &crate::model::BootcNodeApply) {
    if bn.spec != apply.spec {
        bn.metadata.generation = Some(bn.metadata.generation.unwrap_or(1) + 1);
    }
    bn.spec = apply.spec.clone();
    bn.metadata.owner_references = Some(vec![OwnerReference::clone(&apply.owner)]);
    let annotations = bn.annotations_mut();
    annotations.retain(|k, _| !crate::members::owned::OWNED_ANNOTATIONS.contains(&k.as_str()));
    annotations.extend(apply.annotations.clone());
}

/// A [`NodePatch`], as the actuator's merge patch sets it.
fn patch_node(node: &mut Node, patch: &NodePatch, pool: &str) {
    let set = |map: &mut BTreeMap<String, String>, key: &str, value: Option<String>| match value {
        Some(v) => {
            map.insert(key.to_owned(), v);
        }
        None => {
            map.remove(key);
        }
    };
    if let Some(managed) = patch.managed {
        set(node.labels_mut(), MANAGED_LABEL, managed.then(String::new));
    }
    if let Some(unschedulable) = patch.unschedulable {
        node.spec.get_or_insert_default().unschedulable = unschedulable.then_some(true);
    }
    let ours = |on: bool| on.then(|| pool.to_owned());
    let annotations = node.annotations_mut();
    if let Some(mark) = patch.mark {
        set(annotations, CORDONED_BY_ANNOTATION, ours(mark));
    }
    if let Some(disrupted) = patch.disrupted {
        set(annotations, DISRUPTED_BY_ANNOTATION, ours(disrupted));
    }
    if let Some(on) = patch.do_not_disrupt {
        set(
            annotations,
            KARPENTER_DO_NOT_DISRUPT_ANNOTATION,
            on.then(|| "true".to_owned()),
        );
        set(annotations, DO_NOT_DISRUPT_BY_ANNOTATION, ours(on));
    }
    if let Some(on) = patch.exclude_lb {
        set(annotations, LB_EXCLUDED_BY_ANNOTATION, ours(on));
        set(
            node.labels_mut(),
            EXCLUDE_FROM_LBS_LABEL,
            on.then(String::new),
        );
    }
}

/// Every daemon does at once what its spec says: stages the desired image,
/// or boots it when approved. Returns whether any status changed.
pub(crate) fn play_daemons(bns: &mut [BootcNode], now: Timestamp) -> bool {
    let mut changed = false;
    for bn in bns.iter_mut() {
        let desired = bn.spec.desired_image.clone();
        let entry = || BootEntryStatus {
            image: Some(desired.clone()),
            image_digest: api::image_ref::digest_of(&desired).map(Into::into),
            ..BootEntryStatus::default()
        };
        let old = bn.status.clone();
        let status = bn.status.get_or_insert_with(BootcNodeStatus::default);
        let (phase, staged) =
            if bn.spec.approved() || status.booted.as_ref().is_some_and(|b| b.is_image(&desired)) {
                status.booted = Some(entry());
                (DaemonPhase::Idle, None)
            } else {
                (DaemonPhase::Staged, Some(entry()))
            };
        status.staged = staged;
        status.observed_generation = bn.metadata.generation;
        let update = conditions::ConditionUpdate::new(
            ConditionType::Idle,
            phase == DaemonPhase::Idle,
            phase.reason(),
            "played by the preview",
        );
        conditions::apply(&mut status.conditions, &update, None, &Time(now));
        changed |= bn.status != old;
    }
    changed
}

/// The names in `waves`, in order.
pub fn order(waves: &[Vec<String>]) -> Vec<&str> {
    waves.iter().flatten().map(String::as_str).collect()
}
