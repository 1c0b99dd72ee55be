//! The actuator against a scripted API (`scripted-api`): the planner's
//! writes for a slot that turns over, made wave by wave (the released slot
//! before the new one), each node's in the planner's order, different
//! nodes' in any interleaving, and stopped at a node's first failure. The
//! plan is the real planner's (`rollout::plan`) for the scene. Answers are
//! held until the actuator has made every write it can make meanwhile, so
//! that a write made too early shows whatever the scheduling.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod scripted;

use std::collections::BTreeMap;
use std::sync::Arc;

use api::Node;
use api::labels::OPERATOR_NAMESPACE;
use api::{BootcNode, BootcNodePool, DaemonPhase};
use controller::actions::actuator::{Actuator, ActuatorError, OwnWrites, Written};
use controller::actions::drain::Drains;
use controller::actions::events::EventSink;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use rollout::{DrainPhase, Plan, PlanInput, Target};
use scripted::*;
use scripted_api::{Script, ScriptedApi, collection_path, get};
use serde_json::json;
use tokio::sync::mpsc;

/// w9 holds the slot and is back on the target: it is released. w2 is
/// told the target. w1, staged, takes the freed slot.
fn scene() -> (BootcNodePool, Vec<Node>, Vec<BootcNode>) {
    let nodes = vec![node("w1", false), node("w2", false), slot_node("w9")];
    let bootc_nodes = vec![
        bootc_node("w1", NEW, DaemonPhase::Staged, OLD),
        bootc_node("w2", OLD, DaemonPhase::Idle, OLD),
        approved(bootc_node("w9", NEW, DaemonPhase::Idle, NEW)),
    ];
    (pool(), nodes, bootc_nodes)
}

fn plan(pool: &BootcNodePool, nodes: &[Node], bootc_nodes: &[BootcNode]) -> Plan {
    rollout::plan(&PlanInput {
        pool,
        target: Ok(Target {
            digest: NEW.to_owned(),
            image: image(NEW),
            platform_digests: Vec::new(),
            kubelet: None,
        }),
        nodes: nodes.iter().collect(),
        bootc_nodes: bootc_nodes.iter().collect(),
        other_pools: Vec::new(),
        pull_secret: None,
        drains: BTreeMap::new(),
        operator_namespace: OPERATOR_NAMESPACE,
        last_status_write: None,
        now: jiff::Timestamp::now(),
        phase_clock: Arc::default(),
        deadlines: rollout::reboot::stuck::Deadlines::default(),
        gates: rollout::holds::gates::Gates::default(),
        node_lifecycle_conditions: false,
    })
}

/// The actuator on `api`, its drains on `drain_api`; the drains' ends
/// come out of the receiver.
fn actuator(
    api: &ScriptedApi,
    drain_api: &ScriptedApi,
) -> (
    Actuator,
    Drains,
    mpsc::UnboundedReceiver<ObjectRef<BootcNodePool>>,
) {
    let events = EventSink::new(api.client(), "test");
    let (trigger, ended) = mpsc::unbounded_channel();
    let drains = Drains::new(
        drain_api.client(),
        OPERATOR_NAMESPACE,
        events.clone(),
        trigger,
    );
    (
        Actuator::new(api.client(), drains.clone(), events),
        drains,
        ended,
    )
}

/// A drain of a node without pods: one list, nothing to evict.
fn empty_drain(node: &str) -> Script {
    let pods = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []});
    Script::new().then(
        get(&collection_path::<Pod>(None))
            .query("fieldSelector", &format!("spec.nodeName={node}"))
            .ok(&pods),
    )
}

/// Wave one: w9's uncordon (its slot released), then its approval
/// withdrawn; w2's new target alongside. Wave two, only then: w1's slot
/// taken with its cordon, in one write; then its drain.
#[tokio::test(start_paused = true)]
async fn the_writes_are_made_wave_by_wave_each_nodes_in_order() {
    let (pool, nodes, bootc_nodes) = scene();
    let plan = plan(&pool, &nodes, &bootc_nodes);
    let told_new = json!({"spec": {"desiredImage": image(NEW)}});
    let script = Script::new()
        .together([
            vec![
                uncordons("w9").ok(&stored(11)),
                withdraws_approval("w9").ok(&stored(21)),
            ],
            vec![
                apply_bootc_node("w2")
                    .body_includes(told_new)
                    .ok(&stored(22)),
            ],
        ])
        .together([vec![cordons("w1").ok(&stored(12))]]);
    // Answered once every write that can start has: a write of the
    // second wave made while the first is in flight fails the test.
    let api = ScriptedApi::new(script).answers_when_settled();
    let drain_api = ScriptedApi::new(empty_drain("w1"));
    let (actuator, drains, mut drain_ended) = actuator(&api, &drain_api);
    let mut own = OwnWrites::default();
    let made = api
        .finish(actuator.write(&pool, plan.writes, &mut own))
        .await;
    assert_eq!(made.unwrap(), 4, "API writes made");
    // The drain was started last, and runs on its own.
    let ended = drain_api.finish(drain_ended.recv()).await;
    assert_eq!(ended, Some(ObjectRef::from_obj(&pool)));
    assert_eq!(
        drains.snapshot(POOL),
        BTreeMap::from([("w1".to_owned(), DrainPhase::Succeeded)])
    );
}

/// w9's first write fails: its release is not made (the uncordon did not
/// land), w2's write, started alongside, is seen through, and the second
/// wave never starts (no slot is taken while the old one may be held).
/// The error names the failed write; the write that landed is recorded.
#[tokio::test(start_paused = true)]
async fn a_failed_write_stops_its_node_and_the_next_wave() {
    let (pool, nodes, bootc_nodes) = scene();
    let plan = plan(&pool, &nodes, &bootc_nodes);
    let script = Script::new().together([
        vec![uncordons("w9").fails(500, "InternalError")],
        vec![apply_bootc_node("w2").ok(&stored(22))],
    ]);
    // Answered once every write that can start has: a write of the
    // second wave made while the first is in flight fails the test.
    let api = ScriptedApi::new(script).answers_when_settled();
    let drain_api = ScriptedApi::new(Script::new());
    let (actuator, drains, _) = actuator(&api, &drain_api);
    let mut own = OwnWrites::default();
    let made = api
        .finish(actuator.write(&pool, plan.writes, &mut own))
        .await;
    assert!(
        matches!(&made, Err(ActuatorError::PatchNode { name, .. }) if name == "w9"),
        "{made:?}"
    );
    // What landed is recorded for the cache catch-up: w2's apply (version
    // 22) holds planning back until the cache has it.
    let w2 = Written::BootcNode("w2".to_owned());
    let cache_at = |version: u64| {
        let w2 = w2.clone();
        move |w: &Written| (*w == w2).then_some(version)
    };
    assert!(
        !own.clone().caught_up(cache_at(21)),
        "w2's write not recorded"
    );
    assert!(own.caught_up(cache_at(22)));
    assert!(drains.snapshot(POOL).is_empty(), "no drain started");
    drain_api.verify();
}
