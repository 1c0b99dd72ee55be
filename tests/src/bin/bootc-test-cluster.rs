//! Starts a throwaway control plane (etcd + kube-apiserver) with the CRDs
//! installed, prints the KUBECONFIG line and the kubectl of the same release,
//! and runs until Ctrl-C.
//!
//! `--nodes N`: a cluster of N real nodes instead (see tests/src/nodes/), with
//! kube-controller-manager, kube-scheduler and a registry, all inside network
//! namespaces of its own; the printed kubeconfig reaches the API server
//! through a loopback port of this machine that this process relays.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;

use anyhow::Context;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nodes = match args.as_slice() {
        [] => None,
        [flag, n] if flag == "--nodes" => Some(n.parse::<usize>().context("--nodes N")?),
        _ => anyhow::bail!("usage: bootc-test-cluster [--nodes N]"),
    };
    match nodes {
        None => runtime()?.block_on(control_plane_only()),
        Some(n) => {
            // Bound here, on the machine's loopback, before entering the
            // cluster's network: the relay to the API server inside it.
            let relay = std::net::TcpListener::bind("127.0.0.1:0")?;
            let net = tests::nodes::ClusterNet::enter()?;
            runtime()?.block_on(real_nodes(net, n, relay))
        }
    }
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
    let api = format!("127.0.0.1:{}", cluster.cp.port());
    tokio::select! {
        r = relay_to(relay, api) => r?,
        r = tokio::signal::ctrl_c() => r?,
    }
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
