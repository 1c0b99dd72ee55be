//! The operator's OCI image (tests/scripts/build-image.sh, what `./dev image`
//! runs): building it, and its size, for the image tests and the benchmark.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds the image from the binaries in `bin_dir` into the OCI layout
/// `layout`, tagged `tag`; returns its manifest digest.
pub fn build(bin_dir: &Path, layout: &Path, tag: &str, source_date_epoch: u64) -> Result<String> {
    let script = crate::repo_root().join("tests/scripts/build-image.sh");
    let out = run(Command::new(script)
        .arg(bin_dir)
        .arg(layout)
        .arg(tag)
        .env("SOURCE_DATE_EPOCH", source_date_epoch.to_string()))?;
    Ok(out.trim().to_owned())
}

/// Unpacks `layout:tag` into `bundle` (umoci); returns the root file system.
pub fn unpack(layout: &Path, tag: &str, bundle: &Path) -> Result<std::path::PathBuf> {
    run(Command::new("umoci")
        .arg("unpack")
        .arg("--image")
        .arg(format!("{}:{tag}", layout.display()))
        .arg(bundle))?;
    Ok(bundle.join("rootfs"))
}

fn blob(layout: &Path, digest: &str) -> Result<serde_json::Value> {
    let hex = digest.strip_prefix("sha256:").context("sha256 digest")?;
    let text = std::fs::read_to_string(layout.join("blobs/sha256").join(hex))?;
    Ok(serde_json::from_str(&text)?)
}

/// The image's size in bytes: (compressed, as a registry stores and a node
/// pulls it: manifest, config and layers; unpacked: its files).
pub fn sizes(layout: &Path, tag: &str, digest: &str) -> Result<(u64, u64)> {
    let manifest = blob(layout, digest)?;
    let manifest_len = std::fs::metadata(
        layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")),
    )?
    .len();
    let size = |d: &serde_json::Value| d["size"].as_u64().unwrap_or(0);
    let layers: u64 = manifest["layers"]
        .as_array()
        .map(|ls| ls.iter().map(size).sum())
        .unwrap_or(0);
    let compressed = manifest_len + size(&manifest["config"]) + layers;
    let bundle = tempfile::tempdir()?;
    let root = unpack(layout, tag, &bundle.path().join("b"))?;
    let mut unpacked = 0;
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                unpacked += meta.len();
            }
        }
    }
    Ok((compressed, unpacked))
}

/// The uid and gid a container runtime runs container `name` of a pod
/// (`pod_spec`: a pod template's spec) as, for an image whose user is
/// `image` (umoci's runtime config: the image config's `User` resolved) and
/// whose `/etc/passwd` is `passwd`: `runAsUser` and `runAsGroup` of the
/// container, else of the pod, else the image's; a `runAsUser` without a
/// group gets that uid's group from the image's passwd (0 if none), as
/// containerd does. A user that breaks `runAsNonRoot` is an error: the
/// kubelet refuses to start the container.
pub fn container_user(
    pod_spec: &serde_yaml::Value,
    name: &str,
    image: (u32, u32),
    passwd: &str,
) -> Result<(u32, u32)> {
    let container = pod_spec["containers"]
        .as_sequence()
        .and_then(|cs| cs.iter().find(|c| c["name"].as_str() == Some(name)))
        .with_context(|| format!("no container {name} in the pod spec"))?;
    let setting = |key: &str| {
        let value = &container["securityContext"][key];
        let value = if value.is_null() {
            &pod_spec["securityContext"][key]
        } else {
            value
        };
        (!value.is_null()).then(|| value.clone())
    };
    let id = |key: &str| -> Result<Option<u32>> {
        setting(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .with_context(|| format!("{key}: {v:?}"))
            })
            .transpose()
    };
    let (uid, gid) = match (id("runAsUser")?, id("runAsGroup")?) {
        (None, None) => image,
        (None, Some(gid)) => (image.0, gid),
        (Some(uid), Some(gid)) => (uid, gid),
        (Some(uid), None) => (uid, primary_group(passwd, uid).unwrap_or(0)),
    };
    let non_root = setting("runAsNonRoot").and_then(|v| v.as_bool()) == Some(true);
    anyhow::ensure!(
        !(non_root && uid == 0),
        "container {name} has runAsNonRoot and would run as root"
    );
    Ok((uid, gid))
}

/// The primary group of `uid` in a passwd file.
fn primary_group(passwd: &str, uid: u32) -> Option<u32> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.get(2)?.parse::<u32>().ok()? == uid).then(|| fields.get(3)?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const PASSWD: &str = "root:x:0:0::/:/x\nnonroot:x:65532:65532::/:/x\n";

    fn user(pod: &str) -> Result<(u32, u32)> {
        let spec: serde_yaml::Value = serde_yaml::from_str(pod).unwrap();
        container_user(&spec, "d", (65532, 65532), PASSWD)
    }

    #[test]
    fn the_container_runs_as_the_images_user_unless_the_spec_says_otherwise() {
        let privileged = "containers: [{name: d, securityContext: {privileged: true}}]";
        assert_eq!(user(privileged).unwrap(), (65532, 65532));
        let explicit = "containers: [{name: d, securityContext: {runAsUser: 0, runAsGroup: 0}}]";
        assert_eq!(user(explicit).unwrap(), (0, 0));
        let pod_level = "securityContext: {runAsUser: 7}\ncontainers: [{name: d}]";
        assert_eq!(user(pod_level).unwrap(), (7, 0));
        let overridden = "securityContext: {runAsUser: 7, runAsGroup: 8}\n\
                          containers: [{name: d, securityContext: {runAsUser: 65532}}]";
        assert_eq!(user(overridden).unwrap(), (65532, 8));
        let root_no_group = "containers: [{name: d, securityContext: {runAsUser: 0}}]";
        assert_eq!(user(root_no_group).unwrap(), (0, 0));
        let refused = "securityContext: {runAsNonRoot: true}\n\
                       containers: [{name: d, securityContext: {runAsUser: 0}}]";
        assert!(user(refused).is_err());
        assert!(user("containers: [{name: other}]").is_err());
    }
}
