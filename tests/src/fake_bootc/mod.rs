//! A fake `bootc` following real bootc's command-line contract
//! (`reference/bootc-contract.md` in the shared fixtures' parent), version
//! by version, with its state in files under a fake host root:
//!
//! ```text
//! <root>/ostree/bootc/            mtime touched after a real staging, like bootc
//! <root>/run/                     the host's /run (auth file: run/ostree/auth.json)
//! <root>/etc/ostree/auth.json, <root>/usr/lib/ostree/auth.json   bootc's other auth files
//! <root>/boot_id                  the host's /proc/sys/kernel/random/boot_id
//! <root>/fake-bootc/state.json    booted / staged / rollback deployments
//! <root>/fake-bootc/version       "1.16" (released bootc, the default) or "pr" (PR #2342's CLI)
//! <root>/run/ostree/staged-deployment-locked   ostree's finalization lock file: while it exists an
//!                                 orderly reboot does not finalize the staged deployment; staging over
//!                                 a staged deployment removes it, as ostree does
//! <root>/fake-bootc/help-dir      bootc's rendered help texts (shared fixtures), when present
//! <root>/fake-bootc/invocations.jsonl  one line per run: argv, mount ns, env, pid, auth file
//! <root>/fake-bootc/fail          failure injection: pull-error | unauthorized | not-found | no-space
//! <root>/fake-bootc/fail-status   present: `status` fails (exit 1) with this error chain (a broken bootc)
//! <root>/fake-bootc/no-soft-reboot present: staged deployments are not soft-reboot capable
//! <root>/fake-bootc/reboot-refused present: `systemctl reboot` does nothing (an `--apply` returns, the host stays up)
//! <root>/fake-bootc/reboot-crashes present: a planned reboot goes down as a crash (nothing staged is finalized)
//! <root>/fake-bootc/stage-delay-ms milliseconds each `switch` that stages takes (a slow pull), an unchanged spec's too
//! <root>/fake-bootc/rebooted.jsonl one line per simulated reboot, planned or not
//! <root>/fake-systemd/            the fake host's transient units (see crate::fake_systemd)
//! <root>/fake-systemd/unit-files/<unit>  an installed unit's UnitFileState: the host's
//!                                 own automatic updaters (`api::host_updaters`), which
//!                                 `systemctl show` reports; bootc-fetch-apply-updates.timer
//!                                 is `enabled` after `init`, as Fedora's bootc images ship it
//! ```
//!
//! <root>/fake-bootc/pull-from-registry present: `switch` fetches the manifest
//! (the per-platform one of an index) and config where containers/image
//! would (`crate::image_pull`: the mirrors `etc/containers/registries.conf`
//! and its `registries.conf.d/*.conf` name, then the registry in the
//! reference; a blocked one refused) with bootc's auth file and the CA in
//! `etc/containers/certs.d/<registry>/ca.crt`, so a wrong pull secret fails
//! with the registry's 401, a missing image with its 404, and a host whose
//! registries.conf lacks the mirror with the source's refusal, end to end.
//! Without it the digest is taken from the pinned reference (unit-style
//! tests with no registry), and the fault injections stand in.
//!
//! Where the fake knowingly differs from bootc: it stages only pinned
//! references (the node agent never stages a tag), it models the ostree
//! backend only (no composefs), and `status --format=humanreadable` is a
//! short text of our own.

pub mod cli;
mod real_host;
mod switch;

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use switch::{Environment, Outcome, UnplannedReboot, help_text, run};

/// The bootc the fake plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BootcVersion {
    /// v1.16.9, the newest release: `switch` has no `--download-only` /
    /// `--from-downloaded` (the node agent locks its staging with ostree's
    /// lock file instead).
    V1_16,
    /// bootc PR #2342's CLI: locked staging with `switch --download-only`
    /// and `switch --from-downloaded`.
    Pr,
}

impl BootcVersion {
    pub const ALL: [BootcVersion; 2] = [BootcVersion::V1_16, BootcVersion::Pr];

    /// The name in `--bootc-versions` and in the layout's `version` file.
    pub fn name(self) -> &'static str {
        match self {
            BootcVersion::V1_16 => "1.16",
            BootcVersion::Pr => "pr",
        }
    }

    /// The suffix of bootc's rendered help files for this version.
    pub fn fixture_suffix(self) -> &'static str {
        match self {
            BootcVersion::V1_16 => "v1.16.9",
            BootcVersion::Pr => "pr2342",
        }
    }

    /// What `bootc --version` prints.
    pub fn version_line(self) -> &'static str {
        match self {
            BootcVersion::V1_16 => "bootc 1.16.9\n",
            BootcVersion::Pr => "bootc 1.16.9+pr2342\n",
        }
    }

    pub fn parse(s: &str) -> Option<BootcVersion> {
        match s.trim() {
            "1.16" | "1.16.9" | "v1.16.9" => Some(BootcVersion::V1_16),
            "pr" | "pr2342" => Some(BootcVersion::Pr),
            _ => None,
        }
    }

    /// Has `switch --download-only` / `--from-downloaded`?
    pub fn has_download_only(self) -> bool {
        self == BootcVersion::Pr
    }
}

/// One deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub image: String,
    pub digest: String,
    pub version: Option<String>,
    pub timestamp: Option<String>,
    pub architecture: String,
    pub download_only: bool,
    pub soft_reboot_capable: bool,
    /// Local rpm-ostree changes (a layered package): bootc reports the
    /// deployment `incompatible`, with no image.
    #[serde(default)]
    pub incompatible: bool,
}

impl Deployment {
    /// A host installed from `image` (a tag, as `bootc install` and every
    /// published bootc image leave it) that resolved to `digest`: bootc
    /// reports the reference as given and the manifest digest it deployed.
    pub fn installed(image: &str, digest: &str) -> Deployment {
        Deployment {
            digest: digest.to_owned(),
            ..Deployment::of(image)
        }
    }

    /// A deployment of a pinned reference (digest taken from the reference).
    pub fn of(image: &str) -> Deployment {
        Deployment {
            image: image.to_owned(),
            digest: image
                .split_once('@')
                .map(|(_, d)| d.to_owned())
                .unwrap_or_default(),
            version: Some("1".into()),
            timestamp: Some("2026-01-01T00:00:00Z".into()),
            architecture: std::env::consts::ARCH
                .replace("x86_64", "amd64")
                .replace("aarch64", "arm64"),
            download_only: false,
            soft_reboot_capable: false,
            incompatible: false,
        }
    }
}

/// The fake host's bootc state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub booted: Option<Deployment>,
    pub staged: Option<Deployment>,
    pub rollback: Option<Deployment>,
    /// `/run/nextroot` is prepared (a `--soft-reboot` run for a capable
    /// staged deployment): the next orderly reboot is a soft one.
    #[serde(default)]
    pub nextroot: bool,
}

/// One recorded run of the fake bootc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    pub argv: Vec<String>,
    /// `readlink /proc/self/ns/mnt` of the fake bootc process.
    pub mount_ns: String,
    /// `KEY=VALUE` pairs of its environment.
    pub env: Vec<String>,
    pub uid: u32,
    /// Open descriptors above 2 (what bootc inherited), as `fd -> target`.
    #[serde(default)]
    pub extra_fds: Vec<String>,
    /// When the run started, microseconds since the Unix epoch (benchmarks).
    #[serde(default)]
    pub unix_micros: u64,
    /// The auth file bootc would use when the run started (the first of
    /// `run/`, `etc/`, `usr/lib/` `ostree/auth.json` that exists; None:
    /// none exists, anonymous), that is, the credentials a pull would use.
    #[serde(default)]
    pub auth_file: Option<String>,
    /// The process id (a transient unit's main process has the id the fake
    /// systemd recorded for it).
    #[serde(default)]
    pub pid: i32,
    /// The parent's process id: the helper for a run it started itself, the
    /// unit runner for a run in a transient unit.
    #[serde(default)]
    pub ppid: i32,
}

impl Invocation {
    /// The value of `key` in the run's environment.
    pub fn env_var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
    }
}

/// One simulated reboot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reboot {
    pub soft: bool,
    /// The image booted afterwards.
    pub image: String,
    pub old_boot_id: String,
    pub new_boot_id: String,
    /// Not asked for through bootc (a crash, or an orderly reboot by
    /// someone else).
    #[serde(default)]
    pub unplanned: bool,
    /// The staged deployment was finalized (booted) by this reboot.
    #[serde(default)]
    pub applied_staged: bool,
}

/// Injectable failures of `switch` (staging), in bootc's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The registry cannot be reached.
    PullError,
    /// The registry refuses the credentials (401).
    Unauthorized,
    /// The image is not in the registry (404).
    NotFound,
    /// Not enough disk space for the image (bootc 1.14+ checks first).
    NoSpace,
}

/// The error chain bootc prints for a failed pull, before the registry's
/// own words (`cli.rs`/`store.rs` contexts and containers-image-proxy's).
pub const PULL_ERROR_PREFIX: &str = "error: Switching: Switching (ostree): Preparing import: Fetching manifest: failed to invoke method OpenImage: ";

impl Fault {
    pub const ALL: [Fault; 4] = [
        Fault::PullError,
        Fault::Unauthorized,
        Fault::NotFound,
        Fault::NoSpace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::PullError => "pull-error",
            Fault::Unauthorized => "unauthorized",
            Fault::NotFound => "not-found",
            Fault::NoSpace => "no-space",
        }
    }

    fn parse(s: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == s.trim())
    }

    /// What bootc prints on stderr (exit 1) for this failure of `image`.
    pub fn message(self, image: &str) -> String {
        let (repo, digest) = image.split_once('@').unwrap_or((image, ""));
        let host = repo.split('/').next().unwrap_or(repo);
        match self {
            Fault::PullError => format!(
                "{PULL_ERROR_PREFIX}pinging container registry {host}: Get \"https://{host}/v2/\": dial tcp {host}: connect: connection refused"
            ),
            Fault::Unauthorized => format!(
                "{PULL_ERROR_PREFIX}reading manifest {digest} in {repo}: authentication required"
            ),
            Fault::NotFound => {
                format!("{PULL_ERROR_PREFIX}reading manifest {digest} in {repo}: manifest unknown")
            }
            Fault::NoSpace => format!(
                "error: Switching: Switching (ostree): Insufficient free space for {image} (available: 512.0 MB required: 2.1 GB)"
            ),
        }
    }
}

/// An error chain of a broken bootc's `status`, for [`Layout::set_status_fault`]:
/// the shape of the composefs metadata failures of bootc-dev/bootc#2422
/// (the cause after the first context is our own example).
pub const BROKEN_STATUS: &str = "Status: Getting composefs deployment status: Reading origin file: No such file or directory (os error 2)";

/// bootc's auth files, first existing wins (no merging), relative to `/`.
pub const AUTH_FILES: [&str; 3] = [
    "run/ostree/auth.json",
    "etc/ostree/auth.json",
    "usr/lib/ostree/auth.json",
];

/// Paths of a fake host root.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }
    pub fn dir(&self) -> PathBuf {
        self.root.join("fake-bootc")
    }
    pub fn state(&self) -> PathBuf {
        self.dir().join("state.json")
    }
    pub fn invocations(&self) -> PathBuf {
        self.dir().join("invocations.jsonl")
    }
    pub fn reboots(&self) -> PathBuf {
        self.dir().join("rebooted.jsonl")
    }
    pub fn fail(&self) -> PathBuf {
        self.dir().join("fail")
    }
    /// Present: `status` fails with the error chain it holds.
    pub fn status_fault(&self) -> PathBuf {
        self.dir().join("fail-status")
    }
    fn version_file(&self) -> PathBuf {
        self.dir().join("version")
    }
    fn help_dir_file(&self) -> PathBuf {
        self.dir().join("help-dir")
    }
    pub fn no_soft_reboot(&self) -> PathBuf {
        self.dir().join("no-soft-reboot")
    }
    /// Present: `switch` pulls the manifest and config from the registry in
    /// the reference, with bootc's auth file and the CA in
    /// `etc/containers/certs.d/<registry>/ca.crt`, as real bootc does.
    pub fn pull_from_registry(&self) -> PathBuf {
        self.dir().join("pull-from-registry")
    }
    /// Present: `systemctl reboot` does nothing and says nothing (a
    /// shutdown that never comes: an inhibitor, a wedged systemd): an
    /// `--apply` returns and the host stays up.
    pub fn reboot_refused(&self) -> PathBuf {
        self.dir().join("reboot-refused")
    }
    /// Present: the host crashes on its way down for `systemctl reboot`
    /// (a hung shutdown reset by a watchdog): the staged deployment is not
    /// finalized and the host boots what it ran.
    pub fn reboot_crashes(&self) -> PathBuf {
        self.dir().join("reboot-crashes")
    }
    /// Holds milliseconds: a pull takes that long.
    pub fn stage_delay(&self) -> PathBuf {
        self.dir().join("stage-delay-ms")
    }
    pub fn ostree_bootc(&self) -> PathBuf {
        self.root.join("ostree/bootc")
    }
    pub fn boot_id(&self) -> PathBuf {
        self.root.join("boot_id")
    }
    /// `run/ostree/auth.json`, where the helper writes.
    pub fn auth(&self) -> PathBuf {
        self.root.join(AUTH_FILES[0])
    }
    /// ostree's finalization lock file (`/run/ostree/staged-deployment-locked`).
    pub fn finalization_lock(&self) -> PathBuf {
        self.root.join("run/ostree/staged-deployment-locked")
    }
    /// Removes the finalization lock file, if present: a staged deployment
    /// locked by it becomes unlocked.
    pub fn unlock_finalization(&self) -> std::io::Result<()> {
        switch::remove_if_present(&self.finalization_lock())
    }
    /// The fake host's systemd (transient units).
    pub fn systemd(&self) -> crate::fake_systemd::FakeSystemd {
        crate::fake_systemd::FakeSystemd::new(self.root.join("fake-systemd"))
    }

    /// The auth file bootc would read now: the first of [`AUTH_FILES`] that
    /// exists (None: anonymous).
    pub fn effective_auth(&self) -> Option<PathBuf> {
        AUTH_FILES
            .iter()
            .map(|f| self.root.join(f))
            .find(|p| p.exists())
    }

    /// Creates the layout with `booted` as the booted image (a pinned
    /// reference), playing the newest released bootc ([`BootcVersion::V1_16`])
    /// until told otherwise, with bootc's own help texts when the shared
    /// fixtures are there, and bootc's own update timer enabled, as Fedora
    /// and CentOS Stream ship it.
    pub fn init(&self, booted: Option<&str>) -> std::io::Result<()> {
        self.init_installed(booted.map(Deployment::of))
    }

    /// [`Layout::init`] with the booted deployment as given (e.g.
    /// [`Deployment::installed`] from a tag).
    pub fn init_installed(&self, booted: Option<Deployment>) -> std::io::Result<()> {
        std::fs::create_dir_all(self.dir())?;
        std::fs::create_dir_all(self.ostree_bootc())?;
        std::fs::create_dir_all(self.root.join("run"))?;
        std::fs::write(self.boot_id(), format!("{}\n", new_boot_id()))?;
        if let Some(dir) = crate::bootc_fixtures() {
            let help = dir.join("contract/help");
            if help.is_dir() {
                std::fs::write(self.help_dir_file(), help.display().to_string())?;
            }
        }
        self.set_version(BootcVersion::V1_16)?;
        self.systemd()
            .set_unit_file(api::host_updaters::BOOTC_TIMER, "enabled")?;
        self.write_state(&State {
            booted,
            ..State::default()
        })
    }

    /// Which bootc this host runs.
    pub fn version(&self) -> BootcVersion {
        std::fs::read_to_string(self.version_file())
            .ok()
            .and_then(|v| BootcVersion::parse(&v))
            .unwrap_or(BootcVersion::V1_16)
    }

    pub fn set_version(&self, version: BootcVersion) -> std::io::Result<()> {
        std::fs::write(self.version_file(), version.name())
    }

    /// Where bootc's rendered help texts are (None: use our own wording).
    pub fn help_dir(&self) -> Option<PathBuf> {
        std::fs::read_to_string(self.help_dir_file())
            .ok()
            .map(PathBuf::from)
            .filter(|d| d.is_dir())
    }

    /// Serve our own help texts even when bootc's are available.
    pub fn use_own_help(&self) -> std::io::Result<()> {
        match std::fs::remove_file(self.help_dir_file()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    pub fn read_state(&self) -> std::io::Result<State> {
        let bytes = std::fs::read(self.state())?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }

    pub fn write_state(&self, state: &State) -> std::io::Result<()> {
        let tmp = self
            .dir()
            .join(format!("state.json.{}.tmp", std::process::id()));
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, self.state())
    }

    pub fn read_invocations(&self) -> Vec<Invocation> {
        read_jsonl(&self.invocations())
    }

    pub fn read_reboots(&self) -> Vec<Reboot> {
        read_jsonl(&self.reboots())
    }

    pub fn read_boot_id(&self) -> String {
        std::fs::read_to_string(self.boot_id())
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    pub fn set_fault(&self, fault: Option<Fault>) -> std::io::Result<()> {
        match fault {
            Some(f) => std::fs::write(self.fail(), f.name()),
            None => match std::fs::remove_file(self.fail()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        }
    }

    /// Makes `status` fail with `chain` (bootc prints `error: <chain>`),
    /// or answer again (None).
    pub fn set_status_fault(&self, chain: Option<&str>) -> std::io::Result<()> {
        match chain {
            Some(c) => std::fs::write(self.status_fault(), c),
            None => match std::fs::remove_file(self.status_fault()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        }
    }

    fn fault(&self) -> Option<Fault> {
        std::fs::read_to_string(self.fail())
            .ok()
            .and_then(|t| Fault::parse(&t))
    }

    fn flag(&self, path: PathBuf) -> bool {
        path.exists()
    }

    /// Records a reboot and "takes the machine down": every transient unit
    /// of the fake host is killed (a reboot ends every process), and the
    /// boot id changes unless `soft`.
    pub(crate) fn record_reboot(&self, mut reboot: Reboot) -> std::io::Result<()> {
        reboot.old_boot_id = self.read_boot_id();
        reboot.new_boot_id = if reboot.soft {
            reboot.old_boot_id.clone()
        } else {
            let id = new_boot_id();
            // In place (same inode): the fake host bind-mounts this file over
            // /proc/sys/kernel/random/boot_id.
            std::fs::write(self.boot_id(), format!("{id}\n"))?;
            id
        };
        append_jsonl(&self.reboots(), &reboot)
    }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub(crate) fn append_jsonl<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    f.write_all(&line)
}

/// A random boot id (UUID v4 shape) from /proc's own generator.
pub fn new_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "00000000-0000-4000-8000-000000000000".to_owned())
}

/// An ostree commit checksum for a deployment: distinct per image.
fn checksum(d: &Deployment) -> String {
    let hex: String = d
        .digest
        .trim_start_matches("sha256:")
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    format!("{hex:0<64}")
}

/// The status JSON bootc prints (`org.containers.bootc/v1`), with bootc's
/// keys: `signature` omitted (a plain switch has none), `composefs`,
/// `usrOverlay` and `readOnly` present. Printed canonically (sorted keys,
/// no whitespace, no trailing newline) by [`status_text`].
pub fn status_json(state: &State) -> serde_json::Value {
    use serde_json::json;
    let entry = |d: &Option<Deployment>| match d {
        None => serde_json::Value::Null,
        Some(d) => json!({
            // bootc reports a deployment with local rpm-ostree changes
            // with no image (`status.rs`, fixture
            // spec-rfe-ostree-deployment.yaml).
            "image": if d.incompatible { serde_json::Value::Null } else { json!({
                "image": {"image": d.image, "transport": "registry"},
                "version": d.version,
                "timestamp": d.timestamp,
                "imageDigest": d.digest,
                "architecture": d.architecture,
            })},
            "cachedUpdate": null,
            "incompatible": d.incompatible,
            "pinned": false,
            "softRebootCapable": d.soft_reboot_capable,
            "downloadOnly": d.download_only,
            "store": "ostreeContainer",
            "ostree": {"checksum": checksum(d), "deploySerial": 0, "stateroot": "default"},
            "composefs": null,
        }),
    };
    let spec_image = state
        .staged
        .as_ref()
        .or(state.booted.as_ref())
        .map(|d| json!({"image": d.image, "transport": "registry"}));
    json!({
        "apiVersion": "org.containers.bootc/v1",
        "kind": "BootcHost",
        "metadata": {"name": "host"},
        "spec": {"image": spec_image, "bootOrder": "default"},
        "status": {
            "staged": entry(&state.staged),
            "booted": entry(&state.booted),
            "rollback": entry(&state.rollback),
            "rollbackQueued": false,
            "type": if state.booted.is_some() { json!("bootcHost") } else { serde_json::Value::Null },
            "usrOverlay": null,
            "readOnly": false,
        }
    })
}

/// `status_json` as bootc prints it: canonical JSON (keys sorted, no
/// whitespace), no trailing newline.
pub fn status_text(state: &State) -> String {
    // serde_json's map is ordered by key (no preserve_order feature here).
    serde_json::to_string(&status_json(state)).unwrap_or_default()
}

/// The fake bootc's main: `fake-bootc --fake-root <dir> [--as <tool>] <args...>`.
/// `--as systemd-run`, `--as systemctl` and `--as unit-runner` play the fake
/// host's systemd (crate::fake_systemd); without `--as` it is bootc.
pub fn main_with(args: Vec<String>) -> i32 {
    let (root, rest) = match args.as_slice() {
        [flag, root, rest @ ..] if flag == "--fake-root" => (PathBuf::from(root), rest.to_vec()),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "usage: fake-bootc --fake-root <dir> [--as systemd-run|systemctl|unit-runner] <args>"
            );
            return 2;
        }
    };
    let layout = Layout::new(root);
    if let [hook] = rest.as_slice()
        && let Some(result) = node_hook(&layout, hook)
    {
        return match result {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "error: fake bootc {hook}: {e}");
                1
            }
        };
    }
    if let [flag, tool, rest @ ..] = rest.as_slice()
        && flag == "--as"
    {
        return crate::fake_systemd::main_as(&layout, tool, rest);
    }
    bootc_main(&layout, &rest)
}

fn bootc_main(layout: &Layout, rest: &[String]) -> i32 {
    let unix_micros = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let invocation = Invocation {
        unix_micros,
        argv: rest.to_vec(),
        mount_ns: std::fs::read_link("/proc/self/ns/mnt")
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        env: std::env::vars().map(|(k, v)| format!("{k}={v}")).collect(),
        uid: proc_status_id("Uid:"),
        extra_fds: extra_fds(),
        auth_file: layout
            .effective_auth()
            .and_then(|p| std::fs::read_to_string(p).ok()),
        pid: i32::try_from(std::process::id()).unwrap_or(0),
        ppid: i32::try_from(std::os::unix::process::parent_id()).unwrap_or(0),
    };
    if let Err(e) = append_jsonl(&layout.invocations(), &invocation) {
        let _ = writeln!(std::io::stderr(), "error: fake bootc cannot log: {e}");
        return 1;
    }
    let env = switch::Environment::of_this_process();
    match run(layout, rest, &env) {
        Ok(outcome) => {
            let _ = std::io::stdout().write_all(outcome.stdout.as_bytes());
            let _ = std::io::stderr().write_all(outcome.stderr.as_bytes());
            let _ = std::io::stdout().flush();
            if outcome.park && layout.is_real_host() {
                return real_host::reboot_and_park();
            }
            if outcome.park {
                // Like real bootc after `systemctl reboot`: it parks until
                // the machine going down kills it. The fake machine goes
                // down now: every transient unit (this one included) is
                // killed. Bounded, for a run outside any unit.
                let _ = layout.systemd().stop_all();
                std::thread::sleep(Duration::from_secs(60));
            }
            outcome.code
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: fake bootc: {e}");
            1
        }
    }
}

/// The real node's boot and shutdown hooks (`real_host`), if `arg` names one.
fn node_hook(layout: &Layout, arg: &str) -> Option<std::io::Result<()>> {
    match arg {
        "--node-boot" => Some(real_host::on_boot(layout)),
        "--node-shutdown" => Some(real_host::on_shutdown(layout)),
        _ => None,
    }
}

fn extra_fds() -> Vec<String> {
    // Collect the names first: the directory handle is itself an open fd.
    let names: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names
        .into_iter()
        .filter(|n| n.parse::<i32>().is_ok_and(|fd| fd > 2))
        .filter_map(|n| {
            let target = std::fs::read_link(format!("/proc/self/fd/{n}")).ok()?;
            Some(format!("{n} -> {}", target.display()))
        })
        .collect()
}

/// The real id of a `/proc/self/status` line (`Uid:` / `Gid:`).
fn proc_status_id(key: &str) -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next().and_then(|u| u.parse().ok()))
        })
        .unwrap_or(u32::MAX)
}
