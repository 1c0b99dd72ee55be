//! What the fake bootc does for each command: the contract reference's
//! sections 3 (preconditions), 4 (`switch`), 5 (`--download-only`,
//! `--from-downloaded`, unplanned reboots), 6 (soft reboot) and 7 (status).
//! Everything but the final "machine goes down" is here, in-process, so the
//! conformance test can replay the reference's cases without processes.

use super::cli::{self, Command, HelpTopic, SoftReboot, StatusFormat, SwitchArgs, UpgradeArgs};
use super::{BootcVersion, Deployment, Layout, PULL_ERROR_PREFIX, Reboot, State};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// What a run of the fake bootc does: stdout, stderr, exit code, and
/// whether it parks afterwards (a reboot was started: real bootc never
/// returns from `--apply`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
    pub park: bool,
}

impl Outcome {
    fn ok(stdout: impl Into<String>) -> Outcome {
        Outcome {
            stdout: stdout.into(),
            ..Outcome::default()
        }
    }

    /// A runtime error: `error: <chain>` on stderr, exit 1.
    fn error(chain: impl std::fmt::Display) -> Outcome {
        Outcome {
            stderr: format!("error: {chain}\n"),
            code: 1,
            ..Outcome::default()
        }
    }
}

/// What bootc checks about the process it runs in (section 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// The `container` variable is set (any value, even empty).
    pub container: bool,
    pub uid: u32,
    /// `CAP_SYS_ADMIN` is in the bounding set.
    pub cap_sys_admin_bounding: bool,
}

impl Environment {
    /// A root process with every capability outside a container.
    pub fn root() -> Environment {
        Environment {
            container: false,
            uid: 0,
            cap_sys_admin_bounding: true,
        }
    }

    pub fn of_this_process() -> Environment {
        let cap_bnd = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("CapBnd:"))
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            })
            .unwrap_or(0);
        Environment {
            container: std::env::var_os("container").is_some(),
            uid: super::proc_status_id("Uid:"),
            cap_sys_admin_bounding: cap_bnd & (1 << 21) != 0,
        }
    }

    /// `prepare_for_write`'s refusal, if any.
    fn refusal(&self) -> Option<&'static str> {
        if self.container {
            Some(
                "Preparing for write: Detected container; this command requires a booted host system.",
            )
        } else if self.uid != 0 {
            Some(
                "Preparing for write: Querying root privilege: This command must be executed as the root user",
            )
        } else if !self.cap_sys_admin_bounding {
            Some(
                "Preparing for write: Querying root privilege: This command requires full root privileges (CAP_SYS_ADMIN)",
            )
        } else {
            None
        }
    }
}

/// How an unplanned reboot happens (contract section 5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnplannedReboot {
    /// `systemctl reboot` by someone else (a drain-and-reboot, an admin):
    /// an unlocked staged deployment is finalized at shutdown.
    Orderly,
    /// A crash, power loss or `reboot -f`: nothing is finalized.
    Crash,
}

/// Runs the fake bootc on `args` (without argv[0]) against `layout`.
pub fn run(layout: &Layout, args: &[String], env: &Environment) -> std::io::Result<Outcome> {
    let version = layout.version();
    match cli::parse(version, args) {
        Command::Usage(text) => Ok(Outcome {
            stderr: text,
            code: 2,
            ..Outcome::default()
        }),
        Command::Help(topic) => Ok(Outcome::ok(help_text(layout, version, topic))),
        Command::Version => Ok(Outcome::ok(version.version_line())),
        Command::Status(args) => status(layout, &args, env),
        Command::Switch(args) => switch(layout, version, &args, env),
        Command::Upgrade(args) => upgrade(layout, &args, env),
    }
}

/// bootc's rendered help (shared fixtures) byte for byte when present,
/// otherwise our own short wording with the same flags.
pub fn help_text(layout: &Layout, version: BootcVersion, topic: HelpTopic) -> String {
    let file = match topic {
        HelpTopic::SwitchLong => "bootc-switch--help",
        HelpTopic::SwitchShort => "bootc-switch-h",
        HelpTopic::StatusLong => "bootc-status--help",
        HelpTopic::UpgradeLong => "bootc-upgrade--help",
    };
    if let Some(dir) = layout.help_dir()
        && let Ok(text) =
            std::fs::read_to_string(dir.join(format!("{file}.{}.txt", version.fixture_suffix())))
    {
        return text;
    }
    own_help(version, topic)
}

fn own_help(version: BootcVersion, topic: HelpTopic) -> String {
    if topic == HelpTopic::UpgradeLong {
        return "Download and queue an updated container image to apply (fake bootc)\n\nUsage: bootc upgrade [OPTIONS]\n\nOptions:\n      --quiet                      Print no progress\n      --check                      Only check for an update\n      --apply                      Reboot into the update\n      --soft-reboot <SOFT_REBOOT>  required or auto\n      --download-only              Stage the update locked\n      --from-downloaded            Unlock what --download-only staged\n      --tag <TAG>                  Follow another tag of the same image\n  -h, --help                       This text\n".to_owned();
    }
    if topic == HelpTopic::StatusLong {
        return "Show the host's bootc state (fake bootc)\n\nUsage: bootc status [OPTIONS]\n\nOptions:\n      --format <FORMAT>                  humanreadable, yaml or json\n      --format-version <FORMAT_VERSION>  0 or 1\n      --booted                           Only the booted deployment\n  -h, --help                             This text\n".to_owned();
    }
    let (usage, locked) = match version {
        BootcVersion::V1_16 => ("<TARGET>", ""),
        BootcVersion::Pr => (
            "[TARGET]",
            "      --download-only                Stage the image locked: a reboot does not apply it\n      --from-downloaded              Unlock what --download-only staged (use with --apply to boot it)\n",
        ),
    };
    format!(
        "Boot another container image next (fake bootc)\n\nUsage: bootc switch [OPTIONS] {usage}\n\nOptions:\n      --quiet                        Print no progress\n      --apply                        Reboot into the new image when staged\n      --soft-reboot <SOFT_REBOOT>    required or auto\n      --transport <TRANSPORT>        Where the image comes from (default registry)\n{locked}      --enforce-container-sigpolicy  Require signatures by policy\n      --retain                       Keep the booted image referenced\n  -h, --help                         This text\n"
    )
}

fn status(layout: &Layout, args: &cli::StatusArgs, env: &Environment) -> std::io::Result<Outcome> {
    if let Some(v) = args.format_version
        && v > 1
    {
        return Ok(Outcome::error(format!(
            "Status: Unsupported format version: {v}"
        )));
    }
    if let Ok(chain) = std::fs::read_to_string(layout.status_fault()) {
        return Ok(Outcome::error(chain.trim()));
    }
    let mut state = layout.read_state()?;
    if env.container {
        // Detected as a container: bootc reports the host as not deployed.
        state = State::default();
    } else if state.booted.is_some()
        && let Some(refusal) = env.refusal()
    {
        return Ok(Outcome::error(format!("Status: {refusal}")));
    }
    if args.booted_only {
        state.staged = None;
        state.rollback = None;
    }
    let text = match args.format.unwrap_or(StatusFormat::Yaml) {
        StatusFormat::Json => super::status_text(&state),
        StatusFormat::Yaml => {
            serde_yaml::to_string(&super::status_json(&state)).map_err(std::io::Error::other)?
        }
        StatusFormat::HumanReadable => match &state.booted {
            None => "System is not deployed via bootc.\n".to_owned(),
            Some(b) => format!("Booted image: {}\n  Digest: {}\n", b.image, b.digest),
        },
    };
    Ok(Outcome::ok(text))
}

fn switch(
    layout: &Layout,
    version: BootcVersion,
    args: &SwitchArgs,
    env: &Environment,
) -> std::io::Result<Outcome> {
    if let Some(refusal) = env.refusal() {
        return Ok(Outcome::error(format!(
            "Switching: Initializing storage: {refusal}"
        )));
    }
    let mut state = layout.read_state()?;
    if state.booted.is_none() {
        return Ok(Outcome::error(
            "Switching: Initializing storage: System not booted via bootc",
        ));
    }
    if args.from_downloaded {
        let context = "Switching: Switching (ostree)";
        return from_downloaded(layout, &mut state, args.apply, args.soft_reboot, context);
    }
    if let Some(t) = args.transport.as_deref()
        && !KNOWN_TRANSPORTS.contains(&t)
    {
        let context = match version {
            BootcVersion::V1_16 => "",
            BootcVersion::Pr => "Getting imgref for switch: ",
        };
        return Ok(Outcome::error(format!(
            "Switching: Switching (ostree): {context}Invalid transport: {t}"
        )));
    }
    stage_delay(layout);
    let target = args.target.clone().unwrap_or_default();
    let spec = state.staged.as_ref().or(state.booted.as_ref());
    if spec.is_some_and(|d| d.image == target) {
        // The spec is unchanged: nothing pulled, staged, locked or unlocked,
        // no mtime; `--soft-reboot` is ignored; `--apply` reboots only when
        // something is staged.
        let mut out = Outcome::ok("Image specification is unchanged.\n");
        if args.apply && state.staged.is_some() {
            reboot_planned(layout, &mut state)?;
            out.park = true;
        }
        return Ok(out);
    }
    let deployment = match pull(layout, &target)? {
        Ok(d) => d,
        Err(failure) => return Ok(failure),
    };
    stage(layout, &mut state, deployment, args)
}

/// Transports bootc accepts for `--transport`.
const KNOWN_TRANSPORTS: [&str; 8] = [
    "registry",
    "oci",
    "oci-archive",
    "docker-archive",
    "containers-storage",
    "dir",
    "docker-daemon",
    "docker",
];

/// The injected delay of a switch that stages (a slow registry: also
/// when the spec turns out unchanged, which bootc checks first).
fn stage_delay(layout: &Layout) {
    if let Ok(text) = std::fs::read_to_string(layout.stage_delay())
        && let Ok(ms) = text.trim().parse::<u64>()
    {
        std::thread::sleep(Duration::from_millis(ms.min(60_000)));
    }
}

/// The pull: injected faults, then the registry or the reference.
fn pull(layout: &Layout, image: &str) -> std::io::Result<Result<Deployment, Outcome>> {
    if let Some(fault) = layout.fault() {
        return Ok(Err(Outcome {
            stderr: format!("{}\n", fault.message(image)),
            code: 1,
            ..Outcome::default()
        }));
    }
    if !image.contains("@sha256:") {
        // Real bootc stages tags too; the node agent only ever stages pinned
        // references, so the fake refuses anything else loudly.
        return Ok(Err(Outcome::error(format!(
            "the fake bootc only stages pinned references, got {image}"
        ))));
    }
    let mut d = Deployment::of(image);
    if layout.flag(layout.pull_from_registry()) {
        match pull_from_registry(layout, image) {
            Ok(p) => {
                d.digest = p.manifest_digest;
                d.architecture = p.architecture;
                d.version = p.version;
            }
            Err(message) => {
                return Ok(Err(Outcome {
                    stderr: format!("{PULL_ERROR_PREFIX}{message}\n"),
                    code: 1,
                    ..Outcome::default()
                }));
            }
        }
    }
    Ok(Ok(d))
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
    let auth = layout.effective_auth();
    rt.block_on(crate::image_pull::pull(
        image,
        &layout.root,
        auth.as_deref(),
        &arch,
    ))
    .map_err(|e| format!("{e:#}"))
}

/// Stages `d` (replacing any staged deployment, locked or not), then the
/// soft-reboot preparation and `--apply` (section 4.1 steps 5-9).
fn stage(
    layout: &Layout,
    state: &mut State,
    mut d: Deployment,
    args: &SwitchArgs,
) -> std::io::Result<Outcome> {
    d.download_only = args.download_only;
    d.soft_reboot_capable = !layout.flag(layout.no_soft_reboot());
    let image = d.image.clone();
    if state.staged.is_some() {
        // ostree (ac69c707) drops its lock file when it stages over a
        // staged deployment.
        remove_if_present(&layout.finalization_lock())?;
    }
    let mut stdout = format!(
        "{}: {image}\n",
        if args.download_only {
            "Staged but not queued for next boot"
        } else {
            "Queued for next boot"
        }
    );
    if let Some(v) = &d.version {
        stdout.push_str(&format!("  Version: {v}\n"));
    }
    stdout.push_str(&format!("  Digest: {}\n", d.digest));
    state.staged = Some(d);
    state.nextroot = false;
    layout.write_state(state)?;
    touch(&layout.ostree_bootc())?;
    let mut out = Outcome::ok(stdout);
    if args.download_only {
        return Ok(out);
    }
    if let Some(mode) = args.soft_reboot {
        match soft_reboot_for(state, mode) {
            Ok(line) => out.stdout.push_str(line),
            Err(chain) => {
                layout.write_state(state)?;
                return Ok(Outcome {
                    stdout: out.stdout,
                    ..Outcome::error(format!("Switching: Switching (ostree): {chain}"))
                });
            }
        }
        layout.write_state(state)?;
    }
    if args.apply {
        reboot_planned(layout, state)?;
        out.park = true;
    }
    Ok(out)
}

/// `--soft-reboot` for the staged deployment (section 6): prepares
/// `/run/nextroot` when capable; `required` and not capable is an error.
fn soft_reboot_for(state: &mut State, mode: SoftReboot) -> Result<&'static str, &'static str> {
    let capable = state.staged.as_ref().is_some_and(|s| s.soft_reboot_capable);
    match (capable, mode) {
        (true, _) => {
            state.nextroot = true;
            Ok("Staged deployment is soft-reboot capable, preparing for soft-reboot...\n")
        }
        (false, SoftReboot::Auto) => Ok(""),
        (false, SoftReboot::Required) => Err(
            "Handling staged soft reboot: Handling soft reboot: Soft reboot was required but staged deployment is not soft-reboot capable",
        ),
    }
}

/// `bootc upgrade` (section 5.5): the fake models `--from-downloaded`, the
/// form the node agent runs; any other upgrade (a pull of the image the
/// host follows) is refused loudly rather than faked.
fn upgrade(layout: &Layout, args: &UpgradeArgs, env: &Environment) -> std::io::Result<Outcome> {
    if let Some(refusal) = env.refusal() {
        return Ok(Outcome::error(format!("Upgrading: {refusal}")));
    }
    let mut state = layout.read_state()?;
    if state.booted.is_none() {
        return Ok(Outcome::error("Upgrading: System not booted via bootc"));
    }
    if !args.from_downloaded {
        return Ok(Outcome::error(
            "fake bootc: `upgrade` without --from-downloaded is not modelled",
        ));
    }
    from_downloaded(
        layout,
        &mut state,
        args.apply,
        args.soft_reboot,
        "Upgrading",
    )
}

/// `switch|upgrade --from-downloaded [--apply] [--soft-reboot=...]`
/// (sections 5.4, 5.5: the same code, the same messages under each
/// command's error context): unlocks whatever is staged (it checks nothing
/// about which image), then soft reboot, then `--apply`.
fn from_downloaded(
    layout: &Layout,
    state: &mut State,
    apply: bool,
    soft_reboot: Option<SoftReboot>,
    context: &str,
) -> std::io::Result<Outcome> {
    let Some(staged) = state.staged.as_mut() else {
        return Ok(Outcome::error(format!(
            "{context}: No staged deployment found"
        )));
    };
    let mut stdout = if staged.download_only {
        // ostree's change_finalization also drops the legacy lock file.
        staged.download_only = false;
        remove_if_present(&layout.finalization_lock())?;
        "Staged deployment will now be applied on reboot\n".to_owned()
    } else {
        "Staged deployment is already set to apply on reboot\n".to_owned()
    };
    layout.write_state(state)?;
    if let Some(mode) = soft_reboot {
        match soft_reboot_for(state, mode) {
            Ok(line) => stdout.push_str(line),
            Err(chain) => {
                // Fails after the unlock: the deployment stays unlocked.
                return Ok(Outcome {
                    stdout,
                    ..Outcome::error(format!("{context}: {chain}"))
                });
            }
        }
        layout.write_state(state)?;
    }
    let mut out = Outcome::ok(stdout);
    out.park = apply && reboot_planned(layout, state)?;
    Ok(out)
}

/// bootc's `reboot()`: `systemctl reboot`, an orderly reboot. On a real
/// node the shutdown itself finalizes (`real_host`). False when the host
/// does not go down ([`Layout::reboot_refused`]); a crash on the way down
/// ([`Layout::reboot_crashes`]) finalizes nothing.
fn reboot_planned(layout: &Layout, state: &mut State) -> std::io::Result<bool> {
    if layout.flag(layout.reboot_refused()) {
        return Ok(false);
    }
    if !layout.is_real_host() {
        let kind = if layout.flag(layout.reboot_crashes()) {
            UnplannedReboot::Crash
        } else {
            UnplannedReboot::Orderly
        };
        reboot(layout, state, kind, false)?;
    }
    Ok(true)
}

pub(super) fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// What a reboot does to the deployments (section 5.3): an orderly one
/// finalizes an unlocked staged deployment and discards a locked one
/// (locked by its own flag or by ostree's lock file); a crash finalizes
/// nothing. A prepared `/run/nextroot` makes an orderly reboot soft (same
/// kernel, same boot id). `/run` does not survive: the lock file is gone.
pub(super) fn reboot(
    layout: &Layout,
    state: &mut State,
    kind: UnplannedReboot,
    unplanned: bool,
) -> std::io::Result<()> {
    let orderly = kind == UnplannedReboot::Orderly;
    let soft = orderly && state.nextroot;
    let staged = state.staged.take();
    let lock_file = layout.finalization_lock();
    let locked_by_file = lock_file.exists();
    remove_if_present(&lock_file)?;
    let applied = match staged {
        Some(mut s) if orderly && !s.download_only && !locked_by_file => {
            s.download_only = false;
            // Soft-reboot capability is relative to the booted deployment.
            s.soft_reboot_capable = false;
            state.rollback = state.booted.replace(s);
            true
        }
        _ => false,
    };
    state.nextroot = false;
    layout.write_state(state)?;
    let image = state
        .booted
        .as_ref()
        .map(|b| b.image.clone())
        .unwrap_or_default();
    layout.record_reboot(Reboot {
        soft,
        image,
        old_boot_id: String::new(),
        new_boot_id: String::new(),
        unplanned,
        applied_staged: applied,
    })
}

impl Layout {
    /// An unplanned reboot of the fake host, with bootc's real outcome for
    /// what is staged: a locked staged deployment is gone and the node boots
    /// what it booted; an unlocked one is booted after an orderly reboot and
    /// gone after a crash. Every transient unit dies with the machine. The
    /// node simulator (or the test) restarts the node's daemon afterwards.
    pub fn reboot_unplanned(&self, kind: UnplannedReboot) -> std::io::Result<Reboot> {
        let mut state = self.read_state()?;
        reboot(self, &mut state, kind, true)?;
        self.systemd().stop_all()?;
        self.read_reboots()
            .pop()
            .ok_or_else(|| std::io::Error::other("no reboot recorded"))
    }
}

fn touch(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.set_modified(SystemTime::now())
}
