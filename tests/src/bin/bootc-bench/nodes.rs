//! The `nodes` section: a rollout on real nodes (tests/src/nodes/), the
//! operator installed from deploy/ as the real-node tests install it (its
//! image built from the release binaries when they are there): the pool
//! changed from v1 to v2, timed until the last node is back Ready on v2;
//! the daemon's and the helper's memory in their pod on each node, read
//! from /proc of the node's processes, during the rollout and after it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use tests::nodes::operator::Install;
use tests::nodes::pool::{
    ROLLOUT, WORKLOAD, diagnostics, digest_of, installed_with_a_pool_on_v1, kubectl, pool_yaml,
    wait_pool,
};
use tests::nodes::{NodeCluster, NodeClusterOptions, push_os};

use crate::procfs::memory_kib;
use crate::report::{Report, mib, out, row};

/// The OS version the pool changes to (the kubelet reports it once the
/// node booted it).
const V2: &str = "2.0";

/// The binaries the operator's image is built from, and which build each
/// is (`release` or `debug`).
struct Binaries {
    dir: tempfile::TempDir,
    builds: BTreeMap<&'static str, &'static str>,
}

/// Each binary from `release_dir` when it is there, else the test build.
fn binaries(release_dir: &Path) -> Result<Binaries> {
    let dir = tempfile::tempdir()?;
    let mut builds = BTreeMap::new();
    for name in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        let release = release_dir.join(name);
        let (from, build) = if release.exists() {
            (release, "release")
        } else {
            (tests::fake_host::bin(name), "debug")
        };
        std::fs::copy(&from, dir.path().join(name))
            .with_context(|| format!("copying {}", from.display()))?;
        builds.insert(name, build);
    }
    Ok(Binaries { dir, builds })
}

/// The highest VmRSS and VmHWM (KiB) of the processes of one name.
#[derive(Clone, Copy, Debug, Default)]
struct Memory {
    rss: u64,
    hwm: u64,
}

impl Memory {
    fn max(self, other: Memory) -> Memory {
        Memory {
            rss: self.rss.max(other.rss),
            hwm: self.hwm.max(other.hwm),
        }
    }

    /// Over every node's processes named `comm`.
    fn of(cluster: &NodeCluster, comm: &str) -> Memory {
        let mut m = Memory::default();
        for node in &cluster.nodes {
            for pid in node.processes(comm) {
                if let Some((rss, hwm)) = u32::try_from(pid).ok().and_then(memory_kib) {
                    m = m.max(Memory { rss, hwm });
                }
            }
        }
        m
    }
}

/// The daemon's and the helper's memory at one time.
#[derive(Clone, Copy, Debug, Default)]
struct Agents {
    daemon: Memory,
    helper: Memory,
}

impl Agents {
    fn sample(cluster: &NodeCluster) -> Agents {
        Agents {
            daemon: Memory::of(cluster, "bootc-daemon"),
            helper: Memory::of(cluster, "bootc-helper"),
        }
    }

    fn max(self, other: Agents) -> Agents {
        Agents {
            daemon: self.daemon.max(other.daemon),
            helper: self.helper.max(other.helper),
        }
    }
}

struct NodesResult {
    /// Seconds from the pool's change to each node first seen Ready on v2.
    ready_on_v2: BTreeMap<String, f64>,
    /// Seconds from the pool's change to its status counting every node
    /// updated.
    pool_updated: f64,
    during: Agents,
    steady: Agents,
}

/// Every node Ready on v2, as the API sees them now: name -> yes.
async fn ready_on_v2(nodes: &Api<Node>) -> Result<BTreeMap<String, bool>> {
    let suffix = format!(" {V2}");
    Ok(nodes
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(|n| {
            let on_v2 = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .is_some_and(|i| i.os_image.ends_with(&suffix));
            let name = n.metadata.name.clone().unwrap_or_default();
            (name, on_v2 && api::node_health::is_ready(n))
        })
        .collect())
}

/// The rollout on the cluster, measured; then `idle` of steady state.
async fn measure(cluster: NodeCluster, binaries: PathBuf, idle: Duration) -> Result<NodesResult> {
    let install = Install {
        binaries: Some(binaries),
        ..Install::default()
    };
    installed_with_a_pool_on_v1(&cluster, Some(WORKLOAD), &install).await?;
    let v2 = push_os(&cluster.registry, V2, "v2").await?;
    let nodes = Api::<Node>::all(cluster.cp.admin().await?);
    let started = Instant::now();
    kubectl(
        &cluster,
        &["apply", "-f", "-"],
        Some(&pool_yaml(&cluster, "v2")),
    )?;
    let mut ready = BTreeMap::new();
    let mut during = Agents::default();
    // Polled: each node's time is known to the poll's period (250 ms).
    while ready.len() < cluster.nodes.len() {
        if started.elapsed() > ROLLOUT {
            bail!(
                "not every node Ready on v2 after {ROLLOUT:?}: {ready:?}\n{}",
                diagnostics(&cluster)
            );
        }
        let at = started.elapsed().as_secs_f64();
        for (name, yes) in ready_on_v2(&nodes).await? {
            if yes {
                ready.entry(name).or_insert(at);
            }
        }
        during = during.max(Agents::sample(&cluster));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let count = i32::try_from(cluster.nodes.len())?;
    let digest = digest_of(&v2).to_owned();
    wait_pool(&cluster, "every node updated", move |p| {
        let s = p.status.clone().unwrap_or_default();
        s.target_digest.as_deref() == Some(digest.as_str())
            && s.updated_count == count
            && s.updating_count == 0
    })
    .await?;
    let pool_updated = started.elapsed().as_secs_f64();
    tokio::time::sleep(idle).await;
    let steady = Agents::sample(&cluster);
    Ok(NodesResult {
        ready_on_v2: ready,
        pool_updated,
        during: during.max(steady),
        steady,
    })
}

/// The section: `nodes` real nodes, the operator's image from
/// `release_dir`'s binaries when there, `idle` seconds after the rollout.
pub(crate) fn nodes_section(
    report: &mut Report,
    nodes: usize,
    idle: Duration,
    release_dir: &Path,
) -> Result<()> {
    let bins = binaries(release_dir)?;
    out(&format!(
        "nodes: {nodes} real nodes, v1 -> v2, then {}s idle; the image's builds: {}\n",
        idle.as_secs(),
        builds_text(&bins.builds)
    ));
    let dir = bins.dir.path().to_owned();
    let options = NodeClusterOptions {
        nodes,
        ..NodeClusterOptions::default()
    };
    // A thread of its own: it joins the cluster's network namespaces and
    // runs its own runtime there (tests::nodes::on_real_nodes).
    let result = std::thread::spawn(move || {
        tests::nodes::on_real_nodes(&options, |cluster| measure(cluster, dir, idle))
    })
    .join()
    .map_err(|_| anyhow!("the nodes section's thread panicked"))???;
    report_nodes(report, nodes, &result, &bins.builds);
    Ok(())
}

/// "bootc-controller debug, bootc-daemon release, ..."
fn builds_text(builds: &BTreeMap<&'static str, &'static str>) -> String {
    let each: Vec<String> = builds.iter().map(|(b, k)| format!("{b} {k}")).collect();
    each.join(", ")
}

fn report_nodes(
    report: &mut Report,
    nodes: usize,
    r: &NodesResult,
    builds: &BTreeMap<&'static str, &'static str>,
) {
    let last = r.ready_on_v2.values().copied().fold(0.0, f64::max);
    report.push(row(
        format!("{nodes} real nodes: pool changed v1 -> v2 -> last node Ready on v2"),
        format!("{last:.1} s"),
        "—",
        None,
    ));
    let mut each: Vec<f64> = r.ready_on_v2.values().copied().collect();
    each.sort_by(f64::total_cmp);
    let each: Vec<String> = each.iter().map(|s| format!("{s:.1}")).collect();
    report.push(row(
        "  each node Ready on v2, in turn (s after the change)",
        each.join(" / "),
        "",
        None,
    ));
    report.push(row(
        "  the pool's status counts every node updated",
        format!("{:.1} s", r.pool_updated),
        "",
        None,
    ));
    for (name, what, target_kib, target, during, steady) in [
        (
            "bootc-daemon",
            "daemon",
            8 * 1024,
            "<= 8 MiB",
            r.during.daemon,
            r.steady.daemon,
        ),
        (
            "bootc-helper",
            "helper",
            3 * 1024,
            "<= 3 MiB",
            r.during.helper,
            r.steady.helper,
        ),
    ] {
        let build = builds.get(name).copied().unwrap_or("?");
        let judged = build == "release";
        report.push(row(
            format!("{what} RSS in its pod on a real node, steady ({build}; max over nodes)"),
            mib(steady.rss),
            if judged { target } else { "(release)" },
            judged.then_some(steady.rss > 0 && steady.rss <= target_kib),
        ));
        report.push(row(
            format!("{what} peak (VmHWM) on a real node, the rollout included ({build})"),
            mib(during.hwm),
            "",
            None,
        ));
    }
    report.details.push(format!(
        "### A rollout on real nodes\n\n{nodes} node containers (a real systemd, containerd and kubelet each; tests/src/nodes/) on this machine, with etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a registry; the operator installed from deploy/ as the real-node tests install it, its image's builds {}; a three-replica workload with a PodDisruptionBudget; one pool, maxUnavailable 1. The time runs from `kubectl apply` of the pool's new tag to the first poll (every 250 ms) that finds the last node Ready with its kubelet reporting v2: each node is cordoned, drained (real evictions), staged, really rebooted and back Ready in turn. The memory rows read `/proc/<pid>/status` of the daemon and helper processes in each node's pod (the node's processes are this machine's): steady at the end of the idle period, the peak (VmHWM) sampled throughout the rollout, whose reboots restart both.\n",
        builds_text(builds)
    ));
}
