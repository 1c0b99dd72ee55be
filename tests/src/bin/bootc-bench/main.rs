//! `bootc-bench`: the performance targets of BENCHMARKS.md, measured on the
//! simulated cluster and printed against their targets; the table is also
//! written to BENCHMARKS.md.
//!
//! Sections (`--sections`, comma-separated):
//! - `api`: API requests per node for one full update (stage, slot, drain,
//!   reboot, release) on the simulated cluster, counted from the API
//!   server's audit log by user and verb; then the requests made while idle;
//!   then the writes the same update makes with `--node-lifecycle-conditions`;
//! - `rss`: steady-state memory of the real daemon and helper (the debug
//!   builds the simulator runs, and the release builds when present);
//! - `latency`: BootcNode spec change -> the fake bootc's
//!   stage (`switch`), on one real daemon + helper;
//! - `sizes`: release binary sizes, the helper's linked crates and code
//!   lines, and the operator image's size (compressed and unpacked) built
//!   from the binaries;
//! - `scale`: the real controller with N nodes played by the DaemonPlayer;
//! - `admission`: what the admission policies of deploy/admission/ add to
//!   the policy plugin's time and the API server's CPU per write, for the
//!   operator's writes and for writes that are not its own;
//! - `nodes` (only when asked for): a rollout on real nodes (node
//!   containers with a real systemd and kubelet, tests/src/nodes/), timed,
//!   and the daemon's and the helper's memory in their pods there.
//!
//! One module a section (`api_requests` is the `api` section: a module
//! named `api` would shadow the `api` crate), the simulated rollout the
//! api and rss sections share in `simulated`, the table in `report`.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod admission;
mod api_requests;
mod latency;
mod nodes;
mod phases;
mod procfs;
mod report;
mod rss;
mod scale;
mod simulated;
mod sizes;
mod wave;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use tests::fake_host::target_dir;

use crate::admission::admission_section;
use crate::api_requests::{report_api, report_lifecycle};
use crate::latency::latency;
use crate::nodes::nodes_section;
use crate::report::{Report, out};
use crate::rss::report_rss;
use crate::scale::scale_section;
use crate::simulated::sim_rollout;
use crate::sizes::{image_size, sizes};

#[derive(Parser, Debug)]
#[command(
    name = "bootc-bench",
    about = "Benchmarks of bootc-operator against the performance targets in BENCHMARKS.md"
)]
struct Cli {
    /// Sections to run: api, rss, latency, sizes, admission, scale; nodes
    /// (real nodes, only when named).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "api,rss,latency,sizes,admission,scale"
    )]
    sections: Vec<String>,
    /// Simulated nodes for the api and rss sections.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Real nodes for the nodes section.
    #[arg(long, default_value_t = 3)]
    real_nodes: usize,
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
    #[arg(long, default_value_t = 2400)]
    scale_timeout_seconds: u64,
    /// At most this many writes per run of the scale section's
    /// write-throughput probe (fewer when the rollout made fewer).
    #[arg(long, default_value_t = 20_000)]
    probe_writes: usize,
    /// Nodes (with their BootcNodes) for the admission section.
    #[arg(long, default_value_t = 200)]
    admission_nodes: usize,
    /// At least this many writes per kind and round in the admission
    /// section (rounded up to an even number per object).
    #[arg(long, default_value_t = 1000)]
    admission_writes: usize,
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

/// Which bootc the figures are for: the fake host's default (the latency,
/// wave and real-node sections run the fake bootc; the scale section's
/// played daemons run none).
const BOOTC_PLAYED: &str = "the simulated and real nodes run the fake bootc as released bootc 1.16.9 (staging locked by ostree's lock file; hosts installed from a tag); the scale section's played daemons report locked staging";
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

    if has("api") || has("rss") {
        api_and_rss(&mut report, &cli, idle, &release_dir).await?;
    }
    if has("latency") {
        latency(&mut report, cli.latency_changes).await?;
    }
    if has("sizes") {
        sizes(&mut report, &release_dir);
        image_size(&mut report, &release_dir);
    }
    if has("admission") {
        admission_section(&mut report, cli.admission_nodes, cli.admission_writes).await;
    }
    if has("scale") {
        scale_section(&mut report, &cli, &release_dir).await;
    }
    if has("nodes") {
        nodes_section(&mut report, cli.real_nodes, idle, &release_dir)?;
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
            "## Current figures\n\n- Date: {}\n- Machine: {}\n- Command: `{}`\n- bootc: {}\n\n{}\n",
            started.strftime("%Y-%m-%d %H:%M UTC"),
            machine(),
            command,
            BOOTC_PLAYED,
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
        let existing = std::fs::read_to_string(&path).ok();
        let text = report::spliced(existing.as_deref(), &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        out(&format!("wrote {}\n", path.display()));
    }
    Ok(())
}

/// The `api` and `rss` sections: the simulated rollouts they share.
async fn api_and_rss(
    report: &mut Report,
    cli: &Cli,
    idle: Duration,
    release_dir: &std::path::Path,
) -> Result<()> {
    let has = |s: &str| cli.sections.iter().any(|x| x == s);
    let release_agents = ["bootc-daemon", "bootc-helper"]
        .iter()
        .all(|b| release_dir.join(b).exists());
    {
        out(&format!(
            "api/rss: simulated cluster of {} nodes (debug builds), v1 -> v2, then {}s idle\n",
            cli.nodes, cli.idle_seconds
        ));
        let r = sim_rollout(cli.nodes, has("api"), idle, None, false).await?;
        if has("api") {
            report_api(report, &r, cli.nodes, idle);
            out("api: the same rollout with --node-lifecycle-conditions\n");
            let short = Duration::from_secs(1);
            let lifecycle = sim_rollout(cli.nodes, true, short, None, true).await?;
            report_lifecycle(report, &lifecycle, cli.nodes);
        }
        if has("rss") {
            report_rss(report, "debug", &r, !release_agents);
        }
    }
    if has("rss") {
        if release_agents {
            out("rss: the same rollout with the release daemon and helper\n");
            let r = sim_rollout(
                cli.nodes.min(3),
                false,
                Duration::from_secs(10),
                Some(release_dir.to_path_buf()),
                false,
            )
            .await?;
            report_rss(report, "release", &r, true);
        } else {
            report.notes.push(format!(
                "release daemon/helper not found in {}: RSS measured on debug builds only",
                release_dir.display()
            ));
        }
    }
    Ok(())
}
