//! Draining a node through the Eviction API, without kubectl.
//!
//! A drain lists the pods bound to the node, skips mirror pods and pods owned
//! by a DaemonSet, asks for an eviction of each (policy/v1), retries evictions that a PodDisruptionBudget
//! refuses (429) on a schedule ([`next_look`]) that is prompt while the
//! drain is young and patient after, and waits until the pods are gone. It
//! watches the node's pods meanwhile: the last one's deletion ends the
//! drain at once (a look on the schedule saw it up to [`PROMPT_EVERY`]
//! late, 0.4 s a node on the bench's real nodes), and while every pod left
//! is only terminating (its grace, up to minutes) the drain lists nothing
//! until the watch shows one gone.
//! After the pool's `drainTimeoutSeconds` it gives up, naming the pods
//! still there.
//!
//! Like `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`,
//! it evicts everything else, pods with `emptyDir` volumes and pods no
//! controller will recreate included: protect those with a
//! PodDisruptionBudget. It also leaves the operator's own controller pods
//! alone ([`is_skipped`]): the reboot stops the one on the node and the other
//! replica (required anti-affinity) takes the lease; on a one-node cluster
//! the controller, which tolerates the cordon, comes back with the node and
//! lifts it. A refused eviction is reported once per pod (`DrainBlocked`); a
//! drain that times out is reported (`DrainTimedOut`) and retried, the node
//! staying cordoned in its slot.
//!
//! Drains run as tasks next to the reconciler: [`Drains`] keeps their phase
//! by node, cancels them when the node leaves its slot, and re-enqueues the
//! pool when one ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::BootcNodePool;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, EvictParams, ListParams, WatchEvent, WatchParams};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::actions::events::EventSink;
use rollout::{DrainPhase, event_reasons};

/// The metrics' reason for an eviction a PodDisruptionBudget refused.
pub const EVICTION_REFUSED_BY_BUDGET: &str = "PodDisruptionBudget";

/// Why one eviction did not happen.
enum EvictError {
    /// 429: a PodDisruptionBudget does not allow it now; its answer (which
    /// names the budget).
    Budget(String),
    Other(String),
}

async fn evict(client: &kube::Client, namespace: &str, name: &str) -> Result<(), EvictError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match pods.evict(name, &EvictParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 429 => {
            Err(EvictError::Budget(budget_answer(&status)))
        }
        Err(e) => Err(EvictError::Other(e.to_string())),
    }
}

/// What a refused eviction says about the budget that refused it: the
/// cause the API server gives ("The disruption budget web needs 1 healthy
/// pods and has 1 currently"), else its message.
fn budget_answer(status: &kube::core::Status) -> String {
    status
        .details
        .as_ref()
        .and_then(|d| d.causes.iter().find(|c| !c.message.is_empty()))
        .map_or_else(|| status.message.clone(), |c| c.message.clone())
}

/// Pods a drain leaves alone: mirror pods, DaemonSet pods, and the
/// controller's own pods in the operator's namespace (see
/// `api::labels::CONTROLLER_APP_NAME`).
pub fn is_skipped(pod: &Pod, operator_namespace: &str) -> bool {
    let mirror = pod
        .annotations()
        .contains_key(api::labels::MIRROR_POD_ANNOTATION);
    let daemonset = pod
        .owner_references()
        .iter()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    let controller = pod.namespace().as_deref() == Some(operator_namespace)
        && pod
            .labels()
            .get(api::labels::APP_NAME_LABEL)
            .is_some_and(|v| v == api::labels::CONTROLLER_APP_NAME);
    mirror || daemonset || controller
}

/// The first look again after a round of a drain that left pods on the
/// node, and the one after a round that evicted a pod (its end is near).
pub const FIRST_LOOK: Duration = Duration::from_millis(100);
/// The longest wait between two rounds while the drain is younger than
/// [`PROMPT_FOR`]: a budget refuses an eviction until the replacement of
/// the pod evicted before it is Ready, and an evicted pod ends with its
/// grace, seconds as a rule; a round late is that much added to every
/// node's turn (a wait that doubled up to 5 s cost about a second a node
/// in the bench's real-node section: the drain saw its pods gone late).
pub const PROMPT_EVERY: Duration = Duration::from_millis(500);
/// How long a drain stays prompt (at most 2 lists, and an eviction per pod
/// left, a second); after it, rounds slow down to [`PATIENT_EVERY`] (a
/// budget that refuses for minutes costs the API server one list and one
/// eviction per pod every 5 s, as kubectl's drain).
pub const PROMPT_FOR: Duration = Duration::from_secs(60);
/// The longest wait between two rounds of an older drain.
pub const PATIENT_EVERY: Duration = Duration::from_secs(5);

/// The wait before the next round of a drain `age` old, whose last wait
/// was `last` (None: none yet) and whose last round `evicted` a pod:
/// doubling from [`FIRST_LOOK`] up to [`PROMPT_EVERY`], and up to
/// [`PATIENT_EVERY`] once the drain is [`PROMPT_FOR`] old; back to the
/// first look after an eviction.
pub fn next_look(last: Option<Duration>, age: Duration, evicted: bool) -> Duration {
    let longest = if age < PROMPT_FOR {
        PROMPT_EVERY
    } else {
        PATIENT_EVERY
    };
    match last {
        Some(last) if !evicted => (last * 2).min(longest),
        _ => FIRST_LOOK,
    }
}

/// Drains `node`, giving up after `timeout`. The error names the pods still
/// on the node and why. `on_blocked` is called once per pod the first time a
/// PodDisruptionBudget refuses its eviction, with the pod and the budget's
/// answer.
pub async fn drain_node(
    client: &kube::Client,
    operator_namespace: &str,
    node: &str,
    timeout: Duration,
    mut on_blocked: impl FnMut(String, String),
) -> Result<(), String> {
    let mut reported: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let pods: Api<Pod> = Api::all(client.clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let mut wait = None;
    let mut gone = None;
    loop {
        let mut remaining: Vec<String> = Vec::new();
        let mut evicted = false;
        // Every pod left is terminating: nothing to ask again, only their
        // ends to see.
        let mut only_ends = true;
        match pods.list(&lp).await {
            Ok(list) => {
                let targets: Vec<&Pod> = list
                    .items
                    .iter()
                    .filter(|p| !is_skipped(p, operator_namespace))
                    .collect();
                if targets.is_empty() {
                    return Ok(());
                }
                if gone.is_none() {
                    let version = list.metadata.resource_version.as_deref();
                    gone = watch_pods(&pods, &lp, version).await;
                }
                for pod in targets {
                    let ns = pod.namespace().unwrap_or_default();
                    let name = pod.name_any();
                    if pod.metadata.deletion_timestamp.is_some() {
                        remaining.push(format!("{ns}/{name} (terminating)"));
                        continue;
                    }
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    let attempt = tokio::time::timeout(
                        left.max(Duration::from_secs(1)),
                        evict(client, &ns, &name),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(EvictError::Other("eviction request timed out".into()))
                    });
                    match attempt {
                        Ok(()) => {
                            evicted = true;
                            remaining.push(format!("{ns}/{name} (evicted, terminating)"))
                        }
                        Err(EvictError::Budget(answer)) => {
                            if reported.insert(format!("{ns}/{name}")) {
                                on_blocked(format!("{ns}/{name}"), answer);
                            }
                            only_ends = false;
                            remaining.push(format!(
                                "{ns}/{name} (eviction refused by a PodDisruptionBudget)"
                            ))
                        }
                        Err(EvictError::Other(e)) => {
                            tracing::debug!(node, pod = %format!("{ns}/{name}"), error = %e, "eviction failed");
                            only_ends = false;
                            remaining.push(format!("{ns}/{name} (eviction failed: {e})"))
                        }
                    }
                }
            }
            Err(e) => {
                only_ends = false;
                remaining.push(format!("(listing pods failed: {e})"))
            }
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(format!(
                "drain of node {node} timed out after {}s; still blocking: {}",
                timeout.as_secs(),
                remaining.join(", ")
            ));
        }
        // Only ends to see, and a watch that shows them: no look before
        // one (the patient look is a guard against a watch gone quiet).
        let next = if only_ends && gone.is_some() {
            PATIENT_EVERY
        } else {
            let next = next_look(wait, now - started, evicted);
            wait = Some(next);
            next
        };
        look_again(&mut gone, next.min(deadline - now)).await;
    }
}

/// The node's pods as they change, from a list's version on.
type PodEvents = BoxStream<'static, kube::Result<WatchEvent<Pod>>>;

/// Watches the pods of `lp`'s node from `version`; None (the drain then
/// only looks on its schedule) when the watch cannot start.
async fn watch_pods(pods: &Api<Pod>, lp: &ListParams, version: Option<&str>) -> Option<PodEvents> {
    let wp = WatchParams::default().fields(lp.field_selector.as_deref()?);
    match pods.watch(&wp, version?).await {
        Ok(events) => Some(events.boxed()),
        Err(e) => {
            tracing::debug!(error = %e, "watching the node's pods failed; looking on a schedule");
            None
        }
    }
}

/// Waits `wait`, or until `gone` reports a pod deleted. A watch that ends
/// or fails is dropped (the next round opens another) and the rest of
/// `wait` is slept.
async fn look_again(gone: &mut Option<PodEvents>, wait: Duration) {
    let until = tokio::time::Instant::now() + wait;
    if let Some(events) = gone.as_mut() {
        let deleted = async {
            loop {
                match events.next().await {
                    Some(Ok(WatchEvent::Deleted(_))) => return true,
                    Some(Ok(WatchEvent::Error(_)) | Err(_)) | None => return false,
                    Some(Ok(_)) => {}
                }
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(until) => return,
            deleted = deleted => if deleted { return },
        }
        *gone = None;
    }
    tokio::time::sleep_until(until).await;
}

/// What one drain task needs.
/// The pool as a drain names it: its events and its trigger read only the
/// name and uid. Not its status, which a pool of 20,000 nodes spells out in
/// about 100 KB: a copy per drain cost more than the drain's own requests.
fn identity(pool: &BootcNodePool) -> BootcNodePool {
    BootcNodePool {
        metadata: ObjectMeta {
            name: pool.metadata.name.clone(),
            uid: pool.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        spec: pool.spec.clone(),
        status: None,
    }
}

struct Run {
    /// The pool's identity ([`identity`]).
    pool: BootcNodePool,
    node: String,
    timeout: Duration,
    retry: bool,
    cancel: CancellationToken,
    id: u64,
}

struct Entry {
    pool: String,
    phase: DrainPhase,
    cancel: CancellationToken,
    id: u64,
}

/// The drains in flight and their outcomes, by node.
#[derive(Clone)]
pub struct Drains {
    client: kube::Client,
    /// The operator's namespace (its own pods are not evicted).
    namespace: String,
    events: EventSink,
    trigger: mpsc::UnboundedSender<ObjectRef<BootcNodePool>>,
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

impl Drains {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        events: EventSink,
        trigger: mpsc::UnboundedSender<ObjectRef<BootcNodePool>>,
    ) -> Self {
        Drains {
            client,
            namespace: namespace.to_owned(),
            events,
            trigger,
            entries: Arc::default(),
            next_id: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The phases of `pool`'s drains, by node.
    pub fn snapshot(&self, pool: &str) -> BTreeMap<String, DrainPhase> {
        self.lock()
            .iter()
            .filter(|(_, e)| e.pool == pool)
            .map(|(n, e)| (n.clone(), e.phase.clone()))
            .collect()
    }

    /// The drains of `pool` among `nodes`.
    pub fn snapshot_of(
        &self,
        pool: &str,
        nodes: &std::collections::BTreeSet<String>,
    ) -> BTreeMap<String, DrainPhase> {
        let drains = self.lock();
        nodes
            .iter()
            .filter_map(|n| {
                drains
                    .get(n)
                    .filter(|e| e.pool == pool)
                    .map(|e| (n.clone(), e.phase.clone()))
            })
            .collect()
    }

    /// Forgets (and stops) the drain of `node`, if any.
    pub fn cancel(&self, node: &str) {
        if let Some(entry) = self.lock().remove(node) {
            entry.cancel.cancel();
            if entry.phase.running() {
                tracing::info!(node, pool = %entry.pool, "drain cancelled");
            }
        }
    }

    /// Starts draining `node` for `pool` (replacing any previous drain).
    pub fn start(&self, pool: &BootcNodePool, node: &str) {
        let timeout = Duration::from_secs(
            u64::try_from(pool.spec.rollout.drain_timeout_seconds)
                .unwrap_or(1)
                .max(1),
        );
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancel = CancellationToken::new();
        let pool_name = pool.name_any();
        let retry = matches!(
            self.lock().get(node).map(|e| &e.phase),
            Some(DrainPhase::Failed { .. })
        );
        if let Some(old) = self.lock().insert(
            node.to_owned(),
            Entry {
                pool: pool_name.clone(),
                phase: DrainPhase::Running,
                cancel: cancel.clone(),
                id,
            },
        ) {
            old.cancel.cancel();
        }
        let span = tracing::info_span!(parent: None, "drain", pool = %pool_name, node = %node);
        let run = self.clone().run(Run {
            pool: identity(pool),
            node: node.to_owned(),
            timeout,
            retry,
            cancel,
            id,
        });
        tokio::spawn(tracing::Instrument::instrument(run, span));
    }

    /// One drain, from its start to its recorded outcome.
    async fn run(self, r: Run) {
        let Run {
            pool,
            node,
            timeout,
            retry,
            cancel,
            id,
        } = r;
        let pool_name = pool.name_any();
        tracing::info!(node, pool = %pool_name, ?timeout, retry, "drain started");
        // The first drain needs no event (the slot's cordon shows it); a
        // retry after a DrainFailed warning is news.
        if retry {
            let message = format!(
                "draining node {node} again (timeout {}s)",
                timeout.as_secs()
            );
            self.events
                .publish(
                    &pool,
                    Some(&node),
                    event_reasons::DRAIN_RETRIED,
                    &message,
                    false,
                )
                .await;
        }
        let started = std::time::Instant::now();
        let Some(result) = self
            .drain_reporting_blocks(&pool, &node, timeout, &cancel)
            .await
        else {
            return;
        };
        if !self.record(&node, id, &result) {
            return;
        }
        match &result {
            // No event: the approval that follows is the news, and it
            // shows in the BootcNode and the daemon's status.
            Ok(()) => {
                crate::metrics::global().drain_succeeded(started.elapsed());
                tracing::info!(node, pool = %pool_name, "drain finished");
            }
            Err(message) => {
                crate::metrics::global().drain_failed(api::Reason::DrainTimedOut);
                tracing::warn!(node, pool = %pool_name, %message, "drain failed");
                self.events
                    .publish(
                        &pool,
                        Some(&node),
                        event_reasons::DRAIN_FAILED,
                        message,
                        true,
                    )
                    .await;
            }
        }
        let _ = self.trigger.send(ObjectRef::from_obj(&pool));
    }

    /// Drains `node`, publishing a `DrainBlocked` event for each pod a
    /// PodDisruptionBudget holds; None when cancelled.
    async fn drain_reporting_blocks(
        &self,
        pool: &BootcNodePool,
        node: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Option<Result<(), String>> {
        let (blocked_tx, mut blocked_rx) = mpsc::unbounded_channel::<(String, String)>();
        let drain = drain_node(
            &self.client,
            &self.namespace,
            node,
            timeout,
            move |pod, answer| {
                let _ = blocked_tx.send((pod, answer));
            },
        );
        tokio::pin!(drain);
        loop {
            tokio::select! {
                r = &mut drain => return Some(r),
                Some((pod, answer)) = blocked_rx.recv() => {
                    crate::metrics::global().eviction_refused(EVICTION_REFUSED_BY_BUDGET);
                    tracing::info!(node, %pod, %answer, "eviction refused by a PodDisruptionBudget; retrying");
                    self.blocked(pool, node, &format!("{pod} ({answer})"));
                    let message = format!("eviction of {pod} from node {node} refused by a PodDisruptionBudget ({answer}); retrying");
                    self.events
                        .publish(pool, Some(node), event_reasons::DRAIN_BLOCKED, &message, true)
                        .await;
                }
                () = cancel.cancelled() => return None,
            }
        }
    }

    /// Records that a budget refused an eviction of the running drain of
    /// `node`, and has the pool planned again (its status names it).
    fn blocked(&self, pool: &BootcNodePool, node: &str, message: &str) {
        if let Some(entry) = self.lock().get_mut(node)
            && entry.phase.running()
        {
            entry.phase = DrainPhase::Blocked {
                message: message.to_owned(),
            };
        }
        let _ = self.trigger.send(ObjectRef::from_obj(pool));
    }

    /// Records a drain's outcome; false when the drain was replaced or
    /// cancelled meanwhile (its outcome no longer counts).
    fn record(&self, node: &str, id: u64, result: &Result<(), String>) -> bool {
        let phase = match result {
            Ok(()) => DrainPhase::Succeeded,
            Err(message) => DrainPhase::Failed {
                message: message.clone(),
                at: jiff::Timestamp::now(),
            },
        };
        match self.lock().get_mut(node) {
            Some(e) if e.id == id => {
                e.phase = phase;
                true
            }
            _ => false,
        }
    }

    /// Stops every drain (shutdown).
    pub fn cancel_all(&self) {
        for (_, e) in self.lock().drain() {
            e.cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    /// A drain keeps what its events and trigger name (they read the same
    /// from the copy), not the pool's status.
    #[test]
    fn a_drain_keeps_the_pools_identity_not_its_status() {
        let mut pool = api::test_support::PoolBuilder::new("web")
            .image("quay.io/os:1")
            .uid("uid-1")
            .build();
        pool.metadata.resource_version = Some("7".into());
        pool.status = Some(api::BootcNodePoolStatus {
            node_count: 20_000,
            ..Default::default()
        });
        let kept = identity(&pool);
        assert_eq!(kept.status, None);
        assert_eq!(
            (kept.name_any(), kept.metadata.uid.clone()),
            ("web".into(), Some("uid-1".into()))
        );
        assert_eq!(ObjectRef::from_obj(&kept), ObjectRef::from_obj(&pool));
    }

    #[test]
    fn a_refused_eviction_is_asked_again_within_half_a_second_while_the_drain_is_young() {
        let ms = Duration::from_millis;
        let schedule = |age: Duration, rounds: usize| {
            let mut last = None;
            (0..rounds)
                .map(|_| {
                    let next = next_look(last, age, false);
                    last = Some(next);
                    next
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            schedule(ms(0), 7),
            [100, 200, 400, 500, 500, 500, 500].map(ms),
            "young: prompt"
        );
        assert_eq!(
            schedule(PROMPT_FOR, 8),
            [100, 200, 400, 800, 1600, 3200, 5000, 5000].map(ms),
            "old: patient"
        );
        assert_eq!(
            next_look(Some(PROMPT_EVERY), ms(0), true),
            FIRST_LOOK,
            "an eviction made: its pod's end is looked for at once"
        );
    }

    #[test]
    fn daemonset_and_mirror_pods_are_skipped() {
        let plain = pod(serde_json::json!({"metadata": {"name": "a"}}));
        let mirror = pod(serde_json::json!({"metadata": {"name": "m",
            "annotations": {api::labels::MIRROR_POD_ANNOTATION: "x"}}}));
        let ds = pod(
            serde_json::json!({"metadata": {"name": "d", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
        );
        let rs = pod(
            serde_json::json!({"metadata": {"name": "r", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]}}),
        );
        let ns = api::labels::OPERATOR_NAMESPACE;
        let controller = |namespace: &str| {
            pod(
                serde_json::json!({"metadata": {"name": "c", "namespace": namespace,
                "labels": {api::labels::APP_NAME_LABEL: api::labels::CONTROLLER_APP_NAME}}}),
            )
        };
        assert!(!is_skipped(&plain, ns));
        assert!(is_skipped(&mirror, ns));
        assert!(is_skipped(&ds, ns));
        assert!(!is_skipped(&rs, ns));
        assert!(is_skipped(&controller(ns), ns), "the controller's own pod");
        assert!(
            !is_skipped(&controller("default"), ns),
            "a look-alike elsewhere"
        );
    }
}
