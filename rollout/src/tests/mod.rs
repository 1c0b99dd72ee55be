//! Table-driven tests of the planner, one file per rule (see each step's
//! module), sharing the `World` fixture below.

use std::collections::BTreeMap;

use api::DaemonPhase;
use api::Node;
use api::labels::MANAGED_LABEL;
use api::test_support::{BootcNodeBuilder, NodeBuilder, PoolBuilder};
use api::{
    BootEntryStatus, BootcNode, BootcNodePool, BootcNodeStatus, ConditionType, DesiredImageState,
    Reason, RebootPolicy, SecretReference, conditions,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_core::ResourceExt;
use serde_json::json;

use super::*;
use crate::holds::disruption;
use crate::reboot::stuck;
use api::BootcNodePoolStatus;
use api::node_health::is_cordoned as node_unschedulable;
use std::time::Duration;

mod batches;
mod budget;
mod cordon;
mod freeze;
mod gates;
mod guards;
mod halt;
mod health;
mod leaving;
mod membership;
mod order;
mod os_guard;
mod preview;
mod sequence;
mod silences;
mod slots;
mod spec;
mod standing;
mod state;
mod status;
mod tagged;
mod target;
mod updaters;
mod window;

const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const REPO: &str = "quay.io/acme/os";

fn image(d: &str) -> String {
    format!("{REPO}@{d}")
}

fn target(d: &str) -> Target {
    Target {
        digest: d.into(),
        image: image(d),
        platform_digests: Vec::new(),
        kubelet: None,
    }
}

fn pool(name: &str, max: IntOrString, paused: bool) -> BootcNodePool {
    PoolBuilder::new(name)
        .selects("pool", name)
        .image(image(NEW))
        .paused(paused)
        .max_unavailable(max)
        .uid(&format!("uid-{name}"))
        .generation(3)
        .build()
}

fn node(name: &str, pool: &str, ready: bool, cordoned: bool) -> Node {
    NodeBuilder::new(name)
        .label("pool", pool)
        .managed()
        .unschedulable(cordoned)
        .ready(ready)
        .build()
}

/// What the daemon reports, for the table.
#[derive(Clone, Copy, Debug)]
enum Daemon {
    Nothing,
    Idle(&'static str),
    Staging(&'static str),
    Staged(&'static str),
    Rebooting(&'static str),
}

struct Bn {
    name: &'static str,
    pool: &'static str,
    desired: &'static str,
    booted_state: DesiredImageState,
    daemon: Daemon,
    degraded: bool,
    slot: Option<bool>,
    /// The daemon's last report is for an older spec generation.
    behind: bool,
}

fn bn(name: &'static str, desired: &'static str, daemon: Daemon) -> Bn {
    Bn {
        name,
        pool: "a",
        desired,
        booted_state: DesiredImageState::Staged,
        daemon,
        degraded: false,
        slot: None,
        behind: false,
    }
}

impl Bn {
    fn degraded(mut self) -> Self {
        self.degraded = true;
        self
    }
    fn slot(mut self, was_cordoned: bool) -> Self {
        self.slot = Some(was_cordoned);
        self
    }
    fn approved(mut self) -> Self {
        self.booted_state = DesiredImageState::Booted;
        self
    }
    fn behind(mut self) -> Self {
        self.behind = true;
        self
    }
    fn owned_by(mut self, pool: &'static str) -> Self {
        self.pool = pool;
        self
    }
    fn build(&self) -> BootcNode {
        let mut b = BootcNodeBuilder::new(self.name)
            .desired(image(self.desired))
            .approved(self.booted_state == DesiredImageState::Booted)
            .owner(self.pool, &format!("uid-{}", self.pool));
        let (booted, staged, phase) = match self.daemon {
            Daemon::Nothing => return b.build(),
            Daemon::Idle(d) => (d, None, DaemonPhase::Idle),
            Daemon::Staging(d) => (d, None, DaemonPhase::Staging),
            Daemon::Staged(d) => (d, Some(self.desired), DaemonPhase::Staged),
            Daemon::Rebooting(d) => (d, Some(self.desired), DaemonPhase::Rebooting),
        };
        if self.behind {
            b = b.generation(5).observed(4);
        }
        b = b.booted(&image(booted), booted);
        if let Some(s) = staged {
            b = b.staged(&image(s), s);
        }
        b = b.phase(phase);
        if self.degraded {
            b.degraded("").build()
        } else {
            b.healthy().build()
        }
    }
}

struct World {
    pool: BootcNodePool,
    others: Vec<BootcNodePool>,
    nodes: Vec<Node>,
    bns: Vec<BootcNode>,
    /// Members holding a slot (recorded on their Nodes): name, pool, and
    /// whether the Node was cordoned before.
    slots: Vec<(String, String, bool)>,
    drains: BTreeMap<String, DrainPhase>,
    target: Result<Target, TargetProblem>,
    secret_hash: Option<String>,
    /// The Secret does not opt in to the pool.
    secret_refused: bool,
    last_status_write: Option<Timestamp>,
    clock: stuck::Clock,
    gates: crate::holds::gates::Gates,
    node_lifecycle_conditions: bool,
}

fn now() -> Timestamp {
    Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(1_000_000)
}

impl World {
    fn new(pool: BootcNodePool) -> Self {
        World {
            pool,
            others: vec![],
            nodes: vec![],
            bns: vec![],
            slots: vec![],
            drains: BTreeMap::new(),
            target: Ok(target(NEW)),
            secret_hash: None,
            secret_refused: false,
            last_status_write: None,
            clock: stuck::Clock::new(),
            gates: crate::holds::gates::Gates::default(),
            node_lifecycle_conditions: false,
        }
    }
    fn node(mut self, n: Node) -> Self {
        self.nodes.push(n);
        self
    }
    fn bn(mut self, b: Bn) -> Self {
        if let Some(was_cordoned) = b.slot {
            self.slots
                .push((b.name.to_owned(), b.pool.to_owned(), was_cordoned));
        }
        self.bns.push(b.build());
        self
    }
    fn drain(mut self, node: &str, phase: DrainPhase) -> Self {
        self.drains.insert(node.into(), phase);
        self
    }
    /// The Nodes as the actuator leaves them: a node holding a slot carries
    /// the pool's disruption record, and our cordon mark when the cordon is
    /// ours.
    fn recorded_nodes(&self) -> Vec<Node> {
        let mut nodes = self.nodes.clone();
        for (name, pool, was_cordoned) in &self.slots {
            for n in nodes.iter_mut().filter(|n| n.name_any() == *name) {
                n.annotations_mut()
                    .insert(api::labels::DISRUPTED_BY_ANNOTATION.into(), pool.clone());
                if !was_cordoned && node_unschedulable(n) {
                    n.annotations_mut()
                        .insert(api::labels::CORDONED_BY_ANNOTATION.into(), pool.clone());
                }
            }
        }
        nodes
    }
    /// The planner's input with these `nodes` (the World's own, or as the
    /// actuator leaves them).
    fn input<'a>(&'a self, nodes: &'a [Node]) -> PlanInput<'a> {
        PlanInput {
            pool: &self.pool,
            target: self.target.clone(),
            nodes: nodes.iter().collect(),
            bootc_nodes: self.bns.iter().collect(),
            other_pools: self.others.iter().collect(),
            pull_secret: self.secret_hash.clone().map(|version| SecretSeen {
                version,
                allows_pool: !self.secret_refused,
                pools: Vec::new(),
            }),
            drains: self.drains.clone(),
            operator_namespace: api::labels::OPERATOR_NAMESPACE,
            last_status_write: self.last_status_write,
            now: now(),
            phase_clock: std::sync::Arc::new(self.clock.clone()),
            deadlines: stuck::Deadlines::default(),
            gates: self.gates.clone(),
            node_lifecycle_conditions: self.node_lifecycle_conditions,
        }
    }
    fn plan(&self) -> Plan {
        let nodes = self.recorded_nodes();
        plan(&self.input(&nodes))
    }
}

fn applied<'a>(plan: &'a Plan, name: &str) -> Option<&'a BootcNodeApply> {
    plan.writes.iter().find_map(|w| match w {
        Write::ApplyBootcNode(b) if b.name == name => Some(b.as_ref()),
        _ => None,
    })
}

/// What the plan writes of `name`'s slot record (the disruption record on
/// its Node): Some(true) a slot taken, Some(false) released, None neither.
fn slot_record(plan: &Plan, name: &str) -> Option<bool> {
    plan.writes.iter().find_map(|w| match w {
        Write::PatchNode { name: n, patch } if n == name => patch.disrupted,
        _ => None,
    })
}

fn slotted(plan: &Plan) -> Vec<String> {
    plan.writes
        .iter()
        .filter_map(|w| match w {
            Write::StartDrain { node } => Some(node.clone()),
            _ => None,
        })
        .collect()
}

fn degraded_reason(plan: &Plan) -> String {
    let s = plan.status.as_ref().expect("status");
    conditions::find(&s.conditions, ConditionType::Degraded)
        .map(|c| c.reason.to_string())
        .unwrap_or_default()
}

fn degraded_message(plan: &Plan) -> String {
    let s = plan.status.as_ref().expect("status");
    conditions::find(&s.conditions, ConditionType::Degraded)
        .map(|c| c.message.to_string())
        .unwrap_or_default()
}

fn up_to_date(plan: &Plan) -> (String, String, String) {
    let s = plan.status.as_ref().expect("status");
    let c =
        conditions::find(&s.conditions, ConditionType::UpToDate).expect("an UpToDate condition");
    (
        c.status.to_string(),
        c.reason.to_string(),
        c.message.to_string(),
    )
}

/// A NotReady node whose Ready condition changed `secs_ago` before the
/// World's clock.
fn down_for(mut n: Node, secs_ago: i64) -> Node {
    let at = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(1_000_000 - secs_ago);
    if let Some(c) = n
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .and_then(|cs| cs.first_mut())
    {
        c.status = "False".into();
        c.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
    }
    n
}

/// A Node cordoned by `pool`'s reboot slot (with our mark).
fn marked(mut n: Node, pool: &str) -> Node {
    n.annotations_mut()
        .insert(api::labels::CORDONED_BY_ANNOTATION.into(), pool.to_owned());
    n
}

/// A Node holding `pool`'s reboot slot, cordoned by it: our mark and the
/// slot record.
fn in_slot_of(n: Node, pool: &str) -> Node {
    let mut n = marked(n, pool);
    n.annotations_mut()
        .insert(api::labels::DISRUPTED_BY_ANNOTATION.into(), pool.to_owned());
    n
}

fn uncordons(plan: &Plan, name: &str) -> bool {
    plan.writes.iter().any(|w| {
        matches!(w, Write::PatchNode { name: n, patch } if n == name && patch.unschedulable == Some(false))
    })
}

// The disruption bound: a node disrupted by a slot keeps counting until it
// is back, whatever happens to its slot's other records.

/// A node this pool's slot cordoned (our mark and the disruption record),
/// NotReady: it is rebooting.
fn rebooting_node(name: &str, pool_label: &str) -> Node {
    in_slot_of(down_for(node(name, pool_label, true, true), 20), "a")
}

/// The pool of the tests of rules that hold new slots (windows, freezes,
/// gates): three slots; `slot` in its slot and approved (rebooting),
/// `staged` waiting for a slot, `idle` not yet told the target (with
/// `stageAhead: 0`, told only when a free slot awaits it); `edit` sets the
/// rule.
fn slot_staged_idle(edit: impl FnOnce(&mut api::RolloutSpec)) -> World {
    let mut p = pool("a", IntOrString::Int(3), false);
    p.spec.rollout.stage_ahead = Some(0);
    edit(&mut p.spec.rollout);
    World::new(p)
        .node(rebooting_node("slot", "a"))
        .node(node("staged", "a", true, false))
        .node(node("idle", "a", true, false))
        .bn(bn("slot", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false))
        .bn(bn("staged", NEW, Daemon::Staged(OLD)))
        .bn(bn("idle", OLD, Daemon::Idle(OLD)))
}

/// An instant, as the World's clock (1970-01-12T13:46:40Z, a Monday) reads.
fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// What every rule that holds new slots back must leave alone: `staged`
/// takes a slot only if `new_slot`, `idle` (not yet told) is told the
/// target all the same, and UpToDate says `reason` with `says`.
fn holds_slots_not_staging(plan: &Plan, what: &str, new_slot: bool, reason: Reason, says: &str) {
    assert_eq!(
        slotted(plan) == ["staged"],
        new_slot,
        "{what}: {:?}",
        plan.writes
    );
    assert!(
        applied(plan, "idle").is_some_and(|b| b.spec.desired_image == image(NEW)),
        "{what}: idle not told"
    );
    let (_, got, message) = up_to_date(plan);
    assert_eq!(got, reason, "{what}");
    assert!(message.contains(says), "{what}: {message}");
}

fn node_writes<'a>(plan: &'a Plan, name: &str) -> Vec<&'a Write> {
    plan.writes.iter().filter(|w| w.node() == name).collect()
}

/// The node's only write withdraws its approval, keeping its slot.
fn only_withdrawal(plan: &Plan, name: &str) -> bool {
    matches!(node_writes(plan, name).as_slice(),
        [Write::ApplyBootcNode(b)] if b.spec.desired_image_state == DesiredImageState::Staged)
}
mod cost;
mod incremental;
