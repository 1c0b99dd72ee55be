//! The fields the controller owns on a BootcNode (its spec, the skip and
//! health records), and the member's reboot slot, as a value a plan
//! compares and changes.
//!
//! A slot is recorded on the Node alone: the pool's disruption record,
//! written with the slot's cordon in one patch (the cordon rules),
//! so taking a slot and releasing it are one write each. The BootcNode's
//! slot record of 0.1.0 (`bootc.dev/in-reboot-slot`, `was-cordoned`) is
//! read, so that a slot taken before an upgrade is kept, and the next apply
//! removes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::labels::{
    HEALTH_FAILED_ANNOTATION, HEALTH_FAILED_BECAUSE_ANNOTATION, IN_REBOOT_SLOT_ANNOTATION,
    SKIPPED_ANNOTATION, SKIPPED_BECAUSE_ANNOTATION, WAS_CORDONED_ANNOTATION,
};
use api::{BootcNode, BootcNodePool, BootcNodeSpec};
use kube_core::{Resource, ResourceExt};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::model::BootcNodeApply;

/// The owner reference a member's BootcNode carries.
pub fn owner_reference(pool: &BootcNodePool) -> OwnerReference {
    OwnerReference {
        api_version: BootcNodePool::api_version(&()).into_owned(),
        kind: BootcNodePool::kind(&()).into_owned(),
        name: pool.name_any(),
        uid: pool.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The annotations of a BootcNode that are the controller's: what its
/// server-side apply owns (the slot record of 0.1.0 included: an apply
/// removes it).
pub(crate) const OWNED_ANNOTATIONS: [&str; 6] = [
    IN_REBOOT_SLOT_ANNOTATION,
    WAS_CORDONED_ANNOTATION,
    SKIPPED_ANNOTATION,
    SKIPPED_BECAUSE_ANNOTATION,
    HEALTH_FAILED_ANNOTATION,
    HEALTH_FAILED_BECAUSE_ANNOTATION,
];

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Owned {
    pub spec: BootcNodeSpec,
    /// The member holds a reboot slot: its Node carries the pool's
    /// disruption record (or its BootcNode the record of 0.1.0). Not
    /// written on the BootcNode.
    pub in_slot: bool,
    /// `bootc.dev/was-cordoned` of 0.1.0: the Node's cordon before a slot
    /// taken before the upgrade (None: the Node's mark tells).
    pub was_cordoned: Option<String>,
    /// `bootc.dev/skipped` and `bootc.dev/skipped-because`: the target
    /// digest the node was skipped for after a failed drain, and why.
    pub skipped: Option<(String, String)>,
    /// `bootc.dev/health-failed` and `bootc.dev/health-failed-because`:
    /// the target digest the node failed its health gate on, and the check.
    pub health_failed: Option<(String, String)>,
}

impl Owned {
    pub fn of(bn: &BootcNode) -> Self {
        let ann = bn.annotations();
        Owned {
            spec: bn.spec.clone(),
            in_slot: bn.legacy_slot_record(),
            was_cordoned: ann.get(WAS_CORDONED_ANNOTATION).cloned(),
            skipped: bn
                .skipped()
                .map(|(digest, why)| (digest.to_owned(), why.to_owned())),
            health_failed: bn
                .health_failed()
                .map(|(digest, why)| (digest.to_owned(), why.to_owned())),
        }
    }

    /// Does `bn` carry exactly these fields, and no slot record of 0.1.0?
    /// (Compared in place: a plan asks this of every member.)
    pub fn is_on(&self, bn: &BootcNode) -> bool {
        let ann = bn.annotations();
        bn.spec == self.spec
            && !bn.legacy_slot_record()
            && !ann.contains_key(WAS_CORDONED_ANNOTATION)
            && bn.skipped() == self.skipped.as_ref().map(|(d, w)| (d.as_str(), w.as_str()))
            && bn.health_failed()
                == self
                    .health_failed
                    .as_ref()
                    .map(|(d, w)| (d.as_str(), w.as_str()))
    }

    pub fn approved(&self) -> bool {
        self.spec.approved()
    }

    /// The apply that sets these fields, with `owner` (the pool's:
    /// [`owner_reference`]).
    pub fn to_apply(&self, name: &str, owner: &Arc<OwnerReference>) -> BootcNodeApply {
        let mut annotations = BTreeMap::new();
        if let Some((digest, why)) = &self.skipped {
            annotations.insert(SKIPPED_ANNOTATION.to_owned(), digest.clone());
            annotations.insert(SKIPPED_BECAUSE_ANNOTATION.to_owned(), why.clone());
        }
        if let Some((digest, check)) = &self.health_failed {
            annotations.insert(HEALTH_FAILED_ANNOTATION.to_owned(), digest.clone());
            annotations.insert(HEALTH_FAILED_BECAUSE_ANNOTATION.to_owned(), check.clone());
        }
        BootcNodeApply {
            name: name.to_owned(),
            owner: Arc::clone(owner),
            annotations,
            spec: self.spec.clone(),
        }
    }

    /// Does `bn` (None: not created yet) already have these fields and its
    /// owner reference, so that nothing needs applying?
    pub fn applied(&self, bn: Option<&BootcNode>) -> bool {
        bn.is_some_and(|bn| {
            self.is_on(bn)
                && bn
                    .meta()
                    .owner_references
                    .as_ref()
                    .is_some_and(|o| o.iter().any(|o| o.kind == BootcNodePool::kind(&())))
        })
    }
}
