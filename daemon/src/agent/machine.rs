//! The daemon's decisions, as a pure function of what it observes: its
//! BootcNode (spec and the status it last wrote), the host's bootc status,
//! and what it remembers of its own failures. The I/O loop calls [`decide`]
//! after every change and carries out the one action it returns.
//!
//! ```text
//!   Idle ──desired != booted──► Staging ──ok──► Staged ──Booted && staged == desired──► Rebooting
//!    ▲                            ▲  │ error: Degraded, back off            │
//!    │                            └──┴──── staged != desired ◄───────────────┘
//!    └──────────── reboot into desired (new boot id) ◄──────────── Rebooting
//! ```
//!
//! The helper applies only what it staged itself: an approved image staged
//! by an earlier daemon (one that restarted) goes through Staging again
//! (a no-op for bootc) before Rebooting.

use std::time::Duration;

use api::conditions::ConditionUpdate;
use api::{
    BootEntryStatus, BootcNodeSpec, BootcNodeStatus, DaemonPhase, DesiredImageState, RebootPolicy,
};
use api::{ConditionType, Reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// First retry delay after a failed bootc command.
pub const BACKOFF_BASE: Duration = Duration::from_secs(5);
/// Longest delay between retries.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// A failed stage whose cause may pass (the registry unreachable, an error
/// bootc does not name) makes the node Degraded only from this many
/// consecutive failed attempts on its image (with [`BACKOFF_BASE`], about
/// 15 s plus the pulls)...
pub const DEGRADED_AFTER_ATTEMPTS: u32 = 3;
/// ...or once this long has passed since the first of them failed (slow
/// pulls), whichever comes first. Until then the node reports Staging,
/// the last error in its message, and retries: a registry hiccup does not
/// flip it Degraded and back.
pub const DEGRADED_AFTER: Duration = Duration::from_secs(120);

/// This daemon, as it reports itself on every status (`status.daemon`):
/// its build and the BootcNode contract it speaks, which the controller
/// checks before it tells the node anything ([`api::daemon_contract`]).
pub fn this_daemon() -> api::DaemonStatus {
    api::DaemonStatus {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        contract: api::daemon_contract::CONTRACT,
    }
}

/// The host as the helper's Status RPC reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostView {
    pub booted: Option<BootEntryStatus>,
    pub staged: Option<BootEntryStatus>,
    pub rollback: Option<BootEntryStatus>,
    pub boot_id: String,
    pub download_only_supported: bool,
    /// The host's own automatic updaters that are on (`api::host_updaters`).
    pub host_updaters: Vec<String>,
}

/// How soon the host is read again: while it reports an automatic updater,
/// every `every`, so that a person masking one by hand is seen without a
/// restart (the read writes nothing unless something changed); otherwise
/// only on the usual wake-ups.
pub fn updaters_recheck(host: &HostView, every: Duration) -> Option<Duration> {
    (!host.host_updaters.is_empty()).then_some(every)
}

/// The kind of command that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Stage,
    Apply,
    WriteAuth,
}

/// A failure the daemon remembers, to report it and to back off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub operation: Operation,
    /// The image the failed command was about.
    pub image: String,
    pub message: String,
    /// Consecutive failures of this operation on this image.
    pub attempts: u32,
    /// Milliseconds on the loop's monotonic clock when the first of them
    /// failed.
    pub first_at_ms: u64,
    /// Milliseconds on the loop's monotonic clock before a retry is allowed.
    pub retry_at_ms: u64,
}

impl Failure {
    /// The delay before attempt `attempts + 1`: exponential, capped.
    pub fn backoff(attempts: u32) -> Duration {
        let factor = 1u32
            .checked_shl(attempts.saturating_sub(1))
            .unwrap_or(u32::MAX);
        BACKOFF_BASE.saturating_mul(factor).min(BACKOFF_MAX)
    }

    /// Does it make the node Degraded at `now_ms`? A failed apply, and a
    /// stage bootc refused for a cause that stays (the image not found, the
    /// credentials refused, no space: [`super::bootc_errors::passes`] says
    /// which may pass), at once; another failed stage only from
    /// [`DEGRADED_AFTER_ATTEMPTS`] attempts or [`DEGRADED_AFTER`].
    pub fn alarms(&self, now_ms: u64) -> bool {
        let settle_ms = u64::try_from(DEGRADED_AFTER.as_millis()).unwrap_or(u64::MAX);
        self.operation != Operation::Stage
            || !super::bootc_errors::passes(super::bootc_errors::reason_for(&self.message))
            || self.attempts >= DEGRADED_AFTER_ATTEMPTS
            || now_ms.saturating_sub(self.first_at_ms) >= settle_ms
    }
}

/// What the daemon does next (with or after writing the status of the decision).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// `bootc switch --download-only <image>`.
    Stage {
        image: String,
    },
    /// `bootc switch --from-downloaded --apply [--soft-reboot=auto]`.
    Apply {
        soft_reboot: bool,
    },
    /// A retry is due in this long: wake up then and decide again.
    RetryAfter(Duration),
}

/// The outcome of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub phase: DaemonPhase,
    pub phase_message: String,
    /// Degraded=True with this message; None: Degraded=False.
    pub degraded: Option<String>,
    pub action: Action,
}

/// Everything [`decide`] looks at.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub spec: &'a BootcNodeSpec,
    pub generation: Option<i64>,
    /// The status this daemon (or its previous incarnation) last wrote.
    pub previous: Option<&'a BootcNodeStatus>,
    pub host: &'a HostView,
    pub failure: Option<&'a Failure>,
    pub now_ms: u64,
    /// Did this daemon's helper stage the desired image? The helper applies
    /// only what it staged itself, so an image staged before a daemon
    /// restart is staged again (a no-op for bootc) before it is applied.
    pub staged_here: bool,
}

fn is(entry: Option<&BootEntryStatus>, image: &str) -> bool {
    entry.is_some_and(|e| e.is_image(image))
}

fn describe(entry: Option<&BootEntryStatus>) -> String {
    entry
        .and_then(|e| e.image.as_deref().or(e.image_digest.as_deref()))
        .unwrap_or("nothing")
        .to_owned()
}

/// The phase message of a node whose reboot did not land on its image.
pub const FAILED_REBOOT: &str = "Reboot finished on the wrong image";

/// Did the host reboot after this daemon asked it to, without landing on
/// the image it was asked for? Judged against the status written before the
/// apply (reason Rebooting, with the boot id, booted and staged deployments
/// of then), for the same spec generation.
///
/// The kernel boot id changes on a full reboot only: a systemd soft reboot
/// restarts userspace on the same kernel and keeps it. So a reboot also
/// shows as the booted deployment changing, and a soft reboot that came back
/// on the same deployment shows as the staged desired deployment being gone
/// (consumed or discarded by the apply) while the booted one is unchanged.
/// In each case the node must not stage and apply again: that would loop.
/// A restart of the daemon alone changes none of these (the staged
/// deployment is still there), and the apply is retried.
fn failed_reboot(inputs: &Inputs<'_>) -> Option<String> {
    let previous = inputs.previous?;
    let rebooting = previous.phase() == Ok(Some(DaemonPhase::Rebooting));
    let same_spec = previous.observed_generation == inputs.generation;
    if !rebooting || !same_spec {
        return None;
    }
    // Already reported: that status records the host as it came back (new
    // boot id, nothing staged), which no longer shows the failed reboot.
    // The report stands until a new spec (or a retry, which is one).
    if api::conditions::message(&previous.conditions, ConditionType::Idle) == Some(FAILED_REBOOT) {
        let reported = api::conditions::message(&previous.conditions, ConditionType::Degraded);
        return Some(reported.unwrap_or(FAILED_REBOOT).to_owned());
    }
    let host = inputs.host;
    let desired = inputs.spec.desired_image.as_str();
    let now_runs = describe(host.booted.as_ref());
    let what = if let Some(old_boot) = previous
        .boot_id
        .as_deref()
        .filter(|old| *old != host.boot_id)
    {
        format!("the node rebooted (boot id {old_boot} -> {})", host.boot_id)
    } else if let Some(before) = previous
        .booted
        .as_ref()
        .filter(|before| !same_deployment(before, host.booted.as_ref()))
    {
        format!(
            "the node rebooted (booted deployment {} -> {now_runs}, boot id kept: a soft reboot)",
            describe(Some(before))
        )
    } else if is(previous.staged.as_ref(), desired) && !is(host.staged.as_ref(), desired) {
        "the staged deployment is gone and the booted one is unchanged (a soft reboot that did not switch)".to_owned()
    } else {
        return None;
    };
    Some(format!(
        "{what} but runs {now_runs}, not the desired {desired}; not applying again"
    ))
}

/// On its desired (booted) image with another image staged unlocked (a
/// bootc without `--download-only`, rolled back to the booted image before
/// its turn): any reboot would boot the staged image. bootc has no "unstage";
/// staging the booted image replaces it with a redeploy of what runs, which
/// a reboot leaves as it is. A locked staged image is left alone: no reboot
/// applies it.
fn replace_unlocked_staged(inputs: &Inputs<'_>) -> Option<Decision> {
    let desired = inputs.spec.desired_image.as_str();
    let staged = inputs
        .host
        .staged
        .as_ref()
        .filter(|s| !s.download_only && !s.is_image(desired))?;
    let (degraded, action) = gate(inputs, Operation::Stage, stage_desired(inputs));
    Some(Decision {
        phase: DaemonPhase::Staging,
        phase_message: format!(
            "Staging {desired} (booted) over the unlocked staged {}, which any reboot would boot",
            describe(Some(staged))
        ),
        degraded,
        action,
    })
}

/// What a node that left its pool (its BootcNode deleted: the node
/// unlabelled, or the pool deleted) does about the image the pool had it
/// stage, `told`: staged unlocked, any reboot would boot it, an update
/// nobody approved. The rule: the node is told back to what it runs. The
/// booted image, pinned to the digest it runs (a tag could have moved to
/// the very image being undone), is staged over it; that redeploy boots
/// what runs. A locked staged image is left alone: a reboot discards it.
/// An image staged by anyone else (a person's `bootc switch`) is not ours
/// to undo. Returns the image to stage, or None when nothing is to be done.
pub fn on_leaving(told: &str, host: &HostView) -> Option<String> {
    let booted = host.booted.as_ref()?;
    let back = booted.pinned_image()?;
    host.staged
        .as_ref()
        .filter(|s| !s.download_only && s.is_image(told) && !s.is_image(&back))?;
    Some(back)
}

/// The start of the Idle message of a node that booted its desired image
/// through a reboot nobody asked this daemon for: an unlocked staged
/// deployment (a bootc without `--download-only`) finalized by an orderly
/// reboot outside any reboot slot.
pub const UNPLANNED_BOOT: &str = "Booted outside a reboot slot";

/// Did the node reach its desired image through an unplanned reboot? The
/// last status (written by this daemon or its predecessor) said the image
/// was staged or being staged, not that it was being applied, and the host
/// has rebooted since (a new boot id) onto it. Kept while the node stays on
/// that deployment, so that the report is not rewritten away.
fn unplanned_boot(inputs: &Inputs<'_>) -> Option<String> {
    let previous = inputs.previous?;
    let host = inputs.host;
    let message =
        api::conditions::message(&previous.conditions, ConditionType::Idle).unwrap_or_default();
    if message.starts_with(UNPLANNED_BOOT)
        && previous
            .booted
            .as_ref()
            .is_some_and(|b| same_deployment(b, host.booted.as_ref()))
    {
        return Some(message.to_owned());
    }
    let was_staged = matches!(
        previous.phase(),
        Ok(Some(DaemonPhase::Staged | DaemonPhase::Staging))
    );
    let rebooted = previous
        .boot_id
        .as_deref()
        .is_some_and(|b| b != host.boot_id);
    let moved = previous
        .booted
        .as_ref()
        .is_some_and(|b| !same_deployment(b, host.booted.as_ref()));
    (was_staged && rebooted && moved).then(|| {
        format!(
            "{UNPLANNED_BOOT}: the host rebooted (boot id {} -> {}) and booted {} from an unlocked staged deployment, without an apply from this daemon",
            previous.boot_id.as_deref().unwrap_or_default(),
            host.boot_id,
            inputs.spec.desired_image
        )
    })
}

/// Are `before` and `now` the same deployment, as far as the status tells?
fn same_deployment(before: &BootEntryStatus, now: Option<&BootEntryStatus>) -> bool {
    now.is_some_and(|now| now.image == before.image && now.image_digest == before.image_digest)
}

/// Decides the phase, the health, and the next action: the first step that
/// applies, in the order of the cycle read backwards (done, failed, staged,
/// to stage).
pub fn decide(inputs: &Inputs<'_>) -> Decision {
    let mut decision = decide_step(inputs);
    if let Some(f) = settling(inputs).filter(|_| decision.phase == DaemonPhase::Staging) {
        decision.phase_message.push_str(&format!(
            "; retrying, not Degraded before {DEGRADED_AFTER_ATTEMPTS} failed attempts or {} s: {}",
            DEGRADED_AFTER.as_secs(),
            f.message
        ));
    }
    decision
}

/// A failed stage of the desired image that does not alarm yet
/// ([`Failure::alarms`]).
fn settling<'a>(inputs: &Inputs<'a>) -> Option<&'a Failure> {
    inputs.failure.filter(|f| {
        f.operation == Operation::Stage
            && f.image == inputs.spec.desired_image
            && !f.alarms(inputs.now_ms)
    })
}

/// [`decide`]'s step, before a settling failure is noted.
fn decide_step(inputs: &Inputs<'_>) -> Decision {
    let desired = inputs.spec.desired_image.as_str();
    if is(inputs.host.booted.as_ref(), desired) {
        return on_desired_image(inputs);
    }
    if let Some(message) = failed_reboot(inputs) {
        return Decision {
            phase: DaemonPhase::Rebooting,
            phase_message: FAILED_REBOOT.to_owned(),
            degraded: Some(message),
            action: Action::None,
        };
    }
    if is(inputs.host.staged.as_ref(), desired) {
        return match inputs.spec.desired_image_state {
            DesiredImageState::Booted if inputs.staged_here => apply(inputs),
            DesiredImageState::Booted => stage_again(inputs),
            DesiredImageState::Staged => await_approval(inputs),
        };
    }
    let (degraded, action) = gate(inputs, Operation::Stage, stage_desired(inputs));
    Decision {
        phase: DaemonPhase::Staging,
        phase_message: format!("Staging {desired}"),
        degraded,
        action,
    }
}

/// Booted into the desired image: Idle, unless an unlocked staged image
/// must be replaced first.
fn on_desired_image(inputs: &Inputs<'_>) -> Decision {
    if let Some(decision) = replace_unlocked_staged(inputs) {
        return decision;
    }
    Decision {
        phase: DaemonPhase::Idle,
        phase_message: unplanned_boot(inputs)
            .unwrap_or_else(|| format!("Running {}", inputs.spec.desired_image)),
        degraded: None,
        action: Action::None,
    }
}

/// A remembered failure of `op` on the desired image: report it once it
/// alarms ([`Failure::alarms`]), and retry (`action`) only once the
/// backoff has passed.
fn gate(inputs: &Inputs<'_>, op: Operation, action: Action) -> (Option<String>, Action) {
    let failure = inputs
        .failure
        .filter(|f| f.operation == op && f.image == inputs.spec.desired_image);
    let degraded = failure
        .filter(|f| f.alarms(inputs.now_ms))
        .map(|f| f.message.clone());
    match failure {
        Some(f) if f.retry_at_ms > inputs.now_ms => (
            degraded,
            Action::RetryAfter(Duration::from_millis(f.retry_at_ms - inputs.now_ms)),
        ),
        _ => (degraded, action),
    }
}

fn stage_desired(inputs: &Inputs<'_>) -> Action {
    Action::Stage {
        image: inputs.spec.desired_image.to_string(),
    }
}

/// Approved, and staged by this daemon's helper: apply it.
fn apply(inputs: &Inputs<'_>) -> Decision {
    let staged = inputs.host.staged.as_ref();
    let soft_reboot = inputs.spec.reboot_policy == RebootPolicy::AllowSoftReboot
        && staged.is_some_and(|s| s.soft_reboot_capable);
    let (degraded, action) = gate(inputs, Operation::Apply, Action::Apply { soft_reboot });
    let kind = if soft_reboot { "soft reboot" } else { "reboot" };
    Decision {
        phase: DaemonPhase::Rebooting,
        phase_message: format!("Applying {} ({kind})", inputs.spec.desired_image),
        degraded,
        action,
    }
}

/// Approved, but staged by an earlier daemon (it restarted while
/// approved): the helper applies only what it staged, so stage again, and
/// report it as what it is (on a real host it can take minutes), not as
/// Rebooting.
fn stage_again(inputs: &Inputs<'_>) -> Decision {
    let (degraded, action) = gate(inputs, Operation::Stage, stage_desired(inputs));
    Decision {
        phase: DaemonPhase::Staging,
        phase_message: format!(
            "Staging {} again before applying it (staged before the daemon restarted)",
            inputs.spec.desired_image
        ),
        degraded,
        action,
    }
}

/// Staged, not approved to boot: wait.
fn await_approval(inputs: &Inputs<'_>) -> Decision {
    let lock = if inputs.host.staged.as_ref().is_some_and(|s| s.download_only) {
        "locked"
    } else {
        "unlocked: this bootc cannot stage without applying on the next boot"
    };
    Decision {
        phase: DaemonPhase::Staged,
        phase_message: format!("Image staged ({lock}), awaiting desiredImageState: Booted"),
        degraded: None,
        action: Action::None,
    }
}

/// The status that reports `decision` on `host`.
pub fn status_for(
    decision: &Decision,
    inputs: &Inputs<'_>,
) -> (BootcNodeStatus, [ConditionUpdate; 2]) {
    let host = inputs.host;
    let status = BootcNodeStatus {
        observed_generation: inputs.generation,
        booted: host.booted.clone(),
        staged: host.staged.clone(),
        rollback: host.rollback.clone(),
        boot_id: Some(host.boot_id.clone()).filter(|b| !b.is_empty()),
        download_only_supported: Some(host.download_only_supported),
        host_updaters: host.host_updaters.clone(),
        conditions: inputs
            .previous
            .map(|p| p.conditions.clone())
            .unwrap_or_default(),
        // Carried: the node loop records this report in it
        // (`api::node_history`).
        history: inputs
            .previous
            .map(|p| p.history.clone())
            .unwrap_or_default(),
        // The node loop's to report (it knows its sandbox).
        landlock: None,
        daemon: Some(this_daemon()),
    };
    let idle = ConditionUpdate::new(
        ConditionType::Idle,
        decision.phase.is_idle(),
        decision.phase.reason(),
        decision.phase_message.clone(),
    );
    let degraded = match &decision.degraded {
        Some(message) => ConditionUpdate::new(
            ConditionType::Degraded,
            true,
            super::bootc_errors::reason_for(message),
            message.clone(),
        ),
        None => ConditionUpdate::new(ConditionType::Degraded, false, Reason::Healthy, "No errors"),
    };
    (status, [idle, degraded])
}

/// The status the daemon writes for `decision`: [`status_for`]'s, with its
/// conditions applied at `now`. The Idle condition's reason is the phase,
/// so its transition time moves with the phase: it says since when.
pub fn status_to_write(decision: &Decision, inputs: &Inputs<'_>, now: &Time) -> BootcNodeStatus {
    let (mut status, updates) = status_for(decision, inputs);
    for update in &updates {
        if update.type_ == ConditionType::Idle {
            api::conditions::apply_phase(&mut status.conditions, update, inputs.generation, now);
        } else {
            api::conditions::apply(&mut status.conditions, update, inputs.generation, now);
        }
    }
    status
}

/// Why the daemon cannot go by the host's bootc state: `bootc status`
/// failed (a broken bootc), or it answered that nothing is booted through
/// bootc. Reported as the BootcNode's Degraded condition; nothing is staged
/// or applied meanwhile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostProblem {
    /// The Degraded reason.
    pub reason: Reason,
    pub message: String,
}

/// The problem with a host whose status was read: bootc's documented test
/// of a host deployed through bootc is that it reports a booted deployment
/// (a container or a host booted otherwise reports none); and one it
/// reports must be one it can update from an image ([`api::unmanageable`]:
/// bootc refuses to switch an incompatible deployment, and one with no
/// image or no digest cannot be compared with any). Either way nothing is
/// staged or applied until a person repairs the host, which the next read
/// sees.
pub fn host_problem(host: &HostView) -> Option<HostProblem> {
    if host.booted.is_none() {
        return Some(HostProblem {
            reason: Reason::NotABootcHost,
            message: "bootc status reports no booted deployment: this host is not deployed via bootc (or bootc runs in a container); nothing is staged here".to_owned(),
        });
    }
    api::unmanageable(host.booted.as_ref(), host.staged.as_ref()).map(|message| HostProblem {
        reason: Reason::HostIncompatible,
        message,
    })
}

/// Longest delay between reads of a failing `bootc status`: a read is
/// cheap, and a repaired host should not wait minutes to be seen.
pub const STATUS_RETRY_MAX: Duration = Duration::from_secs(60);

/// The delay before reading a failing `bootc status` again.
pub fn status_retry(attempts: u32) -> Duration {
    Failure::backoff(attempts).min(STATUS_RETRY_MAX)
}

/// The problem of a failed `bootc status`, in bootc's (or the helper's)
/// words.
pub fn status_failed(message: &str) -> HostProblem {
    let reason = match super::bootc_errors::reason_for(message) {
        r if r == Reason::NotABootcHost => r,
        _ => Reason::BootcStatusFailed,
    };
    HostProblem {
        reason,
        message: format!("bootc status failed: {message}"),
    }
}

/// The status that reports `problem`. What the host runs is taken from
/// `host` when bootc answered, else kept from `previous` (the last known,
/// possibly stale); the phase is kept; the spec is marked seen, so that the
/// controller sees a daemon that answers, not a silent one.
pub fn status_for_problem(
    previous: Option<&BootcNodeStatus>,
    generation: Option<i64>,
    host: Option<&HostView>,
    problem: &HostProblem,
) -> (BootcNodeStatus, ConditionUpdate) {
    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = generation;
    status.daemon = Some(this_daemon());
    if let Some(host) = host {
        status.booted = host.booted.clone();
        status.staged = host.staged.clone();
        status.rollback = host.rollback.clone();
        status.boot_id = Some(host.boot_id.clone()).filter(|b| !b.is_empty());
        status.download_only_supported = Some(host.download_only_supported);
        status.host_updaters = host.host_updaters.clone();
    }
    let degraded = ConditionUpdate::new(
        ConditionType::Degraded,
        true,
        problem.reason,
        problem.message.clone(),
    );
    (status, degraded)
}

/// Does `new` tell the controller anything `stored` does not? Condition
/// timestamps do not count. Nor does the spec generation while the node is
/// Idle on its desired image in both: a spec change that leaves the desired
/// image booted (the controller revoking the approval as it releases the
/// reboot slot, a rotated pull secret) changes nothing the daemon reports,
/// and the controller judges an updated node by its booted image, not by
/// `observedGeneration`. Every other change is written.
pub fn worth_writing(stored: Option<&BootcNodeStatus>, new: &BootcNodeStatus) -> bool {
    let Some(stored) = stored else {
        return true;
    };
    let idle = |s: &BootcNodeStatus| {
        s.phase() == Ok(Some(DaemonPhase::Idle))
            && api::conditions::is_true(&s.conditions, ConditionType::Idle)
    };
    let ignore_generation = idle(stored) && idle(new);
    let comparable = |s: &BootcNodeStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time =
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
            if ignore_generation {
                c.observed_generation = None;
            }
        }
        if ignore_generation {
            s.observed_generation = None;
        }
        s.conditions.sort_by(|x, y| x.type_.cmp(&y.type_));
        s
    };
    comparable(stored) != comparable(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str =
        "r.io/os@sha256:0000000000000000000000000000000000000000000000000000000000000000";
    const NEW: &str =
        "r.io/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const NEWER: &str =
        "r.io/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn entry(image: &str, soft: bool, locked: bool) -> BootEntryStatus {
        BootEntryStatus {
            image: Some(image.into()),
            image_digest: api::image_ref::digest_of(image).map(Into::into),
            soft_reboot_capable: soft,
            download_only: locked,
            ..Default::default()
        }
    }

    fn spec(desired: &str, state: DesiredImageState, policy: RebootPolicy) -> BootcNodeSpec {
        BootcNodeSpec {
            desired_image: desired.into(),
            desired_image_state: state,
            reboot_policy: policy,
            pull_secret_ref: None,
            pull_secret_hash: None,
            staging_weights: None,
        }
    }

    fn host(booted: &str, staged: Option<BootEntryStatus>, boot_id: &str) -> HostView {
        HostView {
            booted: Some(entry(booted, false, false)),
            staged,
            rollback: None,
            boot_id: boot_id.to_owned(),
            download_only_supported: true,
            host_updaters: Vec::new(),
        }
    }

    #[test]
    fn host_updaters_are_reported_and_reread_while_on_only() {
        let spec = spec(OLD, DesiredImageState::Staged, RebootPolicy::RebootOnly);
        let mut host = host(OLD, None, "b1");
        let every = Duration::from_secs(60);
        assert_eq!(updaters_recheck(&host, every), None, "none: no re-read");
        host.host_updaters = vec![api::host_updaters::BOOTC_TIMER.to_owned()];
        assert_eq!(updaters_recheck(&host, every), Some(every));
        let inputs = Inputs {
            spec: &spec,
            generation: Some(1),
            previous: None,
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: false,
        };
        let (on, _) = status_for(&decide(&inputs), &inputs);
        assert_eq!(on.host_updaters, host.host_updaters);
        // Idle, nothing else changed: a re-read finding the same is no write.
        assert!(!worth_writing(Some(&on), &on.clone()));
        // Masked by hand: the next read is written, the list gone.
        let masked = HostView {
            host_updaters: Vec::new(),
            ..host.clone()
        };
        let inputs = Inputs {
            host: &masked,
            previous: Some(&on),
            ..inputs
        };
        let (off, _) = status_for(&decide(&inputs), &inputs);
        assert!(off.host_updaters.is_empty());
        assert!(worth_writing(Some(&on), &off));
        // A failing bootc keeps reporting what systemd said.
        let (problem, _) =
            status_for_problem(Some(&on), Some(1), Some(&host), &status_failed("boom"));
        assert_eq!(problem.host_updaters, host.host_updaters);
    }

    /// The status written before an apply of NEW on a host booted into OLD.
    fn rebooting_status(boot_id: &str, generation: i64) -> BootcNodeStatus {
        let mut status = BootcNodeStatus {
            observed_generation: Some(generation),
            boot_id: Some(boot_id.to_owned()),
            booted: Some(entry(OLD, false, false)),
            staged: Some(entry(NEW, true, true)),
            ..Default::default()
        };
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
        api::conditions::apply(
            &mut status.conditions,
            &ConditionUpdate::new(
                ConditionType::Idle,
                false,
                DaemonPhase::Rebooting.reason(),
                "Applying",
            ),
            Some(generation),
            &now,
        );
        status
    }

    struct Row {
        name: &'static str,
        spec: BootcNodeSpec,
        host: HostView,
        previous: Option<BootcNodeStatus>,
        failure: Option<Failure>,
        /// This daemon's helper staged the desired image.
        staged_here: bool,
        phase: DaemonPhase,
        degraded: bool,
        action: Action,
    }

    /// A row with the usual inputs: no previous status, no recorded
    /// failure, staged by this daemon; and the usual verdict: not degraded.
    fn row(
        name: &'static str,
        spec: BootcNodeSpec,
        host: HostView,
        phase: DaemonPhase,
        action: Action,
    ) -> Row {
        Row {
            name,
            spec,
            host,
            previous: None,
            failure: None,
            staged_here: true,
            phase,
            degraded: false,
            action,
        }
    }

    impl Row {
        fn previous(self, previous: BootcNodeStatus) -> Self {
            Row {
                previous: Some(previous),
                ..self
            }
        }

        fn failure(self, failure: Failure) -> Self {
            Row {
                failure: Some(failure),
                ..self
            }
        }

        /// An earlier daemon staged the image, not this one.
        fn not_staged_here(self) -> Self {
            Row {
                staged_here: false,
                ..self
            }
        }

        fn degraded(self) -> Self {
            Row {
                degraded: true,
                ..self
            }
        }
    }

    #[test]
    fn state_machine_table() {
        use DaemonPhase as P;
        use DesiredImageState::{Booted, Staged};
        use RebootPolicy::{AllowSoftReboot, RebootOnly};
        let failure = |op, image: &str, retry_at_ms| Failure {
            operation: op,
            image: image.to_owned(),
            message: "error: pulling: 401 Unauthorized".into(),
            attempts: 1,
            first_at_ms: 0,
            retry_at_ms,
        };
        // The status a daemon wrote after the failed reboot, as the host came back.
        let reported_failed_reboot = {
            let mut reported = BootcNodeStatus {
                boot_id: Some("b2".into()),
                staged: None,
                ..rebooting_status("b1", 3)
            };
            let now =
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
            for (type_, status, reason, message) in [
                (
                    ConditionType::Idle,
                    false,
                    DaemonPhase::Rebooting.reason(),
                    FAILED_REBOOT,
                ),
                (
                    ConditionType::Degraded,
                    true,
                    Reason::Error,
                    "rebooted into OLD",
                ),
            ] {
                api::conditions::apply(
                    &mut reported.conditions,
                    &ConditionUpdate::new(type_, status, reason, message),
                    Some(3),
                    &now,
                );
            }
            reported
        };
        #[rustfmt::skip]
        let rows = vec![
            row("desired is booted: idle, nothing to stage",
                spec(NEW, Staged, RebootOnly), host(NEW, None, "b1"),
                P::Idle, Action::None),
            row("desired is booted even when approved to boot",
                spec(NEW, Booted, RebootOnly), host(NEW, None, "b1"),
                P::Idle, Action::None),
            row("new desired image: stage it",
                spec(NEW, Staged, RebootOnly), host(OLD, None, "b1"),
                P::Staging, Action::Stage { image: NEW.into() }),
            row("staged: wait for approval",
                spec(NEW, Staged, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Staged, Action::None),
            row("desired changed while staged: stage again",
                spec(NEWER, Staged, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Staging, Action::Stage { image: NEWER.into() }),
            row("approved but staged is another image: never apply it",
                spec(NEWER, Booted, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Staging, Action::Stage { image: NEWER.into() }),
            row("approved: full reboot under RebootOnly",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Rebooting, Action::Apply { soft_reboot: false }),
            row("approved: soft reboot when allowed and capable",
                spec(NEW, Booted, AllowSoftReboot), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Rebooting, Action::Apply { soft_reboot: true }),
            row("approved: allowed but not capable is a full reboot",
                spec(NEW, Booted, AllowSoftReboot), host(OLD, Some(entry(NEW, false, true)), "b1"),
                P::Rebooting, Action::Apply { soft_reboot: false }),
            row("restarted before the reboot happened (same boot id): apply again",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b1"),
                P::Rebooting, Action::Apply { soft_reboot: false })
                .previous(rebooting_status("b1", 3)),
            row("rebooted into the wrong image: degraded, no loop",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b2"),
                P::Rebooting, Action::None)
                .previous(rebooting_status("b1", 3)).degraded(),
            row("the failed reboot already reported (the host as it came back): still degraded, no loop",
                spec(NEW, Booted, RebootOnly), host(OLD, None, "b2"),
                P::Rebooting, Action::None)
                .previous(reported_failed_reboot).not_staged_here().degraded(),
            row("soft reboot (boot id kept) into another image: degraded, no loop",
                spec(NEW, Booted, AllowSoftReboot), host(NEWER, None, "b1"),
                P::Rebooting, Action::None)
                .previous(rebooting_status("b1", 3)).degraded(),
            row("soft reboot (boot id kept) back on the old image, staged gone: degraded, no restage",
                spec(NEW, Booted, AllowSoftReboot), host(OLD, None, "b1"),
                P::Rebooting, Action::None)
                .previous(rebooting_status("b1", 3)).degraded(),
            row("soft reboot into the desired image (boot id kept): idle",
                spec(NEW, Booted, AllowSoftReboot), host(NEW, None, "b1"),
                P::Idle, Action::None)
                .previous(rebooting_status("b1", 3)),
            row("a status from before the deployments were recorded: no evidence, apply again",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b1"),
                P::Rebooting, Action::Apply { soft_reboot: false })
                .previous(BootcNodeStatus { booted: None, staged: None, ..rebooting_status("b1", 3) }),
            row("rebooted into the wrong image, then a new spec: stage it",
                spec(NEWER, Staged, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b2"),
                P::Staging, Action::Stage { image: NEWER.into() })
                .previous(rebooting_status("b1", 2)),
            row("rebooted into the desired image: idle",
                spec(NEW, Booted, RebootOnly), host(NEW, None, "b2"),
                P::Idle, Action::None)
                .previous(rebooting_status("b1", 3)),
            row("stage failed: degraded, back off",
                spec(NEW, Staged, RebootOnly), host(OLD, None, "b1"),
                P::Staging, Action::RetryAfter(Duration::from_millis(4_000)))
                .failure(failure(Operation::Stage, NEW, 5_000)).degraded(),
            row("stage failed, backoff over: retry, still degraded until it works",
                spec(NEW, Staged, RebootOnly), host(OLD, None, "b1"),
                P::Staging, Action::Stage { image: NEW.into() })
                .failure(failure(Operation::Stage, NEW, 500)).degraded(),
            row("a failure for another image does not hold back a new one",
                spec(NEWER, Staged, RebootOnly), host(OLD, None, "b1"),
                P::Staging, Action::Stage { image: NEWER.into() })
                .failure(failure(Operation::Stage, NEW, 5_000)),
            row("apply failed: degraded, back off",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b1"),
                P::Rebooting, Action::RetryAfter(Duration::from_millis(1_000)))
                .failure(failure(Operation::Apply, NEW, 2_000)).degraded(),
            row("restarted while approved, staged by an earlier daemon: Staging, stage again",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Staging, Action::Stage { image: NEW.into() })
                .not_staged_here(),
            row("restarted after writing Rebooting (same boot id), staged by an earlier daemon: Staging, stage again",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b1"),
                P::Staging, Action::Stage { image: NEW.into() })
                .previous(rebooting_status("b1", 3)).not_staged_here(),
            row("re-stage before applying failed: Staging, degraded, back off",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Staging, Action::RetryAfter(Duration::from_millis(4_000)))
                .failure(failure(Operation::Stage, NEW, 5_000)).not_staged_here().degraded(),
            row("staged by an earlier daemon, not approved: Staged, nothing to do",
                spec(NEW, Staged, RebootOnly), host(OLD, Some(entry(NEW, true, true)), "b1"),
                P::Staged, Action::None)
                .not_staged_here(),
            row("rebooted into the wrong image under a new daemon: degraded, not staged again",
                spec(NEW, Booted, RebootOnly), host(OLD, Some(entry(NEW, false, true)), "b2"),
                P::Rebooting, Action::None)
                .previous(rebooting_status("b1", 3)).not_staged_here().degraded(),
            row("restarted while approved, desired already booted: idle",
                spec(NEW, Booted, RebootOnly), host(NEW, None, "b2"),
                P::Idle, Action::None)
                .previous(rebooting_status("b1", 3)).not_staged_here(),
        ];
        for row in rows {
            let inputs = Inputs {
                spec: &row.spec,
                generation: Some(3),
                previous: row.previous.as_ref(),
                host: &row.host,
                failure: row.failure.as_ref(),
                now_ms: 1_000,
                staged_here: row.staged_here,
            };
            let d = decide(&inputs);
            assert_eq!(d.phase, row.phase, "{}: phase", row.name);
            assert_eq!(
                d.degraded.is_some(),
                row.degraded,
                "{}: degraded {:?}",
                row.name,
                d.degraded
            );
            assert_eq!(d.action, row.action, "{}: action", row.name);
        }
    }

    /// A host bootc cannot update from an image is Degraded with bootc's
    /// own words and nothing is staged there (`host_problem` comes before
    /// any decision); a host bootc manages is not.
    #[test]
    fn a_host_bootc_cannot_update_from_an_image_is_reported_not_moved() {
        let incompatible = |mut e: BootEntryStatus| {
            e.incompatible = true;
            e
        };
        let mut layered = host(OLD, None, "b1");
        layered.booted = layered.booted.map(incompatible);
        let layered_staged = host(OLD, Some(incompatible(entry(NEW, false, true))), "b1");
        let mut ostree_remote = host(OLD, None, "b1");
        if let Some(b) = ostree_remote.booted.as_mut() {
            b.image = None;
            b.image_digest = None;
        }
        let mut no_digest = host(OLD, None, "b1");
        if let Some(b) = no_digest.booted.as_mut() {
            b.image_digest = None;
        }
        // (what, host, what the message says, or None: no problem)
        let rows = [
            (
                "booted incompatible",
                layered,
                Some(api::BOOTC_INCOMPATIBLE),
            ),
            (
                "staged incompatible",
                layered_staged,
                Some("staged deployment incompatible"),
            ),
            (
                "not from an image",
                ostree_remote,
                Some("not from a container image"),
            ),
            ("no digest", no_digest, Some("with no digest")),
            (
                "an image with its digest",
                host(OLD, Some(entry(NEW, false, true)), "b1"),
                None,
            ),
        ];
        for (what, h, says) in rows {
            let problem = host_problem(&h);
            match says {
                None => assert_eq!(problem, None, "{what}"),
                Some(words) => {
                    let p = problem.unwrap_or_else(|| panic!("{what}: no problem"));
                    assert_eq!(p.reason, Reason::HostIncompatible, "{what}");
                    assert!(p.message.contains(words), "{what}: {}", p.message);
                }
            }
        }
    }

    #[test]
    fn a_host_bootc_cannot_describe_is_reported_with_bootcs_words() {
        let mut not_deployed = host(OLD, None, "b1");
        not_deployed.booted = None;
        let problem = host_problem(&not_deployed).unwrap();
        assert_eq!(problem.reason, Reason::NotABootcHost);
        assert_eq!(host_problem(&host(OLD, None, "b1")), None);

        let broken = status_failed(
            "bootc [\"status\"] failed (exit status: 1): error: Status: Getting composefs deployment status: boom",
        );
        assert_eq!(broken.reason, Reason::BootcStatusFailed);
        assert!(
            broken
                .message
                .contains("Getting composefs deployment status: boom")
        );
        let container = status_failed(
            "error: Status: Preparing for write: Detected container; this command requires a booted host system.",
        );
        assert_eq!(container.reason, Reason::NotABootcHost);

        // The last known deployments and phase stay; the spec is seen.
        let previous = rebooting_status("b1", 2);
        let (status, degraded) = status_for_problem(Some(&previous), Some(3), None, &broken);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.booted, previous.booted);
        assert_eq!(status.conditions, previous.conditions);
        assert!(degraded.status);
        assert_eq!(degraded.reason, Reason::BootcStatusFailed);
        // A fresh answer (nothing booted) replaces them.
        let (status, degraded) =
            status_for_problem(Some(&previous), Some(3), Some(&not_deployed), &problem);
        assert_eq!(status.booted, None);
        assert_eq!(status.boot_id.as_deref(), Some("b1"));
        assert_eq!(degraded.reason, Reason::NotABootcHost);
    }

    #[test]
    fn wrong_image_message_names_both_images() {
        let spec = spec(NEW, DesiredImageState::Booted, RebootPolicy::RebootOnly);
        let host = host(OLD, None, "b2");
        let previous = rebooting_status("b1", 3);
        let d = decide(&Inputs {
            spec: &spec,
            generation: Some(3),
            previous: Some(&previous),
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: true,
        });
        let message = d.degraded.unwrap();
        assert!(
            message.contains(OLD) && message.contains(NEW) && message.contains("b1 -> b2"),
            "{message}"
        );
        // A soft reboot keeps the boot id: the message names the deployments.
        let host = self::host(NEWER, None, "b1");
        let d = decide(&Inputs {
            spec: &spec,
            generation: Some(3),
            previous: Some(&previous),
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: true,
        });
        let message = d.degraded.unwrap();
        assert!(
            message.contains(&format!("{OLD} -> {NEWER}")) && message.contains(NEW),
            "{message}"
        );
    }

    #[test]
    fn multi_arch_desired_matches_the_per_platform_booted_digest() {
        let index_ref = NEW;
        let mut booted = entry(index_ref, false, false);
        booted.image_digest =
            Some("sha256:9999999999999999999999999999999999999999999999999999999999999999".into());
        let host = HostView {
            booted: Some(booted),
            boot_id: "b".into(),
            ..Default::default()
        };
        let spec = spec(
            index_ref,
            DesiredImageState::Staged,
            RebootPolicy::RebootOnly,
        );
        let d = decide(&Inputs {
            spec: &spec,
            generation: None,
            previous: None,
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: true,
        });
        assert_eq!(d.phase, DaemonPhase::Idle);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(Failure::backoff(1), Duration::from_secs(5));
        assert_eq!(Failure::backoff(2), Duration::from_secs(10));
        assert_eq!(Failure::backoff(4), Duration::from_secs(40));
        assert_eq!(Failure::backoff(7), Duration::from_secs(300));
        assert_eq!(Failure::backoff(200), Duration::from_secs(300));
    }

    /// A status as written for `phase` on a host booted into OLD with NEW staged.
    fn phase_status(phase: DaemonPhase, boot_id: &str) -> BootcNodeStatus {
        let mut status = rebooting_status(boot_id, 3);
        status.conditions.clear();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
        api::conditions::apply(
            &mut status.conditions,
            &ConditionUpdate::new(ConditionType::Idle, false, phase.reason(), "m"),
            Some(3),
            &now,
        );
        status
    }

    #[test]
    fn an_unplanned_boot_into_the_staged_image_is_reported() {
        let spec = spec(NEW, DesiredImageState::Staged, RebootPolicy::RebootOnly);
        let rebooted = host(NEW, None, "b2");
        for (name, previous, unplanned) in [
            (
                "staged, then a reboot nobody asked for",
                phase_status(DaemonPhase::Staged, "b1"),
                true,
            ),
            (
                "staging, then a reboot",
                phase_status(DaemonPhase::Staging, "b1"),
                true,
            ),
            (
                "applied by this daemon",
                phase_status(DaemonPhase::Rebooting, "b1"),
                false,
            ),
            (
                "same boot (status from before the stage)",
                phase_status(DaemonPhase::Staged, "b2"),
                false,
            ),
        ] {
            let inputs = Inputs {
                spec: &spec,
                generation: Some(3),
                previous: Some(&previous),
                host: &rebooted,
                failure: None,
                now_ms: 0,
                staged_here: false,
            };
            let d = decide(&inputs);
            assert_eq!(
                (d.phase, d.action.clone()),
                (DaemonPhase::Idle, Action::None),
                "{name}"
            );
            assert_eq!(
                d.phase_message.starts_with(UNPLANNED_BOOT),
                unplanned,
                "{name}: {}",
                d.phase_message
            );
            if unplanned {
                // Reported once, then kept (not rewritten away).
                let (mut status, updates) = status_for(&d, &inputs);
                let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::UNIX_EPOCH,
                );
                for u in &updates {
                    api::conditions::apply(&mut status.conditions, u, Some(4), &now);
                }
                let later = Inputs {
                    generation: Some(4),
                    previous: Some(&status),
                    ..inputs
                };
                assert_eq!(decide(&later).phase_message, d.phase_message, "{name}");
            }
        }
    }

    #[test]
    fn a_node_that_left_its_pool_is_told_back_to_what_it_runs() {
        // Installed from a tag: told back to its digest, not the tag (which
        // may name the image being undone by now).
        let tagged = BootEntryStatus {
            image: Some("r.io/os:stable".into()),
            ..entry(OLD, false, false)
        };
        let by_tag = |staged| HostView {
            booted: Some(tagged.clone()),
            ..host(OLD, staged, "b1")
        };
        let cases = [
            (
                "staged unlocked by the pool",
                by_tag(Some(entry(NEW, false, false))),
                Some(OLD),
            ),
            (
                "booted by digest",
                host(OLD, Some(entry(NEW, false, false)), "b1"),
                Some(OLD),
            ),
            (
                "staged locked: a reboot discards it",
                by_tag(Some(entry(NEW, false, true))),
                None,
            ),
            (
                "staged by someone else",
                by_tag(Some(entry(NEWER, false, false))),
                None,
            ),
            (
                "already told back",
                by_tag(Some(entry(OLD, false, false))),
                None,
            ),
            ("nothing staged", by_tag(None), None),
        ];
        for (case, host, want) in cases {
            assert_eq!(on_leaving(NEW, &host).as_deref(), want, "{case}");
        }
        let no_digest = HostView {
            booted: Some(BootEntryStatus {
                image_digest: None,
                ..tagged
            }),
            ..host(OLD, Some(entry(NEW, false, false)), "b1")
        };
        assert_eq!(on_leaving(NEW, &no_digest), None, "no digest: no guess");
    }

    #[test]
    fn rolled_back_to_the_booted_image_replaces_an_unlocked_staged_one() {
        let spec = spec(OLD, DesiredImageState::Staged, RebootPolicy::RebootOnly);
        for (locked, action) in [
            (false, Action::Stage { image: OLD.into() }),
            (true, Action::None),
        ] {
            let host = host(OLD, Some(entry(NEW, false, locked)), "b1");
            let inputs = Inputs {
                spec: &spec,
                generation: Some(2),
                previous: None,
                host: &host,
                failure: None,
                now_ms: 0,
                staged_here: false,
            };
            let d = decide(&inputs);
            assert_eq!(d.action, action, "locked={locked}");
            assert_eq!(d.phase == DaemonPhase::Idle, locked, "locked={locked}");
        }
        // Once bootc staged the redeploy of the booted image: idle.
        let host = host(OLD, Some(entry(OLD, false, false)), "b1");
        let inputs = Inputs {
            spec: &spec,
            generation: Some(2),
            previous: None,
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: true,
        };
        assert_eq!(decide(&inputs).phase, DaemonPhase::Idle);
    }

    /// A failed stage whose cause may pass is retried with backoff and
    /// reported Staging with its last error, Degraded only from
    /// DEGRADED_AFTER_ATTEMPTS attempts or DEGRADED_AFTER; one whose cause
    /// stays (404, 401, no space) and a failed apply alarm at once.
    #[test]
    fn a_failed_stage_settles_before_it_alarms() {
        let unreachable = "staging failed (attempt 1): error: pinging container registry r.io: connection refused";
        let not_found = "staging failed (attempt 1): error: reading manifest sha256:11 in r.io/os: manifest unknown";
        let settle_ms = u64::try_from(DEGRADED_AFTER.as_millis()).unwrap_or(u64::MAX);
        // (what, operation, message, attempts, ms since the first failure,
        //  Degraded, retry due in ms (None: the command again))
        let rows = [
            (
                "unreachable, first attempt: settling, backing off",
                Operation::Stage,
                unreachable,
                1,
                1_000,
                false,
                Some(4_000),
            ),
            (
                "unreachable, second attempt, backoff over: retried, settling",
                Operation::Stage,
                unreachable,
                2,
                15_000,
                false,
                None,
            ),
            (
                "unreachable, the third attempt failed: Degraded",
                Operation::Stage,
                unreachable,
                DEGRADED_AFTER_ATTEMPTS,
                20_000,
                true,
                Some(4_000),
            ),
            (
                "unreachable, long since the first failure: Degraded",
                Operation::Stage,
                unreachable,
                1,
                settle_ms,
                true,
                Some(4_000),
            ),
            (
                "an error bootc does not name: settling",
                Operation::Stage,
                "staging failed: error: 502 Bad Gateway",
                1,
                1_000,
                false,
                Some(4_000),
            ),
            (
                "not found: Degraded at once",
                Operation::Stage,
                not_found,
                1,
                1_000,
                true,
                Some(4_000),
            ),
            (
                "unauthorized: Degraded at once",
                Operation::Stage,
                "error: reading manifest: authentication required",
                1,
                1_000,
                true,
                Some(4_000),
            ),
            (
                "a failed apply: Degraded at once",
                Operation::Apply,
                unreachable,
                1,
                1_000,
                true,
                Some(4_000),
            ),
        ];
        for (what, operation, message, attempts, since_first, degraded, retry_in) in rows {
            let approved = operation == Operation::Apply;
            let spec = spec(
                NEW,
                if approved {
                    DesiredImageState::Booted
                } else {
                    DesiredImageState::Staged
                },
                RebootPolicy::RebootOnly,
            );
            let staged = approved.then(|| entry(NEW, false, true));
            let host = host(OLD, staged, "b1");
            let now_ms = 100_000 + since_first;
            let failure = Failure {
                operation,
                image: NEW.into(),
                message: message.into(),
                attempts,
                first_at_ms: 100_000,
                retry_at_ms: now_ms + retry_in.unwrap_or(0),
            };
            let inputs = Inputs {
                spec: &spec,
                generation: Some(1),
                previous: None,
                host: &host,
                failure: Some(&failure),
                now_ms,
                staged_here: true,
            };
            let d = decide(&inputs);
            assert_eq!(d.degraded.as_deref(), degraded.then_some(message), "{what}");
            let action = match (retry_in, approved) {
                (Some(ms), _) => Action::RetryAfter(Duration::from_millis(ms)),
                (None, false) => Action::Stage { image: NEW.into() },
                (None, true) => Action::Apply { soft_reboot: false },
            };
            assert_eq!(d.action, action, "{what}");
            // While it settles, the last error is in the phase's message.
            assert_eq!(
                d.phase_message.contains(message),
                !degraded,
                "{what}: {}",
                d.phase_message
            );
        }
    }

    #[test]
    fn degraded_reason_names_the_bootc_error() {
        let spec = spec(NEW, DesiredImageState::Staged, RebootPolicy::RebootOnly);
        let host = host(OLD, None, "b1");
        let failure = Failure {
            operation: Operation::Stage,
            image: NEW.into(),
            message: "staging failed: error: Switching: Switching (ostree): Preparing import: Fetching manifest: failed to invoke method OpenImage: reading manifest sha256:11 in r.io/os: manifest unknown".into(),
            attempts: 1,
            first_at_ms: 0,
            retry_at_ms: 10,
        };
        let inputs = Inputs {
            spec: &spec,
            generation: Some(1),
            previous: None,
            host: &host,
            failure: Some(&failure),
            now_ms: 0,
            staged_here: false,
        };
        let (_, [_, degraded]) = status_for(&decide(&inputs), &inputs);
        assert_eq!(
            (degraded.status, degraded.reason),
            (true, Reason::ImageNotFound)
        );
        assert!(degraded.message.contains("manifest unknown"));
    }

    #[test]
    fn status_reports_conditions() {
        let spec = spec(NEW, DesiredImageState::Staged, RebootPolicy::RebootOnly);
        let host = host(OLD, Some(entry(NEW, true, true)), "b1");
        let inputs = Inputs {
            spec: &spec,
            generation: Some(4),
            previous: None,
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: true,
        };
        let d = decide(&inputs);
        let (status, [idle, degraded]) = status_for(&d, &inputs);
        assert_eq!(status.observed_generation, Some(4));
        assert_eq!(status.boot_id.as_deref(), Some("b1"));
        assert_eq!(status.staged, host.staged);
        assert_eq!(
            (idle.status, idle.reason),
            (false, DaemonPhase::Staged.reason())
        );
        assert!(
            idle.message.contains("(locked)") && !idle.message.contains("unlocked"),
            "{}",
            idle.message
        );
        assert_eq!((degraded.status, degraded.reason), (false, Reason::Healthy));

        // An old bootc stages without --download-only: the status says so.
        let host = self::host(OLD, Some(entry(NEW, true, false)), "b1");
        let inputs = Inputs {
            host: &host,
            ..inputs
        };
        let d = decide(&inputs);
        let (_, [idle, _]) = status_for(&d, &inputs);
        assert_eq!(idle.reason, DaemonPhase::Staged.reason());
        assert!(
            idle.message
                .contains("unlocked: this bootc cannot stage without applying"),
            "{}",
            idle.message
        );
    }

    #[test]
    fn restage_after_a_restart_is_reported_as_staging() {
        let spec = spec(NEW, DesiredImageState::Booted, RebootPolicy::RebootOnly);
        let host = host(OLD, Some(entry(NEW, true, true)), "b1");
        let inputs = Inputs {
            spec: &spec,
            generation: Some(4),
            previous: Some(&rebooting_status("b1", 4)),
            host: &host,
            failure: None,
            now_ms: 0,
            staged_here: false,
        };
        let d = decide(&inputs);
        let (_, [idle, _]) = status_for(&d, &inputs);
        assert_eq!(
            (idle.status, idle.reason),
            (false, DaemonPhase::Staging.reason())
        );
        assert!(
            idle.message.contains(NEW) && idle.message.contains("again"),
            "{}",
            idle.message
        );
        // Once this daemon staged it, the same inputs apply.
        let d = decide(&Inputs {
            staged_here: true,
            ..inputs
        });
        assert_eq!(d.phase, DaemonPhase::Rebooting);
        assert_eq!(d.action, Action::Apply { soft_reboot: false });
    }

    #[test]
    fn what_is_worth_writing() {
        use DesiredImageState::{Booted, Staged};
        let host_old = host(OLD, Some(entry(NEW, true, true)), "b1");
        let host_new = host(NEW, None, "b2");
        let host_staging_newer = host(NEW, Some(entry(NEWER, true, true)), "b2");
        // The status the loop would write for `spec` at `generation`.
        let status = |spec: &BootcNodeSpec, host: &HostView, generation: i64, at: i64| {
            let inputs = Inputs {
                spec,
                generation: Some(generation),
                previous: None,
                host,
                failure: None,
                now_ms: 0,
                staged_here: true,
            };
            let now = Time(jiff::Timestamp::from_second(at).unwrap());
            status_to_write(&decide(&inputs), &inputs, &now)
        };
        let staged = spec(NEW, Staged, RebootPolicy::RebootOnly);
        let approved = spec(NEW, Booted, RebootPolicy::RebootOnly);
        #[rustfmt::skip]
        let rows: Vec<(&str, Option<BootcNodeStatus>, BootcNodeStatus, bool)> = vec![
            // (what, the stored status, the new one, worth writing)
            ("nothing stored",
                None, status(&staged, &host_old, 1, 0), true),
            ("same but for the time",
                Some(status(&staged, &host_old, 1, 0)), status(&staged, &host_old, 1, 60), false),
            ("staged: a new generation is acknowledged",
                Some(status(&staged, &host_old, 1, 0)), status(&staged, &host_old, 2, 0), true),
            ("approved: Rebooting",
                Some(status(&staged, &host_old, 1, 0)), status(&approved, &host_old, 2, 0), true),
            ("after the reboot: Idle",
                Some(status(&approved, &host_old, 2, 0)), status(&approved, &host_new, 2, 0), true),
            ("idle on the desired image: the approval revoked changes nothing",
                Some(status(&approved, &host_new, 2, 0)), status(&staged, &host_new, 3, 0), false),
            ("idle, but the host changed",
                Some(status(&approved, &host_new, 2, 0)), status(&staged, &host_staging_newer, 3, 0), true),
        ];
        for (name, stored, new, want) in rows {
            assert_eq!(worth_writing(stored.as_ref(), &new), want, "{name}");
        }
    }
}
