//! The nodes section's rollout, phase by phase: while the pool goes from v1
//! to v2, watches on Nodes, BootcNodes, the workload's Pods and its
//! PodDisruptionBudget, and Events note when each step became visible; the
//! fake bootc's record gives each apply, the controller's log each drain's
//! end. Each node's turn is then cut into phases, each with its owner: the
//! operator's ([`Owner::Ours`]), the workload's (its pods' termination
//! grace, its replacement becoming Ready while the budget refuses the next
//! eviction), bootc's download, and the node's own reboot. The critical
//! path (the pool's change to the last node Ready on v2) is the same cut
//! along the slot's order, so its shares add up to the rollout.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use api::BootcNode;
use api::Node;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;

use crate::report::{Report, percentile, row};
use tests::nodes::pool::digest_of;

/// A step of a node's turn, as a watch (or a log) shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mark {
    /// The pool's spec changed, as a watch saw it (node: the pool's name).
    PoolChanged,
    /// Its BootcNode names v2.
    Told,
    /// Its daemon reports v2 staged.
    Staged,
    /// The slot's record on the Node, written with its cordon.
    SlotTaken,
    /// The controller's log: its drain finished.
    DrainDone,
    /// Its BootcNode approved to boot v2.
    Approved,
    /// bootc's apply called (the fake bootc's record).
    Applied,
    NotReady,
    Ready,
    /// Its daemon's container (re)started, as its kubelet reports it.
    DaemonStarted,
    /// Its daemon reports v2 booted.
    OnTarget,
    /// The slot's record removed, with the uncordon.
    SlotReleased,
}

/// One workload pod's life, as the pods' watch saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PodLife {
    pub(crate) node: Option<String>,
    pub(crate) seen: Option<Timestamp>,
    pub(crate) ready: Option<Timestamp>,
    /// Its deletion (the eviction) first seen.
    pub(crate) evicted: Option<Timestamp>,
    pub(crate) gone: Option<Timestamp>,
}

/// What the watches saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct Log {
    pub(crate) marks: Vec<(Timestamp, String, Mark)>,
    pub(crate) pods: BTreeMap<String, PodLife>,
    /// The budget's `disruptionsAllowed` each time it changed.
    pub(crate) budget: Vec<(Timestamp, i32)>,
    /// The controller's `DrainBlocked` Events (a pod's first refusal).
    pub(crate) refusals: Vec<Timestamp>,
}

/// Watches until dropped.
pub(crate) struct Recorder {
    log: Arc<Mutex<Log>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Runs `on` for every event of a watch of `api`; `synced` once the first
/// list is in.
fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    log: Arc<Mutex<Log>>,
    synced: Arc<tokio::sync::Barrier>,
    mut on: impl FnMut(Timestamp, watcher::Event<K>, &mut Log) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, config).boxed();
        let mut first = true;
        while let Some(event) = stream.next().await {
            let Ok(event) = event else { continue };
            let done = matches!(event, watcher::Event::InitDone);
            if let Ok(mut log) = log.lock() {
                on(Timestamp::now(), event, &mut log);
            }
            if done && std::mem::take(&mut first) {
                synced.wait().await;
            }
        }
    })
}

/// An object's flags, each rise or fall its mark (`marks[i]`: fall, rise).
fn flags<const N: usize>(
    last: &mut BTreeMap<String, [bool; N]>,
    name: String,
    now: [bool; N],
    marks: [[Option<Mark>; 2]; N],
    at: Timestamp,
    log: &mut Log,
) {
    if let Some(before) = last.insert(name.clone(), now) {
        for i in 0..N {
            if before[i] != now[i]
                && let Some(m) = marks[i][usize::from(now[i])]
            {
                log.marks.push((at, name.clone(), m));
            }
        }
    }
}

fn applied<K>(event: watcher::Event<K>) -> Option<K> {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Some(o),
        _ => None,
    }
}

impl Recorder {
    /// Starts the watches (the workload's pods and budget: `namespace`,
    /// `app=<app>`, the budget named `app`) and returns once each has
    /// listed; `v2` is the image the pool changes to.
    pub(crate) async fn start(admin: &kube::Client, v2: &str, namespace: &str, app: &str) -> Self {
        let log = Arc::new(Mutex::new(Log::default()));
        let synced = Arc::new(tokio::sync::Barrier::new(8));
        let all = watcher::Config::default();
        let mut tasks = Vec::new();
        let v2 = v2.to_owned();
        let mut bns = BTreeMap::new();
        tasks.push(watch(
            Api::<BootcNode>::all(admin.clone()),
            all.clone(),
            log.clone(),
            synced.clone(),
            move |at, e, log| on_bootc_node(&mut bns, &v2, at, e, log),
        ));
        let mut generations = BTreeMap::new();
        tasks.push(watch(
            Api::<api::BootcNodePool>::all(admin.clone()),
            all.clone(),
            log.clone(),
            synced.clone(),
            move |at, e, log| on_pool(&mut generations, at, e, log),
        ));
        let mut nodes = BTreeMap::new();
        tasks.push(watch(
            Api::<Node>::all(admin.clone()),
            all.clone(),
            log.clone(),
            synced.clone(),
            move |at, e, log| {
                let Some(n) = applied(e) else { return };
                let now = [
                    api::node_health::disrupted_by(&n).is_some(),
                    api::node_health::is_ready(&n),
                ];
                let marks = [
                    [Some(Mark::SlotReleased), Some(Mark::SlotTaken)],
                    [Some(Mark::NotReady), Some(Mark::Ready)],
                ];
                flags(&mut nodes, n.name_any(), now, marks, at, log);
            },
        ));
        let selected = all.clone().labels(&format!("app={app}"));
        tasks.push(watch(
            Api::<Pod>::namespaced(admin.clone(), namespace),
            selected,
            log.clone(),
            synced.clone(),
            on_pod,
        ));
        let mut daemons = BTreeMap::new();
        tasks.push(watch(
            Api::<Pod>::namespaced(admin.clone(), tests::control_plane::DAEMON_NAMESPACE),
            all.clone(),
            log.clone(),
            synced.clone(),
            move |at, e, log| on_daemon_pod(&mut daemons, at, e, log),
        ));
        let named = all.clone().fields(&format!("metadata.name={app}"));
        tasks.push(watch(
            Api::<PodDisruptionBudget>::namespaced(admin.clone(), namespace),
            named,
            log.clone(),
            synced.clone(),
            |at, e, log| {
                let Some(pdb) = applied(e) else { return };
                let allowed = pdb.status.map_or(0, |s| s.disruptions_allowed);
                if log.budget.last().is_none_or(|(_, a)| *a != allowed) {
                    log.budget.push((at, allowed));
                }
            },
        ));
        tasks.push(watch(
            Api::<Event>::all(admin.clone()),
            all,
            log.clone(),
            synced.clone(),
            |at, e, log| {
                let initial = matches!(e, watcher::Event::InitApply(_));
                let Some(ev) = applied(e) else { return };
                if !initial && ev.reason.as_deref() == Some(api::event_reasons::DRAIN_BLOCKED) {
                    log.refusals.push(at);
                }
            },
        ));
        // A watch that never lists leaves its marks out, not the run hung.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), synced.wait()).await;
        Recorder { log, tasks }
    }

    /// What was seen, with `more` marks (applies, drains) added, in order.
    pub(crate) fn log(&self, more: Vec<(Timestamp, String, Mark)>) -> Log {
        let mut log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        log.marks.extend(more);
        log.marks.sort();
        log
    }
}

/// A BootcNode's marks toward `v2` (`last`: its flags, by name).
fn on_bootc_node(
    last: &mut BTreeMap<String, [bool; 4]>,
    v2: &str,
    at: Timestamp,
    e: watcher::Event<BootcNode>,
    log: &mut Log,
) {
    let Some(bn) = applied(e) else { return };
    let told = bn.spec.desired_image.ends_with(digest_of(v2));
    let staged = bn
        .status
        .as_ref()
        .and_then(|s| s.staged.as_ref())
        .is_some_and(|s| s.is_image(v2))
        || bn.runs(v2);
    let marks = [Mark::Told, Mark::Staged, Mark::Approved, Mark::OnTarget].map(|m| [None, Some(m)]);
    let now = [told, staged, told && bn.approved(), bn.runs(v2)];
    flags(last, bn.name_any(), now, marks, at, log);
}

/// A pool's spec changed: its generation moved (`generations`: by name).
fn on_pool(
    generations: &mut BTreeMap<String, Option<i64>>,
    at: Timestamp,
    e: watcher::Event<api::BootcNodePool>,
    log: &mut Log,
) {
    let initial = matches!(e, watcher::Event::InitApply(_));
    let Some(pool) = applied(e) else { return };
    let name = pool.name_any();
    let generation = pool.metadata.generation;
    let before = generations.insert(name.clone(), generation);
    if !initial && before.is_some_and(|b| b != generation) {
        log.marks.push((at, name, Mark::PoolChanged));
    }
}

/// A daemon pod's container (re)started: its start time changed
/// (`started`: the last seen, by pod).
fn on_daemon_pod(
    started: &mut BTreeMap<String, Option<String>>,
    at: Timestamp,
    e: watcher::Event<Pod>,
    log: &mut Log,
) {
    let (pod, initial) = match e {
        watcher::Event::Apply(p) => (p, false),
        watcher::Event::InitApply(p) => (p, true),
        _ => return,
    };
    let running = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| t.0.to_string());
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let before = started.insert(pod.name_any(), running.clone());
    if let (false, Some(node), Some(_)) = (initial, node, &running)
        && before.flatten() != running
    {
        log.marks.push((at, node, Mark::DaemonStarted));
    }
}

fn on_pod(at: Timestamp, e: watcher::Event<Pod>, log: &mut Log) {
    let (pod, deleted) = match e {
        watcher::Event::Apply(p) | watcher::Event::InitApply(p) => (p, false),
        watcher::Event::Delete(p) => (p, true),
        _ => return,
    };
    let life = log.pods.entry(pod.name_any()).or_default();
    life.seen.get_or_insert(at);
    if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
        life.node = Some(node);
    }
    if api::node_health::pod_ready(&pod).is_some_and(|(ready, _)| ready) {
        life.ready.get_or_insert(at);
    }
    if deleted || pod.metadata.deletion_timestamp.is_some() {
        life.evicted.get_or_insert(at);
    }
    if deleted {
        life.gone.get_or_insert(at);
    }
}

/// Whose time a phase is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Owner {
    /// The operator's: what this project can remove.
    Ours,
    /// The workload's: its pods' grace, its replacement's readiness.
    Workload,
    /// bootc's download of the image.
    Download,
    /// The node's own reboot: the floor.
    Reboot,
    /// The node's kubelet starting the daemon's pod again after the boot.
    Kubelet,
    /// Waiting for the node before it in the slot: not a cost of its own.
    Turn,
    /// The bench's change of the pool, until a watch shows it.
    Bench,
}

impl Owner {
    fn text(self) -> &'static str {
        match self {
            Owner::Ours => "ours",
            Owner::Workload => "the workload's",
            Owner::Download => "bootc's download",
            Owner::Reboot => "the node's reboot",
            Owner::Kubelet => "the node's kubelet",
            Owner::Turn => "the previous node's turn",
            Owner::Bench => "the bench's change of the pool",
        }
    }
}

/// A phase of a node's turn, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Telling,
    Staging,
    SlotWait,
    HandOver,
    DrainOurs,
    DrainNoticed,
    DrainBudget,
    DrainGrace,
    Approval,
    ApplyCall,
    Shutdown,
    Boot,
    DaemonStart,
    DaemonBack,
    Release,
}

impl Phase {
    pub(crate) const ALL: [Phase; 15] = [
        Phase::Telling,
        Phase::Staging,
        Phase::SlotWait,
        Phase::HandOver,
        Phase::DrainOurs,
        Phase::DrainNoticed,
        Phase::DrainBudget,
        Phase::DrainGrace,
        Phase::Approval,
        Phase::ApplyCall,
        Phase::Shutdown,
        Phase::Boot,
        Phase::DaemonStart,
        Phase::DaemonBack,
        Phase::Release,
    ];

    pub(crate) fn owner(self) -> Owner {
        match self {
            Phase::Staging => Owner::Download,
            Phase::SlotWait => Owner::Turn,
            Phase::DrainBudget | Phase::DrainGrace => Owner::Workload,
            Phase::Shutdown | Phase::Boot => Owner::Reboot,
            Phase::DaemonStart => Owner::Kubelet,
            _ => Owner::Ours,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Phase::Telling => "told (the pool's change seen -> its BootcNode names v2)",
            Phase::Staging => "staging (told -> Staged)",
            Phase::SlotWait => "waiting for the slot (Staged -> the previous node released)",
            Phase::HandOver => "slot hand-over (released, or Staged -> slot taken, cordoned)",
            Phase::DrainOurs => {
                "drain, ours: a pod awaits an eviction the budget allows (asked, asked again)"
            }
            Phase::DrainNoticed => "drain, ours: every pod gone -> the drain done",
            Phase::DrainBudget => "drain, the budget refusing while the replacement becomes Ready",
            Phase::DrainGrace => "drain, the evicted pods terminating (their grace)",
            Phase::Approval => "approval written (drain done -> approved)",
            Phase::ApplyCall => "apply asked (approved -> bootc's apply called)",
            Phase::Shutdown => "shutdown (bootc's apply -> NotReady)",
            Phase::Boot => "boot (NotReady -> Ready)",
            Phase::DaemonStart => "the daemon's pod started again (Ready -> its container running)",
            Phase::DaemonBack => {
                "the daemon's report (Ready and its container running -> it reports v2 booted)"
            }
            Phase::Release => "release (Ready and on v2 -> slot released, uncordoned)",
        }
    }
}

/// One node's turn: each phase's seconds (those it went through).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Turn {
    pub(crate) node: String,
    pub(crate) phases: BTreeMap<Phase, f64>,
    /// The critical path's seconds in this turn, by owner.
    pub(crate) path: BTreeMap<Owner, f64>,
}

fn secs(from: Timestamp, to: Timestamp) -> f64 {
    (to - from)
        .total(jiff::Unit::Second)
        .unwrap_or(0.0)
        .max(0.0)
}

/// The first `mark` of `node` at or after `after`.
fn first(log: &Log, node: &str, mark: Mark, after: Timestamp) -> Option<Timestamp> {
    log.marks
        .iter()
        .find(|(t, n, m)| n == node && *m == mark && *t >= after)
        .map(|(t, ..)| *t)
}

/// The budget's allowance at `at` (before any change was seen: allowed).
fn allowed(log: &Log, at: Timestamp) -> bool {
    log.budget
        .iter()
        .take_while(|(t, _)| *t <= at)
        .last()
        .is_none_or(|(_, a)| *a > 0)
}

/// A drain's seconds (`node`'s, `from` -> `to`) split: (ours: a pod
/// awaits an eviction the budget allows; the budget refusing while a pod
/// awaits its eviction; the evicted pods terminating with none awaiting;
/// ours: every pod gone, the drain not done yet).
pub(crate) fn split_drain(log: &Log, node: &str, from: Timestamp, to: Timestamp) -> [f64; 4] {
    let pods: Vec<&PodLife> = log
        .pods
        .values()
        .filter(|p| p.node.as_deref() == Some(node) && p.seen.is_some_and(|s| s < to))
        .collect();
    let mut cuts = vec![from, to];
    for p in &pods {
        cuts.extend(p.evicted.into_iter().chain(p.gone));
    }
    cuts.extend(log.budget.iter().map(|(t, _)| *t));
    cuts.retain(|t| *t >= from && *t <= to);
    cuts.sort();
    cuts.dedup();
    let mut shares = [0.0; 4];
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let Ok(mid) = a.checked_add(a.duration_until(b) / 2) else {
            continue;
        };
        let awaiting = pods.iter().any(|p| p.evicted.is_none_or(|e| e > mid));
        let terminating = pods
            .iter()
            .any(|p| p.evicted.is_some_and(|e| e <= mid) && p.gone.is_none_or(|g| g > mid));
        let share = match (awaiting, terminating) {
            (true, _) if !allowed(log, mid) => 1,
            (true, _) => 0,
            (false, true) => 2,
            (false, false) => 3,
        };
        shares[share] += secs(a, b);
    }
    shares
}

/// Each node's turn, in the slot's order, from the pool's change at
/// `started`; the last ends at `last_ready` (the last node Ready on v2).
pub(crate) fn turns(log: &Log, started: Timestamp, last_ready: Timestamp) -> Vec<Turn> {
    let mut order: Vec<(Timestamp, &str)> = log
        .marks
        .iter()
        .filter(|(t, _, m)| *m == Mark::SlotTaken && *t >= started)
        .map(|(t, n, _)| (*t, n.as_str()))
        .collect();
    order.sort();
    order.dedup_by(|a, b| a.1 == b.1);
    let mut released: Option<Timestamp> = None;
    let mut out = Vec::new();
    for (i, (slot, node)) in order.iter().enumerate() {
        let last = i + 1 == order.len();
        let Some(turn) = turn(log, (started, last_ready), node, *slot, released, last) else {
            break;
        };
        released = first(log, node, Mark::SlotReleased, *slot);
        out.push(turn);
    }
    out
}

/// One node's turn: its slot taken at `slot`, the previous node's released
/// at `released` (None: the first); `last`: the rollout ends with its
/// Ready (`window.1`).
fn turn(
    log: &Log,
    window: (Timestamp, Timestamp),
    node: &str,
    slot: Timestamp,
    released: Option<Timestamp>,
    last: bool,
) -> Option<Turn> {
    let (started, last_ready) = window;
    let told = first(log, node, Mark::Told, started)?;
    let staged = first(log, node, Mark::Staged, told)?;
    let done = first(log, node, Mark::DrainDone, slot);
    let approved = first(log, node, Mark::Approved, slot)?;
    let done = done.filter(|d| *d <= approved).unwrap_or(approved);
    let applied = first(log, node, Mark::Applied, approved)?;
    let down = first(log, node, Mark::NotReady, applied)?;
    let ready = first(log, node, Mark::Ready, down)?;
    let back = first(log, node, Mark::OnTarget, down);
    // Its container may run before the Node's Ready is seen: none of the
    // kubelet's then; and it runs by the daemon's report at the latest,
    // whenever the kubelet's own report of it comes.
    let running = first(log, node, Mark::DaemonStarted, down)
        .map(|r| r.max(ready))
        .map(|r| back.map_or(r, |b| r.min(b.max(ready))));
    let out = first(log, node, Mark::SlotReleased, ready);
    let ready_to_go = staged.max(released.unwrap_or(started));
    let [asking, budget, grace, noticing] = split_drain(log, node, slot, done);
    let mut phases = BTreeMap::from([
        (
            Phase::Telling,
            secs(pool_changed(log, started).min(told), told),
        ),
        (Phase::Staging, secs(told, staged)),
        (Phase::SlotWait, released.map_or(0.0, |r| secs(staged, r))),
        (Phase::HandOver, secs(ready_to_go, slot)),
        (Phase::DrainOurs, asking),
        (Phase::DrainNoticed, noticing),
        (Phase::DrainBudget, budget),
        (Phase::DrainGrace, grace),
        (Phase::Approval, secs(done, approved)),
        (Phase::ApplyCall, secs(approved, applied)),
        (Phase::Shutdown, secs(applied, down)),
        (Phase::Boot, secs(down, ready)),
    ]);
    if let Some(running) = running {
        phases.insert(Phase::DaemonStart, secs(ready, running));
    }
    if let Some(back) = back {
        phases.insert(Phase::DaemonBack, secs(running.unwrap_or(ready), back));
    }
    if let (Some(back), Some(out)) = (back, out) {
        phases.insert(Phase::Release, secs(ready.max(back), out));
    }
    // The critical path: from the previous node's release (the pool's
    // change for the first) to this one's (its Ready on v2 for the last).
    let from = released.unwrap_or(started);
    let mut path = BTreeMap::new();
    let mut add = |o: Owner, s: f64| *path.entry(o).or_insert(0.0) += s;
    // The first turn starts with the bench's kubectl apply.
    let changed = match released {
        None => pool_changed(log, started).min(told),
        Some(_) => from,
    };
    add(Owner::Bench, secs(from, changed));
    add(Owner::Ours, secs(changed.max(from), told.max(from)));
    add(Owner::Download, secs(told.max(from), staged.max(from)));
    add(Owner::Ours, secs(staged.max(from), slot));
    add(Owner::Ours, asking + noticing + secs(done, applied));
    add(Owner::Workload, budget + grace);
    add(Owner::Reboot, secs(applied, ready));
    let end = if last { Some(last_ready) } else { out };
    let running = running.filter(|r| !last && end.is_some_and(|e| *r <= e));
    add(Owner::Kubelet, running.map_or(0.0, |r| secs(ready, r)));
    let back_from = running.unwrap_or(ready);
    add(Owner::Ours, end.map_or(0.0, |e| secs(back_from, e)));
    Some(Turn {
        node: node.to_owned(),
        phases,
        path,
    })
}

/// When the pool's change was seen (else `started`, the bench's apply).
fn pool_changed(log: &Log, started: Timestamp) -> Timestamp {
    log.marks
        .iter()
        .find(|(t, _, m)| *m == Mark::PoolChanged && *t >= started)
        .map_or(started, |(t, ..)| *t)
}

/// The rollout's target: at most this times the sum of the nodes' reboots.
pub(crate) const RATIO_TARGET: f64 = 1.5;

/// Prints each phase (p50 / max over the nodes, its owner), the critical
/// path's shares, and the ratio to the `floor` the rollout would have
/// without ours: whether the target is ours to meet.
pub(crate) fn report_turns(report: &mut Report, turns: &[Turn], rollout: f64, floor: Option<f64>) {
    if turns.is_empty() {
        report
            .notes
            .push("the real nodes' turns were not seen phase by phase".to_owned());
        return;
    }
    report.push(row(
        format!(
            "  each node's turn, phase by phase: p50 / max over {} nodes",
            turns.len()
        ),
        "",
        "",
        None,
    ));
    for phase in Phase::ALL {
        let mut v: Vec<f64> = turns
            .iter()
            .filter_map(|t| t.phases.get(&phase).copied())
            .collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        report.push(row(
            format!("    {} [{}]", phase.text(), phase.owner().text()),
            format!(
                "{:.2} / {:.2} s",
                percentile(&v, 50.0),
                v.last().copied().unwrap_or(0.0)
            ),
            "",
            None,
        ));
    }
    report.push(row(
        "    proving (a health gate)",
        "none: the pool has no spec.health",
        "",
        None,
    ));
    let mut path: BTreeMap<Owner, f64> = BTreeMap::new();
    for t in turns {
        for (o, s) in &t.path {
            *path.entry(*o).or_insert(0.0) += s;
        }
    }
    let each: Vec<String> = path
        .iter()
        .map(|(o, s)| format!("{} {s:.1}", o.text()))
        .collect();
    report.push(row(
        format!("  the critical path ({rollout:.1} s), by owner (s)"),
        each.join(", "),
        "",
        None,
    ));
    let ours = path.get(&Owner::Ours).copied().unwrap_or(0.0);
    if let Some(floor) = floor.filter(|f| *f > 0.0) {
        let without = rollout - ours;
        report.push(row(
            "  the ratio were none of ours on the critical path (the rest: the workload's, the kubelet's, the download, the reboots)",
            format!("{:.2} ({without:.1} s)", without / floor),
            "",
            None,
        ));
    }
}

#[cfg(test)]
// Not `tests`: that would shadow the crate of the same name in this file.
mod unit {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    fn pod(node: &str, seen: i64, evicted: Option<i64>, gone: Option<i64>) -> PodLife {
        PodLife {
            node: Some(node.to_owned()),
            seen: Some(at(seen)),
            ready: Some(at(seen)),
            evicted: evicted.map(at),
            gone: gone.map(at),
        }
    }

    #[test]
    fn a_drain_is_the_budget_s_while_it_refuses_a_waiting_pod_and_the_grace_s_while_pods_end() {
        let log = Log {
            pods: BTreeMap::from([
                // Evicted at once, ends in 1 s: the budget closes until its
                // replacement is Ready (2.5 s).
                ("a".to_owned(), pod("n", 0, Some(100), Some(1_100))),
                // Evicted 1 s after the budget opens again, ends in 0.5 s.
                ("b".to_owned(), pod("n", 0, Some(3_500), Some(4_000))),
                ("elsewhere".to_owned(), pod("m", 0, Some(0), Some(9_000))),
            ]),
            budget: vec![(at(100), 0), (at(2_500), 1)],
            ..Log::default()
        };
        let [asking, budget, grace, noticing] = split_drain(&log, "n", at(0), at(4_200));
        let ms = |s: f64| (s * 1000.0).round() as i64;
        assert_eq!(ms(budget), 2_400, "0.1 -> 2.5 s: b waits on the budget");
        assert_eq!(ms(grace), 500, "3.5 -> 4.0 s: only b terminating");
        assert_eq!(ms(asking), 1_100, "0 -> 0.1, 2.5 -> 3.5");
        assert_eq!(ms(noticing), 200, "4.0 -> 4.2");
    }

    #[test]
    fn the_critical_path_adds_up_to_the_rollout() {
        let m = |t, n: &str, mark| (at(t), n.to_owned(), mark);
        let log = Log {
            marks: vec![
                m(40, "workers", Mark::PoolChanged),
                m(100, "a", Mark::Told),
                m(150, "b", Mark::Told),
                m(1_000, "a", Mark::Staged),
                m(1_200, "b", Mark::Staged),
                m(1_100, "a", Mark::SlotTaken),
                m(2_000, "a", Mark::DrainDone),
                m(2_100, "a", Mark::Approved),
                m(2_300, "a", Mark::Applied),
                m(3_000, "a", Mark::NotReady),
                m(6_000, "a", Mark::Ready),
                m(6_200, "a", Mark::DaemonStarted),
                // The kubelet's report of b's container comes after the
                // daemon's own: b's container ran by then.
                m(11_100, "b", Mark::OnTarget),
                m(11_150, "b", Mark::DaemonStarted),
                m(6_500, "a", Mark::OnTarget),
                m(7_000, "a", Mark::SlotReleased),
                m(7_100, "b", Mark::SlotTaken),
                m(7_500, "b", Mark::Approved),
                m(7_600, "b", Mark::Applied),
                m(8_000, "b", Mark::NotReady),
                m(11_000, "b", Mark::Ready),
            ],
            ..Log::default()
        };
        let t = turns(&log, at(0), at(11_200));
        assert_eq!(t.len(), 2);
        let total: f64 = t.iter().flat_map(|t| t.path.values()).sum();
        assert!((total - 11.2).abs() < 1e-9, "{total}");
        let a = &t[0];
        assert_eq!(a.phases[&Phase::Staging], 0.9);
        assert!((a.phases[&Phase::HandOver] - 0.1).abs() < 1e-9);
        assert!((a.phases[&Phase::Release] - 0.5).abs() < 1e-9);
        assert_eq!(a.path[&Owner::Reboot], 3.7);
        assert!((a.path[&Owner::Bench] - 0.04).abs() < 1e-9);
        assert!((a.phases[&Phase::Telling] - 0.06).abs() < 1e-9);
        assert!((a.path[&Owner::Kubelet] - 0.2).abs() < 1e-9);
        assert!((a.phases[&Phase::DaemonBack] - 0.3).abs() < 1e-9);
        let b = &t[1];
        assert!((b.phases[&Phase::SlotWait] - 5.8).abs() < 1e-9);
        assert!((b.phases[&Phase::HandOver] - 0.1).abs() < 1e-9);
        assert!(!b.phases.contains_key(&Phase::Release));
        assert!((b.phases[&Phase::DaemonStart] - 0.1).abs() < 1e-9);
        assert_eq!(b.phases[&Phase::DaemonBack], 0.0);
    }
}
