//! The `nodes` section: a rollout on real nodes (tests/src/nodes/), the
//! operator installed from deploy/ as the real-node tests install it (its
//! image built from the release binaries when they are there): the pool
//! changed from v1 to v2, timed until the last node is back Ready on v2,
//! against the sum of the nodes' own reboots (from bootc's apply to the
//! node back Ready on v2: the physical floor of a rollout of one slot);
//! the daemon's and the helper's memory in their pod on each node, read
//! from /proc of the node's processes, during the rollout and after it,
//! and as the container runtime reports it (the kubelet's stats summary).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use api::Node;
use kube::api::{Api, Patch, PatchParams};
use tests::nodes::operator::Install;
use tests::nodes::pool::{
    POOL, ROLLOUT, WORKLOAD, diagnostics, digest_of, installed_with_a_pool_on_v1, kubectl,
    wait_pool,
};
use tests::nodes::{NodeCluster, NodeClusterOptions, push_os};

use crate::phases::{Mark, RATIO_TARGET, Recorder};
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
    /// Each node's turn, phase by phase.
    turns: Vec<crate::phases::Turn>,
    /// Seconds from the pool's change to each node first seen Ready on v2.
    ready_on_v2: BTreeMap<String, f64>,
    /// Seconds from the pool's change to each node's apply (bootc's own
    /// record of the call that reboots it).
    applied: BTreeMap<String, f64>,
    /// The daemon pod's memory as its kubelet reports it, steady: the
    /// highest working set and RSS over nodes (bytes).
    pod_memory: Option<PodMemory>,
    /// Seconds from the pool's change to its status counting every node
    /// updated.
    pool_updated: f64,
    /// A real kubelet's Node as the API serves it and as the controller's
    /// cache keeps it, in JSON bytes.
    node_bytes: Option<(usize, usize)>,
    during: Agents,
    steady: Agents,
}

/// Every node Ready on v2, as the API sees them now: name -> yes.
async fn ready_on_v2(
    nodes: &Api<k8s_openapi::api::core::v1::Node>,
) -> Result<BTreeMap<String, bool>> {
    let suffix = format!(" {V2}");
    Ok(nodes
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .map(|n| {
            let on_v2 = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .is_some_and(|i| i.os_image.ends_with(&suffix));
            let n = Node::from(n);
            let name = n.metadata.name.clone().unwrap_or_default();
            (name, on_v2 && api::node_health::is_ready(&n))
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
    let admin = cluster.cp.admin().await?;
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone());
    let (namespace, app) = WORKLOAD_APP;
    let recorder = Recorder::start(&admin, &v2, namespace, app).await;
    let started = Instant::now();
    let started_at = jiff::Timestamp::now();
    let started_unix = started_at.as_microsecond();
    // Through the bench's own client: a kubectl process takes about a
    // second to start here, which is not the rollout's.
    let reference = format!("{}/{}:v2", cluster.registry.host(), tests::nodes::OS_REPO);
    let change = serde_json::json!({"spec": {"image": {"ref": reference}}});
    Api::<api::BootcNodePool>::all(admin.clone())
        .patch(POOL, &PatchParams::default(), &Patch::Merge(&change))
        .await
        .context("changing the pool to v2")?;
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
    let last_ready = ready.values().copied().fold(0.0, f64::max);
    let turns = turns_of(&cluster, &recorder, started_at, last_ready);
    drop(recorder);
    tokio::time::sleep(idle).await;
    let steady = Agents::sample(&cluster);
    let applied = cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let invocations = node.bootc().read_invocations();
            let at = invocations
                .iter()
                .filter(|i| i.argv.iter().any(|a| a == "--apply"))
                .map(|i| i.unix_micros)
                .next_back()?;
            let after = i64::try_from(at).ok()? - started_unix;
            Some((node.name.clone(), after as f64 / 1e6))
        })
        .collect();
    let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let pod_memory = match daemon_pod_memory(&admin, &names).await {
        Ok(m) => Some(m),
        Err(e) => {
            out(&format!("  the kubelets' stats summary: {e:#}\n"));
            None
        }
    };
    let node_bytes = node_bytes(&admin).await;
    Ok(NodesResult {
        turns,
        ready_on_v2: ready,
        applied,
        pod_memory,
        pool_updated,
        node_bytes,
        during: during.max(steady),
        steady,
    })
}

/// The first Node's size as served and once the controller's cache has
/// trimmed it (`controller::runtime::strip_node`), in JSON bytes.
async fn node_bytes(admin: &kube::Client) -> Option<(usize, usize)> {
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone());
    let node = nodes.list(&Default::default()).await.ok()?.items.pop()?;
    let served = serde_json::to_vec(&node).ok()?.len();
    let mut kept = Node::from(node);
    controller::runtime::strip_node(&mut kept);
    Some((served, serde_json::to_vec(&kept).ok()?.len()))
}

/// The workload's namespace and `app` label (its budget's name too).
const WORKLOAD_APP: (&str, &str) = ("default", "web");

/// Each node's turn, phase by phase ([`crate::phases`]): the watches'
/// marks, each node's applies (the fake bootc's record) and the drains'
/// ends (the controller's log); the rollout ended `last_ready` seconds
/// after `started`.
fn turns_of(
    cluster: &NodeCluster,
    recorder: &Recorder,
    started: jiff::Timestamp,
    last_ready: f64,
) -> Vec<crate::phases::Turn> {
    let mut more = Vec::new();
    for node in &cluster.nodes {
        for i in node.bootc().read_invocations() {
            let applies = i.argv.iter().any(|a| a == "--apply");
            let at = i64::try_from(i.unix_micros)
                .ok()
                .and_then(|us| jiff::Timestamp::from_microsecond(us).ok());
            if let (true, Some(at)) = (applies, at) {
                more.push((at, node.name.clone(), Mark::Applied));
            }
        }
    }
    for (at, node) in crate::wave::drain_ends(&controller_log(cluster)) {
        more.push((at, node, Mark::DrainDone));
    }
    let log = recorder.log(more);
    let end = jiff::SignedDuration::from_secs_f64(last_ready);
    let last = started.checked_add(end).unwrap_or(started);
    crate::phases::turns(&log, started, last)
}

/// The controller's log, every pod's, the containers before a restart
/// included (a reboot restarts the replica on its node).
fn controller_log(cluster: &NodeCluster) -> String {
    let selector = format!(
        "{}={}",
        api::labels::APP_NAME_LABEL,
        api::labels::CONTROLLER_APP_NAME
    );
    let mut log = String::new();
    for previous in [true, false] {
        let namespace = api::labels::OPERATOR_NAMESPACE;
        let mut args = vec!["logs", "-n", namespace, "-l", &selector, "--tail=-1"];
        if previous {
            args.push("--previous");
        }
        match kubectl(cluster, &args, None) {
            Ok(text) => log.push_str(&text),
            Err(e) if !previous => out(&format!("  the controller's log: {e:#}\n")),
            Err(_) => {}
        }
    }
    log
}

/// A pod's memory as the container runtime reports it to the kubelet.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PodMemory {
    working_set: u64,
    rss: u64,
}

/// The `bootc-daemon` pod's memory in a kubelet's stats summary (its
/// containers summed: the daemon and its helper share one).
fn pod_memory_in(summary: &serde_json::Value) -> Option<PodMemory> {
    let pod = summary["pods"]
        .as_array()?
        .iter()
        .find(|p| p["podRef"]["namespace"] == tests::control_plane::DAEMON_NAMESPACE)?;
    let sum = |key: &str| {
        pod["containers"]
            .as_array()
            .map(|cs| cs.iter().filter_map(|c| c["memory"][key].as_u64()).sum())
    };
    Some(PodMemory {
        working_set: sum("workingSetBytes")?,
        rss: sum("rssBytes")?,
    })
}

/// The highest of the daemon pod's memory over `nodes`, each read from its
/// kubelet's `/stats/summary` through the API server.
async fn daemon_pod_memory(admin: &kube::Client, nodes: &[String]) -> Result<PodMemory> {
    let mut most = PodMemory::default();
    for node in nodes {
        let request = http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary"))
            .body(Vec::new())?;
        let summary: serde_json::Value = admin.request(request).await?;
        let m = pod_memory_in(&summary)
            .with_context(|| format!("no bootc-daemon pod memory in {node}'s stats summary"))?;
        most = PodMemory {
            working_set: most.working_set.max(m.working_set),
            rss: most.rss.max(m.rss),
        };
    }
    Ok(most)
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

/// The rollout against the sum of the nodes' reboots.
/// The floor, when every node's apply was found.
fn report_floor(report: &mut Report, r: &NodesResult, last: f64) -> Option<f64> {
    let reboots: Vec<f64> = r
        .ready_on_v2
        .iter()
        .filter_map(|(node, ready)| Some(ready - r.applied.get(node)?))
        .collect();
    if reboots.len() != r.ready_on_v2.len() {
        report
            .notes
            .push("a node's apply was not found in its bootc record".to_owned());
        return None;
    }
    let floor: f64 = reboots.iter().sum();
    let each: Vec<String> = reboots.iter().map(|s| format!("{s:.1}")).collect();
    report.push(row(
        "  the floor: the sum of the nodes' reboots (apply -> Ready on v2)",
        format!("{floor:.1} s ({})", each.join(" + ")),
        "",
        None,
    ));
    let ratio = last / floor.max(f64::MIN_POSITIVE);
    report.push(row(
        "  ratio of the rollout to the floor",
        format!("{ratio:.2}"),
        &format!("<= {RATIO_TARGET}"),
        Some(ratio <= RATIO_TARGET),
    ));
    Some(floor)
}

fn report_pod_memory(
    report: &mut Report,
    m: Option<PodMemory>,
    builds: &BTreeMap<&'static str, &'static str>,
) {
    let Some(m) = m else {
        report
            .notes
            .push("the kubelets' stats summary gave no daemon pod memory".to_owned());
        return;
    };
    let judged = ["bootc-daemon", "bootc-helper"]
        .iter()
        .all(|b| builds.get(b) == Some(&"release"));
    let target_kib = (8 + 3) * 1024;
    report.push(row(
        "daemon pod (daemon + helper) RSS as the container runtime reports it, steady (max over nodes)",
        mib(m.rss / 1024),
        if judged { "<= 11 MiB" } else { "(release)" },
        judged.then_some(m.rss > 0 && m.rss / 1024 <= target_kib),
    ));
    report.push(row(
        "daemon pod working set as the container runtime reports it, steady (max over nodes)",
        mib(m.working_set / 1024),
        "",
        None,
    ));
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
    let floor = report_floor(report, r, last);
    crate::phases::report_turns(report, &r.turns, last, floor);
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
    report_pod_memory(report, r.pod_memory, builds);
    if let Some((served, kept)) = r.node_bytes {
        report.push(row(
            "a real kubelet's Node in JSON: as served / as the controller's cache keeps it",
            format!(
                "{:.1} / {:.1} KiB",
                served as f64 / 1024.0,
                kept as f64 / 1024.0
            ),
            "",
            None,
        ));
    }
    report.details.push(format!(
        "### A rollout on real nodes\n\n{nodes} node containers (a real systemd, containerd and kubelet each; tests/src/nodes/) on this machine, with etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a registry; the operator installed from deploy/ as the real-node tests install it, its image's builds {}; a three-replica workload with a PodDisruptionBudget; one pool, maxUnavailable 1. The time runs from the bench's patch of the pool's tag (through its own client, as a controller or a CI job would: a `kubectl` process took about a second to start on this machine, which the rollout's time included before 2026-11-29) to the first poll (every 250 ms) that finds the last node Ready with its kubelet reporting v2: each node is cordoned, drained (real evictions), staged, really rebooted and back Ready in turn. The floor is the sum of the nodes' own reboots, each from the start of bootc's apply (the fake bootc's record of the call, whose reboot is real) to the node first seen Ready on v2: with one slot the reboots cannot overlap, so no controller could finish sooner; the ratio is the rollout's time over it, and what exceeds 1 is the cordons, drains, stages and slot hand-overs between the reboots. Each node's turn is then cut into phases (tests/src/bin/bootc-bench/phases.rs), from watches on the Nodes, the BootcNodes, the workload's pods and its PodDisruptionBudget, and the Events, with the fake bootc's record of each apply and the controller's log of each drain's end; each phase is printed with its owner: ours (what the operator can remove), the workload's (its evicted pods' termination grace, and the time the budget refuses the next eviction while a pod waits for it: its replacement becoming Ready), bootc's download, the node's own reboot, or the previous node's turn. A drain is cut instant by instant: while a pod on the node awaits its eviction and the budget allows none, the workload's readiness; while every pod left is terminating, the workload's grace; the rest (asking, asking again once the budget allows, seeing the pods gone) ours. The critical path (the pool's change to the last node Ready on v2, each turn from the previous node's release) is the same cut along the slot's order: its shares by owner add up to the rollout, and the rollout less our share, over the floor, says whether the target is ours to meet: what is left is the workload's (here a shell loop that ends its `sleep 1` before its TERM trap, then the kubelet's report of its end), the kubelet's start of the daemon's pod again after each boot (the controller releases a slot only on the daemon's report that the node booted the target), the first node's download, and the reboots. The memory rows read `/proc/<pid>/status` of the daemon and helper processes in each node's pod (the node's processes are this machine's): steady at the end of the idle period, the peak (VmHWM) sampled throughout the rollout, whose reboots restart both. The pod rows are what the container runtime reports for the daemon's pod, as its kubelet serves it (`/stats/summary` through the API server, the pod's containers summed; the helper runs in the daemon's container), steady, the highest over nodes; judged against the sum of the two processes' targets. The runtime counts what the pod's memory cgroup was charged: anonymous memory (its RSS) and the page cache it brought in (the working set), not the pages of the binaries another cgroup already cached, which each process's VmRSS includes; so the pod's figures are the smaller.\n",
        builds_text(builds)
    ));
}

#[cfg(test)]
// Not `tests`: that would shadow the crate of the same name in this file.
mod unit {
    use super::*;

    #[test]
    fn the_daemon_pod_is_found_and_its_containers_summed() {
        let summary = serde_json::json!({"pods": [
            {"podRef": {"namespace": "default"}, "containers": [{"memory": {"workingSetBytes": 1, "rssBytes": 1}}]},
            {"podRef": {"namespace": ::tests::control_plane::DAEMON_NAMESPACE}, "containers": [
                {"memory": {"workingSetBytes": 10, "rssBytes": 4}},
                {"memory": {"workingSetBytes": 5, "rssBytes": 2}}]},
        ]});
        assert_eq!(
            pod_memory_in(&summary),
            Some(PodMemory {
                working_set: 15,
                rss: 6
            })
        );
        assert_eq!(pod_memory_in(&serde_json::json!({"pods": []})), None);
    }
}
