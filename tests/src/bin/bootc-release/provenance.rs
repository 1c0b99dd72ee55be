//! The release's provenance: an in-toto Statement (v1) whose predicate is
//! SLSA provenance v1, naming what was built (the image by its digest, each
//! file by its SHA-256), from which commit, by which command, on which
//! builder (its Rust toolchain).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// What `./dev release` is, as SLSA's `buildType`: the steps
/// docs/development.md's "Making a release" describes.
pub const BUILD_TYPE: &str = "urn:bootc-operator:dev-release:v1";

fn said(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A subject: a file of the release by its name and SHA-256.
fn subject(file: &Path) -> Result<Value> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let name = file
        .file_name()
        .with_context(|| format!("{}: no file name", file.display()))?
        .to_string_lossy();
    let digest = controller::target::registry::sha256_digest(&bytes);
    Ok(json!({"name": name, "digest": {"sha256": digest.trim_start_matches("sha256:")}}))
}

/// The Statement. `command` is the release's command line, `builder` the
/// builder's id, `started`/`finished` RFC 3339 times.
pub fn statement(
    digest: &str,
    repository: &str,
    command: &str,
    builder: &str,
    times: (&str, &str),
    files: &[std::path::PathBuf],
) -> Result<Value> {
    let Some(hex) = digest.strip_prefix("sha256:") else {
        bail!("--digest {digest}: a sha256:<hex> digest is required");
    };
    let mut subjects = vec![json!({"name": repository, "digest": {"sha256": hex}})];
    for file in files {
        subjects.push(subject(file)?);
    }
    let commit = said("git", &["rev-parse", "HEAD"])?;
    let mut source = json!({"name": "bootc-operator", "digest": {"gitCommit": commit}});
    if let Ok(remote) = said("git", &["remote", "get-url", "origin"]) {
        source["uri"] = json!(format!("git+{remote}"));
    }
    Ok(json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subjects,
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "command": command,
                    "source": source,
                },
                "resolvedDependencies": [source, {
                    "name": "Cargo.lock",
                    "digest": subject(Path::new("Cargo.lock"))?["digest"],
                }],
            },
            "runDetails": {
                "builder": {
                    "id": builder,
                    "version": {
                        "bootc-operator": env!("CARGO_PKG_VERSION"),
                        "rustc": said("rustc", &["-V"])?,
                        "cargo": said("cargo", &["-V"])?,
                    },
                },
                "metadata": {"startedOn": times.0, "finishedOn": times.1},
            },
        },
    }))
}
