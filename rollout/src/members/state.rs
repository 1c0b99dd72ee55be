//! Where a member is in its update cycle, as the controller sees it from its
//! BootcNode (the effective-state table) and its Node.

use api::Node;
use api::{BootcNode, DaemonPhase};

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

/// Does the node boot `target`? The reference bootc was given, or the
/// digest it reports, is the target's ([`BootcNode::runs`]: for a
/// single-manifest image they are the same digest; for an index told by
/// digest, the reference carries the index digest), or the digest it
/// reports is one of the index's platform manifests (a host installed
/// from the index's tag reports the tag and its platform's digest:
/// [`BootcNode::runs_image_or_platform`]). A target's digest is the one
/// its image names (`repository@digest`). Never while bootc reports a
/// host it cannot update from an image ([`BootcNode::unmanageable`]): an
/// incompatible deployment or one without a digest is not up to date,
/// whatever its reference says.
pub fn runs_target(bn: &BootcNode, target: &Target) -> bool {
    bn.runs_image_or_platform(&target.image, &target.platform_digests)
        && bn.unmanageable().is_none()
}

/// Classifies a BootcNode against the target (the effective-state table).
/// A host bootc cannot update from an image is Degraded, as its daemon
/// reports it, and also when its daemon does not (an older one).
pub fn classify(bn: &BootcNode, target: &Target) -> NodeState {
    if bn.is_degraded() || bn.unmanageable().is_some() {
        return NodeState::Degraded;
    }
    if runs_target(bn, target) {
        return NodeState::UpToDate;
    }
    // The spec is about to change, or the daemon has not seen the last one.
    if bn.spec.desired_image != target.image || bn.daemon_behind() {
        return NodeState::Pending;
    }
    // An unknown phase (a newer daemon) counts as none: wait for it.
    match bn.phase() {
        Some(DaemonPhase::Staging) => NodeState::Staging,
        Some(DaemonPhase::Staged) => {
            let staged_matches = bn
                .status
                .as_ref()
                .and_then(|s| s.staged.as_ref())
                .is_none_or(|s| s.is_image_or_platform(&target.image, &target.platform_digests));
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
