//! A fake `bootc` implementing exactly the CLI contract of DESIGN.md
//! section 4, with its state in files under a fake host root:
//!
//! ```text
//! <root>/ostree/bootc/            mtime touched after switch / apply, like bootc
//! <root>/run/                     the host's /run (auth file: run/ostree/auth.json)
//! <root>/boot_id                  the host's /proc/sys/kernel/random/boot_id
//! <root>/fake-bootc/state.json    booted / staged / rollback deployments
//! <root>/fake-bootc/invocations.jsonl  one line per run: argv, mount ns, env, auth file
//! <root>/fake-bootc/fail          failure injection: pull-error | unauthorized | no-space
//! <root>/fake-bootc/old-bootc     present: behave like a bootc without --download-only
//! <root>/fake-bootc/park-apply    present: --apply parks (like a real host) for up to 60 s
//! <root>/fake-bootc/no-soft-reboot present: staged deployments are not soft-reboot capable
//! <root>/fake-bootc/stage-delay-ms milliseconds a switch takes (a slow pull)
//! <root>/fake-bootc/rebooted.jsonl one line per simulated reboot (for the node simulator)
//! ```
//!
//! <root>/fake-bootc/pull-from-registry present: `switch` fetches the manifest
//! (the per-platform one of an index) and config from the registry in the
//! reference with `run/ostree/auth.json` and the CA in
//! `etc/containers/certs.d/<registry>/ca.crt`, so a wrong pull secret fails
//! with the registry's 401 and a missing image with its 404, end to end.
//! Without it the digest is taken from the pinned reference (unit-style
//! tests with no registry), and the `unauthorized` injection stands in.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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
}

impl Deployment {
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
        }
    }
}

/// The fake host's bootc state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub booted: Option<Deployment>,
    pub staged: Option<Deployment>,
    pub rollback: Option<Deployment>,
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
    /// The host's `run/ostree/auth.json` when the run started (None: absent),
    /// that is, the credentials a pull by this run would have used.
    #[serde(default)]
    pub auth_file: Option<String>,
}

/// One simulated reboot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reboot {
    pub soft: bool,
    pub image: String,
    pub old_boot_id: String,
    pub new_boot_id: String,
}

/// Injectable failures of `switch` (staging).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    PullError,
    Unauthorized,
    NoSpace,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::PullError => "pull-error",
            Fault::Unauthorized => "unauthorized",
            Fault::NoSpace => "no-space",
        }
    }

    fn parse(s: &str) -> Option<Fault> {
        [Fault::PullError, Fault::Unauthorized, Fault::NoSpace]
            .into_iter()
            .find(|f| f.name() == s.trim())
    }

    /// What bootc prints (the shape of real bootc errors).
    pub fn message(self, image: &str) -> String {
        match self {
            Fault::PullError => format!(
                "error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: pinging container registry for {image}: connection refused"
            ),
            Fault::Unauthorized => format!(
                "error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: reading manifest of {image}: unauthorized: authentication required"
            ),
            Fault::NoSpace => {
                "error: Switching: Pulling: Importing: Writing object: No space left on device (os error 28)".to_owned()
            }
        }
    }
}

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
    pub fn old_bootc(&self) -> PathBuf {
        self.dir().join("old-bootc")
    }
    pub fn park_apply(&self) -> PathBuf {
        self.dir().join("park-apply")
    }
    pub fn no_soft_reboot(&self) -> PathBuf {
        self.dir().join("no-soft-reboot")
    }
    /// Present: `switch` pulls the manifest and config from the registry in
    /// the reference, with `run/ostree/auth.json` and the CA in
    /// `etc/containers/certs.d/<registry>/ca.crt`, as real bootc does.
    pub fn pull_from_registry(&self) -> PathBuf {
        self.dir().join("pull-from-registry")
    }
    /// Holds milliseconds: staging takes that long (a slow pull).
    pub fn stage_delay(&self) -> PathBuf {
        self.dir().join("stage-delay-ms")
    }
    pub fn ostree_bootc(&self) -> PathBuf {
        self.root.join("ostree/bootc")
    }
    pub fn boot_id(&self) -> PathBuf {
        self.root.join("boot_id")
    }
    pub fn auth(&self) -> PathBuf {
        self.root.join("run/ostree/auth.json")
    }

    /// Creates the layout with `booted` as the booted image.
    pub fn init(&self, booted: Option<&str>) -> std::io::Result<()> {
        std::fs::create_dir_all(self.dir())?;
        std::fs::create_dir_all(self.ostree_bootc())?;
        std::fs::create_dir_all(self.root.join("run"))?;
        std::fs::write(self.boot_id(), format!("{}\n", new_boot_id()))?;
        self.write_state(&State {
            booted: booted.map(Deployment::of),
            ..State::default()
        })
    }

    pub fn read_state(&self) -> std::io::Result<State> {
        let bytes = std::fs::read(self.state())?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }

    pub fn write_state(&self, state: &State) -> std::io::Result<()> {
        let tmp = self.dir().join("state.json.tmp");
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

    fn flag(&self, path: PathBuf) -> bool {
        path.exists()
    }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn append_jsonl<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
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

/// The status JSON bootc prints (`org.containers.bootc/v1`).
pub fn status_json(state: &State) -> serde_json::Value {
    use serde_json::json;
    let entry = |d: &Option<Deployment>| match d {
        None => serde_json::Value::Null,
        Some(d) => json!({
            "image": {
                "image": {"image": d.image, "transport": "registry", "signature": "containerPolicy"},
                "version": d.version,
                "timestamp": d.timestamp,
                "imageDigest": d.digest,
                "architecture": d.architecture,
            },
            "cachedUpdate": null,
            "incompatible": false,
            "pinned": false,
            "softRebootCapable": d.soft_reboot_capable,
            "downloadOnly": d.download_only,
            "store": "ostreeContainer",
            "ostree": {"checksum": "0".repeat(64), "deploySerial": 0, "stateroot": "default"},
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
        }
    })
}

const HELP_NEW: &str = "Target a new container image reference to boot\n\nUsage: bootc switch [OPTIONS] <TARGET>\n\nOptions:\n      --quiet\n      --apply              Restart or reboot into the new target image\n      --soft-reboot <SOFT_REBOOT>\n      --download-only      Download and stage the update without applying it\n      --from-downloaded    Apply a staged deployment that was previously downloaded\n      --transport <TRANSPORT>\n  -h, --help\n";
const HELP_OLD: &str = "Target a new container image reference to boot\n\nUsage: bootc switch [OPTIONS] <TARGET>\n\nOptions:\n      --quiet\n      --apply              Restart or reboot into the new target image\n      --transport <TRANSPORT>\n  -h, --help\n";

/// What a run of the fake bootc does: stdout, stderr, exit code, and
/// whether to park afterwards.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
    pub park: bool,
}

fn usage(msg: &str) -> Outcome {
    Outcome {
        stderr: format!("error: {msg}\n"),
        code: 2,
        ..Outcome::default()
    }
}

fn touch(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.set_modified(SystemTime::now())
}

/// Runs the fake bootc on `args` (without argv[0]) against `layout`.
pub fn run(layout: &Layout, args: &[String]) -> std::io::Result<Outcome> {
    let old = layout.flag(layout.old_bootc());
    // Like bootc: `switch` takes --enforce-container-sigpolicy anywhere;
    // the argv is recorded as given (Invocation).
    let a: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--enforce-container-sigpolicy")
        .collect();
    match a.as_slice() {
        ["status", "--format=json", "--format-version=1"] => {
            let state = layout.read_state()?;
            Ok(Outcome {
                stdout: serde_json::to_string(&status_json(&state))
                    .map_err(std::io::Error::other)?,
                ..Outcome::default()
            })
        }
        ["status", ..] => Ok(usage("unsupported status arguments")),
        ["switch", "--help"] => Ok(Outcome {
            stdout: if old { HELP_OLD } else { HELP_NEW }.to_owned(),
            ..Outcome::default()
        }),
        ["switch", "--from-downloaded", "--apply", rest @ ..] if !old => {
            let soft = match rest {
                [] => false,
                ["--soft-reboot=auto"] => true,
                _ => return Ok(usage("unexpected arguments after --apply")),
            };
            apply(layout, soft)
        }
        ["switch", "--apply", "--", image] | ["switch", "--apply", image] => {
            match stage(layout, image, false)? {
                o if o.code != 0 => Ok(o),
                _ => apply(layout, false),
            }
        }
        ["switch", "--download-only", "--", image] | ["switch", "--download-only", image] => {
            if old {
                return Ok(usage("unexpected argument '--download-only' found"));
            }
            stage(layout, image, true)
        }
        ["switch", "--", image] | ["switch", image] if !image.starts_with('-') => {
            stage(layout, image, false)
        }
        _ => Ok(usage(&format!("unrecognized arguments {args:?}"))),
    }
}

fn stage(layout: &Layout, image: &str, download_only: bool) -> std::io::Result<Outcome> {
    if let Ok(text) = std::fs::read_to_string(layout.stage_delay())
        && let Ok(ms) = text.trim().parse::<u64>()
    {
        std::thread::sleep(Duration::from_millis(ms.min(60_000)));
    }
    if let Ok(text) = std::fs::read_to_string(layout.fail())
        && let Some(fault) = Fault::parse(&text)
    {
        return Ok(Outcome {
            stderr: format!("{}\n", fault.message(image)),
            code: 1,
            ..Outcome::default()
        });
    }
    if !image.contains("@sha256:") {
        // The node agent only ever stages pinned references.
        return Ok(Outcome {
            stderr: format!("error: the fake bootc only stages pinned references, got {image}\n"),
            code: 1,
            ..Outcome::default()
        });
    }
    let pulled = if layout.flag(layout.pull_from_registry()) {
        match pull_from_registry(layout, image) {
            Ok(p) => Some(p),
            Err(message) => {
                return Ok(Outcome {
                    stderr: format!(
                        "error: Switching: Pulling: Creating importer: failed to invoke method OpenImage: {message}\n"
                    ),
                    code: 1,
                    ..Outcome::default()
                });
            }
        }
    } else {
        None
    };
    let mut state = layout.read_state()?;
    if state.booted.as_ref().is_some_and(|b| b.image == image) {
        state.staged = None;
    } else {
        let mut d = Deployment::of(image);
        if let Some(p) = pulled {
            d.digest = p.manifest_digest;
            d.architecture = p.architecture;
            d.version = p.version;
        }
        d.download_only = download_only;
        d.soft_reboot_capable = !layout.flag(layout.no_soft_reboot());
        state.staged = Some(d);
    }
    layout.write_state(&state)?;
    touch(&layout.ostree_bootc())?;
    Ok(Outcome {
        stdout: "Queued for next boot\n".into(),
        ..Outcome::default()
    })
}

fn pull_from_registry(
    layout: &Layout,
    image: &str,
) -> Result<crate::image_pull::PulledImage, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let arch = Deployment::of(image).architecture;
    rt.block_on(crate::image_pull::pull(image, &layout.root, &arch))
        .map_err(|e| format!("{e:#}"))
}

fn apply(layout: &Layout, soft: bool) -> std::io::Result<Outcome> {
    let mut state = layout.read_state()?;
    let Some(mut staged) = state.staged.take() else {
        return Ok(Outcome {
            stderr: "error: No staged deployment found\n".into(),
            code: 1,
            ..Outcome::default()
        });
    };
    staged.download_only = false;
    let image = staged.image.clone();
    state.rollback = state.booted.take();
    state.booted = Some(staged);
    layout.write_state(&state)?;
    let old_boot_id = layout.read_boot_id();
    // A systemd soft reboot restarts userspace on the same kernel: the
    // kernel's boot id stays. Only a full reboot gets a new one.
    let new_boot_id = if soft {
        old_boot_id.clone()
    } else {
        let id = new_boot_id();
        // In place (same inode): the fake host bind-mounts this file over
        // /proc/sys/kernel/random/boot_id.
        std::fs::write(layout.boot_id(), format!("{id}\n"))?;
        id
    };
    append_jsonl(
        &layout.reboots(),
        &Reboot {
            soft,
            image,
            old_boot_id,
            new_boot_id,
        },
    )?;
    touch(&layout.ostree_bootc())?;
    Ok(Outcome {
        stdout: if soft {
            "Soft rebooting\n".into()
        } else {
            "Rebooting\n".into()
        },
        park: layout.flag(layout.park_apply()),
        ..Outcome::default()
    })
}

/// The fake bootc's main: `fake-bootc --fake-root <dir> <bootc args...>`.
pub fn main_with(args: Vec<String>) -> i32 {
    let (root, rest) = match args.as_slice() {
        [flag, root, rest @ ..] if flag == "--fake-root" => (PathBuf::from(root), rest.to_vec()),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "usage: fake-bootc --fake-root <dir> <args>"
            );
            return 2;
        }
    };
    let layout = Layout::new(root);
    let unix_micros = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let invocation = Invocation {
        unix_micros,
        argv: rest.clone(),
        mount_ns: std::fs::read_link("/proc/self/ns/mnt")
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        env: std::env::vars().map(|(k, v)| format!("{k}={v}")).collect(),
        uid: nix_uid(),
        extra_fds: extra_fds(),
        auth_file: std::fs::read_to_string(layout.auth()).ok(),
    };
    if let Err(e) = append_jsonl(&layout.invocations(), &invocation) {
        let _ = writeln!(std::io::stderr(), "error: fake bootc cannot log: {e}");
        return 1;
    }
    match run(&layout, &rest) {
        Ok(outcome) => {
            let _ = std::io::stdout().write_all(outcome.stdout.as_bytes());
            let _ = std::io::stderr().write_all(outcome.stderr.as_bytes());
            let _ = std::io::stdout().flush();
            if outcome.park {
                // Like real bootc: --apply waits for the machine to go down.
                // Bounded, so a test that forgets it leaves nothing behind.
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

fn nix_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().and_then(|u| u.parse().ok()))
        })
        .unwrap_or(u32::MAX)
}
