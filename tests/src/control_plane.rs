//! A real Kubernetes control plane for tests: etcd and kube-apiserver on
//! loopback, with generated certificates, RBAC, and static tokens for the
//! operator's two service accounts. No scheduler and no kubelet: tests create
//! Node objects and play kubelet themselves. For real nodes
//! ([`Options::serve_nodes_at`], see `crate::nodes`) it also serves an
//! address of the nodes' network, authorizes kubelets (Node, RBAC), hands
//! pods their service-account tokens, and runs kube-controller-manager and
//! kube-scheduler beside it.
//!
//! Every instance has its own ports and directories and stops only what it
//! started (children are killed on drop, and get SIGKILL through
//! `setpriv --pdeathsig` if the test process dies first).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{binaries, pki};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The user the controller's token authenticates as (its ServiceAccount).
pub const CONTROLLER_USER: &str = "system:serviceaccount:bootc-operator:bootc-controller";
/// The user the daemon's token authenticates as (its ServiceAccount, in the
/// daemon's own namespace).
pub const DAEMON_USER: &str = "system:serviceaccount:bootc-daemon:bootc-daemon";

/// The owner of the daemon's pods, as the DaemonSet controller sets it (a
/// drain leaves DaemonSet pods alone; there is no DaemonSet controller here).
const DAEMONSET_OWNER: &str = r#"{"apiVersion":"apps/v1","kind":"DaemonSet","name":"bootc-daemon","uid":"6b6f6f74-632d-6461-656d-6f6e00000000","controller":true}"#;

/// The daemon's namespace and ServiceAccount, as in deploy/.
pub const DAEMON_NAMESPACE: &str = "bootc-daemon";
const DAEMON_SERVICE_ACCOUNT: &str = "bootc-daemon";

/// A static token of the daemon's ServiceAccount that, unlike a
/// kubelet-issued one, names no node (for tests of what such a token may
/// not do; daemons under test use [`ControlPlane::node_bound_kubeconfig`]).
pub const DAEMON_TOKEN: &str = "daemon-token";

/// A static token of a kubelet ([`KUBELET_USER`], group `system:nodes`),
/// for writes that are not the operator's (it has no grant until a test
/// gives it one).
pub const KUBELET_TOKEN: &str = "kubelet-token";
pub const KUBELET_USER: &str = "system:node:bench-kubelet";
/// A static token of another controller's ServiceAccount
/// ([`OTHER_CONTROLLER_USER`]; no grant until a test gives it one).
pub const OTHER_CONTROLLER_TOKEN: &str = "other-controller-token";
pub const OTHER_CONTROLLER_USER: &str = "system:serviceaccount:kube-system:other-controller";

/// Who a kubeconfig authenticates as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// `system:masters`: for tests setting up the world.
    Admin,
    /// The controller's ServiceAccount: only what deploy/ RBAC grants.
    Controller,
    /// The daemon's ServiceAccount with a static token that names no node:
    /// what deploy/ RBAC grants, less what the admission policies refuse.
    Daemon,
}

impl Identity {
    /// The static token this identity authenticates with.
    pub fn token(self) -> &'static str {
        match self {
            Identity::Admin => "admin-token",
            Identity::Controller => "controller-token",
            Identity::Daemon => DAEMON_TOKEN,
        }
    }
}

/// Options for [`ControlPlane::start_with`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Write an audit log of every request (metadata level) to `audit.log`.
    pub audit: bool,
    /// Serve real nodes: the API server listens on every address of the
    /// (namespaced) network it runs in and advertises this one, which its
    /// certificate names with the `kubernetes` Service's address.
    pub serve_nodes_at: Option<String>,
    /// The API server's `--feature-gates` (none: its defaults).
    pub feature_gates: Vec<String>,
}

/// The `kubernetes` Service's address: the first of the service range.
pub const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// The API server's arguments that differ when it serves real nodes.
fn node_serving_args(address: &str, d: &Path) -> Vec<String> {
    vec![
        "--bind-address=0.0.0.0".into(),
        format!("--advertise-address={address}"),
        // The `kubernetes` Service's endpoint is this address: pods reach it.
        "--endpoint-reconciler-type=lease".into(),
        // Kubelets authenticate with their node certificates.
        "--authorization-mode=Node,RBAC".into(),
        // Pods get projected, node-bound service-account tokens.
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!(
            "--kubelet-client-certificate={}",
            d.join("admin.crt").display()
        ),
        format!("--kubelet-client-key={}", d.join("admin.key").display()),
    ]
}

/// A running etcd + kube-apiserver.
pub struct ControlPlane {
    dir: tempfile::TempDir,
    etcd: Child,
    /// kube-controller-manager and kube-scheduler, when serving real nodes.
    controllers: Vec<Child>,
    apiserver: Option<Child>,
    apiserver_args: Vec<String>,
    apiserver_bin: PathBuf,
    port: u16,
    etcd_port: u16,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .finish()
    }
}

/// A free TCP port on loopback (bound then released: a later bind may race,
/// which `start` handles by retrying).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding an ephemeral port")?;
    Ok(l.local_addr()?.port())
}

/// Generates a CA, a serving certificate for 127.0.0.1, an admin client
/// certificate and a service-account signing key.
fn generate_pki(dir: &Path, serve_nodes_at: Option<&str>) -> Result<()> {
    pki::ca(dir)?;
    match serve_nodes_at {
        Some(address) => pki::serving_leaf_for(dir, "serving", &[address, KUBERNETES_SERVICE_IP])?,
        None => pki::serving_leaf(dir, "serving")?,
    }
    pki::leaf(
        dir,
        "admin",
        "/O=system:masters/CN=admin",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )?;
    pki::ec_key(dir, "sa.key")?;
    pki::run(
        Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(dir.join("sa.key"))
            .arg("-out")
            .arg(dir.join("sa.pub")),
    )
}

fn write_tokens(dir: &Path) -> Result<()> {
    let lines = [
        format!(
            "{},admin-user,admin-uid,\"system:masters\"",
            Identity::Admin.token()
        ),
        format!(
            "{},{CONTROLLER_USER},controller-uid,\"system:serviceaccounts,system:serviceaccounts:bootc-operator\"",
            Identity::Controller.token()
        ),
        format!(
            "{},{DAEMON_USER},daemon-uid,\"system:serviceaccounts,system:serviceaccounts:{DAEMON_NAMESPACE}\"",
            Identity::Daemon.token()
        ),
        format!("{KUBELET_TOKEN},{KUBELET_USER},kubelet-uid,\"system:nodes\""),
        format!(
            "{OTHER_CONTROLLER_TOKEN},{OTHER_CONTROLLER_USER},other-controller-uid,\"system:serviceaccounts,system:serviceaccounts:kube-system\""
        ),
    ];
    std::fs::write(dir.join("tokens.csv"), lines.join("\n") + "\n")?;
    Ok(())
}

/// Every request at metadata level, every stage: a watch is only seen at
/// RequestReceived until its first event is sent.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// Starts `bin` with output to `log`; it dies with the test process.
pub fn spawn_logged(bin: &Path, args: &[String], log: &Path) -> Result<Child> {
    let log_file = std::fs::File::create(log)?;
    let err_file = log_file.try_clone()?;
    // setpriv makes the child die with the test process, even on SIGKILL.
    Command::new("setpriv")
        .args(["--pdeathsig", "KILL", "--"])
        .arg(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Where [`ControlPlane::node_bound_kubeconfig`] writes `node`'s kubeconfig
/// in the control plane's directory `dir`.
pub fn node_kubeconfig_in(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("daemon-{node}.kubeconfig"))
}

/// Runs `cmd` with `input` on its stdin; its stdout, or an error with its stderr.
fn run_with_input(mut cmd: Command, input: &str) -> Result<String> {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last lines of a log file, for error messages.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the server is ready.
    pub async fn start() -> Result<Self> {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Result<Self> {
        let mut last_err = None;
        for _ in 0..3 {
            match Self::try_start(&options).await {
                Ok(cp) => return Ok(cp),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("control plane did not start")))
    }

    async fn try_start(options: &Options) -> Result<Self> {
        let apiserver_bin = binaries::kube_apiserver()?;
        let etcd_bin = binaries::etcd()?;
        // tmpfs makes etcd's fsyncs cheap.
        let base = if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        let dir = tempfile::Builder::new()
            .prefix("bootc-cp-")
            .tempdir_in(base)?;
        let d = dir.path();
        generate_pki(d, options.serve_nodes_at.as_deref())?;
        write_tokens(d)?;

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_args: Vec<String> = vec![
            format!("--data-dir={}", d.join("etcd").display()),
            format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--advertise-client-urls=http://127.0.0.1:{etcd_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            "--log-level=warn".into(),
        ];
        let etcd = spawn_logged(&etcd_bin, &etcd_args, &d.join("etcd.log"))?;

        let port = free_port()?;
        let loopback_only: Vec<String> = vec![
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // A loopback address is refused by the endpoint reconciler, which
            // keeps the `kubernetes` Service's endpoints: nothing here needs them.
            "--endpoint-reconciler-type=none".into(),
            "--authorization-mode=RBAC".into(),
            // No kubelet mounts tokens: tests hand them out themselves.
            "--disable-admission-plugins=ServiceAccount".into(),
        ];
        let mut args: Vec<String> = match &options.serve_nodes_at {
            Some(address) => node_serving_args(address, d),
            None => loopback_only,
        };
        if !options.feature_gates.is_empty() {
            args.push(format!(
                "--feature-gates={}",
                options.feature_gates.join(",")
            ));
        }
        args.extend([
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", d.join("certs").display()),
            format!("--tls-cert-file={}", d.join("serving.crt").display()),
            format!("--tls-private-key-file={}", d.join("serving.key").display()),
            format!("--client-ca-file={}", d.join("ca.crt").display()),
            format!("--token-auth-file={}", d.join("tokens.csv").display()),
            format!("--service-account-key-file={}", d.join("sa.pub").display()),
            format!(
                "--service-account-signing-key-file={}",
                d.join("sa.key").display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--enable-priority-and-fairness=false".into(),
            "--profiling=false".into(),
            "--v=0".into(),
            // The disruption recorder replays etcd's whole history: objects
            // are stored as JSON it can read, and nothing is compacted away.
            "--storage-media-type=application/json".into(),
            "--etcd-compaction-interval=0".into(),
        ]);
        if options.audit {
            std::fs::write(d.join("audit-policy.yaml"), AUDIT_POLICY)?;
            args.push(format!(
                "--audit-policy-file={}",
                d.join("audit-policy.yaml").display()
            ));
            args.push(format!(
                "--audit-log-path={}",
                d.join("audit.log").display()
            ));
            args.push("--audit-log-mode=blocking".into());
        }

        let mut cp = ControlPlane {
            dir,
            etcd,
            controllers: Vec::new(),
            apiserver: None,
            apiserver_args: args,
            apiserver_bin,
            port,
            etcd_port,
        };
        cp.write_kubeconfigs()?;
        cp.start_apiserver().await?;
        if options.serve_nodes_at.is_some() {
            cp.start_controllers()?;
        }
        Ok(cp)
    }

    /// kube-controller-manager and kube-scheduler, as the admin, without
    /// leader election (one of each): the DaemonSet, Deployment, disruption
    /// and node-lifecycle controllers, the root CA every pod's token volume
    /// mounts, and the scheduler placing pods.
    fn start_controllers(&mut self) -> Result<()> {
        let d = self.dir.path().to_owned();
        let admin = self.kubeconfig(Identity::Admin).display().to_string();
        let kcm_args = vec![
            format!("--kubeconfig={admin}"),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--use-service-account-credentials=false".into(),
            format!("--root-ca-file={}", d.join("ca.crt").display()),
            format!(
                "--service-account-private-key-file={}",
                d.join("sa.key").display()
            ),
            "--v=0".into(),
        ];
        let kcm = spawn_logged(
            &binaries::kube_controller_manager()?,
            &kcm_args,
            &d.join("controller-manager.log"),
        )?;
        self.controllers.push(kcm);
        let scheduler_args = vec![
            format!("--kubeconfig={admin}"),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--v=0".into(),
        ];
        let scheduler = spawn_logged(
            &binaries::kube_scheduler()?,
            &scheduler_args,
            &d.join("scheduler.log"),
        )?;
        self.controllers.push(scheduler);
        Ok(())
    }

    async fn start_apiserver(&mut self) -> Result<()> {
        let child = spawn_logged(
            &self.apiserver_bin,
            &self.apiserver_args,
            &self.dir.path().join("apiserver.log"),
        )?;
        self.apiserver = Some(child);
        self.wait_ready(Duration::from_secs(90)).await
    }

    /// Stops the API server (etcd keeps the data) and starts it again on the
    /// same port, for tests of what survives an API server restart.
    pub async fn restart_apiserver(&mut self) -> Result<()> {
        self.stop_apiserver();
        self.start_apiserver().await
    }

    /// Stops only the API server.
    pub fn stop_apiserver(&mut self) {
        if let Some(mut child) = self.apiserver.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the API server (SIGSTOP): connections are accepted by the
    /// kernel but never answered, like a server that hangs. etcd goes on.
    pub fn pause_apiserver(&self) -> Result<()> {
        self.signal_apiserver(nix::sys::signal::Signal::SIGSTOP)
    }

    /// Lets a paused API server go on (SIGCONT).
    pub fn resume_apiserver(&self) -> Result<()> {
        self.signal_apiserver(nix::sys::signal::Signal::SIGCONT)
    }

    fn signal_apiserver(&self, signal: nix::sys::signal::Signal) -> Result<()> {
        let child = self
            .apiserver
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the API server is not running"))?;
        let pid = i32::try_from(child.id())?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)?;
        Ok(())
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let client = self.client(Identity::Admin).await?;
        let deadline = Instant::now() + timeout;
        loop {
            let req = http::Request::get("/readyz").body(Vec::new())?;
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                _ => {}
            }
            if let Some(child) = self.apiserver.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!(
                    "kube-apiserver exited with {status} during start-up:\n{}",
                    tail(&self.dir.path().join("apiserver.log"))
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver not ready after {timeout:?}:\n{}",
                    tail(&self.dir.path().join("apiserver.log"))
                );
            }
            // Readiness has no event to await: poll the endpoint.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn write_kubeconfigs(&self) -> Result<()> {
        for identity in [Identity::Admin, Identity::Controller, Identity::Daemon] {
            let user = match identity {
                Identity::Admin => format!(
                    "    client-certificate: {}\n    client-key: {}\n",
                    self.dir.path().join("admin.crt").display(),
                    self.dir.path().join("admin.key").display()
                ),
                other => format!("    token: {}\n", other.token()),
            };
            std::fs::write(self.kubeconfig(identity), self.kubeconfig_text(&user))?;
        }
        Ok(())
    }

    /// A kubeconfig for this server, with `user` (YAML lines of the user).
    fn kubeconfig_text(&self, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\nusers:\n- name: test\n  user:\n{user}",
            self.url(),
            self.dir.path().join("ca.crt").display(),
        )
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A kubeconfig file for `identity` (for kubectl and the binaries).
    pub fn kubeconfig(&self, identity: Identity) -> PathBuf {
        let name = match identity {
            Identity::Admin => "admin.kubeconfig",
            Identity::Controller => "controller.kubeconfig",
            Identity::Daemon => "daemon.kubeconfig",
        };
        self.dir.path().join(name)
    }

    /// A kubeconfig for the daemon on `node`, with a node-bound service
    /// account token as the kubelet hands one to the daemon's pod: a Pod of
    /// the daemon's ServiceAccount bound to `node`, owned by the DaemonSet
    /// (created here if absent; nothing runs it), and a TokenRequest bound to that Pod. The token's
    /// user carries the node's name (`authentication.kubernetes.io/node-name`)
    /// and stops working when the Pod is deleted. Needs the namespace and
    /// ServiceAccount of `deploy/rbac/daemon.yaml`.
    pub fn node_bound_kubeconfig(&self, node: &str) -> Result<PathBuf> {
        let token = self.node_bound_token(node)?;
        let path = node_kubeconfig_in(self.dir.path(), node);
        std::fs::write(
            &path,
            self.kubeconfig_text(&format!("    token: {token}\n")),
        )?;
        Ok(path)
    }

    /// A new node-bound token of the daemon's ServiceAccount for `node` (see
    /// [`ControlPlane::node_bound_kubeconfig`]); each call returns another
    /// token, as the kubelet's rotation does.
    pub fn node_bound_token(&self, node: &str) -> Result<String> {
        self.node_bound_token_in(DAEMON_NAMESPACE, node)
    }

    /// [`ControlPlane::node_bound_token`] for a daemon installed in
    /// `namespace` (the chart's renamed namespaces).
    pub fn node_bound_token_in(&self, namespace: &str, node: &str) -> Result<String> {
        let pod = format!("bootc-daemon-{node}");
        let manifest = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"{pod}\",\"namespace\":\"{namespace}\",\"ownerReferences\":[{DAEMONSET_OWNER}]}},\"spec\":{{\"nodeName\":\"{node}\",\"serviceAccountName\":\"{DAEMON_SERVICE_ACCOUNT}\",\"automountServiceAccountToken\":false,\"containers\":[{{\"name\":\"daemon\",\"image\":\"bootc-operator\"}}]}}}}"
        );
        let mut apply = self.kubectl();
        apply.args(["apply", "-f", "-"]);
        run_with_input(apply, &manifest).context("creating the daemon's pod")?;
        let mut request = self.kubectl();
        request.args([
            "create",
            "token",
            DAEMON_SERVICE_ACCOUNT,
            "-n",
            namespace,
            "--bound-object-kind=Pod",
            &format!("--bound-object-name={pod}"),
            "--duration=24h",
        ]);
        let token = run_with_input(request, "").context("requesting a node-bound token")?;
        Ok(token.trim().to_owned())
    }

    /// A client authenticated as `identity`.
    pub async fn client(&self, identity: Identity) -> Result<kube::Client> {
        let kc = Kubeconfig::read_from(self.kubeconfig(identity))?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// A client authenticated with `token` (a TokenRequest's, say).
    pub async fn client_with_token(&self, token: &str) -> Result<kube::Client> {
        let kc = Kubeconfig::from_yaml(&self.kubeconfig_text(&format!("    token: {token}\n")))?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// The admin client.
    pub async fn admin(&self) -> Result<kube::Client> {
        self.client(Identity::Admin).await
    }

    /// The API server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate that signed the API server's serving certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The directory holding certificates, logs and kubeconfigs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// etcd's client URL (plain HTTP on loopback).
    pub fn etcd_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// The API server's pid, while it runs (for its CPU time in /proc).
    pub fn apiserver_pid(&self) -> Option<u32> {
        self.apiserver.as_ref().map(Child::id)
    }

    /// etcd's pid (for its CPU time in /proc).
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.id()
    }

    /// The audit log (present when started with `Options { audit: true }`).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// The audit log's events so far, each line's JSON (none when there is
    /// no log).
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.audit_log()).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// A `kubectl` command pointed at this server as admin.
    pub fn kubectl(&self) -> Command {
        // A missing binary shows as the spawn's error, naming the path.
        let bin = binaries::kubectl().unwrap_or_else(|_| PathBuf::from("kubectl"));
        let mut cmd = Command::new(bin);
        cmd.arg("--kubeconfig")
            .arg(self.kubeconfig(Identity::Admin));
        cmd
    }

    /// Runs `kubectl args` as admin to success; its stdout. A failure says
    /// the command and kubectl's stderr.
    pub fn run_kubectl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> anyhow::Result<String> {
        let out = self.kubectl().args(args).output()?;
        if !out.status.success() {
            let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
            anyhow::bail!(
                "kubectl {}: {}",
                shown.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for child in &mut self.controllers {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop_apiserver();
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}
