//! Step 2, the pull secret: which credentials the nodes are told about.
//!
//! A `pullSecretRef` outside the operator's namespace is an invalid spec
//! (`InvalidSpec`) and is not passed on (every daemon would refuse it and
//! turn Degraded). A pool-wide credentials problem (the referenced Secret
//! missing, `PullSecretNotFound`; not opted in to the pool by its
//! `bootc.dev/pools` annotation, `PullSecretNotAllowed`; or not a docker
//! config) is reported once on the pool and is not passed on either:
//! an existing BootcNode keeps the fields it has (its host keeps the auth
//! file it has), so that nodes do not all turn Degraded over it and a node
//! on the target stays healthy; staging goes on with the credentials each
//! host already has.

use api::{BootcNode, BootcNodeSpec, Reason, SecretReference};

use crate::model::{PlanInput, Problem};

/// The pool's pull secret as the nodes may be told about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Secret {
    /// The reference, unless it is invalid.
    pub reference: Option<SecretReference>,
    /// Its version (`<uid>/<resourceVersion>`), when the Secret exists.
    pub hash: Option<String>,
    /// The reference cannot be used now (missing, not opted in to the pool,
    /// or not a docker config): existing members keep what they have.
    pub broken: bool,
}

/// Checks `spec.pullSecretRef`, reporting what is wrong with it.
pub fn checked(input: &PlanInput<'_>, problems: &mut Vec<Problem>) -> Secret {
    let reference = match &input.pool.spec.pull_secret_ref {
        Some(r) if r.namespace != input.operator_namespace => {
            problems.push((
                Reason::InvalidSpec,
                format!(
                    "spec.pullSecretRef.namespace must be the operator's namespace {}, not {:?}",
                    input.operator_namespace, r.namespace
                ),
            ));
            None
        }
        Some(r) => {
            match &input.pull_secret {
                None => problems.push((
                    Reason::PullSecretNotFound,
                    format!(
                        "spec.pullSecretRef: Secret {}/{} not found",
                        r.namespace, r.name
                    ),
                )),
                Some(seen) if !seen.allows_pool => problems.push((
                    Reason::PullSecretNotAllowed,
                    api::pull_secret::not_allowed_message(
                        &r.namespace,
                        &r.name,
                        input.pool.metadata.name.as_deref().unwrap_or_default(),
                        &seen.pools,
                    ),
                )),
                Some(_) => {}
            }
            Some(r.clone())
        }
        None => None,
    };
    let invalid = input
        .target
        .as_ref()
        .is_err_and(|p| p.reason == Reason::InvalidPullSecret);
    let usable = input.pull_secret.as_ref().is_some_and(|s| s.allows_pool);
    let broken = reference.is_some() && (!usable || invalid);
    Secret {
        reference,
        hash: input.pull_secret.as_ref().map(|s| s.version.clone()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(secret: Option<(&str, &str)>) -> BootcNodeSpec {
        BootcNodeSpec {
            desired_image: "r@sha256:a".into(),
            desired_image_state: api::DesiredImageState::Staged,
            reboot_policy: api::RebootPolicy::RebootOnly,
            pull_secret_ref: secret.map(|(name, _)| SecretReference {
                name: name.into(),
                namespace: "ops".into(),
            }),
            pull_secret_hash: secret.map(|(_, hash)| hash.into()),
            staging_weights: None,
        }
    }

    #[test]
    fn what_a_member_is_told() {
        let secret = |broken: bool, hash: Option<&str>| Secret {
            reference: Some(SecretReference {
                name: "new".into(),
                namespace: "ops".into(),
            }),
            hash: hash.map(Into::into),
            broken,
        };
        let had = BootcNode::new("n", spec(Some(("old", "sha256:o"))));
        // (what, pool's secret, existing BootcNode, spec told)
        #[rustfmt::skip]
        let rows = [
            ("usable", secret(false, Some("sha256:n")), Some(&had), spec(Some(("new", "sha256:n")))),
            ("broken: an existing member keeps its own", secret(true, None), Some(&had), spec(Some(("old", "sha256:o")))),
            ("broken: a new member gets none", secret(true, None), None, spec(None)),
            ("none", Secret::default(), Some(&had), spec(None)),
        ];
        for (what, secret, existing, want) in rows {
            let mut got = spec(Some(("stale", "sha256:s")));
            sync(&mut got, existing, &secret);
            assert_eq!(got, want, "{what}");
        }
    }
}
