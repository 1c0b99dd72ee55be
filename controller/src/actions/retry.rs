//! A person's retry of a node (`kubectl bootc retry NODE`): the
//! [`RETRY_ANNOTATION`] on its BootcNode.
//!
//! The one failure nothing retries on its own is a node approved to boot
//! whose reboot or apply failed ([`BootcNode::awaits_retry`]): after a
//! reboot into the wrong image the daemon does not apply again for the same
//! spec. Withdrawing the approval (`desiredImageState: Staged`) gives the
//! daemon a new spec: it stages the target again (a no-op for bootc), and
//! the planner approves it again in its slot like any other staged node.
//! A node skipped for its target after a failed drain (`onDrainTimeout:
//! Release`) has its skip cleared: it takes a slot again and is drained
//! again. A node that failed its health gate (`spec.health`) has its mark
//! cleared: the pool gives the image again, and the node is judged again. Nothing else needs a person: a failed download is retried by the
//! daemon, a failed drain (under `Retry`) by the controller.
//!
//! The request is consumed either way: the annotation is removed in the same
//! write (guarded by the resourceVersion seen), so that one request is one
//! retry. Pure decision ([`requests`]) and body ([`patch_body`]); [`honour`]
//! makes the writes.

use api::labels::{
    CONTROLLER_MANAGER, HEALTH_FAILED_ANNOTATION, HEALTH_FAILED_BECAUSE_ANNOTATION,
    RETRY_ANNOTATION, SKIPPED_ANNOTATION, SKIPPED_BECAUSE_ANNOTATION,
};
use api::{BootcNode, BootcNodePool, DesiredImageState};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

/// One retry request, as the controller answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub node: String,
    /// Withdraw the approval (the node awaits a retry); otherwise the
    /// request is only consumed.
    pub withdraw: bool,
    /// Clear the node's skip (its drain failed under `onDrainTimeout:
    /// Release`): it takes a slot again and is drained again.
    pub unskip: bool,
    /// Clear the node's failed health gate (`spec.health`): its image may
    /// be given to nodes again, and the node is judged again.
    pub unfail: bool,
    pub resource_version: Option<String>,
}

/// The pool's BootcNodes that carry a retry request.
pub fn requests<'a>(
    pool: &BootcNodePool,
    bns: impl IntoIterator<Item = &'a BootcNode>,
) -> Vec<Request> {
    bns.into_iter()
        .filter(|bn| rollout::owned_by(bn, pool))
        .filter(|bn| bn.annotations().contains_key(RETRY_ANNOTATION))
        .map(|bn| Request {
            node: bn.name_any(),
            withdraw: bn.awaits_retry(),
            unskip: bn.skipped().is_some(),
            unfail: bn.health_failed().is_some(),
            resource_version: bn.meta().resource_version.clone(),
        })
        .collect()
}

/// The merge patch that answers `request`.
pub fn patch_body(request: &Request) -> serde_json::Value {
    let mut body = json!({
        "metadata": {
            "annotations": {RETRY_ANNOTATION: null},
            "resourceVersion": request.resource_version,
        },
    });
    if request.withdraw {
        body["spec"] = json!({"desiredImageState": DesiredImageState::Staged});
    }
    if request.unskip {
        body["metadata"]["annotations"][SKIPPED_ANNOTATION] = json!(null);
        body["metadata"]["annotations"][SKIPPED_BECAUSE_ANNOTATION] = json!(null);
    }
    if request.unfail {
        body["metadata"]["annotations"][HEALTH_FAILED_ANNOTATION] = json!(null);
        body["metadata"]["annotations"][HEALTH_FAILED_BECAUSE_ANNOTATION] = json!(null);
    }
    body
}

/// Answers the pool's retry requests (from [`requests`]); returns how many
/// it answered. A conflict (the BootcNode changed meanwhile) is left for
/// the next reconcile, which sees the request again.
#[tracing::instrument(name = "retry", skip_all, fields(pool = %pool))]
pub async fn honour(
    client: &kube::Client,
    pool: &str,
    wanted: &[Request],
) -> Result<usize, kube::Error> {
    if wanted.is_empty() {
        return Ok(0);
    }
    let api: Api<BootcNode> = Api::all(client.clone());
    let params = PatchParams {
        field_manager: Some(CONTROLLER_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let mut answered = 0;
    for request in wanted {
        match api
            .patch(&request.node, &params, &Patch::Merge(patch_body(request)))
            .await
        {
            Ok(_) => {
                answered += 1;
                tracing::info!(
                    node = %request.node,
                    withdrawn = request.withdraw,
                    "retry requested: {}",
                    if request.withdraw {
                        "approval withdrawn, the node stages again"
                    } else {
                        "nothing to retry (the node does not await one)"
                    }
                );
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::conditions::ConditionUpdate;
    use api::{BootcNodeSpec, BootcNodeStatus};

    fn pool() -> BootcNodePool {
        let mut p: BootcNodePool = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
            "metadata": {"name": "workers", "uid": "u1"},
            "spec": {"nodeSelector": {}, "image": {"ref": "r.example/os:1"}},
        }))
        .unwrap();
        p.metadata.uid = Some("u1".into());
        p
    }

    fn bn(name: &str, approved: bool, degraded: bool, annotated: bool) -> BootcNode {
        let mut bn = BootcNode::new(
            name,
            BootcNodeSpec {
                desired_image: format!("r.example/os@sha256:{}", "a".repeat(64)),
                desired_image_state: if approved {
                    DesiredImageState::Booted
                } else {
                    DesiredImageState::Staged
                },
                reboot_policy: Default::default(),
                pull_secret_ref: None,
                pull_secret_hash: None,
            },
        );
        bn.metadata.owner_references = Some(vec![pool().controller_owner_ref(&()).unwrap()]);
        bn.metadata.resource_version = Some("7".into());
        if annotated {
            bn.annotations_mut()
                .insert(RETRY_ANNOTATION.into(), "now".into());
        }
        let mut status = BootcNodeStatus::default();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
        api::conditions::apply(
            &mut status.conditions,
            &ConditionUpdate::new(
                api::ConditionType::Degraded,
                degraded,
                api::Reason::Error,
                "m",
            ),
            None,
            &now,
        );
        bn.status = Some(status);
        bn
    }

    #[test]
    fn a_request_withdraws_the_approval_only_of_a_node_that_awaits_a_retry() {
        let cases = [
            ("approved and degraded", true, true, true, Some(true)),
            (
                "approved, healthy (rebooting)",
                true,
                false,
                true,
                Some(false),
            ),
            ("degraded while staging", false, true, true, Some(false)),
            ("no request", true, true, false, None),
        ];
        for (name, approved, degraded, annotated, want) in cases {
            let node = bn("n1", approved, degraded, annotated);
            let got = requests(&pool(), [&node]);
            assert_eq!(got.first().map(|r| r.withdraw), want, "{name}");
        }
        let other_pool = {
            let mut n = bn("n2", true, true, true);
            n.metadata.owner_references = None;
            n
        };
        assert!(requests(&pool(), [&other_pool]).is_empty(), "not ours");
    }

    #[test]
    fn the_patch_removes_the_request_under_the_version_seen() {
        let request = Request {
            node: "n1".into(),
            withdraw: true,
            unskip: false,
            unfail: false,
            resource_version: Some("7".into()),
        };
        assert_eq!(
            patch_body(&request),
            json!({
                "metadata": {"annotations": {RETRY_ANNOTATION: null}, "resourceVersion": "7"},
                "spec": {"desiredImageState": api::DesiredImageState::Staged},
            })
        );
        let only_consumed = Request {
            withdraw: false,
            ..request.clone()
        };
        assert!(patch_body(&only_consumed).get("spec").is_none());
        // A skipped node: its skip goes in the same write.
        let unskip = Request {
            withdraw: false,
            unskip: true,
            ..request.clone()
        };
        assert_eq!(
            patch_body(&unskip),
            json!({
                "metadata": {"annotations": {RETRY_ANNOTATION: null, SKIPPED_ANNOTATION: null,
                    SKIPPED_BECAUSE_ANNOTATION: null}, "resourceVersion": "7"},
            })
        );
        // A node that failed its health gate: its mark goes in the same write.
        let unfail = Request {
            withdraw: false,
            unfail: true,
            ..request
        };
        assert_eq!(
            patch_body(&unfail),
            json!({
                "metadata": {"annotations": {RETRY_ANNOTATION: null, HEALTH_FAILED_ANNOTATION: null,
                    HEALTH_FAILED_BECAUSE_ANNOTATION: null}, "resourceVersion": "7"},
            })
        );
    }
}
