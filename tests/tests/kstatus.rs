//! What GitOps tools say of a pool: kstatus (the real Go library, built from
//! tests/kstatus) judges pool states the controller's planner produces, and
//! must agree with what a person would say: a rollout going on (or paused
//! half-way) is InProgress, a finished one Current, a halted or
//! misconfigured pool Failed, and a spec the controller has not yet seen
//! InProgress.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use api::Node;
use api::test_support::{BootcNodeBuilder, NodeBuilder, PoolBuilder};
use api::{BootcNode, BootcNodePool, ConditionType, Reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rollout::{DrainPhase, PlanInput, Target, TargetProblem};
use serde_json::Value;

const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn image(d: &str) -> String {
    format!("registry.test/acme/os@{d}")
}

fn pool(paused: bool) -> BootcNodePool {
    PoolBuilder::new("w")
        .uid("uid-w")
        .generation(3)
        .selects("pool", "w")
        .image(image(NEW))
        .max_unavailable(IntOrString::Int(2))
        .paused(paused)
        .build()
}

fn node(name: &str, ready: bool, cordoned: bool) -> Node {
    NodeBuilder::new(name)
        .label("pool", "w")
        .managed()
        .unschedulable(cordoned)
        .ready(ready)
        .build()
}

/// A member's BootcNode: booted `booted`, the daemon in `phase` (an Idle
/// reason), possibly Degraded, possibly in a reboot slot.
fn bn(name: &str, booted: &str, phase: Reason, degraded: bool, slot: bool) -> BootcNode {
    let mut b = BootcNodeBuilder::new(name)
        .owner("w", "uid-w")
        .desired(image(NEW))
        .booted(&image(booted), booted);
    if slot {
        b = b
            .annotation(api::labels::IN_REBOOT_SLOT_ANNOTATION, "true")
            .annotation(api::labels::WAS_CORDONED_ANNOTATION, "false");
    }
    if phase == Reason::Staged {
        b = b.staged(&image(NEW), NEW);
    }
    let t: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let health = if degraded {
        Reason::Error
    } else {
        Reason::Healthy
    };
    b.at(Time(t))
        .condition(ConditionType::Idle, phase == Reason::Idle, phase, "")
        .condition(ConditionType::Degraded, degraded, health, "")
        .build()
}

/// The pool as the controller leaves it after planning once for this world.
fn planned(
    mut pool: BootcNodePool,
    nodes: &[Node],
    bns: &[BootcNode],
    target: Result<Target, TargetProblem>,
    drains: &[(&str, DrainPhase)],
) -> BootcNodePool {
    let plan = rollout::plan(&PlanInput {
        pool: &pool,
        target,
        nodes: nodes.iter().collect(),
        bootc_nodes: bns.iter().collect(),
        other_pools: vec![],
        pull_secret: None,
        drains: drains
            .iter()
            .map(|(n, p)| ((*n).to_owned(), p.clone()))
            .collect::<BTreeMap<_, _>>(),
        operator_namespace: api::labels::OPERATOR_NAMESPACE,
        last_status_write: None,
        now: jiff::Timestamp::now(),
        phase_clock: std::sync::Arc::new(rollout::reboot::stuck::Clock::new()),
        deadlines: rollout::reboot::stuck::Deadlines::default(),
        gates: rollout::holds::gates::Gates::default(),
        node_lifecycle_conditions: false,
    });
    pool.status = plan.status.or(pool.status);
    pool
}

fn new_target() -> Result<Target, TargetProblem> {
    Ok(Target {
        digest: NEW.into(),
        image: image(NEW),
        platform_digests: Vec::new(),
        kubelet: None,
    })
}

fn named(mut pool: BootcNodePool, name: &str) -> Value {
    pool.metadata.name = Some(name.into());
    serde_json::to_value(pool).unwrap()
}

#[test]
fn kstatus_agrees_with_a_person_on_every_pool_state() {
    let nodes = [
        node("a", true, false),
        node("b", true, false),
        node("c", true, false),
    ];
    let staging = [
        bn("a", OLD, Reason::Staging, false, false),
        bn("b", OLD, Reason::Staged, false, false),
        bn("c", NEW, Reason::Idle, false, false),
    ];
    let done = [
        bn("a", NEW, Reason::Idle, false, false),
        bn("b", NEW, Reason::Idle, false, false),
        bn("c", NEW, Reason::Idle, false, false),
    ];
    let in_progress = planned(pool(false), &nodes, &staging, new_target(), &[]);
    let all_updated = planned(pool(false), &nodes, &done, new_target(), &[]);
    let paused = planned(pool(true), &nodes, &staging, new_target(), &[]);
    // Two nodes in slots came back Degraded: rule 3 halts the rollout.
    let halted = planned(
        pool(false),
        &[
            node("a", true, true),
            node("b", true, true),
            node("c", true, false),
        ],
        &[
            bn("a", OLD, Reason::Idle, true, true),
            bn("b", OLD, Reason::Idle, true, true),
            bn("c", OLD, Reason::Staged, false, false),
        ],
        new_target(),
        &[],
    );
    let draining = planned(
        pool(false),
        &[
            node("a", true, true),
            node("b", true, false),
            node("c", true, false),
        ],
        &[
            bn("a", OLD, Reason::Staged, false, true),
            bn("b", OLD, Reason::Staged, false, false),
            bn("c", NEW, Reason::Idle, false, false),
        ],
        new_target(),
        &[("a", DrainPhase::Running)],
    );
    let unresolvable = planned(
        pool(false),
        &nodes,
        &[],
        Err(TargetProblem {
            reason: Reason::ImageNotFound,
            message: "registry.test/acme/os:prod: manifest unknown".into(),
        }),
        &[],
    );
    // A spec change the controller has not planned for yet.
    let mut changed = all_updated.clone();
    changed.metadata.generation = Some(4);

    let cases = [
        (named(in_progress, "in-progress"), "InProgress"),
        (named(draining, "draining"), "InProgress"),
        (named(all_updated, "all-updated"), "Current"),
        // Nodes are behind and stay so: not done, like a paused Deployment.
        (named(paused, "paused"), "InProgress"),
        (named(halted, "halted"), "Failed"),
        (named(unresolvable, "unresolvable"), "Failed"),
        (named(changed, "spec-changed"), "InProgress"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let program = tests::kstatus::build(dir.path()).unwrap();
    let objects: Vec<Value> = cases.iter().map(|(o, _)| o.clone()).collect();
    let got = tests::kstatus::verdicts(&program, &objects).unwrap();
    let want: Vec<(String, String)> = cases
        .iter()
        .map(|(o, s)| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                (*s).to_owned(),
            )
        })
        .collect();
    assert_eq!(
        got,
        want,
        "pools: {}",
        serde_json::to_string_pretty(&objects).unwrap()
    );
}
