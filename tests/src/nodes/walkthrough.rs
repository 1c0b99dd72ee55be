//! The README's *Try it on real nodes*, as `./dev cluster --nodes N
//! --install chart|deploy` runs it and the real-node suite tests it: the
//! operator installed as a user installs it (the Helm chart with Helm's
//! usual flags, or `kubectl apply -k` of an overlay of `deploy/`), the files
//! a user applies (`pool.yaml` following `<registry>/acme/os:stable`,
//! `workload.yaml`: a Deployment and its PodDisruptionBudget), and new OS
//! images pushed on request (`./dev os-image VERSION`) through a Unix socket
//! the cluster serves in its directory, since the registry lives in the
//! cluster's network namespace.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::operator::{self, Install, OPERATOR_TAG};
use super::pool::{POOL, POOL_LABEL, kubectl, pool_yaml};
use super::{NodeCluster, OS_REPO, images};
use crate::registry::{TestImage, TestRegistry};

/// The tag the walkthrough's pool follows, and `./dev os-image` pushes to.
pub const CHANNEL: &str = "stable";

/// How the operator is installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `helm install -n bootc-operator --create-namespace` of the chart.
    Chart,
    /// `kubectl apply -k` of an overlay of `deploy/` (what `install.yaml` is).
    Deploy,
}

impl std::str::FromStr for Method {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "chart" => Ok(Method::Chart),
            "deploy" => Ok(Method::Deploy),
            other => bail!("--install {other:?}: chart or deploy"),
        }
    }
}

/// Installs the operator by `method`, trusting the cluster's registry and
/// allowing its OS repository; and starts [`CHANNEL`] where the nodes are
/// (v1 tagged `stable` too), so that the pool is up to date at once.
pub async fn install(cluster: &NodeCluster, method: Method) -> Result<()> {
    match method {
        Method::Deploy => operator::install(cluster, &Install::default())?,
        Method::Chart => install_chart(cluster)?,
    }
    let v1 = push_os_marked(&cluster.registry, "1.0", CHANNEL, super::V1_MARKER).await?;
    if v1 != cluster.os_v1 {
        bail!(
            "{CHANNEL} is {v1}, not what the nodes run ({})",
            cluster.os_v1
        );
    }
    Ok(())
}

/// The chart, as the README's *Install* says: into the release's
/// namespace, labelled `restricted` afterwards, the registry's CA given as
/// the ConfigMap the controller reads.
fn install_chart(cluster: &NodeCluster) -> Result<()> {
    let image = operator::push_image(cluster, &Install::default())?;
    let helm = crate::helm::Helm::on(&cluster.cp)?;
    let chart = crate::helm::chart_dir();
    let registry = cluster.registry.host();
    let ns = api::labels::OPERATOR_NAMESPACE;
    helm.run(&[
        "install",
        "bootc-operator",
        &chart.to_string_lossy(),
        "-n",
        ns,
        "--create-namespace",
        "--set",
        &format!("image.repository={image}"),
        "--set",
        &format!("image.tag={OPERATOR_TAG}"),
        "--set",
        &format!("daemon.allowedRepositories={{{registry}/{OS_REPO}}}"),
    ])?;
    let levels =
        ["enforce", "audit", "warn"].map(|l| format!("pod-security.kubernetes.io/{l}=restricted"));
    let mut label = vec!["label", "--overwrite", "namespace", ns];
    label.extend(levels.iter().map(String::as_str));
    kubectl(cluster, &label, None)?;
    let ca = format!(
        "--from-file=ca.crt={}",
        cluster.registry.ca_path().display()
    );
    kubectl(
        cluster,
        &["create", "configmap", "bootc-registry-ca", "-n", ns, &ca],
        None,
    )?;
    Ok(())
}

/// The files a user applies, written into the cluster's directory.
#[derive(Clone, Debug)]
pub struct Files {
    pub pool: PathBuf,
    pub workload: PathBuf,
}

/// Writes `pool.yaml` (every labelled node, following [`CHANNEL`]) and
/// `workload.yaml` (three replicas of a web server the budget lets go one
/// at a time).
pub fn write_files(cluster: &NodeCluster) -> Result<Files> {
    let dir = cluster.dir();
    let files = Files {
        pool: dir.join("pool.yaml"),
        workload: dir.join("workload.yaml"),
    };
    std::fs::write(&files.pool, pool_yaml(cluster, CHANNEL))?;
    let tools = format!("{}/{}", cluster.registry.host(), images::TOOLS);
    std::fs::write(&files.workload, WORKLOAD.replace("TOOLS", &tools))?;
    Ok(files)
}

/// A workload and its budget: a drain evicts one replica at a time.
const WORKLOAD: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: web
          image: TOOLS   # sleeps until asked to stop
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: default
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {app: web}
";

/// The commands the README's walkthrough runs, ready to paste.
pub fn next_steps(cluster: &NodeCluster, files: &Files) -> String {
    let (user, password) = cluster.registry.login();
    let registry = cluster.registry.host();
    let nodes: Vec<&str> = cluster.nodes.iter().map(|n| n.name.as_str()).collect();
    format!(
        "kubectl create secret docker-registry os-pull -n bootc-operator --docker-server={registry} --docker-username={user} --docker-password={password}\n\
         kubectl annotate secret os-pull -n bootc-operator {}={POOL}\n\
         kubectl label node {} {POOL_LABEL}={POOL}\n\
         kubectl apply -f {}\n\
         kubectl apply -f {}\n\
         ./dev os-image 1.1        # pushes {registry}/{OS_REPO}:{CHANNEL}, the tag the pool follows\n\
         kubectl bootc refresh {POOL}   # resolve the tag now, not at the next interval (5 min)\n\
         kubectl bootc status {POOL}\n",
        api::labels::POOLS_ANNOTATION,
        nodes.join(" "),
        files.workload.display(),
        files.pool.display(),
    )
}

/// Pushes an OS image of `version` under `tag` of [`OS_REPO`]; returns its
/// pinned reference.
pub async fn push_os_as(registry: &TestRegistry, version: &str, tag: &str) -> Result<String> {
    push_os_marked(registry, version, tag, &format!("{tag}-{version}")).await
}

/// [`push_os_as`] with the content's `marker` (the same marker and version
/// make the same image, and so the same digest).
async fn push_os_marked(
    registry: &TestRegistry,
    version: &str,
    tag: &str,
    marker: &str,
) -> Result<String> {
    let arch = crate::fake_bootc::Deployment::of("x@sha256:0").architecture;
    let image = TestImage {
        architecture: &arch,
        version,
        marker,
    };
    let digest = registry.push_image(OS_REPO, tag, &image).await?;
    Ok(format!("{}/{OS_REPO}@{digest}", registry.host()))
}

/// Where the running cluster's socket is named, for `./dev os-image`.
pub fn current_socket_file() -> PathBuf {
    std::env::temp_dir().join("bootc-test-cluster.socket")
}

/// Listens on `socket` for `./dev os-image`, and names it in
/// [`current_socket_file`]: a request made after this returns is served.
pub fn listen(socket: &Path) -> Result<tokio::net::UnixListener> {
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket)
        .with_context(|| format!("binding {}", socket.display()))?;
    std::fs::write(current_socket_file(), socket.to_string_lossy().as_bytes())?;
    Ok(listener)
}

/// Serves `./dev os-image` on `listener` ([`listen`]): each connection
/// sends "VERSION TAG\n" and is answered with the pushed image's pinned
/// reference (or "error: ...").
pub async fn serve_os_images(
    registry: &TestRegistry,
    listener: tokio::net::UnixListener,
) -> Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        tokio::io::BufReader::new(read).read_line(&mut line).await?;
        let answer = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [version, tag] => match push_os_as(registry, version, tag).await {
                Ok(pinned) => pinned,
                Err(e) => format!("error: {e:#}"),
            },
            _ => format!("error: expected \"VERSION TAG\", got {line:?}"),
        };
        write.write_all(format!("{answer}\n").as_bytes()).await?;
    }
}

/// Asks the running cluster (`socket`, else the one [`current_socket_file`]
/// names) to push `version` under `tag`; returns the pinned reference.
pub fn request_os_image(socket: Option<&Path>, version: &str, tag: &str) -> Result<String> {
    let socket = match socket {
        Some(s) => s.to_owned(),
        None => PathBuf::from(
            std::fs::read_to_string(current_socket_file())
                .context("no running `./dev cluster --nodes N` (start one first)")?,
        ),
    };
    let mut stream = std::os::unix::net::UnixStream::connect(&socket)
        .with_context(|| format!("connecting to the cluster at {}", socket.display()))?;
    writeln!(stream, "{version} {tag}")?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    let answer = answer.trim().to_owned();
    match answer.strip_prefix("error: ") {
        Some(e) => bail!("{e}"),
        None => Ok(answer),
    }
}
