//! Step 2, the pull secret: which credentials the nodes are told about.
//!
//! A `pullSecretRef` outside the operator's namespace is an invalid spec and
//! is not passed on (every daemon would refuse it and turn Degraded). A
//! pool-wide credentials problem (the referenced Secret missing, or not a
//! docker config) is reported once on the pool and is not passed on either:
//! an existing BootcNode keeps the fields it has (its host keeps the auth
//! file it has), so that nodes do not all turn Degraded over it and a node
//! on the target stays healthy; staging goes on with the credentials each
//! host already has.

use api::{BootcNode, BootcNodeSpec, SecretReference, reasons};

use super::{PlanInput, Problem};

/// Degraded reason: `spec.pullSecretRef` names a Secret that does not exist.
pub const PULL_SECRET_NOT_FOUND: &str = "PullSecretNotFound";

/// The pool's pull secret as the nodes may be told about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Secret {
    /// The reference, unless it is invalid.
    pub reference: Option<SecretReference>,
    /// Its data's hash, when the Secret exists.
    pub hash: Option<String>,
    /// The reference cannot be used now (missing or not a docker config):
    /// existing members keep what they have.
    pub broken: bool,
}

/// Checks `spec.pullSecretRef`, reporting what is wrong with it.
pub fn checked(input: &PlanInput<'_>, problems: &mut Vec<Problem>) -> Secret {
    let reference = match &input.pool.spec.pull_secret_ref {
        Some(r) if r.namespace != input.operator_namespace => {
            problems.push((
                reasons::INVALID_SPEC,
                format!(
                    "spec.pullSecretRef.namespace must be the operator's namespace {}, not {:?}",
                    input.operator_namespace, r.namespace
                ),
            ));
            None
        }
        Some(r) => {
            if input.pull_secret_hash.is_none() {
                problems.push((
                    PULL_SECRET_NOT_FOUND,
                    format!(
                        "spec.pullSecretRef: Secret {}/{} not found",
                        r.namespace, r.name
                    ),
                ));
            }
            Some(r.clone())
        }
        None => None,
    };
    let invalid = input
        .target
        .as_ref()
        .is_err_and(|p| p.reason == reasons::INVALID_PULL_SECRET);
    let broken = reference.is_some() && (input.pull_secret_hash.is_none() || invalid);
    Secret {
        reference,
        hash: input.pull_secret_hash.clone(),
        broken,
    }
}

/// Sets the pull-secret fields of a member's spec (see the module docs).
pub fn sync(spec: &mut BootcNodeSpec, existing: Option<&BootcNode>, secret: &Secret) {
    if secret.broken
        && let Some(bn) = existing
    {
        spec.pull_secret_ref = bn.spec.pull_secret_ref.clone();
        spec.pull_secret_hash = bn.spec.pull_secret_hash.clone();
        return;
    }
    spec.pull_secret_ref = secret.reference.clone().filter(|_| !secret.broken);
    spec.pull_secret_hash = spec
        .pull_secret_ref
        .as_ref()
        .and_then(|_| secret.hash.clone());
}
