//! The small images the real nodes run besides the operator's, built without
//! a container engine (umoci) from Debian's static busybox: the pause image
//! (a pod's PID 1, which must exit on SIGTERM or every reboot waits 90 s for
//! it) and the workload the tests drain and reschedule.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::registry::TestRegistry;

/// The static busybox (package busybox-static).
const BUSYBOX: &str = "/bin/busybox";

/// The tools image's repository and tag in the cluster's registry.
pub const TOOLS: &str = "bootc-test/tools:1";

/// The pause image's command: sleeps until SIGTERM or SIGINT, then exits.
pub const PAUSE_COMMAND: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

fn run(cmd: &mut Command) -> Result<()> {
    crate::pki::run(cmd)
}

/// Builds the tools image (busybox, its applets linked, `sh` as entrypoint
/// running [`PAUSE_COMMAND`]) into the OCI layout `layout`.
pub fn build_tools(layout: &Path) -> Result<()> {
    let work = tempfile::tempdir()?;
    let root = work.path().join("rootfs");
    std::fs::create_dir_all(root.join("bin"))?;
    std::fs::copy(BUSYBOX, root.join("bin/busybox"))
        .with_context(|| format!("copying {BUSYBOX} (package busybox-static)"))?;
    for applet in ["sh", "sleep", "cat", "true", "ls", "echo", "wget", "nc"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet))?;
    }
    let tag = "1";
    let image = format!("{}:{tag}", layout.display());
    run(Command::new("umoci")
        .arg("init")
        .arg("--layout")
        .arg(layout))?;
    run(Command::new("umoci").args(["new", "--image", &image]))?;
    run(Command::new("umoci")
        .args(["insert", "--image", &image])
        .arg(&root)
        .arg("/"))?;
    run(Command::new("umoci").args([
        "config",
        "--no-history",
        "--image",
        &image,
        "--config.entrypoint",
        "/bin/sh",
        "--config.cmd",
        "-c",
        "--config.cmd",
        PAUSE_COMMAND,
        "--config.env",
        "PATH=/bin",
    ]))
}

/// Pushes `layout:tag` to `registry` as `repo_tag` with a real registry
/// client (skopeo), trusting the registry's CA.
pub fn push(layout: &Path, tag: &str, registry: &TestRegistry, repo_tag: &str) -> Result<()> {
    let certs = tempfile::tempdir()?;
    std::fs::write(certs.path().join("ca.crt"), registry.ca_pem()?)?;
    run(Command::new("skopeo")
        .args(["copy", "--quiet", "--dest-creds"])
        .arg(registry.credentials())
        .arg("--dest-cert-dir")
        .arg(certs.path())
        .arg(format!("oci:{}:{tag}", layout.display()))
        .arg(format!("docker://{}/{repo_tag}", registry.host())))
}
