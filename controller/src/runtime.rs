//! The controller runtime: caches, watches and their mapping to pools, the
//! reconcile function (gather from the caches, plan, act), the finalizer,
//! leader election and the health endpoints.
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

use api::labels::{OPERATOR_NAMESPACE, POOL_FINALIZER};
use api::{BootcNode, BootcNodePool};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::actions::actuator::{Actuator, ActuatorError, Written};
use crate::actions::drain::Drains;
use crate::actions::events::EventSink;
use crate::target::{DigestOnly, Resolve};
use lease::LeaseConfig;
use liveness::Liveness;
use members::{Changes, Members};
use rollout::{self, PlanInput};
use selection::Selection;
use synced::{Cache, Synced};

pub mod lease;
pub mod liveness;
pub mod members;
pub mod pace;
pub mod selection;
pub mod synced;
mod watches;
mod wire;

/// How the controller runs.
#[derive(Clone)]
pub struct Options {
    /// Leader election; None runs without (a single replica, or tests).
    pub lease: Option<LeaseConfig>,
    /// Serve /healthz and /readyz here (and /metrics).
    pub health_addr: Option<SocketAddr>,
    /// Serve /metrics here (and /healthz, /readyz); may equal `health_addr`.
    pub metrics_addr: Option<SocketAddr>,
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
    /// The stuck deadlines (see [`rollout::stuck`]).
    pub deadlines: rollout::stuck::Deadlines,
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
            namespace: OPERATOR_NAMESPACE.to_owned(),
            instance: instance.to_owned(),
            resolver: Arc::new(DigestOnly),
            resync: Duration::from_secs(600),
            wedged_after: crate::runtime::liveness::WEDGED_AFTER,
            deadlines: rollout::stuck::Deadlines::default(),
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
    #[error("cleanup waits for nodes the pool disrupted to be back: {}", nodes.join(", "))]
    CleanupWaiting { nodes: Vec<String> },
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
        }
    }
}

struct Ctx {
    client: kube::Client,
    namespace: String,
    /// The daemons' Role on the pull secrets the pools name.
    daemon_secrets: Arc<crate::actions::daemon_secrets::Grant>,
    pools: Store<BootcNodePool>,
    nodes: Store<Node>,
    bootc_nodes: Store<BootcNode>,
    secrets: Store<Secret>,
    drains: Drains,
    actuator: Actuator,
    resolver: Arc<dyn Resolve>,
    resync: Duration,
    ready: Arc<AtomicBool>,
    /// Per pool: when each member entered the phase it waits in.
    phase_clocks: std::sync::Mutex<BTreeMap<String, Arc<rollout::stuck::Clock>>>,
    /// Each pool's per-node answers kept for its next plan (incremental
    /// planning, see `rollout::memo`).
    memos: std::sync::Mutex<BTreeMap<String, rollout::Memo>>,
    /// The Node and BootcNode names changed since each pool last looked,
    /// and each pool's objects kept up to date with them (see `members`).
    changes: Arc<Changes>,
    members: std::sync::Mutex<BTreeMap<String, Arc<Members>>>,
    /// How often each pool is planned (see `pace`).
    pacer: crate::runtime::pace::Pacer,
    deadlines: rollout::stuck::Deadlines,
    /// The reconciles running now, for `/healthz`.
    liveness: Arc<Liveness>,
    /// Which caches have listed their objects.
    synced: Arc<Synced>,
}

/// The Secret's version as the nodes are told it (`<uid>/<resourceVersion>`;
/// one definition, shared with the daemon, which checks it after its GET).
pub fn secret_version(secret: &Secret) -> String {
    api::pull_secret::version(&secret.metadata).unwrap_or_default()
}

/// The pool's pull secret, if it exists and opts in to the pool: what the
/// resolver may use.
fn usable_secret(pool: &BootcNodePool, secret: Option<Arc<Secret>>) -> Option<Arc<Secret>> {
    secret.filter(|s| api::pull_secret::allows(&s.metadata, &pool.name_any()))
}

/// What a Node event must change to matter: labels, Ready, unschedulable.
pub fn node_fingerprint(node: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    node.labels().hash(&mut h);
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
        .hash(&mut h);
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

fn pool_fingerprint(pool: &BootcNodePool) -> u64 {
    let mut h = DefaultHasher::new();
    pool.metadata.generation.hash(&mut h);
    pool.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// Passes on objects whose `fingerprint` changed, and every deletion.
fn changed_only<K, S>(
    events: S,
    fingerprint: fn(&K) -> u64,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let mut seen: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    events.filter_map(move |ev| {
        let out = match ev {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let key = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
                let fp = fingerprint(&obj);
                if seen.insert(key, fp) == Some(fp) {
                    None
                } else {
                    Some(Ok(obj))
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let key = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
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

/// What the Node cache keeps. The Node watch decodes no more than this
/// (`wire::NodeWire`), and its conversion ends here all the same.
fn strip_node(node: &mut Node) {
    // None, not cleared: a cleared Vec keeps its buffer.
    node.metadata.managed_fields = None;
    node.annotations_mut()
        .retain(|k, _| node_annotation_kept(k));
    if let Some(status) = node.status.as_mut() {
        status.images = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.node_info = None;
        status.addresses = None;
        status.capacity = None;
        status.allocatable = None;
    }
}

/// The Node annotations the cache keeps: our cordon and disruption marks.
/// The others are dropped to save memory.
fn node_annotation_kept(key: &str) -> bool {
    key == api::labels::CORDONED_BY_ANNOTATION || key == api::labels::DISRUPTED_BY_ANNOTATION
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
    bootc_nodes: &Store<BootcNode>,
) -> Vec<ObjectRef<BootcNodePool>> {
    let mut out: Vec<ObjectRef<BootcNodePool>> = pools
        .state()
        .iter()
        .filter(|p| rollout::selects(p, node))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect();
    if let Some(bn) = bootc_nodes.get(&ObjectRef::new(&node.name_any()))
        && let Some((owner, _)) = rollout::owner_pool(&bn)
    {
        out.push(ObjectRef::new(&owner));
    }
    // The pool that disrupted it, until it is back.
    if let Some(pool) = rollout::disruption::recorded_by(node) {
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

/// The caches, as `members` reads them.
impl crate::runtime::members::Caches for Ctx {
    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }
    fn bn(&self, name: &str) -> Option<Arc<BootcNode>> {
        self.bootc_nodes.get(&ObjectRef::new(name))
    }
    fn all_nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.state()
    }
    fn all_bns(&self) -> Vec<Arc<BootcNode>> {
        self.bootc_nodes.state()
    }
}

impl Ctx {
    /// The pool's objects, brought up to date with the changes recorded
    /// since its last reconcile (see `members`). Kept for the next one
    /// before they are read: a reconcile that fails later loses nothing.
    fn members_of(&self, pool: &BootcNodePool) -> Arc<Members> {
        let name = pool.name_any();
        let kept = self.members.lock().ok().and_then(|mut m| m.remove(&name));
        let mut members = kept.map(Arc::unwrap_or_clone).unwrap_or_default();
        let decided = members.update(pool, self.changes.take(&name), self);
        tracing::debug!(pool = %name, decided, "members brought up to date");
        let members = Arc::new(members);
        if let Ok(mut m) = self.members.lock() {
            m.insert(name, Arc::clone(&members));
        }
        members
    }

    fn input<'a>(
        &'a self,
        pool: &'a BootcNodePool,
        chosen: Selection<'a>,
        others: &'a [Arc<BootcNodePool>],
        target: Result<rollout::Target, rollout::TargetProblem>,
    ) -> PlanInput<'a> {
        let pull_secret = pool.spec.pull_secret_ref.as_ref().and_then(|r| {
            self.secrets
                .get(&ObjectRef::new(&r.name).within(&r.namespace))
                .map(|s| rollout::SecretSeen {
                    version: secret_version(&s),
                    allows_pool: api::pull_secret::allows(&s.metadata, &pool.name_any()),
                })
        });
        PlanInput {
            pool,
            target,
            nodes: chosen.nodes,
            bootc_nodes: chosen.bns,
            other_pools: others
                .iter()
                .map(AsRef::as_ref)
                .filter(|p| p.name_any() != pool.name_any())
                .collect(),
            pull_secret,
            drains: self.drains.snapshot(&pool.name_any()),
            operator_namespace: &self.namespace,
            last_status_write: self.actuator.last_status_write(&pool.name_any()),
            now: jiff::Timestamp::now(),
            phase_clock: self
                .phase_clocks
                .lock()
                .ok()
                .and_then(|c| c.get(&pool.name_any()).cloned())
                .unwrap_or_default(),
            deadlines: self.deadlines,
        }
    }
}

fn store_rv<K: Resource<DynamicType = ()> + Clone>(store: &Store<K>, name: &str) -> Option<u64> {
    store.get(&ObjectRef::new(name)).map(|o| {
        o.meta()
            .resource_version
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    })
}

/// Have the caches seen this pool's own last writes? Planning on caches that
/// have not would make those writes again (or, for a cleanup, miss a
/// BootcNode just created); the watch events of those writes re-trigger the
/// pool.
fn caught_up(ctx: &Ctx, name: &str) -> bool {
    let caught_up = ctx.actuator.caught_up(name, |w| match w {
        Written::PoolStatus => store_rv(&ctx.pools, name),
        Written::BootcNode(n) | Written::DeletedBootcNode(n) => store_rv(&ctx.bootc_nodes, n),
        Written::Node(n) => store_rv(&ctx.nodes, n),
    });
    if !caught_up {
        tracing::debug!(pool = %name, "caches behind our own writes; waiting for them");
    }
    caught_up
}

#[tracing::instrument(name = "reconcile", skip_all, fields(pool = %pool.name_any()))]
async fn apply(pool: Arc<BootcNodePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = pool.name_any();
    // Changes that arrive meanwhile are planned together (see `pace`).
    tokio::time::sleep(ctx.pacer.wait(&name)).await;
    if !caught_up(&ctx, &name) {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    plan_and_write(pool, &ctx).await
}

/// One reconcile of a pool: read, plan, write (see `planner`).
async fn plan_and_write(pool: Arc<BootcNodePool>, ctx: &Ctx) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let name = pool.name_any();
    // The freshest copy of the pool (its status included).
    let pool = ctx.pools.get(&ObjectRef::from_obj(&*pool)).unwrap_or(pool);
    ctx.daemon_secrets.sync().await;
    let secret = pool.spec.pull_secret_ref.as_ref().and_then(|r| {
        ctx.secrets
            .get(&ObjectRef::new(&r.name).within(&r.namespace))
    });
    let secret = usable_secret(&pool, secret);
    let selecting = std::time::Instant::now();
    let members = ctx.members_of(&pool);
    let selected = selecting.elapsed();
    // A person's retry request first: its write re-triggers the pool.
    let retries = crate::actions::retry::requests(&pool, members.retry_requests());
    if crate::actions::retry::honour(&ctx.client, &name, &retries)
        .await
        .map_err(Error::Retry)?
        > 0
    {
        return Ok(Action::requeue(ctx.resync));
    }
    let chosen = members.selection();
    let resolution = ctx
        .resolver
        .resolve(&pool, secret.as_deref(), &chosen.architectures)
        .await;
    let pools = ctx.pools.state();
    let planning = std::time::Instant::now();
    let input = ctx.input(&pool, chosen, &pools, resolution.target.clone());
    let mut memo = ctx
        .memos
        .lock()
        .ok()
        .and_then(|mut m| m.remove(&name))
        .unwrap_or_default();
    let mut plan = rollout::plan_incremental(&input, &mut memo);
    tracing::debug!(pool = %name, reused = memo.reused, computed = memo.computed, "planned");
    if let Ok(mut memos) = ctx.memos.lock() {
        memos.insert(name.clone(), memo);
    }
    if let Ok(mut clocks) = ctx.phase_clocks.lock() {
        let phases = std::mem::take(&mut plan.phases);
        let clock = rollout::stuck::tick(&input.phase_clock, phases, input.now);
        clocks.insert(name.clone(), Arc::new(clock));
    }
    let planned = planning.elapsed();
    let writes = ctx.actuator.execute(&pool, &plan).await?;
    ctx.pacer
        .done(&name, selected + planned, plan.summary.states.len());
    let status = plan.status.as_ref().or(pool.status.as_ref());
    let degraded = status
        .filter(|s| api::conditions::is_true(&s.conditions, api::reasons::DEGRADED))
        .and_then(|s| api::conditions::reason(&s.conditions, api::reasons::DEGRADED));
    let metrics = crate::metrics::global();
    metrics.observe_plan(&name, &plan.summary, &plan.events, degraded);
    metrics.reconciled(started.elapsed());
    let elapsed_us = started.elapsed().as_micros();
    if writes > 0 {
        tracing::info!(pool = %pool.name_any(), writes, elapsed_us, "reconciled");
    } else {
        tracing::debug!(pool = %pool.name_any(), elapsed_us, "reconciled; nothing to change");
    }
    let mut after = ctx.resync;
    for d in [plan.requeue_after, resolution.requeue_after]
        .into_iter()
        .flatten()
    {
        after = after.min(d);
    }
    Ok(Action::requeue(after))
}

#[tracing::instrument(name = "cleanup", skip_all, fields(pool = %pool.name_any()))]
async fn cleanup(pool: Arc<BootcNodePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    // An Ok here removes the finalizer: waiting must be an error.
    if !caught_up(&ctx, &pool.name_any()) {
        return Err(Error::CachesBehind);
    }
    let nodes = ctx.nodes.state();
    let bns = ctx.bootc_nodes.state();
    let input = ctx.input(
        &pool,
        Selection::of(&pool, &nodes, &bns),
        &[],
        Err(rollout::TargetProblem {
            reason: api::reasons::INVALID_SPEC,
            message: "pool is being deleted".into(),
        }),
    );
    let cleanup = rollout::plan_cleanup(&input);
    let n = ctx.actuator.write(&pool, &cleanup.writes).await?;
    if !cleanup.waiting.is_empty() {
        tracing::info!(pool = %pool.name_any(), writes = n, waiting = ?cleanup.waiting, "pool deleted: waiting for nodes it disrupted to be back");
        return Err(Error::CleanupWaiting {
            nodes: cleanup.waiting,
        });
    }
    crate::metrics::global().forget_pool(&pool.name_any());
    if let Ok(mut memos) = ctx.memos.lock() {
        memos.remove(&pool.name_any());
    }
    if let Ok(mut members) = ctx.members.lock() {
        members.remove(&pool.name_any());
    }
    ctx.changes.forget(&pool.name_any());
    ctx.pacer.forget(&pool.name_any());
    tracing::info!(pool = %pool.name_any(), writes = n, "pool deleted: cordons restored, labels and BootcNodes removed");
    Ok(Action::await_change())
}

async fn reconcile(pool: Arc<BootcNodePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let _running = ctx.liveness.start();
    ctx.synced
        .wait(&[Cache::Nodes, Cache::BootcNodes, Cache::Secrets])
        .await;
    let api: Api<BootcNodePool> = Api::all(ctx.client.clone());
    let c = ctx.clone();
    finalizer(&api, POOL_FINALIZER, pool, |event| async move {
        match event {
            Finalizer::Apply(p) => apply(p, c).await,
            Finalizer::Cleanup(p) => cleanup(p, c).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(e.to_string()))
}

fn error_policy(pool: Arc<BootcNodePool>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    if let Error::CleanupWaiting { .. } = error {
        tracing::debug!(pool = %pool.name_any(), %error, "cleanup waiting");
        return Action::requeue(Duration::from_secs(2));
    }
    tracing::warn!(pool = %pool.name_any(), %error, "reconcile failed; retrying");
    crate::metrics::global().reconcile_failed(error.kind());
    Action::requeue(Duration::from_secs(2))
}

/// The answer to a GET of `path`: status line, content type, body.
fn http_answer(path: &str, ready: bool, wedged: bool) -> (&'static str, &'static str, String) {
    const TEXT: &str = "text/plain";
    match path {
        "/healthz" if wedged => (
            "503 Service Unavailable",
            TEXT,
            "reconcile loop wedged".into(),
        ),
        "/healthz" => ("200 OK", TEXT, "ok".into()),
        "/readyz" if ready => ("200 OK", TEXT, "ok".into()),
        "/readyz" => ("503 Service Unavailable", TEXT, "not ready".into()),
        "/metrics" => (
            "200 OK",
            crate::metrics::CONTENT_TYPE,
            crate::metrics::global().render(),
        ),
        _ => ("404 Not Found", TEXT, "not found".into()),
    }
}

/// Serves /healthz (ok unless the reconcile loop is wedged, see
/// [`crate::runtime::liveness`]), /readyz (ok once `ready`) and /metrics.
async fn serve_health(
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    liveness: Arc<Liveness>,
    stop: CancellationToken,
) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Health { addr, source })?;
    tracing::info!(%addr, "health and metrics endpoints listening");
    loop {
        let (mut sock, _) = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(error) => {
                    tracing::warn!(%error, "health accept failed");
                    continue;
                }
            },
        };
        let ready = ready.clone();
        let wedged = liveness.wedged();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let line = String::from_utf8_lossy(&buf[..n]);
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let (code, content_type, body) =
                http_answer(path, ready.load(Ordering::Relaxed), wedged);
            let resp = format!(
                "HTTP/1.1 {code}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        });
    }
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
    let mut addrs: Vec<SocketAddr> = options.health_addr.into_iter().collect();
    addrs.extend(options.metrics_addr.filter(|m| !addrs.contains(m)));
    let servers: Vec<_> = addrs
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
    let drains = Drains::new(drain_client, &options.namespace, events.clone(), trigger_tx);
    let actuator = Actuator::new(client.clone(), drains.clone(), events);

    let synced = Synced::new();
    let changes = Arc::new(Changes::default());
    let (bn_store, bn_stream) = watches::bootc_nodes(&client, &synced, &changes);
    let (node_store, node_stream) = watches::nodes(&client, &synced, &changes);
    let (secret_store, secret_stream) = watches::secrets(&client, &options.namespace, &synced);
    let (pool_store, pool_trigger) = watches::pools(&client, &synced);
    let pool_stream = watches::pool_changes(&client);
    let drain_done = watches::drain_done(trigger_rx);

    let ctx = Arc::new(Ctx {
        client: client.clone(),
        namespace: options.namespace.clone(),
        daemon_secrets: crate::actions::daemon_secrets::Grant::new(
            client.clone(),
            &options.namespace,
            pool_store.clone(),
            bn_store.clone(),
            secret_store.clone(),
        ),
        pools: pool_store.clone(),
        nodes: node_store,
        bootc_nodes: bn_store.clone(),
        secrets: secret_store,
        drains: drains.clone(),
        actuator,
        resolver: options.resolver.clone(),
        resync: options.resync,
        ready,
        phase_clocks: std::sync::Mutex::default(),
        memos: std::sync::Mutex::default(),
        changes,
        members: std::sync::Mutex::default(),
        pacer: crate::runtime::pace::Pacer::default(),
        deadlines: options.deadlines,
        liveness,
        synced: synced.clone(),
    });
    let ready_task = ready_when_synced(synced.clone(), ctx.ready.clone());
    let _daemon_secrets = ctx.daemon_secrets.keep();
    tracing::info!("controller starting");
    let (p1, p2, p3) = (pool_store.clone(), pool_store.clone(), pool_store.clone());
    // No error reaches the controller (see `log_errors`); its own backoff of
    // the trigger streams is kept as short as the watchers' all the same.
    let running = Controller::for_stream(pool_trigger, pool_store)
        .trigger_backoff(api::watch::backoff())
        .watches_stream(bn_stream, |bn: BootcNode| watches::pool_of(&bn))
        .watches_stream(node_stream, move |n: Node| {
            pools_for_node(&n, &p1, &bn_store)
        })
        .watches_stream(secret_stream, move |s: Secret| pools_for_secret(&s, &p2))
        // A pool appearing, changing its selector or going away can change
        // every other pool's conflicts.
        .watches_stream(pool_stream, move |_: BootcNodePool| {
            watches::every_pool(&p3)
        })
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
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node(labels: &[(&str, &str)], ready: &str, heartbeat: i64, unschedulable: bool) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n".into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        n.spec = Some(NodeSpec {
            unschedulable: Some(unschedulable),
            ..NodeSpec::default()
        });
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: api::node_health::NODE_READY.into(),
                status: ready.into(),
                last_heartbeat_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::from_second(heartbeat).unwrap(),
                )),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        n
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
    }

    #[test]
    fn metrics_are_served_with_the_health_endpoints() {
        let (code, content_type, body) = http_answer("/metrics", false, false);
        assert_eq!(code, "200 OK");
        assert_eq!(content_type, crate::metrics::CONTENT_TYPE);
        assert!(body.contains("# TYPE bootc_leader gauge"), "{body}");
        assert!(body.ends_with("# EOF\n"), "OpenMetrics: {body}");
        assert_eq!(
            http_answer("/readyz", false, false).0,
            "503 Service Unavailable"
        );
        assert_eq!(http_answer("/healthz", false, false).0, "200 OK");
        assert_eq!(
            http_answer("/healthz", true, true).0,
            "503 Service Unavailable"
        );
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
