//! The `scale` section: the real controller with N nodes played by the
//! DaemonPlayer.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use api::labels::ARCH_LABEL;
use api::node_health::NODE_READY;
use api::{BootcNode, BootcNodePool};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use serde_json::json;
use tests::daemon_player::{DaemonPlayer, PlayerOptions, set_ready};
use tests::sim::{POOL, POOL_LABEL, Sim, SimOptions};
use tests::write_probe;

use crate::Cli;
use crate::api_requests::{POOL_SHARED, audit_len, audit_slice};
use crate::procfs::{clock_ticks, cpu_seconds, memory_kib};
use crate::report::{Report, Row, mib, out, percentile, row};
use crate::simulated::{wait_released, wait_rolled};
use crate::wave;

/// Write requests served so far and their bodies, from the API server's
/// own counters: no audit log, so the measured rollout runs at full speed.
async fn served_writes(admin: &kube::Client) -> Result<write_probe::Served> {
    let text = write_probe::metrics_text(admin).await?;
    Ok(write_probe::Served::parse(&text))
}

/// The pool size whose per-wave time is the scale section's floor.
const CALIBRATION: usize = 10;

/// Writes in flight during a rollout: the controller's per-node write
/// chains (16, its actuator's `WRITE_CONCURRENCY`) and the DaemonPlayer's
/// one. The throughput probe runs once at this concurrency.
const ROLLOUT_CONCURRENCY: usize = 17;
/// Writes in flight for the probe's second run: enough to saturate the
/// API server on this machine (its CPU during the run shows it).
const SATURATING_CONCURRENCY: usize = 64;
/// Nodes created at once while setting up a pool.
const SETUP_CONCURRENCY: usize = 64;

/// CPU seconds (user + system) of the processes the scale section watches.
#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    controller: f64,
    apiserver: f64,
    etcd: f64,
    /// This process: the played daemons and kubelets, or the probe's client.
    bench: f64,
    /// Every CPU of the machine, whoever used it (other work included).
    machine: f64,
}

/// Busy CPU seconds of the whole machine (all CPUs, from /proc/stat).
fn machine_busy_seconds(ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<f64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: f64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    Some(busy / ticks)
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, earlier: Cpu) -> Cpu {
        Cpu {
            controller: self.controller - earlier.controller,
            apiserver: self.apiserver - earlier.apiserver,
            etcd: self.etcd - earlier.etcd,
            bench: self.bench - earlier.bench,
            machine: self.machine - earlier.machine,
        }
    }
}

/// The processes of one scale run.
struct Pids {
    /// None once the controller is stopped (for the probe).
    controller: Option<u32>,
    apiserver: Option<u32>,
    etcd: u32,
    ticks: f64,
}

impl Pids {
    fn of(sim: &Sim) -> Pids {
        Pids {
            controller: sim.controller_pid(),
            apiserver: sim.cp.apiserver_pid(),
            etcd: sim.cp.etcd_pid(),
            ticks: clock_ticks(),
        }
    }

    fn cpu(&self) -> Cpu {
        let of = |pid: Option<u32>| pid.and_then(|p| cpu_seconds(p, self.ticks)).unwrap_or(0.0);
        Cpu {
            controller: of(self.controller),
            apiserver: of(self.apiserver),
            etcd: of(Some(self.etcd)),
            bench: of(Some(std::process::id())),
            machine: machine_busy_seconds(self.ticks).unwrap_or(0.0),
        }
    }
}

/// One run of the write-throughput probe.
struct Probe {
    concurrency: usize,
    outcome: write_probe::Outcome,
    /// The API server's and etcd's CPU during the run (the controller's is
    /// not running).
    cpu: Cpu,
    /// The writes the API server served during the run.
    served: write_probe::Served,
}

struct ScaleResult {
    nodes: usize,
    slots: usize,
    /// Seconds from the new digest to every node updated; None when the
    /// timeout came first.
    rollout_seconds: Option<f64>,
    /// Seconds measured (the rollout's, or the timeout's) and the nodes
    /// updated by then.
    elapsed_seconds: f64,
    updated: usize,
    /// CPU during the measured seconds.
    cpu: Cpu,
    rss_kib: u64,
    hwm_kib: u64,
    /// The controller's RSS as the rollout starts: every Node and
    /// BootcNode of the pool in its caches, the pool on v1.
    synced_rss_kib: u64,
    reconciles: Vec<f64>,
    /// The plans whose writes outlasted their reconcile: from the
    /// reconcile's start to the last write (ms), sorted.
    writes_out: Vec<f64>,
    /// Write requests served during the rollout, and their bodies.
    writes: write_probe::Served,
    probes: Vec<Probe>,
    /// Each wave's steps (s), when they were watched.
    waves: Vec<Vec<f64>>,
    /// Each node's wait from back Ready to its release (s), sorted.
    releases: Vec<f64>,
}

impl ScaleResult {
    fn writes_to(&self, resources: &[&str]) -> f64 {
        resources.iter().map(|r| self.writes.writes_to(r)).sum()
    }

    fn all_writes(&self) -> f64 {
        self.writes.total()
    }

    /// The best write throughput the probe measured, with its run.
    fn best_probe(&self) -> Option<&Probe> {
        self.probes
            .iter()
            .filter(|p| p.outcome.made > 0)
            .max_by(|a, b| a.outcome.throughput().total_cmp(&b.outcome.throughput()))
    }
}

/// Reconcile durations (ms) logged by the controller.
fn reconcile_durations(log: &str) -> Vec<f64> {
    elapsed_ms(log, "reconciled")
}

/// The `elapsed_us` (as ms) of the controller's log lines that say `what`.
fn elapsed_ms(log: &str, what: &str) -> Vec<f64> {
    let mut v = Vec::new();
    for line in log.lines() {
        if !line.contains(what) {
            continue;
        }
        if let Some(us) = line
            .split_whitespace()
            .find_map(|w| strip_ansi(w).strip_prefix("elapsed_us=").map(str::to_owned))
            .and_then(|v| v.parse::<f64>().ok())
        {
            v.push(us / 1000.0);
        }
    }
    v
}

pub(crate) fn strip_ansi(s: &str) -> String {
    let mut outp = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            outp.push(c);
        }
    }
    outp
}

/// Creates `n` pool members, each registered with a Ready status as a
/// kubelet registers its Node (one write per node), many at once.
async fn create_nodes(admin: &kube::Client, n: usize) -> Result<()> {
    let now = jiff::Timestamp::now().to_string();
    let create = |i: usize| {
        let (admin, now) = (admin.clone(), now.clone());
        async move {
            let name = format!("scale-node-{i}");
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {POOL_LABEL: POOL, ARCH_LABEL: "amd64"}},
                "status": {"conditions": [{
                    "type": NODE_READY, "status": "True", "reason": "KubeletReady",
                    "message": "registered by the benchmark",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                }]},
            }))?;
            let created = Api::<Node>::all(admin.clone())
                .create(&PostParams::default(), &node)
                .await
                .with_context(|| format!("creating Node {name}"))?;
            // Should the API server drop a created Node's status, the
            // kubelet's way of reporting it still works.
            if !api::node_health::is_ready(&api::Node::from(created)) {
                set_ready(&admin, &name, true).await?;
            }
            anyhow::Ok(())
        }
    };
    let results: Vec<Result<()>> = futures::stream::iter(1..=n)
        .map(create)
        .buffer_unordered(SETUP_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// A simulated cluster of `n` played nodes in one pool on `v1`
/// (maxUnavailable 10%), and the player; returns once every node is on v1.
async fn scale_cluster(
    n: usize,
    timeout: Duration,
    controller_bin: Option<PathBuf>,
) -> Result<(Sim, DaemonPlayer)> {
    let options = SimOptions {
        controller_bin,
        nodes: n,
        max_unavailable: json!("10%"),
        controller_log: "info,controller::runtime=debug".into(),
        ..SimOptions::default()
    };
    let sim = Sim::start(options).await?;
    let admin = sim.admin.clone();
    // A real image: the controller checks a digest against its registry
    // (the manifest exists, with the pool's pull secret) before any node
    // is told.
    let d1 = sim.push_version("1.0").await?;
    let v1 = sim.pinned(&d1);
    let created = Instant::now();
    create_nodes(&admin, n).await?;
    out(&format!(
        "  {n} Nodes created in {:.1}s\n",
        created.elapsed().as_secs_f64()
    ));
    let player = DaemonPlayer::start(
        admin.clone(),
        PlayerOptions {
            initial_image: v1.clone(),
            ..PlayerOptions::default()
        },
    );
    let pool: BootcNodePool = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {"matchLabels": {POOL_LABEL: POOL}},
            "image": {"ref": v1},
            "rollout": {"maxUnavailable": "10%", "drainTimeoutSeconds": 60},
            "pullSecretRef": {"name": "os-pull", "namespace": api::labels::OPERATOR_NAMESPACE},
        },
    }))?;
    Api::<BootcNodePool>::all(admin.clone())
        .create(&PostParams::default(), &pool)
        .await?;
    wait_rolled(&admin, &d1, n, timeout)
        .await
        .context("every node on v1 (setup)")?;
    out(&format!(
        "  {n} nodes created and on v1 after {:.1}s\n",
        created.elapsed().as_secs_f64()
    ));
    Ok((sim, player))
}

/// Nodes the pool's status counts as updated.
async fn updated_count(admin: &kube::Client) -> usize {
    Api::<BootcNodePool>::all(admin.clone())
        .get(POOL)
        .await
        .ok()
        .and_then(|p| p.status)
        .and_then(|s| usize::try_from(s.updated_count).ok())
        .unwrap_or(0)
}

/// The rollout to v2, measured: its time (or how far it got before
/// `timeout`), CPU, memory, reconciles and the writes served.
async fn measure_rollout(
    sim: &Sim,
    n: usize,
    timeout: Duration,
    steps: &wave::Recorder,
) -> Result<ScaleResult> {
    let admin = sim.admin.clone();
    let d2 = sim.push_version("2.0").await?;
    let v2 = sim.pinned(&d2);
    let pids = Pids::of(sim);
    let controller = pids.controller.context("the controller is not running")?;
    let log_path = sim.log_dir().join("controller.log");
    let log_from = audit_len(&log_path);
    let writes0 = served_writes(&admin).await?;
    let (synced_rss_kib, _) = memory_kib(controller).unwrap_or((0, 0));
    let cpu0 = pids.cpu();
    let started = Instant::now();
    sim.patch_pool(json!({"image": {"ref": v2}})).await?;
    let reached = wait_rolled(&admin, &d2, n, timeout).await;
    let elapsed_seconds = started.elapsed().as_secs_f64();
    let cpu = pids.cpu() - cpu0;
    let rollout_seconds = match &reached {
        // The last release and the completion event follow the status that
        // shows every node updated: let them land before counting.
        Ok(()) => {
            wait_released(&admin, &v2, timeout).await?;
            Some(elapsed_seconds)
        }
        Err(e) => {
            out(&format!("  not reached: {e:#}\n"));
            None
        }
    };
    let writes = served_writes(&admin).await?.since(&writes0);
    let (rss_kib, hwm_kib) = memory_kib(controller).unwrap_or((0, 0));
    let log = audit_slice(&log_path, log_from, audit_len(&log_path))?;
    let seen = steps.seen(&log);
    let mut reconciles = reconcile_durations(&log);
    reconciles.sort_by(f64::total_cmp);
    let mut writes_out = elapsed_ms(&log, "a plan's writes made after its reconcile");
    writes_out.sort_by(f64::total_cmp);
    Ok(ScaleResult {
        nodes: n,
        slots: (n / 10).max(1),
        rollout_seconds,
        elapsed_seconds,
        updated: updated_count(&admin).await,
        cpu,
        rss_kib,
        hwm_kib,
        synced_rss_kib,
        reconciles,
        writes_out,
        writes,
        probes: Vec::new(),
        waves: wave::waves(&seen),
        releases: wave::releases(&seen),
    })
}

/// The API server's write throughput, after the rollout, on the rollout's
/// own objects: the controller and the player are stopped first (nothing
/// may react), their watches on the written kinds are held open by the
/// probe, and a plain client makes the rollout's kinds of writes in the
/// rollout's proportions (at most `max_writes` per run). Two runs, at the
/// rollout's concurrency and at a saturating one, each on its own half of
/// the nodes (so that each starts from the rollout's end state).
async fn probe_throughput(
    sim: &mut Sim,
    player: DaemonPlayer,
    r: &ScaleResult,
    max_writes: usize,
    timeout: Duration,
) -> Result<Vec<Probe>> {
    drop(player);
    sim.kill_controller();
    let admin = sim.admin.clone();
    let clients = write_probe::Clients {
        controller: sim.cp.client(tests::Identity::Controller).await?,
        admin: admin.clone(),
    };
    let mut targets = Api::<BootcNode>::all(admin.clone())
        .list(&Default::default())
        .await?
        .items;
    targets.sort_by_key(|b| b.metadata.name.clone());
    let pool = Api::<BootcNodePool>::all(admin.clone()).get(POOL).await?;
    let counts = r.writes.by_kind();
    let total = (counts.iter().map(|(_, c)| c).sum::<f64>() as usize).min(max_writes);
    let _watchers = write_probe::Watchers::start(&admin, timeout).await?;
    let pids = Pids::of(sim);
    let half = targets.len() / 2;
    let mut probes = Vec::new();
    for (concurrency, part) in [
        (ROLLOUT_CONCURRENCY, &targets[..half]),
        (SATURATING_CONCURRENCY, &targets[half..]),
    ] {
        let jobs = write_probe::plan(&counts, total, part.len());
        let on = write_probe::Targets {
            nodes: part,
            pool: &pool,
        };
        let served0 = served_writes(&admin).await?;
        let cpu0 = pids.cpu();
        let outcome = write_probe::run(&clients, &on, &jobs, concurrency).await;
        let cpu = pids.cpu() - cpu0;
        let served = served_writes(&admin).await?.since(&served0);
        out(&format!(
            "  probe: {} writes ({} failed) in {:.1}s at {concurrency} in flight: {:.0}/s\n",
            outcome.made,
            outcome.failed,
            outcome.seconds,
            outcome.throughput()
        ));
        probes.push(Probe {
            concurrency,
            outcome,
            cpu,
            served,
        });
    }
    Ok(probes)
}

/// One pool size: setup, the measured rollout, then (`probe`) the write
/// throughput probe.
async fn scale(
    n: usize,
    timeout: Duration,
    controller_bin: Option<PathBuf>,
    probe_writes: Option<usize>,
) -> Result<ScaleResult> {
    out(&format!(
        "scale: {n} nodes, maxUnavailable 10%, instant reboots, {} controller\n",
        if controller_bin.is_some() {
            "release"
        } else {
            "debug"
        }
    ));
    let (mut sim, player) = scale_cluster(n, timeout, controller_bin).await?;
    // The calibration (no probe) is watched step by step; each size's
    // Nodes for their releases.
    let steps = match probe_writes {
        None => wave::Recorder::start(&sim.admin),
        Some(_) => wave::Recorder::nodes(&sim.admin),
    };
    let mut r = measure_rollout(&sim, n, timeout, &steps).await?;
    if let Some(max_writes) = probe_writes
        && r.rollout_seconds.is_some()
    {
        r.probes = probe_throughput(&mut sim, player, &r, max_writes, timeout).await?;
    }
    Ok(r)
}

/// The ideal time's two terms and the ideal (their larger), when measured.
struct Ideal {
    waves: Option<f64>,
    writes: Option<f64>,
}

impl Ideal {
    fn of(r: &ScaleResult, unit: Option<f64>) -> Ideal {
        let waves = r.nodes.div_ceil(r.slots) as f64;
        Ideal {
            waves: unit.map(|u| u * waves),
            writes: r
                .best_probe()
                .map(|p| r.all_writes() / p.outcome.throughput()),
        }
    }

    fn seconds(&self) -> Option<f64> {
        match (self.waves, self.writes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A target judged at one pool size only: (target, verdict) for `n`.
fn judged_at(n: usize, at: usize, target: &'static str, ok: bool) -> (String, Option<bool>) {
    if n == at {
        (target.to_owned(), Some(ok))
    } else {
        (format!("({target} at {at})"), None)
    }
}

/// The API server's and etcd's CPU per write, in ms: a write's cost that
/// does not depend on how much of a shared machine they got.
fn per_write_ms(cpu: &Cpu, writes: f64) -> f64 {
    (cpu.apiserver + cpu.etcd) * 1000.0 / writes.max(1.0)
}

/// The rollout time against the ideal (`unit`: seconds per wave at the
/// calibration size).
fn report_ideal(report: &mut Report, r: &ScaleResult, rollout: f64, unit: Option<f64>) {
    let n = r.nodes;
    let waves = n.div_ceil(r.slots);
    let ideal = Ideal::of(r, unit);
    if let Some(seconds) = ideal.seconds() {
        report.push(row(
            format!("{n} nodes: ideal time, the larger of the two terms below"),
            format!("{seconds:.1} s"),
            "",
            None,
        ));
    }
    if let (Some(term), Some(unit)) = (ideal.waves, unit) {
        report.push(row(
            format!("  {waves} waves x {unit:.2} s (one wave at {CALIBRATION} nodes, one slot)"),
            format!("{term:.1} s"),
            "",
            None,
        ));
    }
    if let (Some(term), Some(p)) = (ideal.writes, r.best_probe()) {
        report.push(row(
            format!(
                "  {:.0} API writes / {:.0} writes/s (the probe at {} in flight)",
                r.all_writes(),
                p.outcome.throughput(),
                p.concurrency
            ),
            format!("{term:.1} s"),
            "",
            None,
        ));
    }
    if let Some(seconds) = ideal.seconds() {
        let ratio = rollout / seconds;
        let (target, ok) = judged_at(n, 5000, "<= 2.0", ratio <= 2.0);
        report.push(Row {
            target,
            ..row(
                format!("{n} nodes: ratio of the rollout time to the ideal"),
                format!("{ratio:.2}"),
                "",
                ok,
            )
        });
    }
    for p in &r.probes {
        let secs = p.outcome.seconds.max(f64::MIN_POSITIVE);
        report.push(row(
            format!(
                "  API server write throughput, plain client, {} in flight ({} writes)",
                p.concurrency, p.outcome.made
            ),
            format!("{:.0} /s", p.outcome.throughput()),
            "",
            None,
        ));
        report.push(row(
            "    cores busy: API server / etcd / probe client / whole machine",
            format!(
                "{:.2} / {:.2} / {:.2} / {:.2}",
                p.cpu.apiserver / secs,
                p.cpu.etcd / secs,
                p.cpu.bench / secs,
                p.cpu.machine / secs
            ),
            "",
            None,
        ));
        report.push(row(
            "    API server + etcd CPU per write: this probe / the rollout (all its requests)",
            format!(
                "{:.1} / {:.1} ms",
                per_write_ms(&p.cpu, p.outcome.made as f64),
                per_write_ms(&r.cpu, r.all_writes())
            ),
            "",
            None,
        ));
        if let Some(e) = &p.outcome.first_error {
            report.notes.push(format!(
                "{n} nodes: {} of the probe's writes at {} in flight failed, first: {e}",
                p.outcome.failed, p.concurrency
            ));
        }
    }
}

/// The rollout's writes next to the faster probe run's, kind by kind: a
/// reader sees that the probe's writes are the rollout's.
fn report_mix(report: &mut Report, r: &ScaleResult) {
    let Some(p) = r.best_probe() else {
        return;
    };
    report.push(row(
        format!(
            "  write mix, share and mean body: rollout | probe at {} in flight",
            p.concurrency
        ),
        "",
        "",
        None,
    ));
    let rollout = write_probe::mix(&r.writes);
    let probe = write_probe::mix(&p.served);
    for (what, value) in write_probe::mix_lines(&rollout, &probe) {
        report.push(row(format!("    {what}"), value, "", None));
    }
}

/// The rollout's writes, by who makes them.
fn report_writes(report: &mut Report, r: &ScaleResult) {
    let n = r.nodes as f64;
    let nodes = r.nodes;
    let per_node = r.writes_to(&["bootcnodes", "nodes"]) / n;
    let (target, ok) = (
        "= 5.00 (the floor's)".to_owned(),
        Some(format!("{per_node:.2}") == "5.00"),
    );
    report.push(Row {
        target,
        ..row(
            format!("{nodes} nodes: controller writes per node to its BootcNode and Node"),
            format!("{per_node:.2}"),
            "",
            ok,
        )
    });
    report.push(row(
        format!("{nodes} nodes: all API writes per node (players' and the pool's included)"),
        format!("{:.2}", r.all_writes() / n),
        "",
        None,
    ));
    let pool = r.writes_to(POOL_SHARED);
    report.push(row(
        format!("{nodes} nodes: pool status writes and events in the whole rollout"),
        format!("{pool:.0} ({:.3} per node)", pool / n),
        "",
        None,
    ));
    report.push(row(
        format!("{nodes} nodes: played daemons' / kubelets' status writes per node"),
        format!(
            "{:.2} / {:.2}",
            r.writes_to(&["bootcnodes/status"]) / n,
            r.writes_to(&["nodes/status"]) / n
        ),
        "",
        None,
    ));
}

/// CPU, memory and reconcile times (until the timeout when not reached).
/// The controller's CPU per second of rollout, at most: a tenth of a core
/// whatever the pool's size (the rollout's length grows with it).
const CONTROLLER_CORES: f64 = 0.10;
/// The controller's CPU per node update, at most, at every size.
const CPU_PER_NODE_MS: f64 = 2.0;
/// How much more a node update may cost the controller at 20,000 nodes
/// than at 1,000 (percent): a flat cost per node.
const CPU_GROWTH_PERCENT: f64 = 15.0;

/// The controller's CPU per node update, in ms.
fn cpu_per_node_ms(r: &ScaleResult) -> f64 {
    r.cpu.controller * 1000.0 / r.nodes.max(1) as f64
}

fn report_costs(report: &mut Report, r: &ScaleResult) {
    let n = r.nodes;
    let during = if r.rollout_seconds.is_some() {
        "during the rollout"
    } else {
        "until the timeout"
    };
    let cores = r.cpu.controller / r.elapsed_seconds.max(f64::MIN_POSITIVE);
    report.push(row(
        format!("{n} nodes: controller CPU {during}, and per second of it"),
        format!("{:.1} s, {cores:.3} cores", r.cpu.controller),
        &format!("<= {CONTROLLER_CORES:.2} cores"),
        Some(cores <= CONTROLLER_CORES),
    ));
    if r.rollout_seconds.is_some() {
        let per_node = cpu_per_node_ms(r);
        report.push(row(
            format!("{n} nodes: controller CPU per node update"),
            format!("{per_node:.2} ms"),
            &format!("<= {CPU_PER_NODE_MS:.1} ms"),
            Some(per_node <= CPU_PER_NODE_MS),
        ));
    }
    report.push(row(
        format!("{n} nodes: API server / etcd CPU {during}"),
        format!("{:.1} / {:.1} s", r.cpu.apiserver, r.cpu.etcd),
        "",
        None,
    ));
    report.push(row(
        format!("{n} nodes: players' / whole machine's CPU {during}"),
        format!("{:.1} / {:.1} s", r.cpu.bench, r.cpu.machine),
        "",
        None,
    ));
    report.push(row(
        format!("{n} nodes: controller CPU over the players'"),
        format!(
            "{:.3}",
            r.cpu.controller / r.cpu.bench.max(f64::MIN_POSITIVE)
        ),
        "",
        None,
    ));
    let (target, ok) = judged_at(n, 20_000, "<= 150 MiB", r.hwm_kib <= 150 * 1024);
    report.push(Row {
        target,
        ..row(
            format!("{n} nodes: controller peak RSS (VmHWM)"),
            mib(r.hwm_kib),
            "",
            ok,
        )
    });
    report.push(row(
        format!(
            "{n} nodes: controller RSS {}",
            if r.rollout_seconds.is_some() {
                "after the rollout"
            } else {
                "at the timeout"
            }
        ),
        mib(r.rss_kib),
        "",
        None,
    ));
    let p99 = percentile(&r.reconciles, 99.0);
    let (target, ok) = judged_at(n, 20_000, "p99 <= 1000 ms", p99 <= 1000.0);
    report.push(Row {
        target,
        ..row(
            format!("{n} nodes: reconcile p50 / p99 (n={})", r.reconciles.len()),
            format!("{:.1} / {p99:.1} ms", percentile(&r.reconciles, 50.0)),
            "",
            ok,
        )
    });
    let (out, count) = (&r.writes_out, r.writes_out.len());
    report.push(row(
        format!("  the plans whose writes outlasted their reconcile: the reconcile's start -> its last write, p50 / p99 (n={count})"),
        if out.is_empty() {
            "none".to_owned()
        } else {
            format!("{:.1} / {:.1} ms", percentile(out, 50.0), percentile(out, 99.0))
        },
        "",
        None,
    ));
    report_releases(report, r);
}

/// How long a node back Ready waited for its release, p50 / p99.
fn report_releases(report: &mut Report, r: &ScaleResult) {
    let n = r.nodes;
    let figure = format!(
        "{n} nodes: a node back Ready -> its release, p50 / p99 (n={})",
        r.releases.len()
    );
    if r.releases.is_empty() {
        report.push(row(figure, "not seen", "", None));
        return;
    }
    let p99 = percentile(&r.releases, 99.0) * 1000.0;
    let (target, ok) = judged_at(n, 20_000, "p99 <= 1000 ms", p99 <= 1000.0);
    report.push(Row {
        target,
        ..row(
            figure,
            format!(
                "{:.1} / {p99:.1} ms",
                percentile(&r.releases, 50.0) * 1000.0
            ),
            "",
            ok,
        )
    });
}

/// What one node costs the controller's memory once its caches are
/// synced: the slope of its RSS before the rollout between the smallest
/// size and the largest (a stripped Node, its BootcNode, and the planner's
/// and the metrics' per-node state; the process's fixed part cancels out).
fn report_cache_per_node(report: &mut Report, done: &[ScaleResult]) {
    let (Some(small), Some(large)) = (
        done.iter().min_by_key(|r| r.nodes),
        done.iter().max_by_key(|r| r.nodes),
    ) else {
        return;
    };
    let nodes = large.nodes.saturating_sub(small.nodes);
    if nodes == 0 || small.synced_rss_kib == 0 || large.synced_rss_kib == 0 {
        return;
    }
    let grown = large.synced_rss_kib as f64 - small.synced_rss_kib as f64;
    report.push(row(
        format!(
            "controller memory per node, synced ({} -> {} nodes: {} -> {})",
            small.nodes,
            large.nodes,
            mib(small.synced_rss_kib),
            mib(large.synced_rss_kib)
        ),
        format!("{:.1} KiB", grown / nodes as f64),
        "",
        None,
    ));
}

/// The growth of the controller's CPU per node update from the smallest
/// size to the largest (both rolled out), against its target.
fn report_growth(report: &mut Report, done: &[ScaleResult]) {
    let finished: Vec<&ScaleResult> = done
        .iter()
        .filter(|r| r.rollout_seconds.is_some())
        .collect();
    let (Some(small), Some(large)) = (
        finished.iter().min_by_key(|r| r.nodes),
        finished.iter().max_by_key(|r| r.nodes),
    ) else {
        return;
    };
    if small.nodes == large.nodes {
        return;
    }
    let growth =
        (cpu_per_node_ms(large) / cpu_per_node_ms(small).max(f64::MIN_POSITIVE) - 1.0) * 100.0;
    let judged = small.nodes == 1_000 && large.nodes == 20_000;
    report.push(row(
        format!(
            "controller CPU per node update, {} -> {} nodes",
            small.nodes, large.nodes
        ),
        format!("{growth:+.0} %"),
        &if judged {
            format!("<= +{CPU_GROWTH_PERCENT:.0} %")
        } else {
            format!("(<= +{CPU_GROWTH_PERCENT:.0} % from 1000 to 20000)")
        },
        judged.then_some(growth <= CPU_GROWTH_PERCENT),
    ));
}

/// `unit`: seconds per wave at the calibration size (one slot).
fn report_scale(report: &mut Report, r: &ScaleResult, unit: Option<f64>) {
    let n = r.nodes;
    let figure = format!(
        "{n} nodes: new digest -> all updated ({} slots, {} waves)",
        r.slots,
        n.div_ceil(r.slots)
    );
    match r.rollout_seconds {
        Some(rollout) => {
            report.push(row(figure, format!("{rollout:.1} s"), "", None));
            report_ideal(report, r, rollout, unit);
            report_mix(report, r);
            report_writes(report, r);
        }
        None => report.push(row(
            figure,
            format!(
                "not reached in {:.0} s ({} of {n} updated)",
                r.elapsed_seconds, r.updated
            ),
            "",
            None,
        )),
    }
    report_costs(report, r);
}

/// The scale section: the calibration pool, then each size.
pub(crate) async fn scale_section(report: &mut Report, cli: &Cli, release_dir: &Path) {
    let timeout = Duration::from_secs(cli.scale_timeout_seconds);
    let controller_bin = Some(release_dir.join("bootc-controller")).filter(|p| p.exists());
    let build = if controller_bin.is_some() {
        "release"
    } else {
        "debug"
    };
    // The floor: the time of one wave (one slot, instant reboot) when the
    // pool is small, from a pool of CALIBRATION nodes with one slot.
    let unit = match scale(CALIBRATION, timeout, controller_bin.clone(), None).await {
        Ok(ScaleResult {
            rollout_seconds: Some(s),
            slots,
            waves,
            ..
        }) => {
            wave::report_waves(report, CALIBRATION, &waves);
            Some(s / CALIBRATION.div_ceil(slots) as f64)
        }
        Ok(_) => {
            report
                .notes
                .push("the calibration rollout did not finish in time".to_owned());
            None
        }
        Err(e) => {
            report.notes.push(format!("calibration failed: {e:#}"));
            None
        }
    };
    report.details.push(scale_details(build));
    let mut done = Vec::new();
    for &n in &cli.scale_nodes {
        match scale(n, timeout, controller_bin.clone(), Some(cli.probe_writes)).await {
            Ok(r) => {
                report_scale(report, &r, unit);
                done.push(r);
            }
            Err(e) => {
                report.push(row(
                    format!("{n} nodes: rollout"),
                    "not reached (setup)",
                    "",
                    None,
                ));
                report.notes.push(format!("{n} nodes: {e:#}"));
            }
        }
    }
    report_growth(report, &done);
    report_cache_per_node(report, &done);
}

/// The scale section's explanation in BENCHMARKS.md: what each row is and
/// how it is measured.
fn scale_details(build: &str) -> String {
    format!(
        "### The controller at scale

The real `bootc-controller` ({build} build), kube-apiserver and etcd on this machine; every node's daemon and kubelet are played by the in-process DaemonPlayer (one watch on all BootcNodes, one status write per step, instant reboots). One pool per size, maxUnavailable 10% (rounded up): N/10 slots, 10 waves. Each size gets a fresh cluster: the Nodes are created {SETUP_CONCURRENCY} at a time, registered Ready; the pool is created on v1, and the measurement starts once every node is on v1. Each row:

- **one wave at {CALIBRATION} nodes, one slot**: the controller's side of a wave in the calibration pool, from the moment the node in the slot is seen back Ready on the target to the moment the next node's approval to reboot is seen, p50 and p99 over its waves, and each step between (`tests/src/bin/bootc-bench/wave.rs`): its slot released (the uncordon that removes the slot's record), the next node's slot taken (its cordon, with the slot's record), its drain done (the controller's `drain finished` log line; no pod to evict here), its approval. Every step but the drain is seen by this process's own watches on BootcNodes and Nodes, so each includes a watch's delivery. Target: at most 0.10 s p50. The player's own steps (the reboot's NotReady, status writes and Ready) are not in it.
- **new digest -> all updated**: from the pool's patch to v2 until its status counts every node updated. A size that does not get there within `--scale-timeout-seconds` says \"not reached\" with the nodes updated by then; its CPU, memory and reconcile rows then cover the time until the timeout.
- **ideal time**: what an infinitely fast controller would reach on this machine, the larger of two terms. The first is the number of waves times the time of one wave in a pool of {CALIBRATION} nodes with one slot (a calibration run with the same build): one node's round trips, with next to nothing to plan. The second is the rollout's API writes divided by the API server's write throughput: writes that even an infinitely fast controller must get served.
- **API writes**: every write request (create, update, patch, apply, delete) the API server served during the rollout, by resource, from its own `apiserver_request_total` counter, read before the pool's patch and after the last reboot slot is released (the release and the completion event included). The players' writes and the pool's status and events count too.
- **write throughput (the probe)**: right after the rollout, on the same API server with the same admission policies, CEL rules and audit configuration, the controller and the player are stopped and a plain client (`tests/src/write_probe.rs`) makes the rollout's own writes in the rollout's proportions (read from the API server's request counter by resource, subresource and verb), with the bodies the rollout's writers send, as the same users: BootcNode server-side applies, Node merge patches (cordon, uncordon), the pool's status applies and Events as the controller, BootcNode status applies (the whole status) and Node status strategic merge patches as the players. Every write changes its object (a slot taken or released, a cordon or uncordon, NotReady or Ready, a condition's message, a count): none is a no-op. Watches standing in for the stopped ones stay open (two on BootcNodes, one on Nodes), so each write fans out as during the rollout. Two runs of at most `--probe-writes` writes, on disjoint halves of the nodes: one with {ROLLOUT_CONCURRENCY} writes in flight (the controller's 16 concurrent per-node write chains and the player's one), one with {SATURATING_CONCURRENCY} (to saturate); each run prints the cores busy in the API server, etcd, the probe's own client and the whole machine (other work included), which shows how close the API server came to saturation and how much of the machine it got, and the API server's and etcd's CPU per write, in the probe and in the rollout (whose requests include its reads and watches): a cost that does not depend on the share of a busy machine they got. The ideal uses the faster run.
- **write mix**: the rollout's writes and the faster probe run's, kind by kind: verb, resource, the body's patch type (the writers' own: apply, merge, strategic, create), the kind's share of the writes, and the mean body size the API server counted (`apiserver_request_body_size_bytes`, which files a resource's writes and its status's under one label, so both show the same mean). Kinds the probe does not make (a lease's renewal) show `-` on its side.
- **ratio**: rollout time / ideal time. 1.0 would mean no cost of scale beyond the waves and the API server's own. Target: at most 2.0 at 5,000 nodes.
- **controller writes per node to its BootcNode and Node**: writes to `bootcnodes` and `nodes` during the rollout (nobody else writes those here) per node. 5.00: three BootcNode applies (the target, the approval, its withdrawal), and a cordon and an uncordon that take and release the slot (the api section's floor).
- **controller CPU**: the controller's user + system time (`/proc/<pid>/stat`) from the pool's patch until every node is updated, and that time divided by the rollout's: the cores it kept busy. Target: at most 0.10 cores at every size (an absolute budget would punish the longer rollouts of larger pools; the Go bootc-operator's controller, measured side by side in an earlier harness at 1,000 nodes, used 3.5 times our CPU). **CPU per node update**: the controller's CPU divided by the pool's nodes. Target: at most {CPU_PER_NODE_MS:.1} ms at every size, and from 1,000 to 20,000 nodes at most +{CPU_GROWTH_PERCENT:.0} % (a flat cost per node). **API server / etcd CPU**: the same, for kube-apiserver and etcd, in the same window. **players' / whole machine's CPU**: this process's (the DaemonPlayer) and every CPU's busy time (`/proc/stat`), in the same window: on a shared machine the difference is other work. **controller CPU over the players'**: the two costs of the same work in the same window. A slow hour of the machine (other tenants, the host's clock) raises both, the players' as much as the controller's, so while the bench's players are unchanged this ratio shows the controller's own change between two runs where the absolute figures cannot.
- **controller peak RSS**: its VmHWM at the end of the rollout, the most it held since it started (cache sync included). Target: at most 150 MiB at 20,000 nodes. **RSS after the rollout**: its VmRSS then. **Memory per node, synced**: the controller's VmRSS as the rollout starts (every Node and BootcNode in its caches), its growth from the smallest size to the largest divided by the nodes added: what one node costs it at rest (the stripped Node, its BootcNode, the planner's memo and the metrics' series), the process's fixed part cancelled out.
- **reconcile p50 / p99**: from the controller's `reconciled` log lines (`elapsed_us`: one reconcile's planning and writes) during the rollout. Target: p99 at most 1.0 s at 20,000 nodes.
- **a node back Ready -> its release**: a watch of the Nodes (in the benchmark's process) notes when each node turns Ready after its reboot's NotReady, and when its slot's record leaves it (the release's uncordon); p50 / p99 over the nodes. Target: p99 at most 1.0 s at 20,000 nodes.

Everything shares the machine's CPUs: the controller, the API server, etcd, the players and the probe; both terms of the ideal are measured in the same run, on the same machine.
"
    )
}
