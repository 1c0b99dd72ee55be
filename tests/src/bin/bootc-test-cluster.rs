//! Starts a throwaway control plane (etcd + kube-apiserver) with the CRDs
//! installed, prints the KUBECONFIG line and the kubectl of the same release,
//! and runs until Ctrl-C.
//!
//! `--nodes N`: a cluster of N real nodes instead (see tests/src/nodes/), with
//! kube-controller-manager, kube-scheduler and a registry, all inside network
//! namespaces of its own; the printed kubeconfig reaches the API server
//! through a loopback port of this machine that this process relays. With
//! `--install chart|deploy`, the operator installed as the README says
//! (`tests::nodes::walkthrough`), and the next commands printed.
//!
//! `os-image VERSION [--tag TAG]`: asks the running cluster to push an OS
//! image of VERSION under TAG (default `stable`, the tag the walkthrough's
//! pool follows) to its registry.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;

use anyhow::Context;

use tests::nodes::walkthrough::{self, Method};

const USAGE: &str =
    "usage: bootc-test-cluster [--nodes N [--install chart|deploy]] | os-image VERSION [--tag TAG]";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (nodes, install) = match args.as_slice() {
        [] => (None, None),
        ["os-image", version] => return os_image(version, walkthrough::CHANNEL),
        ["os-image", version, "--tag", tag] => return os_image(version, tag),
        ["--nodes", n] => (Some(*n), None),
        ["--nodes", n, "--install", how] => (Some(*n), Some(how.parse::<Method>()?)),
        _ => anyhow::bail!(USAGE),
    };
    match nodes {
        None => runtime()?.block_on(control_plane_only()),
        Some(n) => {
            let n = n.parse::<usize>().context("--nodes N")?;
            // Bound here, on the machine's loopback, before entering the
            // cluster's network: the relay to the API server inside it.
            let relay = std::net::TcpListener::bind("127.0.0.1:0")?;
            let net = tests::nodes::ClusterNet::enter()?;
            runtime()?.block_on(real_nodes(net, n, install, relay))
        }
    }
}

/// `os-image`: the running cluster pushes it.
fn os_image(version: &str, tag: &str) -> anyhow::Result<()> {
    let pinned = walkthrough::request_os_image(None, version, tag)?;
    writeln!(std::io::stdout(), "pushed {version} as {tag}: {pinned}")?;
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

async fn control_plane_only() -> anyhow::Result<()> {
    let cp = tests::ControlPlane::start().await?;
    tests::k8s::install_crds(&cp.admin().await?).await?;
    print_access(&cp.kubeconfig(tests::Identity::Admin))?;
    tokio::signal::ctrl_c().await?;
    drop(cp);
    Ok(())
}

async fn real_nodes(
    net: tests::nodes::ClusterNet,
    nodes: usize,
    install: Option<Method>,
    relay: std::net::TcpListener,
) -> anyhow::Result<()> {
    let options = tests::nodes::NodeClusterOptions {
        nodes,
        ..Default::default()
    };
    let cluster = tests::nodes::NodeCluster::start(net, &options).await?;
    let admin = cluster.cp.kubeconfig(tests::Identity::Admin);
    let outside = cluster.cp.dir().join("admin-outside.kubeconfig");
    let relay_port = relay.local_addr()?.port();
    let text = std::fs::read_to_string(&admin)?.replace(
        &cluster.cp.url(),
        &format!("https://127.0.0.1:{relay_port}"),
    );
    std::fs::write(&outside, text)?;
    print_access(&outside)?;
    writeln!(
        std::io::stdout(),
        "# registry {} (user and password in {}); the cluster's network: nsenter --net=/proc/{}/ns/net",
        cluster.registry.host(),
        cluster
            .dir()
            .join("layer/etc/containerd/config.toml")
            .display(),
        cluster.net_pid()
    )?;
    if let Some(method) = install {
        walkthrough::install(&cluster, method).await?;
        let files = walkthrough::write_files(&cluster)?;
        writeln!(
            std::io::stdout(),
            "# the operator is installed ({method:?}); the README's walkthrough, ready to paste\n# (kubectl bootc: export PATH={}:$PATH)\n{}",
            tests::fake_host::bin("kubectl-bootc")
                .parent()
                .map_or(String::new(), |p| p.display().to_string()),
            walkthrough::next_steps(&cluster, &files)
        )?;
    }
    let listener = walkthrough::listen(&cluster.dir().join("os-image.sock"))?;
    let api = format!("127.0.0.1:{}", cluster.cp.port());
    tokio::select! {
        r = relay_to(relay, api) => r?,
        r = walkthrough::serve_os_images(&cluster.registry, listener) => r?,
        r = tokio::signal::ctrl_c() => r?,
    }
    let _ = std::fs::remove_file(walkthrough::current_socket_file());
    drop(cluster);
    Ok(())
}

/// Relays every connection accepted on `listener` to `target`.
async fn relay_to(listener: std::net::TcpListener, target: String) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    loop {
        let (mut inbound, _) = listener.accept().await?;
        let target = target.clone();
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

fn print_access(kubeconfig: &std::path::Path) -> anyhow::Result<()> {
    let mut out = std::io::stdout();
    writeln!(
        out,
        "# Kubernetes {}\nexport KUBECONFIG={}\nalias kubectl={}",
        tests::binaries::kube_version()?,
        kubeconfig.display(),
        tests::binaries::kubectl()?.display()
    )?;
    out.flush()?;
    Ok(())
}
