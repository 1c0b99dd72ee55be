//! kstatus's verdict on objects: the real library
//! (`sigs.k8s.io/cli-utils/pkg/kstatus`, what Flux and Argo CD build their
//! health checks on) through the small Go program in `tests/kstatus/`, built
//! with the `go` on PATH from the module proxy (its go.sum is committed).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// The Go program's directory.
fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kstatus")
}

/// Builds the verdict program into `dir`; returns its path.
pub fn build(dir: &Path) -> Result<PathBuf> {
    let out = dir.join("kstatus-verdict");
    let built = Command::new("go")
        .args(["build", "-mod=readonly", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(source_dir())
        .output()
        .context("running go build (is Go >= 1.22 on PATH? ./dev setup installs it)")?;
    if !built.status.success() {
        bail!(
            "go build of tests/kstatus failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        );
    }
    Ok(out)
}

/// kstatus's status (InProgress, Current, Failed, ...) of each object, by
/// its name, in order.
pub fn verdicts(program: &Path, objects: &[serde_json::Value]) -> Result<Vec<(String, String)>> {
    let mut child = Command::new(program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(&serde_json::to_vec(objects)?)?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("kstatus-verdict: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, status)| (name.to_owned(), status.to_owned()))
        .collect())
}
