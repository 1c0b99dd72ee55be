//! Where the test control plane's binaries are: kube-apiserver and kubectl
//! of one Kubernetes release, etcd and etcdctl, helm and krew, all built from
//! published Go modules by `tests/scripts/build-control-plane.sh` and cached outside the
//! repository by version.
//!
//! The release is a minor with a wrapper module in `tests/control-plane/`
//! (`kubernetes-<minor>/go.mod` pins its patch release). `BOOTC_KUBE_VERSION`
//! picks one (`1.34`, or `newest` / `oldest`); the default is the newest.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::repo_root;

/// The environment variable that picks the Kubernetes minor.
pub const KUBE_VERSION_VAR: &str = "BOOTC_KUBE_VERSION";

/// The directory the build script caches binaries in.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BOOTC_OPERATOR_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache/bootc-operator")
}

fn wrappers_dir() -> PathBuf {
    repo_root().join("tests/control-plane")
}

/// The Kubernetes minors with a wrapper module, oldest first (`1.34`, `1.37`).
pub fn kube_minors() -> Result<Vec<String>> {
    let mut minors: Vec<(u32, String)> = Vec::new();
    for entry in std::fs::read_dir(wrappers_dir())? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(minor) = name.strip_prefix("kubernetes-") {
            let n = minor
                .split('.')
                .nth(1)
                .and_then(|m| m.parse().ok())
                .with_context(|| format!("wrapper directory {name} is not kubernetes-1.<minor>"))?;
            minors.push((n, minor.to_owned()));
        }
    }
    minors.sort();
    Ok(minors.into_iter().map(|(_, m)| m).collect())
}

/// The minor the tests run on: `$BOOTC_KUBE_VERSION`, else the newest.
pub fn kube_minor() -> Result<String> {
    let minors = kube_minors()?;
    let wanted = std::env::var(KUBE_VERSION_VAR).unwrap_or_else(|_| "newest".into());
    let chosen = match wanted.as_str() {
        "" | "newest" => minors.last(),
        "oldest" => minors.first(),
        other => minors.iter().find(|m| *m == other.trim_start_matches('v')),
    };
    match chosen {
        Some(m) => Ok(m.clone()),
        None => bail!(
            "{KUBE_VERSION_VAR}={wanted}: no such Kubernetes minor in tests/control-plane (have {})",
            minors.join(", ")
        ),
    }
}

/// The feature gates that turn on Kubernetes' Node lifecycle conditions
/// (KEP-5683) on the minor the tests run on: `NodeLifecycleConditions`
/// from 1.37, where it is alpha; none before (the conditions are then
/// plain Node conditions, written and read the same way).
pub fn node_lifecycle_gates() -> Result<Vec<String>> {
    let minor = kube_minor()?;
    let number: u32 = minor
        .rsplit('.')
        .next()
        .and_then(|m| m.parse().ok())
        .with_context(|| format!("the Kubernetes minor {minor}"))?;
    Ok(if number >= 37 {
        vec!["NodeLifecycleConditions=true".to_owned()]
    } else {
        Vec::new()
    })
}

/// The version a wrapper's go.mod pins for `module` (`v1.37.2`).
fn pinned(go_mod: &Path, module: &str) -> Result<String> {
    let text =
        std::fs::read_to_string(go_mod).with_context(|| format!("reading {}", go_mod.display()))?;
    text.lines()
        .map(|l| l.trim().trim_start_matches("require ").split_whitespace())
        .find_map(|mut words| {
            (words.next() == Some(module))
                .then(|| words.next().map(str::to_owned))
                .flatten()
        })
        .with_context(|| format!("{} does not require {module}", go_mod.display()))
}

/// The full Kubernetes version the chosen minor pins (`v1.37.2`).
pub fn kube_version() -> Result<String> {
    let minor = kube_minor()?;
    pinned(
        &wrappers_dir().join(format!("kubernetes-{minor}/go.mod")),
        "k8s.io/kubernetes",
    )
}

fn cached(dir: String, bin: &str) -> Result<PathBuf> {
    let path = cache_dir().join(dir).join(bin);
    if !path.exists() {
        bail!(
            "{} not found: run tests/scripts/build-control-plane.sh (`./dev test` does)",
            path.display()
        );
    }
    Ok(path)
}

/// kube-apiserver of the chosen release.
pub fn kube_apiserver() -> Result<PathBuf> {
    cached(format!("kubernetes-{}", kube_version()?), "kube-apiserver")
}

/// The kubelet of the chosen release (built for the newest minor only).
pub fn kubelet() -> Result<PathBuf> {
    cached(format!("kubernetes-{}", kube_version()?), "kubelet")
}

/// kube-controller-manager of the chosen release (newest minor only).
pub fn kube_controller_manager() -> Result<PathBuf> {
    cached(
        format!("kubernetes-{}", kube_version()?),
        "kube-controller-manager",
    )
}

/// kube-scheduler of the chosen release (newest minor only).
pub fn kube_scheduler() -> Result<PathBuf> {
    cached(format!("kubernetes-{}", kube_version()?), "kube-scheduler")
}

/// kubectl of the chosen release.
pub fn kubectl() -> Result<PathBuf> {
    cached(format!("kubernetes-{}", kube_version()?), "kubectl")
}

fn etcd_dir() -> Result<String> {
    let version = pinned(
        &wrappers_dir().join("etcd/go.mod"),
        "go.etcd.io/etcd/server/v3",
    )?;
    Ok(format!("etcd-{version}"))
}

/// The etcd server.
pub fn etcd() -> Result<PathBuf> {
    cached(etcd_dir()?, "etcd")
}

/// etcdctl of the same release.
pub fn etcdctl() -> Result<PathBuf> {
    cached(etcd_dir()?, "etcdctl")
}

/// helm, pinned by `tests/control-plane/helm/go.mod`.
pub fn helm() -> Result<PathBuf> {
    let version = pinned(&wrappers_dir().join("helm/go.mod"), "helm.sh/helm/v3")?;
    cached(format!("helm-{version}"), "helm")
}

/// krew, pinned by `tests/control-plane/krew/go.mod`.
pub fn krew() -> Result<PathBuf> {
    let version = pinned(&wrappers_dir().join("krew/go.mod"), "sigs.k8s.io/krew")?;
    cached(format!("krew-{version}"), "krew")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_pin_their_own_minor() {
        for minor in kube_minors().unwrap() {
            let version = pinned(
                &wrappers_dir().join(format!("kubernetes-{minor}/go.mod")),
                "k8s.io/kubernetes",
            )
            .unwrap();
            assert!(
                version.starts_with(&format!("v{minor}.")),
                "kubernetes-{minor} pins {version}"
            );
        }
    }

    #[test]
    fn at_least_two_minors_three_apart() {
        let minors = kube_minors().unwrap();
        let n = |m: &String| m.split('.').nth(1).unwrap().parse::<u32>().unwrap();
        assert!(minors.len() >= 2, "{minors:?}");
        assert!(n(minors.last().unwrap()) - n(&minors[0]) >= 3, "{minors:?}");
    }
}
