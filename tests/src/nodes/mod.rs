//! A cluster of real nodes on one machine without virtualisation: each node
//! is a container (`systemd-nspawn`) whose PID 1 is a real systemd running
//! containerd, runc and a real kubelet of the tested release; its reboot is a
//! real `systemctl reboot`, after which its supervisor boots it again from the
//! same disk, with a new boot id. Beside them: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler, and a registry, all inside
//! network namespaces this process creates ([`net`]).
//!
//! Only bootc is faked: each node's `/usr/bin/bootc` is the fake bootc in its
//! real-host mode (`fake_bootc::real_host`), with its deployments on the
//! node's disk.
//!
//! Set-up: [`ClusterNet::enter`] first, on the thread that then builds the
//! async runtime (every thread and process of the test must be inside the
//! cluster's network), then [`NodeCluster::start`]; [`on_real_nodes`] does
//! both. [`pool`] installs the operator and a pool. Dropping the cluster halts
//! every node in order and stops everything it started; a killed test leaves
//! nothing running (every process dies with it) and no mount (each node's
//! mounts live in its supervisor's mount namespace).

pub mod images;
pub mod layer;
pub mod net;
pub mod operator;
pub mod pool;
pub mod supervisor;
pub mod walkthrough;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use api::Node;
use kube::api::Api;

pub use net::{BRIDGE_ADDRESS, ClusterNet, Netns};
use supervisor::NodeSpec;

use crate::control_plane::{ControlPlane, Options};
use crate::fake_bootc::{BootcVersion, Deployment};
use crate::registry::{TestImage, TestRegistry};

/// The registry's user and password.
const REGISTRY_USER: &str = "bootc";
const REGISTRY_PASSWORD: &str = "node-cluster";
/// The OS image repository the nodes boot from.
pub const OS_REPO: &str = "acme/os";
/// The tag (and content marker) of the OS image every node boots first.
pub const V1_MARKER: &str = "v1";

/// The registry a disconnected cluster cannot reach: port 1 of the
/// bridge's address, where nothing listens (the cluster's network is this
/// test's own), so every connection is refused. A pool that names
/// [`OS_REPO`] there is served by its mirror, the cluster's registry, on
/// hosts and controller alike ([`registries_conf`]).
pub fn source_registry() -> String {
    format!("{BRIDGE_ADDRESS}:1")
}

/// The registries.conf (containers-registries.conf(5) v2) the nodes' image
/// carries ([`layer::HOSTS_REGISTRIES_CONF`]) and the operator's install
/// gives the controller (its ConfigMap `bootc-registries`): the OS
/// repository's namespace under [`source_registry`] is mirrored by the
/// same namespace in the cluster's registry at `mirror`. Pools that name the
/// registry itself match no table.
pub fn registries_conf(mirror: &str) -> String {
    let source = source_registry();
    let namespace = OS_REPO.split('/').next().unwrap_or(OS_REPO);
    format!(
        "[[registry]]\nprefix = \"{source}/{namespace}\"\nlocation = \"{source}/{namespace}\"\n\n[[registry.mirror]]\nlocation = \"{mirror}/{namespace}\"\n"
    )
}

/// How long nodes may take to register Ready after their first boot.
const NODES_READY: Duration = Duration::from_secs(120);

/// What to start.
#[derive(Clone, Debug)]
pub struct NodeClusterOptions {
    pub nodes: usize,
    /// The bootc each node plays, in turn.
    pub bootc_versions: Vec<BootcVersion>,
}

impl Default for NodeClusterOptions {
    fn default() -> Self {
        NodeClusterOptions {
            nodes: 3,
            bootc_versions: vec![BootcVersion::V1_16],
        }
    }
}

/// What the node containers are built from (cached per machine by
/// `tests/scripts/build-node-rootfs.sh`).
#[derive(Clone, Debug)]
struct NodeInputs {
    rootfs: PathBuf,
    nspawn: PathBuf,
}

fn node_inputs() -> Result<NodeInputs> {
    let script = crate::repo_root().join("tests/scripts/build-node-rootfs.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed", script.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).map(|v| PathBuf::from(v.trim())))
            .with_context(|| format!("{} printed no `{key}` line", script.display()))
    };
    Ok(NodeInputs {
        rootfs: field("rootfs ")?,
        nspawn: field("nspawn ")?,
    })
}

/// One running node container.
#[derive(Debug)]
pub struct RealNode {
    pub name: String,
    pub spec: NodeSpec,
    supervisor: Option<Child>,
    _netns: Netns,
}

impl RealNode {
    /// The node's disk as its last boot left it (its upper directory: what
    /// the node wrote, e.g. `fake-bootc/state.json`).
    pub fn disk(&self) -> PathBuf {
        self.spec.upper()
    }

    /// The fake bootc's files on the node's disk.
    pub fn bootc(&self) -> crate::fake_bootc::Layout {
        crate::fake_bootc::Layout::new(self.disk())
    }

    /// The boots so far (a line when each starts and when it ends).
    pub fn boots(&self) -> Vec<supervisor::BootRecord> {
        supervisor::read_boots(&self.spec)
    }

    /// How many times the node has booted.
    pub fn boot_count(&self) -> u32 {
        self.boots().last().map_or(0, |b| b.boot)
    }

    /// nspawn's pid for the running boot.
    pub fn nspawn_pid(&self) -> Result<i32> {
        let text = std::fs::read_to_string(self.spec.nspawn_pid_file())?;
        Ok(text.trim().parse()?)
    }

    /// The node's PID 1 (its systemd), seen from here: nspawn's child.
    pub fn init_pid(&self) -> Result<i32> {
        let nspawn = self.nspawn_pid()?;
        let children = std::fs::read_to_string(format!("/proc/{nspawn}/task/{nspawn}/children"))?;
        children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("nspawn {nspawn} of {} has no child", self.name))
    }

    /// A command run inside the node (its namespaces: `nsenter -t <init> -a`).
    pub fn exec(&self, args: &[&str]) -> Result<Command> {
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &self.init_pid()?.to_string(), "-a", "--"])
            .args(args);
        Ok(cmd)
    }

    /// The processes named `comm` running in this node (any boot), seen
    /// from this machine: their pids here.
    pub fn processes(&self, comm: &str) -> Vec<i32> {
        let marker = format!("/bootc-node-{}/", self.name);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let read = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}"));
                read("comm").is_ok_and(|c| c.trim() == comm)
                    && read("cgroup").is_ok_and(|c| c.contains(&marker))
            })
            .collect()
    }

    /// The power button, pressed while the node runs: when this boot ends
    /// (its reboot, a crash), the node stays off until [`RealNode::power_on`].
    pub fn power_off_at_next_boot(&self) -> Result<()> {
        Ok(std::fs::write(self.spec.stop_file(), "")?)
    }

    /// Takes back [`RealNode::power_off_at_next_boot`] before the boot ends.
    pub fn keep_power_on(&self) -> Result<()> {
        match std::fs::remove_file(self.spec.stop_file()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Whether the node is off: its supervisor has ended.
    pub fn is_off(&mut self) -> bool {
        self.supervisor
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// Boots a node that is off again, from its disk as it left it (a new
    /// supervisor; its boots go on counting).
    pub fn power_on(&mut self) -> Result<()> {
        if !self.is_off() {
            bail!("{} is not off", self.name);
        }
        if let Some(mut old) = self.supervisor.take() {
            old.wait()?;
        }
        self.keep_power_on()?;
        self.supervisor = Some(spawn_supervisor(&self.spec.dir)?);
        Ok(())
    }

    /// Halts the node in order and waits for its supervisor to end.
    pub fn stop(&mut self) {
        let _ = std::fs::write(self.spec.stop_file(), "");
        if let Some(mut child) = self.supervisor.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let _ = child.wait();
        }
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The running cluster.
pub struct NodeCluster {
    pub cp: ControlPlane,
    pub registry: TestRegistry,
    pub nodes: Vec<RealNode>,
    /// `v1`'s pinned reference: what every node boots first.
    pub os_v1: String,
    dir: tempfile::TempDir,
    // Last: the network goes after everything in it.
    net: ClusterNet,
}

impl std::fmt::Debug for NodeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCluster")
            .field("dir", &self.dir.path())
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl NodeCluster {
    /// Starts the control plane, the registry (with the tools image and the
    /// OS image `v1` pushed), and `options.nodes` nodes booting `v1`; returns
    /// once every node is Ready.
    pub async fn start(net: ClusterNet, options: &NodeClusterOptions) -> Result<NodeCluster> {
        let inputs = node_inputs()?;
        let cp = ControlPlane::start_with(Options {
            serve_nodes_at: Some(BRIDGE_ADDRESS.into()),
            ..Options::default()
        })
        .await?;
        let registry =
            TestRegistry::start_at(REGISTRY_USER, REGISTRY_PASSWORD, BRIDGE_ADDRESS).await?;
        let dir = tempfile::Builder::new().prefix("bootc-nodes-").tempdir()?;
        let tools = dir.path().join("tools-oci");
        images::build_tools(&tools)?;
        images::push(&tools, "1", &registry, images::TOOLS)?;
        let os_v1 = push_os(&registry, "1.0", V1_MARKER).await?;
        let layer = dir.path().join("layer");
        let (user, password) = registry.login();
        layer::write_shared(
            &layer,
            &layer::LayerInputs {
                registry: &registry.host(),
                registry_ca: &registry.ca_pem()?,
                registry_user: user,
                registry_password: password,
                pause_image: &format!("{}/{}", registry.host(), images::TOOLS),
                cluster_ca: &std::fs::read(cp.ca_file())?,
                registries_conf: &registries_conf(&registry.host()),
            },
        )?;
        let mut cluster = NodeCluster {
            cp,
            registry,
            nodes: Vec::new(),
            os_v1,
            dir,
            net,
        };
        for index in 1..=options.nodes {
            let bootc = options.bootc_versions[(index - 1) % options.bootc_versions.len().max(1)];
            let node = cluster.start_node(index, bootc, &inputs, &layer)?;
            cluster.nodes.push(node);
        }
        cluster.wait_ready().await?;
        Ok(cluster)
    }

    fn start_node(
        &self,
        index: usize,
        bootc: BootcVersion,
        inputs: &NodeInputs,
        layer: &Path,
    ) -> Result<RealNode> {
        let name = format!("node-{index}");
        let node_dir = self.dir.path().join(&name);
        let pki = node_dir.join("pki");
        std::fs::create_dir_all(&pki)?;
        std::fs::copy(self.cp.dir().join("ca.crt"), pki.join("ca.crt"))?;
        std::fs::copy(self.cp.dir().join("ca.key"), pki.join("ca.key"))?;
        crate::pki::client_leaf(
            &pki,
            "kubelet",
            &format!("system:node:{name}"),
            "system:nodes",
        )?;
        let netns = self.net.add_node(index, self.cp.port())?;
        // Installed from v1's tag, as `bootc install` leaves a host.
        let digest = api::image_ref::digest_of(&self.os_v1).unwrap_or_default();
        let tag = format!("{}/{OS_REPO}:v1", self.registry.host());
        let mut booted = Deployment::installed(&tag, digest);
        booted.version = Some("1.0".into());
        layer::write_node(
            &node_dir.join("upper"),
            &layer::NodeInputs {
                name: &name,
                index,
                apiserver_port: self.cp.port(),
                cert: &std::fs::read(pki.join("kubelet.crt"))?,
                key: &std::fs::read(pki.join("kubelet.key"))?,
                booted,
                bootc,
            },
        )?;
        std::fs::remove_file(pki.join("ca.key"))?;
        let spec = NodeSpec {
            name: name.clone(),
            dir: node_dir.clone(),
            lower: vec![layer.to_owned(), inputs.rootfs.clone()],
            netns: netns.path(),
            nspawn: inputs.nspawn.clone(),
            binds_ro: vec![
                (crate::binaries::kubelet()?, layer::KUBELET_IN_NODE.into()),
                (built("fake-bootc")?, layer::FAKE_BOOTC_IN_NODE.into()),
            ],
        };
        std::fs::write(node_dir.join(SPEC_FILE), serde_json::to_vec_pretty(&spec)?)?;
        let supervisor = spawn_supervisor(&node_dir)?;
        Ok(RealNode {
            name,
            spec,
            supervisor: Some(supervisor),
            _netns: netns,
        })
    }

    /// Waits until every node's kubelet reports it Ready.
    pub async fn wait_ready(&self) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.cp.admin().await?);
        for node in &self.nodes {
            let found = crate::k8s::wait_for(
                nodes.clone(),
                &node.name,
                NODES_READY,
                "the node Ready",
                |n: Option<&Node>| n.is_some_and(api::node_health::is_ready),
            )
            .await;
            if let Err(e) = found {
                bail!("{e}\n{}", self.diagnostics(node));
            }
        }
        Ok(())
    }

    /// The node's supervisor log, console tail and boots, for failures.
    pub fn diagnostics(&self, node: &RealNode) -> String {
        let tail = |f: &str| crate::control_plane::tail(&node.spec.dir.join(f));
        format!(
            "{}: boots {:?}\nsupervisor:\n{}\nconsole:\n{}",
            node.name,
            node.boots(),
            tail("supervisor.log"),
            tail("console.log")
        )
    }

    /// The cluster's directory (logs, node disks).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The cluster network's holder pid (`nsenter --net=/proc/<pid>/ns/net`).
    pub fn net_pid(&self) -> u32 {
        self.net.pid()
    }
}

impl Drop for NodeCluster {
    fn drop(&mut self) {
        // Halt every node at once: SIGTERM to each supervisor, then wait.
        for node in &self.nodes {
            let _ = std::fs::write(node.spec.stop_file(), "");
            if let Some(child) = &node.supervisor
                && let Ok(pid) = i32::try_from(child.id())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        for node in &mut self.nodes {
            node.stop();
        }
    }
}

/// The node's spec, in its directory, for its supervisor.
const SPEC_FILE: &str = "spec.json";

/// Starts the supervisor of the node whose directory is `node_dir` (its
/// log appended to `supervisor.log`).
fn spawn_supervisor(node_dir: &Path) -> Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(node_dir.join("supervisor.log"))?;
    // SIGTERM when the thread that starts it ends (with its process, or
    // the benchmark's thread of its own): the supervisor halts its node.
    Command::new("setpriv")
        .args(["--pdeathsig", "TERM", "--"])
        .arg(built("bootc-node")?)
        .arg(node_dir.join(SPEC_FILE))
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting the node's supervisor")
}

/// Runs `body` on a fresh cluster (`options`) and returns what it returns.
/// The calling thread joins the cluster's network namespace for good (and
/// every thread and process it starts afterwards): call it from a thread
/// that started none yet, as a test's, or from one of its own.
pub fn on_real_nodes<T, F, Fut>(options: &NodeClusterOptions, body: F) -> Result<T>
where
    F: FnOnce(NodeCluster) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let net = ClusterNet::enter()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let cluster = NodeCluster::start(net, options).await?;
        Ok(body(cluster).await)
    })
}

/// Pushes an OS image of `version` to [`OS_REPO`] with a unique marker;
/// returns its pinned reference.
pub async fn push_os(registry: &TestRegistry, version: &str, marker: &str) -> Result<String> {
    let arch = crate::fake_bootc::Deployment::of("x@sha256:0").architecture;
    let digest = registry
        .push_image(
            OS_REPO,
            marker,
            &TestImage {
                architecture: &arch,
                version,
                marker,
            },
        )
        .await?;
    Ok(format!("{}/{OS_REPO}@{digest}", registry.host()))
}

/// A workspace binary built beside the running test's, present.
fn built(name: &str) -> Result<PathBuf> {
    let path = crate::fake_host::bin(name);
    if !path.exists() {
        bail!(
            "{} not found: build it with `cargo build -p tests --bins`",
            path.display()
        );
    }
    Ok(path)
}
