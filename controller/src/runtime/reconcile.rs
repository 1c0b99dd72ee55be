//! One reconcile of a pool, in four steps: gather the input from the caches,
//! plan (the `rollout` crate; the pool's memo, phase clock and timing are in
//! its [`PoolState`]), act (the actuator), record (metrics, pace, requeue);
//! a plan's writes that outlast `Pace::reconcile_writes` are made after the
//! record, while the pool rests (see `pace`).
//! A deleted pool's cleanup runs through the finalizer and ends by
//! forgetting everything kept about the pool, in one place.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::Node;
use api::labels::POOL_FINALIZER;
use api::{BootcNode, BootcNodePool};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use rollout::{Plan, PlanInput};

use super::liveness::Liveness;
use super::members::{self, Changes, Chosen, Members, Pending};
use super::pace::{self, Pace};
use super::pool_state::{Planned, PoolState, PoolStates};
use super::selection::Selection;
use super::synced::{Cache, Synced};
use super::{Error, secret_version};
use crate::actions::actuator::{Actuator, OwnWrites, Writing, Written};
use crate::actions::daemon_secrets::Grant;
use crate::actions::drain::Drains;
use crate::actions::silences::Silencer;
use crate::cache::ByName;
use crate::gates::Gatekeeper;
use crate::target::{Resolution, Resolve};

/// The caches a reconcile reads.
pub struct Caches {
    pub pools: Store<BootcNodePool>,
    pub nodes: ByName<Node>,
    pub bootc_nodes: ByName<BootcNode>,
    pub secrets: Store<Secret>,
    /// The operator's Namespace alone: the fleet's switch.
    pub fleet: Store<Namespace>,
}

/// The settings a reconcile follows.
pub struct Tuning {
    /// Where events go and pull secrets live.
    pub namespace: String,
    /// Reconcile every pool at least this often even without events.
    pub resync: Duration,
    pub deadlines: rollout::reboot::stuck::Deadlines,
    pub pace: Pace,
    /// Set Kubernetes' Node lifecycle conditions on nodes in slots.
    pub node_lifecycle_conditions: bool,
}

/// What every reconcile shares: clients, caches, the pool states, settings.
pub struct Ctx {
    pub client: kube::Client,
    pub caches: Caches,
    pub states: Arc<PoolStates>,
    /// The names the watches saw change since each pool last looked.
    pub changes: Arc<Changes>,
    pub actuator: Actuator,
    pub drains: Drains,
    /// The daemons' Role on the pull secrets the pools name.
    pub daemon_secrets: Arc<Grant>,
    pub resolver: Arc<dyn Resolve>,
    /// Asks the pools' gates (blocking pods, alerts).
    pub gatekeeper: Gatekeeper,
    /// Makes and expires the pools' Alertmanager silences.
    pub silencer: Silencer,
    pub tuning: Tuning,
    /// The reconciles running now, for `/healthz`.
    pub liveness: Arc<Liveness>,
    /// Which caches have listed their objects.
    pub synced: Arc<Synced>,
}

/// The caches, as `members` reads them.
impl members::Caches for Caches {
    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name)
    }
    fn bn(&self, name: &str) -> Option<Arc<BootcNode>> {
        self.bootc_nodes.get(name)
    }
    fn all_nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.state()
    }
    fn all_bns(&self) -> Vec<Arc<BootcNode>> {
        self.bootc_nodes.state()
    }
    fn nodes<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<Arc<Node>> {
        self.nodes.get_all(names)
    }
    fn bns<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<Arc<BootcNode>> {
        self.bootc_nodes.get_all(names)
    }
}

/// The pool's pull secret, if it exists and opts in to the pool: what the
/// resolver may use.
pub(super) fn usable_secret(
    pool: &BootcNodePool,
    secret: Option<Arc<Secret>>,
) -> Option<Arc<Secret>> {
    secret.filter(|s| api::pull_secret::allows(&s.metadata, &pool.name_any()))
}

impl Caches {
    /// The fleet's switch, while on (its value: who and why), and whether
    /// it holds approvals too.
    fn fleet_switch(&self, namespace: &str) -> (Option<String>, bool) {
        let Some(ns) = self.fleet.get(&ObjectRef::new(namespace)) else {
            return (None, false);
        };
        rollout::holds::gates::fleet_switch(ns.annotations())
    }

    fn pull_secret(&self, pool: &BootcNodePool) -> Option<Arc<Secret>> {
        let r = pool.spec.pull_secret_ref.as_ref()?;
        self.secrets
            .get(&ObjectRef::new(&r.name).within(&r.namespace))
    }

    fn version_of<K: Resource>(object: Option<Arc<K>>) -> Option<u64> {
        object.map(|o| {
            o.meta()
                .resource_version
                .as_deref()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0)
        })
    }

    /// Have the caches seen this pool's own last writes? Planning on caches
    /// that have not would make those writes again (or, for a cleanup, miss
    /// a BootcNode just created); the watch events of those writes
    /// re-trigger the pool.
    fn caught_up(&self, name: &str, writes: &mut OwnWrites) -> bool {
        let caught_up = writes.caught_up(|w| match w {
            Written::PoolStatus => Self::version_of(self.pools.get(&ObjectRef::new(name))),
            Written::BootcNode(n) | Written::DeletedBootcNode(n) => {
                Self::version_of(self.bootc_nodes.get(n))
            }
            Written::Node(n) => Self::version_of(self.nodes.get(n)),
        });
        if !caught_up {
            tracing::debug!(pool = %name, "caches behind our own writes; waiting for them");
        }
        caught_up
    }
}

impl Ctx {
    /// The planner's input for `pool`: its chosen objects, the other pools,
    /// what the caches and the pool's state say, the gates' answers, the
    /// drains in flight, and the time.
    fn input<'a>(
        &'a self,
        pool: &'a BootcNodePool,
        chosen: Selection<'a>,
        others: &'a [Arc<BootcNodePool>],
        target: Result<rollout::Target, rollout::TargetProblem>,
        state: (&OwnWrites, &Arc<rollout::reboot::stuck::Clock>),
        (gates, drains): (
            rollout::holds::gates::Gates,
            std::collections::BTreeMap<String, rollout::DrainPhase>,
        ),
    ) -> PlanInput<'a> {
        let pull_secret = self.caches.pull_secret(pool).map(|s| rollout::SecretSeen {
            version: secret_version(&s),
            allows_pool: api::pull_secret::allows(&s.metadata, &pool.name_any()),
            pools: api::pull_secret::pools(&s.metadata)
                .into_iter()
                .map(str::to_owned)
                .collect(),
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
            drains,
            operator_namespace: &self.tuning.namespace,
            last_status_write: state.0.last_status_write(),
            now: jiff::Timestamp::now(),
            phase_clock: Arc::clone(state.1),
            deadlines: self.tuning.deadlines,
            gates,
            node_lifecycle_conditions: self.tuning.node_lifecycle_conditions,
        }
    }
}

/// The pool's objects, brought up to date with the changes recorded since
/// its last reconcile (see `members`).
fn bring_up_to_date(ctx: &Ctx, pool: &BootcNodePool, members: &mut Members) {
    let name = pool.name_any();
    let decided = members.update(pool, ctx.changes.take(&name), &ctx.caches);
    tracing::debug!(pool = %name, decided, "members brought up to date");
}

#[tracing::instrument(name = "reconcile", skip_all, fields(pool = %pool.name_any()))]
async fn apply(pool: Arc<BootcNodePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = pool.name_any();
    let mut state = ctx.states.hold(&pool);
    // Changes that arrive meanwhile are planned together (see `pace`).
    rest(&pool, &ctx, &mut state).await;
    if !ctx.caches.caught_up(&name, &mut state.writes) {
        // The event that catches the caches up triggers it at once.
        ctx.changes.rearm(&name);
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    reconcile_pool(pool, &ctx, &mut state).await
}

/// Rests before the pool's next plan (see `pace`), looking at its changed
/// members every `look_every` meanwhile ([`look`]).
async fn rest(pool: &BootcNodePool, ctx: &Ctx, state: &mut PoolState) {
    let pace = ctx.tuning.pace;
    let until = Instant::now() + pace.wait_after(state.pace);
    loop {
        let next = Instant::now() + pace.look_every;
        if next >= until {
            break;
        }
        tokio::time::sleep_until(next.into()).await;
        let looking = Looking {
            members: &mut state.members,
            writes: &mut state.writes,
            phase_clock: &state.phase_clock,
            planned: state.planned.as_ref(),
            busy: None,
        };
        if let Some(freeing) = look(pool, ctx, looking) {
            give_back(ctx, freeing, &mut state.writes).await;
        }
    }
    tokio::time::sleep_until(until.into()).await;
}

/// What a look reads and writes of its pool's state.
struct Looking<'s, 'w> {
    members: &'s mut Members,
    writes: &'s mut OwnWrites,
    phase_clock: &'s Arc<rollout::reboot::stuck::Clock>,
    planned: Option<&'s Planned>,
    /// The writes a plan is making (none while the pool rests): a member
    /// whose writes are in flight or still to come has its answer from that
    /// plan, not from a look.
    busy: Option<&'s Writing<'w>>,
}

/// Between two plans of the whole pool, and while one makes its writes:
/// gives back the slots of the members changed since the last look that
/// are back (`rollout::releases`), reading those members alone, with the
/// target the last plan had. Not for a member whose last write by the
/// controller the caches have not seen yet, nor once the pool's spec
/// changed (its next plan reads the new one), nor for a pool with a health
/// gate (a proof reads the pods the gatekeeper lists at each plan).
fn look(pool: &BootcNodePool, ctx: &Ctx, looking: Looking<'_, '_>) -> Option<Freeing> {
    let name = pool.name_any();
    let pool = ctx.caches.pools.get(&ObjectRef::new(&name))?;
    let planned = looking.planned?;
    let writes = looking.writes;
    ctx.caches.caught_up(&name, writes);
    if planned.generation != pool.metadata.generation
        || pool.spec.health.is_some()
        || writes.waits_on_status()
    {
        return None;
    }
    // Only a slot's holder can give it back: the others are left to the
    // next plan (20,000 of them when a large pool's rollout starts).
    let holders: BTreeSet<String> = ctx
        .changes
        .fresh(&name)
        .into_iter()
        .filter(|n| {
            let (node, bn) = (ctx.caches.nodes.get(n), ctx.caches.bootc_nodes.get(n));
            rollout::reboot::slots::holds_slot(node.as_deref(), bn.as_deref(), &name)
        })
        .collect();
    // A holder with a write of ours on its way is read again next time.
    let (later, holders): (BTreeSet<String>, _) = holders
        .into_iter()
        .partition(|n| writes.waits_on(n) || looking.busy.is_some_and(|w| w.pending(n)));
    ctx.changes.again(&name, later);
    if holders.is_empty() {
        return None;
    }
    let names = Pending::Names(holders.iter().cloned().collect());
    looking.members.update(&pool, names, &ctx.caches);
    let (nodes, bns) = looking.members.some(&holders, &ctx.caches);
    let freeing = {
        let chosen = Selection {
            nodes: nodes.iter().map(AsRef::as_ref).collect(),
            bns: bns.iter().map(AsRef::as_ref).collect(),
            ..Selection::default()
        };
        let mut gates = rollout::holds::gates::Gates::default();
        (gates.fleet_stop, gates.fleet_holds_approvals) =
            ctx.caches.fleet_switch(&ctx.tuning.namespace);
        let pools = ctx.caches.pools.state();
        let target = Ok(planned.target.clone());
        let state = (&*writes, looking.phase_clock);
        // The holders' drains alone (a large pool has thousands).
        let drains = ctx.drains.snapshot_of(&name, &holders);
        let input = ctx.input(&pool, chosen, &pools, target, state, (gates, drains));
        rollout::releases(&input)
    };
    drop((nodes, bns));
    (!freeing.is_empty()).then_some((pool, freeing))
}

/// The writes a look found, for its pool.
type Freeing = (Arc<BootcNodePool>, rollout::Writes);

/// Makes a look's writes.
async fn give_back(ctx: &Ctx, (pool, freeing): Freeing, writes: &mut OwnWrites) {
    let name = pool.name_any();
    match ctx.actuator.write(&pool, freeing, writes).await {
        Ok(made) => tracing::info!(pool = %name, writes = made, "slots given back at a look"),
        Err(error) => {
            tracing::warn!(pool = %name, %error, "giving slots back at a look failed; the next plan tries again");
        }
    }
}

/// Step 1, gather: the pool's objects brought up to date, and how long
/// choosing them took (for pacing). None when a person's retry request was
/// answered first: its write re-triggers the pool.
async fn gather(
    pool: &BootcNodePool,
    ctx: &Ctx,
    members: &mut Members,
) -> Result<Option<(Duration, Chosen)>, Error> {
    ctx.daemon_secrets.sync(pool).await;
    let selecting = Instant::now();
    bring_up_to_date(ctx, pool, members);
    let objects = members.chosen(&ctx.caches);
    let selected = selecting.elapsed();
    let asking = members.retry_requests(&ctx.caches);
    let retries = crate::actions::retry::requests(pool, asking.iter().map(AsRef::as_ref));
    let answered = crate::actions::retry::honour(&ctx.client, &pool.name_any(), &retries)
        .await
        .map_err(Error::Retry)?;
    if let Some(request) = crate::actions::retry::pool_request(pool, objects.bns()) {
        crate::actions::retry::honour_pool(&ctx.client, &pool.name_any(), &request)
            .await
            .map_err(Error::Retry)?;
        return Ok(None);
    }
    Ok((answered == 0).then_some((selected, objects)))
}

/// One reconcile of a pool: gather, plan, act, record.
async fn reconcile_pool(
    pool: Arc<BootcNodePool>,
    ctx: &Ctx,
    state: &mut PoolState,
) -> Result<Action, Error> {
    let started = Instant::now();
    // The freshest copy of the pool (its status included).
    let pool = ctx
        .caches
        .pools
        .get(&ObjectRef::from_obj(&*pool))
        .unwrap_or(pool);
    let PoolState {
        members,
        memo,
        phase_clock,
        pace,
        target,
        writes,
        gates,
        silences,
        planned,
    } = state;
    let Some((selected, objects)) = gather(&pool, ctx, members).await? else {
        return Ok(Action::requeue(ctx.tuning.resync));
    };
    // Steps 1 and 2 read the objects chosen; the writes of step 3 do not,
    // and the objects go before them (see `Members::chosen`).
    let (mut plan, resolution, took, read) = {
        let chosen = objects.selection();
        let secret = usable_secret(&pool, ctx.caches.pull_secret(&pool));
        let resolution = ctx
            .resolver
            .resolve(&pool, secret.as_deref(), chosen.members_run(), target)
            .await;
        let pool_name = pool.name_any();
        let members = crate::gates::Members {
            // A slot is recorded on the Node (on the BootcNode by 0.1.0).
            in_slots: || {
                chosen
                    .nodes
                    .iter()
                    .any(|n| rollout::holds::disruption::recorded_for(n, &pool_name))
                    || chosen.bns.iter().any(|bn| bn.legacy_slot_record())
            },
            silent: || chosen.bns.iter().any(|bn| bn.owes_an_answer()),
        };
        let selects = !chosen.nodes.is_empty();
        let mut gates = ctx.gatekeeper.ask(&pool, gates, members, selects).await;
        (gates.fleet_stop, gates.fleet_holds_approvals) =
            ctx.caches.fleet_switch(&ctx.tuning.namespace);
        gates.silences = ctx.silencer.check(&pool, silences).await;
        let read = Read {
            generation: pool.metadata.generation,
            fleet_stopped: gates.fleet_stop.is_some(),
        };
        // Step 2, plan.
        let planning = Instant::now();
        let pools = ctx.caches.pools.state();
        let target = resolution.target.clone();
        *planned = target.as_ref().ok().map(|target| Planned {
            generation: pool.metadata.generation,
            target: target.clone(),
        });
        let drains = ctx.drains.snapshot(&pool.name_any());
        let state = (&*writes, &*phase_clock);
        let input = ctx.input(&pool, chosen, &pools, target, state, (gates, drains));
        let mut plan = rollout::plan_incremental(&input, memo);
        let (reused, computed) = memo.reused_and_computed();
        tracing::debug!(pool = %pool.name_any(), reused, computed, "planned");
        let phases = std::mem::take(&mut plan.phases);
        *phase_clock = Arc::new(rollout::reboot::stuck::tick(
            &input.phase_clock,
            phases,
            input.now,
        ));
        // What pacing counts: choosing the pool's objects and planning.
        (plan, resolution, selected + planning.elapsed(), read)
    };
    drop(objects);
    // Step 3, act: the silences of the slots first, then the writes
    // (a node is silenced before it is cordoned) for `reconcile_writes`,
    // then the status and events.
    let holders = plan.summary.standings.pool.holders.iter();
    let holders = holders.map(|(name, _)| name.clone()).collect();
    let silences_due = ctx.silencer.sync(&pool, holders, silences).await;
    let acting = (members, writes, &*phase_clock, &*planned, read);
    let acted = act_and_record(&pool, ctx, &mut plan, acting, (started, took)).await;
    *pace = Some(pace::Last::ended_now(took, plan.summary.states.len()));
    acted?;
    let requeue = requeue_after(ctx, &plan, &resolution);
    // Read: the next plan refills its per-member maps.
    memo.recycle(plan.summary);
    Ok(Action::requeue(
        silences_due.map_or(requeue, |due| due.min(requeue)),
    ))
}

/// What a plan read that, once changed, cuts its writes short.
#[derive(Clone, Copy, Debug)]
struct Read {
    generation: Option<i64>,
    fleet_stopped: bool,
}

/// Why a plan's writes not yet started are dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// Its next plan reads the new spec (a pause, a lower `maxUnavailable`).
    SpecChanged,
    Deleted,
    /// The operator's Namespace says stop: no new slot.
    FleetStopped,
}

impl Read {
    /// Should the writes of a plan that read `self` be cut short, now
    /// that the pool is `pool` (None: gone) and the fleet stopped or not?
    fn cut(self, pool: Option<&BootcNodePool>, fleet_stopped: bool) -> Option<Cut> {
        match pool {
            None => Some(Cut::Deleted),
            Some(p) if p.metadata.deletion_timestamp.is_some() => Some(Cut::Deleted),
            Some(p) if p.metadata.generation != self.generation => Some(Cut::SpecChanged),
            _ if fleet_stopped && !self.fleet_stopped => Some(Cut::FleetStopped),
            _ => None,
        }
    }
}

/// What acting on a plan reads and writes of its pool's state.
type Acting<'s> = (
    &'s mut Members,
    &'s mut OwnWrites,
    &'s Arc<rollout::reboot::stuck::Clock>,
    &'s Option<Planned>,
    Read,
);

/// Steps 3 and 4: the plan's writes for `reconcile_writes`, its status
/// and events, the record of the reconcile (`started`, with `took` for
/// planning); then the writes left, while the pool rests.
async fn act_and_record(
    pool: &BootcNodePool,
    ctx: &Ctx,
    plan: &mut Plan,
    (members, writes, phase_clock, planned, read): Acting<'_>,
    (started, took): (Instant, Duration),
) -> Result<(), Error> {
    let mut writing = ctx.actuator.writing(pool, std::mem::take(&mut plan.writes));
    let within = Some(Instant::now() + ctx.tuning.pace.reconcile_writes);
    let acting = (&mut *members, &mut *writes, phase_clock, planned, read);
    let all_made = act(pool, ctx, &mut writing, within, acting).await?;
    let made = writing.made() + ctx.actuator.conclude(pool, plan, writes).await?;
    record(pool, plan, made, started, took);
    if all_made {
        return Ok(());
    }
    let acting = (members, writes, phase_clock, planned, read);
    act(pool, ctx, &mut writing, None, acting).await?;
    let elapsed_us = started.elapsed().as_micros();
    tracing::info!(pool = %pool.name_any(), writes = writing.made(), elapsed_us, "a plan's writes made after its reconcile");
    Ok(())
}

/// Makes `writing`'s writes until all are made (true; how many, in
/// [`Writing::made`]) or until `within` (false); every `look_every`, a look
/// at the members whose writes are made or none (see [`look`]), and the
/// writes not started dropped once the pool's spec changed or the fleet was
/// stopped since the plan ([`Read::cut`]).
async fn act(
    pool: &BootcNodePool,
    ctx: &Ctx,
    writing: &mut Writing<'_>,
    within: Option<Instant>,
    (members, writes, phase_clock, planned, read): Acting<'_>,
) -> Result<bool, Error> {
    let name = pool.name_any();
    loop {
        let look_at = Instant::now() + ctx.tuning.pace.look_every;
        let until = within.map_or(look_at, |w| w.min(look_at));
        if let Some(made) = writing.until(writes, Some(until)).await {
            made?;
            return Ok(true);
        }
        if within.is_some_and(|w| Instant::now() >= w) {
            return Ok(false);
        }
        let now = ctx.caches.pools.get(&ObjectRef::new(&name));
        let fleet_stopped = ctx.caches.fleet_switch(&ctx.tuning.namespace).0.is_some();
        if let Some(why) = read.cut(now.as_deref(), fleet_stopped) {
            let dropped = writing.cut();
            if dropped > 0 {
                tracing::info!(pool = %name, ?why, nodes = dropped, "a plan's writes cut short; the next plan decides them again");
            }
        }
        let looking = Looking {
            members: &mut *members,
            writes: &mut *writes,
            phase_clock,
            planned: planned.as_ref(),
            busy: Some(&*writing),
        };
        if let Some(freeing) = look(pool, ctx, looking) {
            give_back(ctx, freeing, writes).await;
        }
    }
}

/// The metrics and the log line of a reconcile that made `made` writes.
/// `planning` is what pacing counted.
fn record(pool: &BootcNodePool, plan: &Plan, made: usize, started: Instant, planning: Duration) {
    let name = pool.name_any();
    let status = plan.status.as_ref().or(pool.status.as_ref());
    let degraded = status
        .filter(|s| api::conditions::is_true(&s.conditions, api::ConditionType::Degraded))
        .and_then(|s| api::conditions::reason(&s.conditions, api::ConditionType::Degraded));
    let metrics = crate::metrics::global();
    metrics.observe_plan(&name, &plan.summary, &plan.events, degraded);
    metrics.reconciled(started.elapsed());
    let elapsed_us = started.elapsed().as_micros();
    let planning_us = planning.as_micros();
    if made > 0 {
        tracing::info!(pool = %name, writes = made, elapsed_us, planning_us, "reconciled");
    } else {
        tracing::debug!(pool = %name, elapsed_us, planning_us, "reconciled; nothing to change");
    }
}

/// The soonest of the resync, the plan's and the resolution's requeues.
fn requeue_after(ctx: &Ctx, plan: &Plan, resolution: &Resolution) -> Duration {
    [plan.requeue_after, resolution.requeue_after]
        .into_iter()
        .flatten()
        .fold(ctx.tuning.resync, Duration::min)
}

#[tracing::instrument(name = "cleanup", skip_all, fields(pool = %pool.name_any()))]
async fn cleanup(pool: Arc<BootcNodePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = pool.name_any();
    let mut state = ctx.states.hold(&pool);
    // An Ok here removes the finalizer: waiting must be an error.
    if !ctx.caches.caught_up(&name, &mut state.writes) {
        ctx.changes.rearm(&name);
        return Err(Error::CachesBehind);
    }
    let nodes = ctx.caches.nodes.state();
    let bns = ctx.caches.bootc_nodes.state();
    let input = ctx.input(
        &pool,
        Selection::of(&pool, &nodes, &bns),
        &[],
        Err(rollout::TargetProblem {
            reason: api::Reason::InvalidSpec,
            message: "pool is being deleted".into(),
        }),
        (&state.writes, &state.phase_clock),
        (
            rollout::holds::gates::Gates::default(),
            ctx.drains.snapshot(&name),
        ),
    );
    let finishing = rollout::finishing(&input);
    if !finishing.is_empty() {
        drop(input);
        // Planned as usual meanwhile: the plan hands out no new slot.
        tracing::debug!(pool = %name, ?finishing, "pool deleted: the nodes in reboot slots finish first (spec.onDelete: Finish)");
        reconcile_pool(pool, &ctx, &mut state).await?;
        return Err(Error::CleanupWaiting { nodes: finishing });
    }
    let cleanup = rollout::plan_cleanup(&input);
    let n = ctx
        .actuator
        .write(&pool, cleanup.writes, &mut state.writes)
        .await?;
    if !cleanup.waiting.is_empty() {
        tracing::info!(pool = %name, writes = n, waiting = ?cleanup.waiting, "pool deleted: waiting for nodes it disrupted to be back");
        return Err(Error::CleanupWaiting {
            nodes: cleanup.waiting,
        });
    }
    // Its silences expired (best effort: each ends by itself anyway).
    let none = std::collections::BTreeSet::new();
    ctx.silencer.sync(&pool, none, &mut state.silences).await;
    // The one place a pool is forgotten.
    state.forget();
    ctx.changes.forget(&name);
    crate::metrics::global().forget_pool(&name);
    tracing::info!(pool = %name, writes = n, "pool deleted: cordons restored, labels and BootcNodes removed");
    Ok(Action::await_change())
}

pub(super) async fn reconcile(pool: Arc<BootcNodePool>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let _running = ctx.liveness.start();
    ctx.synced
        .wait(&[
            Cache::Nodes,
            Cache::BootcNodes,
            Cache::Secrets,
            Cache::Fleet,
        ])
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

pub(super) fn error_policy(pool: Arc<BootcNodePool>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    if let Error::CleanupWaiting { .. } = error {
        tracing::debug!(pool = %pool.name_any(), %error, "cleanup waiting");
        return Action::requeue(Duration::from_secs(2));
    }
    tracing::warn!(pool = %pool.name_any(), %error, "reconcile failed; retrying");
    crate::metrics::global().reconcile_failed(error.kind());
    Action::requeue(Duration::from_secs(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::test_support::PoolBuilder;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn a_plans_writes_are_cut_short_when_what_it_read_changes() {
        let read = Read {
            generation: Some(3),
            fleet_stopped: false,
        };
        let at = |generation: i64| {
            let mut pool = PoolBuilder::new("p").build();
            pool.metadata.generation = Some(generation);
            pool
        };
        let mut deleted = at(3);
        deleted.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        let stopped_before = Read {
            fleet_stopped: true,
            ..read
        };
        // (what, read at the plan, the pool now, the fleet stopped now, cut)
        let rows = [
            ("nothing changed", read, Some(at(3)), false, None),
            (
                "a new spec",
                read,
                Some(at(4)),
                false,
                Some(Cut::SpecChanged),
            ),
            (
                "the pool deleted",
                read,
                Some(deleted),
                false,
                Some(Cut::Deleted),
            ),
            ("the pool gone", read, None, false, Some(Cut::Deleted)),
            (
                "the fleet stopped",
                read,
                Some(at(3)),
                true,
                Some(Cut::FleetStopped),
            ),
            (
                "stopped already at the plan",
                stopped_before,
                Some(at(3)),
                true,
                None,
            ),
        ];
        for (what, read, pool, fleet_stopped, want) in rows {
            assert_eq!(read.cut(pool.as_ref(), fleet_stopped), want, "{what}");
        }
    }
}
