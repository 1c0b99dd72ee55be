//! Each member's spec: the target, or what it runs while the staging bounds
//! ([`crate::members::staging`]) keep it waiting to be told; the pool's reboot
//! policy and staging weights; the pull secret ([`super::pull_secret`]). A new image resets the
//! approval: approval belongs to a slot, and is given for one image.

use api::Node;
use api::{BootcNode, BootcNodePool, BootcNodeSpec, DesiredImageState};

use crate::facts::Rollout;
use crate::members::membership::Membership;
use crate::members::owned::Owned;
use crate::members::pull_secret::{self, Secret};
use crate::members::staging;
use crate::members::state::{NodeState, classify, runs_target};
use crate::memo::Answers;
use crate::model::Target;
use crate::reboot::slots::holds_slot;
use crate::view::View;
use crate::{holds::daemons, holds::updaters};

/// The member's owned fields with its spec brought in line with the pool.
pub(crate) fn desired(
    pool: &BootcNodePool,
    existing: Option<&BootcNode>,
    told: bool,
    target: &Target,
    secret: &Secret,
) -> Owned {
    let mut owned = match existing {
        Some(bn) => Owned::of(bn),
        None => Owned {
            spec: BootcNodeSpec {
                desired_image: target.image.as_str().into(),
                desired_image_state: DesiredImageState::Staged,
                reboot_policy: pool.spec.disruption.reboot_policy,
                pull_secret_ref: None,
                pull_secret_hash: None,
                staging_weights: pool.spec.rollout.staging_weights,
            },
            in_slot: false,
            was_cordoned: None,
            skipped: None,
            health_failed: None,
        },
    };
    // A skip is for one target: a new one clears it.
    if owned
        .skipped
        .as_ref()
        .is_some_and(|(digest, _)| *digest != target.digest)
    {
        owned.skipped = None;
    }
    // So is a failed health gate.
    if owned
        .health_failed
        .as_ref()
        .is_some_and(|(digest, _)| *digest != target.digest)
    {
        owned.health_failed = None;
    }
    point_at(&mut owned, image_for(existing, told, target));
    owned.spec.reboot_policy = pool.spec.disruption.reboot_policy;
    owned.spec.staging_weights = pool.spec.rollout.staging_weights;
    pull_secret::sync(&mut owned.spec, existing, secret);
    owned
}

/// Points the member's spec at `image`; a new image resets the approval.
pub(crate) fn point_at(owned: &mut Owned, image: String) {
    if owned.spec.desired_image != image {
        owned.spec.desired_image = image.into();
        owned.spec.desired_image_state = DesiredImageState::Staged;
    }
}

/// The image a member's spec names: the target once told; until then,
/// what it runs ([`kept_image`]). A member on the target by its platform's
/// manifest, not by the index's reference or digest (a host installed from
/// the index's tag), is kept on what it runs too, pinned to that manifest:
/// told the index, its daemon would not know it runs it, and would stage
/// and boot what it already runs.
fn image_for(existing: Option<&BootcNode>, told: bool, target: &Target) -> String {
    match existing {
        Some(bn) if runs_target(bn, target) && !bn.runs(&target.image) => {
            bn.running_image().unwrap_or_else(|| target.image.clone())
        }
        Some(bn) if !told => kept_image(bn),
        _ => target.image.clone(),
    }
}

/// What a member waiting to be told the target is kept on: the image it
/// runs, pinned ([`BootcNode::running_image`]). While bootc reports no
/// image with a digest (not reported yet, or a host not booted from an
/// image), its spec as it is: a value the schema took, rather than a guess
/// the schema would refuse, which would stop the pool's writes.
fn kept_image(bn: &BootcNode) -> String {
    bn.running_image()
        .unwrap_or_else(|| bn.spec.desired_image.to_string())
}

/// One member as the staging rule sees it.
fn staged_member(
    node: Option<&Node>,
    bn: Option<&BootcNode>,
    target: &Target,
    pool_name: &str,
) -> staging::Member {
    let status = bn.and_then(|b| b.status.as_ref());
    staging::Member {
        told: bn.is_none_or(|b| b.spec.desired_image == target.image),
        runs_target: bn.is_some_and(|b| runs_target(b, target)),
        staged: bn.is_some_and(|b| classify(b, target) == NodeState::Staged),
        in_slot: node.is_some() && bn.is_some() && holds_slot(node, bn, pool_name),
        unlocked: status.and_then(|s| s.download_only_supported) == Some(false),
        refused: !updaters::on(bn).is_empty()
            || bn.is_some_and(|b| b.unmanageable().is_some())
            || daemons::skewed(bn).is_some(),
    }
}

/// Each member as the staging rule sees it, in the order of `members`.
pub(crate) fn staging_members(
    view: &View<'_>,
    members: &Membership<'_>,
    target: &Target,
    memo: &mut Answers,
) -> Vec<staging::Member> {
    members
        .rows
        .iter()
        .map(|at| {
            let row = view.rows[*at].1;
            memo.staging(*at, row.versions, || {
                staged_member(row.node, row.bn, target, &view.pool_name)
            })
        })
        .collect()
}

/// The members told the target now (see [`staging`]), once the verdicts
/// have counted the disruption budget: each may use only the free slots
/// the slot hand-out would give it ([`Rollout::free_slots_each`]), so that
/// nothing is told for a slot a pause, a halt or the pool's own unavailable
/// nodes hold back. A member newly told has its spec pointed at the target.
pub(crate) fn tell(view: &View<'_>, target: &Target, rollout: &mut Rollout<'_>) {
    // An image a member failed on is told to nobody ([`crate::reboot::health_gate`]).
    if rollout.target_failed.is_some() {
        return;
    }
    let free = rollout.free_slots_each();
    let bounds = staging::Bounds::of(&view.pool.spec.rollout);
    let told = staging::told(&rollout.staging, bounds, &free);
    // By position: the verdicts, the staging members and `told` are in
    // the same order.
    let newly: Vec<usize> = (rollout.staging.iter().zip(told).enumerate())
        .filter(|(_, (m, told))| *told && !m.already_told())
        .map(|(i, _)| i)
        .collect();
    for i in newly {
        if let Some(e) = rollout.verdicts.at_mut(i) {
            let v = e.verdict_mut();
            point_at(&mut v.owned, target.image.clone());
            v.applied = None;
        }
    }
}
