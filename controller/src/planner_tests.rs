//! Table-driven tests of the planner.

use std::collections::BTreeMap;

use api::labels::{IN_REBOOT_SLOT_ANNOTATION, MANAGED_LABEL, WAS_CORDONED_ANNOTATION};
use api::{BootEntryStatus, BootcNodeStatus, RebootPolicy, SecretReference};
use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde_json::json;

use super::*;

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
    }
}

fn pool(name: &str, max: IntOrString, paused: bool) -> BootcNodePool {
    let mut p = BootcNodePool::new(
        name,
        serde_json::from_value(json!({
            "nodeSelector": {"matchLabels": {"pool": name}},
            "image": {"ref": image(NEW)},
            "rollout": {"paused": paused},
        }))
        .unwrap(),
    );
    p.spec.rollout.max_unavailable = max;
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.generation = Some(3);
    p
}

fn node(name: &str, pool: &str, ready: bool, cordoned: bool) -> Node {
    let mut labels = BTreeMap::from([("pool".to_owned(), pool.to_owned())]);
    labels.insert(MANAGED_LABEL.into(), String::new());
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: cordoned.then_some(true),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    }
}

fn cond(type_: &str, status: bool, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
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
        let mut b = BootcNode::new(
            self.name,
            BootcNodeSpec {
                desired_image: image(self.desired),
                desired_image_state: self.booted_state,
                reboot_policy: RebootPolicy::RebootOnly,
                pull_secret_ref: None,
                pull_secret_hash: None,
            },
        );
        b.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "node.bootc.dev/v1alpha1".into(),
            kind: "BootcNodePool".into(),
            name: self.pool.into(),
            uid: format!("uid-{}", self.pool),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        if let Some(w) = self.slot {
            b.metadata.annotations = Some(BTreeMap::from([
                (IN_REBOOT_SLOT_ANNOTATION.to_owned(), "true".to_owned()),
                (WAS_CORDONED_ANNOTATION.to_owned(), w.to_string()),
            ]));
        }
        let entry = |d: &str| BootEntryStatus {
            image: Some(image(d)),
            image_digest: Some(d.into()),
            ..BootEntryStatus::default()
        };
        let (booted, staged, idle) = match self.daemon {
            Daemon::Nothing => {
                b.status = None;
                return b;
            }
            Daemon::Idle(d) => (entry(d), None, cond("Idle", true, "Idle")),
            Daemon::Staging(d) => (entry(d), None, cond("Idle", false, "Staging")),
            Daemon::Staged(d) => (
                entry(d),
                Some(entry(self.desired)),
                cond("Idle", false, "Staged"),
            ),
            Daemon::Rebooting(d) => (
                entry(d),
                Some(entry(self.desired)),
                cond("Idle", false, "Rebooting"),
            ),
        };
        if self.behind {
            b.metadata.generation = Some(5);
        }
        b.status = Some(BootcNodeStatus {
            observed_generation: self.behind.then_some(4),
            booted: Some(booted),
            staged,
            conditions: vec![
                idle,
                cond(
                    "Degraded",
                    self.degraded,
                    if self.degraded { "Error" } else { "Healthy" },
                ),
            ],
            ..BootcNodeStatus::default()
        });
        b
    }
}

struct World {
    pool: BootcNodePool,
    others: Vec<BootcNodePool>,
    nodes: Vec<Node>,
    bns: Vec<BootcNode>,
    drains: BTreeMap<String, DrainPhase>,
    target: Result<Target, TargetProblem>,
    secret_hash: Option<String>,
    last_status_write: Option<Timestamp>,
    clock: stuck::Clock,
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
            drains: BTreeMap::new(),
            target: Ok(target(NEW)),
            secret_hash: None,
            last_status_write: None,
            clock: stuck::Clock::new(),
        }
    }
    fn node(mut self, n: Node) -> Self {
        self.nodes.push(n);
        self
    }
    fn bn(mut self, b: Bn) -> Self {
        self.bns.push(b.build());
        self
    }
    fn drain(mut self, node: &str, phase: DrainPhase) -> Self {
        self.drains.insert(node.into(), phase);
        self
    }
    /// The Nodes as the actuator leaves them: a node whose BootcNode holds
    /// a slot carries the pool's disruption record, and our cordon mark
    /// when the cordon is ours.
    fn recorded_nodes(&self) -> Vec<Node> {
        let mut nodes = self.nodes.clone();
        for bn in &self.bns {
            let ann = bn.annotations();
            if !ann.contains_key(IN_REBOOT_SLOT_ANNOTATION) {
                continue;
            }
            let Some((pool, _)) = owner_pool(bn) else {
                continue;
            };
            let ours = ann.get(WAS_CORDONED_ANNOTATION).map(String::as_str) == Some("false");
            for n in nodes.iter_mut().filter(|n| n.name_any() == bn.name_any()) {
                n.annotations_mut()
                    .insert(api::labels::DISRUPTED_BY_ANNOTATION.into(), pool.clone());
                if ours && node_unschedulable(n) {
                    n.annotations_mut()
                        .insert(api::labels::CORDONED_BY_ANNOTATION.into(), pool.clone());
                }
            }
        }
        nodes
    }
    fn plan(&self) -> Plan {
        let nodes = self.recorded_nodes();
        plan(&PlanInput {
            pool: &self.pool,
            target: self.target.clone(),
            nodes: nodes.iter().collect(),
            bootc_nodes: self.bns.iter().collect(),
            other_pools: self.others.iter().collect(),
            pull_secret_hash: self.secret_hash.clone(),
            drains: self.drains.clone(),
            operator_namespace: api::labels::OPERATOR_NAMESPACE,
            last_status_write: self.last_status_write,
            now: now(),
            phase_clock: self.clock.clone(),
        })
    }
}

fn applied<'a>(plan: &'a Plan, name: &str) -> Option<&'a BootcNodeApply> {
    plan.writes.iter().find_map(|w| match w {
        Write::ApplyBootcNode(b) if b.name == name => Some(b.as_ref()),
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
    conditions::find(&s.conditions, reasons::DEGRADED)
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

fn degraded_message(plan: &Plan) -> String {
    let s = plan.status.as_ref().expect("status");
    conditions::find(&s.conditions, reasons::DEGRADED)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn up_to_date(plan: &Plan) -> (String, String, String) {
    let s = plan.status.as_ref().expect("status");
    let c = conditions::find(&s.conditions, reasons::UP_TO_DATE).expect("UpToDate");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn effective_state_table() {
    let t = target(NEW);
    let rows: Vec<(&str, Bn, NodeState)> = vec![
        (
            "degraded wins",
            bn("n", NEW, Daemon::Idle(NEW)).degraded(),
            NodeState::Degraded,
        ),
        (
            "degraded while staging",
            bn("n", NEW, Daemon::Staging(OLD)).degraded(),
            NodeState::Degraded,
        ),
        (
            "runs the target",
            bn("n", NEW, Daemon::Idle(NEW)),
            NodeState::UpToDate,
        ),
        (
            "no status yet",
            bn("n", NEW, Daemon::Nothing),
            NodeState::Pending,
        ),
        (
            "idle on the old image",
            bn("n", NEW, Daemon::Idle(OLD)),
            NodeState::Pending,
        ),
        (
            "spec not yet synced",
            bn("n", OLD, Daemon::Staged(OLD)),
            NodeState::Pending,
        ),
        (
            "staging",
            bn("n", NEW, Daemon::Staging(OLD)),
            NodeState::Staging,
        ),
        (
            "staged",
            bn("n", NEW, Daemon::Staged(OLD)),
            NodeState::Staged,
        ),
        (
            "rebooting",
            bn("n", NEW, Daemon::Rebooting(OLD)),
            NodeState::Rebooting,
        ),
    ];
    for (what, row, want) in rows {
        assert_eq!(classify(&row.build(), &t), want, "{what}");
    }
    // Staged for another image counts as still staging.
    let mut b = bn("n", NEW, Daemon::Staged(OLD)).build();
    b.status.as_mut().unwrap().staged.as_mut().unwrap().image = Some(image(OLD));
    b.status
        .as_mut()
        .unwrap()
        .staged
        .as_mut()
        .unwrap()
        .image_digest = Some(OLD.into());
    assert_eq!(classify(&b, &t), NodeState::Staging);
    // A status answering an older generation is pending.
    let mut b = bn("n", NEW, Daemon::Staged(OLD)).build();
    b.metadata.generation = Some(5);
    b.status.as_mut().unwrap().observed_generation = Some(4);
    assert_eq!(classify(&b, &t), NodeState::Pending);
    // A multi-arch target: booted digest is the platform manifest, the
    // reference is the index.
    let mut b = bn("n", NEW, Daemon::Idle(OLD)).build();
    let booted = b.status.as_mut().unwrap().booted.as_mut().unwrap();
    booted.image = Some(image(NEW));
    booted.image_digest = Some("sha256:platform".into());
    assert_eq!(classify(&b, &t), NodeState::UpToDate);
}

#[test]
fn max_unavailable_int_and_percentage() {
    let rows: Vec<(IntOrString, usize, usize)> = vec![
        (IntOrString::Int(1), 10, 1),
        (IntOrString::Int(3), 10, 3),
        (IntOrString::Int(20), 5, 20),
        (IntOrString::String("25%".into()), 10, 2),
        (IntOrString::String("10%".into()), 5, 1),
        (IntOrString::String("50%".into()), 5, 2),
        (IntOrString::String("100%".into()), 7, 7),
        (IntOrString::String("1%".into()), 0, 1),
    ];
    for (v, n, want) in rows {
        assert_eq!(max_unavailable(&v, n), Ok(want), "{v:?} of {n}");
    }
    assert!(max_unavailable(&IntOrString::Int(0), 3).is_err());
    assert!(max_unavailable(&IntOrString::String("abc".into()), 3).is_err());
    assert!(max_unavailable(&IntOrString::String("0%".into()), 3).is_err());
}

#[test]
fn a_new_member_gets_a_bootc_node_then_its_label() {
    let mut n = node("w1", "a", true, false);
    n.labels_mut().remove(MANAGED_LABEL);
    let w = World::new(pool("a", IntOrString::Int(1), false)).node(n);
    let p = w.plan();
    let apply = applied(&p, "w1").expect("BootcNode created");
    assert_eq!(apply.spec.desired_image, image(NEW));
    assert_eq!(apply.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(apply.owner.name, "a");
    assert_eq!(apply.owner.uid, "uid-a");
    assert!(!apply.in_slot());
    let apply_at = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::ApplyBootcNode(_)));
    let label_at = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::PatchNode { patch, .. } if patch.managed == Some(true)));
    assert!(apply_at < label_at && label_at.is_some(), "{:?}", p.writes);
    let s = p.status.unwrap();
    assert_eq!(s.node_count, 1);
    assert_eq!(s.target_digest.as_deref(), Some(NEW));
    assert_eq!(s.target_image, Some(image(NEW)));
    assert_eq!(s.observed_generation, Some(3));
}

#[test]
fn spec_sync_resets_approval_and_copies_pool_fields() {
    let mut pl = pool("a", IntOrString::Int(1), false);
    pl.spec.disruption.reboot_policy = RebootPolicy::AllowSoftReboot;
    pl.spec.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    });
    let mut w =
        World::new(pl)
            .node(node("w1", "a", true, true))
            .bn(bn("w1", OLD, Daemon::Rebooting(OLD)).approved().slot(false));
    w.secret_hash = Some("sha256:abc".into());
    let p = w.plan();
    let apply = applied(&p, "w1").expect("spec synced");
    assert_eq!(apply.spec.desired_image, image(NEW));
    assert_eq!(apply.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(apply.spec.reboot_policy, RebootPolicy::AllowSoftReboot);
    assert_eq!(apply.spec.pull_secret_ref.as_ref().unwrap().name, "pull");
    assert_eq!(apply.spec.pull_secret_hash.as_deref(), Some("sha256:abc"));
    // The slot is kept across the target change.
    assert!(apply.in_slot());
}

#[test]
fn slot_rule_1_only_healthy_staged_nodes_take_slots() {
    let w = World::new(pool("a", IntOrString::Int(5), false))
        .node(node("staging", "a", true, false))
        .node(node("degraded", "a", true, false))
        .node(node("notready", "a", false, false))
        .node(node("pending", "a", true, false))
        .node(node("staged", "a", true, false))
        .bn(bn("staging", NEW, Daemon::Staging(OLD)))
        .bn(bn("degraded", NEW, Daemon::Staged(OLD)).degraded())
        .bn(bn("notready", NEW, Daemon::Staged(OLD)))
        .bn(bn("pending", NEW, Daemon::Idle(OLD)))
        .bn(bn("staged", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert_eq!(slotted(&p), vec!["staged".to_owned()]);
    // Entering: annotations (with the prior cordon state) before the cordon,
    // the cordon before the drain.
    let i_apply = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::ApplyBootcNode(b) if b.name == "staged"))
        .unwrap();
    let i_cordon = p
        .writes
        .iter()
        .position(|w| {
            matches!(w, Write::PatchNode { name, patch } if name == "staged" && patch.unschedulable == Some(true))
        })
        .unwrap();
    let i_drain = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::StartDrain { node } if node == "staged"))
        .unwrap();
    assert!(i_apply < i_cordon && i_cordon < i_drain);
    let a = applied(&p, "staged").unwrap();
    assert_eq!(
        a.annotations
            .get(WAS_CORDONED_ANNOTATION)
            .map(String::as_str),
        Some("false")
    );
    // Unhealthy nodes outside slots do not block; the pool reports them.
    assert_eq!(degraded_reason(&p), reasons::NODE_DEGRADED);
    assert!(degraded_message(&p).contains("degraded"));
}

#[test]
fn an_admin_cordoned_node_is_recorded_and_not_cordoned_again() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    let a = applied(&p, "w1").unwrap();
    assert_eq!(
        a.annotations
            .get(WAS_CORDONED_ANNOTATION)
            .map(String::as_str),
        Some("true")
    );
    // Not cordoned again: only the disruption record is written.
    let patches: Vec<&NodePatch> = p
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::PatchNode { patch, .. } => Some(patch),
            _ => None,
        })
        .collect();
    assert_eq!(patches, [&NodePatch::record(true)]);
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
}

#[test]
fn max_unavailable_caps_slots_including_holders() {
    let mut w = World::new(pool("a", IntOrString::Int(2), false));
    for name in ["n1", "n2", "n3", "n4"] {
        w = w.node(node(name, "a", true, false));
    }
    let w = w
        .bn(bn("n1", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("n2", NEW, Daemon::Staged(OLD)))
        .bn(bn("n3", NEW, Daemon::Staged(OLD)))
        .bn(bn("n4", NEW, Daemon::Staged(OLD)));
    assert_eq!(
        w.plan()
            .writes
            .iter()
            .filter(|w| matches!(w, Write::ApplyBootcNode(b) if b.in_slot()))
            .count(),
        1
    );
    assert_eq!(slotted(&w.plan()), vec!["n2".to_owned()]);

    // 50% of 4 = 2 slots, none held: two nodes get one.
    let mut w2 = World::new(pool("a", IntOrString::String("50%".into()), false));
    for name in ["n1", "n2", "n3", "n4"] {
        w2 = w2.node(node(name, "a", true, false)).bn(bn(
            match name {
                "n1" => "n1",
                "n2" => "n2",
                "n3" => "n3",
                _ => "n4",
            },
            NEW,
            Daemon::Staged(OLD),
        ));
    }
    assert_eq!(slotted(&w2.plan()).len(), 2);
}

#[test]
fn a_drained_node_is_approved_unless_paused() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("w1", DrainPhase::Succeeded);
    let p = w.plan();
    let a = applied(&p, "w1").unwrap();
    assert_eq!(a.spec.desired_image_state, DesiredImageState::Booted);
    assert!(a.in_slot());
    // This pool's first plan announces the rollout; the approval is no event.
    assert!(
        p.events
            .iter()
            .all(|e| e.reason == event_reasons::ROLLOUT_STARTED),
        "approval is no event: {:?}",
        p.events
    );

    let mut paused = w;
    paused.pool.spec.rollout.paused = true;
    let p = paused.plan();
    assert!(applied(&p, "w1").is_none(), "{:?}", p.writes);
    let (_, reason, message) = up_to_date(&p);
    assert_eq!(reason, reasons::PAUSED);
    assert!(
        message.ends_with("; held cordoned in reboot slots until resumed: w1"),
        "{message}"
    );

    // Still draining: nothing yet. Not yet drained after a restart: drain again.
    let running = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("w1", DrainPhase::Running);
    assert!(running.plan().writes.is_empty());
    let restarted = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false));
    assert_eq!(slotted(&restarted.plan()), vec!["w1".to_owned()]);
}

#[test]
fn a_failed_drain_is_reported_and_retried_later() {
    let at = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(1_000_000 - 10);
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain(
            "w1",
            DrainPhase::Failed {
                message: "still blocking: default/stuck".into(),
                at,
            },
        );
    let p = w.plan();
    assert_eq!(degraded_reason(&p), DRAIN_TIMED_OUT);
    assert!(degraded_message(&p).contains("default/stuck"));
    assert!(slotted(&p).is_empty());
    assert_eq!(p.requeue_after, Some(Duration::from_secs(50)));
}

#[test]
fn slot_rule_2_release_only_when_updated_healthy_and_ready() {
    // Runs the target but NotReady: holds the slot.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", false, true))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert!(applied(&p, "w1").is_none());
    assert!(slotted(&p).is_empty(), "slot still held");

    // Degraded after the reboot: holds the slot.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Idle(NEW))
            .approved()
            .slot(false)
            .degraded());
    assert!(applied(&w.plan(), "w1").is_none());

    // Ready and updated: uncordon first, then drop the annotations; the next
    // Staged node takes the freed slot in the same pass.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    let i_uncordon = p
        .writes
        .iter()
        .position(|w| {
            matches!(w, Write::PatchNode { name, patch } if name == "w1" && patch.unschedulable == Some(false))
        })
        .expect("uncordon");
    let i_release = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::ApplyBootcNode(b) if b.name == "w1"))
        .unwrap();
    assert!(i_uncordon < i_release);
    let a = applied(&p, "w1").unwrap();
    assert!(a.annotations.is_empty());
    assert_eq!(a.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(slotted(&p), vec!["w2".to_owned()]);

    // Was cordoned by the admin before: stays cordoned.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).approved().slot(true));
    let p = w.plan();
    // Only the disruption record goes; the cordon stays the admin's.
    assert!(p.writes.iter().all(|w| !matches!(w,
        Write::PatchNode { patch, .. } if *patch != NodePatch::record(false))));
    assert!(applied(&p, "w1").unwrap().annotations.is_empty());
}

#[test]
fn slot_rule_3_two_unhealthy_slotted_nodes_halt_the_rollout() {
    let w = World::new(pool("a", IntOrString::Int(3), false))
        .node(node("bad1", "a", false, true))
        .node(node("bad2", "a", true, true))
        .node(node("next", "a", true, false))
        .bn(bn("bad1", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false))
        .bn(bn("bad2", NEW, Daemon::Idle(NEW))
            .approved()
            .slot(false)
            .degraded())
        .bn(bn("next", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    assert!(slotted(&p).is_empty(), "no third slot: {:?}", p.writes);
    assert_eq!(degraded_reason(&p), reasons::ROLLOUT_HALTED);
    assert!(degraded_message(&p).contains("bad1"));
    assert!(degraded_message(&p).contains("bad2"));
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == event_reasons::ROLLOUT_HALTED && e.warning)
    );

    // One unhealthy slotted node does not halt.
    let w = World::new(pool("a", IntOrString::Int(3), false))
        .node(node("bad1", "a", false, true))
        .node(node("next", "a", true, false))
        .bn(bn("bad1", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)));
    assert_eq!(slotted(&w.plan()), vec!["next".to_owned()]);
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

#[test]
fn slot_rule_3_nodes_rebooting_within_the_grace_are_not_unhealthy() {
    let rebooting =
        |name: &'static str| bn(name, NEW, Daemon::Rebooting(OLD)).approved().slot(false);
    let world = |down: i64, second_daemon: Daemon| {
        World::new(pool("a", IntOrString::Int(3), false))
            .node(down_for(node("r1", "a", true, true), down))
            .node(down_for(node("r2", "a", true, true), down))
            .node(node("next", "a", true, false))
            .bn(rebooting("r1"))
            .bn(bn("r2", NEW, second_daemon).approved().slot(false))
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
    };
    // Two approved nodes NotReady for 30 s: they are rebooting. The third
    // slot is given, and the pool comes back when the grace would end.
    let p = world(30, Daemon::Rebooting(OLD)).plan();
    assert_eq!(slotted(&p), vec!["next".to_owned()]);
    assert_eq!(degraded_reason(&p), reasons::HEALTHY);
    assert!(
        p.requeue_after
            .is_some_and(|d| d <= REBOOT_GRACE - Duration::from_secs(30))
    );

    // Past the grace, both count: the rollout halts.
    let secs = i64::try_from(REBOOT_GRACE.as_secs()).unwrap() + 1;
    let p = world(secs, Daemon::Rebooting(OLD)).plan();
    assert!(slotted(&p).is_empty());
    assert_eq!(degraded_reason(&p), reasons::ROLLOUT_HALTED);

    // Back on the target but NotReady is unhealthy at once (the image came
    // up and the node did not): with one still rebooting, no halt yet...
    let p = world(30, Daemon::Idle(NEW)).plan();
    assert_eq!(degraded_reason(&p), reasons::HEALTHY);
    // ...and with both back on the target and NotReady, it halts.
    let p = World::new(pool("a", IntOrString::Int(3), false))
        .node(down_for(node("r1", "a", true, true), 30))
        .node(down_for(node("r2", "a", true, true), 30))
        .node(node("next", "a", true, false))
        .bn(bn("r1", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("r2", NEW, Daemon::Idle(NEW)).approved().slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty());
    assert_eq!(degraded_reason(&p), reasons::ROLLOUT_HALTED);
}

#[test]
fn pause_stops_new_slots_but_not_staging() {
    let w = World::new(pool("a", IntOrString::Int(3), true))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)));
    let p = w.plan();
    // Staging goes on: the spec still moves to the new image.
    assert_eq!(applied(&p, "w1").unwrap().spec.desired_image, image(NEW));
    assert!(slotted(&p).is_empty());
    let (status, reason, _) = up_to_date(&p);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", reasons::PAUSED)
    );
}

#[test]
fn conflicts_skip_the_node_and_name_the_other_pool() {
    let mut a = pool("a", IntOrString::Int(1), false);
    a.spec.node_selector =
        serde_json::from_value(json!({"matchLabels": {"role": "worker"}})).unwrap();
    let mut b = pool("b", IntOrString::Int(1), false);
    b.spec.node_selector = serde_json::from_value(json!({"matchLabels": {"zone": "z1"}})).unwrap();
    let mut shared = node("shared", "x", true, false);
    shared.labels_mut().insert("role".into(), "worker".into());
    shared.labels_mut().insert("zone".into(), "z1".into());
    shared.labels_mut().remove(MANAGED_LABEL);
    let mut own = node("own", "x", true, false);
    own.labels_mut().insert("role".into(), "worker".into());
    own.labels_mut().remove(MANAGED_LABEL);
    let mut w = World::new(a).node(shared.clone()).node(own);
    w.others = vec![b.clone()];
    let p = w.plan();
    assert!(applied(&p, "shared").is_none());
    assert!(applied(&p, "own").is_some(), "uncontested nodes go on");
    assert_eq!(degraded_reason(&p), reasons::NODE_CONFLICT);
    assert!(degraded_message(&p).contains("node shared"));
    assert!(degraded_message(&p).contains("pool(s) b"));

    // The other side sees the same conflict naming "a".
    let mut a2 = pool("a", IntOrString::Int(1), false);
    a2.spec.node_selector =
        serde_json::from_value(json!({"matchLabels": {"role": "worker"}})).unwrap();
    let mut w = World::new(b).node(shared);
    w.others = vec![a2];
    let p = w.plan();
    assert!(p.writes.is_empty());
    assert!(degraded_message(&p).contains("pool(s) a"));

    // A BootcNode owned by another pool: a conflict naming the owner.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).owned_by("z"));
    let p = w.plan();
    assert!(p.writes.is_empty(), "{:?}", p.writes);
    assert!(degraded_message(&p).contains("pool(s) z"));
}

/// A Node cordoned by `pool`'s reboot slot (with our mark).
fn marked(mut n: Node, pool: &str) -> Node {
    n.annotations_mut()
        .insert(api::labels::CORDONED_BY_ANNOTATION.into(), pool.to_owned());
    n
}

fn uncordons(plan: &Plan, name: &str) -> bool {
    plan.writes.iter().any(|w| {
        matches!(w, Write::PatchNode { name: n, patch } if n == name && patch.unschedulable == Some(false))
    })
}

#[test]
fn a_cordon_of_ours_is_known_by_its_mark_when_the_bootc_node_was_lost() {
    // The slot cordon carries the mark.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(p.writes.iter().any(|w| matches!(w,
        Write::PatchNode { patch, .. } if patch.unschedulable == Some(true) && patch.ours)));

    // The BootcNode was deleted mid-slot and recreated without its
    // annotations; the node since rebooted into the target. Our cordon is
    // lifted, not taken for an admin's.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .plan();
    assert!(uncordons(&p, "w1"), "{:?}", p.writes);

    // Still staged: it takes a slot again, recorded as not cordoned before.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
    let annotations = &applied(&p, "w1").unwrap().annotations;
    assert_eq!(
        annotations.get(WAS_CORDONED_ANNOTATION).map(String::as_str),
        Some("false")
    );
    assert!(!uncordons(&p, "w1"));

    // Another pool's mark, or none (an admin's cordon), is left alone.
    for n in [
        marked(node("w1", "a", true, true), "b"),
        node("w1", "a", true, true),
    ] {
        let p = World::new(pool("a", IntOrString::Int(1), false))
            .node(n)
            .bn(bn("w1", NEW, Daemon::Idle(NEW)))
            .plan();
        assert!(!uncordons(&p, "w1"), "{:?}", p.writes);
    }

    // The pool deleted while the BootcNode is gone: the mark alone restores.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("w1", "a", true, true), "a"));
    let input = PlanInput {
        pool: &w.pool,
        target: w.target.clone(),
        nodes: w.nodes.iter().collect(),
        bootc_nodes: vec![],
        other_pools: vec![],
        pull_secret_hash: None,
        drains: BTreeMap::new(),
        operator_namespace: api::labels::OPERATOR_NAMESPACE,
        last_status_write: None,
        now: Timestamp::UNIX_EPOCH,
        phase_clock: stuck::Clock::new(),
    };
    assert_eq!(
        plan_cleanup(&input).writes,
        vec![Write::PatchNode {
            name: "w1".into(),
            patch: NodePatch {
                managed: Some(false),
                ..NodePatch::UNCORDON
            }
        }]
    );

    // Leaving the pool without the record: the mark restores the node.
    let mut moved = marked(node("w1", "elsewhere", true, true), "a");
    moved
        .labels_mut()
        .insert(MANAGED_LABEL.into(), String::new());
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(moved)
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .plan();
    assert!(uncordons(&p, "w1"), "{:?}", p.writes);
}

#[test]
fn leaving_restores_cordon_removes_label_and_deletes_in_that_order() {
    // Label changed mid-slot: the node no longer matches.
    let mut moved = node("w1", "elsewhere", true, true);
    moved
        .labels_mut()
        .insert(MANAGED_LABEL.into(), String::new());
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(moved)
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("w1", DrainPhase::Running);
    let p = w.plan();
    assert_eq!(
        p.writes,
        vec![
            Write::CancelDrain { node: "w1".into() },
            Write::PatchNode {
                name: "w1".into(),
                patch: NodePatch {
                    managed: Some(false),
                    ..NodePatch::UNCORDON
                }
            },
            Write::DeleteBootcNode { name: "w1".into() },
        ]
    );
    assert_eq!(p.status.unwrap().node_count, 0);

    // A deleted Node: only the BootcNode goes.
    let w =
        World::new(pool("a", IntOrString::Int(1), false)).bn(bn("gone", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    assert_eq!(
        p.writes,
        vec![
            Write::CancelDrain {
                node: "gone".into()
            },
            Write::DeleteBootcNode {
                name: "gone".into()
            }
        ]
    );
}

#[test]
fn status_message_counts_and_deployed_digest() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    let rows: Vec<(&'static str, Bn)> = vec![
        ("u1", bn("u1", NEW, Daemon::Idle(NEW))),
        ("u2", bn("u2", NEW, Daemon::Idle(NEW))),
        ("u3", bn("u3", NEW, Daemon::Idle(NEW))),
        ("u4", bn("u4", NEW, Daemon::Idle(NEW))),
        ("u5", bn("u5", NEW, Daemon::Idle(NEW))),
        ("s1", bn("s1", NEW, Daemon::Staging(OLD))),
        ("s2", bn("s2", NEW, Daemon::Staging(OLD))),
        ("t1", bn("t1", NEW, Daemon::Staged(OLD))),
        ("t2", bn("t2", NEW, Daemon::Staged(OLD))),
        (
            "r1",
            bn("r1", NEW, Daemon::Rebooting(OLD)).approved().slot(false),
        ),
    ];
    for (name, b) in rows {
        w = w.node(node(name, "a", true, name == "r1")).bn(b);
    }
    let p = w.plan();
    let (status, reason, message) = up_to_date(&p);
    assert_eq!(status, "False");
    assert_eq!(reason, reasons::ROLLOUT_IN_PROGRESS);
    assert_eq!(
        message,
        "5/10 updated; 2 staging, 2 staged, 1 rebooting; in reboot slots: r1"
    );
    let s = p.status.clone().unwrap();
    assert_eq!(
        (
            s.node_count,
            s.updated_count,
            s.updating_count,
            s.degraded_count
        ),
        (10, 5, 5, 0)
    );
    assert_eq!(s.deployed_digest, None);
    assert!(s.update_available);
    assert_eq!(degraded_reason(&p), reasons::HEALTHY);

    // Everyone on the target: AllUpdated, deployedDigest, no update available.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("u1", "a", true, false))
        .bn(bn("u1", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    let s = p.status.clone().unwrap();
    assert_eq!(s.deployed_digest.as_deref(), Some(NEW));
    assert!(!s.update_available);
    assert_eq!(up_to_date(&p).1, reasons::ALL_UPDATED);
    assert_eq!(
        up_to_date(&p).2,
        "1/1 updated; 0 staging, 0 staged, 0 rebooting"
    );
}

#[test]
fn nothing_is_written_when_nothing_changes() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .bn(bn("w2", NEW, Daemon::Staging(OLD)));
    let first = w.plan();
    assert!(first.writes.is_empty(), "{:?}", first.writes);
    w.pool.status = first.status;
    let second = w.plan();
    assert!(second.writes.is_empty());
    assert_eq!(second.status, None, "status unchanged: no write");
    assert!(second.events.is_empty());
}

#[test]
fn a_tag_keeps_the_previous_target_and_reports_it() {
    let problem = TargetProblem {
        reason: reasons::INVALID_SPEC,
        message: "tag resolution not yet available".into(),
    };
    // No previous target: no BootcNode is created.
    let mut w =
        World::new(pool("a", IntOrString::Int(1), false)).node(node("w1", "a", true, false));
    w.target = Err(problem.clone());
    let p = w.plan();
    assert!(applied(&p, "w1").is_none());
    assert_eq!(degraded_reason(&p), reasons::INVALID_SPEC);
    assert!(degraded_message(&p).contains("tag resolution not yet available"));

    // A previous target stays in force (fail closed).
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)));
    w.pool.status = Some(BootcNodePoolStatus {
        target_digest: Some(OLD.into()),
        target_image: Some(image(OLD)),
        ..BootcNodePoolStatus::default()
    });
    w.target = Err(problem);
    let p = w.plan();
    assert!(p.writes.is_empty());
    let s = p.status.unwrap();
    assert_eq!(s.target_digest.as_deref(), Some(OLD));
}

#[test]
fn rollback_is_the_same_cycle() {
    // Target changed back to OLD: the updated node must stage OLD again; the
    // node still on OLD is up to date.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .bn(bn("w2", NEW, Daemon::Staging(OLD)));
    w.target = Ok(target(OLD));
    let p = w.plan();
    assert_eq!(applied(&p, "w1").unwrap().spec.desired_image, image(OLD));
    assert_eq!(applied(&p, "w2").unwrap().spec.desired_image, image(OLD));
    let s = p.status.unwrap();
    assert_eq!(s.updated_count, 1);
}

#[test]
fn cleanup_restores_everything() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, true))
        .node(node("w2", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)).slot(false))
        .bn(bn("w2", NEW, Daemon::Staged(OLD)).slot(true));
    let input = PlanInput {
        pool: &w.pool,
        target: w.target.clone(),
        nodes: w.nodes.iter().collect(),
        bootc_nodes: w.bns.iter().collect(),
        other_pools: vec![],
        pull_secret_hash: None,
        drains: BTreeMap::new(),
        operator_namespace: api::labels::OPERATOR_NAMESPACE,
        last_status_write: None,
        now: Timestamp::UNIX_EPOCH,
        phase_clock: stuck::Clock::new(),
    };
    let writes = plan_cleanup(&input).writes;
    assert!(writes.contains(&Write::PatchNode {
        name: "w1".into(),
        patch: NodePatch {
            managed: Some(false),
            unschedulable: Some(false),
            ours: false,
            disrupted: None,
        }
    }));
    assert!(writes.contains(&Write::PatchNode {
        name: "w2".into(),
        patch: NodePatch {
            managed: Some(false),
            unschedulable: None,
            ours: false,
            disrupted: None,
        }
    }));
    assert!(writes.contains(&Write::DeleteBootcNode { name: "w1".into() }));
    assert!(writes.contains(&Write::DeleteBootcNode { name: "w2".into() }));
}

#[test]
fn an_unparsable_selector_changes_no_membership() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("new", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)));
    w.pool.spec.node_selector = serde_json::from_value(json!({"matchExpressions": [
        {"key": "pool", "operator": "Sometimes", "values": ["a"]}]}))
    .unwrap();
    let p = w.plan();
    assert!(p.writes.is_empty(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), reasons::INVALID_SPEC);
    let message = degraded_message(&p);
    assert!(
        message.contains("spec.nodeSelector.matchExpressions[0]") && message.contains("Sometimes"),
        "{message}"
    );
    assert_eq!(p.status.unwrap().node_count, 1);
}

#[test]
fn spec_errors_name_the_field_and_the_value() {
    let req = |key: &str, operator: &str, values: Option<Vec<&str>>| {
        serde_json::from_value::<LabelSelector>(json!({"matchExpressions": [
            {"key": "ok", "operator": "Exists"},
            {"key": key, "operator": operator, "values": values},
        ]}))
        .unwrap()
    };
    let e = parse_selector(&req("zone", "Near", Some(vec!["a"]))).unwrap_err();
    assert!(
        e.starts_with("spec.nodeSelector.matchExpressions[1]")
            && e.contains("\"Near\"")
            && e.contains("\"zone\""),
        "{e}"
    );
    let e = parse_selector(&req("zone", "In", None)).unwrap_err();
    assert!(
        e.contains("matchExpressions[1]") && e.contains("\"In\""),
        "{e}"
    );
    assert!(parse_selector(&req("zone", "NotIn", Some(vec!["a"]))).is_ok());

    let e = max_unavailable(&IntOrString::Int(0), 3).unwrap_err();
    assert!(
        e.starts_with("spec.rollout.maxUnavailable") && e.contains('0'),
        "{e}"
    );
    let e = max_unavailable(&IntOrString::String("lots".into()), 3).unwrap_err();
    assert!(
        e.starts_with("spec.rollout.maxUnavailable") && e.contains("\"lots\""),
        "{e}"
    );
}

#[test]
fn a_pull_secret_outside_the_operator_namespace_is_invalid() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    w.pool.spec.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: "default".into(),
    });
    w.secret_hash = Some("sha256:abc".into());
    let w = w
        .node(node("w1", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)));
    let p = w.plan();
    assert_eq!(degraded_reason(&p), reasons::INVALID_SPEC);
    assert!(
        degraded_message(&p).contains(
            "spec.pullSecretRef.namespace must be the operator's namespace bootc-operator, not \"default\""
        ),
        "{}",
        degraded_message(&p)
    );
    // The nodes are not told about a Secret their daemons would refuse.
    let spec = &applied(&p, "w1").unwrap().spec;
    assert_eq!(spec.pull_secret_ref, None);
    assert_eq!(spec.pull_secret_hash, None);
}

#[test]
fn a_missing_pull_secret_is_reported_on_the_pool() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)));
    w.pool.spec.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    });
    let p = w.plan();
    assert_eq!(degraded_reason(&p), PULL_SECRET_NOT_FOUND);
    assert_eq!(
        degraded_message(&p),
        "spec.pullSecretRef: Secret bootc-operator/pull not found"
    );
    // Once it exists, the problem is gone and its hash reaches the node.
    w.secret_hash = Some("sha256:abc".into());
    let p = w.plan();
    assert_eq!(degraded_reason(&p), reasons::HEALTHY);
    assert_eq!(
        applied(&p, "w1").unwrap().spec.pull_secret_hash.as_deref(),
        Some("sha256:abc")
    );
}

#[test]
fn a_released_slot_is_written_before_the_next_one_is_taken() {
    // w9 leaves its slot, w1 (sorting first) takes it in the same pass: all
    // of w9's writes come first, so that no instant shows two nodes in one
    // slot (the e2e recorder caught this between two writes).
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w9", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .bn(bn("w9", NEW, Daemon::Idle(NEW)).approved().slot(false));
    let p = w.plan();
    let pos =
        |pred: &dyn Fn(&Write) -> bool| p.writes.iter().position(pred).expect("write present");
    let w9_uncordon = pos(
        &|w| matches!(w, Write::PatchNode { name, patch } if name == "w9" && patch.unschedulable == Some(false)),
    );
    let w9_release = pos(&|w| matches!(w, Write::ApplyBootcNode(b) if b.name == "w9"));
    let w1_slot = pos(&|w| matches!(w, Write::ApplyBootcNode(b) if b.name == "w1"));
    let w1_cordon = pos(
        &|w| matches!(w, Write::PatchNode { name, patch } if name == "w1" && patch.unschedulable == Some(true)),
    );
    assert!(
        w9_uncordon < w9_release && w9_release < w1_slot && w1_slot < w1_cordon,
        "{:#?}",
        p.writes
    );
    assert_eq!(slotted(&p), vec!["w1".to_owned()]);
}

/// The actuator runs different nodes' writes concurrently: its waves keep
/// every node's own order and still free a slot before taking the next one.
#[test]
fn the_actuators_waves_keep_the_release_before_the_new_slot() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .node(node("w9", "a", true, true))
        .bn(bn("w1", NEW, Daemon::Staged(OLD)))
        .bn(bn("w2", OLD, Daemon::Idle(OLD)))
        .bn(bn("w9", NEW, Daemon::Idle(NEW)).approved().slot(false));
    let p = w.plan();
    let [first, second] = crate::actuator::waves(&p.writes);
    let names = |wave: &[Vec<&Write>]| -> Vec<String> {
        wave.iter()
            .map(|ws| crate::actuator::node_of(ws[0]).to_owned())
            .collect()
    };
    // w9's release and w2's new target lift or add nothing; w1's slot does.
    assert_eq!(names(&first), ["w9", "w2"], "{:#?}", p.writes);
    assert_eq!(names(&second), ["w1"]);
    // Each node's writes keep the planner's order.
    for wave in [&first, &second] {
        for ws in wave {
            let node = crate::actuator::node_of(ws[0]);
            let planned: Vec<&Write> = p
                .writes
                .iter()
                .filter(|w| crate::actuator::node_of(w) == node)
                .collect();
            assert_eq!(*ws, planned, "{node}");
        }
    }
    let w1: Vec<&str> = second[0]
        .iter()
        .map(|w| match w {
            Write::ApplyBootcNode(_) => "slot",
            Write::PatchNode { .. } => "cordon",
            Write::StartDrain { .. } => "drain",
            _ => "other",
        })
        .collect();
    assert_eq!(w1, ["slot", "cordon", "drain"]);
}

/// One node's whole update, step by step, each step planned on the pool
/// status the step before wrote: one BootcNode write per decision (target,
/// slot, approval, release), the cordon and the uncordon, and two events about
/// the pool (the rollout starts, every member runs the target), none per node.
#[test]
fn one_node_update_writes_and_events() {
    let bn_writes = |p: &Plan| {
        p.writes
            .iter()
            .filter(|w| matches!(w, Write::ApplyBootcNode(_)))
            .count()
    };
    let node_writes = |p: &Plan| {
        p.writes
            .iter()
            .filter(|w| matches!(w, Write::PatchNode { .. }))
            .count()
    };
    type Step = (&'static str, Bn, bool, bool, Option<DrainPhase>);
    let steps: Vec<(Step, usize, usize, Vec<&str>)> = vec![
        (
            (
                "new target",
                bn("w1", OLD, Daemon::Idle(OLD)),
                false,
                true,
                None,
            ),
            1,
            0,
            vec![event_reasons::ROLLOUT_STARTED],
        ),
        (
            (
                "staging",
                bn("w1", NEW, Daemon::Staging(OLD)),
                false,
                true,
                None,
            ),
            0,
            0,
            vec![],
        ),
        (
            (
                "staged: slot, cordon, drain",
                bn("w1", NEW, Daemon::Staged(OLD)),
                false,
                true,
                None,
            ),
            1,
            1,
            vec![],
        ),
        (
            (
                "draining",
                bn("w1", NEW, Daemon::Staged(OLD)).slot(false),
                true,
                true,
                Some(DrainPhase::Running),
            ),
            0,
            0,
            vec![],
        ),
        (
            (
                "drained: approval",
                bn("w1", NEW, Daemon::Staged(OLD)).slot(false),
                true,
                true,
                Some(DrainPhase::Succeeded),
            ),
            1,
            0,
            vec![],
        ),
        (
            (
                "rebooting",
                bn("w1", NEW, Daemon::Rebooting(OLD)).slot(false).approved(),
                true,
                false,
                Some(DrainPhase::Succeeded),
            ),
            0,
            0,
            vec![],
        ),
        (
            (
                "back but not Ready: the slot is held",
                bn("w1", NEW, Daemon::Idle(NEW)).slot(false).approved(),
                true,
                false,
                Some(DrainPhase::Succeeded),
            ),
            0,
            0,
            vec![event_reasons::ROLLOUT_COMPLETE],
        ),
        (
            (
                "Ready: uncordon and release",
                bn("w1", NEW, Daemon::Idle(NEW)).slot(false).approved(),
                true,
                true,
                Some(DrainPhase::Succeeded),
            ),
            1,
            1,
            vec![],
        ),
        (
            ("done", bn("w1", NEW, Daemon::Idle(NEW)), false, true, None),
            0,
            0,
            vec![],
        ),
    ];
    let mut status: Option<BootcNodePoolStatus> = None;
    let (mut total_bn, mut total_node, mut total_events) = (0, 0, 0);
    for ((name, b, cordoned, ready, drain), bn_want, node_want, events_want) in steps {
        let n = node("w1", "a", true, cordoned);
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(if ready { n } else { down_for(n, 30) })
            .bn(b);
        w.pool.status = status.clone();
        if let Some(d) = drain {
            w = w.drain("w1", d);
        }
        let p = w.plan();
        let reasons: Vec<&str> = p.events.iter().map(|e| e.reason).collect();
        assert_eq!(bn_writes(&p), bn_want, "{name}: {:?}", p.writes);
        assert_eq!(node_writes(&p), node_want, "{name}: {:?}", p.writes);
        assert_eq!(reasons, events_want, "{name}: {:?}", p.events);
        assert!(p.events.iter().all(|e| e.node.is_none()), "{name}");
        if p.status.is_some() {
            status = p.status;
        }
        total_bn += bn_want;
        total_node += node_want;
        total_events += events_want.len();
    }
    assert_eq!((total_bn, total_node, total_events), (4, 2, 2));
}

/// The rollout's events name the image, how many nodes it concerns and the
/// pace; a pool seen for the first time already up to date has none, and an
/// empty pool has no update available.
#[test]
fn rollout_events_and_the_empty_pool() {
    let w = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .node(node("w3", "a", true, false))
        .bn(bn("w1", OLD, Daemon::Idle(OLD)))
        .bn(bn("w2", OLD, Daemon::Idle(OLD)))
        .bn(bn("w3", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    let started: Vec<&str> = p.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        started,
        [format!(
            "rolling out {} to 2 of 3 nodes, at most 2 at a time",
            image(NEW)
        )
        .as_str()]
    );
    // Replanned on the status it wrote: nothing new to say.
    let mut again = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Staging(OLD)));
    again.pool.status = p.status.clone();
    assert!(again.plan().events.is_empty());

    let fresh = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)));
    let p = fresh.plan();
    assert!(p.events.is_empty(), "{:?}", p.events);
    let status = p.status.expect("first status");
    assert!(!status.update_available);

    let empty = World::new(pool("a", IntOrString::Int(1), false));
    let status = empty.plan().status.expect("first status");
    assert!(!status.update_available, "{status:?}");
    assert_eq!(status.node_count, 0);
    let up = status
        .conditions
        .iter()
        .find(|c| c.type_ == reasons::UP_TO_DATE)
        .expect("UpToDate");
    assert!(up.message.contains("no node is a member"), "{}", up.message);
}

/// Count-only changes of the pool status are coalesced: written at most once
/// per COUNTS_MIN_INTERVAL, with a requeue so that the counts at rest are
/// written; anything else is written at once.
#[test]
fn count_only_status_changes_are_coalesced() {
    let ago = |secs: i64| now() - jiff::SignedDuration::from_secs(secs);
    // The stored status: one node staging, one idle on the target.
    let base = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("w2", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)))
        .bn(bn("w2", NEW, Daemon::Staging(OLD)));
    let stored = base.plan().status.expect("first status");
    let world = |daemon: Bn, last: Option<i64>| {
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(node("w1", "a", true, false))
            .node(node("w2", "a", true, false))
            .bn(bn("w1", NEW, Daemon::Idle(NEW)))
            .bn(daemon);
        w.pool.status = Some(stored.clone());
        w.last_status_write = last.map(ago);
        w
    };
    struct Row {
        name: &'static str,
        /// w2 now.
        w2: Bn,
        /// Seconds since the last status write (None: none since start).
        last: Option<i64>,
        written: bool,
        requeue: Option<Duration>,
    }
    let rows = vec![
        Row {
            name: "nothing changed",
            w2: bn("w2", NEW, Daemon::Staging(OLD)),
            last: Some(1),
            written: false,
            requeue: None,
        },
        Row {
            name: "counts changed just after a write: later",
            w2: bn("w2", NEW, Daemon::Staged(OLD)),
            last: Some(1),
            written: false,
            requeue: Some(COUNTS_MIN_INTERVAL - Duration::from_secs(1)),
        },
        Row {
            name: "counts changed, interval passed: now",
            w2: bn("w2", NEW, Daemon::Staged(OLD)),
            last: Some(5),
            written: true,
            requeue: None,
        },
        Row {
            name: "counts changed, no write since start: now",
            w2: bn("w2", NEW, Daemon::Staged(OLD)),
            last: None,
            written: true,
            requeue: None,
        },
        Row {
            name: "a condition changed (NodeDegraded): now",
            w2: bn("w2", NEW, Daemon::Staging(OLD)).degraded(),
            last: Some(1),
            written: true,
            requeue: None,
        },
        Row {
            name: "the last node updated (AllUpdated): now",
            w2: bn("w2", NEW, Daemon::Idle(NEW)),
            last: Some(1),
            written: true,
            requeue: None,
        },
    ];
    for row in rows {
        let name = row.name;
        let p = world(row.w2, row.last).plan();
        assert_eq!(p.status.is_some(), row.written, "{name}: {:?}", p.status);
        // (Longer requeues are the stuck-phase deadlines'.)
        let coalescing = p.requeue_after.filter(|d| *d <= COUNTS_MIN_INTERVAL);
        assert_eq!(coalescing, row.requeue, "{name}");
        if let Some(s) = p.status {
            assert_ne!(s, stored, "{name}");
        }
    }
    // The counts when they are written are those of the moment.
    let p = world(bn("w2", NEW, Daemon::Staged(OLD)), Some(6)).plan();
    assert_eq!(
        up_to_date(&p).2,
        "1/2 updated; 0 staging, 1 staged, 0 rebooting; in reboot slots: w2"
    );
}

// The disruption bound: a node disrupted by a slot keeps counting until it
// is back, whatever happens to its slot's other records.

/// A node this pool's slot cordoned (our mark and the disruption record),
/// NotReady: it is rebooting.
fn rebooting_node(name: &str, pool_label: &str) -> Node {
    let mut n = marked(down_for(node(name, pool_label, true, true), 20), "a");
    n.annotations_mut()
        .insert(api::labels::DISRUPTED_BY_ANNOTATION.into(), "a".into());
    n
}

fn node_writes<'a>(plan: &'a Plan, name: &str) -> Vec<&'a Write> {
    plan.writes
        .iter()
        .filter(|w| crate::actuator::node_of(w) == name)
        .collect()
}

#[test]
fn a_node_that_leaves_the_pool_mid_reboot_keeps_its_slot_until_back() {
    let mut moved = rebooting_node("r", "elsewhere");
    moved
        .labels_mut()
        .insert(MANAGED_LABEL.into(), String::new());
    let world = |r: Node, daemon: Daemon| {
        World::new(pool("a", IntOrString::Int(1), false))
            .node(r)
            .node(node("next", "a", true, false))
            .bn(bn("r", NEW, daemon).approved().slot(false))
            .bn(bn("next", NEW, Daemon::Staged(OLD)))
    };
    // Rebooting: it keeps its BootcNode, label, cordon and slot.
    let p = world(moved.clone(), Daemon::Rebooting(OLD)).plan();
    assert!(node_writes(&p, "r").is_empty(), "{:?}", p.writes);
    assert!(
        slotted(&p).is_empty(),
        "a second node disrupted: {:?}",
        p.writes
    );
    let (_, _, message) = up_to_date(&p);
    assert!(
        message.contains("leaving once back from their reboot: r"),
        "{message}"
    );
    // Ready but still approved for an image it does not run: about to go.
    let mut ready = moved.clone();
    ready.status = node("r", "x", true, true).status;
    let p = world(ready.clone(), Daemon::Rebooting(OLD)).plan();
    assert!(node_writes(&p, "r").is_empty(), "{:?}", p.writes);
    assert!(slotted(&p).is_empty());
    // Back on the image it was told to boot: it leaves (cordon, mark and
    // record in one patch), and the slot goes to the next node.
    let p = world(ready, Daemon::Idle(NEW)).plan();
    assert_eq!(
        node_writes(&p, "r"),
        [
            &Write::CancelDrain { node: "r".into() },
            &Write::PatchNode {
                name: "r".into(),
                patch: NodePatch {
                    managed: Some(false),
                    ..NodePatch::UNCORDON
                }
            },
            &Write::DeleteBootcNode { name: "r".into() },
        ]
    );
    assert_eq!(slotted(&p), ["next"]);
}

#[test]
fn a_bootc_node_deleted_mid_reboot_takes_its_slot_back() {
    // The BootcNode is gone: recreated, its slot taken back from the Node's
    // record, the cordon kept, no other slot.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    let a = applied(&p, "r").expect("recreated");
    assert!(a.in_slot(), "{a:?}");
    assert_eq!(
        a.annotations
            .get(WAS_CORDONED_ANNOTATION)
            .map(String::as_str),
        Some("false")
    );
    assert!(!uncordons(&p, "r"), "{:?}", p.writes);
    assert!(!slotted(&p).contains(&"next".to_owned()), "{:?}", p.writes);
    // Recreated and its daemon not yet back: still held.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Nothing))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(!uncordons(&p, "r"), "{:?}", p.writes);
    assert!(!slotted(&p).contains(&"next".to_owned()), "{:?}", p.writes);
    // Back on the target and Ready: released, and the next node goes.
    let mut back = rebooting_node("r", "a");
    back.status = node("r", "a", true, true).status;
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(back)
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Idle(NEW)))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(node_writes(&p, "r").contains(&&Write::PatchNode {
        name: "r".into(),
        patch: NodePatch::UNCORDON
    }));
    assert_eq!(slotted(&p), ["next"]);
}

#[test]
fn a_target_withdrawn_mid_reboot_keeps_the_slot_until_the_daemon_answers() {
    // Approved for NEW, the pool rolled back to OLD, which the node runs.
    // Its daemon's last word (Staged, for the approving spec) may have been
    // followed by the apply: the slot is kept.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("r", "a", true, true))
        .node(node("next", "a", true, false))
        .bn(bn("r", OLD, Daemon::Staged(OLD)).slot(false).behind())
        .bn(bn("next", NEW, Daemon::Staged(OLD)));
    w.target = Ok(target(OLD));
    let p = w.plan();
    assert!(!uncordons(&p, "r"), "{:?}", p.writes);
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    // Same while it says Rebooting.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("r", "a", true, true))
        .bn(bn("r", OLD, Daemon::Rebooting(OLD)).slot(false).behind());
    w.target = Ok(target(OLD));
    assert!(!uncordons(&w.plan(), "r"));
    // The daemon answered the new spec (Idle on OLD): released.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("r", "a", true, true))
        .bn(bn("r", OLD, Daemon::Idle(OLD)).slot(false).behind());
    w.target = Ok(target(OLD));
    assert!(uncordons(&w.plan(), "r"));
}

#[test]
fn a_pause_mid_reboot_keeps_the_slot() {
    let p = World::new(pool("a", IntOrString::Int(1), true))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(node_writes(&p, "r").is_empty(), "{:?}", p.writes);
    // Resumed: the slot is still taken.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("next", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
}

#[test]
fn a_pool_deleted_mid_reboot_waits_for_the_node_to_be_back() {
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(rebooting_node("r", "a"))
        .node(node("done", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("done", NEW, Daemon::Idle(NEW)));
    let nodes = w.recorded_nodes();
    let input = PlanInput {
        pool: &w.pool,
        target: w.target.clone(),
        nodes: nodes.iter().collect(),
        bootc_nodes: w.bns.iter().collect(),
        other_pools: vec![],
        pull_secret_hash: None,
        drains: BTreeMap::new(),
        operator_namespace: api::labels::OPERATOR_NAMESPACE,
        last_status_write: None,
        now: now(),
        phase_clock: stuck::Clock::new(),
    };
    let cleanup = plan_cleanup(&input);
    assert_eq!(cleanup.waiting, ["r"]);
    assert!(
        cleanup
            .writes
            .iter()
            .all(|w| crate::actuator::node_of(w) == "done"),
        "{:?}",
        cleanup.writes
    );
    // The record alone (BootcNode gone too) waits the same way.
    let input = PlanInput {
        bootc_nodes: vec![],
        ..input
    };
    assert_eq!(plan_cleanup(&input).waiting, ["r"]);
}

#[test]
fn a_recorded_node_outside_the_pool_counts_until_ready() {
    // Neither a member nor a BootcNode (both lost mid-reboot, or a
    // restarted controller finding only the Node): the record holds a slot.
    let mut gone = rebooting_node("r", "elsewhere");
    gone.labels_mut().remove(MANAGED_LABEL);
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(gone.clone())
        .node(node("next", "a", true, false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(node_writes(&p, "r").is_empty(), "{:?}", p.writes);
    assert!(slotted(&p).is_empty());
    // Ready: restored (our cordon and the record go), the slot is free.
    gone.status = node("r", "x", true, true).status;
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(gone)
        .node(node("next", "a", true, false))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(
        node_writes(&p, "r"),
        [&Write::PatchNode {
            name: "r".into(),
            patch: NodePatch::UNCORDON
        }]
    );
    assert_eq!(slotted(&p), ["next"]);
}

#[test]
fn the_pools_own_unavailable_nodes_use_the_budget() {
    // A member NotReady on its own: no new slot, and the message says why.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("down", "a", false, false))
        .node(node("next", "a", true, false))
        .bn(bn("down", NEW, Daemon::Idle(OLD)))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    let (_, _, message) = up_to_date(&p);
    assert!(
        message
            .ends_with("; no new reboot slot while these nodes are unavailable: down (NotReady)"),
        "{message}"
    );
    // Two slots: one left for the others.
    let p = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("down", "a", false, false))
        .node(node("n1", "a", true, false))
        .node(node("n2", "a", true, false))
        .bn(bn("down", NEW, Daemon::Idle(OLD)))
        .bn(bn("n1", NEW, Daemon::Staged(OLD)))
        .bn(bn("n2", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), ["n1"]);
    // An admin's cordon on an up-to-date member uses the budget too...
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("adm", "a", true, true))
        .node(node("next", "a", true, false))
        .bn(bn("adm", NEW, Daemon::Idle(NEW)))
        .bn(bn("next", NEW, Daemon::Staged(OLD)))
        .plan();
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert!(up_to_date(&p).2.ends_with("adm (cordoned)"));
    // ...and an admin-cordoned node that needs the update takes the slot
    // first: it disrupts nothing more.
    let p = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("a-next", "a", true, false))
        .node(node("adm", "a", true, true))
        .bn(bn("a-next", NEW, Daemon::Staged(OLD)))
        .bn(bn("adm", NEW, Daemon::Staged(OLD)))
        .plan();
    assert_eq!(slotted(&p), ["adm"]);
}

#[test]
fn reboot_in_flight_table() {
    let rows: Vec<(&str, Bn, bool)> = vec![
        (
            "approved, not on it yet",
            bn("n", NEW, Daemon::Staged(OLD)).approved(),
            true,
        ),
        (
            "approved, rebooting",
            bn("n", NEW, Daemon::Rebooting(OLD)).approved(),
            true,
        ),
        (
            "approved, on it",
            bn("n", NEW, Daemon::Idle(NEW)).approved(),
            false,
        ),
        (
            "approved, gave up (Degraded)",
            bn("n", NEW, Daemon::Rebooting(OLD)).approved().degraded(),
            false,
        ),
        (
            "not approved, answered",
            bn("n", NEW, Daemon::Staged(OLD)),
            false,
        ),
        (
            "approval withdrawn, daemon behind (Staged)",
            bn("n", OLD, Daemon::Staged(OLD)).behind(),
            true,
        ),
        (
            "approval withdrawn, daemon behind (Rebooting)",
            bn("n", OLD, Daemon::Rebooting(OLD)).behind(),
            true,
        ),
        (
            "released: Idle, not acknowledged",
            bn("n", NEW, Daemon::Idle(NEW)).behind(),
            false,
        ),
        ("no status", bn("n", NEW, Daemon::Nothing), false),
    ];
    for (name, b, want) in rows {
        assert_eq!(disruption::reboot_in_flight(&b.build()), want, "{name}");
    }
}

#[test]
fn one_node_stuck_in_its_slot_is_named_on_the_pool_once() {
    // Rebooting for 11 minutes, alone: no halt, but the pool says so.
    let w = World::new(pool("a", IntOrString::Int(2), false))
        .node(down_for(node("r", "a", true, true), 660))
        .node(node("ok", "a", true, false))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .bn(bn("ok", NEW, Daemon::Idle(NEW)));
    let p = w.plan();
    assert_eq!(degraded_reason(&p), reasons::NODE_STUCK);
    assert!(
        degraded_message(&p).starts_with("node r rebooting (NotReady) for 11m (deadline 10m): "),
        "{}",
        degraded_message(&p)
    );
    let stuck: Vec<&PlannedEvent> = p
        .events
        .iter()
        .filter(|e| e.reason == event_reasons::NODE_STUCK)
        .collect();
    assert_eq!(stuck.len(), 1, "{:?}", p.events);
    assert!(stuck[0].warning && stuck[0].node.as_deref() == Some("r"));
    // Reported already: no second event.
    let mut again = w;
    again.pool.status = p.status.clone();
    assert!(
        again
            .plan()
            .events
            .iter()
            .all(|e| e.reason != event_reasons::NODE_STUCK)
    );
    // Within the deadline: healthy, and looked at again when it ends.
    let p = World::new(pool("a", IntOrString::Int(2), false))
        .node(down_for(node("r", "a", true, true), 60))
        .bn(bn("r", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .plan();
    assert_eq!(degraded_reason(&p), reasons::HEALTHY);
    assert_eq!(p.requeue_after, Some(Duration::from_secs(540)));
    assert_eq!(p.phases.get("r"), Some(&stuck::Phase::Rebooting));
}

#[test]
fn phases_without_a_timestamp_are_timed_by_the_controllers_clock() {
    let long_ago = now() - jiff::SignedDuration::from_secs(31 * 60);
    // Staging for 31 minutes by the clock.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("s", "a", true, false))
        .bn(bn("s", NEW, Daemon::Staging(OLD)));
    assert_eq!(degraded_reason(&w.plan()), reasons::HEALTHY, "first sight");
    assert_eq!(w.plan().phases.get("s"), Some(&stuck::Phase::Staging));
    w.clock
        .insert("s".into(), (stuck::Phase::Staging, long_ago));
    let p = w.plan();
    assert_eq!(degraded_reason(&p), reasons::NODE_STUCK);
    assert!(degraded_message(&p).contains("node s staging for 31m"));
    // Approved, Ready, not rebooting for 31 minutes.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("a1", "a", true, true))
        .bn(bn("a1", NEW, Daemon::Rebooting(OLD)).approved().slot(false))
        .drain("a1", DrainPhase::Succeeded);
    w.clock
        .insert("a1".into(), (stuck::Phase::ApprovedNotRebooting, long_ago));
    assert!(
        degraded_message(&w.plan()).contains("node a1 approved but not rebooting for 31m"),
        "{}",
        degraded_message(&w.plan())
    );
    // A daemon that never answered its spec.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("q", "a", true, false))
        .bn(bn("q", NEW, Daemon::Staged(OLD)).behind());
    w.clock
        .insert("q".into(), (stuck::Phase::DaemonSilent, long_ago));
    assert!(degraded_message(&w.plan()).contains("node q daemon silent"));
}

#[test]
fn a_pool_wide_credentials_problem_is_not_passed_to_the_nodes() {
    let secret = SecretReference {
        name: "pull".into(),
        namespace: api::labels::OPERATOR_NAMESPACE.into(),
    };
    let with_secret = |mut b: BootcNode| {
        b.spec.pull_secret_ref = Some(secret.clone());
        b.spec.pull_secret_hash = Some("sha256:old".into());
        b
    };
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("done", "a", true, false))
        .node(node("staging", "a", true, false));
    w.bns
        .push(with_secret(bn("done", NEW, Daemon::Idle(NEW)).build()));
    w.bns
        .push(with_secret(bn("staging", OLD, Daemon::Idle(OLD)).build()));
    w.pool.spec.pull_secret_ref = Some(secret.clone());
    // The Secret deleted: reported on the pool; the node on the target is
    // not touched, the other moves to the target with the secret it has.
    let p = w.plan();
    assert_eq!(degraded_reason(&p), PULL_SECRET_NOT_FOUND);
    assert!(applied(&p, "done").is_none(), "{:?}", p.writes);
    let a = applied(&p, "staging").unwrap();
    assert_eq!(a.spec.desired_image, image(NEW));
    assert_eq!(a.spec.pull_secret_hash.as_deref(), Some("sha256:old"));
    // Not a docker config: the same.
    w.secret_hash = Some("sha256:new".into());
    w.target = Err(TargetProblem {
        reason: reasons::INVALID_PULL_SECRET,
        message: "Secret bootc-operator/pull has no .dockerconfigjson".into(),
    });
    w.pool.status = Some(BootcNodePoolStatus {
        target_digest: Some(NEW.into()),
        target_image: Some(image(NEW)),
        ..BootcNodePoolStatus::default()
    });
    let p = w.plan();
    assert_eq!(degraded_reason(&p), reasons::INVALID_PULL_SECRET);
    assert!(applied(&p, "done").is_none(), "{:?}", p.writes);
    assert_eq!(
        applied(&p, "staging")
            .unwrap()
            .spec
            .pull_secret_hash
            .as_deref(),
        Some("sha256:old")
    );
    // Fixed: the new hash reaches every node.
    w.target = Ok(target(NEW));
    let p = w.plan();
    assert_eq!(
        applied(&p, "done")
            .unwrap()
            .spec
            .pull_secret_hash
            .as_deref(),
        Some("sha256:new")
    );
}

#[test]
fn staging_is_bounded_and_unlocked_hosts_stage_only_for_a_slot() {
    // One download at a time: the first member is told, the others stay on
    // what they run.
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    for n in ["n1", "n2", "n3"] {
        w = w.node(node(n, "a", true, false)).bn(bn(
            match n {
                "n1" => "n1",
                "n2" => "n2",
                _ => "n3",
            },
            OLD,
            Daemon::Idle(OLD),
        ));
    }
    w.pool.spec.rollout.max_concurrent_staging = Some(1);
    let p = w.plan();
    assert_eq!(applied(&p, "n1").unwrap().spec.desired_image, image(NEW));
    assert!(applied(&p, "n2").is_none() && applied(&p, "n3").is_none());
    // Unset: every member at once, as before.
    w.pool.spec.rollout.max_concurrent_staging = None;
    let p = w.plan();
    assert!(["n1", "n2", "n3"].iter().all(|n| applied(&p, n).is_some()));

    // A host whose bootc cannot stage locked waits while the slot is held,
    // and a told one whose target moved away is put back on what it runs.
    let unlocked = |mut b: BootcNode| {
        if let Some(s) = b.status.as_mut() {
            s.download_only_supported = Some(false);
        }
        b
    };
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("holder", "a", true, true))
        .node(node("u", "a", true, false))
        .bn(bn("holder", NEW, Daemon::Rebooting(OLD))
            .approved()
            .slot(false));
    w.bns
        .push(unlocked(bn("u", OLD, Daemon::Idle(OLD)).build()));
    let p = w.plan();
    assert!(
        applied(&p, "u").is_none(),
        "told while no slot is free: {:?}",
        p.writes
    );
    // The slot free: told.
    let mut w = World::new(pool("a", IntOrString::Int(1), false)).node(node("u", "a", true, false));
    w.bns
        .push(unlocked(bn("u", OLD, Daemon::Idle(OLD)).build()));
    assert_eq!(
        applied(&w.plan(), "u").unwrap().spec.desired_image,
        image(NEW)
    );
}

#[test]
fn a_tag_moving_a_b_a_reboots_nobody_twice() {
    // B (NEW) was told and staged everywhere, one node took the slot and
    // was drained but not approved; the tag moves back to A (OLD).
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("slot", "a", true, true))
        .node(node("s", "a", true, false))
        .bn(bn("slot", NEW, Daemon::Staged(OLD)).slot(false))
        .bn(bn("s", NEW, Daemon::Staged(OLD)))
        .drain("slot", DrainPhase::Succeeded);
    w.target = Ok(target(OLD));
    let p = w.plan();
    for n in ["slot", "s"] {
        let a = applied(&p, n).unwrap();
        assert_eq!(a.spec.desired_image, image(OLD), "{n}");
        assert_eq!(a.spec.desired_image_state, DesiredImageState::Staged, "{n}");
    }
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
}

#[test]
fn the_summary_tells_states_draining_slots_and_halt() {
    let w = World::new(pool("a", IntOrString::Int(2), false))
        .node(node("done", "a", true, false))
        .node(node("draining", "a", true, true))
        .node(node("staged", "a", true, false))
        .node(node("staging", "a", true, false))
        .bn(bn("done", NEW, Daemon::Idle(NEW)))
        .bn(bn("draining", NEW, Daemon::Staged(OLD)).slot(false))
        .bn(bn("staged", NEW, Daemon::Staged(OLD)))
        .bn(bn("staging", NEW, Daemon::Staging(OLD)))
        .drain("draining", DrainPhase::Running);
    let s = w.plan().summary;
    assert_eq!(
        s.states,
        BTreeMap::from([
            ("done".to_owned(), NodeState::UpToDate),
            ("draining".to_owned(), NodeState::Staged),
            ("staged".to_owned(), NodeState::Staged),
            ("staging".to_owned(), NodeState::Staging),
        ])
    );
    // The slot held, and the one this plan hands out: both draining.
    assert_eq!(
        s.draining.iter().map(String::as_str).collect::<Vec<_>>(),
        ["draining", "staged"]
    );
    assert_eq!(
        (s.slots, s.slots_in_use, s.halted, s.paused),
        (2, 2, false, false)
    );

    let w = World::new(pool("a", IntOrString::Int(3), false))
        .node(node("bad1", "a", false, true))
        .node(node("bad2", "a", false, true))
        .bn(bn("bad1", NEW, Daemon::Idle(OLD)).slot(false).degraded())
        .bn(bn("bad2", NEW, Daemon::Idle(OLD)).slot(false).degraded());
    assert!(w.plan().summary.halted);
}

#[test]
fn the_target_summary_is_the_version_and_a_short_digest() {
    let t = target(NEW);
    let mut on_new = bn("a", NEW, Daemon::Idle(NEW)).build();
    assert_eq!(target_summary(&t, &[&on_new]), "sha256:222222222222");
    if let Some(b) = on_new.status.as_mut().and_then(|s| s.booted.as_mut()) {
        b.version = Some("2.0".into());
    }
    let mut on_old = bn("b", NEW, Daemon::Idle(OLD)).build();
    if let Some(b) = on_old.status.as_mut().and_then(|s| s.booted.as_mut()) {
        b.version = Some("1.0".into());
    }
    assert_eq!(
        target_summary(&t, &[&on_old, &on_new]),
        "2.0 (sha256:222222222222)"
    );
}
