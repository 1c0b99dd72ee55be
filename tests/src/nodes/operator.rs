//! The operator installed on the real-node cluster exactly as a user
//! installs it: its image (built by `tests/scripts/build-image.sh` from the
//! binaries the tests built, the helper as it ships) pushed to the cluster's
//! registry, and `kubectl apply -k` of an overlay of `deploy/` that names the
//! image, the registry's CA (the optional ConfigMap deploy/ reads), the
//! mirrors the nodes' image has (`super::registries_conf`, the ConfigMap
//! `bootc-registries` deploy/ ships empty), the repository the nodes may
//! boot, by its own name and by the name its mirror serves (the required
//! setting of the daemons' ConfigMap) and nothing else; a test may add what a user tunes through
//! documented flags ([`Install::controller_args`]), as a patch of its own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::NodeCluster;

/// The operator image's repository and tag in the cluster's registry.
pub const OPERATOR_IMAGE: &str = "bootc-operator";
pub const OPERATOR_TAG: &str = "e2e";

/// How the operator is installed.
#[derive(Clone, Debug, Default)]
pub struct Install {
    /// The directory holding the image's binaries (`bootc-controller`,
    /// `bootc-daemon`, `bootc-helper`); `None`: the test build (the helper
    /// as it ships when `./dev test` built it on its own).
    pub binaries: Option<PathBuf>,
    /// Arguments added to the controller's, as a user adds a documented
    /// flag: a JSON patch of the overlay's (deploy/ itself is unchanged).
    pub controller_args: Vec<String>,
}

/// The binaries the image holds, copied into `dir`.
fn image_binaries(dir: &Path, install: &Install) -> Result<()> {
    for name in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        let from = match &install.binaries {
            Some(from) => from.join(name),
            None => crate::fake_host::bin(name),
        };
        std::fs::copy(&from, dir.join(name))
            .with_context(|| format!("copying {}", from.display()))?;
    }
    Ok(())
}

/// Builds the operator's image and pushes it to the cluster's registry;
/// returns `<registry>/bootc-operator`.
pub fn push_image(cluster: &NodeCluster, install: &Install) -> Result<String> {
    let work = cluster.dir().join("operator-image");
    let bins = work.join("bin");
    std::fs::create_dir_all(&bins)?;
    image_binaries(&bins, install)?;
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
pub fn write_overlay(cluster: &NodeCluster, image: &str, install: &Install) -> Result<PathBuf> {
    let dir = cluster.dir().join("overlay");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("registry-ca.crt"), cluster.registry.ca_pem()?)?;
    let deploy = relative(&crate::repo_root().join("deploy"), &dir);
    std::fs::write(
        dir.join("registries.conf"),
        super::registries_conf(&cluster.registry.host()),
    )?;
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {deploy}\nimages:\n  - name: bootc-operator\n    newName: {image}\n    newTag: {OPERATOR_TAG}\nconfigMapGenerator:\n  - name: bootc-registry-ca\n    namespace: bootc-operator\n    files:\n      - registry-ca.crt\n    options:\n      disableNameSuffixHash: true\n  - name: bootc-registries\n    namespace: bootc-operator\n    behavior: merge\n    files:\n      - registries.conf\n  - name: bootc-daemon\n    namespace: bootc-daemon\n    behavior: merge\n    literals:\n      - {key}={registry}/{repo},{source}/{repo}\n",
        deploy = deploy.display(),
        key = daemon::agent::repositories::CONFIG_KEY,
        registry = cluster.registry.host(),
        source = super::source_registry(),
        repo = super::OS_REPO,
    );
    let text = text + &controller_patch(&install.controller_args);
    std::fs::write(dir.join("kustomization.yaml"), text)?;
    Ok(dir)
}

/// The overlay's patch of the controller Deployment adding `args` to its
/// container's (nothing when there are none).
fn controller_patch(args: &[String]) -> String {
    if args.is_empty() {
        return String::new();
    }
    let ops: Vec<serde_json::Value> = args
        .iter()
        .map(|a| {
            serde_json::json!({
                "op": "add",
                "path": "/spec/template/spec/containers/0/args/-",
                "value": a,
            })
        })
        .collect();
    format!(
        "patches:\n  - target:\n      kind: Deployment\n      name: bootc-controller\n      namespace: bootc-operator\n    patch: '{}'\n",
        serde_json::Value::Array(ops)
            .to_string()
            .replace('\'', "''")
    )
}

/// Pushes the image and `kubectl apply -k`s the overlay.
pub fn install(cluster: &NodeCluster, install: &Install) -> Result<()> {
    let image = push_image(cluster, install)?;
    let overlay = write_overlay(cluster, &image, install)?;
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
