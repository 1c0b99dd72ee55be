//! Makes the planner's writes, as the planner arranged them
//! ([`rollout::order`]): wave after wave, the nodes of a wave
//! concurrently, each node's writes in order, stopping at the node's first
//! failure. It decides nothing: every field it writes is in the plan.
//! At most 16 nodes' writes are in flight at once (`WRITE_CONCURRENCY`); on
//! a failure the first error is returned only once every write already
//! started has finished, so that the cache catch-up knows what landed.
//! A plan's writes are made a stretch at a time ([`Writing`]): between two
//! stretches the reconcile looks for slots to give back, and the writes in
//! flight wait for the next stretch to be read; the writes not yet started
//! can be dropped ([`Writing::cut`]): each node's are whole or none, and
//! the second wave never starts before the first is made.
//!
//! BootcNodes and the pool status are written with server-side apply as
//! `bootc-controller` (the controller owns those fields). Nodes belong to
//! someone else: the managed label and `spec.unschedulable` are changed with
//! small merge patches, the way `kubectl cordon` does, under the same field
//! manager name. Nothing is written that the planner did not ask for, and the
//! planner asks only for differences.

use std::collections::HashMap;

use api::Node;
use api::labels::{
    CONTROLLER_MANAGER, CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION,
    DO_NOT_DISRUPT_BY_ANNOTATION, EXCLUDE_FROM_LBS_LABEL, KARPENTER_DO_NOT_DISRUPT_ANNOTATION,
    LB_EXCLUDED_BY_ANNOTATION, MANAGED_LABEL,
};
use api::node_health::LIFECYCLE_REASON;
use api::{BootcNode, BootcNodePool, BootcNodePoolStatus};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::time::Instant;

use crate::actions::drain::Drains;
use crate::actions::events::EventSink;
use rollout::{LifecycleCondition, NodePatch, Plan, Write, Writes};

#[derive(Debug, thiserror::Error)]
pub enum ActuatorError {
    #[error("applying BootcNode {name}: {source}")]
    ApplyBootcNode {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting BootcNode {name}: {source}")]
    DeleteBootcNode {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("patching Node {name}: {source}")]
    PatchNode {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing status of pool {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// An object the actuator wrote.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Written {
    PoolStatus,
    BootcNode(String),
    DeletedBootcNode(String),
    Node(String),
}

/// Performs writes for the reconciler. It keeps nothing of its own: what
/// it wrote for a pool goes to that pool's [`OwnWrites`].
#[derive(Clone)]
pub struct Actuator {
    client: kube::Client,
    drains: Drains,
    events: EventSink,
}

/// The controller's own recent writes for one pool (kept in the pool's
/// state): the resourceVersion of each and when it was made, so that the
/// reconcile can tell when its caches have not yet seen them (planning on
/// such a cache would repeat writes already made), and when the pool's
/// status was last written (for the planner's coalescing of count-only
/// changes).
#[derive(Clone, Debug, Default)]
pub struct OwnWrites {
    versions: HashMap<Written, (u64, std::time::Instant)>,
    status_at: Option<jiff::Timestamp>,
}

/// A write made: what, and the version the API server gave it.
type Made = (Written, u64);

impl OwnWrites {
    /// When this controller last wrote the pool's status.
    pub fn last_status_write(&self) -> Option<jiff::Timestamp> {
        self.status_at
    }

    fn record(&mut self, (what, rv): Made) {
        if rv == 0 {
            return;
        }
        // A deleted BootcNode no longer waits on its earlier apply.
        if let Written::DeletedBootcNode(name) = &what {
            self.versions.remove(&Written::BootcNode(name.clone()));
        }
        self.versions.insert(what, (rv, std::time::Instant::now()));
    }

    /// Have the caches caught up with these writes? `seen` gives the
    /// resourceVersion the cache holds for an object (None: absent).
    /// Entries that the cache has caught up with are forgotten.
    pub fn caught_up(&mut self, seen: impl Fn(&Written) -> Option<u64>) -> bool {
        self.versions.retain(|what, (rv, at)| {
            at.elapsed() < CATCH_UP_LIMIT
                && match (what, seen(what)) {
                    // A deleted BootcNode: caught up once the cache lost it (or holds
                    // a newer one).
                    (Written::DeletedBootcNode(_), None) => false,
                    (Written::DeletedBootcNode(_), Some(have)) => have <= *rv,
                    // A created BootcNode the cache does not have yet.
                    (Written::BootcNode(_), None) => true,
                    // A Node deleted since: nothing to wait for.
                    (_, None) => false,
                    (_, Some(have)) => have < *rv,
                }
        });
        self.versions.is_empty()
    }

    /// Is a write to `name`'s Node or BootcNode not yet in the caches (as
    /// the last [`OwnWrites::caught_up`] found)?
    pub fn waits_on(&self, name: &str) -> bool {
        self.versions.keys().any(|w| match w {
            Written::BootcNode(n) | Written::DeletedBootcNode(n) | Written::Node(n) => n == name,
            Written::PoolStatus => false,
        })
    }

    /// Is a write of the pool's status not yet in the caches?
    pub fn waits_on_status(&self) -> bool {
        self.versions.contains_key(&Written::PoolStatus)
    }
}

/// After this long a write no longer holds planning back, whatever the
/// caches say (an object created and deleted by someone else before the
/// cache saw it would otherwise block forever).
const CATCH_UP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The strategic merge patch of a Node's status that sets `conditions`
/// (merged by type: the kubelet's own conditions stay), with the pool's
/// reason and a message naming it.
fn lifecycle_body(conditions: &[LifecycleCondition], pool: &str) -> serde_json::Value {
    let now = Time(jiff::Timestamp::now());
    let conditions: Vec<serde_json::Value> = conditions
        .iter()
        .map(|c| {
            json!({
                "type": c.type_,
                "status": if c.status { "True" } else { "False" },
                "reason": LIFECYCLE_REASON,
                "message": format!("bootc-operator pool {pool}: an OS update"),
                "lastTransitionTime": now,
            })
        })
        .collect();
    json!({"status": {"conditions": conditions}})
}

/// The merge patch for a [`NodePatch`] of `pool`.
fn node_patch_body(patch: &NodePatch, pool: &str) -> serde_json::Value {
    let mut labels = serde_json::Map::new();
    let mut annotations = serde_json::Map::new();
    let mut body = json!({});
    if let Some(managed) = patch.managed {
        labels.insert(
            MANAGED_LABEL.into(),
            if managed { json!("") } else { json!(null) },
        );
    }
    if let Some(unschedulable) = patch.unschedulable {
        body["spec"] = json!({
            "unschedulable": if unschedulable { json!(true) } else { json!(null) }
        });
    }
    if let Some(mark) = patch.mark {
        let value = if mark { json!(pool) } else { json!(null) };
        annotations.insert(CORDONED_BY_ANNOTATION.into(), value);
    }
    if let Some(disrupted) = patch.disrupted {
        let value = if disrupted { json!(pool) } else { json!(null) };
        annotations.insert(DISRUPTED_BY_ANNOTATION.into(), value);
    }
    if let Some(set) = patch.do_not_disrupt {
        let (value, mark) = if set {
            (json!("true"), json!(pool))
        } else {
            (json!(null), json!(null))
        };
        annotations.insert(KARPENTER_DO_NOT_DISRUPT_ANNOTATION.into(), value);
        annotations.insert(DO_NOT_DISRUPT_BY_ANNOTATION.into(), mark);
    }
    if let Some(set) = patch.exclude_lb {
        let (value, mark) = if set {
            (json!(""), json!(pool))
        } else {
            (json!(null), json!(null))
        };
        labels.insert(EXCLUDE_FROM_LBS_LABEL.into(), value);
        annotations.insert(LB_EXCLUDED_BY_ANNOTATION.into(), mark);
    }
    if !labels.is_empty() {
        body["metadata"]["labels"] = labels.into();
    }
    if !annotations.is_empty() {
        body["metadata"]["annotations"] = annotations.into();
    }
    body
}

fn rv_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// What a write's response is read for: the object's new
/// `resourceVersion` (for the cache catch-up). Parsing the whole object back
/// would cost the controller as much as making the write.
#[derive(serde::Deserialize)]
struct Response {
    metadata: ResponseMeta,
}

#[derive(serde::Deserialize)]
struct ResponseMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// Patches the cluster-scoped `K` named `name`; returns its new version
/// (each write of the actuator goes through here, or [`patch_status_version`]).
pub async fn patch_version<K: Resource<DynamicType = ()>>(
    client: &kube::Client,
    name: &str,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
) -> Result<u64, kube::Error> {
    let req = kube::core::Request::new(K::url_path(&(), None))
        .patch(name, params, patch)
        .map_err(kube::Error::BuildRequest)?;
    send_patch(client, req).await
}

/// [`patch_version`] of the object's status subresource.
pub async fn patch_status_version<K: Resource<DynamicType = ()>>(
    client: &kube::Client,
    name: &str,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
) -> Result<u64, kube::Error> {
    let req = kube::core::Request::new(K::url_path(&(), None))
        .patch_subresource("status", name, params, patch)
        .map_err(kube::Error::BuildRequest)?;
    send_patch(client, req).await
}

/// The answer a write asks for: the object's metadata alone, which holds
/// the version it needs. The whole object back (a Node's status lists
/// its images: tens of kilobytes) cost the API server its encoding and the
/// controller its reading, on every write.
const METADATA_ONLY: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// Sends a patch; the version it made (0 when the answer has none).
async fn send_patch(
    client: &kube::Client,
    mut req: http::Request<Vec<u8>>,
) -> Result<u64, kube::Error> {
    req.extensions_mut().insert("patch");
    req.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(METADATA_ONLY),
    );
    let out: Response = client.request(req).await?;
    Ok(out
        .metadata
        .resource_version
        .and_then(|r| r.parse().ok())
        .unwrap_or(0))
}

fn apply_params() -> PatchParams {
    PatchParams::apply(CONTROLLER_MANAGER).force()
}

impl Actuator {
    pub fn new(client: kube::Client, drains: Drains, events: EventSink) -> Self {
        Actuator {
            client,
            drains,
            events,
        }
    }

    /// Makes `writes`: wave after wave, each node's in order, different
    /// nodes' concurrently (see the module note). Returns how many API
    /// writes were made; on a failure, the first error (what the other nodes'
    /// writes did stays done: every write is idempotent and replanned).
    pub async fn write(
        &self,
        pool: &BootcNodePool,
        writes: Writes,
        own: &mut OwnWrites,
    ) -> Result<usize, ActuatorError> {
        let mut writing = self.writing(pool, writes);
        writing.until(own, None).await.unwrap_or(Ok(0))
    }

    /// `writes` to be made a stretch at a time ([`Writing::until`]), as
    /// [`Actuator::write`] makes them.
    pub fn writing<'a>(&'a self, pool: &'a BootcNodePool, writes: Writes) -> Writing<'a> {
        let mut waves = writes.into_waves().into_iter();
        let nodes = waves.next().unwrap_or_default().into_iter();
        Writing {
            actuator: self,
            pool,
            waves,
            nodes,
            in_flight: FuturesUnordered::new(),
            in_flight_nodes: std::collections::BTreeSet::new(),
            count: 0,
            first_error: None,
        }
    }

    /// Makes one node's writes in order, up to the first failure: the
    /// writes made (for the catch-up), and how many or the failure.
    async fn write_in_order(
        &self,
        pool: &BootcNodePool,
        writes: Vec<Write>,
    ) -> (Vec<Made>, Result<usize, ActuatorError>) {
        let (mut made, mut count) = (Vec::new(), 0);
        for w in &writes {
            match self.write_one(pool, w).await {
                Ok((n, record)) => {
                    count += n;
                    made.extend(record);
                }
                Err(e) => return (made, Err(e)),
            }
        }
        (made, Ok(count))
    }

    /// Sets `conditions` in the Node's status (one status patch); a refusal
    /// is logged, not an error: the conditions only tell, the rollout goes
    /// on.
    async fn set_conditions(
        &self,
        pool: &BootcNodePool,
        name: &str,
        conditions: &[LifecycleCondition],
    ) -> Result<(usize, Option<Made>), ActuatorError> {
        let body = lifecycle_body(conditions, &pool.name_any());
        let params = PatchParams {
            field_manager: Some(CONTROLLER_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let patch = Patch::Strategic(body);
        let made = match patch_status_version::<Node>(&self.client, name, &params, &patch).await {
            Ok(version) => Some((Written::Node(name.to_owned()), version)),
            // The node is gone: nothing to tell it.
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            // No grant on nodes/status, or the admission policy refused.
            Err(kube::Error::Api(s)) if s.code == 403 => {
                tracing::warn!(pool = %pool.name_any(), node = %name, error = %s.message,
                    "Node lifecycle conditions refused: apply deploy/optional/node-lifecycle-conditions, or run without --node-lifecycle-conditions");
                return Ok((0, None));
            }
            Err(source) => {
                return Err(ActuatorError::PatchNode {
                    name: name.to_owned(),
                    source,
                });
            }
        };
        tracing::info!(pool = %pool.name_any(), node = %name, ?conditions, "set Node lifecycle conditions");
        Ok((1, made))
    }

    /// Makes one write; returns how many API writes it took (0 or 1) and
    /// the version it made, if any.
    async fn write_one(
        &self,
        pool: &BootcNodePool,
        w: &Write,
    ) -> Result<(usize, Option<Made>), ActuatorError> {
        let bns: Api<BootcNode> = Api::all(self.client.clone());
        let (mut count, mut made) = (0, None);
        match w {
            Write::ApplyBootcNode(bn) => {
                let name = bn.name.clone();
                let body = json!({
                    "apiVersion": BootcNode::api_version(&()),
                    "kind": BootcNode::kind(&()),
                    "metadata": {
                        "name": name,
                        "annotations": bn.annotations,
                        "ownerReferences": [&*bn.owner],
                    },
                    "spec": bn.spec,
                });
                let version = patch_version::<BootcNode>(
                    &self.client,
                    &name,
                    &apply_params(),
                    &Patch::Apply(body),
                )
                .await
                .map_err(|source| ActuatorError::ApplyBootcNode {
                    name: name.clone(),
                    source,
                })?;
                made = Some((Written::BootcNode(name.clone()), version));
                tracing::debug!(pool = %pool.name_any(), bootcnode = %name, "applied BootcNode");
                count += 1;
            }
            Write::DeleteBootcNode { name } => {
                match bns.delete(name, &DeleteParams::default()).await {
                    Ok(either) => {
                        // Caught up once the cache has lost it (a created
                        // BootcNode the cache lacks would wait instead).
                        if let Some(obj) = either.left() {
                            made = Some((
                                Written::DeletedBootcNode(name.clone()),
                                rv_of(&obj.metadata),
                            ));
                        }
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(source) => {
                        return Err(ActuatorError::DeleteBootcNode {
                            name: name.clone(),
                            source,
                        });
                    }
                }
                tracing::info!(pool = %pool.name_any(), bootcnode = %name, "deleted BootcNode");
                count += 1;
            }
            Write::PatchNode { name, patch } => {
                let body = node_patch_body(patch, &pool.name_any());
                let params = PatchParams {
                    field_manager: Some(CONTROLLER_MANAGER.to_owned()),
                    ..PatchParams::default()
                };
                match patch_version::<Node>(&self.client, name, &params, &Patch::Merge(body)).await
                {
                    Ok(version) => made = Some((Written::Node(name.clone()), version)),
                    // The node is gone: nothing to restore on it.
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(source) => {
                        return Err(ActuatorError::PatchNode {
                            name: name.clone(),
                            source,
                        });
                    }
                }
                tracing::info!(pool = %pool.name_any(), node = %name, ?patch, "patched Node");
                count += 1;
            }
            Write::PatchNodeConditions { name, conditions } => {
                return self.set_conditions(pool, name, conditions).await;
            }
            Write::StartDrain { node } => self.drains.start(pool, node),
            Write::CancelDrain { node } => self.drains.cancel(node),
        }
        Ok((count, made))
    }

    /// Writes the pool's status through the status subresource.
    pub async fn write_status(
        &self,
        pool: &BootcNodePool,
        status: &BootcNodePoolStatus,
        own: &mut OwnWrites,
    ) -> Result<(), ActuatorError> {
        let name = pool.name_any();
        let body = json!({
            "apiVersion": BootcNodePool::api_version(&()),
            "kind": BootcNodePool::kind(&()),
            "status": status,
        });
        let version = patch_status_version::<BootcNodePool>(
            &self.client,
            &name,
            &apply_params(),
            &Patch::Apply(body),
        )
        .await
        .map_err(|source| ActuatorError::Status {
            name: name.clone(),
            source,
        })?;
        own.record((Written::PoolStatus, version));
        own.status_at = Some(jiff::Timestamp::now());
        Ok(())
    }

    /// Ends a plan whose writes are made: its status, then its events.
    /// Returns how many API writes were made.
    pub async fn conclude(
        &self,
        pool: &BootcNodePool,
        plan: &Plan,
        own: &mut OwnWrites,
    ) -> Result<usize, ActuatorError> {
        let mut count = 0;
        if let Some(status) = &plan.status {
            self.write_status(pool, status, own).await?;
            count += 1;
        }
        for ev in &plan.events {
            self.events
                .publish(pool, ev.node.as_deref(), ev.reason, &ev.message, ev.warning)
                .await;
        }
        Ok(count)
    }
}

/// One node's writes being made: the node, the writes made (for the
/// catch-up), and how many or the failure.
type NodeWrites<'a> = BoxFuture<'a, (Option<String>, Vec<Made>, Result<usize, ActuatorError>)>;

/// A plan's writes being made ([`Actuator::writing`]): each node's writes
/// are taken up as one of the places in flight frees up, and a wave starts
/// once every write of the one before it is made.
pub struct Writing<'a> {
    actuator: &'a Actuator,
    pool: &'a BootcNodePool,
    waves: std::array::IntoIter<Vec<Vec<Write>>, 2>,
    /// The nodes of the current wave not yet taken up.
    nodes: std::vec::IntoIter<Vec<Write>>,
    in_flight: FuturesUnordered<NodeWrites<'a>>,
    /// The nodes whose writes are in flight.
    in_flight_nodes: std::collections::BTreeSet<String>,
    count: usize,
    first_error: Option<ActuatorError>,
}

impl Writing<'_> {
    /// Are some of the node's writes in flight or still to be made?
    pub fn pending(&self, node: &str) -> bool {
        let of = |writes: &Vec<Write>| writes.first().is_some_and(|w| w.node() == node);
        self.in_flight_nodes.contains(node)
            || self.nodes.as_slice().iter().any(of)
            || self.waves.as_slice().iter().flatten().any(of)
    }

    /// How many API writes are made so far.
    pub fn made(&self) -> usize {
        self.count
    }

    /// Drops the writes not yet started (the next plan decides them
    /// again); those in flight are seen through by [`Writing::until`].
    /// Returns how many nodes' writes were dropped.
    pub fn cut(&mut self) -> usize {
        self.nodes.by_ref().count() + self.waves.by_ref().map(|wave| wave.len()).sum::<usize>()
    }

    /// Makes writes until all are made (Some: how many API writes, or the
    /// first error once every write started has finished) or until `until`
    /// (None: the writes in flight wait, unpolled, for the next call).
    pub async fn until(
        &mut self,
        own: &mut OwnWrites,
        until: Option<Instant>,
    ) -> Option<Result<usize, ActuatorError>> {
        loop {
            // A node's writes are taken up only when a place frees up, and
            // dropped once made: a pool of 20,000 new nodes held a made
            // future (about 2.4 KiB) and the plan's writes (1.5 KiB) for
            // each node while the BootcNode cache filled. Every started
            // write is seen through (and recorded for the cache catch-up)
            // before an error is returned: a write dropped in flight may
            // have landed unrecorded.
            while self.in_flight.len() < WRITE_CONCURRENCY {
                let Some(one_node) = self.nodes.next() else {
                    break;
                };
                let name = one_node.first().map(|w| w.node().to_owned());
                self.in_flight_nodes.extend(name.clone());
                let actuator = self.actuator;
                let pool = self.pool;
                self.in_flight.push(Box::pin(async move {
                    let (made, result) = actuator.write_in_order(pool, one_node).await;
                    (name, made, result)
                }));
            }
            let next = match until {
                Some(until) => tokio::select! {
                    next = self.in_flight.next() => next,
                    () = tokio::time::sleep_until(until.into()) => return None,
                },
                None => self.in_flight.next().await,
            };
            if let Some((name, records, m)) = next {
                if let Some(name) = name {
                    self.in_flight_nodes.remove(&name);
                }
                records.into_iter().for_each(|r| own.record(r));
                match m {
                    Ok(n) => self.count += n,
                    Err(e) => self.first_error = self.first_error.take().or(Some(e)),
                }
                continue;
            }
            // The wave is made: the next one, unless a write failed.
            if let Some(e) = self.first_error.take() {
                return Some(Err(e));
            }
            match self.waves.next() {
                Some(wave) => self.nodes = wave.into_iter(),
                None => return Some(Ok(self.count)),
            }
        }
    }
}

/// How many nodes' writes run at once: enough to take a wave of slots in one
/// round trip's time at scale, few enough not to crowd the API server.
const WRITE_CONCURRENCY: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of the patch is the plan's: the actuator adds nothing
    /// (an uncordon without the mark's removal leaves the mark alone).
    #[test]
    fn a_node_patch_is_written_as_planned() {
        let ours = CORDONED_BY_ANNOTATION;
        let record = DISRUPTED_BY_ANNOTATION;
        // (what, patch, merge patch)
        let rows = [
            (
                "slot cordon",
                NodePatch::SLOT_CORDON,
                json!({"spec": {"unschedulable": true},
                       "metadata": {"annotations": {ours: "p", record: "p"}}}),
            ),
            (
                "uncordon",
                NodePatch::UNCORDON,
                json!({"spec": {"unschedulable": null},
                       "metadata": {"annotations": {ours: null, record: null}}}),
            ),
            (
                "an uncordon that keeps the mark",
                NodePatch {
                    unschedulable: Some(false),
                    ..NodePatch::default()
                },
                json!({"spec": {"unschedulable": null}}),
            ),
            (
                "a slot cordon with Karpenter's do-not-disrupt",
                NodePatch {
                    do_not_disrupt: Some(true),
                    ..NodePatch::record(true)
                },
                json!({"metadata": {"annotations": {record: "p",
                    KARPENTER_DO_NOT_DISRUPT_ANNOTATION: "true", DO_NOT_DISRUPT_BY_ANNOTATION: "p"}}}),
            ),
            (
                "its removal",
                NodePatch {
                    do_not_disrupt: Some(false),
                    ..NodePatch::record(false)
                },
                json!({"metadata": {"annotations": {record: null,
                    KARPENTER_DO_NOT_DISRUPT_ANNOTATION: null, DO_NOT_DISRUPT_BY_ANNOTATION: null}}}),
            ),
            (
                "record only, label off",
                NodePatch {
                    managed: Some(false),
                    ..NodePatch::record(true)
                },
                json!({"metadata": {"labels": {MANAGED_LABEL: null},
                                    "annotations": {record: "p"}}}),
            ),
        ];
        for (what, patch, want) in rows {
            assert_eq!(node_patch_body(&patch, "p"), want, "{what}");
        }
    }
}
