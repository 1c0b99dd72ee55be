//! `bootc-sim up`: a local simulated cluster doing a real rollout.
//!
//! Starts the real API server and etcd, the real registry, the real
//! bootc-controller and N simulated nodes (fake bootc hosts in their own
//! mount namespaces, each with the real bootc-daemon and bootc-helper),
//! pushes v1 then v2 of an OS image, and shows the rollout live. The cluster
//! keeps running for experiments until Ctrl-C, which stops everything.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use tests::display;
use tests::fake_bootc::BootcVersion;
use tests::sim::{POOL, Sim, SimOptions};

#[derive(Parser, Debug)]
#[command(
    name = "bootc-sim",
    about = "A local simulated cluster running a real bootc rollout"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Start the cluster, roll v1 -> v2, keep running until Ctrl-C.
    Up {
        /// Number of simulated nodes.
        #[arg(long, default_value_t = 5)]
        nodes: usize,
        /// Seconds a simulated reboot keeps a node NotReady.
        #[arg(long, default_value_t = 2)]
        reboot_seconds: u64,
        /// The pool's maxUnavailable: a number or a percentage ("40%").
        #[arg(long, default_value = "1")]
        max_unavailable: String,
        /// Allow soft reboots (rebootPolicy AllowSoftReboot).
        #[arg(long)]
        soft_reboot: bool,
        /// Make staging fail on these nodes (1-based), to see Degraded.
        #[arg(long = "fail-node")]
        fail_nodes: Vec<usize>,
        /// Exit once the rollout to v2 completes instead of waiting for Ctrl-C.
        #[arg(long)]
        exit_when_done: bool,
        /// The bootc the nodes run, assigned in turn: "1.16" (released
        /// bootc: staging locked by ostree's lock file), "pr" (bootc PR
        /// #2342's --download-only), or a mix such as "1.16,pr".
        #[arg(long, default_value = "1.16", value_delimiter = ',', value_parser = parse_version)]
        bootc_versions: Vec<BootcVersion>,
    },
}

fn parse_version(s: &str) -> Result<BootcVersion, String> {
    BootcVersion::parse(s).ok_or_else(|| format!("unknown bootc version {s:?} (1.16 or pr)"))
}

fn out(text: &str) {
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

async fn show(sim: &Sim, last: &mut String, header: &str) -> Result<(api::BootcNodePool, bool)> {
    let (pool, bns, nodes) = sim.snapshot().await?;
    let rows = display::rows(&bns, &nodes);
    let screen = format!("{header}\n{}", display::render(&pool, &rows));
    let changed = screen != *last;
    if changed {
        if std::io::stdout().is_terminal() {
            out(&format!("\x1b[2J\x1b[H{screen}"));
        } else {
            out(&format!("{screen}\n"));
        }
        *last = screen;
    }
    Ok((pool, changed))
}

fn rolled_to(pool: &api::BootcNodePool, digest: &str, nodes: usize) -> bool {
    pool.status.as_ref().is_some_and(|s| {
        s.deployed_digest.as_deref() == Some(digest)
            && usize::try_from(s.updated_count).ok() == Some(nodes)
            && usize::try_from(s.node_count).ok() == Some(nodes)
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber_init();
    let cli = Cli::parse();
    let Cmd::Up {
        nodes,
        reboot_seconds,
        max_unavailable,
        soft_reboot,
        fail_nodes,
        exit_when_done,
        bootc_versions,
    } = cli.command;
    if !tests::fake_host::is_root() {
        bail!(
            "bootc-sim needs root: each simulated node is a mount namespace, and the daemon drops privileges from root"
        );
    }
    let max_unavailable = match max_unavailable.parse::<i64>() {
        Ok(n) => serde_json::json!(n),
        Err(_) => serde_json::json!(max_unavailable),
    };
    let options = SimOptions {
        nodes,
        reboot_time: Duration::from_secs(reboot_seconds),
        max_unavailable,
        reboot_policy: if soft_reboot {
            "AllowSoftReboot"
        } else {
            "RebootOnly"
        }
        .into(),
        bootc_versions,
        ..SimOptions::default()
    };
    out("starting etcd, kube-apiserver, the registry and bootc-controller...\n");
    let mut sim = Sim::start(options).await?;
    let kubeconfig = sim.cp.kubeconfig(tests::Identity::Admin);
    let v1 = sim.push_version("1.0").await?;
    sim.add_nodes(nodes, &v1).await?;
    {
        let all = sim.nodes.lock().await;
        for n in &fail_nodes {
            if let Some(node) = n.checked_sub(1).and_then(|i| all.get(i)) {
                node.host
                    .layout
                    .set_fault(Some(tests::fake_bootc::Fault::PullError))?;
            }
        }
    }
    sim.create_pool().await?;
    sim.start_kubelet();
    let header = format!(
        "bootc-sim: {nodes} nodes on Kubernetes {}. In another shell:\n  export KUBECONFIG={}\n  {} get bnp,bn -w\n  {} status   # or pause/resume {POOL}, why NODE, history {POOL}\n  curl -sk -H 'Authorization: Bearer {}' https://{}/metrics   # the controller's metrics (HTTPS, self-signed; the admin's token)\nlogs: {}\n",
        tests::binaries::kube_version()?,
        kubeconfig.display(),
        tests::binaries::kubectl()?.display(),
        tests::fake_host::bin("kubectl-bootc").display(),
        tests::Identity::Admin.token(),
        sim.metrics_addr,
        sim.log_dir().display()
    );
    out(&header);

    let mut last = String::new();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut phase = 0;
    let mut v2 = String::new();
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        let status = match phase {
            0 => "phase 1/2: every node on v1",
            1 => "phase 2/2: rolling out v2",
            _ => {
                "rollout complete; the cluster keeps running (change the image, pause, add nodes); Ctrl-C stops everything"
            }
        };
        let (pool, _) = show(&sim, &mut last, &format!("{header}\n{status}")).await?;
        if phase == 0 && rolled_to(&pool, &v1, nodes) {
            v2 = sim.push_version("2.0").await?;
            phase = 1;
        } else if phase == 1 && rolled_to(&pool, &v2, nodes) {
            phase = 2;
            out(&format!("\nall {nodes} nodes run v2 ({v2})\n"));
            if exit_when_done {
                break;
            }
        }
    }
    out("stopping...\n");
    sim.kill_controller();
    drop(sim);
    Ok(())
}

fn tracing_subscriber_init() {
    // The simulator's own output is the table; library logs go to stderr.
    let _ = std::env::var("RUST_LOG");
}
