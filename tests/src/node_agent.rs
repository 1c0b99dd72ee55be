//! A whole node agent for tests: a fake bootc host plus the real
//! `bootc-daemon` (with its real `bootc-helper`) watching its BootcNode on a
//! real API server as the daemon's ServiceAccount.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{Api, PostParams};

use crate::control_plane::ControlPlane;
use crate::fake_host::{FakeHost, bin};

/// Applies the namespace and the daemon's RBAC from deploy/.
pub fn install_daemon_rbac(cp: &ControlPlane) -> Result<()> {
    let deploy = crate::repo_root().join("deploy");
    for file in [
        "namespace.yaml",
        "rbac/daemon.yaml",
        "admission/daemon-own-node-only.yaml",
    ] {
        let out = cp
            .kubectl()
            .arg("apply")
            .arg("-f")
            .arg(deploy.join(file))
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "kubectl apply {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Lets the daemons GET these pull secrets of the operator's namespace, as
/// the controller does for the Secrets its pools name (tests without a
/// controller). Needs [`install_daemon_rbac`] first (the Role).
pub async fn grant_pull_secrets(cp: &ControlPlane, names: &[&str]) -> Result<()> {
    let namespace = api::labels::OPERATOR_NAMESPACE;
    let refs: Vec<api::SecretReference> = names
        .iter()
        .map(|n| api::SecretReference {
            name: (*n).to_owned(),
            namespace: namespace.to_owned(),
        })
        .collect();
    // Tests without a controller have no pool: every Secret given is granted.
    let refs = refs.iter().map(|r| ("", r));
    let rules = controller::actions::daemon_secrets::rules(namespace, refs, |_, _| true);
    controller::actions::daemon_secrets::apply(&cp.admin().await?, namespace, &rules).await?;
    Ok(())
}

/// Creates a BootcNode as the controller would.
pub async fn create_bootc_node(
    client: &kube::Client,
    name: &str,
    spec: api::BootcNodeSpec,
) -> Result<api::BootcNode> {
    let api: Api<api::BootcNode> = Api::all(client.clone());
    let node = api::BootcNode::new(name, spec);
    Ok(api.create(&PostParams::default(), &node).await?)
}

/// Options for one daemon.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    pub node_name: String,
    pub poll_interval: Duration,
    /// `--host-updater-recheck-secs`: short, so that a test masking a
    /// host's updater sees it taken in soon.
    pub updater_recheck: Duration,
    pub apply_window: Duration,
    /// Where bootc-daemon and bootc-helper are (default: next to the tests'
    /// own binaries); benchmarks point it at release builds.
    pub bin_dir: Option<PathBuf>,
    /// The uid and gid the daemon starts as, with the capabilities a
    /// container runtime gives a privileged container's process of that
    /// user (see [`crate::image::container_user`]); None: the test's own.
    /// Honoured by [`Agent::start`] and [`Agent::start_with_kubeconfig`].
    pub user: Option<(u32, u32)>,
}

impl AgentOptions {
    pub fn new(node_name: &str) -> Self {
        AgentOptions {
            node_name: node_name.to_owned(),
            poll_interval: Duration::from_secs(300),
            updater_recheck: Duration::from_secs(1),
            apply_window: Duration::from_millis(300),
            bin_dir: None,
            user: None,
        }
    }
}

/// A running `bootc-daemon`. Killed with SIGKILL on drop (like a reboot).
#[derive(Debug)]
pub struct Agent {
    pub child: Child,
    /// The node's daemon log, shared by every daemon of that node (appended).
    pub log: PathBuf,
    /// Where this daemon's part of the log starts.
    log_start: u64,
}

impl Agent {
    /// Starts the daemon for `host`, authenticated as the daemon's pod on
    /// its node would be: with a node-bound token of the daemon's
    /// ServiceAccount.
    pub fn start(
        cp: &ControlPlane,
        host: &FakeHost,
        options: &AgentOptions,
        log_dir: &Path,
    ) -> Result<Agent> {
        let kubeconfig = cp.node_bound_kubeconfig(&options.node_name)?;
        Self::start_with_kubeconfig(&kubeconfig, host, options, log_dir)
    }

    /// Starts the daemon for `host` with the given kubeconfig.
    pub fn start_with_kubeconfig(
        kubeconfig: &Path,
        host: &FakeHost,
        options: &AgentOptions,
        log_dir: &Path,
    ) -> Result<Agent> {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL"]);
        if let Some((uid, gid)) = options.user {
            // A privileged container: the full bounding set; no ambient or
            // inheritable capabilities (CRI sets none), so a non-root
            // user's exec leaves its permitted and effective sets empty.
            cmd.args(["--reuid", &uid.to_string(), "--regid", &gid.to_string()])
                .args(["--clear-groups", "--inh-caps=-all"]);
        }
        cmd.arg("--");
        Self::spawn(cmd, Some(kubeconfig), host, options, log_dir)
    }

    /// Starts the daemon for `host` the way a pod runs it: no kubeconfig,
    /// `KUBERNETES_SERVICE_HOST`/`PORT` in the environment, and the service
    /// account's `token`, `ca.crt` and `namespace` at the fixed in-cluster
    /// path. That path is made in a private mount namespace of the daemon
    /// (a tmpfs on `/run`, `service_account_dir` bound on
    /// `/run/secrets/kubernetes.io/serviceaccount`), so the production code
    /// path runs unchanged and the machine's own `/run` is not touched.
    pub fn start_in_cluster(
        service_account_dir: &Path,
        api_host: &str,
        api_port: u16,
        host: &FakeHost,
        options: &AgentOptions,
        log_dir: &Path,
    ) -> Result<Agent> {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "--"])
            .args(["unshare", "--mount", "--propagation", "private", "--"])
            .args([
                "sh",
                "-ec",
                "mount -t tmpfs -o mode=0755 tmpfs /run\n\
                 mkdir -p /run/secrets/kubernetes.io/serviceaccount\n\
                 mount --bind \"$0\" /run/secrets/kubernetes.io/serviceaccount\n\
                 exec \"$@\"",
            ])
            .arg(service_account_dir)
            .env("KUBERNETES_SERVICE_HOST", api_host)
            .env("KUBERNETES_SERVICE_PORT", api_port.to_string())
            .env_remove("KUBECONFIG");
        Self::spawn(cmd, None, host, options, log_dir)
    }

    /// Runs bootc-daemon (and its arguments) after `cmd`'s own arguments.
    fn spawn(
        mut cmd: Command,
        kubeconfig: Option<&Path>,
        host: &FakeHost,
        options: &AgentOptions,
        log_dir: &Path,
    ) -> Result<Agent> {
        let log = log_dir.join(format!("daemon-{}.log", options.node_name));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let log_start = file.metadata()?.len();
        let binary = |name: &str| match &options.bin_dir {
            Some(dir) => dir.join(name),
            None => bin(name),
        };
        let child = cmd
            .arg(binary("bootc-daemon"))
            .arg("--helper")
            .arg(binary("bootc-helper"))
            .arg("--host-root")
            .arg(host.root())
            .args(["--host-pid", &host.pid().to_string()])
            .args([
                "--apply-window-ms",
                &options.apply_window.as_millis().to_string(),
            ])
            .args([
                "--poll-interval-secs",
                &options.poll_interval.as_secs().max(1).to_string(),
            ])
            .args([
                "--host-updater-recheck-secs",
                &options.updater_recheck.as_secs().max(1).to_string(),
            ])
            .args(["--node-name", &options.node_name])
            // The fake hosts stage from any repository (the allow-list has
            // its own tests: helper_rpc.rs, daemon/tests/cli.rs).
            .args(["--allowed-repository", daemon::agent::repositories::ANY])
            .args(
                kubeconfig
                    .map(|k| [OsStr::new("--kubeconfig"), k.as_os_str()])
                    .into_iter()
                    .flatten(),
            )
            .env(
                "RUST_LOG",
                std::env::var("BOOTC_TEST_DAEMON_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env_remove("NODE_NAME")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .context("starting bootc-daemon")?;
        Ok(Agent {
            child,
            log,
            log_start,
        })
    }

    /// SIGKILL, as a power cut or reboot would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// This daemon's log so far (not the node's earlier daemons': a test
    /// waiting for this daemon's line must not find a predecessor's).
    pub fn log_text(&self) -> String {
        let all = std::fs::read(&self.log).unwrap_or_default();
        let start = usize::try_from(self.log_start)
            .unwrap_or(usize::MAX)
            .min(all.len());
        String::from_utf8_lossy(&all[start..]).into_owned()
    }

    /// The node's whole daemon log, every daemon of it (for diagnostics).
    pub fn node_log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}
