//! Starts a throwaway control plane (etcd + kube-apiserver) with the CRDs
//! installed, prints the KUBECONFIG line and the kubectl of the same release,
//! and runs until Ctrl-C.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cp = tests::ControlPlane::start().await?;
    tests::k8s::install_crds(&cp.admin().await?).await?;
    let mut out = std::io::stdout();
    writeln!(
        out,
        "# Kubernetes {}\nexport KUBECONFIG={}\nalias kubectl={}",
        tests::binaries::kube_version()?,
        cp.kubeconfig(tests::Identity::Admin).display(),
        tests::binaries::kubectl()?.display()
    )?;
    out.flush()?;
    tokio::signal::ctrl_c().await?;
    drop(cp);
    Ok(())
}
