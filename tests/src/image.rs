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
