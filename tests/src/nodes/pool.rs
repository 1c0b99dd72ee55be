//! The set-up the real-node tests and the benchmark share, and what they
//! drive it with: the operator installed from deploy/ ([`super::operator`]),
//! a workload, the pool's pull Secret, and the pool of every node on `v1`
//! ([`installed_with_a_pool_on_v1`]); `kubectl`, the pool's manifest, waits
//! on the pool, and the cluster's state for a failure.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use api::BootcNodePool;
use kube::api::Api;

use super::NodeCluster;
use super::operator::{self, Install};
use crate::recorder::Recorder;

/// How long a rollout of three real nodes may take.
pub const ROLLOUT: Duration = Duration::from_secs(300);
/// The pool's name, and the label (and value) its nodes carry.
pub const POOL: &str = "workers";
pub const POOL_LABEL: &str = "test.bootc.dev/pool";

/// The workload a drain must move: three replicas, at most one down
/// (`TOOLS` stands for the tools image).
pub const WORKLOAD: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: web
          image: TOOLS
          command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"#;

/// Runs the cluster's `kubectl` with `input` on its stdin; its stdout.
pub fn kubectl(cluster: &NodeCluster, args: &[&str], input: Option<&str>) -> Result<String> {
    use std::io::Write;
    let mut cmd = cluster.cp.kubectl();
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().context("running kubectl")?;
    let mut stdin = child.stdin.take().context("kubectl's stdin")?;
    stdin.write_all(input.unwrap_or("").as_bytes())?;
    drop(stdin);
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The pool, as a user writes it: every labelled node, one at a time,
/// following the OS repository's `tag`.
pub fn pool_yaml(cluster: &NodeCluster, tag: &str) -> String {
    pool_yaml_at(&cluster.registry.host(), tag)
}

/// [`pool_yaml`] naming the OS repository at `registry`: the cluster's, or
/// [`super::source_registry`], which the cluster reaches through its mirror.
pub fn pool_yaml_at(registry: &str, tag: &str) -> String {
    format!(
        "apiVersion: node.bootc.dev/v1alpha1\nkind: BootcNodePool\nmetadata:\n  name: {POOL}\nspec:\n  nodeSelector:\n    matchLabels:\n      {POOL_LABEL}: {POOL}\n  image:\n    ref: {registry}/{}:{tag}\n  pullSecretRef:\n    name: os-pull\n    namespace: bootc-operator\n  rollout:\n    maxUnavailable: 1\n",
        super::OS_REPO,
    )
}

/// Waits (up to [`ROLLOUT`]) until the pool satisfies `cond`; on a timeout
/// the error carries the cluster's state.
pub async fn wait_pool(
    cluster: &NodeCluster,
    what: &str,
    cond: impl Fn(&BootcNodePool) -> bool + Send + 'static,
) -> Result<BootcNodePool> {
    wait_pool_for(cluster, what, ROLLOUT, cond).await
}

/// [`wait_pool`], up to `timeout`.
pub async fn wait_pool_for(
    cluster: &NodeCluster,
    what: &str,
    timeout: Duration,
    cond: impl Fn(&BootcNodePool) -> bool + Send + 'static,
) -> Result<BootcNodePool> {
    let pools = Api::<BootcNodePool>::all(cluster.cp.admin().await?);
    match crate::k8s::wait_for(pools, POOL, timeout, what, move |p| p.is_some_and(&cond)).await {
        Ok(Some(p)) => Ok(p),
        Ok(None) => bail!("the pool is gone"),
        Err(e) => bail!("{e}\n{}", diagnostics(cluster)),
    }
}

/// The cluster's objects and the operator's logs, for a failure.
pub fn diagnostics(cluster: &NodeCluster) -> String {
    let mut out = kubectl(
        cluster,
        &["get", "bnp,bn,nodes,pods", "-A", "-o", "wide"],
        None,
    )
    .unwrap_or_else(|e| format!("{e:#}\n"));
    for (namespace, name) in [
        ("bootc-daemon", "bootc-daemon"),
        ("bootc-operator", "bootc-controller"),
    ] {
        let output = cluster
            .cp
            .kubectl()
            .args([
                "logs",
                "-n",
                namespace,
                "-l",
                &format!("app.kubernetes.io/name={name}"),
            ])
            .args(["--tail=15", "--prefix", "--all-containers"])
            .output();
        if let Ok(o) = output {
            out.push_str(&String::from_utf8_lossy(&o.stdout));
            out.push_str(&String::from_utf8_lossy(&o.stderr));
        }
    }
    out
}

/// The digest of a pinned reference (`repo@sha256:...`).
pub fn digest_of(reference: &str) -> &str {
    reference.split_once('@').map_or(reference, |(_, d)| d)
}

/// The registry's credentials as the pool's pull secret.
pub fn pull_secret(cluster: &NodeCluster) -> Result<()> {
    let (user, password) = cluster.registry.login();
    kubectl(
        cluster,
        &[
            "create",
            "secret",
            "docker-registry",
            "os-pull",
            "-n",
            "bootc-operator",
            &format!("--docker-server={}", cluster.registry.host()),
            &format!("--docker-username={user}"),
            &format!("--docker-password={password}"),
        ],
        None,
    )?;
    // The Secret opts in to the pool that names it.
    let opt_in = format!("{}={POOL}", api::labels::POOLS_ANNOTATION);
    let args = ["annotate", "secret", "os-pull", "-n", "bootc-operator"];
    kubectl(cluster, &[&args[..], &[opt_in.as_str()]].concat(), None)?;
    Ok(())
}

/// The operator installed from deploy/ (`install`), `workload` (its
/// `TOOLS` the tools image) running, the pull secret, and the pool of every
/// node on v1, which the nodes already run: up to date at once. The
/// recorder starts first.
pub async fn installed_with_a_pool_on_v1(
    cluster: &NodeCluster,
    workload: Option<&str>,
    install: &Install,
) -> Result<Recorder> {
    let recorder = Recorder::start(&cluster.cp).await?;
    operator::install(cluster, install)?;
    if let Some(workload) = workload {
        let tools = format!("{}/{}", cluster.registry.host(), super::images::TOOLS);
        let objects = workload.replace("TOOLS", &tools);
        kubectl(cluster, &["apply", "-f", "-"], Some(&objects))?;
    }
    pull_secret(cluster)?;
    for node in &cluster.nodes {
        let label = format!("{POOL_LABEL}={POOL}");
        kubectl(cluster, &["label", "node", &node.name, &label], None)?;
    }
    kubectl(
        cluster,
        &["apply", "-f", "-"],
        Some(&pool_yaml(cluster, "v1")),
    )?;
    let v1_digest = digest_of(&cluster.os_v1).to_owned();
    let nodes = i32::try_from(cluster.nodes.len())?;
    wait_pool(cluster, "the pool on v1", move |p| {
        let s = p.status.clone().unwrap_or_default();
        s.target_digest.as_deref() == Some(v1_digest.as_str()) && s.updated_count == nodes
    })
    .await?;
    Ok(recorder)
}
