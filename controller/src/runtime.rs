//! The controller runtime: caches, watches and their mapping to pools
//! (here, [`watches`](self) and `wire`), each pool's objects ([`members`],
//! [`selection`]), the reconcile (`reconcile`: gather, plan, act, record)
//! and what it remembers per pool ([`pool_state`]), pacing ([`pace`]),
//! leader election ([`lease`]), `/healthz` ([`liveness`]) and `/readyz`
//! ([`synced`]), and the HTTP endpoints, served by hyper ([`endpoints`]):
//! those two plain, `/metrics` for Prometheus only ([`secure_metrics`]).
//!
//! The top layer: may import [`crate::actions`], [`crate::target`],
//! [`crate::metrics`], `rollout` and `api`; nothing imports it but the
//! crate's entry points.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::Node;
use api::labels::OPERATOR_NAMESPACE;
use api::{BootcNode, BootcNodePool};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::actions::actuator::{Actuator, ActuatorError};
use crate::actions::drain::Drains;
use crate::actions::events::EventSink;
use crate::cache::ByName;
use crate::target::{DigestOnly, Resolve};
use lease::LeaseConfig;
use liveness::Liveness;
use members::Changes;
use pool_state::PoolStates;
use reconcile::{Ctx, error_policy, reconcile};

use synced::{Cache, Synced};

pub mod endpoints;
pub mod lease;
pub mod liveness;
pub mod members;
mod once;
pub mod pace;
pub mod pool_state;
mod reconcile;
pub mod secure_metrics;
pub mod selection;
pub mod synced;
mod watches;
mod wire;

pub use once::{Cached, reconcile_once};

/// How often every pool is reconciled even without events (`--resync-seconds`).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(600);

/// How the controller runs.
#[derive(Clone)]
pub struct Options {
    /// Leader election; None runs without (a single replica, or tests).
    pub lease: Option<LeaseConfig>,
    /// Serve /healthz and /readyz here, plain.
    pub health_addr: Option<SocketAddr>,
    /// Serve /metrics here, over HTTPS, to permitted tokens only
    /// ([`secure_metrics`]).
    pub metrics_addr: Option<SocketAddr>,
    /// `tls.crt` and `tls.key` for /metrics; without them, self-signed.
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Where events go and pull secrets live.
    pub namespace: String,
    /// This replica's name (events, lease).
    pub instance: String,
    /// Target resolution (tag references need a registry-backed resolver).
    pub resolver: Arc<dyn Resolve>,
    /// Reconcile every pool at least this often even without events.
    pub resync: Duration,
    /// A reconcile running this long makes `/healthz` fail (see
    /// [`crate::runtime::liveness`]).
    pub wedged_after: Duration,
    /// The stuck deadlines (see [`rollout::reboot::stuck`]).
    pub deadlines: rollout::reboot::stuck::Deadlines,
    /// Set Kubernetes' Node lifecycle conditions on nodes in slots (see
    /// [`rollout::reboot::lifecycle`]; off by default).
    pub node_lifecycle_conditions: bool,
    /// How often each pool is planned ([`pace`]).
    pub pace: pace::Pace,
    /// The Prometheus endpoints pools' alert gates may name (the admin's,
    /// `--alert-gate-endpoint`; see [`crate::gates::alerts`]).
    pub alert_endpoints: crate::gates::alerts::AlertEndpoints,
    /// The Alertmanagers pools' silences may name (the admin's,
    /// `--alertmanager-endpoint`; see [`crate::actions::silences`]).
    pub alertmanager_endpoints: crate::actions::silences::AlertmanagerEndpoints,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("lease", &self.lease)
            .field("health_addr", &self.health_addr)
            .field("metrics_addr", &self.metrics_addr)
            .field("namespace", &self.namespace)
            .field("instance", &self.instance)
            .finish()
    }
}

impl Options {
    /// Defaults: no leader election, no health server, digest refs only.
    pub fn new(instance: &str) -> Self {
        Options {
            lease: None,
            health_addr: None,
            metrics_addr: None,
            metrics_cert_dir: None,
            namespace: OPERATOR_NAMESPACE.to_owned(),
            instance: instance.to_owned(),
            resolver: Arc::new(DigestOnly),
            resync: DEFAULT_RESYNC,
            wedged_after: crate::runtime::liveness::WEDGED_AFTER,
            deadlines: rollout::reboot::stuck::Deadlines::default(),
            node_lifecycle_conditions: false,
            pace: pace::Pace::default(),
            alert_endpoints: crate::gates::alerts::AlertEndpoints::default(),
            alertmanager_endpoints: crate::actions::silences::AlertmanagerEndpoints::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Actuator(#[from] ActuatorError),
    #[error("finalizer: {0}")]
    Finalizer(String),
    #[error("caches have not yet seen the controller's own last writes; cleanup retried")]
    CachesBehind,
    #[error("cleanup waits for nodes the pool disrupted to be back, or finishing their update (spec.onDelete: Finish): {}", nodes.join(", "))]
    CleanupWaiting { nodes: Vec<String> },
    #[error(transparent)]
    Metrics(#[from] secure_metrics::MetricsError),
    #[error("lost the leader lease")]
    LeaseLost,
    #[error("starting the lease renewal thread: {0}")]
    LeaseThread(#[source] std::io::Error),
    #[error("building a client: {0}")]
    Client(#[source] kube::Error),
    #[error("answering a retry request: {0}")]
    Retry(#[source] kube::Error),
    #[error("health server on {addr}: {source}")]
    Health {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A bounded name of the error's kind, for the metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Actuator(_) => "Write",
            Error::Finalizer(_) => "Finalizer",
            Error::CachesBehind => "CachesBehind",
            Error::CleanupWaiting { .. } => "CleanupWaiting",
            Error::LeaseLost => "LeaseLost",
            Error::LeaseThread(_) => "LeaseThread",
            Error::Client(_) => "Client",
            Error::Retry(_) => "Retry",
            Error::Health { .. } => "Health",
            Error::Metrics(_) => "Metrics",
        }
    }
}

/// The Secret's version as the nodes are told it (`<uid>/<resourceVersion>`;
/// one definition, shared with the daemon, which checks it after its GET).
pub fn secret_version(secret: &Secret) -> String {
    api::pull_secret::version(&secret.metadata).unwrap_or_default()
}

/// What a Node event must change to matter: labels, Ready, unschedulable,
/// holds.
pub fn node_fingerprint(node: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    node.labels().hash(&mut h);
    api::node_health::holds(node).for_each(|hold| hold.hash(&mut h));
    api::node_health::is_cordoned(node).hash(&mut h);
    let ready = api::node_health::ready_condition(node).map(|c| c.status.clone());
    ready.hash(&mut h);
    node.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

fn secret_fingerprint(secret: &Secret) -> u64 {
    let mut h = DefaultHasher::new();
    secret_version(secret).hash(&mut h);
    h.finish()
}

/// What a pool event must change to matter to the other pools: its spec
/// (conflicts, dependencies), its deletion, whether it is up to date (the
/// pools that depend on it).
fn pool_fingerprint(pool: &BootcNodePool) -> u64 {
    let mut h = DefaultHasher::new();
    pool.metadata.generation.hash(&mut h);
    pool.metadata.deletion_timestamp.is_some().hash(&mut h);
    pool.up_to_date().hash(&mut h);
    h.finish()
}

/// Passes on objects whose `fingerprint` changed, and every deletion.
fn changed_only<O, K, S>(
    events: S,
    fingerprint: fn(&K) -> u64,
) -> impl Stream<Item = Result<O, watcher::Error>> + Send + 'static
where
    O: std::borrow::Borrow<K> + Send + 'static,
    K: Resource + 'static,
    S: Stream<Item = Result<watcher::Event<O>, watcher::Error>> + Send + 'static,
{
    let mut seen: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    events.filter_map(move |ev| {
        let out = match ev {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let o: &K = obj.borrow();
                let key = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
                let fp = fingerprint(o);
                if seen.insert(key, fp) == Some(fp) {
                    None
                } else {
                    Some(Ok(obj))
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let o: &K = obj.borrow();
                let key = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
                seen.remove(&key);
                Some(Ok(obj))
            }
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        };
        std::future::ready(out)
    })
}

/// Logs and drops a watch stream's errors. Each watcher backs off on its own
/// (`api::watch::backoff`); an error that reached the controller would make
/// it back off *every* trigger stream at once, with kube's default of up to a
/// minute, and the caches fed by those streams would stand still meanwhile.
fn log_errors<K, S>(
    events: S,
    watch: &'static str,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Send + 'static,
    S: Stream<Item = Result<K, watcher::Error>> + Send + 'static,
{
    events.filter_map(move |ev| {
        std::future::ready(match ev {
            Ok(obj) => Some(Ok(obj)),
            Err(error) => {
                tracing::warn!(watch, %error, "watch failed; retrying");
                None
            }
        })
    })
}

/// What the Node cache keeps of what [`api::Node`] reads. The Node watch
/// decodes no more than this (`wire::NodeWire`), and its conversion ends
/// here all the same (public for the benchmark, which prints what a real
/// Node costs once trimmed).
pub fn strip_node(node: &mut Node) {
    // None, not cleared: a cleared Vec keeps its buffer.
    node.metadata.managed_fields = None;
    node.annotations_mut()
        .retain(|k, _| node_annotation_kept(k));
}

/// What the BootcNode cache keeps: all the controller reads, that is all
/// but managed fields (not decoded: `wire::BootcNodeWire`) and the node's
/// record of its updates (`status.history`, up to ten entries for people,
/// which `kubectl bootc history` reads from the API; in the cache, about a
/// KiB per node for nothing).
pub fn strip_bootc_node(bn: &mut BootcNode) {
    bn.metadata.managed_fields = None;
    if let Some(status) = bn.status.as_mut() {
        status.history = Vec::new();
    }
}

/// The Node annotations the cache keeps: our cordon and disruption marks,
/// Karpenter's do-not-disrupt and our mark on it, our mark on the load
/// balancers' exclusion label, and holds. The others are
/// dropped to save memory.
fn node_annotation_kept(key: &str) -> bool {
    key == api::labels::CORDONED_BY_ANNOTATION
        || key == api::labels::DISRUPTED_BY_ANNOTATION
        || key == api::labels::KARPENTER_DO_NOT_DISRUPT_ANNOTATION
        || key == api::labels::DO_NOT_DISRUPT_BY_ANNOTATION
        || key == api::labels::LB_EXCLUDED_BY_ANNOTATION
        || key.starts_with(api::labels::HOLD_ANNOTATION_PREFIX)
}

/// The cache keeps a Secret's data and its pool opt-in, nothing else of
/// its metadata's maps.
fn strip_secret(secret: &mut Secret) {
    secret.metadata.managed_fields = None;
    secret
        .annotations_mut()
        .retain(|k, _| k == api::labels::POOLS_ANNOTATION);
}

/// The pools a Node event concerns: those whose selector matches it and the
/// owner of its BootcNode.
fn pools_for_node(
    node: &Node,
    pools: &Store<BootcNodePool>,
    bootc_nodes: &ByName<BootcNode>,
) -> Vec<ObjectRef<BootcNodePool>> {
    let mut out: Vec<ObjectRef<BootcNodePool>> = pools
        .state()
        .iter()
        .filter(|p| rollout::selects(p, node))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect();
    if let Some(bn) = bootc_nodes.get(&node.name_any())
        && let Some((owner, _)) = rollout::owner_pool(&bn)
    {
        out.push(ObjectRef::new(&owner));
    }
    // The pool that disrupted it, until it is back.
    if let Some(pool) = api::node_health::disrupted_by(node) {
        out.push(ObjectRef::new(pool));
    }
    out
}

fn pools_for_secret(
    secret: &Secret,
    pools: &Store<BootcNodePool>,
) -> Vec<ObjectRef<BootcNodePool>> {
    let ns = secret.namespace().unwrap_or_default();
    let name = secret.name_any();
    pools
        .state()
        .iter()
        .filter(|p| {
            p.spec
                .pull_secret_ref
                .as_ref()
                .is_some_and(|r| r.name == name && r.namespace == ns)
        })
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Serves /healthz (ok unless the reconcile loop is wedged, see
/// [`crate::runtime::liveness`]) and /readyz (ok once `ready`), plain.
async fn serve_health(
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    liveness: Arc<Liveness>,
    stop: CancellationToken,
) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Health { addr, source })?;
    tracing::info!(%addr, "health endpoints listening");
    let service = endpoints::health_service(ready, liveness);
    endpoints::serve("health", listener, None, service, stop).await;
    Ok(())
}

/// Starts the /metrics server of `options.metrics_addr`, if any.
fn start_metrics(
    options: &Options,
    client: &kube::Client,
    shutdown: &CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>, Error> {
    let Some(addr) = options.metrics_addr else {
        return Ok(None);
    };
    let names = vec![options.instance.clone(), "localhost".to_owned()];
    let acceptor = secure_metrics::acceptor(options.metrics_cert_dir.as_deref(), &names)?;
    let reviewer = Arc::new(secure_metrics::Reviewer::new(client.clone()));
    let stop = shutdown.clone();
    Ok(Some(tokio::spawn(async move {
        if let Err(error) = secure_metrics::serve(addr, acceptor, reviewer, stop).await {
            tracing::error!(%error, "metrics server failed");
        }
    })))
}

/// Runs the controller until `shutdown` is cancelled (or the lease is lost).
/// With leader election it waits for the lease first and releases it on the
/// way out.
///
/// Takes a `Config` rather than a client: drains need a client of their own
/// without kube's default retry of 429 responses (a PodDisruptionBudget's
/// refusal must come back to the drain loop, not be retried for minutes).
pub async fn run(
    config: kube::Config,
    options: Options,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let client = counted_client(config.clone())?;
    let lease_config = config.clone();
    let mut drain_config = config;
    drain_config.default_retry = false;
    let drain_client = counted_client(drain_config)?;
    let ready = Arc::new(AtomicBool::new(false));
    let liveness = Arc::new(Liveness::new(options.wedged_after));
    let mut servers: Vec<_> = options
        .health_addr
        .into_iter()
        .map(|addr| {
            let (ready, live, stop) = (ready.clone(), liveness.clone(), shutdown.clone());
            tokio::spawn(async move {
                if let Err(error) = serve_health(addr, ready, live, stop).await {
                    tracing::error!(%error, "health server failed");
                }
            })
        })
        .collect();
    servers.extend(start_metrics(&options, &client, &shutdown)?);
    let metrics = crate::metrics::global();
    metrics.set_leader(false);

    let lost = CancellationToken::new();
    let renewal_stop = shutdown.child_token();
    let mut renewal = None;
    if let Some(cfg) = &options.lease {
        // A standby replica is ready: it is doing what it should.
        ready.store(true, Ordering::Relaxed);
        let Some(renewed) = lease::acquire(&client, cfg, &shutdown).await else {
            return Ok(());
        };
        ready.store(false, Ordering::Relaxed);
        renewal = Some(
            lease::keep_on_own_thread(
                move || counted_client(lease_config).map_err(|e| e.to_string()),
                cfg.clone(),
                renewal_stop.clone(),
                lost.clone(),
                renewed,
            )
            .map_err(Error::LeaseThread)?,
        );
    }

    metrics.set_leader(true);
    let result = run_controller(
        client.clone(),
        drain_client,
        &options,
        &shutdown,
        &lost,
        ready,
        liveness,
    )
    .await;

    // The renewals stop before the release, so that none renews it after.
    renewal_stop.cancel();
    if let Some(thread) = renewal {
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
    // A lost lease is not ours to release; a release must not hold up the
    // exit either.
    if let Some(cfg) = &options.lease
        && !lost.is_cancelled()
    {
        match tokio::time::timeout(cfg.renew_every, lease::release(&client, cfg)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "could not release the lease"),
            Err(_) => tracing::warn!("could not release the lease in time"),
        }
    }
    metrics.set_leader(false);
    for server in servers {
        server.abort();
    }
    if lost.is_cancelled() && !shutdown.is_cancelled() {
        return Err(Error::LeaseLost);
    }
    result
}

/// A client whose requests are counted in the metrics.
fn counted_client(config: kube::Config) -> Result<kube::Client, Error> {
    let builder = kube::client::ClientBuilder::try_from(config).map_err(Error::Client)?;
    Ok(builder
        .with_layer(&crate::metrics::request_counter())
        .build())
}

/// What the reconciles share with the rest of the runtime.
struct Shared {
    drains: Drains,
    states: Arc<PoolStates>,
    changes: Arc<Changes>,
    liveness: Arc<Liveness>,
    synced: Arc<Synced>,
}

/// The reconciles' context: the running controller's, and
/// [`reconcile_once`]'s.
fn context(
    client: kube::Client,
    options: &Options,
    caches: reconcile::Caches,
    shared: Shared,
) -> Ctx {
    let events = EventSink::new(client.clone(), &options.instance);
    Ctx {
        client: client.clone(),
        daemon_secrets: crate::actions::daemon_secrets::Grant::new(
            client.clone(),
            &options.namespace,
            caches.pools.clone(),
            caches.bootc_nodes.clone(),
            caches.secrets.clone(),
        ),
        caches,
        states: shared.states,
        changes: shared.changes,
        actuator: Actuator::new(client.clone(), shared.drains.clone(), events),
        drains: shared.drains,
        resolver: options.resolver.clone(),
        gatekeeper: crate::gates::Gatekeeper::new(client, options.alert_endpoints.clone()),
        silencer: crate::actions::silences::Silencer::new(options.alertmanager_endpoints.clone()),
        tuning: reconcile::Tuning {
            namespace: options.namespace.clone(),
            resync: options.resync,
            deadlines: options.deadlines,
            node_lifecycle_conditions: options.node_lifecycle_conditions,
            pace: options.pace,
        },
        liveness: shared.liveness,
        synced: shared.synced,
    }
}

async fn run_controller(
    client: kube::Client,
    drain_client: kube::Client,
    options: &Options,
    shutdown: &CancellationToken,
    lost: &CancellationToken,
    ready: Arc<AtomicBool>,
    liveness: Arc<Liveness>,
) -> Result<(), Error> {
    let events = EventSink::new(client.clone(), &options.instance);
    let (trigger_tx, trigger_rx) = mpsc::unbounded_channel::<ObjectRef<BootcNodePool>>();
    let drains = Drains::new(drain_client, &options.namespace, events, trigger_tx);

    let synced = Synced::new();
    let changes = Arc::new(Changes::default());
    let (bn_store, bn_stream) = watches::bootc_nodes(&client, &synced, &changes);
    let (node_store, node_stream) = watches::nodes(&client, &synced, &changes);
    let (secret_store, secret_stream) = watches::secrets(&client, &options.namespace, &synced);
    let (fleet_store, fleet_stream) = watches::fleet_switch(&client, &options.namespace, &synced);
    let (pool_store, pool_trigger) = watches::pools(&client, &synced);
    let pool_stream = watches::pool_changes(&client);
    let drain_done = watches::drain_done(trigger_rx);

    let caches = reconcile::Caches {
        pools: pool_store.clone(),
        nodes: node_store,
        bootc_nodes: bn_store.clone(),
        secrets: secret_store,
        fleet: fleet_store,
    };
    let shared = Shared {
        drains: drains.clone(),
        states: Arc::default(),
        changes: changes.clone(),
        liveness,
        synced: synced.clone(),
    };
    let ctx = Arc::new(context(client, options, caches, shared));
    let ready_task = ready_when_synced(synced.clone(), ready);
    let _daemon_secrets = ctx.daemon_secrets.keep();
    tracing::info!("controller starting");
    let (p1, p2, p3) = (pool_store.clone(), pool_store.clone(), pool_store.clone());
    let p4 = pool_store.clone();
    // No error reaches the controller (see `log_errors`); its own backoff of
    // the trigger streams is kept as short as the watchers' all the same.
    let running = Controller::for_stream(pool_trigger, pool_store)
        .trigger_backoff(api::watch::backoff())
        // A trigger per reconcile, not per event (see `Changes::arm`).
        .reconcile_on(watches::triggers(
            bn_stream,
            watches::pool_of,
            changes.clone(),
        ))
        .reconcile_on(watches::triggers(
            node_stream,
            move |n: &Arc<Node>| pools_for_node(n, &p1, &bn_store),
            changes.clone(),
        ))
        .watches_stream(secret_stream, move |s: Secret| pools_for_secret(&s, &p2))
        // A pool appearing, changing its selector or going away can change
        // every other pool's conflicts.
        .watches_stream(pool_stream, move |_: BootcNodePool| {
            watches::every_pool(&p3)
        })
        // The fleet's switch concerns every pool.
        .watches_stream(fleet_stream, move |_: Namespace| watches::every_pool(&p4))
        .reconcile_on(drain_done)
        .graceful_shutdown_on(either_cancelled(shutdown.clone(), lost.clone()))
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(error) = res {
                tracing::debug!(%error, "controller event");
            }
        });
    // A lost lease stops everything at once: a graceful shutdown would wait
    // for in-flight reconciles, which may hang on an unreachable API server
    // while a standby takes over.
    tokio::select! {
        () = running => {}
        () = lost.cancelled() => tracing::error!("lease lost: in-flight reconciles abandoned"),
        () = shutdown_before_sync(shutdown.clone(), synced) => {
            tracing::info!("shut down before the caches synced");
        }
    }
    drains.cancel_all();
    ready_task.abort();
    tracing::info!("controller stopped");
    Ok(())
}

/// Sets `ready` once every cache has listed its objects.
fn ready_when_synced(synced: Arc<Synced>, ready: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        synced.wait(&Cache::ALL).await;
        ready.store(true, Ordering::Relaxed);
        tracing::info!("caches synced; ready");
    })
}

/// Completes when either token is cancelled.
async fn either_cancelled(a: CancellationToken, b: CancellationToken) {
    tokio::select! {
        () = a.cancelled() => {}
        () = b.cancelled() => {}
    }
}

/// Completes on a shutdown that comes before the pool cache has synced, and
/// never otherwise. Such a shutdown is not graceful: kube's runner holds
/// reconciles until that cache is ready, and the shutdown has cut the
/// stream that would make it ready, so it would wait for ever. Nothing can
/// be in flight yet.
async fn shutdown_before_sync(shutdown: CancellationToken, synced: Arc<Synced>) {
    shutdown.cancelled().await;
    if !synced.all(&[Cache::Pools]) {
        return;
    }
    std::future::pending::<()>().await;
}

/// Drains by pool name, for tests and diagnostics.
pub type DrainSnapshot = BTreeMap<String, rollout::DrainPhase>;

#[cfg(test)]
mod tests {
    use super::*;
    use api::test_support::NodeBuilder;
    use reconcile::usable_secret;

    fn node(labels: &[(&str, &str)], ready: &str, heartbeat: i64, unschedulable: bool) -> Node {
        labels
            .iter()
            .fold(NodeBuilder::new("n"), |n, (k, v)| n.label(k, v))
            .unschedulable(unschedulable)
            .condition(api::node_health::NODE_READY, ready)
            .heartbeat(jiff::Timestamp::from_second(heartbeat).unwrap())
            .build()
    }

    #[test]
    fn node_predicate_sees_labels_ready_and_unschedulable_only() {
        let base = node(&[("pool", "a")], "True", 1, false);
        let fp = node_fingerprint(&base);
        // A heartbeat, new capacity, an annotation: no trigger.
        let mut noise = node(&[("pool", "a")], "True", 99, false);
        noise
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("x".into(), "y".into());
        assert_eq!(node_fingerprint(&noise), fp);
        // Labels, Ready, unschedulable: a trigger each.
        assert_ne!(
            node_fingerprint(&node(&[("pool", "b")], "True", 1, false)),
            fp
        );
        assert_ne!(
            node_fingerprint(&node(&[("pool", "a")], "False", 1, false)),
            fp
        );
        assert_ne!(
            node_fingerprint(&node(&[("pool", "a")], "True", 1, true)),
            fp
        );
        // A hold, and a change of its reason: a trigger each.
        let hold = format!("{}alice", api::labels::HOLD_ANNOTATION_PREFIX);
        let mut held = base.clone();
        held.annotations_mut()
            .insert(hold.clone(), "debugging".into());
        assert_ne!(node_fingerprint(&held), fp);
        let mut reason = held.clone();
        reason.annotations_mut().insert(hold, "kernel".into());
        assert_ne!(node_fingerprint(&reason), node_fingerprint(&held));
        // The cache keeps holds with our marks, and drops the rest.
        let mut cached = held.clone();
        cached.annotations_mut().insert("x".into(), "y".into());
        strip_node(&mut cached);
        assert!(api::node_health::holds(&cached).eq(api::node_health::holds(&held)));
        assert!(!cached.annotations().contains_key("x"));
    }

    #[test]
    fn the_secret_version_follows_any_change_and_the_pool_opt_in_is_kept() {
        let secret = |rv: &str| Secret {
            metadata: kube::api::ObjectMeta {
                uid: Some("u".into()),
                resource_version: Some(rv.into()),
                annotations: Some(
                    [
                        (api::labels::POOLS_ANNOTATION.to_owned(), "a".to_owned()),
                        ("other".to_owned(), "x".to_owned()),
                    ]
                    .into_iter()
                    .collect(),
                ),
                ..Default::default()
            },
            ..Secret::default()
        };
        assert_eq!(secret_version(&secret("1")), "u/1");
        assert_ne!(secret_version(&secret("1")), secret_version(&secret("2")));
        let mut cached = secret("1");
        strip_secret(&mut cached);
        assert_eq!(
            cached.annotations().keys().collect::<Vec<_>>(),
            [api::labels::POOLS_ANNOTATION]
        );
        let pool = |name: &str| {
            BootcNodePool::new(
                name,
                serde_json::from_value(
                    serde_json::json!({"nodeSelector": {}, "image": {"ref": "quay.io/a/os:1"}}),
                )
                .unwrap(),
            )
        };
        let s = Some(Arc::new(cached));
        assert!(usable_secret(&pool("a"), s.clone()).is_some());
        assert!(
            usable_secret(&pool("b"), s).is_none(),
            "not opted in: not used"
        );
    }
}
