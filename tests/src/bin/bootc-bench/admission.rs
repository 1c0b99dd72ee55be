//! The `admission` section: what the three ValidatingAdmissionPolicies of
//! deploy/admission/ cost the API server per write, for the operator's own
//! writes and for writes that are none of its business.
//!
//! One API server and etcd with deploy/'s CRDs, RBAC and policies; `n`
//! Nodes, their BootcNodes (written by the controller) and ConfigMaps. Six
//! kinds of writes, each as the user that makes it: the controller's
//! BootcNode applies and Node cordon patches, the daemons' BootcNode status
//! applies (node-bound tokens), a kubelet's Node status patches (a node
//! identity), another controller's Node label patches and ConfigMap
//! patches (another ServiceAccount). Each kind is measured in rounds with
//! the policies deleted and installed (off, on, on, off, so that a drift of
//! the machine weighs on both states alike). A round's figures are the API
//! server's and etcd's CPU (user + system) over its writes, and the policy
//! plugin's time over them: every kind is judged on what the policies add
//! to the plugin's time, the only place they can add cost, because a
//! write's CPU varies from round to round by more than any target here.

use std::time::{Duration, Instant};

use ::tests::control_plane::{KUBELET_TOKEN, OTHER_CONTROLLER_TOKEN};
use ::tests::daemon_player::ready_body;
use ::tests::write_probe;
use ::tests::{ControlPlane, Identity};
use anyhow::{Context, Result, bail};
use api::labels::{CONTROLLER_MANAGER, DAEMON_MANAGER};
use api::{BootcNode, ConditionType, Reason};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::procfs::{clock_ticks, cpu_seconds};
use crate::report::{Report, out, row};

/// Nodes whose daemon gets a node-bound token (one Pod and TokenRequest
/// each): the daemons' writes go round-robin over these.
const DAEMON_NODES: usize = 20;
/// Writes in flight.
const CONCURRENCY: usize = 16;
/// The rounds, in order: policies off, on, on, off.
pub(crate) const ROUNDS: [bool; 4] = [false, true, true, false];
/// The most our policies may add to our writes' cost, in percent.
const OURS_TARGET_PERCENT: f64 = 5.0;
/// The most our policies may add to a write not ours, in percent of its
/// cost: "nothing measurable" as a number, below what a write's CPU moves
/// from round to round on this machine (up to tens of percent).
const NOT_OURS_TARGET_PERCENT: f64 = 5.0;
const IMAGE: &str =
    "quay.io/acme/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OTHER_IMAGE: &str =
    "quay.io/acme/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const OTHER_LABEL: &str = "other.example.com/zone";

/// A kind of write the section measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    ControllerApply,
    ControllerCordon,
    DaemonStatus,
    KubeletStatus,
    OtherNodeLabel,
    OtherConfigMap,
}

impl Kind {
    pub(crate) const ALL: [Kind; 6] = [
        Kind::ControllerApply,
        Kind::ControllerCordon,
        Kind::DaemonStatus,
        Kind::KubeletStatus,
        Kind::OtherNodeLabel,
        Kind::OtherConfigMap,
    ];

    /// A write of the operator's.
    pub(crate) fn ours(self) -> bool {
        matches!(
            self,
            Kind::ControllerApply | Kind::ControllerCordon | Kind::DaemonStatus
        )
    }

    /// Writes of this kind per node and update in a rollout (the api
    /// section's count): three BootcNode applies (the target, the approval,
    /// its withdrawal), a cordon and an uncordon (each with the slot's
    /// record), three daemon status applies. Zero for writes not ours.
    pub(crate) fn per_node_update(self) -> f64 {
        match self {
            Kind::ControllerApply => 3.0,
            Kind::ControllerCordon => 2.0,
            Kind::DaemonStatus => 3.0,
            _ => 0.0,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::ControllerApply => "controller: apply BootcNode",
            Kind::ControllerCordon => "controller: merge-patch Node (cordon, uncordon)",
            Kind::DaemonStatus => "daemon (node-bound token): apply BootcNode status",
            Kind::KubeletStatus => "kubelet (system:node): patch Node status",
            Kind::OtherNodeLabel => "another controller: merge-patch a Node label",
            Kind::OtherConfigMap => "another controller: merge-patch a ConfigMap",
        }
    }
}

/// Writes per kind and round: at least `requested`, an even number per
/// target so that every round ends each object where it started (the
/// next round's first write then changes it again).
pub(crate) fn writes_per_round(requested: usize, targets: usize) -> usize {
    let step = 2 * targets.max(1);
    requested.max(1).div_ceil(step) * step
}

/// The CPU one kind cost over its rounds, with and without the policies.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Cost {
    /// CPU ms per write, one a round, in round order.
    pub(crate) without: Vec<f64>,
    pub(crate) with: Vec<f64>,
}

/// `us` microseconds in percent of `ms` milliseconds.
pub(crate) fn share_percent(us: f64, ms: f64) -> f64 {
    if ms <= 0.0 {
        return 0.0;
    }
    us / (ms * 1000.0) * 100.0
}

/// What the policies add to our writes in a rollout's proportions: the
/// policy plugin's added time over the writes' CPU without the policies,
/// each kind weighted by its writes per node and update (percent).
/// `kinds`: (kind, write CPU ms without, plugin µs added).
pub(crate) fn rollout_share_percent(kinds: &[(Kind, f64, f64)]) -> f64 {
    let (us, ms) = kinds.iter().fold((0.0, 0.0), |(us, ms), (k, cpu, added)| {
        let w = k.per_node_update();
        (us + w * added, ms + w * cpu)
    });
    share_percent(us, ms)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The spread of `v` around its mean, in percent of it: (max - min) / 2.
fn spread_percent(v: &[f64]) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        });
    if v.is_empty() || mean(v) <= 0.0 {
        return 0.0;
    }
    (hi - lo) / 2.0 / mean(v) * 100.0
}

impl Cost {
    /// What the policies add, in percent of the cost without them.
    pub(crate) fn added_percent(&self) -> f64 {
        let without = mean(&self.without);
        if without <= 0.0 {
            return 0.0;
        }
        (mean(&self.with) / without - 1.0) * 100.0
    }

    /// The machine's noise: the larger spread of the rounds of one state.
    pub(crate) fn noise_percent(&self) -> f64 {
        spread_percent(&self.without).max(spread_percent(&self.with))
    }
}

/// Whether the policies are in force, as three dry-run writes each policy
/// refuses show; `want` is met only when all three agree.
pub(crate) fn in_force(refused: [bool; 3], want: bool) -> bool {
    refused.iter().all(|r| *r == want)
}

/// Who writes.
struct Writers {
    admin: kube::Client,
    controller: kube::Client,
    kubelet: kube::Client,
    other: kube::Client,
    /// The daemons of the first nodes: (node, client).
    daemons: Vec<(String, kube::Client)>,
}

struct Bench {
    cp: ControlPlane,
    writers: Writers,
    bootc_nodes: Vec<BootcNode>,
}

fn policy_files() -> Vec<String> {
    let deploy = ::tests::repo_root().join("deploy");
    ::tests::sim::DEPLOY_ADMISSION
        .iter()
        .map(|f| deploy.join(f).display().to_string())
        .collect()
}

/// deploy/'s namespaces, CRDs, RBAC and policies; grants for the kubelet
/// and the other controller.
fn install(cp: &ControlPlane) -> Result<()> {
    let deploy = ::tests::repo_root().join("deploy");
    for file in ::tests::sim::DEPLOY_BASE {
        cp.run_kubectl(&["apply", "-f", &deploy.join(file).display().to_string()])?;
    }
    for file in policy_files() {
        cp.run_kubectl(&["apply", "-f", &file])?;
    }
    cp.run_kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/bootcnodes.node.bootc.dev",
        "--timeout=60s",
    ])?;
    let grants = [
        (
            "bench-kubelet",
            ::tests::control_plane::KUBELET_USER,
            "nodes/status",
            "configmaps",
        ),
        (
            "bench-other-controller",
            ::tests::control_plane::OTHER_CONTROLLER_USER,
            "nodes",
            "configmaps",
        ),
    ];
    for (name, user, nodes, cms) in grants {
        let resources = format!("--resource={nodes},{cms}");
        cp.run_kubectl(&[
            "create",
            "clusterrole",
            name,
            "--verb=get,patch,update",
            &resources,
        ])?;
        cp.run_kubectl(&[
            "create",
            "clusterrolebinding",
            name,
            &format!("--clusterrole={name}"),
            &format!("--user={user}"),
        ])?;
    }
    Ok(())
}

/// Runs `make(i)` for `0..n`, many at once.
async fn for_each<F, Fut>(n: usize, make: F) -> Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let results: Vec<Result<()>> = futures::stream::iter(0..n)
        .map(make)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

fn node_name(i: usize) -> String {
    format!("adm-node-{i}")
}

/// `n` Nodes, each with its BootcNode (applied by the controller, its
/// status by the admin) and a ConfigMap.
async fn populate(w: &Writers, n: usize) -> Result<()> {
    for_each(n, |i| async move {
        let name = node_name(i);
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {OTHER_LABEL: "a"}},
        }))?;
        Api::<Node>::all(w.admin.clone())
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating Node {name}"))?;
        let bn = BootcNode::new(&name, ::tests::daemon_loop::spec(IMAGE));
        let mut body = serde_json::to_value(&bn)?;
        body["metadata"]["annotations"] = json!({});
        let apply = PatchParams::apply(CONTROLLER_MANAGER).force();
        Api::<BootcNode>::all(w.controller.clone())
            .patch(&name, &apply, &Patch::Apply(&body))
            .await?;
        let status = json!({"apiVersion": BootcNode::api_version(&()), "kind": BootcNode::kind(&()),
            "status": {"conditions": [{"type": ConditionType::Idle.as_str(), "status": "True",
                "reason": Reason::Idle.as_str(),
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "booted": {"image": IMAGE, "architecture": "amd64"}}});
        Api::<BootcNode>::all(w.admin.clone())
            .patch_status(
                &name,
                &PatchParams::apply(DAEMON_MANAGER).force(),
                &Patch::Apply(&status),
            )
            .await?;
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"}, "data": {"zone": "a"},
        }))?;
        Api::<ConfigMap>::namespaced(w.admin.clone(), "default")
            .create(&PostParams::default(), &cm)
            .await?;
        Ok(())
    })
    .await
}

async fn setup(n: usize) -> Result<Bench> {
    let cp = ControlPlane::start().await?;
    install(&cp)?;
    let mut writers = Writers {
        admin: cp.admin().await?,
        controller: cp.client(Identity::Controller).await?,
        kubelet: cp.client_with_token(KUBELET_TOKEN).await?,
        other: cp.client_with_token(OTHER_CONTROLLER_TOKEN).await?,
        daemons: Vec::new(),
    };
    populate(&writers, n).await?;
    for i in 0..DAEMON_NODES.min(n) {
        let node = node_name(i);
        let token = cp.node_bound_token(&node)?;
        writers
            .daemons
            .push((node, cp.client_with_token(&token).await?));
    }
    let mut bootc_nodes = Api::<BootcNode>::all(writers.admin.clone())
        .list(&Default::default())
        .await?
        .items;
    bootc_nodes.sort_by_key(|b| b.metadata.name.clone());
    Ok(Bench {
        cp,
        writers,
        bootc_nodes,
    })
}

/// Three dry-run writes, one each policy refuses: (daemon policy) a daemon
/// writes another node's status; (spec policy) the admin changes a
/// BootcNode's spec; (Node policy) the controller labels a Node outside
/// bootc.dev/. Whether each was refused.
async fn refusals(b: &Bench) -> Result<[bool; 3]> {
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let refused =
        |r: Result<BootcNode, kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 403);
    let (_, daemon) = b.writers.daemons.first().context("no daemon")?;
    let other = node_name(1);
    let status = json!({"status": {"conditions": []}});
    let daemon_refused = refused(
        Api::<BootcNode>::all(daemon.clone())
            .patch_status(&other, &dry, &Patch::Merge(&status))
            .await,
    );
    let spec = json!({"spec": {"desiredImage": OTHER_IMAGE}});
    let spec_refused = refused(
        Api::<BootcNode>::all(b.writers.admin.clone())
            .patch(&other, &dry, &Patch::Merge(&spec))
            .await,
    );
    let label = json!({"metadata": {"labels": {"example.com/steer": "x"}}});
    let node_refused = matches!(
        Api::<Node>::all(b.writers.controller.clone())
            .patch(&other, &dry, &Patch::Merge(&label))
            .await,
        Err(kube::Error::Api(s)) if s.code == 403
    );
    Ok([daemon_refused, spec_refused, node_refused])
}

/// Installs (`on`) or deletes the policies and their bindings, and waits
/// until the API server enforces what it was told.
async fn set_policies(b: &Bench, on: bool) -> Result<()> {
    for file in policy_files() {
        if on {
            b.cp.run_kubectl(&["apply", "-f", &file])?;
        } else {
            b.cp.run_kubectl(&["delete", "--ignore-not-found", "-f", &file])?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = refusals(b).await?;
        if in_force(now, on) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the policies were not {} after 60 s: refusals {now:?}",
                if on { "in force" } else { "gone" }
            );
        }
        // The policies reach the admission plugin through its informer:
        // no event to await here, so poll.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `j`-th write of `kind` in a round whose writes start at `seq0` per
/// object: its user, object and body, made.
async fn write(b: &Bench, kind: Kind, j: usize, seq0: usize, round: usize) -> Result<()> {
    let w = &b.writers;
    let all = b.bootc_nodes.len().max(1);
    let (bn, seq) = (&b.bootc_nodes[j % all], seq0 + j / all);
    let name = bn.name_any();
    let ctl = PatchParams {
        field_manager: Some(CONTROLLER_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match kind {
        Kind::ControllerApply => {
            let body = write_probe::bootc_node_apply(bn, seq);
            let params = PatchParams::apply(CONTROLLER_MANAGER).force();
            Api::<BootcNode>::all(w.controller.clone())
                .patch(&name, &params, &Patch::Apply(&body))
                .await?;
        }
        Kind::ControllerCordon => {
            let body = write_probe::node_patch("bench", seq);
            Api::<Node>::all(w.controller.clone())
                .patch(&name, &ctl, &Patch::Merge(&body))
                .await?;
        }
        Kind::DaemonStatus => {
            let daemons = w.daemons.len().max(1);
            let (node, client) = &w.daemons[j % daemons];
            let target = b
                .bootc_nodes
                .iter()
                .find(|x| &x.name_any() == node)
                .context("daemon's BootcNode")?;
            let body = write_probe::status_apply(target, seq0 + j / daemons);
            let params = PatchParams::apply(DAEMON_MANAGER).force();
            Api::<BootcNode>::all(client.clone())
                .patch_status(node, &params, &Patch::Apply(&body))
                .await?;
        }
        Kind::KubeletStatus => {
            let body = ready_body(seq % 2 == 1);
            Api::<Node>::all(w.kubelet.clone())
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&body))
                .await?;
        }
        Kind::OtherNodeLabel => {
            let body = json!({"metadata": {"labels": {OTHER_LABEL: format!("r{round}-{seq}")}}});
            Api::<Node>::all(w.other.clone())
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await?;
        }
        Kind::OtherConfigMap => {
            let body: Value = json!({"data": {"zone": format!("r{round}-{seq}")}});
            Api::<ConfigMap>::namespaced(w.other.clone(), "default")
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await?;
        }
    }
    Ok(())
}

/// One round of one kind: `writes` writes; the API server's and etcd's
/// CPU ms per write, and the policy plugin's µs per write.
async fn measure(b: &Bench, kind: Kind, writes: usize, round: usize) -> Result<(f64, f64)> {
    let ticks = clock_ticks();
    let pids = [
        b.cp.apiserver_pid().context("no API server")?,
        b.cp.etcd_pid(),
    ];
    let cpu = || {
        pids.iter()
            .filter_map(|p| cpu_seconds(*p, ticks))
            .sum::<f64>()
    };
    let targets = if kind == Kind::DaemonStatus {
        b.writers.daemons.len()
    } else {
        b.bootc_nodes.len()
    };
    let seq0 = round * 2 * writes.div_ceil(targets.max(1));
    // A few writes first, unmeasured: whatever the switch of the policies
    // left to do (compiling them, their type checks) is done by then.
    let warm = writes_per_round(writes / 10, targets);
    for_each(warm, |j| write(b, kind, j, seq0, round)).await?;
    let seq0 = seq0 + warm.div_ceil(targets.max(1));
    let plugin0 = plugin_seconds(&b.writers.admin).await?;
    let cpu0 = cpu();
    for_each(writes, |j| write(b, kind, j, seq0, round)).await?;
    let used = cpu() - cpu0;
    let plugin = plugin_seconds(&b.writers.admin).await? - plugin0;
    Ok((used * 1000.0 / writes as f64, plugin * 1e6 / writes as f64))
}

/// Seconds the ValidatingAdmissionPolicy admission plugin took so far
/// (`apiserver_admission_controller_admission_duration_seconds`, its sum).
async fn plugin_seconds(admin: &kube::Client) -> Result<f64> {
    let text = ::tests::write_probe::metrics_text(admin).await?;
    Ok(policy_plugin_seconds(&text))
}

/// The ValidatingAdmissionPolicy plugin's time in a `/metrics` text: every
/// operation, admitted or rejected.
pub(crate) fn policy_plugin_seconds(metrics: &str) -> f64 {
    use ::tests::write_probe::{label, sample};
    metrics
        .lines()
        .filter_map(|l| {
            sample(
                l,
                "apiserver_admission_controller_admission_duration_seconds_sum",
            )
        })
        .filter(|(labels, _)| label(labels, "name") == "ValidatingAdmissionPolicy")
        .map(|(_, seconds)| seconds)
        .sum()
}

/// The section: setup, then each round with its policies' state, each kind.
pub(crate) async fn admission_section(report: &mut Report, n: usize, requested: usize) {
    let started = Instant::now();
    match run(n, requested).await {
        Ok(results) => report_admission(report, &results, n, started.elapsed()),
        Err(e) => report.notes.push(format!("admission: {e:#}")),
    }
}

/// Per kind: the API server's and etcd's CPU (ms per write), and the
/// policy plugin's time (µs per write), without and with the policies.
type Results = Vec<(Kind, Cost, Cost)>;

async fn run(n: usize, requested: usize) -> Result<Results> {
    out(&format!(
        "admission: {n} nodes, policies off/on/on/off, about {requested} writes per kind and round\n"
    ));
    let b = setup(n).await?;
    let mut results: Results = Kind::ALL
        .iter()
        .map(|k| (*k, Cost::default(), Cost::default()))
        .collect();
    for (round, on) in ROUNDS.into_iter().enumerate() {
        set_policies(&b, on).await?;
        for (kind, cost, plugin) in &mut results {
            let targets = if *kind == Kind::DaemonStatus {
                b.writers.daemons.len()
            } else {
                n
            };
            let writes = writes_per_round(requested, targets);
            let (ms, us) = measure(&b, *kind, writes, round).await?;
            out(&format!(
                "  round {round} ({}): {:<52} {ms:.2} ms/write, policy plugin {us:.1} µs/write\n",
                if on { "with" } else { "without" },
                kind.describe()
            ));
            if on {
                cost.with.push(ms);
                plugin.with.push(us);
            } else {
                cost.without.push(ms);
                plugin.without.push(us);
            }
        }
    }
    Ok(results)
}

/// The section's rows: our writes in a rollout's proportions, then each
/// kind, ours first, on the policy plugin's time the policies add (judged
/// for writes not ours), with its CPU per write beneath for information.
fn report_admission(report: &mut Report, results: &Results, n: usize, took: Duration) {
    let ours: Vec<(Kind, f64, f64)> = results
        .iter()
        .filter(|r| r.0.ours())
        .map(|(kind, cost, plugin)| (*kind, mean(&cost.without), plugin_added_us(plugin)))
        .collect();
    let share = rollout_share_percent(&ours);
    report.push(row(
        "admission: our writes in a rollout's proportions (3 BootcNode applies, 2 Node patches, 3 status applies per node): policy plugin's time added, in percent of the writes' CPU",
        format!("{share:+.1} %"),
        &format!("<= +{OURS_TARGET_PERCENT:.0} %"),
        Some(share <= OURS_TARGET_PERCENT),
    ));
    for ours in [true, false] {
        for (kind, cost, plugin) in results.iter().filter(|r| r.0.ours() == ours) {
            let target = (!ours).then_some(NOT_OURS_TARGET_PERCENT);
            plugin_row(report, *kind, cost, plugin, target);
            cost_row(report, cost);
        }
    }
    report.push(row(
        format!("admission: the section's time ({n} nodes, setup included)"),
        format!("{:.0} s", took.as_secs_f64()),
        "",
        None,
    ));
    report.details.push(admission_details(n));
}

/// One kind's policy plugin time without and with the policies, and what
/// the policies add in percent of the write's CPU; judged against
/// `target` (percent) when there is one.
fn plugin_row(report: &mut Report, kind: Kind, cost: &Cost, plugin: &Cost, target: Option<f64>) {
    let added = share_percent(plugin_added_us(plugin), mean(&cost.without));
    report.push(row(
        format!(
            "admission: {}: policy plugin's time per write, without / with our policies",
            kind.describe()
        ),
        format!(
            "{:.0} / {:.0} µs ({added:+.1} % of the write's CPU)",
            mean(&plugin.without),
            mean(&plugin.with),
        ),
        &target.map_or(String::new(), |t| format!("<= +{t:.0} %")),
        target.map(|t| added <= t),
    ));
}

/// A kind's API server and etcd CPU per write without and with the
/// policies, round by round: for information, with the spread that shows
/// why no verdict rests on it.
fn cost_row(report: &mut Report, cost: &Cost) {
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    report.push(row(
        "    API server + etcd CPU per write, without / with (rounds without; with; spread of one state's rounds)",
        format!(
            "{:.2} / {:.2} ms ({:+.1} %; {}; {}; ±{:.1} %)",
            mean(&cost.without),
            mean(&cost.with),
            cost.added_percent(),
            list(&cost.without),
            list(&cost.with),
            cost.noise_percent()
        ),
        "",
        None,
    ));
}

/// The policy plugin's time the policies add to a write (µs).
fn plugin_added_us(plugin: &Cost) -> f64 {
    mean(&plugin.with) - mean(&plugin.without)
}

/// The section's explanation in BENCHMARKS.md.
fn admission_details(n: usize) -> String {
    format!(
        "### What our admission policies cost the API server

One kube-apiserver and etcd on this machine with deploy/'s CRDs, RBAC and its three ValidatingAdmissionPolicies (deploy/admission/), {n} Nodes, their BootcNodes and a ConfigMap each; no controller, no watches. Six kinds of writes, each as the user that makes it in a cluster: **ours** are the controller's BootcNode server-side applies (a reboot slot taken, released) and Node merge patches (cordon, uncordon), as its ServiceAccount, and the daemons' BootcNode status applies, with node-bound tokens of the daemon's ServiceAccount ({DAEMON_NODES} daemons); **not ours** are a kubelet's Node status patches (its Ready condition, as `system:node:...` in `system:nodes`), and another controller's Node label patches and ConfigMap patches (another ServiceAccount). Every write changes its object. Each kind is measured in four rounds, the policies and their bindings deleted, installed, installed, deleted (`kubectl delete`/`apply`; so that a drift of the machine over the section weighs on both states alike; a round starts once three dry-run writes show that the API server enforces what it was told), each round at least `--admission-writes` writes of the kind, {CONCURRENCY} in flight.

- **our writes in a rollout's proportions**: what the policies add to the policy plugin's time (below) for each of our kinds, weighted by its writes per node and update in a rollout (three BootcNode applies, a cordon and an uncordon, three status applies: the api section's count), over those writes' CPU without the policies. Target: at most +{OURS_TARGET_PERCENT:.0} %.
- **policy plugin's time per write**, one row per kind: the ValidatingAdmissionPolicy admission plugin's time (the API server's `apiserver_admission_controller_admission_duration_seconds`, wall time) over a round's writes, the mean of the rounds without and with our policies, and what the policies add in percent of the write's CPU without them. The plugin is the only place where the policies can add cost to a write, and its time resolves microseconds, where a write's CPU (the row beneath) moves by up to tens of percent from round to round. Target, for each kind of write not ours: at most +{NOT_OURS_TARGET_PERCENT:.0} % (\"nothing measurable\" as a number); ours are judged together, above. A policy whose matchConditions exclude a write (the Node policy, for another controller's Node label patches; the spec policy and the daemon's, for the controller's BootcNode applies) runs none of its validations: only the matchConditions cost (and the API server's conversion of the object to the version the policy matches). No policy of ours matches a kubelet's Node status patches (`deploy/optional/node-lifecycle-conditions` adds one that does) or a ConfigMap patch: what they show is the plugin's walk over the installed policies.
- **API server + etcd CPU per write**: kube-apiserver's and etcd's user + system time (`/proc/<pid>/stat`) over a round's writes, divided by them; the means without and with our policies and their difference, each round's figure in order, and the spread of one state's rounds ((max - min) / 2 over the mean): the machine's noise, which is why no verdict rests on this row. The ConfigMap patches, which no policy of ours can reach, show how far it moves by itself.
- Before each kind's measured writes, a tenth as many go unmeasured, so that whatever switching the policies left to the API server (compiling them, checking their types) is not counted.

With no watches the writes cost less than in a cluster, where each fans out to its watchers: the percentages are the larger for it.
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_writes_each_object_an_even_number_of_times() {
        // (requested, targets, writes)
        let rows = [
            (1000, 200, 1200),
            (1000, 20, 1000),
            (1, 20, 40),
            (400, 200, 400),
            (0, 0, 2),
        ];
        for (requested, targets, want) in rows {
            assert_eq!(
                writes_per_round(requested, targets),
                want,
                "{requested} over {targets}"
            );
        }
    }

    #[test]
    fn the_rounds_weigh_on_both_states_alike() {
        // Off, on, on, off: a linear drift adds as much to each state.
        assert_eq!(ROUNDS, [false, true, true, false]);
        let centre = |on: bool| -> f64 {
            let rounds: Vec<f64> = (0..ROUNDS.len())
                .filter(|i| ROUNDS[*i] == on)
                .map(|i| i as f64)
                .collect();
            mean(&rounds)
        };
        assert_eq!(centre(true), centre(false));
    }

    #[test]
    fn the_policies_added_and_the_noise() {
        let cost = |without: [f64; 2], with: [f64; 2]| Cost {
            without: without.to_vec(),
            with: with.to_vec(),
        };
        // (cost, added %, noise %)
        let rows = [
            (cost([10.0, 10.0], [10.4, 10.4]), 4.0, 0.0),
            (cost([9.0, 11.0], [10.2, 10.2]), 2.0, 10.0),
            (cost([10.0, 10.0], [9.0, 9.0]), -10.0, 0.0),
            (cost([10.0, 10.0], [8.0, 12.0]), 0.0, 20.0),
        ];
        for (c, added, noise) in rows {
            assert!((c.added_percent() - added).abs() < 1e-9, "{c:?}");
            assert!((c.noise_percent() - noise).abs() < 1e-9, "{c:?}");
        }
        assert_eq!(Cost::default().added_percent(), 0.0);
    }

    #[test]
    fn writes_not_ours_are_judged_on_the_plugins_added_time_alone() {
        let cost = |without: f64, with: f64| Cost {
            without: vec![without; 2],
            with: vec![with; 2],
        };
        // (write's CPU ms, plugin µs without and with, verdict): the CPU
        // with the policies never enters the verdict.
        let rows = [
            (cost(4.0, 9.0), cost(5.0, 30.0), "ok"),
            (cost(4.0, 4.0), cost(5.0, 205.0), "ok"),
            (cost(4.0, 2.0), cost(5.0, 206.0), "MISSED"),
            (cost(0.5, 0.5), cost(5.0, 60.0), "MISSED"),
        ];
        for (cpu, plugin, verdict) in rows {
            let mut report = Report::default();
            plugin_row(&mut report, Kind::KubeletStatus, &cpu, &plugin, Some(5.0));
            let table = report.table();
            assert!(
                table.contains(&format!("| {verdict} |")),
                "{cpu:?} {plugin:?}: {table}"
            );
        }
        let mut report = Report::default();
        plugin_row(
            &mut report,
            Kind::DaemonStatus,
            &cost(1.0, 1.0),
            &cost(0.0, 900.0),
            None,
        );
        assert!(report.table().contains("| - |"), "ours only inform");
    }

    #[test]
    fn our_writes_are_weighed_in_a_rollouts_proportions() {
        // 3 applies at 5 ms + 100 µs, 2 cordons at 4 ms + 500 µs, 3
        // status applies at 6 ms + 200 µs: 300 + 1,000 + 600 µs over
        // 15 + 8 + 18 ms; a kubelet's write weighs nothing.
        let kinds = [
            (Kind::ControllerApply, 5.0, 100.0),
            (Kind::ControllerCordon, 4.0, 500.0),
            (Kind::DaemonStatus, 6.0, 200.0),
            (Kind::KubeletStatus, 3.0, 1000.0),
        ];
        let want = 1900.0 / 41_000.0 * 100.0;
        assert!((rollout_share_percent(&kinds) - want).abs() < 1e-9);
        assert_eq!(rollout_share_percent(&[]), 0.0);
    }

    #[test]
    fn the_plugins_time_in_percent_of_the_writes_cpu() {
        // (µs, ms, percent)
        let rows = [(100.0, 4.0, 2.5), (1000.0, 4.0, 25.0), (5.0, 0.0, 0.0)];
        for (us, ms, want) in rows {
            assert!((share_percent(us, ms) - want).abs() < 1e-9, "{us} of {ms}");
        }
    }

    #[test]
    fn the_policies_are_in_force_when_all_three_refuse() {
        // (refused, want, met)
        let rows = [
            ([true, true, true], true, true),
            ([true, false, true], true, false),
            ([false, false, false], false, true),
            ([false, true, false], false, false),
        ];
        for (refused, want, met) in rows {
            assert_eq!(in_force(refused, want), met, "{refused:?} {want}");
        }
    }

    #[test]
    fn the_policy_plugins_time_is_summed_over_its_operations() {
        let text = "# HELP x\n\
            apiserver_admission_controller_admission_duration_seconds_sum{name=\"ValidatingAdmissionPolicy\",operation=\"UPDATE\",rejected=\"false\",type=\"validate\"} 0.25\n\
            apiserver_admission_controller_admission_duration_seconds_sum{name=\"ValidatingAdmissionPolicy\",operation=\"CREATE\",rejected=\"true\",type=\"validate\"} 1.5e-01\n\
            apiserver_admission_controller_admission_duration_seconds_count{name=\"ValidatingAdmissionPolicy\",operation=\"UPDATE\",rejected=\"false\",type=\"validate\"} 9\n\
            apiserver_admission_controller_admission_duration_seconds_sum{name=\"ValidatingAdmissionWebhook\",operation=\"UPDATE\",rejected=\"false\",type=\"validate\"} 7\n";
        assert!((policy_plugin_seconds(text) - 0.4).abs() < 1e-9);
        assert_eq!(policy_plugin_seconds(""), 0.0);
    }
}
