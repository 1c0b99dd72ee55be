//! The controller's Prometheus metrics (OpenMetrics text on `/metrics`).
//!
//! Labels are bounded: a pool name, a phase, a reason, an API verb and
//! resource. No metric is labelled by node, so that a 20,000-node pool is a
//! handful of series. A slow node is found from the pool's figures:
//! `bootc_pool_longest_in_phase_seconds{pool,phase}` says that some node has
//! been in `phase` that long, and the PHASE and SINCE columns of
//! `kubectl get bn` name it (docs/operations.md).
//!
//! The daemon's figures are folded in here rather than served by the daemon:
//! the controller sees every daemon transition through its BootcNode watch
//! (Staging, Staged, Rebooting, back on the target, Degraded), so staging and
//! reboot durations and bootc failures are measured without a listener on
//! each node, without a single extra API write, and without widening the
//! daemon's seccomp filter. What only the node knows (bytes pulled) is not
//! measured.
//!
//! One registry per process ([`global`]): the controller is one per process.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use api::StandingKind;
use rollout::{NodeState, PlannedEvent, Summary, event_reasons};

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where a node is, as the metrics (and a person) see it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelValue)]
pub enum Phase {
    /// The daemon has not acknowledged its spec yet.
    Pending,
    Staging,
    /// Staged, waiting for a reboot slot.
    Staged,
    /// In a reboot slot, cordoned, pods being evicted.
    Draining,
    Rebooting,
    UpToDate,
    Degraded,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Pending,
        Phase::Staging,
        Phase::Staged,
        Phase::Draining,
        Phase::Rebooting,
        Phase::UpToDate,
        Phase::Degraded,
    ];

    /// The phase of a member in `state`, `draining` or not.
    pub fn of(state: NodeState, draining: bool) -> Phase {
        if draining && state != NodeState::UpToDate {
            return Phase::Draining;
        }
        match state {
            NodeState::Pending => Phase::Pending,
            NodeState::Staging => Phase::Staging,
            NodeState::Staged => Phase::Staged,
            NodeState::Rebooting => Phase::Rebooting,
            NodeState::UpToDate => Phase::UpToDate,
            NodeState::Degraded => Phase::Degraded,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolPhaseLabels {
    pool: String,
    phase: Phase,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolStandingLabels {
    pool: String,
    standing: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolReasonLabels {
    pool: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: Phase,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds to hours: 1 s .. about 4.5 h.
fn long_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// Milliseconds to seconds: 1 ms .. about 16 s.
fn short_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Every metric the controller exposes.
pub struct Metrics {
    registry: Registry,
    pool_nodes: Family<PoolPhaseLabels, Gauge>,
    pool_standings: Family<PoolStandingLabels, Gauge>,
    pool_longest: Family<PoolPhaseLabels, FloatGauge>,
    pool_slots: Family<PoolLabels, Gauge>,
    pool_slots_in_use: Family<PoolLabels, Gauge>,
    pool_progress: Family<PoolLabels, FloatGauge>,
    pool_halted: Family<PoolLabels, Gauge>,
    pool_paused: Family<PoolLabels, Gauge>,
    pool_degraded: Family<PoolReasonLabels, Gauge>,
    rollouts_started: Family<PoolLabels, Counter>,
    phase_duration: HistogramFamily<PhaseLabels>,
    node_update_duration: Histogram,
    rollout_duration: Histogram,
    tag_resolution_duration: Histogram,
    tag_resolutions: Family<PoolLabels, Counter>,
    registry_failures: Family<PoolReasonLabels, Counter>,
    tag_last_resolution: Family<PoolLabels, Gauge>,
    tag_next_resolution: Family<PoolLabels, Gauge>,
    drain_failures: Family<ReasonLabels, Counter>,
    evictions_refused: Family<ReasonLabels, Counter>,
    reconcile_duration: Histogram,
    reconcile_errors: Family<ReasonLabels, Counter>,
    api_requests: Family<RequestLabels, Counter>,
    leader: Gauge,
    clock: Mutex<PhaseClock>,
    /// Per pool, the reason of its `bootc_pool_degraded` series.
    degraded: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

impl Metrics {
    fn new() -> Self {
        let m = Metrics {
            registry: Registry::with_prefix("bootc"),
            pool_nodes: Family::default(),
            pool_standings: Family::default(),
            pool_longest: Family::default(),
            pool_slots: Family::default(),
            pool_slots_in_use: Family::default(),
            pool_progress: Family::default(),
            pool_halted: Family::default(),
            pool_paused: Family::default(),
            pool_degraded: Family::default(),
            rollouts_started: Family::default(),
            phase_duration: Family::new_with_constructor(long_buckets),
            node_update_duration: long_buckets(),
            rollout_duration: long_buckets(),
            tag_resolution_duration: short_buckets(),
            tag_resolutions: Family::default(),
            registry_failures: Family::default(),
            tag_last_resolution: Family::default(),
            tag_next_resolution: Family::default(),
            drain_failures: Family::default(),
            evictions_refused: Family::default(),
            reconcile_duration: short_buckets(),
            reconcile_errors: Family::default(),
            api_requests: Family::default(),
            leader: Gauge::default(),
            clock: Mutex::new(PhaseClock::default()),
            degraded: Mutex::new(HashMap::new()),
        };
        m.register()
    }

    /// Registers every metric, in the order `render` writes them.
    fn register(mut self) -> Self {
        self.register_pools();
        self.register_rollouts();
        self.register_registry();
        self.register_drains();
        self.register_controller();
        self
    }

    /// The per-pool gauges of `observe_plan`.
    fn register_pools(&mut self) {
        let r = &mut self.registry;
        r.register(
            "pool_nodes",
            "Member nodes of a pool by phase",
            self.pool_nodes.clone(),
        );
        r.register(
            "pool_nodes_by_standing",
            "Member nodes of a pool by where they stand and why (the standing `kubectl bootc why` words)",
            self.pool_standings.clone(),
        );
        r.register(
            "pool_longest_in_phase_seconds",
            "How long the pool's longest-waiting node has been in its phase (0: no node in it); counted from the controller's start at most",
            self.pool_longest.clone(),
        );
        r.register(
            "pool_reboot_slots",
            "Reboot slots maxUnavailable allows",
            self.pool_slots.clone(),
        );
        r.register(
            "pool_reboot_slots_in_use",
            "Nodes holding a reboot slot",
            self.pool_slots_in_use.clone(),
        );
        r.register(
            "pool_rollout_progress_ratio",
            "Fraction of the pool's members that run the target",
            self.pool_progress.clone(),
        );
        r.register(
            "pool_rollout_halted",
            "1 while maxUnhealthy unhealthy nodes in reboot slots (2 by default) stop the rollout",
            self.pool_halted.clone(),
        );
        r.register(
            "pool_paused",
            "1 while spec.rollout.paused, or before spec.rollout.pausedUntil",
            self.pool_paused.clone(),
        );
        r.register(
            "pool_degraded",
            "1 for the reason of a pool's Degraded=True condition",
            self.pool_degraded.clone(),
        );
    }

    /// Rollouts and the time nodes spend in them.
    fn register_rollouts(&mut self) {
        let r = &mut self.registry;
        r.register(
            "rollouts_started",
            "Rollouts started (RolloutStarted events)",
            self.rollouts_started.clone(),
        );
        r.register(
            "node_phase_duration_seconds",
            "Time nodes spent staging, draining and rebooting",
            self.phase_duration.clone(),
        );
        r.register(
            "node_update_duration_seconds",
            "Time from a node's new target to the node running it",
            self.node_update_duration.clone(),
        );
        r.register(
            "rollout_duration_seconds",
            "Time from RolloutStarted to RolloutComplete",
            self.rollout_duration.clone(),
        );
    }

    /// Tag resolution against the registry.
    fn register_registry(&mut self) {
        let r = &mut self.registry;
        r.register(
            "tag_resolution_duration_seconds",
            "Registry round trips resolving a tag",
            self.tag_resolution_duration.clone(),
        );
        r.register(
            "tag_resolutions",
            "Tag resolutions attempted",
            self.tag_resolutions.clone(),
        );
        r.register(
            "registry_failures",
            "Tag resolutions that failed, by the pool's Degraded reason",
            self.registry_failures.clone(),
        );
        r.register(
            "tag_last_resolution_timestamp_seconds",
            "When the pool's tag was last asked of its registry (Unix time)",
            self.tag_last_resolution.clone(),
        );
        r.register(
            "tag_next_resolution_timestamp_seconds",
            "When the pool's tag will next be asked of its registry (Unix time)",
            self.tag_next_resolution.clone(),
        );
    }

    /// Drains and their evictions.
    fn register_drains(&mut self) {
        let r = &mut self.registry;
        r.register(
            "drain_failures",
            "Drains that gave up, by reason",
            self.drain_failures.clone(),
        );
        r.register(
            "evictions_refused",
            "Pods whose eviction was refused during a drain, by reason",
            self.evictions_refused.clone(),
        );
    }

    /// The controller itself: reconciles, API requests, leadership.
    fn register_controller(&mut self) {
        let r = &mut self.registry;
        r.register(
            "reconcile_duration_seconds",
            "Time to reconcile one pool",
            self.reconcile_duration.clone(),
        );
        r.register(
            "reconcile_errors",
            "Failed reconciles, by error kind",
            self.reconcile_errors.clone(),
        );
        r.register(
            "api_requests",
            "Requests to the API server, by verb and resource",
            self.api_requests.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the lease (or runs without leader election)",
            self.leader.clone(),
        );
    }

    /// The OpenMetrics text of every metric. The time in phase is taken
    /// now: between two reconciles a stuck node keeps getting older.
    pub fn render(&self) -> String {
        let longest = {
            let clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
            clock.longest(Instant::now())
        };
        for ((pool, phase), waited) in longest {
            self.pool_longest
                .get_or_create(&PoolPhaseLabels { pool, phase })
                .set(waited.as_secs_f64());
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Records what one reconcile of `pool` saw and did.
    pub fn observe_plan(
        &self,
        pool: &str,
        summary: &Summary,
        events: &[PlannedEvent],
        degraded_reason: Option<&str>,
    ) {
        let now = Instant::now();
        let seen = {
            let mut clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
            clock.observe(pool, summary, events, now)
        };
        for (phase, took) in &seen.phases {
            self.phase_duration
                .get_or_create(&PhaseLabels { phase: *phase })
                .observe(took.as_secs_f64());
        }
        for took in &seen.updates {
            self.node_update_duration.observe(took.as_secs_f64());
        }
        if let Some(took) = seen.rollout {
            self.rollout_duration.observe(took.as_secs_f64());
        }
        let p = || PoolLabels { pool: pool.into() };
        if seen.rollout_started {
            self.rollouts_started.get_or_create(&p()).inc();
        }
        let counts = &seen.counts;
        for phase in Phase::ALL {
            let labels = PoolPhaseLabels {
                pool: pool.into(),
                phase,
            };
            let n = counts.get(&phase).copied().unwrap_or(0);
            self.pool_nodes
                .get_or_create(&labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
            if phase != Phase::UpToDate {
                let longest = seen.longest.get(&phase).copied().unwrap_or_default();
                self.pool_longest
                    .get_or_create(&labels)
                    .set(longest.as_secs_f64());
            }
        }
        self.observe_standings(pool, summary);
        let gauge = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.pool_slots
            .get_or_create(&p())
            .set(gauge(summary.slots));
        self.pool_slots_in_use
            .get_or_create(&p())
            .set(gauge(summary.slots_in_use));
        let total = summary.states.len();
        let updated = counts.get(&Phase::UpToDate).copied().unwrap_or(0);
        let ratio = if total == 0 {
            1.0
        } else {
            updated as f64 / total as f64
        };
        self.pool_progress.get_or_create(&p()).set(ratio);
        self.pool_halted
            .get_or_create(&p())
            .set(i64::from(summary.halted));
        self.pool_paused
            .get_or_create(&p())
            .set(i64::from(summary.paused));
        self.set_degraded(pool, degraded_reason);
    }

    /// Every standing's count in the pool, each kind at its count (0 when
    /// no member stands so): the series do not come and go.
    fn observe_standings(&self, pool: &str, summary: &Summary) {
        let mut counts: std::collections::BTreeMap<&'static str, i64> =
            StandingKind::ALL.iter().map(|k| (k.as_str(), 0)).collect();
        for s in summary.standings.members.values() {
            *counts.entry(s.kind().as_str()).or_default() += 1;
        }
        for (standing, n) in counts {
            self.pool_standings
                .get_or_create(&PoolStandingLabels {
                    pool: pool.into(),
                    standing,
                })
                .set(n);
        }
    }

    fn set_degraded(&self, pool: &str, reason: Option<&str>) {
        // One series per pool: the current reason at 1 (none when healthy).
        let old = {
            let mut last = self.degraded.lock().unwrap_or_else(|e| e.into_inner());
            match reason {
                Some(r) => last.insert(pool.to_owned(), r.to_owned()),
                None => last.remove(pool),
            }
        };
        if let Some(old) = old
            && Some(old.as_str()) != reason
        {
            self.pool_degraded.remove(&PoolReasonLabels {
                pool: pool.into(),
                reason: old,
            });
        }
        if let Some(reason) = reason {
            self.pool_degraded
                .get_or_create(&PoolReasonLabels {
                    pool: pool.into(),
                    reason: reason.into(),
                })
                .set(1);
        }
    }

    /// Drops a deleted pool's series.
    pub fn forget_pool(&self, pool: &str) {
        let p = PoolLabels { pool: pool.into() };
        for phase in Phase::ALL {
            let labels = PoolPhaseLabels {
                pool: pool.into(),
                phase,
            };
            self.pool_nodes.remove(&labels);
            self.pool_longest.remove(&labels);
        }
        for kind in StandingKind::ALL {
            self.pool_standings.remove(&PoolStandingLabels {
                pool: pool.into(),
                standing: kind.as_str(),
            });
        }
        self.tag_last_resolution.remove(&p);
        self.tag_next_resolution.remove(&p);
        self.pool_slots.remove(&p);
        self.pool_slots_in_use.remove(&p);
        self.pool_progress.remove(&p);
        self.pool_halted.remove(&p);
        self.pool_paused.remove(&p);
        self.set_degraded(pool, None);
        let mut clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
        clock.pools.remove(pool);
    }

    /// One tag resolution against a registry: how long, and its failure
    /// reason if it failed.
    pub fn tag_resolution(&self, pool: &str, took: Duration, failure: Option<api::Reason>) {
        self.tag_resolution_duration.observe(took.as_secs_f64());
        self.tag_resolutions
            .get_or_create(&PoolLabels { pool: pool.into() })
            .inc();
        if let Some(reason) = failure {
            self.registry_failures
                .get_or_create(&PoolReasonLabels {
                    pool: pool.into(),
                    reason: reason.as_str().into(),
                })
                .inc();
        }
    }

    /// A tag's resolution schedule: when it was last asked, and when it
    /// will be next (kept in memory, not in the pool's status: a poll that
    /// finds the same digest writes nothing).
    pub fn tag_schedule(&self, pool: &str, last: jiff::Timestamp, next: jiff::Timestamp) {
        let p = PoolLabels { pool: pool.into() };
        self.tag_last_resolution
            .get_or_create(&p)
            .set(last.as_second());
        self.tag_next_resolution
            .get_or_create(&p)
            .set(next.as_second());
    }

    /// A drain finished: how long it took.
    pub fn drain_succeeded(&self, took: Duration) {
        self.phase_duration
            .get_or_create(&PhaseLabels {
                phase: Phase::Draining,
            })
            .observe(took.as_secs_f64());
    }

    pub fn drain_failed(&self, reason: api::Reason) {
        self.drain_failures
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().into(),
            })
            .inc();
    }

    pub fn eviction_refused(&self, reason: &str) {
        self.evictions_refused
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    pub fn reconciled(&self, took: Duration) {
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    pub fn reconcile_failed(&self, kind: &str) {
        self.reconcile_errors
            .get_or_create(&ReasonLabels {
                reason: kind.into(),
            })
            .inc();
    }

    pub fn api_request(&self, method: &http::Method, path: &str, query: Option<&str>) {
        let (verb, resource) = api_verb(method, path, query);
        self.api_requests
            .get_or_create(&RequestLabels {
                verb,
                resource: resource.to_owned(),
            })
            .inc();
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
}

/// The Kubernetes verb and resource of a request to the API server, from
/// its method and path (`/api/v1/nodes/n`, `/apis/g/v/namespaces/ns/r`).
pub fn api_verb<'a>(
    method: &http::Method,
    path: &'a str,
    query: Option<&str>,
) -> (&'static str, &'a str) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _, more @ ..] if !more.is_empty() => more,
        r => r,
    };
    let resource = match rest {
        [] => "other",
        [r] | [r, _] => r,
        [r, _, sub, ..] => {
            // A subresource names itself: pods/eviction, bootcnodepools/status.
            return (verb_of(method, false, query), subresource(r, sub));
        }
    };
    (verb_of(method, rest.len() == 1, query), resource)
}

fn subresource<'a>(resource: &'a str, sub: &'a str) -> &'a str {
    match sub {
        "status" | "eviction" => sub,
        _ => resource,
    }
}

fn verb_of(method: &http::Method, collection: bool, query: Option<&str>) -> &'static str {
    let watch = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if collection => "list",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// A tower layer counting the client's requests in [`global`].
pub fn request_counter() -> tower::util::MapRequestLayer<
    fn(http::Request<kube::client::Body>) -> http::Request<kube::client::Body>,
> {
    fn count(req: http::Request<kube::client::Body>) -> http::Request<kube::client::Body> {
        global().api_request(req.method(), req.uri().path(), req.uri().query());
        req
    }
    tower::util::MapRequestLayer::new(count)
}

/// What [`PhaseClock::observe`] measured.
#[derive(Debug, Default, PartialEq)]
pub struct Observed {
    /// Whole Staging and Rebooting phases that ended now.
    pub phases: Vec<(Phase, Duration)>,
    /// Nodes that reached their target now: since they left it (or were
    /// told of a new one).
    pub updates: Vec<Duration>,
    /// A rollout completed now: since it started.
    pub rollout: Option<Duration>,
    pub rollout_started: bool,
    /// Per phase, how long the longest-waiting node has been in it.
    pub longest: BTreeMap<Phase, Duration>,
    /// Members by phase.
    pub counts: BTreeMap<Phase, usize>,
}

#[derive(Debug, Clone, Copy)]
struct NodeClock {
    phase: Phase,
    since: Instant,
    /// Was the phase's start seen (false: first seen mid-phase)?
    whole: bool,
    /// When the node left its target, if seen.
    update_since: Option<Instant>,
}

impl NodeClock {
    /// A node first seen now, in `phase`.
    fn first(phase: Phase, now: Instant) -> Self {
        NodeClock {
            phase,
            since: now,
            whole: false,
            update_since: None,
        }
    }

    /// The node seen in `phase` at `now`: what ended goes into `out`.
    fn observe(&mut self, phase: Phase, now: Instant, out: &mut Observed) {
        if self.phase != phase {
            if self.whole && matches!(self.phase, Phase::Staging | Phase::Rebooting) {
                out.phases
                    .push((self.phase, now.saturating_duration_since(self.since)));
            }
            if self.phase == Phase::UpToDate {
                self.update_since = Some(now);
            }
            if phase == Phase::UpToDate
                && let Some(since) = self.update_since.take()
            {
                out.updates.push(now.saturating_duration_since(since));
            }
            *self = NodeClock {
                phase,
                since: now,
                whole: true,
                update_since: self.update_since,
            };
        }
        let waited = now.saturating_duration_since(self.since);
        let longest = out.longest.entry(phase).or_default();
        *longest = (*longest).max(waited);
    }
}

#[derive(Debug, Default)]
struct PoolClock {
    /// In name order, as a summary's members: each plan walks along them
    /// (nothing hashed or searched per member; every plan passes every
    /// member).
    nodes: BTreeMap<String, NodeClock>,
    rollout_since: Option<Instant>,
}

/// Per node, the phase and since when: phase durations from the
/// controller's own view of daemon transitions (in memory: a restarted
/// controller measures only phases that start after it).
#[derive(Debug, Default)]
pub struct PhaseClock {
    pools: HashMap<String, PoolClock>,
}

impl PhaseClock {
    /// Per pool and phase (UpToDate aside), how long its longest-waiting
    /// node has been in it at `now` (0 for a phase with no node).
    pub fn longest(&self, now: Instant) -> BTreeMap<(String, Phase), Duration> {
        let mut out = BTreeMap::new();
        for (pool, clock) in &self.pools {
            for phase in Phase::ALL.into_iter().filter(|p| *p != Phase::UpToDate) {
                out.insert((pool.clone(), phase), Duration::ZERO);
            }
            for node in clock.nodes.values().filter(|n| n.phase != Phase::UpToDate) {
                let waited = now.saturating_duration_since(node.since);
                let entry = out.entry((pool.clone(), node.phase)).or_default();
                *entry = (*entry).max(waited);
            }
        }
        out
    }

    /// Compares `summary` with the last one of `pool` at `now`.
    pub fn observe(
        &mut self,
        pool: &str,
        summary: &Summary,
        events: &[PlannedEvent],
        now: Instant,
    ) -> Observed {
        let clock = self.pools.entry(pool.to_owned()).or_default();
        let mut out = Observed::default();
        let mut first_seen = Vec::new();
        let mut kept = clock.nodes.iter_mut().peekable();
        let mut draining = summary.draining.iter().peekable();
        for (node, state) in &summary.states {
            while draining.next_if(|d| *d < node).is_some() {}
            let phase = Phase::of(*state, draining.peek() == Some(&node));
            *out.counts.entry(phase).or_default() += 1;
            while kept.next_if(|(n, _)| *n < node).is_some() {}
            match kept.next_if(|(n, _)| *n == node) {
                Some((_, entry)) => entry.observe(phase, now, &mut out),
                None => {
                    // First seen now: it has waited nothing yet.
                    out.longest.entry(phase).or_default();
                    first_seen.push((node.clone(), NodeClock::first(phase, now)));
                }
            }
        }
        clock.nodes.extend(first_seen);
        // Every member is in the clock now: it holds others only if sizes differ.
        if clock.nodes.len() != summary.states.len() {
            clock.nodes.retain(|n, _| summary.states.contains_key(n));
        }
        for event in events {
            match event.reason {
                event_reasons::ROLLOUT_STARTED => {
                    clock.rollout_since = Some(now);
                    out.rollout_started = true;
                }
                event_reasons::ROLLOUT_COMPLETE => {
                    out.rollout = clock
                        .rollout_since
                        .take()
                        .map(|s| now.saturating_duration_since(s));
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(states: &[(&str, NodeState)], draining: &[&str]) -> Summary {
        Summary {
            states: states.iter().map(|(n, s)| ((*n).into(), *s)).collect(),
            draining: draining.iter().map(|n| (*n).to_owned()).collect(),
            slots: 1,
            ..Summary::default()
        }
    }

    #[test]
    fn verbs_and_resources() {
        use http::Method;
        let cases = [
            (Method::GET, "/api/v1/nodes", None, ("list", "nodes")),
            (
                Method::GET,
                "/api/v1/nodes",
                Some("watch=true&resourceVersion=1"),
                ("watch", "nodes"),
            ),
            (Method::GET, "/api/v1/nodes/n1", None, ("get", "nodes")),
            (Method::PATCH, "/api/v1/nodes/n1", None, ("patch", "nodes")),
            (
                Method::POST,
                "/api/v1/namespaces/ns/pods/p/eviction",
                None,
                ("create", "eviction"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns/secrets",
                None,
                ("list", "secrets"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns",
                None,
                ("get", "namespaces"),
            ),
            (
                Method::PATCH,
                "/apis/node.bootc.dev/v1alpha1/bootcnodepools/p/status",
                None,
                ("patch", "status"),
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
                None,
                ("update", "leases"),
            ),
            (
                Method::DELETE,
                "/apis/node.bootc.dev/v1alpha1/bootcnodes/n",
                None,
                ("delete", "bootcnodes"),
            ),
            (Method::GET, "/version", None, ("get", "other")),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(api_verb(&method, path, query), want, "{method} {path}");
        }
    }

    #[test]
    fn phases_are_timed_from_their_start_only() {
        let mut clock = PhaseClock::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // First seen mid-staging: not a whole phase.
        let o = clock.observe("p", &summary(&[("a", NodeState::Staging)], &[]), &[], at(0));
        assert_eq!(o.longest.get(&Phase::Staging), Some(&Duration::ZERO));
        let o = clock.observe("p", &summary(&[("a", NodeState::Staged)], &[]), &[], at(5));
        assert!(o.phases.is_empty(), "{o:?}");
        // A whole cycle: staged, draining, rebooting (timed), up to date.
        clock.observe(
            "p",
            &summary(&[("a", NodeState::Staged)], &["a"]),
            &[],
            at(10),
        );
        clock.observe(
            "p",
            &summary(&[("a", NodeState::Rebooting)], &[]),
            &[],
            at(20),
        );
        let o = clock.observe(
            "p",
            &summary(&[("a", NodeState::Rebooting)], &[]),
            &[],
            at(50),
        );
        assert_eq!(
            o.longest.get(&Phase::Rebooting),
            Some(&Duration::from_secs(30))
        );
        // Between reconciles, the time in phase goes on.
        let key = ("p".to_owned(), Phase::Rebooting);
        assert_eq!(
            clock.longest(at(70)).get(&key),
            Some(&Duration::from_secs(50))
        );
        let o = clock.observe(
            "p",
            &summary(&[("a", NodeState::UpToDate)], &[]),
            &[],
            at(80),
        );
        assert_eq!(o.phases, vec![(Phase::Rebooting, Duration::from_secs(60))]);
        assert!(o.updates.is_empty(), "the update's start was not seen");
        // The next update is seen whole.
        clock.observe(
            "p",
            &summary(&[("a", NodeState::Pending)], &[]),
            &[],
            at(100),
        );
        clock.observe(
            "p",
            &summary(&[("a", NodeState::Staging)], &[]),
            &[],
            at(110),
        );
        let o = clock.observe(
            "p",
            &summary(&[("a", NodeState::Staged)], &[]),
            &[],
            at(140),
        );
        assert_eq!(o.phases, vec![(Phase::Staging, Duration::from_secs(30))]);
        let o = clock.observe(
            "p",
            &summary(&[("a", NodeState::UpToDate)], &[]),
            &[],
            at(200),
        );
        assert_eq!(o.updates, vec![Duration::from_secs(100)]);
    }

    /// Each plan walks its members along the clock: members joining,
    /// leaving and draining among others are each timed as their own.
    #[test]
    fn every_member_is_timed_on_its_own_as_members_come_and_go() {
        use NodeState::{Pending, Rebooting, Staged, Staging, UpToDate};
        let mut clock = PhaseClock::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let secs = Duration::from_secs;
        let o = clock.observe(
            "p",
            &summary(&[("a", Staging), ("b", Staged), ("c", Pending)], &["b"]),
            &[],
            at(0),
        );
        let counts = [
            (Phase::Pending, 1),
            (Phase::Staging, 1),
            (Phase::Draining, 1),
        ];
        assert_eq!(o.counts, counts.into_iter().collect());
        // c leaves, d joins.
        let o = clock.observe(
            "p",
            &summary(&[("a", Staging), ("b", Rebooting), ("d", Staging)], &[]),
            &[],
            at(10),
        );
        assert_eq!(
            o.longest.get(&Phase::Staging),
            Some(&secs(10)),
            "a's, not d's"
        );
        assert_eq!(o.longest.get(&Phase::Rebooting), Some(&secs(0)));
        let o = clock.observe(
            "p",
            &summary(
                &[
                    ("a", Staging),
                    ("b", UpToDate),
                    ("c", Staging),
                    ("d", Staging),
                ],
                &[],
            ),
            &[],
            at(25),
        );
        assert_eq!(o.phases, vec![(Phase::Rebooting, secs(15))], "b's");
        assert_eq!(o.longest.get(&Phase::Staging), Some(&secs(25)), "a's");
        // c is new again: its first stay was forgotten when it left.
        let c = clock.pools["p"].nodes["c"];
        assert_eq!((c.since, c.whole), (at(25), false));
        assert_eq!(clock.pools["p"].nodes.len(), 4);
    }

    #[test]
    fn rollouts_are_timed_between_their_events() {
        let mut clock = PhaseClock::default();
        let t0 = Instant::now();
        let ev = |reason| PlannedEvent {
            reason,
            message: String::new(),
            warning: false,
            node: None,
        };
        let s = summary(&[], &[]);
        let o = clock.observe("p", &s, &[ev(event_reasons::ROLLOUT_STARTED)], t0);
        assert!(o.rollout_started);
        let o = clock.observe(
            "p",
            &s,
            &[ev(event_reasons::ROLLOUT_COMPLETE)],
            t0 + Duration::from_secs(90),
        );
        assert_eq!(o.rollout, Some(Duration::from_secs(90)));
    }

    #[test]
    fn pool_series_follow_the_plan_and_go_with_the_pool() {
        let m = Metrics::new();
        let s = Summary {
            slots_in_use: 1,
            halted: true,
            ..summary(
                &[
                    ("a", NodeState::UpToDate),
                    ("b", NodeState::Staged),
                    ("c", NodeState::Staged),
                ],
                &["b"],
            )
        };
        m.observe_plan("web", &s, &[], Some(api::Reason::RolloutHalted.as_str()));
        let text = m.render();
        for line in [
            "bootc_pool_nodes{pool=\"web\",phase=\"UpToDate\"} 1",
            "bootc_pool_nodes{pool=\"web\",phase=\"Draining\"} 1",
            "bootc_pool_nodes{pool=\"web\",phase=\"Staged\"} 1",
            "bootc_pool_nodes{pool=\"web\",phase=\"Rebooting\"} 0",
            "bootc_pool_reboot_slots{pool=\"web\"} 1",
            "bootc_pool_reboot_slots_in_use{pool=\"web\"} 1",
            "bootc_pool_rollout_halted{pool=\"web\"} 1",
            "bootc_pool_degraded{pool=\"web\",reason=\"RolloutHalted\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
        m.observe_plan("web", &s, &[], None);
        assert!(
            !m.render().contains("bootc_pool_degraded{"),
            "healthy: no series"
        );
        let asked = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let next = jiff::Timestamp::from_second(1_800_000_300).unwrap();
        m.tag_schedule("web", asked, next);
        let text = m.render();
        for line in [
            "bootc_tag_last_resolution_timestamp_seconds{pool=\"web\"} 1800000000",
            "bootc_tag_next_resolution_timestamp_seconds{pool=\"web\"} 1800000300",
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
        m.forget_pool("web");
        assert!(!m.render().contains("pool=\"web\""), "{}", m.render());
    }
}
