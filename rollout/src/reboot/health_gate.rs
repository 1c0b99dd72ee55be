//! The health gate (`spec.health`): a node proves the target before its
//! reboot slot is released, and a node that cannot is failed for it.
//!
//! * **The checks.** Once a slot holder runs the target with no reboot in
//!   flight, it must show, all at once: its Node Ready, its BootcNode not
//!   Degraded, each Node condition of `spec.health.conditions` with its
//!   status, and for each entry of `spec.health.pods` at least one matching
//!   pod bound to it, every such pod Ready.
//! * **Settling.** The checks must hold together for `settleSeconds`,
//!   counted from the latest of: the daemon's report that it runs the
//!   target (its phase's start) and each check's own last transition (as
//!   the Node's conditions and the pods' Ready conditions record it, so a
//!   controller restart loses nothing). A check that falls back starts the
//!   settle again. The node keeps its slot, cordoned, meanwhile: the pods
//!   must tolerate the cordon (DaemonSet pods do).
//! * **Failing.** A node whose checks have not held for `settleSeconds`
//!   within `timeoutSeconds` of its report is failed for the target: the
//!   digest and the check are marked on its BootcNode
//!   (`bootc.dev/health-failed`), the pool records the image in
//!   `status.failedImages`, and no node is given that image again: nobody
//!   is newly told it, nodes staged on it are told back to what they run,
//!   and no new slot is handed out. `onFailure: Halt` keeps the failed node
//!   in its slot, cordoned, for a person; `Rollback` approves it to boot
//!   the image it ran before (bootc's rollback deployment) in the same
//!   slot, which is released once it runs that image and is Ready. Nodes
//!   already on the image stay on it.
//! * **The whole pool back** (`rollbackUpdated: true`, with `Rollback`):
//!   once the pool has recorded the failure, its target in force is the
//!   image of its last completed rollout (`status.rollouts`), so the
//!   members already on the failed image roll back like any update, one
//!   slot at a time under the same budget; the pool stays
//!   `Degraded/RolledBack`, naming the image it left.
//! * **One node's word is not the pool's.** A node's checks are its own
//!   kubelet's and daemon's reports, and the threat model allows one node
//!   to be compromised: its failure is marked on its BootcNode and acted
//!   on in its own slot, but the pool-wide consequences above (nobody
//!   else told the image, staged nodes told back, `rollbackUpdated`) need
//!   [`fails_for_pool`]: failures on `spec.health.nodesToFailImage`
//!   distinct members (default 2), or a person's confirmation (the pool's
//!   `bootc.dev/confirm-image-failure: <digest>`). Until then the failing
//!   node keeps its slot (rolled back in it under `Rollback`) and the pool
//!   names it as the only witness; other slots go on being handed out,
//!   so another member can confirm or refute it. A missed batch
//!   `successThreshold` holds the rollout on its own (`crate::holds::batches`).
//! * **Unanswered.** Pods that could not be listed hold the slot and never
//!   fail a node: the gate is asked again after [`HEALTH_RECHECK`].
//! * **Clearing.** A new image reference or digest clears the mark; so
//!   does `kubectl bootc retry NODE` for the node's own.

use std::time::Duration;

use api::Node;
use api::{
    BootcNode, BootcNodePool, FailedImage, HealthFailurePolicy, HealthSpec, Reason, RolloutOutcome,
};
use jiff::Timestamp;

use crate::holds::gates::PodSeen;
use crate::model::{Problem, Target};

/// How soon a node whose checks do not all pass is looked at again (the
/// controller watches no pods: the plan requeues itself).
pub const HEALTH_RECHECK: Duration = Duration::from_secs(5);

/// What the health gate says of a slot holder back on the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proof {
    /// Every check held for `settleSeconds`: the slot may be released.
    Passed,
    /// Not yet: what it waits for, and when to look again.
    Settling { waiting: String, recheck: Duration },
    /// It did not pass in time: the check that failed.
    Failed { check: String },
}

/// What the checks show now: the ones that fail, and since when the others
/// have held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub failing: Vec<String>,
    /// The latest transition among the passing checks.
    pub since: Option<Timestamp>,
    /// The pods could not be listed (this error): nothing can be judged.
    pub unanswered: Option<String>,
}

/// Runs the checks of `spec` on a node (see the module docs).
pub fn check(
    spec: &HealthSpec,
    node: &Node,
    bn: &BootcNode,
    pods: Result<&[PodSeen], &str>,
) -> Checked {
    let mut checked = Checked::default();
    let mut passes = |ok: bool, since: Option<Timestamp>, what: String| {
        if ok {
            checked.since = checked.since.max(since);
        } else {
            checked.failing.push(what);
        }
    };
    let ready = api::node_health::condition(node, api::node_health::NODE_READY);
    passes(
        ready.is_some_and(|(s, _)| s == "True"),
        ready.and_then(|(_, t)| t),
        "Node Ready".to_owned(),
    );
    passes(!bn.is_degraded(), None, "BootcNode not Degraded".to_owned());
    for want in &spec.conditions {
        let seen = api::node_health::condition(node, &want.type_);
        let status = want.status.as_str();
        passes(
            seen.is_some_and(|(s, _)| s == status),
            seen.and_then(|(_, t)| t),
            format!(
                "Node condition {}={status} (is {})",
                want.type_,
                seen.map_or("missing", |(s, _)| s)
            ),
        );
    }
    match pods {
        Err(e) => checked.unanswered = Some(e.to_owned()),
        Ok(pods) => {
            for (entry, want) in spec.pods.iter().enumerate() {
                let mine: Vec<&PodSeen> = pods.iter().filter(|p| p.entry == entry).collect();
                if mine.is_empty() {
                    let what = format!("a pod of spec.health.pods[{entry}] in {}", want.namespace);
                    passes(false, None, what);
                }
                for pod in mine {
                    passes(pod.ready, pod.since, format!("pod {} Ready", pod.name));
                }
            }
        }
    }
    checked
}

/// The gate's answer for a node whose checks show `checked`, `booted` being
/// when its daemon reported the target (None: not known, counted from
/// `now`).
pub fn assess(
    spec: &HealthSpec,
    checked: &Checked,
    booted: Option<Timestamp>,
    now: Timestamp,
) -> Proof {
    let booted = booted.unwrap_or(now).min(now);
    let since_boot = now.duration_since(booted).unsigned_abs();
    let settle = seconds(spec.settle_seconds);
    let timeout = seconds(spec.timeout_seconds);
    if let Some(error) = &checked.unanswered {
        return Proof::Settling {
            waiting: format!("the pods of spec.health.pods could not be listed: {error}"),
            recheck: HEALTH_RECHECK,
        };
    }
    let held = checked.failing.is_empty().then(|| {
        let from = checked.since.unwrap_or(booted).max(booted).min(now);
        now.duration_since(from).unsigned_abs()
    });
    match held {
        Some(held) if held >= settle => Proof::Passed,
        _ if since_boot >= timeout => Proof::Failed {
            check: failure(checked, held, spec),
        },
        Some(held) => Proof::Settling {
            waiting: format!(
                "settling: every check holds, {}s of {}s",
                held.as_secs(),
                settle.as_secs()
            ),
            recheck: (settle - held).min(timeout - since_boot),
        },
        None => Proof::Settling {
            waiting: format!(
                "waiting for {} ({}s left of {}s)",
                checked.failing.join(", "),
                (timeout - since_boot).as_secs(),
                timeout.as_secs()
            ),
            recheck: HEALTH_RECHECK.min(timeout - since_boot),
        },
    }
}

/// The check a node failed on, as its mark and the pool name it.
fn failure(checked: &Checked, held: Option<Duration>, spec: &HealthSpec) -> String {
    match held {
        Some(held) => format!(
            "the checks held only {}s of settleSeconds {} within timeoutSeconds {}",
            held.as_secs(),
            spec.settle_seconds,
            spec.timeout_seconds
        ),
        None => format!(
            "{} not shown within timeoutSeconds {}",
            checked.failing.join(", "),
            spec.timeout_seconds
        ),
    }
}

fn seconds(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// `spec.health.nodesToFailImage`, or its default.
fn nodes_to_fail_image(pool: &BootcNodePool) -> i32 {
    let health = pool.spec.health.as_ref();
    health
        .and_then(|h| h.nodes_to_fail_image)
        .unwrap_or(api::DEFAULT_NODES_TO_FAIL_IMAGE)
}

/// Do `witnesses` distinct members failed on `target` fail it for the
/// whole pool? Yes from `spec.health.nodesToFailImage` of them (default
/// [`api::DEFAULT_NODES_TO_FAIL_IMAGE`]), or from one when a person
/// confirmed the failure of this digest on the pool.
pub fn fails_for_pool(pool: &BootcNodePool, target: &Target, witnesses: usize) -> bool {
    if witnesses == 0 {
        return false;
    }
    let needed = nodes_to_fail_image(pool);
    let confirmed = pool
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(api::labels::CONFIRM_IMAGE_FAILURE_ANNOTATION))
        .is_some_and(|digest| *digest == target.digest);
    confirmed || witnesses >= usize::try_from(needed.max(1)).unwrap_or(usize::MAX)
}

/// The pool's word on members that failed on `target`, too few to fail it
/// for the pool: who they are, that they keep their slots, and what would
/// fail the image for everyone.
pub(crate) fn lone_witnesses(
    pool: &BootcNodePool,
    target: &Target,
    witnesses: &[crate::facts::Failure],
) -> Problem {
    let needed = nodes_to_fail_image(pool);
    let named: Vec<String> = witnesses
        .iter()
        .map(|f| format!("{} ({})", f.node, f.check))
        .collect();
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let message = format!(
        "only {} of the {needed} nodes spec.health.nodesToFailImage asks for failed their health gate on image {}, so it is not failed for the pool: {}; each keeps its reboot slot. `kubectl annotate bootcnodepool {name} {}={}` fails it for the pool; `kubectl bootc retry NODE` tries a node again",
        witnesses.len(),
        target.image,
        named.join("; "),
        api::labels::CONFIRM_IMAGE_FAILURE_ANNOTATION,
        target.digest,
    );
    (Reason::HealthCheckFailed, message)
}

/// Has `bn` failed its health gate on `target`?
pub fn failed_on(bn: &BootcNode, target: &Target) -> bool {
    bn.health_failed()
        .is_some_and(|(digest, _)| digest == target.digest)
}

/// The image a node failed on `target` goes back to: while it runs the
/// target, the deployment it ran before (bootc's rollback entry); after,
/// what it runs. Pinned to the digest bootc deployed
/// ([`api::BootEntryStatus::pinned_image`]): a deployment installed from a
/// tag reports the tag, which no spec may hold. None: bootc reports no
/// such image with a digest, and the node stays in its slot for a person.
pub fn back_to(bn: &BootcNode, target: &Target) -> Option<String> {
    let status = bn.status.as_ref()?;
    let entry = if crate::members::state::runs_target(bn, target) {
        status.rollback.as_ref()
    } else {
        status.booted.as_ref()
    };
    entry.and_then(api::BootEntryStatus::pinned_image)
}

/// The record of the pool's current image failing (`status.failedImages`),
/// if it has: the same image reference and target digest.
pub fn recorded_failure<'p>(
    failed: &'p [FailedImage],
    reference: &str,
    target: &Target,
) -> Option<&'p FailedImage> {
    failed
        .iter()
        .find(|f| f.reference == reference && f.digest == target.digest)
}

/// With `rollbackUpdated`, the target in force for a pool whose `target`
/// failed: the image of its last completed rollout, and the problem that
/// says so (None: no such image, or no failure recorded).
pub fn pool_back_to(pool: &BootcNodePool, target: &Target) -> Option<(Target, Problem)> {
    let health = pool.spec.health.as_ref()?;
    if !(health.rollback_updated && health.on_failure == HealthFailurePolicy::Rollback) {
        return None;
    }
    let status = pool.status.as_ref()?;
    let failed = recorded_failure(&status.failed_images, &pool.spec.image.reference, target)?;
    let back = status
        .rollouts
        .iter()
        .find(|r| r.digest != target.digest && r.outcome == Some(RolloutOutcome::Completed))?;
    let message = format!(
        "image {} failed its health gate on node {} (spec.health): {}; spec.health.rollbackUpdated: the pool rolls back to {}, the image of its last completed rollout (a new image clears it)",
        target.image, failed.node, failed.check, back.image
    );
    Some((
        Target {
            digest: back.digest.clone(),
            image: back.image.clone(),
            platform_digests: back.platform_digests.clone(),
            kubelet: None,
        },
        (Reason::RolledBack, message),
    ))
}

/// The pool's failed images with `new` first, at most ten.
pub fn with_failure(failed: &[FailedImage], new: FailedImage) -> Vec<FailedImage> {
    std::iter::once(new)
        .chain(failed.iter().cloned())
        .take(10)
        .collect()
}
