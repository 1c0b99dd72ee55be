//! One reconcile of a pool, as the running controller makes it, against a
//! scripted API (`scripted-api`) and caches holding the scene
//! (`controller::runtime::reconcile_once`): the finalizer first, then
//! gather, plan and act; and a deleted pool's cleanup, which restores its
//! nodes before it lets the pool go, and holds the pool while a node it
//! disrupted is still rebooting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod scripted;

use api::event_reasons;
use api::labels::{
    CLUSTER_EVENTS_NAMESPACE, CONTROLLER_MANAGER, DAEMON_PULL_SECRETS_ROLE, MANAGED_LABEL,
    OPERATOR_NAMESPACE, POOL_FINALIZER,
};
use api::{BootcNode, BootcNodePool, DaemonPhase, DesiredImageState};
use controller::Options;
use std::sync::Arc;

use api::Node;
use controller::runtime::pool_state::PoolStates;
use controller::runtime::{Cached, reconcile_once};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use scripted::*;
use scripted_api::{
    Exchange, Script, ScriptedApi, collection_path, delete, namespaced_path, object_path, patch,
    post, status_path,
};
use serde_json::json;

/// `pool` carrying the controller's finalizer.
fn finalized(mut pool: BootcNodePool) -> BootcNodePool {
    pool.metadata.finalizers = Some(vec![POOL_FINALIZER.to_owned()]);
    pool
}

/// `pool` being deleted (its finalizer holds it).
fn deleted(mut pool: BootcNodePool) -> BootcNodePool {
    pool.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    finalized(pool)
}

/// `node` NotReady since just now: rebooting.
fn rebooting(mut node: Node) -> Node {
    let ready = &mut node.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    ready.status = "False".into();
    ready.last_transition_time = Some(Time(jiff::Timestamp::now()));
    node
}

/// One reconcile of `pool` on `api`, the caches holding `cached`. `api`
/// holds its answers until the reconcile has settled (see the actuator's
/// tests): a write made before the ones it must wait for fails the test.
async fn reconcile(
    api: &ScriptedApi,
    cached: Cached,
    pool: BootcNodePool,
) -> Result<Action, controller::Error> {
    reconcile_remembering(api, cached, pool, &Arc::default()).await
}

/// [`reconcile`], with what the controller remembers about pools kept in
/// `states`.
async fn reconcile_remembering(
    api: &ScriptedApi,
    cached: Cached,
    pool: BootcNodePool,
    states: &Arc<PoolStates>,
) -> Result<Action, controller::Error> {
    let drains = ScriptedApi::new(Script::new());
    let options = Options::new("test");
    let out = api
        .finish(reconcile_once(
            api.client(),
            drains.client(),
            &options,
            cached,
            pool,
            states,
        ))
        .await;
    drains.verify();
    out
}

/// The finalizer's JSON patch of the pool, answered with `answer`.
fn finalizer_patch(ops: serde_json::Value, answer: &BootcNodePool) -> Exchange {
    patch(&object_path::<BootcNodePool>(POOL))
        .body_includes(ops)
        .ok(answer)
}

/// The BootcNode of a node leaving with its pool is deleted.
fn deletes_bootc_node(name: &str) -> Exchange {
    delete(&object_path::<BootcNode>(name)).ok(&bootc_node(name, NEW, DaemonPhase::Idle, NEW))
}

/// A Node patch that removes the pool's label.
fn unlabels(name: &str) -> Exchange {
    patch_node(name).body_includes(json!({"metadata": {"labels": {MANAGED_LABEL: null}}}))
}

/// A pool seen for the first time gets the finalizer, and nothing else
/// happens in that reconcile: its cleanup is certain before any node is
/// touched.
#[tokio::test(start_paused = true)]
async fn a_new_pool_gets_the_finalizer_before_anything_else() {
    let pool = pool();
    let ops = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": [POOL_FINALIZER]},
    ]);
    let script = Script::new().then(finalizer_patch(ops, &finalized(pool.clone())));
    let api = ScriptedApi::new(script);
    let cached = Cached {
        pools: vec![pool.clone()],
        nodes: vec![node("w1", false)],
        bootc_nodes: vec![bootc_node("w1", OLD, DaemonPhase::Idle, OLD)],
        ..Cached::default()
    };
    let action = reconcile(&api, cached, pool).await.unwrap();
    assert_eq!(action, Action::await_change());
}

/// The scene of a pool whose node runs the old image, and what the reconcile
/// must send.
fn rollout_starts() -> (Script, Cached, BootcNodePool) {
    let pool = finalized(pool());
    let cached = Cached {
        pools: vec![pool.clone()],
        nodes: vec![node("w1", false)],
        bootc_nodes: vec![bootc_node("w1", OLD, DaemonPhase::Idle, OLD)],
        ..Cached::default()
    };
    let role = namespaced_path::<Role>(OPERATOR_NAMESPACE, DAEMON_PULL_SECRETS_ROLE);
    let mut granted = Role::default();
    granted.metadata.name = Some(DAEMON_PULL_SECRETS_ROLE.to_owned());
    let events = collection_path::<Event>(Some(CLUSTER_EVENTS_NAMESPACE));
    let script = Script::new()
        .then(
            patch(&role)
                .query("fieldManager", CONTROLLER_MANAGER)
                .body_includes(json!({"rules": []}))
                .ok(&granted),
        )
        .then(
            apply_bootc_node("w1")
                .body_includes(json!({"spec": {"desiredImage": image(NEW)}}))
                .ok(&stored(21)),
        )
        .then(
            patch(&status_path::<BootcNodePool>(POOL))
                .query("fieldManager", CONTROLLER_MANAGER)
                .body_includes(json!({"status": {"targetDigest": NEW, "nodeCount": 1}}))
                .ok(&pool),
        )
        .then(
            post(&events)
                .body_includes(json!({"reason": event_reasons::ROLLOUT_STARTED}))
                .answer_with(|event| (201, event.clone())),
        );
    (script, cached, pool)
}

/// A pool whose node runs the old image: the daemons' grant is brought up
/// to date first, then the node is told the target, then the pool's status
/// says so, then the rollout's start is an Event.
#[tokio::test(start_paused = true)]
async fn a_reconcile_grants_then_writes_the_plan_then_the_status_then_the_event() {
    let (script, cached, pool) = rollout_starts();
    let api = ScriptedApi::new(script).answers_when_settled();
    let action = reconcile(&api, cached, pool).await.unwrap();
    assert_ne!(action, Action::await_change(), "a pool is reconciled again");
}

/// The scene of a deleted pool whose nodes are all back, and what its
/// cleanup must send.
fn pool_lets_go() -> (Script, Cached, BootcNodePool) {
    let pool = deleted(pool());
    let cached = Cached {
        pools: vec![pool.clone()],
        nodes: vec![node("w1", false), slot_node("w9")],
        bootc_nodes: vec![
            bootc_node("w1", NEW, DaemonPhase::Idle, NEW),
            approved(bootc_node("w9", NEW, DaemonPhase::Idle, NEW)),
        ],
        ..Cached::default()
    };
    let ops = json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": POOL_FINALIZER},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]);
    let mut gone = pool.clone();
    gone.metadata.finalizers = None;
    let script = Script::new()
        .together([
            vec![unlabels("w1").ok(&stored(11)), deletes_bootc_node("w1")],
            vec![
                uncordons("w9")
                    .body_includes(json!({"metadata": {"labels": {MANAGED_LABEL: null}}}))
                    .ok(&stored(12)),
                deletes_bootc_node("w9"),
            ],
        ])
        .then(finalizer_patch(ops, &gone));
    (script, cached, pool)
}

/// A deleted pool: each node's cordon and marks are restored and its label
/// removed before its BootcNode goes (the node in the slot uncordoned, with
/// its mark and record), and only then is the finalizer removed.
#[tokio::test(start_paused = true)]
async fn a_deleted_pool_restores_its_nodes_then_lets_go() {
    let (script, cached, pool) = pool_lets_go();
    let api = ScriptedApi::new(script).answers_when_settled();
    let action = reconcile(&api, cached, pool).await.unwrap();
    assert_eq!(action, Action::await_change());
}

/// A deleted pool whose slot node is rebooting: its approval is withdrawn
/// (in case its daemon has not begun), keeping its slot; the other node is
/// restored; and the finalizer stays (the reconcile fails, to be retried)
/// until the node is back, so that it keeps counting as disrupted.
#[tokio::test(start_paused = true)]
async fn a_deleted_pool_is_held_while_a_node_it_disrupted_reboots() {
    let pool = deleted(pool());
    let cached = Cached {
        pools: vec![pool.clone()],
        nodes: vec![node("w1", false), rebooting(slot_node("w9"))],
        bootc_nodes: vec![
            bootc_node("w1", NEW, DaemonPhase::Idle, NEW),
            approved(bootc_node("w9", NEW, DaemonPhase::Rebooting, OLD)),
        ],
        ..Cached::default()
    };
    let withdrawn = json!({"spec": {"desiredImageState": DesiredImageState::Staged}});
    let script = Script::new().together([
        vec![unlabels("w1").ok(&stored(11)), deletes_bootc_node("w1")],
        vec![
            apply_bootc_node("w9")
                .body_includes(withdrawn)
                .ok(&stored(21)),
        ],
    ]);
    let api = ScriptedApi::new(script).answers_when_settled();
    let failed = reconcile(&api, cached, pool).await.unwrap_err();
    assert!(failed.to_string().contains("w9"), "{failed}");
}

/// What the controller remembers about a pool is kept from one reconcile to
/// the next, and the cleanup of a deleted pool forgets all of it; a pool
/// recreated under the same name (another uid) starts afresh.
#[tokio::test(start_paused = true)]
async fn a_deleted_pool_leaves_nothing_remembered() {
    let states = Arc::new(PoolStates::default());
    let (script, cached, pool) = rollout_starts();
    let api = ScriptedApi::new(script).answers_when_settled();
    reconcile_remembering(&api, cached, pool, &states)
        .await
        .unwrap();
    assert_eq!(
        states.len(),
        1,
        "the pool's state is kept for its next reconcile"
    );
    // The caches have seen those writes (the state remembers them: caches
    // behind them would hold the cleanup back).
    let (script, mut cached, pool) = pool_lets_go();
    let seen = Some("100".to_owned());
    for meta in cached.bootc_nodes.iter_mut().map(|b| &mut b.metadata) {
        meta.resource_version.clone_from(&seen);
    }
    let api = ScriptedApi::new(script).answers_when_settled();
    reconcile_remembering(&api, cached, pool, &states)
        .await
        .unwrap();
    assert!(states.is_empty(), "the deleted pool is forgotten");
    let (script, cached, mut pool) = rollout_starts();
    pool.metadata.uid = Some("recreated".to_owned());
    let api = ScriptedApi::new(script).answers_when_settled();
    reconcile_remembering(&api, cached, pool, &states)
        .await
        .unwrap();
    assert_eq!(states.len(), 1, "the recreated pool has a state of its own");
}
