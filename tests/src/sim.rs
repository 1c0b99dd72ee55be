//! A local simulated cluster running a real rollout: the real API server and
//! etcd, the real registry, the real `bootc-controller`, and N simulated
//! nodes, each a fake bootc host in its own mount namespace with the real
//! `bootc-daemon` and `bootc-helper`. The simulator plays the kubelet: it
//! keeps each Node's Ready condition, marks a node NotReady while it
//! "reboots", and restarts that node's daemon afterwards.
//!
//! Used by the `bootc-sim` binary (`./dev sim`) and by the
//! end-to-end tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use api::labels::{ARCH_LABEL, HOSTNAME_LABEL};
use api::{BootcNode, BootcNodePool};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::Mutex;

use crate::control_plane::{ControlPlane, Identity, Options};
use crate::daemon_player::set_ready;
use crate::fake_bootc::{BootcVersion, Reboot, UnplannedReboot};
use crate::fake_host::{FakeHost, bin};
use crate::node_agent::{Agent, AgentOptions};
use crate::registry::{TestImage, TestRegistry};

/// Sets a Node's Ready condition as a kubelet does: again and again until
/// the API server takes it (it may be restarting), for up to a minute.
async fn set_ready_patiently(admin: &kube::Client, name: &str, ready: bool) {
    let mut delay = Duration::from_millis(200);
    for _ in 0..30 {
        match set_ready(admin, name, ready).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(node = %name, ready, error = %e, "setting Ready failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// SIGKILLs the daemon of node `name` among `nodes` (if one runs);
/// returns the node.
fn kill_daemon<'n>(nodes: &'n mut [SimNode], name: &str) -> Result<&'n mut SimNode> {
    let node = nodes
        .iter_mut()
        .find(|n| n.name == name)
        .context("no such node")?;
    if let Some(mut a) = node.agent.take() {
        a.kill();
    }
    Ok(node)
}

/// The daemon's namespace (deploy/namespace.yaml).
pub const DAEMON_NAMESPACE: &str = "bootc-daemon";

/// The pool the simulator creates.
pub const POOL: &str = "workers";
/// The label that makes a Node a member of [`POOL`].
pub const POOL_LABEL: &str = "sim.bootc.dev/pool";

/// What a user installs from deploy/ before the operator's processes:
/// namespaces, CRDs, RBAC (the Deployment and DaemonSet are processes here).
pub const DEPLOY_BASE: [&str; 5] = [
    "namespace.yaml",
    "crds/node.bootc.dev_bootcnodepools.yaml",
    "crds/node.bootc.dev_bootcnodes.yaml",
    "rbac/controller.yaml",
    "rbac/daemon.yaml",
];

/// deploy/'s admission policies and their bindings.
pub const DEPLOY_ADMISSION: [&str; 3] = [
    "admission/daemon-own-node-only.yaml",
    "admission/bootcnode-spec-by-controller-only.yaml",
    "admission/controller-node-writes.yaml",
];
/// deploy/optional/node-lifecycle-conditions: the controller's grant on
/// Node status and the policy that narrows it.
pub const NODE_LIFECYCLE_CONDITIONS: [&str; 2] = [
    "optional/node-lifecycle-conditions/rbac.yaml",
    "optional/node-lifecycle-conditions/controller-node-status-writes.yaml",
];
/// The repository the simulator pushes to.
pub const REPO: &str = "acme/os";
/// The tag the pool follows.
pub const TAG: &str = "stable";

/// A loopback address with a port free now (the controller binds it later).
fn free_loopback_addr() -> Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// How the simulated cluster is set up.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub nodes: usize,
    /// How long a simulated reboot keeps a node NotReady.
    pub reboot_time: Duration,
    /// `spec.rollout.maxUnavailable` (an integer or "N%").
    pub max_unavailable: serde_json::Value,
    /// `spec.disruption.rebootPolicy`.
    pub reboot_policy: String,
    /// How often the controller resolves the tag.
    pub tag_interval: Duration,
    /// Write an audit log of every API request (benchmarks).
    pub audit: bool,
    /// The controller's `RUST_LOG`.
    pub controller_log: String,
    /// Where the nodes' bootc-daemon and bootc-helper are (default: next to
    /// the running binary); benchmarks point it at release builds.
    pub agent_bin_dir: Option<PathBuf>,
    /// The controller binary (default: next to the running binary).
    pub controller_bin: Option<PathBuf>,
    /// The bootc each new node runs, in turn (node i gets entry i mod len):
    /// `[V1_16, Pr]` makes a pool of both. Default: released bootc.
    pub bootc_versions: Vec<BootcVersion>,
    /// Controller replicas. With more than one they elect a leader on a
    /// Lease ([`LEASE_SECONDS`]), and replica i "runs on" the i-th node
    /// (`sim-node-<i+1>`, a controller Pod bound to it): that node's reboot
    /// stops it and its return starts it again, as a kubelet would.
    pub controller_replicas: usize,
    /// The controller's `--stuck-deadline-scale` (1: the real deadlines).
    pub stuck_deadline_scale: f64,
    /// The controller's `--rest-per-member-micros`, when not its default.
    pub rest_per_member: Option<Duration>,
    /// The controller's `--node-lifecycle-conditions`, with its grant
    /// (`deploy/optional/node-lifecycle-conditions`) and, where the API
    /// server has it, the `NodeLifecycleConditions` gate.
    pub node_lifecycle_conditions: bool,
    /// The nodes (by name) whose OS image leaves bootc's own update timer
    /// enabled, as Fedora ships it; every other node's image masks it, as
    /// a user's would ([`FakeHost::start`]).
    pub updaters_left_on: Vec<String>,
    /// The controller's `--alert-gate-endpoint`s, as (name, URL).
    pub alert_gate_endpoints: Vec<(String, String)>,
    /// The controller's `--alertmanager-endpoint`s, as (name, URL).
    pub alertmanager_endpoints: Vec<(String, String)>,
    /// The controller's `--signature-policy` file (read again before every
    /// check: it may be written after the start).
    pub signature_policy: Option<PathBuf>,
}

/// The Lease duration of replicated controllers.
pub const LEASE_SECONDS: u64 = 4;

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            nodes: 5,
            reboot_time: Duration::from_secs(2),
            max_unavailable: json!(1),
            reboot_policy: "RebootOnly".into(),
            tag_interval: Duration::from_secs(3),
            audit: false,
            controller_log: std::env::var("BOOTC_SIM_CONTROLLER_LOG")
                .unwrap_or_else(|_| "info".into()),
            agent_bin_dir: None,
            controller_bin: None,
            bootc_versions: vec![BootcVersion::V1_16],
            controller_replicas: 1,
            stuck_deadline_scale: 1.0,
            rest_per_member: None,
            node_lifecycle_conditions: false,
            updaters_left_on: Vec::new(),
            alert_gate_endpoints: Vec::new(),
            alertmanager_endpoints: Vec::new(),
            signature_policy: None,
        }
    }
}

/// One simulated node.
pub struct SimNode {
    pub name: String,
    pub host: FakeHost,
    agent: Option<Agent>,
    /// Reboots already handled.
    reboots_seen: usize,
}

impl std::fmt::Debug for SimNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimNode").field("name", &self.name).finish()
    }
}

/// The running simulated cluster. Everything stops when it is dropped.
pub struct Sim {
    pub cp: ControlPlane,
    pub registry: TestRegistry,
    pub admin: kube::Client,
    pub options: SimOptions,
    launcher: Launcher,
    /// The controller replicas' processes, by replica (None: not running).
    controllers: Replicas,
    /// Where the controller serves `/metrics` (HTTPS, self-signed, for permitted tokens).
    pub metrics_addr: std::net::SocketAddr,
    pub nodes: Arc<Mutex<Vec<SimNode>>>,
    logs: tempfile::TempDir,
    kubelet: Option<tokio::task::JoinHandle<()>>,
    /// Nodes that do not come back Ready after a reboot (a bad image).
    broken: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("options", &self.options)
            .finish()
    }
}

/// What starting a controller replica takes.
#[derive(Clone, Debug)]
struct Launcher {
    bin: PathBuf,
    kubeconfig: PathBuf,
    registry_ca: PathBuf,
    metrics_addr: std::net::SocketAddr,
    tag_interval: Duration,
    log_dir: PathBuf,
    rust_log: String,
    replicas: usize,
    stuck_deadline_scale: f64,
    rest_per_member: Option<Duration>,
    node_lifecycle_conditions: bool,
    alert_gate_endpoints: Vec<(String, String)>,
    alertmanager_endpoints: Vec<(String, String)>,
    signature_policy: Option<PathBuf>,
}

impl Launcher {
    /// The identity of replica `i` (the Lease holder's name).
    fn identity(&self, i: usize) -> String {
        if self.replicas > 1 {
            format!("sim-controller-{i}")
        } else {
            "sim-controller".to_owned()
        }
    }

    /// Starts replica `i`; replica 0 serves the metrics.
    fn spawn(&self, i: usize) -> Result<Child> {
        let log = match i {
            0 => self.log_dir.join("controller.log"),
            _ => self.log_dir.join(format!("controller-{i}.log")),
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let metrics = match i {
            0 => self.metrics_addr.to_string(),
            _ => String::new(),
        };
        let mut command = Command::new("setpriv");
        command
            .args(["--pdeathsig", "KILL", "--"])
            .arg(&self.bin)
            .args(["--identity", &self.identity(i), "--health-addr", ""])
            .args(["--metrics-addr", &metrics])
            .arg("--registry-ca-file")
            .arg(&self.registry_ca)
            .args([
                "--tag-resolution-interval-seconds",
                &self.tag_interval.as_secs().max(1).to_string(),
            ])
            .args([
                "--stuck-deadline-scale",
                &self.stuck_deadline_scale.to_string(),
            ]);
        if self.node_lifecycle_conditions {
            command.arg("--node-lifecycle-conditions");
        }
        if let Some(rest) = self.rest_per_member {
            command.arg(format!("--rest-per-member-micros={}", rest.as_micros()));
        }
        for (name, url) in &self.alert_gate_endpoints {
            command.arg(format!("--alert-gate-endpoint={name}={url}"));
        }
        for (name, url) in &self.alertmanager_endpoints {
            command.arg(format!("--alertmanager-endpoint={name}={url}"));
        }
        if let Some(policy) = &self.signature_policy {
            command.arg("--signature-policy").arg(policy);
        }
        if self.replicas > 1 {
            command.args([
                "--leader-elect",
                "--lease-duration-seconds",
                &LEASE_SECONDS.to_string(),
            ]);
        }
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", &self.rust_log)
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("starting bootc-controller")
    }
}

fn kubectl_apply(cp: &ControlPlane, path: &std::path::Path) -> Result<()> {
    cp.run_kubectl(&[
        std::ffi::OsStr::new("apply"),
        "-f".as_ref(),
        path.as_os_str(),
    ])?;
    Ok(())
}

impl Sim {
    /// Starts everything and creates the pool on image v1.
    pub async fn start(options: SimOptions) -> Result<Sim> {
        let feature_gates = if options.node_lifecycle_conditions {
            crate::binaries::node_lifecycle_gates()?
        } else {
            Vec::new()
        };
        let cp = ControlPlane::start_with(Options {
            audit: options.audit,
            feature_gates,
            ..Options::default()
        })
        .await?;
        let admin = cp.admin().await?;
        // What a user installs from deploy/: namespace, CRDs, RBAC. (The
        // Deployment and DaemonSet are replaced by the processes below.)
        let deploy = crate::repo_root().join("deploy");
        for file in DEPLOY_BASE.iter().chain(&DEPLOY_ADMISSION) {
            kubectl_apply(&cp, &deploy.join(file))?;
        }
        if options.node_lifecycle_conditions {
            for file in NODE_LIFECYCLE_CONDITIONS {
                kubectl_apply(&cp, &deploy.join(file))?;
            }
        }
        let out = cp
            .kubectl()
            .args([
                "wait",
                "--for=condition=Established",
                "crd/bootcnodepools.node.bootc.dev",
                "crd/bootcnodes.node.bootc.dev",
                "--timeout=60s",
            ])
            .output()?;
        if !out.status.success() {
            bail!(
                "CRDs not established: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }

        let registry = TestRegistry::start("sim", "sim-password").await?;
        let secrets: Api<Secret> = Api::namespaced(admin.clone(), api::labels::OPERATOR_NAMESPACE);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "os-pull", "namespace": api::labels::OPERATOR_NAMESPACE,
                         "annotations": {api::labels::POOLS_ANNOTATION: POOL}},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": ByteString(registry.good_docker_config().into_bytes())},
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;

        // BOOTC_SIM_KEEP_LOGS=1 keeps every process's log after the run.
        let logs = tempfile::Builder::new()
            .prefix("bootc-sim-logs-")
            .disable_cleanup(std::env::var_os("BOOTC_SIM_KEEP_LOGS").is_some())
            .tempdir()?;
        let metrics_addr = free_loopback_addr()?;
        let launcher = Launcher {
            bin: options
                .controller_bin
                .clone()
                .unwrap_or_else(|| bin("bootc-controller")),
            kubeconfig: cp.kubeconfig(Identity::Controller),
            registry_ca: registry.ca_path(),
            metrics_addr,
            tag_interval: options.tag_interval,
            log_dir: logs.path().to_owned(),
            rust_log: options.controller_log.clone(),
            replicas: options.controller_replicas.max(1),
            stuck_deadline_scale: options.stuck_deadline_scale,
            rest_per_member: options.rest_per_member,
            node_lifecycle_conditions: options.node_lifecycle_conditions,
            alert_gate_endpoints: options.alert_gate_endpoints.clone(),
            alertmanager_endpoints: options.alertmanager_endpoints.clone(),
            signature_policy: options.signature_policy.clone(),
        };
        let controllers = Arc::new(std::sync::Mutex::new(
            (0..launcher.replicas).map(|_| None).collect(),
        ));
        let mut sim = Sim {
            cp,
            registry,
            admin,
            options,
            launcher,
            controllers,
            metrics_addr,
            nodes: Arc::new(Mutex::new(Vec::new())),
            logs,
            kubelet: None,
            broken: Arc::new(Mutex::new(Default::default())),
        };
        sim.start_controller().await?;
        Ok(sim)
    }

    /// Pushes a version of the OS image under the pool's tag; returns its digest.
    pub async fn push_version(&self, version: &str) -> Result<String> {
        self.push_version_tagged(version, TAG).await
    }

    /// Pushes a version under `tag`; returns its digest.
    pub async fn push_version_tagged(&self, version: &str, tag: &str) -> Result<String> {
        self.push_labelled(version, tag, &[]).await
    }

    /// Pushes an OS image of `version` under `tag` with these config labels
    /// besides (or instead of) the usual ones
    /// ([`TestRegistry::push_image_labelled`]).
    pub async fn push_labelled(
        &self,
        version: &str,
        tag: &str,
        labels: &[(&str, &str)],
    ) -> Result<String> {
        let arch = crate::fake_bootc::Deployment::of("x@sha256:0").architecture;
        let image = TestImage {
            architecture: &arch,
            version,
            marker: version,
        };
        self.registry
            .push_image_labelled(REPO, tag, &image, labels)
            .await
    }

    /// `registry/repo@digest`.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}/{REPO}@{digest}", self.registry.host())
    }

    /// Adds `count` nodes booted into `booted` (a digest of [`REPO`]),
    /// installed as users' hosts are: from the tag ([`TAG`]) when it pointed
    /// there, so bootc reports `<registry>/acme/os:stable` and the digest.
    pub async fn add_nodes(&self, count: usize, booted_digest: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut nodes = self.nodes.lock().await;
        let arch = crate::fake_bootc::Deployment::of("x@sha256:0").architecture;
        for _ in 0..count {
            let name = format!("sim-node-{}", nodes.len() + 1);
            let installed = crate::fake_bootc::Deployment::installed(
                &format!("{}/{REPO}:{TAG}", self.registry.host()),
                booted_digest,
            );
            let host =
                FakeHost::start_installed(Some(installed)).context("starting a fake host")?;
            let versions = &self.options.bootc_versions;
            if !versions.is_empty() {
                host.layout
                    .set_version(versions[nodes.len() % versions.len()])?;
            }
            if self.options.updaters_left_on.contains(&name) {
                host.leave_updater_on(true)?;
            }
            std::fs::write(host.layout.pull_from_registry(), "")?;
            let certs = host
                .root()
                .join("etc/containers/certs.d")
                .join(self.registry.host());
            std::fs::create_dir_all(&certs)?;
            std::fs::write(certs.join("ca.crt"), self.registry.ca_pem()?)?;
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {POOL_LABEL: POOL, ARCH_LABEL: arch, HOSTNAME_LABEL: name}},
            }))?;
            Api::<Node>::all(self.admin.clone())
                .create(&PostParams::default(), &node)
                .await?;
            set_ready(&self.admin, &name, true).await?;
            if self.launcher.replicas > 1 && nodes.len() < self.launcher.replicas {
                self.place_replica(nodes.len(), &name).await?;
            }
            let agent = Agent::start(
                &self.cp,
                &host,
                &self.agent_options(&name),
                self.logs.path(),
            )?;
            names.push(name.clone());
            nodes.push(SimNode {
                name,
                host,
                agent: Some(agent),
                reboots_seen: 0,
            });
        }
        Ok(names)
    }

    /// Adds a node of the pool whose daemon cannot run, as a kubelet shows
    /// it: the Node Ready, and in the daemon's namespace its bootc-daemon
    /// Pod bound to it, crash-looping (no daemon process runs). Returns the
    /// node's name.
    pub async fn add_node_whose_daemon_cannot_run(&self) -> Result<String> {
        let name = "sim-node-nodaemon".to_owned();
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {POOL_LABEL: POOL, HOSTNAME_LABEL: name}},
        }))?;
        Api::<Node>::all(self.admin.clone())
            .create(&PostParams::default(), &node)
            .await?;
        set_ready(&self.admin, &name, true).await?;
        let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
            self.admin.clone(),
            DAEMON_NAMESPACE,
        );
        let pod_name = format!("bootc-daemon-{name}");
        let pod = serde_json::from_value(json!({
            "metadata": {"name": pod_name, "labels": {
                api::labels::APP_NAME_LABEL: api::labels::DAEMON_APP_NAME}},
            "spec": {"nodeName": name, "containers": [{"name": "daemon", "image": "example.invalid/bootc-operator:1"}]},
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
        let status = json!({"status": {"phase": "Running", "containerStatuses": [{
            "name": "daemon", "image": "example.invalid/bootc-operator:1", "imageID": "",
            "ready": false, "restartCount": 6,
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                "message": "back-off 5m0s restarting failed container=daemon"}}}]}});
        pods.patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        Ok(name)
    }

    /// The Pod of controller replica `i` on `node`, as the Deployment's
    /// would be: in the operator namespace, with the controller's label
    /// (so drains leave it alone). Nothing runs it: the replica's process
    /// is tied to the node by the kubelet player.
    async fn place_replica(&self, i: usize, node: &str) -> Result<()> {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("bootc-controller-{i}"), "labels": {
                api::labels::APP_NAME_LABEL: api::labels::CONTROLLER_APP_NAME}},
            "spec": {"nodeName": node, "automountServiceAccountToken": false,
                     "containers": [{"name": "controller", "image": "example.invalid/bootc-operator:1",
                         // The operator's namespace enforces the `restricted` level.
                         "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                             "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                             "seccompProfile": {"type": "RuntimeDefault"}}}]},
        }))?;
        Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
            self.admin.clone(),
            api::labels::OPERATOR_NAMESPACE,
        )
        .create(&PostParams::default(), &pod)
        .await?;
        Ok(())
    }

    /// Creates the pool following `registry/acme/os:stable`.
    pub async fn create_pool(&self) -> Result<()> {
        let pool: BootcNodePool = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": POOL},
            "spec": {
                "nodeSelector": {"matchLabels": {POOL_LABEL: POOL}},
                "image": {"ref": format!("{}/{REPO}:{TAG}", self.registry.host())},
                "rollout": {"maxUnavailable": self.options.max_unavailable, "drainTimeoutSeconds": 60},
                "disruption": {"rebootPolicy": self.options.reboot_policy},
                "pullSecretRef": {"name": "os-pull", "namespace": api::labels::OPERATOR_NAMESPACE},
            },
        }))?;
        Api::<BootcNodePool>::all(self.admin.clone())
            .create(&PostParams::default(), &pool)
            .await?;
        Ok(())
    }

    /// Patches the pool's spec (merge patch).
    pub async fn patch_pool(&self, spec: serde_json::Value) -> Result<()> {
        Api::<BootcNodePool>::all(self.admin.clone())
            .patch(
                POOL,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await?;
        Ok(())
    }

    /// Starts (or restarts) every controller replica not running. With
    /// several, replica 0 starts first and is the leader once this returns.
    pub async fn start_controller(&mut self) -> Result<()> {
        let replicas = self.launcher.replicas;
        self.start_replica(0)?;
        if replicas > 1 {
            self.wait_leader(0).await?;
        }
        for i in 1..replicas {
            self.start_replica(i)?;
        }
        Ok(())
    }

    /// Starts replica `i` unless it runs.
    pub fn start_replica(&self, i: usize) -> Result<()> {
        let mut controllers = self
            .controllers
            .lock()
            .map_err(|_| anyhow::anyhow!("controllers lock poisoned"))?;
        let slot = controllers.get_mut(i).context("no such replica")?;
        if slot.is_none() {
            *slot = Some(self.launcher.spawn(i)?);
        }
        Ok(())
    }

    /// SIGKILLs replica `i` (its pod evicted, or its process gone).
    pub fn kill_replica(&self, i: usize) {
        if let Some(c) = take_replica(&self.controllers, i) {
            stop(c);
        }
    }

    /// The replica holding the Lease now, if any.
    pub async fn leader(&self) -> Result<Option<usize>> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.admin.clone(), api::labels::OPERATOR_NAMESPACE);
        let holder = leases
            .get_opt("bootc-controller")
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        Ok((0..self.launcher.replicas).find(|i| Some(self.launcher.identity(*i)) == holder))
    }

    /// Waits (at most two minutes) until replica `i` holds the Lease.
    pub async fn wait_leader(&self, i: usize) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while self.leader().await? != Some(i) {
            if std::time::Instant::now() > deadline {
                bail!("replica {i} never took the lease");
            }
            // The Lease is polled: its writes are the replicas' own clock.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Replica 0's pid, while it runs.
    pub fn controller_pid(&self) -> Option<u32> {
        self.controllers
            .lock()
            .ok()
            .and_then(|c| c.first().and_then(|c| c.as_ref().map(Child::id)))
    }

    /// Each node's running daemon: (node, pid).
    pub async fn daemon_pids(&self) -> Vec<(String, u32)> {
        self.nodes
            .lock()
            .await
            .iter()
            .filter_map(|n| n.agent.as_ref().map(|a| (n.name.clone(), a.child.id())))
            .collect()
    }

    fn agent_options(&self, name: &str) -> AgentOptions {
        AgentOptions {
            bin_dir: self.options.agent_bin_dir.clone(),
            ..AgentOptions::new(name)
        }
    }

    /// SIGKILLs every controller replica.
    pub fn kill_controller(&mut self) {
        for i in 0..self.launcher.replicas {
            self.kill_replica(i);
        }
    }

    /// SIGKILLs one node's daemon and starts none (its pod gone, as while
    /// a DaemonSet replaces it): a test may then play another build on
    /// its BootcNode; [`Sim::restart_daemon`] starts this build again.
    pub async fn stop_daemon(&self, name: &str) -> Result<()> {
        let mut nodes = self.nodes.lock().await;
        kill_daemon(&mut nodes, name)?;
        Ok(())
    }

    /// SIGKILLs one node's daemon and starts a new one (a pod restart).
    pub async fn restart_daemon(&self, name: &str) -> Result<()> {
        let mut nodes = self.nodes.lock().await;
        let node = kill_daemon(&mut nodes, name)?;
        node.agent = Some(Agent::start(
            &self.cp,
            &node.host,
            &self.agent_options(name),
            self.logs.path(),
        )?);
        Ok(())
    }

    /// An unplanned reboot of node `name` now (a crash, or an orderly
    /// reboot nobody asked the operator for), with bootc's outcome for what
    /// is staged there. The kubelet player then sees it like any reboot:
    /// the node goes NotReady and its daemon restarts.
    pub async fn reboot_unplanned(&self, name: &str, kind: UnplannedReboot) -> Result<Reboot> {
        let nodes = self.nodes.lock().await;
        let node = nodes
            .iter()
            .find(|n| n.name == name)
            .context("no such node")?;
        Ok(node.host.layout.reboot_unplanned(kind)?)
    }

    /// Sets bootc's own update timer of node `name`'s host enabled or
    /// masked, as a person would by hand (its daemon reads it again while
    /// it reports one on).
    pub async fn leave_updater_on(&self, name: &str, on: bool) -> Result<()> {
        let nodes = self.nodes.lock().await;
        let node = nodes
            .iter()
            .find(|n| n.name == name)
            .context("no such node")?;
        Ok(node.host.leave_updater_on(on)?)
    }

    /// Layers a package on node `name`'s booted deployment by hand, or
    /// resets it ([`FakeHost::layer_locally`]).
    pub async fn layer_locally(&self, name: &str, layered: bool) -> Result<()> {
        let nodes = self.nodes.lock().await;
        let node = nodes
            .iter()
            .find(|n| n.name == name)
            .context("no such node")?;
        Ok(node.host.layer_locally(layered)?)
    }

    /// Removes ostree's finalization lock file on node `name`'s host (as
    /// `ostree admin lock-finalization --unlock`, or anything clearing the
    /// file, would): its staged deployment, if any, is then booted by the
    /// next orderly reboot.
    pub async fn unlock_staged(&self, name: &str) -> Result<()> {
        let nodes = self.nodes.lock().await;
        let node = nodes
            .iter()
            .find(|n| n.name == name)
            .context("no such node")?;
        Ok(node.host.unlock_staged()?)
    }

    /// Waits until node `name`'s host state (its deployments, as bootc
    /// keeps them) satisfies `cond`: read each time the fake bootc writes
    /// it, polled, as the simulator's kubelet reads reboots.
    pub async fn wait_host(
        &self,
        name: &str,
        what: &str,
        within: Duration,
        cond: impl Fn(&crate::fake_bootc::State) -> bool,
    ) -> Result<crate::fake_bootc::State> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let state = {
                let nodes = self.nodes.lock().await;
                let node = nodes
                    .iter()
                    .find(|n| n.name == name)
                    .context("no such node")?;
                node.host.state()
            };
            if cond(&state) {
                return Ok(state);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("node {name}'s host: not {what} within {within:?}: {state:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Which bootc node `name` runs.
    pub async fn bootc_version(&self, name: &str) -> Option<BootcVersion> {
        let nodes = self.nodes.lock().await;
        nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.host.layout.version())
    }

    /// Every reboot of each node so far, in order (the image booted after).
    pub async fn reboots(&self) -> BTreeMap<String, Vec<Reboot>> {
        let nodes = self.nodes.lock().await;
        nodes
            .iter()
            .map(|n| (n.name.clone(), n.host.layout.read_reboots()))
            .collect()
    }

    /// These nodes stay NotReady after their next reboot (their daemon comes
    /// back; the kubelet does not), as with an image that breaks the node.
    pub async fn break_after_reboot(&self, names: &[&str]) {
        let mut broken = self.broken.lock().await;
        broken.extend(names.iter().map(|n| (*n).to_owned()));
    }

    /// Starts the kubelet player: reboots recorded by the fake hosts make
    /// the node NotReady, kill its daemon, and bring both back after
    /// `reboot_time`.
    pub fn start_kubelet(&mut self) {
        let nodes = self.nodes.clone();
        let admin = self.admin.clone();
        let reboot_time = self.options.reboot_time;
        let cp_dir = self.cp.dir().to_owned();
        let logs = self.logs.path().to_owned();
        let broken = self.broken.clone();
        let bin_dir = self.options.agent_bin_dir.clone();
        let (launcher, controllers) = (self.launcher.clone(), self.controllers.clone());
        let task = tokio::spawn(async move {
            loop {
                // The fake hosts record reboots in a file: poll it (this is
                // the simulator's clock, not a test's synchronisation).
                tokio::time::sleep(Duration::from_millis(100)).await;
                let mut rebooted = Vec::new();
                {
                    let mut nodes = nodes.lock().await;
                    for (index, node) in nodes.iter_mut().enumerate() {
                        let n = node.host.layout.read_reboots().len();
                        if n > node.reboots_seen {
                            node.reboots_seen = n;
                            if let Some(mut a) = node.agent.take() {
                                a.kill();
                            }
                            let replica = replica_on(&launcher, index);
                            if let Some(c) = replica.and_then(|i| take_replica(&controllers, i)) {
                                stop(c);
                            }
                            rebooted.push((node.name.clone(), replica));
                        }
                    }
                }
                for (name, replica) in rebooted {
                    set_ready_patiently(&admin, &name, false).await;
                    let (launcher, controllers) = (launcher.clone(), controllers.clone());
                    let nodes = nodes.clone();
                    let admin = admin.clone();
                    let kubeconfig = crate::control_plane::node_kubeconfig_in(&cp_dir, &name);
                    let logs = logs.clone();
                    let stays_down = broken.lock().await.contains(&name);
                    let bin_dir = bin_dir.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(reboot_time).await;
                        let mut nodes = nodes.lock().await;
                        if let Some(node) = nodes.iter_mut().find(|n| n.name == name) {
                            let _ = &kubeconfig;
                            let options = AgentOptions {
                                bin_dir,
                                ..AgentOptions::new(&name)
                            };
                            match Agent::start_with_kubeconfig(
                                &kubeconfig,
                                &node.host,
                                &options,
                                &logs,
                            ) {
                                Ok(a) => node.agent = Some(a),
                                Err(e) => {
                                    tracing::error!(node = %name, error = %e, "restarting the daemon")
                                }
                            }
                        }
                        drop(nodes);
                        if let Some(i) = replica {
                            // The controller's pod starts again with its node.
                            restart_replica(&launcher, &controllers, i);
                        }
                        if !stays_down {
                            set_ready_patiently(&admin, &name, true).await;
                        }
                    });
                }
            }
        });
        self.kubelet = Some(task);
    }

    /// The pool, its BootcNodes and the Nodes, for display.
    pub async fn snapshot(&self) -> Result<(BootcNodePool, Vec<BootcNode>, Vec<api::Node>)> {
        let pool = Api::<BootcNodePool>::all(self.admin.clone())
            .get(POOL)
            .await?;
        let bns = Api::<BootcNode>::all(self.admin.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let nodes = Api::<api::Node>::all(self.admin.clone())
            .list(&ListParams::default().labels(POOL_LABEL))
            .await?
            .items;
        Ok((pool, bns, nodes))
    }

    /// Where the processes' logs are.
    pub fn log_dir(&self) -> PathBuf {
        self.logs.path().to_owned()
    }

    /// Each node's daemon log, by node.
    pub fn daemon_logs(&self) -> BTreeMap<String, String> {
        std::fs::read_dir(self.logs.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let node = name
                    .strip_prefix("daemon-")?
                    .strip_suffix(".log")?
                    .to_owned();
                Some((node, std::fs::read_to_string(e.path()).unwrap_or_default()))
            })
            .collect()
    }
}

/// The replica that runs on the node at `index`, with replicated controllers.
fn replica_on(launcher: &Launcher, index: usize) -> Option<usize> {
    (launcher.replicas > 1 && index < launcher.replicas).then_some(index)
}

type Replicas = Arc<std::sync::Mutex<Vec<Option<Child>>>>;

fn take_replica(controllers: &Replicas, i: usize) -> Option<Child> {
    controllers
        .lock()
        .ok()
        .and_then(|mut c| c.get_mut(i).and_then(Option::take))
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn restart_replica(launcher: &Launcher, controllers: &Replicas, i: usize) {
    let Ok(mut controllers) = controllers.lock() else {
        return;
    };
    if let Some(slot) = controllers.get_mut(i)
        && slot.is_none()
    {
        match launcher.spawn(i) {
            Ok(c) => *slot = Some(c),
            Err(e) => tracing::error!(replica = i, error = %e, "restarting a controller replica"),
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(k) = self.kubelet.take() {
            k.abort();
        }
        self.kill_controller();
    }
}
