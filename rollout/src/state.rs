//! Where a member is in its update cycle, as the controller sees it from its
//! BootcNode (the effective-state table) and its Node.

use api::conditions;
use api::reasons;
use api::{BootcNode, DaemonPhase};
use k8s_openapi::api::core::v1::Node;

use crate::model::Target;

/// Where a node is in its update cycle, as the controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeState {
    Degraded,
    UpToDate,
    Pending,
    Staging,
    Staged,
    Rebooting,
}

pub(crate) fn degraded(bn: &BootcNode) -> bool {
    bn.status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, reasons::DEGRADED))
}

/// Does the node boot `target`? Compares the reference bootc was given and
/// the digest it reports (for a single-manifest image they are the same
/// digest; for an index, the reference carries the index digest).
pub fn runs_target(bn: &BootcNode, target: &Target) -> bool {
    bn.status
        .as_ref()
        .and_then(|s| s.booted.as_ref())
        .is_some_and(|b| {
            b.image.as_deref() == Some(target.image.as_str())
                || b.image_digest.as_deref() == Some(target.digest.as_str())
        })
}

/// Has the daemon not reported on its BootcNode's current spec?
pub(crate) fn daemon_behind(bn: &BootcNode) -> bool {
    match &bn.status {
        None => true,
        Some(s) => matches!(
            (s.observed_generation, bn.metadata.generation),
            (Some(seen), Some(generation)) if seen < generation
        ),
    }
}

/// Classifies a BootcNode against the target (the effective-state table).
pub fn classify(bn: &BootcNode, target: &Target) -> NodeState {
    if degraded(bn) {
        return NodeState::Degraded;
    }
    if runs_target(bn, target) {
        return NodeState::UpToDate;
    }
    // The spec is about to change, or the daemon has not seen the last one.
    if bn.spec.desired_image != target.image || daemon_behind(bn) {
        return NodeState::Pending;
    }
    let Some(status) = bn.status.as_ref() else {
        return NodeState::Pending;
    };
    // An unknown phase (a newer daemon) counts as none: wait for it.
    match status.phase().ok().flatten() {
        Some(DaemonPhase::Staging) => NodeState::Staging,
        Some(DaemonPhase::Staged) => {
            let staged_matches = status.staged.as_ref().is_none_or(|s| {
                s.image.as_deref() == Some(target.image.as_str())
                    || s.image_digest.as_deref() == Some(target.digest.as_str())
            });
            if staged_matches {
                NodeState::Staged
            } else {
                NodeState::Staging
            }
        }
        Some(DaemonPhase::Rebooting) => NodeState::Rebooting,
        Some(DaemonPhase::Idle) | None => NodeState::Pending,
    }
}

/// Since when the Node has been not Ready (its Ready condition's last
/// transition), if it is not Ready.
pub(crate) fn not_ready_since(node: &Node) -> Option<jiff::Timestamp> {
    api::node_health::not_ready_since(node).map(|t| t.unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}
