//! A fake bootc host: a directory laid out by [`crate::fake_bootc::Layout`]
//! and a process holding its own mount namespace in which
//!
//! - `/usr/local/sbin` is a private tmpfs whose `bootc` runs the fake bootc
//!   on this host's directory, and whose `systemd-run` and `systemctl` run
//!   the fake host's systemd (found first on the helper's fixed PATH),
//! - `/run` is the host directory's `run/` (so the auth file lands there),
//! - `/proc/sys/kernel/random/boot_id` is the host directory's `boot_id`.
//!
//! The helper targets the holder's pid (`--host-pid`) and joins its mount
//! namespace with setns exactly as it joins PID 1's on a real node. The
//! holder exits when the [`FakeHost`] is dropped (its stdin closes), or when
//! the test process dies.

use crate::fake_bootc::{Invocation, Layout, State};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// A pinned image for tests: `127.0.0.1:5000/os@sha256:<n repeated>`.
pub fn image(n: char) -> String {
    format!("127.0.0.1:5000/os@sha256:{}", n.to_string().repeat(64))
}

/// The directory that holds the workspace's binaries (next to `deps/`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Where `./dev test` puts the helper it builds on its own (`cargo build
/// -p helper`, its own feature set: what ships), for the tests to run
/// instead of the workspace build (whose features cargo unifies with the
/// daemon's and the tests').
pub const SHIPPED_HELPER_ENV: &str = "BOOTC_HELPER_SHIPPED";

/// A workspace binary built next to the tests (bootc-daemon, bootc-helper,
/// fake-bootc); for bootc-helper, the shipped build when
/// [`SHIPPED_HELPER_ENV`] names one.
pub fn bin(name: &str) -> PathBuf {
    match std::env::var_os(SHIPPED_HELPER_ENV) {
        Some(shipped) if name == "bootc-helper" => PathBuf::from(shipped),
        _ => target_dir().join(name),
    }
}

/// Whether the tests can create namespaces and drop privilege. CI runs as
/// root; elsewhere the privileged tests fail unless [`SKIP_ROOT_ENV`] asks
/// to skip them.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|v| v.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Set to `1` to skip (pass, saying so) the tests that need root when not
/// root. Unset, they fail: a green suite that never ran is worse than a red one.
pub const SKIP_ROOT_ENV: &str = "BOOTC_TEST_SKIP_ROOT";

/// Whether a test that needs root runs: as root, yes; otherwise no (with a
/// SKIPPED line) when [`SKIP_ROOT_ENV`] is `1`, and a panic saying how to
/// run it when not.
#[allow(clippy::print_stderr)] // the skip is said where the test's output goes
pub fn root_or_explicit_skip() -> bool {
    if is_root() {
        return true;
    }
    if std::env::var_os(SKIP_ROOT_ENV).is_some_and(|v| v == "1") {
        eprintln!("SKIPPED ({SKIP_ROOT_ENV}=1): this test needs root");
        return false;
    }
    panic!(
        "this test needs root (namespaces, setns, privilege drop) and did not run: \
         run the tests as root, or set {SKIP_ROOT_ENV}=1 to skip them knowingly"
    );
}

/// Runs the calling test only as root: otherwise it fails, or returns
/// (skipped, saying so) when [`SKIP_ROOT_ENV`] is `1`.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::fake_host::root_or_explicit_skip() {
            return;
        }
    };
}

/// One fake host.
#[derive(Debug)]
pub struct FakeHost {
    pub layout: Layout,
    _dir: tempfile::TempDir,
    holder: Child,
    stdin: Option<ChildStdin>,
}

const SETUP: &str = r#"set -e
mkdir -p /usr/local/sbin
mount -t tmpfs -o mode=0755,size=1m fake-bootc /usr/local/sbin
install -m 0755 "$1/bootc-wrapper" /usr/local/sbin/bootc
install -m 0755 "$1/systemd-run-wrapper" /usr/local/sbin/systemd-run
install -m 0755 "$1/systemctl-wrapper" /usr/local/sbin/systemctl
mount --bind "$1/run" /run
mount --bind "$1/boot_id" /proc/sys/kernel/random/boot_id
echo ready
exec head -c 1 >/dev/null
"#;

impl FakeHost {
    /// Starts a fake host booted into `booted` (a pinned reference), its
    /// image masking bootc's own update timer as a user's image would (see
    /// [`FakeHost::leave_updater_on`]).
    pub fn start(booted: Option<&str>) -> std::io::Result<FakeHost> {
        FakeHost::start_installed(booted.map(crate::fake_bootc::Deployment::of))
    }

    /// Starts a fake host booted into `booted` as given (e.g. installed
    /// from a tag: [`crate::fake_bootc::Deployment::installed`]).
    pub fn start_installed(
        booted: Option<crate::fake_bootc::Deployment>,
    ) -> std::io::Result<FakeHost> {
        let dir = tempfile::Builder::new().prefix("fake-host-").tempdir()?;
        let layout = Layout::new(dir.path());
        layout.init_installed(booted)?;
        layout
            .systemd()
            .set_unit_file(api::host_updaters::BOOTC_TIMER, "masked")?;
        for (file, tool) in [
            ("bootc-wrapper", ""),
            ("systemd-run-wrapper", " --as systemd-run"),
            ("systemctl-wrapper", " --as systemctl"),
        ] {
            let wrapper = format!(
                "#!/bin/sh\nexec '{}' --fake-root '{}'{tool} \"$@\"\n",
                bin("fake-bootc").display(),
                dir.path().display()
            );
            std::fs::write(dir.path().join(file), wrapper)?;
        }
        let mut holder = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                SETUP,
                "sh",
            ])
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut line = String::new();
        if let Some(out) = holder.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        if line.trim() != "ready" {
            let _ = holder.kill();
            let _ = holder.wait();
            return Err(std::io::Error::other(format!(
                "fake host setup failed (got {line:?})"
            )));
        }
        let stdin = holder.stdin.take();
        Ok(FakeHost {
            layout,
            _dir: dir,
            holder,
            stdin,
        })
    }

    /// Sets the host's bootc update timer as Fedora ships it (`enabled`),
    /// or masked again (`false`), as a new image of the host would.
    pub fn leave_updater_on(&self, on: bool) -> std::io::Result<()> {
        let state = if on { "enabled" } else { "masked" };
        self.layout
            .systemd()
            .set_unit_file(api::host_updaters::BOOTC_TIMER, state)
    }

    /// Layers a package on the booted deployment (`rpm-ostree install`,
    /// as a person might by hand), or resets it (`rpm-ostree reset`):
    /// bootc then reports it incompatible, or not. The host's bootc
    /// directory is touched, as ostree does, so that the daemon reads it.
    pub fn layer_locally(&self, layered: bool) -> std::io::Result<()> {
        let mut state = self.layout.read_state()?;
        if let Some(booted) = state.booted.as_mut() {
            booted.incompatible = layered;
        }
        self.layout.write_state(&state)?;
        std::fs::File::open(self.layout.ostree_bootc())?.set_modified(std::time::SystemTime::now())
    }

    /// Removes ostree's finalization lock file: a staged deployment locked
    /// by it (as the helper locks on released bootc) becomes unlocked.
    pub fn unlock_staged(&self) -> std::io::Result<()> {
        self.layout.unlock_finalization()
    }

    /// The pid whose mount namespace is this host's (`--host-pid`).
    pub fn pid(&self) -> i32 {
        self.holder.id() as i32
    }

    pub fn root(&self) -> &Path {
        &self.layout.root
    }

    /// `readlink /proc/<holder>/ns/mnt`.
    pub fn mount_ns(&self) -> String {
        std::fs::read_link(format!("/proc/{}/ns/mnt", self.pid()))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    pub fn state(&self) -> State {
        self.layout.read_state().unwrap_or_default()
    }

    pub fn invocations(&self) -> Vec<Invocation> {
        self.layout.read_invocations()
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        // The host goes away: so do its transient units.
        let _ = self.layout.systemd().stop_all();
        drop(self.stdin.take());
        let _ = self.holder.wait();
    }
}

/// A helper started by the test process the way the daemon starts it
/// (socketpair, fd 3, parent-death signal), targeting `host`.
#[derive(Debug)]
pub struct TestHelper {
    pub process: daemon::confinement::spawn::HelperProcess,
    pub client: daemon::agent::helper_client::HelperClient,
}

impl FakeHost {
    /// Starts `bootc-helper` against this host and connects to it.
    pub async fn helper(&self, apply_window: std::time::Duration) -> anyhow::Result<TestHelper> {
        self.helper_with(daemon::confinement::spawn::HelperOptions {
            apply_window,
            ..Default::default()
        })
        .await
    }

    /// [`FakeHost::helper`] with more options (allowed repositories,
    /// signature policy); path and host pid are filled in.
    pub async fn helper_with(
        &self,
        options: daemon::confinement::spawn::HelperOptions,
    ) -> anyhow::Result<TestHelper> {
        let (process, socket) =
            daemon::confinement::spawn::start(&daemon::confinement::spawn::HelperOptions {
                path: bin("bootc-helper"),
                host_pid: self.pid(),
                ..options
            })?;
        let client = daemon::agent::helper_client::connect(socket).await?;
        Ok(TestHelper { process, client })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A test that needs root, for the test below to run as nobody.
    #[test]
    fn needs_root() {
        crate::require_root!();
    }

    /// `cmd` as nobody, without the skip variable (unless `skip` sets it).
    fn as_nobody(program: &Path, args: &[&str], skip: Option<&str>) -> std::process::Output {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(program)
            .args(args)
            .env_remove(SKIP_ROOT_ENV);
        if let Some(value) = skip {
            cmd.env(SKIP_ROOT_ENV, value);
        }
        cmd.output().unwrap()
    }

    #[test]
    fn a_root_test_fails_when_not_root_unless_skipping_is_asked_for() {
        crate::require_root!();
        let exe = std::env::current_exe().unwrap();
        let args = ["--exact", "fake_host::tests::needs_root", "--nocapture"];
        for skip in [None, Some("0")] {
            let out = as_nobody(&exe, &args, skip);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{skip:?}: passed as nobody\n{stderr}"
            );
            assert!(
                stderr.contains("needs root") && stderr.contains(SKIP_ROOT_ENV),
                "{stderr}"
            );
        }
        let out = as_nobody(&exe, &args, Some("1"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("SKIPPED"), "{stderr}");
    }

    #[test]
    fn dev_test_refuses_to_start_without_root() {
        crate::require_root!();
        // No cargo on this PATH: were the check missing, `./dev test` would
        // stop at "cargo not found" instead, before building anything.
        let dev = crate::repo_root().join("dev");
        let out = as_nobody(
            Path::new("/usr/bin/env"),
            &[
                "-i",
                "PATH=/usr/bin:/bin",
                "bash",
                dev.to_str().unwrap(),
                "test",
            ],
            None,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("./dev test needs root"), "{stderr}");
    }
}
