//! The operator installed on the real-node cluster exactly as a user
//! installs it: its image (built by `tests/scripts/build-image.sh` from the
//! binaries the tests built, the helper as it ships) pushed to the cluster's
//! registry, and `kubectl apply -k` of an overlay of `deploy/` that names the
//! image, the registry's CA (the optional ConfigMap deploy/ reads) and
//! nothing else.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::NodeCluster;

/// The operator image's repository and tag in the cluster's registry.
pub const OPERATOR_IMAGE: &str = "bootc-operator";
const OPERATOR_TAG: &str = "e2e";

/// The binaries the image holds, from the test build (the helper as it
/// ships when `./dev test` built it on its own).
fn image_binaries(dir: &Path) -> Result<()> {
    for name in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        let from = crate::fake_host::bin(name);
        std::fs::copy(&from, dir.join(name))
            .with_context(|| format!("copying {}", from.display()))?;
    }
    Ok(())
}

/// Builds the operator's image and pushes it to the cluster's registry;
/// returns `<registry>/bootc-operator`.
pub fn push_image(cluster: &NodeCluster) -> Result<String> {
    let work = cluster.dir().join("operator-image");
    let bins = work.join("bin");
    std::fs::create_dir_all(&bins)?;
    image_binaries(&bins)?;
    let layout = work.join("oci");
    crate::image::build(&bins, &layout, OPERATOR_TAG, 0)?;
    let repo = format!("{OPERATOR_IMAGE}:{OPERATOR_TAG}");
    super::images::push(&layout, OPERATOR_TAG, &cluster.registry, &repo)?;
    Ok(format!("{}/{OPERATOR_IMAGE}", cluster.registry.host()))
}

/// `path` relative to `from` (kustomize refuses absolute resource paths).
fn relative(path: &Path, from: &Path) -> PathBuf {
    let ups = from.components().count().saturating_sub(1);
    let mut rel = PathBuf::new();
    for _ in 0..ups {
        rel.push("..");
    }
    rel.push(path.strip_prefix("/").unwrap_or(path));
    rel
}

/// Writes the overlay of `deploy/` the tests install.
pub fn write_overlay(cluster: &NodeCluster, image: &str) -> Result<PathBuf> {
    let dir = cluster.dir().join("overlay");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("registry-ca.crt"), cluster.registry.ca_pem()?)?;
    let deploy = relative(&crate::repo_root().join("deploy"), &dir);
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {deploy}\nimages:\n  - name: bootc-operator\n    newName: {image}\n    newTag: {OPERATOR_TAG}\nconfigMapGenerator:\n  - name: bootc-registry-ca\n    namespace: bootc-operator\n    files:\n      - registry-ca.crt\n    options:\n      disableNameSuffixHash: true\n",
        deploy = deploy.display()
    );
    std::fs::write(dir.join("kustomization.yaml"), text)?;
    Ok(dir)
}

/// Pushes the image and `kubectl apply -k`s the overlay.
pub fn install(cluster: &NodeCluster) -> Result<()> {
    let image = push_image(cluster)?;
    let overlay = write_overlay(cluster, &image)?;
    let out = cluster
        .cp
        .kubectl()
        .args(["apply", "-k"])
        .arg(&overlay)
        .output()?;
    if !out.status.success() {
        bail!(
            "kubectl apply -k {}: {}",
            overlay.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
