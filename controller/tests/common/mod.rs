//! Shared set-up for the controller's integration tests: a control plane
//! with the CRDs, the operator namespace and the controller's RBAC, the real
//! `bootc-controller` binary, and small builders.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use api::test_support::{NodeBuilder, PoolBuilder};
use api::{BootcNode, BootcNodePool};
// The shared vocabulary, for every test file.
use api::Node;
pub use api::{ConditionType, Reason, event_reasons};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::json;
use tests::daemon_player::{DaemonPlayer, PlayerOptions};
use tests::recorder::Recorder;
use tests::{ControlPlane, Identity, k8s};

pub const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
pub const NEW: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
pub const REPO: &str = "quay.io/acme/os";
pub const WAIT: Duration = Duration::from_secs(60);

pub fn image(d: &str) -> String {
    format!("{REPO}@{d}")
}

pub struct Env {
    pub cp: ControlPlane,
    pub admin: Client,
}

/// A control plane with CRDs, the `bootc-operator` namespace and RBAC for
/// the controller's ServiceAccount.
pub async fn env() -> Env {
    setup(ControlPlane::start().await.unwrap()).await
}

/// [`env`] with a control plane started with `options` (an audit log).
pub async fn env_with(options: tests::control_plane::Options) -> Env {
    setup(ControlPlane::start_with(options).await.unwrap()).await
}

async fn setup(cp: ControlPlane) -> Env {
    let admin = cp.admin().await.unwrap();
    k8s::install_crds(&admin).await.unwrap();
    let ns: Api<Namespace> = Api::all(admin.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "bootc-operator"}})).unwrap(),
    )
    .await
    .unwrap();
    // The RBAC a user installs from deploy/: the tests prove it is enough.
    let text = include_str!("../../../deploy/rbac/controller.yaml");
    let pp = PostParams::default();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        match v["kind"].as_str().unwrap() {
            "ClusterRole" => {
                Api::<ClusterRole>::all(admin.clone())
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .unwrap();
            }
            "ClusterRoleBinding" => {
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .unwrap();
            }
            "Role" => {
                let ns = v["metadata"]["namespace"].as_str().unwrap().to_owned();
                Api::<Role>::namespaced(admin.clone(), &ns)
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .unwrap();
            }
            "RoleBinding" => {
                let ns = v["metadata"]["namespace"].as_str().unwrap().to_owned();
                Api::<RoleBinding>::namespaced(admin.clone(), &ns)
                    .create(&pp, &serde_json::from_value(v).unwrap())
                    .await
                    .unwrap();
            }
            "ServiceAccount" => {}
            other => panic!("unexpected kind {other}"),
        }
    }
    Env { cp, admin }
}

/// The real controller binary, run as the controller's ServiceAccount.
pub struct ControllerProc {
    child: tokio::process::Child,
    pub log: PathBuf,
}

impl ControllerProc {
    pub fn spawn(env: &Env, name: &str, extra: &[&str]) -> Self {
        Self::spawn_with_kubeconfig(env, &env.cp.kubeconfig(Identity::Controller), name, extra)
    }

    /// Like [`spawn`](Self::spawn), reaching the API server through
    /// `kubeconfig` (a proxy in front of it).
    pub fn spawn_with_kubeconfig(
        env: &Env,
        kubeconfig: &std::path::Path,
        name: &str,
        extra: &[&str],
    ) -> Self {
        let log = env.cp.dir().join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let err = out.try_clone().unwrap();
        let mut args: Vec<&str> = vec!["--identity", name];
        if !extra.contains(&"--health-addr") {
            args.extend(["--health-addr", ""]);
        }
        if !extra.contains(&"--metrics-addr") {
            args.extend(["--metrics-addr", ""]);
        }
        // The images of these tests exist in no registry: digest references
        // are taken unchecked (by the tests' build of the controller, the
        // shipped one has no such flag), except where a test brings its
        // registry.
        let registry = ["--registry-ca-file", "--registry-ca-dir"];
        let binary = if extra.iter().any(|a| registry.contains(a)) {
            env!("CARGO_BIN_EXE_bootc-controller")
        } else {
            args.push("--no-registry");
            env!("CARGO_BIN_EXE_bootc-controller-test")
        };
        let child = tokio::process::Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(binary)
            .args(args)
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,controller=debug")
            .env_remove("POD_NAME")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        ControllerProc { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// SIGTERM, and wait for a clean exit.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("controller exits after SIGTERM")
            .unwrap()
    }

    /// Waits (at most [`WAIT`]) for the process to exit by itself.
    pub async fn wait(&mut self) -> std::process::ExitStatus {
        match tokio::time::timeout(WAIT, self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!(
                "the controller did not exit by itself within {WAIT:?}; its log:\n{}",
                self.log_text()
            ),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (at most [`WAIT`]) until the controller has logged `needle`.
    pub async fn wait_log(&self, needle: &str) {
        let deadline = std::time::Instant::now() + WAIT;
        while !self.log_text().contains(needle) {
            assert!(
                std::time::Instant::now() < deadline,
                "the controller never logged {needle:?}; its log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// The labels of the nodes [`workers_pool`] selects.
pub const WORKERS: &[(&str, &str)] = &[("pool", "workers")];

/// The preamble most tests share, in its order: a control plane, the Nodes
/// (Ready; some cordoned by the admin), a [`Recorder`] from then on, the
/// daemons played ([`DaemonPlayer`]; every node boots `image(OLD)` unless
/// told otherwise), the real controller, then the pools.
pub struct Setup {
    nodes: Vec<(String, Vec<(String, String)>)>,
    cordoned: BTreeSet<String>,
    player: PlayerOptions,
    controller: (String, Vec<String>),
    pools: Vec<BootcNodePool>,
}

/// What [`Setup::start`] leaves running. Bind every field by name: a player
/// or controller bound to `_` (or left to `..`) stops at once.
pub struct Cluster {
    pub env: Env,
    pub recorder: Recorder,
    pub player: DaemonPlayer,
    pub ctl: ControllerProc,
}

/// No nodes, no pools, the controller `ctl` without extra arguments.
impl Default for Setup {
    fn default() -> Self {
        Setup {
            nodes: Vec::new(),
            cordoned: BTreeSet::new(),
            player: PlayerOptions {
                initial_image: image(OLD),
                ..PlayerOptions::default()
            },
            controller: ("ctl".to_owned(), Vec::new()),
            pools: Vec::new(),
        }
    }
}

impl Setup {
    /// Nodes labelled [`WORKERS`].
    pub fn workers(names: &[&str]) -> Self {
        names
            .iter()
            .fold(Self::default(), |setup, name| setup.node(name, WORKERS))
    }

    pub fn node(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.nodes.push((name.to_owned(), labels));
        self
    }

    /// These nodes are created cordoned (by the admin).
    pub fn cordoned(mut self, names: &[&str]) -> Self {
        self.cordoned.extend(names.iter().map(|n| (*n).to_owned()));
        self
    }

    /// The image every node boots before the test (default `image(OLD)`).
    pub fn initial_image(mut self, image: String) -> Self {
        self.player.initial_image = image;
        self
    }

    /// These nodes' daemons ignore the approval to boot (they stay Staged).
    pub fn ignore_approval(mut self, names: &[&str]) -> Self {
        self.player.ignore_approval = set(names);
        self
    }

    /// These nodes' reboots come back on the old image (reported Degraded).
    pub fn fail_after_reboot(mut self, names: &[&str]) -> Self {
        self.player.fail_after_reboot = set(names);
        self
    }

    /// The controller's `--identity` and extra arguments (see
    /// [`ControllerProc::spawn`]).
    pub fn controller(mut self, name: &str, args: &[&str]) -> Self {
        let args = args.iter().map(|a| (*a).to_owned()).collect();
        self.controller = (name.to_owned(), args);
        self
    }

    /// A pool created once the controller runs (in the order given). A test
    /// that prepares more first (pods, budgets) creates its pool itself.
    pub fn pool(mut self, pool: BootcNodePool) -> Self {
        self.pools.push(pool);
        self
    }

    /// On a fresh control plane ([`env`]).
    pub async fn start(self) -> Cluster {
        self.start_in(env().await).await
    }

    /// On `env`, for a test that prepares it first.
    pub async fn start_in(self, env: Env) -> Cluster {
        for (name, labels) in &self.nodes {
            let labels: Vec<(&str, &str)> = labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            create_node(&env.admin, name, &labels, self.cordoned.contains(name)).await;
        }
        let recorder = Recorder::start(&env.cp).await.unwrap();
        let player = DaemonPlayer::start(env.admin.clone(), self.player);
        let (name, args) = &self.controller;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ctl = ControllerProc::spawn(&env, name, &args);
        for pool in &self.pools {
            create_pool(&env.admin, pool).await;
        }
        Cluster {
            env,
            recorder,
            player,
            ctl,
        }
    }
}

/// A minimal HTTP GET; retries the connection while the server starts.
pub async fn http_get(addr: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let deadline = std::time::Instant::now() + WAIT;
    let mut sock = loop {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => break s,
            Err(e) if std::time::Instant::now() > deadline => panic!("connect {addr}: {e}"),
            // No event tells when the process has bound its port.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    };
    sock.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    sock.read_to_string(&mut out).await.unwrap();
    out.split_whitespace().nth(1).unwrap().parse().unwrap()
}

pub async fn create_node(admin: &Client, name: &str, labels: &[(&str, &str)], cordoned: bool) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let node = labels
        .iter()
        .fold(NodeBuilder::new(name), |n, (k, v)| n.label(k, v))
        .unschedulable(cordoned)
        .build();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    tests::daemon_player::set_ready(admin, name, true)
        .await
        .unwrap();
}

pub fn pool(
    name: &str,
    selector: serde_json::Value,
    image: &str,
    max: serde_json::Value,
) -> BootcNodePool {
    let labels: BTreeMap<String, String> = serde_json::from_value(selector).unwrap();
    labels
        .iter()
        .fold(PoolBuilder::new(name), |p, (k, v)| p.selects(k, v))
        .image(image)
        .max_unavailable(serde_json::from_value(max).unwrap())
        .build()
}

/// The pool most tests use: nodes labelled `pool=workers`, image NEW.
pub fn workers_pool(max_unavailable: i32) -> BootcNodePool {
    pool(
        "workers",
        json!({"pool": "workers"}),
        &image(NEW),
        json!(max_unavailable),
    )
}

pub async fn create_pool(admin: &Client, p: &BootcNodePool) {
    Api::<BootcNodePool>::all(admin.clone())
        .create(&PostParams::default(), p)
        .await
        .unwrap();
}

pub async fn patch_pool(admin: &Client, name: &str, patch: serde_json::Value) {
    Api::<BootcNodePool>::all(admin.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

pub use tests::k8s::condition;

/// Waits for the pool to satisfy `cond`.
pub async fn wait_pool(
    admin: &Client,
    name: &str,
    what: &str,
    cond: impl Fn(&BootcNodePool) -> bool + Send + 'static,
) -> BootcNodePool {
    k8s::wait_for(
        Api::<BootcNodePool>::all(admin.clone()),
        name,
        WAIT,
        what,
        move |p| p.is_some_and(&cond),
    )
    .await
    .unwrap()
    .unwrap()
}

/// Waits until every node of the pool boots `digest`, the pool reports it
/// as deployed, and every slot is released (a node can run the target while
/// still holding its slot, waiting to be Ready).
pub async fn wait_rolled(admin: &Client, pool: &str, digest: &str, count: i32) -> BootcNodePool {
    let d = digest.to_owned();
    wait_pool(admin, pool, "rollout complete", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.deployed_digest.as_deref() == Some(d.as_str())
                && s.updated_count == count
                && s.node_count == count
                && condition(p, ConditionType::UpToDate).is_some_and(|c| c.1 == Reason::AllUpdated)
        })
    })
    .await;
    let members: Vec<String> = Api::<BootcNode>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|b| {
            b.owner_references()
                .iter()
                .any(|o| o.kind == "BootcNodePool" && o.name == pool)
        })
        .map(|b| b.name_any())
        .collect();
    for name in members {
        k8s::wait_for(
            Api::<Node>::all(admin.clone()),
            &name,
            WAIT,
            "slot released",
            |n| n.is_none_or(|n| api::node_health::disrupted_by(n).is_none()),
        )
        .await
        .unwrap();
    }
    // The status names nodes in slots; its last change (count-only, so
    // coalesced for up to 5 s) lands after the last release.
    wait_pool(admin, pool, "status without reboot slots", |p| {
        condition(p, ConditionType::UpToDate)
            .is_some_and(|c| c.1 == Reason::AllUpdated && !c.2.contains("in reboot slots"))
    })
    .await
}

pub async fn bootc_node(admin: &Client, name: &str) -> Option<BootcNode> {
    Api::<BootcNode>::all(admin.clone())
        .get_opt(name)
        .await
        .unwrap()
}

pub async fn node(admin: &Client, name: &str) -> Node {
    Api::<Node>::all(admin.clone()).get(name).await.unwrap()
}

pub use api::node_health::{disrupted_by, is_cordoned};

pub fn is_managed(n: &Node) -> bool {
    n.labels().contains_key(api::labels::MANAGED_LABEL)
}

pub fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// Creates a plain pod bound to `node`.
pub async fn create_pod(
    admin: &Client,
    ns: &str,
    name: &str,
    node: &str,
    labels: serde_json::Value,
) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "example.invalid/app:1"}]},
    }))
    .unwrap();
    k8s::create_running_pod(&pods, &pod).await.unwrap();
}

pub async fn create_namespace(admin: &Client, name: &str) {
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap();
}

/// Waits for an event in the operator namespace with `reason` whose note
/// contains `text`.
pub async fn wait_event(
    admin: &Client,
    reason: &str,
    text: &str,
) -> k8s_openapi::api::events::v1::Event {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(admin.clone(), api::labels::CLUSTER_EVENTS_NAMESPACE);
    let mut s = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let fut = async {
        while let Some(Ok(e)) = s.next().await {
            if e.reason.as_deref() == Some(reason) && e.note.as_deref().unwrap_or("").contains(text)
            {
                return e;
            }
        }
        panic!("event stream ended");
    };
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("no {reason} event mentioning {text:?}"))
}

/// Plays the kubelet for terminating pods in `ns` whose names are in
/// `names`: deletes them with grace 0 once they are marked for deletion.
pub fn kubelet_deletes(
    admin: &Client,
    ns: &str,
    names: BTreeSet<String>,
) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use kube::api::DeleteParams;
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<Pod> = Api::namespaced(admin.clone(), ns);
    tokio::spawn(async move {
        let mut s = watcher(api.clone(), watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(p)) = s.next().await {
            if p.metadata.deletion_timestamp.is_some() && names.contains(&p.name_any()) {
                let _ = api
                    .delete(&p.name_any(), &DeleteParams::default().grace_period(0))
                    .await;
            }
        }
    })
}

/// Like [`env`], with the API server's audit log on.
pub async fn env_with_audit() -> Env {
    let cp = ControlPlane::start_with(tests::control_plane::Options {
        audit: true,
        ..Default::default()
    })
    .await
    .unwrap();
    setup(cp).await
}

/// The controller's writes to pools, BootcNodes and Nodes in the audit log
/// (events and leases excluded).
pub fn controller_write_lines(env: &Env) -> Vec<String> {
    env.cp
        .audit_events()
        .into_iter()
        .filter(|v| {
            v["stage"] == "ResponseComplete"
                && v["user"]["username"] == tests::control_plane::CONTROLLER_USER
                && matches!(
                    v["verb"].as_str(),
                    Some("create" | "update" | "patch" | "delete")
                )
                && matches!(
                    v["objectRef"]["resource"].as_str(),
                    Some("bootcnodepools" | "bootcnodes" | "nodes")
                )
        })
        .map(|v| {
            format!(
                "{} {} {} {}",
                v["verb"],
                v["objectRef"]["resource"],
                v["objectRef"]["name"],
                v["objectRef"]["subresource"]
            )
        })
        .collect()
}

pub fn controller_writes(env: &Env) -> usize {
    controller_write_lines(env).len()
}

/// The controller's writes (as [`controller_write_lines`]) logged after the
/// last spec patch of a pool by the admin. The audit log is written after the
/// response, so a test that saw a write's effect may read the log before its
/// line: this polls the file (no event to await) until `at_least` are there.
pub async fn writes_after_admin_patch(env: &Env, at_least: usize) -> Vec<String> {
    writes_after_admin_patches(env, at_least, 0).await
}

/// As [`writes_after_admin_patch`], counted from the admin's `back`-th last
/// pool patch (0: the last) up to the next one.
pub async fn writes_after_admin_patches(env: &Env, at_least: usize, back: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut entries: Vec<serde_json::Value> = env
            .cp
            .audit_events()
            .into_iter()
            .filter(|v| v["stage"] == "ResponseComplete")
            .collect();
        // Lines are logged when responses complete, which under load can be
        // out of causal order: order by when the server received them.
        entries.sort_by(|a, b| {
            a["requestReceivedTimestamp"]
                .as_str()
                .cmp(&b["requestReceivedTimestamp"].as_str())
        });
        let admin_patches: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, v)| {
                v["user"]["username"] != tests::control_plane::CONTROLLER_USER
                    && v["verb"] == "patch"
                    && v["objectRef"]["resource"] == "bootcnodepools"
                    && v["objectRef"]["subresource"].is_null()
            })
            .map(|(i, _)| i)
            .collect();
        let k = admin_patches.len();
        let start = if k > back {
            admin_patches[k - 1 - back] + 1
        } else {
            0
        };
        let end = if back > 0 && k >= back {
            admin_patches[k - back]
        } else {
            entries.len()
        };
        let lines: Vec<String> = entries[start..end.max(start)]
            .iter()
            .filter(|v| {
                v["user"]["username"] == tests::control_plane::CONTROLLER_USER
                    && matches!(
                        v["verb"].as_str(),
                        Some("create" | "update" | "patch" | "delete")
                    )
                    && matches!(
                        v["objectRef"]["resource"].as_str(),
                        Some("bootcnodepools" | "bootcnodes" | "nodes")
                    )
            })
            .map(|v| {
                format!(
                    "{} {} {} {}",
                    v["verb"],
                    v["objectRef"]["resource"],
                    v["objectRef"]["name"],
                    v["objectRef"]["subresource"]
                )
            })
            .collect();
        if lines.len() >= at_least || std::time::Instant::now() > deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
