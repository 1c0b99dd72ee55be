//! `bootc-bench`: the README's performance targets, measured on the
//! simulated cluster and printed against their targets; the table is also
//! written to BENCHMARKS.md.
//!
//! Sections (`--sections`, comma-separated):
//! - `api`: API requests per node for one full update (stage, slot, drain,
//!   reboot, release) on the simulated cluster, counted from the API
//!   server's audit log by user and verb; then the requests made while idle;
//! - `rss`: steady-state memory of the real daemon and helper (the debug
//!   builds the simulator runs, and the release builds when present);
//! - `latency`: BootcNode spec change -> the fake bootc's
//!   `switch --download-only`, on one real daemon + helper;
//! - `sizes`: release binary sizes, the helper's linked crates and code
//!   lines, and the operator image's size (compressed and unpacked) built
//!   from the binaries;
//! - `scale`: the real controller with N nodes played by the DaemonPlayer.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use api::labels::ARCH_LABEL;
use api::node_health::NODE_READY;
use api::{BootcNode, BootcNodePool, BootcNodeSpec, DesiredImageState, RebootPolicy};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tests::control_plane::{CONTROLLER_USER, DAEMON_USER};
use tests::daemon_player::{DaemonPlayer, PlayerOptions, set_ready};
use tests::fake_host::{FakeHost, target_dir};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node, install_daemon_rbac};
use tests::sim::{POOL, POOL_LABEL, Sim, SimOptions};
use tests::write_probe;
use tests::{ControlPlane, k8s};

#[derive(Parser, Debug)]
#[command(
    name = "bootc-bench",
    about = "Benchmarks of bootc-operator against the performance targets in README.md"
)]
struct Cli {
    /// Sections to run: api, rss, latency, sizes, scale.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "api,rss,latency,sizes,scale"
    )]
    sections: Vec<String>,
    /// Simulated nodes for the api and rss sections.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Seconds of the idle period after the rollout.
    #[arg(long, default_value_t = 30)]
    idle_seconds: u64,
    /// Spec changes for the latency section.
    #[arg(long, default_value_t = 100)]
    latency_changes: usize,
    /// Pool sizes for the scale section (`--scale-nodes 1000,5000` for a
    /// shorter run).
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,20000")]
    scale_nodes: Vec<usize>,
    /// Give up on one scale rollout (and, apart, on its setup) after this
    /// many seconds; the size's row then says "not reached".
    #[arg(long, default_value_t = 1200)]
    scale_timeout_seconds: u64,
    /// At most this many writes per run of the scale section's
    /// write-throughput probe (fewer when the rollout made fewer).
    #[arg(long, default_value_t = 20_000)]
    probe_writes: usize,
    /// Where the release builds are (default: target/release).
    #[arg(long)]
    release_dir: Option<PathBuf>,
    /// Where to write the table (default: BENCHMARKS.md at the repository root).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Do not write BENCHMARKS.md.
    #[arg(long)]
    no_write: bool,
}

fn out(text: &str) {
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// One line of the table.
#[derive(Debug, Clone)]
struct Row {
    figure: String,
    value: String,
    target: String,
    verdict: &'static str,
}

fn row(figure: impl Into<String>, value: impl Into<String>, target: &str, ok: Option<bool>) -> Row {
    Row {
        figure: figure.into(),
        value: value.into(),
        target: target.to_owned(),
        verdict: match ok {
            None => "-",
            Some(true) => "ok",
            Some(false) => "MISSED",
        },
    }
}

#[derive(Debug, Default)]
struct Report {
    rows: Vec<Row>,
    /// Detail sections (markdown), printed after the table.
    details: Vec<String>,
    notes: Vec<String>,
}

impl Report {
    fn push(&mut self, r: Row) {
        out(&format!(
            "  {:<58} {:>16}  target {:<14} {}\n",
            r.figure, r.value, r.target, r.verdict
        ));
        self.rows.push(r);
    }

    fn table(&self) -> String {
        let mut s = String::from("| Figure | Measured | Target | |\n|---|---:|---|---|\n");
        for r in &self.rows {
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                r.figure, r.value, r.target, r.verdict
            ));
        }
        s
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

// ---------------------------------------------------------------- /proc

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The children of `pid` (from /proc/*/stat).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().into_string().ok()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // Fields after the command name, which ends at the last ')'.
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// User + system CPU seconds of a process.
fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; `rest` starts at field 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

// ---------------------------------------------------------------- audit log

#[derive(Debug, Default, Clone)]
struct Counts {
    /// (user, verb, resource) -> requests.
    by: BTreeMap<(String, String, String), u64>,
}

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

impl Counts {
    fn parse(text: &str) -> Counts {
        let mut c = Counts::default();
        for line in text.lines() {
            let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if ev["stage"] != "RequestReceived" {
                continue;
            }
            let user = match ev["user"]["username"].as_str().unwrap_or("") {
                CONTROLLER_USER => "controller",
                DAEMON_USER => "daemon",
                _ => continue,
            };
            let verb = ev["verb"].as_str().unwrap_or("?").to_owned();
            let mut resource = ev["objectRef"]["resource"]
                .as_str()
                .unwrap_or("(non-resource)")
                .to_owned();
            if let Some(sub) = ev["objectRef"]["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            *c.by.entry((user.to_owned(), verb, resource)).or_default() += 1;
        }
        c
    }

    fn total(&self, user: &str, writes_only: bool) -> u64 {
        self.by
            .iter()
            .filter(|((u, v, _), _)| {
                u == user && (!writes_only || WRITE_VERBS.contains(&v.as_str()))
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of both components, reads included, to anything but the
    /// given resources.
    fn requests_except(&self, resources: &[&str]) -> u64 {
        self.by
            .iter()
            .filter(|((_, _, r), _)| !resources.contains(&r.as_str()))
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes (both components) to the given resources.
    fn writes_to(&self, resources: &[&str]) -> u64 {
        self.by
            .iter()
            .filter(|((_, v, r), _)| {
                WRITE_VERBS.contains(&v.as_str()) && resources.contains(&r.as_str())
            })
            .map(|(_, n)| n)
            .sum()
    }

    fn verb(&self, user: &str, verb: &str) -> u64 {
        self.by
            .iter()
            .filter(|((u, v, _), _)| u == user && v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    fn markdown(&self, title: &str, per: usize) -> String {
        let mut s = format!(
            "#### {title}\n\n| Component | Verb | Resource | Requests | Per node |\n|---|---|---|---:|---:|\n"
        );
        if self.by.is_empty() {
            s.push_str("| (none) | | | 0 | 0 |\n");
        }
        for ((u, v, r), n) in &self.by {
            s.push_str(&format!(
                "| {u} | {v} | {r} | {n} | {:.1} |\n",
                *n as f64 / per.max(1) as f64
            ));
        }
        s
    }
}

fn audit_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn audit_slice(path: &Path, from: u64, to: u64) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let from = usize::try_from(from)?.min(bytes.len());
    let to = usize::try_from(to)?.min(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[from..to]).into_owned())
}

/// Write requests served so far, by resource (`resource` or
/// `resource/subresource`), from the API server's own request counter: no
/// audit log, so the measured rollout runs at full speed.
async fn served_writes(admin: &kube::Client) -> Result<BTreeMap<String, f64>> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = admin
        .request_text(req)
        .await
        .context("reading the API server's /metrics")?;
    let mut by = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let verb = label("verb");
        if ![
            "POST",
            "PUT",
            "PATCH",
            "APPLY",
            "DELETE",
            "DELETECOLLECTION",
        ]
        .contains(&verb.as_str())
        {
            continue;
        }
        let mut resource = label("resource");
        let sub = label("subresource");
        if !sub.is_empty() {
            resource = format!("{resource}/{sub}");
        }
        *by.entry(resource).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    Ok(by)
}

// ---------------------------------------------------------------- the simulated cluster

fn rolled_to(pool: &BootcNodePool, digest: &str, nodes: usize) -> bool {
    pool.status.as_ref().is_some_and(|s| {
        s.deployed_digest.as_deref() == Some(digest)
            && usize::try_from(s.updated_count).ok() == Some(nodes)
            && usize::try_from(s.node_count).ok() == Some(nodes)
    })
}

/// Waits until the pool's status says no node holds a reboot slot: the last
/// release is written (a count-only change, coalesced for up to 5 s).
async fn wait_settled(admin: &kube::Client, timeout: Duration) -> Result<()> {
    k8s::wait_for(
        Api::<BootcNodePool>::all(admin.clone()),
        POOL,
        timeout,
        "no reboot slots in the pool's status",
        |p: Option<&BootcNodePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                api::conditions::message(&s.conditions, api::reasons::UP_TO_DATE)
                    .is_some_and(|m| !m.contains("in reboot slots"))
            })
        },
    )
    .await?;
    Ok(())
}

async fn wait_rolled(
    admin: &kube::Client,
    digest: &str,
    nodes: usize,
    timeout: Duration,
) -> Result<()> {
    let digest = digest.to_owned();
    k8s::wait_for(
        Api::<BootcNodePool>::all(admin.clone()),
        POOL,
        timeout,
        "the rollout",
        move |p: Option<&BootcNodePool>| p.is_some_and(|p| rolled_to(p, &digest, nodes)),
    )
    .await?;
    Ok(())
}

/// Waits until no BootcNode holds a reboot slot and the pool's
/// `RolloutComplete` event for `image` is published: the last writes of a
/// rollout land just after the status that shows it complete. Polled: the
/// benchmark only needs the end, not each step.
async fn wait_released(admin: &kube::Client, image: &str, timeout: Duration) -> Result<()> {
    use k8s_openapi::api::events::v1::Event;
    let bns = Api::<BootcNode>::all(admin.clone());
    let events = Api::<Event>::namespaced(admin.clone(), api::labels::CLUSTER_EVENTS_NAMESPACE);
    let deadline = Instant::now() + timeout;
    loop {
        let slotted = bns
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|b| b.in_slot())
            .count();
        let complete = events
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some(api::event_reasons::ROLLOUT_COMPLETE)
                    && e.note.as_deref().is_some_and(|n| n.ends_with(image))
            });
        if slotted == 0 && complete {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{slotted} BootcNodes still in reboot slots, RolloutComplete published: {complete}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Peak memory of the node agents seen by a sampler, by process kind.
#[derive(Debug, Default, Clone, Copy)]
struct AgentMemory {
    daemon_rss_max: u64,
    daemon_hwm_max: u64,
    helper_rss_max: u64,
    helper_hwm_max: u64,
}

async fn sample_agents(sim: &Sim) -> AgentMemory {
    let mut m = AgentMemory::default();
    for (_, pid) in sim.daemon_pids().await {
        if let Some((rss, hwm)) = memory_kib(pid) {
            m.daemon_rss_max = m.daemon_rss_max.max(rss);
            m.daemon_hwm_max = m.daemon_hwm_max.max(hwm);
        }
        for child in children(pid) {
            if let Some((rss, hwm)) = memory_kib(child) {
                m.helper_rss_max = m.helper_rss_max.max(rss);
                m.helper_hwm_max = m.helper_hwm_max.max(hwm);
            }
        }
    }
    m
}

fn merge(a: AgentMemory, b: AgentMemory) -> AgentMemory {
    AgentMemory {
        daemon_rss_max: a.daemon_rss_max.max(b.daemon_rss_max),
        daemon_hwm_max: a.daemon_hwm_max.max(b.daemon_hwm_max),
        helper_rss_max: a.helper_rss_max.max(b.helper_rss_max),
        helper_hwm_max: a.helper_hwm_max.max(b.helper_hwm_max),
    }
}

struct RolloutResult {
    update: Counts,
    idle: Counts,
    daemon_starts: usize,
    rollout_seconds: f64,
    /// Highest VmHWM of any daemon / helper sampled during the rollout.
    during: AgentMemory,
    /// VmRSS / VmHWM at the end of the idle period.
    steady: AgentMemory,
}

/// Starts a simulated cluster, rolls v1 -> v2, waits `idle`, and measures.
async fn sim_rollout(
    nodes: usize,
    audit: bool,
    idle: Duration,
    bin_dir: Option<PathBuf>,
) -> Result<RolloutResult> {
    let options = SimOptions {
        nodes,
        max_unavailable: json!(1),
        audit,
        agent_bin_dir: bin_dir,
        ..SimOptions::default()
    };
    let mut sim = Sim::start(options)
        .await
        .context("starting the simulated cluster")?;
    let v1 = sim.push_version("1.0").await?;
    sim.add_nodes(nodes, &v1).await?;
    sim.create_pool().await?;
    sim.start_kubelet();
    wait_rolled(&sim.admin, &v1, nodes, Duration::from_secs(120))
        .await
        .context("every node on v1")?;
    // Let the first status writes settle before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let audit_path = sim.cp.audit_log();
    let a = audit_len(&audit_path);
    let reboots_before: usize = {
        let all = sim.nodes.lock().await;
        all.iter().map(|n| n.host.layout.read_reboots().len()).sum()
    };
    let started = Instant::now();
    let v2 = sim.push_version("2.0").await?;
    let mut during = AgentMemory::default();
    let admin = sim.admin.clone();
    let wait = wait_rolled(
        &admin,
        &v2,
        nodes,
        Duration::from_secs(120 + 30 * nodes as u64),
    );
    tokio::pin!(wait);
    loop {
        tokio::select! {
            r = &mut wait => { r.context("the rollout to v2")?; break; }
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                during = merge(during, sample_agents(&sim).await);
            }
        }
    }
    let rollout_seconds = started.elapsed().as_secs_f64();
    wait_settled(&admin, Duration::from_secs(60)).await?;
    // The last daemons restarted after their reboot report once more.
    tokio::time::sleep(Duration::from_secs(5)).await;
    during = merge(during, sample_agents(&sim).await);
    let b = audit_len(&audit_path);
    tokio::time::sleep(idle).await;
    let c = audit_len(&audit_path);
    let steady = sample_agents(&sim).await;
    let reboots_after: usize = {
        let all = sim.nodes.lock().await;
        all.iter().map(|n| n.host.layout.read_reboots().len()).sum()
    };
    let (update, idle_counts) = if audit {
        (
            Counts::parse(&audit_slice(&audit_path, a, b)?),
            Counts::parse(&audit_slice(&audit_path, b, c)?),
        )
    } else {
        (Counts::default(), Counts::default())
    };
    sim.kill_controller();
    Ok(RolloutResult {
        update,
        idle: idle_counts,
        daemon_starts: reboots_after - reboots_before,
        rollout_seconds,
        during,
        steady,
    })
}

/// What the controller writes per pool, not per node: its status and Events.
const POOL_SHARED: &[&str] = &["bootcnodepools/status", "events"];

fn report_api(report: &mut Report, r: &RolloutResult, nodes: usize, idle: Duration) {
    out(&format!(
        "api: {nodes} nodes, maxUnavailable 1, rollout took {:.1}s\n",
        r.rollout_seconds
    ));
    let per = |n: u64| n as f64 / nodes as f64;
    let cw = r.update.total("controller", true);
    let dw = r.update.total("daemon", true);
    let writes = per(cw + dw);
    // The write target counts a node's update: stage, slot, drain, reboot,
    // release. Those are the writes to the node's own objects; the pool's
    // status and Events are per pool, shared by its nodes (see the scale rows).
    let node_objects =
        r.update
            .writes_to(&["bootcnodes", "bootcnodes/status", "nodes", "pods/eviction"]);
    report.push(row(
        "API writes per node per update, to its objects (BootcNode, Node, eviction)",
        format!("{:.1}", per(node_objects)),
        "<= 10",
        Some(per(node_objects) <= 10.0),
    ));
    report.push(row(
        format!("  all writes per node, the pool's share included ({nodes} nodes)"),
        format!("{writes:.1}"),
        "",
        None,
    ));
    report.push(row(
        "  of which controller writes per node",
        format!("{:.1}", per(cw)),
        "",
        None,
    ));
    report.push(row(
        "  of which daemon writes per node",
        format!("{:.1}", per(dw)),
        "",
        None,
    ));
    report.push(row(
        "  of which pool status",
        format!("{:.1}", per(r.update.writes_to(&["bootcnodepools/status"]))),
        "",
        None,
    ));
    report.push(row(
        "  of which events",
        format!("{:.1}", per(r.update.writes_to(&["events"]))),
        "",
        None,
    ));
    let cr = r.update.total("controller", false);
    let dr = r.update.total("daemon", false);
    // As for the writes: the node's own, the pool's status and Events apart.
    let node_requests = per(r.update.requests_except(POOL_SHARED));
    report.push(row(
        "API requests per node per update, to its objects (reads included)",
        format!("{node_requests:.1}"),
        "<= 12",
        Some(node_requests <= 12.0),
    ));
    report.push(row(
        format!("  all requests per node, the pool's share included ({nodes} nodes)"),
        format!("{:.1}", per(cr + dr)),
        "",
        None,
    ));
    let watches = r.update.verb("daemon", "watch");
    // Every node's daemon is restarted once by its reboot: the new processes
    // are the ones whose watches fall in the update window.
    let starts = r.daemon_starts.max(1);
    let per_daemon = watches as f64 / starts as f64;
    report.push(row(
        format!("daemon watches per daemon process ({watches} / {starts} started)"),
        format!("{per_daemon:.2}"),
        "1",
        Some(watches as usize <= starts),
    ));
    let idle_daemon = r.idle.total("daemon", false);
    let idle_controller = r.idle.total("controller", false);
    let idle_controller_writes = r.idle.total("controller", true);
    report.push(row(
        format!(
            "daemon requests while idle ({}s, all daemons)",
            idle.as_secs()
        ),
        idle_daemon.to_string(),
        "0",
        Some(idle_daemon == 0),
    ));
    report.push(row(
        format!("controller writes while idle ({}s)", idle.as_secs()),
        idle_controller_writes.to_string(),
        "0",
        Some(idle_controller_writes == 0),
    ));
    report.push(row(
        format!("controller requests while idle ({}s)", idle.as_secs()),
        idle_controller.to_string(),
        "",
        None,
    ));
    report.details.push(format!(
        "### API requests for one update of {nodes} nodes (maxUnavailable 1)\n\nCounted from the API server's audit log (stage RequestReceived), by user. Watches are counted when they start.\n\n{}\n{}",
        r.update.markdown("During the update", nodes),
        r.idle.markdown(&format!("While idle ({}s after the rollout)", idle.as_secs()), nodes),
    ));
}

/// `judged`: whether the targets apply (release builds, or debug builds
/// when no release build is there).
fn report_rss(report: &mut Report, label: &str, r: &RolloutResult, judged: bool) {
    let d = r.steady.daemon_rss_max;
    let h = r.steady.helper_rss_max;
    let (dt, ht) = if judged {
        ("<= 8 MiB", "<= 3 MiB")
    } else {
        ("(release)", "(release)")
    };
    report.push(row(
        format!("daemon RSS, steady ({label}; max VmRSS over nodes)"),
        mib(d),
        dt,
        judged.then_some(d > 0 && d <= 8 * 1024),
    ));
    report.push(row(
        format!("daemon peak (VmHWM) during the update ({label})"),
        mib(r.during.daemon_hwm_max),
        "",
        None,
    ));
    report.push(row(
        format!("helper RSS, steady ({label}; max VmRSS over nodes)"),
        mib(h),
        ht,
        judged.then_some(h > 0 && h <= 3 * 1024),
    ));
    report.push(row(
        format!("helper peak (VmHWM) during the update ({label})"),
        mib(r.during.helper_hwm_max),
        "",
        None,
    ));
}

// ---------------------------------------------------------------- latency

fn pinned(i: usize) -> String {
    format!("127.0.0.1:5000/os@sha256:{i:064x}")
}

fn unix_micros_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Daemon log lines "staging" with their timestamps (µs since the epoch), by image.
/// When the daemon logged that it saw each desired image, by image.
fn seen_log_times(log: &str) -> BTreeMap<String, u64> {
    log_times(log, " spec seen", "desired=")
}

/// When the daemon logged "staging" (just before the Stage RPC), by image.
fn staging_log_times(log: &str) -> BTreeMap<String, u64> {
    log_times(log, " staging", "image=")
}

/// The first time of each value of `field` on log lines containing `marker`.
fn log_times(log: &str, marker: &str, field: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in log.lines() {
        if !line.contains(marker) || line.contains("again") {
            continue;
        }
        let Some(ts) = line.split_whitespace().next() else {
            continue;
        };
        let Ok(t) = ts.parse::<jiff::Timestamp>() else {
            continue;
        };
        let Some(image) = line.split_whitespace().find_map(|w| w.strip_prefix(field)) else {
            continue;
        };
        let micros = u64::try_from(t.as_microsecond()).unwrap_or(0);
        m.entry(image.trim_matches('"').to_owned())
            .or_insert(micros);
    }
    m
}

async fn latency(report: &mut Report, changes: usize) -> Result<()> {
    out(&format!(
        "latency: {changes} spec changes on one daemon + helper\n"
    ));
    let cp = ControlPlane::start().await?;
    let admin = cp.admin().await?;
    k8s::install_crds(&admin).await?;
    install_daemon_rbac(&cp)?;
    let logs = tempfile::tempdir()?;
    let first = pinned(1);
    let host = FakeHost::start(Some(&first)).context("starting a fake host")?;
    let spec = BootcNodeSpec {
        desired_image: first.clone(),
        desired_image_state: DesiredImageState::Staged,
        reboot_policy: RebootPolicy::RebootOnly,
        pull_secret_ref: None,
        pull_secret_hash: None,
    };
    create_bootc_node(&admin, "bench-node", spec).await?;
    let agent = Agent::start(&cp, &host, &AgentOptions::new("bench-node"), logs.path())?;
    let nodes: Api<BootcNode> = Api::all(admin.clone());
    let idle = |bn: Option<&BootcNode>| {
        bn.and_then(|b| b.status.as_ref())
            .and_then(|s| api::conditions::reason(&s.conditions, api::reasons::IDLE))
            .is_some()
    };
    k8s::wait_for(
        nodes.clone(),
        "bench-node",
        Duration::from_secs(60),
        "the first status",
        idle,
    )
    .await?;
    let mut samples = LatencySamples::default();
    for i in 0..changes {
        samples
            .measure(&host, &agent, &nodes, pinned(i + 2))
            .await?;
    }
    samples.report(report, changes);
    Ok(())
}

/// The latency section's measurements, in milliseconds.
#[derive(Default)]
struct LatencySamples {
    to_stage: Vec<f64>,
    to_log: Vec<f64>,
    seen_to_stage: Vec<f64>,
    to_seen: Vec<f64>,
    patch_round_trip: Vec<f64>,
}

impl LatencySamples {
    /// One change of `spec.desiredImage` to `image`, timed until it is staged.
    async fn measure(
        &mut self,
        host: &FakeHost,
        agent: &Agent,
        nodes: &Api<BootcNode>,
        image: String,
    ) -> Result<()> {
        let seen = host.layout.read_invocations().len();
        // The admin's connection is opened before the clock starts: waiting
        // on the watch above leaves the client without an idle connection,
        // and a debug-build TLS handshake (about 40 ms) is the benchmark's
        // cost, not the operator's.
        nodes.get("bench-node").await?;
        let t0 = unix_micros_now();
        nodes
            .patch(
                "bench-node",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"desiredImage": image}})),
            )
            .await?;
        let t1 = unix_micros_now();
        self.patch_round_trip
            .push(t1.saturating_sub(t0) as f64 / 1000.0);
        // The fake bootc records each run with its start time; poll its file.
        let deadline = Instant::now() + Duration::from_secs(30);
        let staged_at = loop {
            let found = host
                .layout
                .read_invocations()
                .into_iter()
                .skip(seen)
                .find(|inv| {
                    inv.argv.iter().any(|a| a == "--download-only") && inv.argv.contains(&image)
                })
                .map(|inv| inv.unix_micros);
            if let Some(t) = found {
                break t;
            }
            if Instant::now() > deadline {
                bail!(
                    "no `switch --download-only {image}` within 30s:\n{}",
                    agent.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        self.to_stage
            .push(staged_at.saturating_sub(t0) as f64 / 1000.0);
        let want = image.clone();
        k8s::wait_for(
            nodes.clone(),
            "bench-node",
            Duration::from_secs(30),
            api::DaemonPhase::Staged.as_str(),
            move |bn: Option<&BootcNode>| {
                bn.and_then(|b| b.status.as_ref())
                    .and_then(|s| s.staged.as_ref())
                    .and_then(|s| s.image.as_deref())
                    == Some(want.as_str())
            },
        )
        .await?;
        let log = agent.log_text();
        if let Some(t) = staging_log_times(&log).get(&image) {
            self.to_log.push(t.saturating_sub(t0) as f64 / 1000.0);
            if let Some(seen) = seen_log_times(&log).get(&image) {
                self.seen_to_stage
                    .push(t.saturating_sub(*seen) as f64 / 1000.0);
                self.to_seen.push(seen.saturating_sub(t0) as f64 / 1000.0);
            }
        }
        Ok(())
    }

    fn report(mut self, report: &mut Report, changes: usize) {
        self.seen_to_stage.sort_by(f64::total_cmp);
        self.to_seen.sort_by(f64::total_cmp);
        self.patch_round_trip.sort_by(f64::total_cmp);
        self.to_stage.sort_by(f64::total_cmp);
        self.to_log.sort_by(f64::total_cmp);
        // The latency target: from the daemon seeing the change to the Stage
        // RPC it issues (its "spec seen" and "staging" log lines).
        let p99 = percentile(&self.seen_to_stage, 99.0);
        report.push(row(
            format!(
                "spec change seen by the daemon -> Stage RPC issued, p50 / p99 (n={})",
                self.seen_to_stage.len()
            ),
            format!("{:.1} / {p99:.1} ms", percentile(&self.seen_to_stage, 50.0)),
            "p99 < 100 ms",
            Some(self.seen_to_stage.len() == changes && p99 < 100.0),
        ));
        for (what, samples) in [
            (
                "admin PATCH sent -> bootc switch --download-only runs",
                &self.to_stage,
            ),
            (
                "  of which the admin's PATCH round trip",
                &self.patch_round_trip,
            ),
            (
                "  admin PATCH sent -> daemon logs \"spec seen\"",
                &self.to_seen,
            ),
        ] {
            report.push(p50_p99_row(what, samples));
        }
        if !self.to_log.is_empty() {
            report.push(p50_p99_row(
                "admin PATCH sent -> daemon logs \"staging\"",
                &self.to_log,
            ));
        }
        report.details.push(format!(
    "### Spec change to Stage\n\nOver {} changes of `spec.desiredImage` on one real daemon + helper (debug builds). The judged figure runs from the daemon's log line of the watch event that carries the new spec (`spec seen`) to its `staging` line, written just before the Stage RPC; the Staging status write goes out together with the RPC. The end-to-end figures run from the moment the admin's PATCH is sent on an open connection (its round trip and the API server's watch delivery included) to the start of the fake bootc's `switch --download-only` (its own timestamp, after the Stage RPC, the helper's fork, setns and exec, and the wrapper script); max {:.1} ms.\n",
    self.to_stage.len(),
    self.to_stage.last().copied().unwrap_or(f64::NAN)
));
    }
}

/// An untargeted row: `what`'s p50 and p99 over sorted `samples`, in ms.
fn p50_p99_row(what: &str, samples: &[f64]) -> Row {
    row(
        format!("{what}, p50 / p99 (n={})", samples.len()),
        format!(
            "{:.1} / {:.1} ms",
            percentile(samples, 50.0),
            percentile(samples, 99.0)
        ),
        "",
        None,
    )
}

// ---------------------------------------------------------------- sizes

fn sizes(report: &mut Report, release_dir: &Path) {
    use tests::helper_size::{CRATE_BUDGET, LINE_BUDGET, helper_code_lines, linked_crates};
    let repo = tests::repo_root();
    match linked_crates(&repo) {
        Ok(crates) => report.push(row(
            "bootc-helper: linked crates (workspace's included)",
            crates.len().to_string(),
            &format!("<= {CRATE_BUDGET}"),
            Some(crates.len() <= CRATE_BUDGET),
        )),
        Err(e) => report.notes.push(format!("helper crates: {e}")),
    }
    match helper_code_lines(&repo) {
        Ok(lines) => report.push(row(
            "bootc-helper: non-test code lines (helper/src)",
            lines.to_string(),
            &format!("<= {LINE_BUDGET}"),
            Some(lines <= LINE_BUDGET),
        )),
        Err(e) => report.notes.push(format!("helper lines: {e}")),
    }
    for name in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        let path = release_dir.join(name);
        match std::fs::metadata(&path) {
            Ok(m) => report.push(row(
                format!("release binary size: {name}"),
                format!("{:.1} MiB", m.len() as f64 / (1024.0 * 1024.0)),
                "",
                None,
            )),
            Err(_) => {
                report.push(row(
                    format!("release binary size: {name}"),
                    "not built",
                    "",
                    None,
                ));
                report.notes.push(format!(
                    "{} missing: build with `cargo build --release`",
                    path.display()
                ));
            }
        }
    }
}

/// The operator's image built from the release binaries (what `./dev image`
/// builds): its size compressed (what a node pulls) and unpacked.
fn image_size(report: &mut Report, release_dir: &Path) {
    let measured = (|| -> Result<(u64, u64)> {
        let dir = tempfile::tempdir()?;
        let layout = dir.path().join("oci");
        let digest = tests::image::build(release_dir, &layout, "bench", 0)?;
        tests::image::sizes(&layout, "bench", &digest)
    })();
    let figure = |what| format!("operator image size, {what} (./dev image)");
    match measured {
        Ok((compressed, unpacked)) => {
            report.push(row(figure("compressed"), mib(compressed / 1024), "", None));
            report.push(row(figure("unpacked"), mib(unpacked / 1024), "", None));
        }
        Err(error) => {
            report.push(row(figure("compressed"), "not built", "", None));
            report.notes.push(format!("operator image: {error:#}"));
        }
    }
}

// ---------------------------------------------------------------- scale

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
    reconciles: Vec<f64>,
    /// Write requests served during the rollout, by resource.
    writes: BTreeMap<String, f64>,
    probes: Vec<Probe>,
}

impl ScaleResult {
    fn writes_to(&self, resources: &[&str]) -> f64 {
        resources
            .iter()
            .map(|r| self.writes.get(*r).unwrap_or(&0.0))
            .sum()
    }

    fn all_writes(&self) -> f64 {
        self.writes.values().sum()
    }

    /// The best write throughput the probe measured, with its run.
    fn best_probe(&self) -> Option<&Probe> {
        self.probes
            .iter()
            .filter(|p| p.outcome.made > 0)
            .max_by(|a, b| a.outcome.throughput().total_cmp(&b.outcome.throughput()))
    }
}

/// Reconcile durations (ms) logged by the controller after `from` bytes.
fn reconcile_durations(log: &str) -> Vec<f64> {
    let mut v = Vec::new();
    for line in log.lines() {
        if !line.contains("reconciled") {
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

fn strip_ansi(s: &str) -> String {
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

/// `after - before`, by resource, without the unchanged ones.
fn writes_delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(r, n)| (r.clone(), n - before.get(r).unwrap_or(&0.0)))
        .filter(|(_, n)| *n > 0.0)
        .collect()
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
            if !api::node_health::is_ready(&created) {
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
    let v1 = format!("{}/acme/os@sha256:{}", sim.registry.host(), "1".repeat(64));
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
        },
    }))?;
    Api::<BootcNodePool>::all(admin.clone())
        .create(&PostParams::default(), &pool)
        .await?;
    let d1 = format!("sha256:{}", "1".repeat(64));
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
async fn measure_rollout(sim: &Sim, n: usize, timeout: Duration) -> Result<ScaleResult> {
    let admin = sim.admin.clone();
    let v2 = format!("{}/acme/os@sha256:{}", sim.registry.host(), "2".repeat(64));
    let d2 = format!("sha256:{}", "2".repeat(64));
    let pids = Pids::of(sim);
    let controller = pids.controller.context("the controller is not running")?;
    let log_path = sim.log_dir().join("controller.log");
    let log_from = audit_len(&log_path);
    let writes0 = served_writes(&admin).await?;
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
    let writes = writes_delta(&writes0, &served_writes(&admin).await?);
    let (rss_kib, hwm_kib) = memory_kib(controller).unwrap_or((0, 0));
    let log = audit_slice(&log_path, log_from, audit_len(&log_path))?;
    let mut reconciles = reconcile_durations(&log);
    reconciles.sort_by(f64::total_cmp);
    Ok(ScaleResult {
        nodes: n,
        slots: (n / 10).max(1),
        rollout_seconds,
        elapsed_seconds,
        updated: updated_count(&admin).await,
        cpu,
        rss_kib,
        hwm_kib,
        reconciles,
        writes,
        probes: Vec::new(),
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
    let counts: Vec<(write_probe::WriteKind, f64)> = write_probe::WriteKind::ALL
        .iter()
        .map(|k| (*k, r.writes_to(&[k.resource()])))
        .collect();
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
        let cpu0 = pids.cpu();
        let outcome = write_probe::run(&clients, POOL, part, &jobs, concurrency).await;
        let cpu = pids.cpu() - cpu0;
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
    let mut r = measure_rollout(&sim, n, timeout).await?;
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

/// The rollout's writes, by who makes them.
fn report_writes(report: &mut Report, r: &ScaleResult) {
    let n = r.nodes as f64;
    let nodes = r.nodes;
    let per_node = r.writes_to(&["bootcnodes", "nodes"]) / n;
    let (target, ok) = (
        "= 6.00 (unchanged)".to_owned(),
        Some(format!("{per_node:.2}") == "6.00"),
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
fn report_costs(report: &mut Report, r: &ScaleResult) {
    let n = r.nodes;
    let during = if r.rollout_seconds.is_some() {
        "during the rollout"
    } else {
        "until the timeout"
    };
    let (target, ok) = judged_at(n, 5000, "<= 20 s", r.cpu.controller <= 20.0);
    report.push(Row {
        target,
        ..row(
            format!("{n} nodes: controller CPU {during}"),
            format!("{:.1} s", r.cpu.controller),
            "",
            ok,
        )
    });
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
    let (target, ok) = judged_at(n, 20_000, "<= 300 MiB", r.hwm_kib <= 300 * 1024);
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
    report.push(row(
        format!("{n} nodes: reconcile p50 / p99 (n={})", r.reconciles.len()),
        format!(
            "{:.1} / {:.1} ms",
            percentile(&r.reconciles, 50.0),
            percentile(&r.reconciles, 99.0)
        ),
        "",
        None,
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
async fn scale_section(report: &mut Report, cli: &Cli, release_dir: &Path) {
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
            ..
        }) => Some(s / CALIBRATION.div_ceil(slots) as f64),
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
    for &n in &cli.scale_nodes {
        match scale(n, timeout, controller_bin.clone(), Some(cli.probe_writes)).await {
            Ok(r) => report_scale(report, &r, unit),
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
}

/// The scale section's explanation in BENCHMARKS.md: what each row is and
/// how it is measured.
fn scale_details(build: &str) -> String {
    format!(
        "### The controller at scale

The real `bootc-controller` ({build} build), kube-apiserver and etcd on this machine; every node's daemon and kubelet are played by the in-process DaemonPlayer (one watch on all BootcNodes, one status write per step, instant reboots). One pool per size, maxUnavailable 10% (rounded down, at least 1): N/10 slots, 10 waves. Each size gets a fresh cluster: the Nodes are created {SETUP_CONCURRENCY} at a time, registered Ready; the pool is created on v1, and the measurement starts once every node is on v1. Each row:

- **new digest -> all updated**: from the pool's patch to v2 until its status counts every node updated. A size that does not get there within `--scale-timeout-seconds` says \"not reached\" with the nodes updated by then; its CPU, memory and reconcile rows then cover the time until the timeout.
- **ideal time**: what an infinitely fast controller would reach on this machine, the larger of two terms. The first is the number of waves times the time of one wave in a pool of {CALIBRATION} nodes with one slot (a calibration run with the same build): one node's round trips, with next to nothing to plan. The second is the rollout's API writes divided by the API server's write throughput: writes that even an infinitely fast controller must get served.
- **API writes**: every write request (create, update, patch, apply, delete) the API server served during the rollout, by resource, from its own `apiserver_request_total` counter, read before the pool's patch and after the last reboot slot is released (the release and the completion event included). The players' writes and the pool's status and events count too.
- **write throughput (the probe)**: right after the rollout, on the same API server with the same admission policies, CEL rules and audit configuration, the controller and the player are stopped and a plain client (`tests/src/write_probe.rs`) makes the rollout's four kinds of node writes in the rollout's proportions, as the same users: BootcNode server-side applies and Node merge patches as the controller, BootcNode and Node status patches as the players. Every write changes its object (a slot taken or released, a cordon or uncordon, NotReady or Ready, a condition's message): none is a no-op. Watches standing in for the stopped ones stay open (two on BootcNodes, one on Nodes), so each write fans out as during the rollout. Two runs of at most `--probe-writes` writes, on disjoint halves of the nodes: one with {ROLLOUT_CONCURRENCY} writes in flight (the controller's 16 concurrent per-node write chains and the player's one), one with {SATURATING_CONCURRENCY} (to saturate); each run prints the cores busy in the API server, etcd, the probe's own client and the whole machine (other work included), which shows how close the API server came to saturation and how much of the machine it got, and the API server's and etcd's CPU per write, in the probe and in the rollout (whose requests include its reads and watches): a cost that does not depend on the share of a busy machine they got. The ideal uses the faster run.
- **ratio**: rollout time / ideal time. 1.0 would mean no cost of scale beyond the waves and the API server's own. Target: at most 2.0 at 5,000 nodes.
- **controller writes per node to its BootcNode and Node**: writes to `bootcnodes` and `nodes` during the rollout (nobody else writes those here) per node. 6.00 today (four BootcNode applies, a cordon and an uncordon); the target is that it stays so.
- **controller CPU**: the controller's user + system time (`/proc/<pid>/stat`) from the pool's patch until every node is updated. Target: at most 20 s at 5,000 nodes. **API server / etcd CPU**: the same, for kube-apiserver and etcd, in the same window. **players' / whole machine's CPU**: this process's (the DaemonPlayer) and every CPU's busy time (`/proc/stat`), in the same window: on a shared machine the difference is other work.
- **controller peak RSS**: its VmHWM at the end of the rollout, the most it held since it started (cache sync included). Target: at most 300 MiB at 20,000 nodes. **RSS after the rollout**: its VmRSS then.
- **reconcile p50 / p99**: from the controller's `reconciled` log lines (`elapsed_us`: one reconcile's planning and writes) during the rollout.

Everything shares the machine's CPUs: the controller, the API server, etcd, the players and the probe; both terms of the ideal are measured in the same run, on the same machine.
"
    )
}

// ---------------------------------------------------------------- main

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or_else(
            || "?".to_owned(),
            |kib| format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)),
        );
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    format!("{cpus} CPUs ({model}), {mem} memory")
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    if !tests::fake_host::is_root() {
        bail!(
            "bootc-bench needs root: the simulated nodes are mount namespaces, and the daemon drops privileges from root"
        );
    }
    let release_dir = cli.release_dir.clone().unwrap_or_else(|| {
        target_dir()
            .parent()
            .map(|p| p.join("release"))
            .unwrap_or_default()
    });
    let has = |s: &str| cli.sections.iter().any(|x| x == s);
    let mut report = Report::default();
    let idle = Duration::from_secs(cli.idle_seconds);
    let started = jiff::Timestamp::now();
    out(&format!("bootc-bench on {}\n", machine()));

    let release_agents = ["bootc-daemon", "bootc-helper"]
        .iter()
        .all(|b| release_dir.join(b).exists());
    if has("api") || has("rss") {
        out(&format!(
            "api/rss: simulated cluster of {} nodes (debug builds), v1 -> v2, then {}s idle\n",
            cli.nodes, cli.idle_seconds
        ));
        let r = sim_rollout(cli.nodes, has("api"), idle, None).await?;
        if has("api") {
            report_api(&mut report, &r, cli.nodes, idle);
        }
        if has("rss") {
            report_rss(&mut report, "debug", &r, !release_agents);
        }
    }
    if has("rss") {
        if release_agents {
            out("rss: the same rollout with the release daemon and helper\n");
            let r = sim_rollout(
                cli.nodes.min(3),
                false,
                Duration::from_secs(10),
                Some(release_dir.clone()),
            )
            .await?;
            report_rss(&mut report, "release", &r, true);
        } else {
            report.notes.push(format!(
                "release daemon/helper not found in {}: RSS measured on debug builds only",
                release_dir.display()
            ));
        }
    }
    if has("latency") {
        latency(&mut report, cli.latency_changes).await?;
    }
    if has("sizes") {
        sizes(&mut report, &release_dir);
        image_size(&mut report, &release_dir);
    }
    if has("scale") {
        scale_section(&mut report, &cli, &release_dir).await;
    }

    for note in &report.notes {
        out(&format!("note: {note}\n"));
    }
    if !cli.no_write {
        let path = cli
            .output
            .clone()
            .unwrap_or_else(|| tests::repo_root().join("BENCHMARKS.md"));
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        let mut text = format!(
            "# Benchmarks\n\nMeasured by `./dev bench` (`tests/src/bin/bootc-bench.rs`) against the performance targets in README.md.\n\n- Date: {}\n- Machine: {}\n- Command: `{}`\n\n{}\n",
            started.strftime("%Y-%m-%d %H:%M UTC"),
            machine(),
            command,
            report.table()
        );
        if !report.notes.is_empty() {
            text.push_str("Notes:\n\n");
            for n in &report.notes {
                text.push_str(&format!("- {n}\n"));
            }
            text.push('\n');
        }
        for d in &report.details {
            text.push_str(d);
            text.push('\n');
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        out(&format!("wrote {}\n", path.display()));
    }
    Ok(())
}
