//! Objects for the table tests: a pool `workers` rolling out 2.0 over 1.0,
//! at 16:03, every phase entered at 16:00.
#![allow(clippy::unwrap_used)]

use api::Node;
use api::conditions::Condition;
use api::conditions::ConditionUpdate;
use api::labels::{CORDONED_BY_ANNOTATION, IN_REBOOT_SLOT_ANNOTATION};
use api::test_support::{BootcNodeBuilder, NodeBuilder, PodBuilder, PoolBuilder};
use api::{BootcNode, BootcNodePool, ConditionType, DesiredImageState, Reason};
use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::ResourceExt;
use serde_json::json;

use crate::Snapshot;

pub const V1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
pub const V2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const REPO: &str = "r.example/acme/os";

/// The daemon's phase, short for the tables.
pub use api::DaemonPhase as Phase;

pub fn at(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_795_449_600 + seconds).unwrap()
}

/// 16:03, three minutes after every phase began.
pub fn now() -> jiff::Timestamp {
    at(180)
}

pub fn snapshot(
    pools: Vec<BootcNodePool>,
    bootc_nodes: Vec<BootcNode>,
    nodes: Vec<Node>,
) -> Snapshot {
    Snapshot {
        pools,
        bootc_nodes,
        nodes,
        ..Snapshot::default()
    }
}

/// `pool` and one member, `bn`, whose Node (of its name) is Ready and
/// cordoned as given.
pub fn alone_in(pool: BootcNodePool, bn: BootcNode, ready: bool, cordoned: bool) -> Snapshot {
    let node = node(&bn.name_any(), ready, cordoned);
    snapshot(vec![pool], vec![bn], vec![node])
}

/// [`alone_in`] the pool `workers`, not paused.
pub fn alone(bn: BootcNode, ready: bool, cordoned: bool) -> Snapshot {
    alone_in(pool("workers", false), bn, ready, cordoned)
}

/// Sets the `Degraded` condition afresh: True for `(reason, message)`,
/// else False (Healthy).
fn set_degraded(conditions: &mut Vec<Condition>, degraded: Option<(Reason, &str)>) {
    conditions.retain(|c| c.type_ != ConditionType::Degraded);
    let (status, reason, message) =
        degraded.map_or((false, Reason::Healthy, ""), |(r, m)| (true, r, m));
    condition(conditions, ConditionType::Degraded, status, reason, message);
}

fn condition(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: bool,
    reason: Reason,
    message: &str,
) {
    api::conditions::apply(
        conditions,
        &ConditionUpdate::new(type_, status, reason, message),
        None,
        &Time(at(0)),
    );
}

pub fn pool(name: &str, paused: bool) -> BootcNodePool {
    PoolBuilder::new(name)
        .uid(&format!("uid-{name}"))
        .selects("pool", name)
        .image(format!("{REPO}:stable"))
        .paused(paused)
        .target(V2, &format!("{REPO}@{V2}"), "2.0 (sha256:222222222222)")
        .at(Time(at(0)))
        .condition(
            ConditionType::UpToDate,
            false,
            Reason::RolloutInProgress,
            "1/3 updated; 1 staged, 1 rebooting; in reboot slots: n3",
        )
        .condition(ConditionType::Degraded, false, Reason::Healthy, "")
        .build()
}

/// `p` Degraded with `reason` and `message`.
pub fn degraded_pool(mut p: BootcNodePool, reason: Reason, message: &str) -> BootcNodePool {
    let status = p.status.as_mut().unwrap();
    set_degraded(&mut status.conditions, Some((reason, message)));
    p
}

pub fn halted(p: BootcNodePool, message: &str) -> BootcNodePool {
    degraded_pool(p, Reason::RolloutHalted, message)
}

/// `p` with `maxUnavailable: n`.
pub fn wide(mut p: BootcNodePool, n: i32) -> BootcNodePool {
    p.spec.rollout.max_unavailable =
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n);
    p
}

pub fn stuck(p: BootcNodePool, node: &str) -> BootcNodePool {
    let message = format!("{node} has been rebooting (NotReady) for 12m; check the node's console");
    degraded_pool(p, Reason::NodeStuck, &message)
}

/// `p` depending on pool `on` (`spec.rollout.dependsOn`).
pub fn depending(mut p: BootcNodePool, on: &str) -> BootcNodePool {
    p.spec.rollout.depends_on = vec![on.to_owned()];
    p
}

/// `p` with one node group first: the nodes labelled `key=value`.
pub fn ordered(mut p: BootcNodePool, key: &str, value: &str) -> BootcNodePool {
    p.spec.rollout.order =
        vec![serde_json::from_value(json!({"selector": {"matchLabels": {key: value}}})).unwrap()];
    p
}

/// `node` with the label `key=value`.
pub fn labelled(mut node: Node, key: &str, value: &str) -> Node {
    node.labels_mut().insert(key.into(), value.into());
    node
}

/// A daily maintenance window of two hours from `start` (UTC).
pub fn windowed(mut p: BootcNodePool, start: &str) -> BootcNodePool {
    p.spec.rollout.maintenance_windows = vec![api::MaintenanceWindow {
        days: vec![],
        start: start.to_owned(),
        duration: "2h".to_owned(),
        time_zone: None,
    }];
    p
}

/// `p` whose nodes running `app=etl` pods are blocked
/// (`spec.disruption.blockingPods`).
pub fn blocking_etl(mut p: BootcNodePool) -> BootcNodePool {
    p.spec.disruption.blocking_pods =
        Some(serde_json::from_value(json!({"selector": {"matchLabels": {"app": "etl"}}})).unwrap());
    p
}

/// A running pod `namespace/name` labelled `app=<app>` on `node`.
pub fn pod_on(node: &str, namespace: &str, name: &str, app: &str) -> Pod {
    PodBuilder::new(namespace, name)
        .label("app", app)
        .on(Some(node))
        .phase("Running")
        .build()
}

/// `p` asking Prometheus, whose last answer (the controller's, on the pool)
/// was that `alert` fires.
pub fn alerting(mut p: BootcNodePool, alert: &str) -> BootcNodePool {
    p.spec.rollout.alert_gate = Some(api::AlertGate {
        endpoint: Some("main".into()),
        prometheus_url: None,
        matchers: vec![r#"severity="critical""#.into()],
    });
    let status = p.status.as_mut().unwrap();
    condition(
        &mut status.conditions,
        ConditionType::UpToDate,
        false,
        Reason::AlertFiring,
        &format!(
            "1/3 updated; 2 staged, 0 rebooting; alerts fire (spec.rollout.alertGate), no new reboot slot until they resolve: {alert}"
        ),
    );
    p
}

pub fn staging_bound(mut p: BootcNodePool, n: i32) -> BootcNodePool {
    p.spec.rollout.max_concurrent_staging = Some(n);
    p
}

pub fn bn(name: &str, booted: &str, phase: Phase) -> BootcNode {
    let version = if booted == V2 { "2.0" } else { "1.0" };
    BootcNodeBuilder::new(name)
        .desired(format!("{REPO}@{V2}"))
        .generation(2)
        .owner("workers", "uid-workers")
        .observed(2)
        .booted(&format!("{REPO}@{booted}"), booted)
        .booted_version(version)
        .at(Time(at(0)))
        .phase(phase)
        .healthy()
        .build()
}

pub fn slotted(mut bn: BootcNode, approved: bool) -> BootcNode {
    bn.annotations_mut()
        .insert(IN_REBOOT_SLOT_ANNOTATION.into(), "true".into());
    if approved {
        bn.spec.desired_image_state = DesiredImageState::Booted;
    }
    bn
}

pub fn degrade(mut bn: BootcNode, message: &str) -> BootcNode {
    let status = bn.status.as_mut().unwrap();
    set_degraded(&mut status.conditions, Some((Reason::Error, message)));
    bn
}

pub fn behind(mut bn: BootcNode) -> BootcNode {
    bn.metadata.generation = Some(3);
    bn
}

/// Told `digest` rather than the target.
pub fn told(mut bn: BootcNode, digest: &str) -> BootcNode {
    bn.spec.desired_image = api::Shared::from(format!("{REPO}@{digest}"));
    bn
}

/// A Node of pool `workers` (its label matches the pool's selector).
pub fn node(name: &str, ready: bool, cordoned: bool) -> Node {
    let node = NodeBuilder::new(name)
        .label("pool", "workers")
        .unschedulable(cordoned)
        .ready(ready)
        .since(at(0));
    if cordoned {
        node.annotation(CORDONED_BY_ANNOTATION, "workers").build()
    } else {
        node.build()
    }
}

/// `node` held by `who` for `reason` (`hold.bootc.dev/<who>`).
pub fn held(mut node: Node, who: &str, reason: &str) -> Node {
    let key = format!("{}{who}", api::labels::HOLD_ANNOTATION_PREFIX);
    node.annotations_mut().insert(key, reason.into());
    node
}

pub fn event(pool: &str, reason: &str, node: Option<&str>, seconds: i64, message: &str) -> Event {
    let warning = reason == api::event_reasons::DRAIN_BLOCKED;
    Event {
        involved_object: ObjectReference {
            api_version: Some("node.bootc.dev/v1alpha1".into()),
            kind: Some("BootcNodePool".into()),
            name: Some(pool.into()),
            ..ObjectReference::default()
        },
        related: node.map(|n| ObjectReference {
            kind: Some("Node".into()),
            name: Some(n.into()),
            ..ObjectReference::default()
        }),
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(if warning { "Warning" } else { "Normal" }.into()),
        event_time: Some(MicroTime(at(seconds))),
        ..Event::default()
    }
}
