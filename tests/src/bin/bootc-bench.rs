//! `bootc-bench`: the numbers of DESIGN.md section 7, measured on the
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

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
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
use tests::{ControlPlane, k8s};

#[derive(Parser, Debug)]
#[command(
    name = "bootc-bench",
    about = "Benchmarks of bootc-operator against the targets of DESIGN.md section 7"
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
    /// Pool sizes for the scale section.
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    scale_nodes: Vec<usize>,
    /// Give up on one scale rollout after this many seconds.
    #[arg(long, default_value_t = 1200)]
    scale_timeout_seconds: u64,
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

fn writes_between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    resources: &[&str],
) -> f64 {
    resources
        .iter()
        .map(|r| after.get(*r).unwrap_or(&0.0) - before.get(*r).unwrap_or(&0.0))
        .sum()
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
            .filter(|b| {
                b.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(api::labels::IN_REBOOT_SLOT_ANNOTATION))
            })
            .count();
        let complete = events
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("RolloutComplete")
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

fn report_api(report: &mut Report, r: &RolloutResult, nodes: usize, idle: Duration) {
    out(&format!(
        "api: {nodes} nodes, maxUnavailable 1, rollout took {:.1}s\n",
        r.rollout_seconds
    ));
    let per = |n: u64| n as f64 / nodes as f64;
    let cw = r.update.total("controller", true);
    let dw = r.update.total("daemon", true);
    let writes = per(cw + dw);
    // DESIGN.md section 7 counts a node's update: stage, slot, drain, reboot,
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
    report.push(row(
        "API requests per node per update (reads included)",
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
        ("<= 15 MiB", "<= 5 MiB")
    } else {
        ("(release)", "(release)")
    };
    report.push(row(
        format!("daemon RSS, steady ({label}; max VmRSS over nodes)"),
        mib(d),
        dt,
        judged.then_some(d > 0 && d <= 15 * 1024),
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
        judged.then_some(h > 0 && h <= 5 * 1024),
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
    let mut to_stage = Vec::new();
    let mut to_log = Vec::new();
    let mut seen_to_stage = Vec::new();
    let mut to_seen = Vec::new();
    let mut patch_round_trip = Vec::new();
    for i in 0..changes {
        let image = pinned(i + 2);
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
        patch_round_trip.push(t1.saturating_sub(t0) as f64 / 1000.0);
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
        to_stage.push(staged_at.saturating_sub(t0) as f64 / 1000.0);
        let want = image.clone();
        k8s::wait_for(
            nodes.clone(),
            "bench-node",
            Duration::from_secs(30),
            "Staged",
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
            to_log.push(t.saturating_sub(t0) as f64 / 1000.0);
            if let Some(seen) = seen_log_times(&log).get(&image) {
                seen_to_stage.push(t.saturating_sub(*seen) as f64 / 1000.0);
                to_seen.push(seen.saturating_sub(t0) as f64 / 1000.0);
            }
        }
    }
    seen_to_stage.sort_by(f64::total_cmp);
    to_seen.sort_by(f64::total_cmp);
    patch_round_trip.sort_by(f64::total_cmp);
    to_stage.sort_by(f64::total_cmp);
    to_log.sort_by(f64::total_cmp);
    // DESIGN.md section 7: from the daemon seeing the change to the Stage
    // RPC it issues (its "spec seen" and "staging" log lines).
    let p99 = percentile(&seen_to_stage, 99.0);
    report.push(row(
        format!(
            "spec change seen by the daemon -> Stage RPC issued, p50 / p99 (n={})",
            seen_to_stage.len()
        ),
        format!("{:.1} / {p99:.1} ms", percentile(&seen_to_stage, 50.0)),
        "p99 < 100 ms",
        Some(seen_to_stage.len() == changes && p99 < 100.0),
    ));
    report.push(row(
        format!(
            "admin PATCH sent -> bootc switch --download-only runs, p50 / p99 (n={})",
            to_stage.len()
        ),
        format!(
            "{:.1} / {:.1} ms",
            percentile(&to_stage, 50.0),
            percentile(&to_stage, 99.0)
        ),
        "",
        None,
    ));
    report.push(row(
        format!(
            "  of which the admin's PATCH round trip, p50 / p99 (n={})",
            patch_round_trip.len()
        ),
        format!(
            "{:.1} / {:.1} ms",
            percentile(&patch_round_trip, 50.0),
            percentile(&patch_round_trip, 99.0)
        ),
        "",
        None,
    ));
    report.push(row(
        format!(
            "  admin PATCH sent -> daemon logs \"spec seen\", p50 / p99 (n={})",
            to_seen.len()
        ),
        format!(
            "{:.1} / {:.1} ms",
            percentile(&to_seen, 50.0),
            percentile(&to_seen, 99.0)
        ),
        "",
        None,
    ));
    if !to_log.is_empty() {
        report.push(row(
            format!(
                "admin PATCH sent -> daemon logs \"staging\", p50 / p99 (n={})",
                to_log.len()
            ),
            format!(
                "{:.1} / {:.1} ms",
                percentile(&to_log, 50.0),
                percentile(&to_log, 99.0)
            ),
            "",
            None,
        ));
    }
    report.details.push(format!(
        "### Spec change to Stage\n\nOver {} changes of `spec.desiredImage` on one real daemon + helper (debug builds). The judged figure runs from the daemon's log line of the watch event that carries the new spec (`spec seen`) to its `staging` line, written just before the Stage RPC; the Staging status write goes out together with the RPC. The end-to-end figures run from the moment the admin's PATCH is sent on an open connection (its round trip and the API server's watch delivery included) to the start of the fake bootc's `switch --download-only` (its own timestamp, after the Stage RPC, the helper's fork, setns and exec, and the wrapper script); max {:.1} ms.\n",
        to_stage.len(),
        to_stage.last().copied().unwrap_or(f64::NAN)
    ));
    Ok(())
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

struct ScaleResult {
    nodes: usize,
    slots: usize,
    rollout_seconds: f64,
    cpu_seconds: f64,
    rss_kib: u64,
    hwm_kib: u64,
    reconciles: Vec<f64>,
    /// The controller's writes to BootcNodes and Nodes (the node's objects).
    node_object_writes: f64,
    /// Pool status writes and Events (the pool's share).
    pool_writes: f64,
    /// The played daemons' status writes.
    played_daemon_writes: f64,
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

async fn scale(
    n: usize,
    timeout: Duration,
    controller_bin: Option<PathBuf>,
) -> Result<ScaleResult> {
    out(&format!(
        "scale: {n} nodes, maxUnavailable 10%, instant reboots, {} controller\n",
        if controller_bin.is_some() {
            "release"
        } else {
            "debug"
        }
    ));
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
    let v2 = format!("{}/acme/os@sha256:{}", sim.registry.host(), "2".repeat(64));
    let created = Instant::now();
    let names: Vec<String> = (1..=n).map(|i| format!("scale-node-{i}")).collect();
    let results: Vec<Result<()>> = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let admin = admin.clone();
            async move {
                let node: Node = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {POOL_LABEL: POOL, "kubernetes.io/arch": "amd64"}},
                }))?;
                Api::<Node>::all(admin.clone())
                    .create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("creating Node {name}"))?;
                set_ready(&admin, &name, true).await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        r?;
    }
    let _player = DaemonPlayer::start(
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
    let d2 = format!("sha256:{}", "2".repeat(64));
    wait_rolled(&admin, &d1, n, timeout)
        .await
        .context("every node on v1")?;
    out(&format!(
        "  {n} nodes created and on v1 after {:.1}s\n",
        created.elapsed().as_secs_f64()
    ));
    let pid = sim
        .controller_pid()
        .context("the controller is not running")?;
    let ticks = clock_ticks();
    let log_path = sim.log_dir().join("controller.log");
    let log_from = audit_len(&log_path);
    let writes0 = served_writes(&admin).await?;
    let cpu0 = cpu_seconds(pid, ticks).unwrap_or(0.0);
    let started = Instant::now();
    sim.patch_pool(json!({"image": {"ref": v2}})).await?;
    wait_rolled(&admin, &d2, n, timeout)
        .await
        .context("the rollout to v2")?;
    let rollout_seconds = started.elapsed().as_secs_f64();
    let cpu1 = cpu_seconds(pid, ticks).unwrap_or(0.0);
    // The last release and the completion event follow the status that
    // shows every node updated: let them land before counting.
    wait_released(&admin, &v2, timeout).await?;
    let writes1 = served_writes(&admin).await?;
    let (rss_kib, hwm_kib) = memory_kib(pid).unwrap_or((0, 0));
    let log = audit_slice(&log_path, log_from, audit_len(&log_path))?;
    let mut reconciles = reconcile_durations(&log);
    reconciles.sort_by(f64::total_cmp);
    Ok(ScaleResult {
        nodes: n,
        slots: (n / 10).max(1),
        rollout_seconds,
        cpu_seconds: cpu1 - cpu0,
        rss_kib,
        hwm_kib,
        reconciles,
        // The admin's one pool patch is the only other write to the pool.
        node_object_writes: writes_between(&writes0, &writes1, &["bootcnodes", "nodes"]),
        pool_writes: writes_between(&writes0, &writes1, &["bootcnodepools/status", "events"]),
        played_daemon_writes: writes_between(&writes0, &writes1, &["bootcnodes/status"]),
    })
}

/// `unit`: seconds per wave at the calibration size (one slot).
fn report_scale(report: &mut Report, r: &ScaleResult, unit: Option<f64>) {
    let n = r.nodes;
    let waves = n.div_ceil(r.slots);
    report.push(row(
        format!(
            "{n} nodes: new digest -> all updated ({} slots, {waves} waves)",
            r.slots
        ),
        format!("{:.1} s", r.rollout_seconds),
        "",
        None,
    ));
    if let Some(unit) = unit {
        let min = unit * waves as f64;
        report.push(row(
            format!(
                "{n} nodes: ratio to {waves} waves x {unit:.2} s (one wave at {CALIBRATION} nodes)"
            ),
            format!("{:.2}", r.rollout_seconds / min),
            "",
            None,
        ));
    }
    let per_node = r.node_object_writes / n as f64;
    report.push(row(
        format!("{n} nodes: controller writes per node to its BootcNode and Node"),
        format!("{per_node:.2}"),
        "(6 of the 10)",
        None,
    ));
    report.push(row(
        format!("{n} nodes: pool status writes and events in the whole rollout"),
        format!(
            "{:.0} ({:.3} per node)",
            r.pool_writes,
            r.pool_writes / n as f64
        ),
        "",
        None,
    ));
    report.push(row(
        format!("{n} nodes: played daemons' status writes per node"),
        format!("{:.2}", r.played_daemon_writes / n as f64),
        "",
        None,
    ));
    report.push(row(
        format!("{n} nodes: controller CPU during the rollout"),
        format!("{:.1} s", r.cpu_seconds),
        "",
        None,
    ));
    let target_ok = if n >= 5000 {
        Some(r.hwm_kib <= 150 * 1024)
    } else {
        None
    };
    report.push(row(
        format!("{n} nodes: controller peak RSS (VmHWM)"),
        mib(r.hwm_kib),
        if n >= 5000 {
            "<= 150 MiB"
        } else {
            "(150 MiB at 5,000)"
        },
        target_ok,
    ));
    report.push(row(
        format!("{n} nodes: controller RSS after the rollout"),
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
        let timeout = Duration::from_secs(cli.scale_timeout_seconds);
        // The floor: the time of one wave (one slot, instant reboot) when
        // the pool is small, from a pool of CALIBRATION nodes with one slot.
        let controller_bin = Some(release_dir.join("bootc-controller")).filter(|p| p.exists());
        let build = if controller_bin.is_some() {
            "release"
        } else {
            "debug"
        };
        let unit = match scale(CALIBRATION, timeout, controller_bin.clone()).await {
            Ok(r) => Some(r.rollout_seconds / CALIBRATION.div_ceil(r.slots) as f64),
            Err(e) => {
                report
                    .notes
                    .push(format!("one-node calibration failed: {e:#}"));
                None
            }
        };
        report.details.push(format!(
            "### The controller at scale\n\nThe real `bootc-controller` ({build} build) and API server; every node's daemon and kubelet played by the in-process DaemonPlayer (one watch, one status write per step, instant reboots). maxUnavailable 10% (rounded down, at least 1). Time from the pool's new digest to every node updated. CPU is the controller's user+system time during that rollout, peak RSS its VmHWM since start (cache sync included). Reconcile durations come from the controller's `reconciled` log lines (`elapsed_us`: plan and writes). The ratio divides the rollout time by waves x the time of one wave in a pool of {CALIBRATION} nodes with one slot: 1.0 means no cost of scale beyond the waves themselves.\n"
        ));
        for &n in &cli.scale_nodes {
            match scale(n, timeout, controller_bin.clone()).await {
                Ok(r) => report_scale(&mut report, &r, unit),
                Err(e) => {
                    report.push(row(
                        format!("{n} nodes: rollout"),
                        "did not finish",
                        "completes",
                        Some(false),
                    ));
                    report.notes.push(format!("{n} nodes: {e:#}"));
                }
            }
        }
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
            "# Benchmarks\n\nMeasured by `./dev bench` (`tests/src/bin/bootc-bench.rs`) against the targets of DESIGN.md section 7.\n\n- Date: {}\n- Machine: {}\n- Command: `{}`\n\n{}\n",
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
