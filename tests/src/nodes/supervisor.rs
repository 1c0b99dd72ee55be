//! The supervisor of one node container (the `bootc-node` binary): what a
//! machine's firmware and power button are to a real node. It runs in a
//! mount namespace of its own (the node's root is an overlay nobody else
//! sees, and it vanishes with the supervisor), puts itself in a cgroup of its
//! own in every hierarchy (the node's cgroup namespace is rooted there), and
//! boots the node with `systemd-nspawn` until it stops:
//!
//! - exit 133 is the node's own reboot (`systemctl reboot`): boot again, from
//!   the same disk, after removing the cgroups the last boot left (a real
//!   reboot starts with none; cAdvisor stalls the kubelet on stale ones);
//! - a `crash` file in the node's directory (the test wrote it, then killed
//!   nspawn) also boots again: a crash and power-on;
//! - anything else, a `stop` file, or SIGTERM (forwarded to nspawn, which
//!   halts the node in order) stops: the node is off. A `stop` file written
//!   while the node runs takes effect when that boot ends (a power cut
//!   during the reboot); a new supervisor is pressing the power button.
//!
//! Each boot is a line of `boots.log`, numbered on from the last
//! supervisor's; nspawn's pid is in `nspawn.pid`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{SigSet, Signal};
use serde::{Deserialize, Serialize};

/// nspawn's exit status when the container rebooted.
pub const REBOOT_EXIT: i32 = 133;
/// At most this many boots per supervisor (a node that reboots in a loop
/// stops instead of spinning).
const MAX_BOOTS: u32 = 40;

/// What the supervisor boots (written as JSON by `crate::nodes`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeSpec {
    pub name: String,
    /// The node's directory: `upper/`, `work/`, `merged/`, `containerd/`,
    /// `boots.log`, `console.log`, the control files.
    pub dir: PathBuf,
    /// The overlay's lower layers, top first (the shared layer, the rootfs).
    pub lower: Vec<PathBuf>,
    /// The node's network namespace (`/proc/<holder>/ns/net`): it outlives
    /// each boot, as a machine's network card does.
    pub netns: PathBuf,
    pub nspawn: PathBuf,
    /// Host files the node sees read-only: (host path, path in the node).
    pub binds_ro: Vec<(PathBuf, String)>,
}

impl NodeSpec {
    pub fn boots_log(&self) -> PathBuf {
        self.dir.join("boots.log")
    }
    pub fn stop_file(&self) -> PathBuf {
        self.dir.join("stop")
    }
    pub fn crash_file(&self) -> PathBuf {
        self.dir.join("crash")
    }
    pub fn nspawn_pid_file(&self) -> PathBuf {
        self.dir.join("nspawn.pid")
    }
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }
    fn merged(&self) -> PathBuf {
        self.dir.join("merged")
    }
}

/// One line of `boots.log`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootRecord {
    pub boot: u32,
    /// None: the boot is running.
    pub exit: Option<i32>,
    pub unix_ms: u64,
}

/// The boots recorded in `boots.log`.
pub fn read_boots(spec: &NodeSpec) -> Vec<BootRecord> {
    std::fs::read_to_string(spec.boots_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn record(spec: &NodeSpec, rec: &BootRecord) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(spec.boots_log())?;
    writeln!(f, "{}", serde_json::to_string(rec)?)?;
    Ok(())
}

/// Runs the node until it stops for good; cleans up its cgroups.
pub fn run(spec: &NodeSpec) -> Result<()> {
    private_mounts()?;
    let cgroups = Cgroups::enter(&spec.name)?;
    mount_root(spec)?;
    // SIGTERM and SIGCHLD are taken with sigwait; the child starts with an
    // empty mask (std resets it before exec).
    let signals = signal_set();
    signals.thread_block()?;
    let result = boot_loop(spec, &cgroups, &signals);
    cgroups.remove();
    result
}

fn signal_set() -> SigSet {
    let mut set = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGCHLD] {
        set.add(s);
    }
    set
}

fn boot_loop(spec: &NodeSpec, cgroups: &Cgroups, signals: &SigSet) -> Result<()> {
    let before = read_boots(spec).last().map_or(0, |b| b.boot);
    for boot in before + 1..=before + MAX_BOOTS {
        if spec.stop_file().exists() {
            return Ok(());
        }
        cgroups.clear_children();
        record(
            spec,
            &BootRecord {
                boot,
                exit: None,
                unix_ms: unix_ms(),
            },
        )?;
        let mut child = nspawn(spec)?;
        std::fs::write(spec.nspawn_pid_file(), child.id().to_string())?;
        let (code, stopping) = wait(&mut child, signals)?;
        record(
            spec,
            &BootRecord {
                boot,
                exit: Some(code),
                unix_ms: unix_ms(),
            },
        )?;
        let crashed = std::fs::remove_file(spec.crash_file()).is_ok();
        if stopping || !(code == REBOOT_EXIT || crashed) {
            return Ok(());
        }
    }
    bail!("{} booted {MAX_BOOTS} times: stopped", spec.name)
}

/// Waits for nspawn; a SIGTERM on the way is passed on (an orderly halt).
/// Returns its exit code (128 + signal when killed) and whether a stop was
/// asked for.
fn wait(child: &mut Child, signals: &SigSet) -> Result<(i32, bool)> {
    let mut stopping = false;
    loop {
        if let Some(status) = child.try_wait()? {
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            return Ok((code, stopping));
        }
        match signals.wait()? {
            Signal::SIGCHLD => {}
            _ => {
                stopping = true;
                let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id())?);
                let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            }
        }
    }
}

fn nspawn(spec: &NodeSpec) -> Result<Child> {
    let console = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(spec.dir.join("console.log"))?;
    let mut cmd = Command::new(&spec.nspawn);
    cmd.arg("-D")
        .arg(spec.merged())
        .args(["-M", &spec.name])
        .args(["--register=no", "--keep-unit", "--capability=all"])
        .args(["--console=pipe", "--bind=/dev/kmsg"])
        .arg(format!("--network-namespace-path={}", spec.netns.display()))
        .arg(format!(
            "--bind={}:/var/lib/containerd",
            spec.dir.join("containerd").display()
        ));
    for (host, node) in &spec.binds_ro {
        cmd.arg(format!("--bind-ro={}:{node}", host.display()));
    }
    // nspawn's own seccomp filter would refuse what runc and the kubelet need.
    cmd.env("SYSTEMD_SECCOMP", "0")
        .arg("/usr/local/sbin/node-init")
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console);
    cmd.spawn()
        .with_context(|| format!("starting {}", spec.nspawn.display()))
}

/// The node's mounts stay in this process's own mount namespace.
fn private_mounts() -> Result<()> {
    use nix::mount::{MsFlags, mount};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).context("unshare(CLONE_NEWNS)")?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("making / private")?;
    Ok(())
}

/// The node's disk: its upper directory over the shared layers.
fn mount_root(spec: &NodeSpec) -> Result<()> {
    use nix::mount::{MsFlags, mount};
    for d in ["upper", "work", "merged", "containerd"] {
        std::fs::create_dir_all(spec.dir.join(d))?;
    }
    let lower: Vec<String> = spec.lower.iter().map(|p| p.display().to_string()).collect();
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.join(":"),
        spec.upper().display(),
        spec.dir.join("work").display()
    );
    mount(
        Some("overlay"),
        &spec.merged(),
        Some("overlay"),
        MsFlags::empty(),
        Some(options.as_str()),
    )
    .with_context(|| format!("mounting the overlay ({options})"))
}

/// The node's cgroup in every hierarchy, below the supervisor's own.
struct Cgroups {
    dirs: Vec<PathBuf>,
}

impl Cgroups {
    fn enter(name: &str) -> Result<Cgroups> {
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let mut dirs = Vec::new();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
            let (Some(controllers), Some(path)) = (controllers, path) else {
                continue;
            };
            let Some(mount) = hierarchy_mount(controllers) else {
                continue;
            };
            let parent = mount.join(path.trim_start_matches('/'));
            let dir = parent.join(format!("bootc-node-{name}"));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            if controllers.split(',').any(|c| c == "cpuset") {
                // A new cpuset cgroup has no CPUs or memory nodes until told.
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    std::fs::write(dir.join(f), std::fs::read(parent.join(f))?)?;
                }
            }
            std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
                .with_context(|| format!("joining {}", dir.display()))?;
            dirs.push(dir);
        }
        Ok(Cgroups { dirs })
    }

    /// Removes every cgroup below the node's own (left by the last boot).
    fn clear_children(&self) {
        for dir in &self.dirs {
            remove_below(dir);
        }
    }

    /// Removes the node's cgroups (the supervisor leaves them first).
    fn remove(&self) {
        for dir in &self.dirs {
            remove_below(dir);
            if let Some(parent) = dir.parent() {
                let _ = std::fs::write(parent.join("cgroup.procs"), std::process::id().to_string());
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Where a cgroup v1 hierarchy (or the v2 one, `0::`) is mounted.
fn hierarchy_mount(controllers: &str) -> Option<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    let candidates = match controllers {
        "" => vec!["unified".to_owned()],
        c => vec![c.trim_start_matches("name=").to_owned(), c.to_owned()],
    };
    candidates
        .into_iter()
        .map(|c| base.join(c))
        .find(|p| p.join("cgroup.procs").exists())
}

/// rmdir of every directory below `dir`, deepest first (cgroups go only
/// with rmdir, never with their pseudo-files).
fn remove_below(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_below(&entry.path());
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
