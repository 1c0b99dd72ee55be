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
use api::{BootcNode, BootcNodePool, DesiredImageState, FailedImage};
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

/// A person's retry of a pool whose image failed its health gate
/// (`kubectl bootc retry POOL`: the [`RETRY_ANNOTATION`] on the pool): the
/// records of its current image reference leave `status.failedImages`, the
/// members' failed marks are cleared, and the request is consumed. The
/// image is then given again like any, each node judged again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolRequest {
    /// `status.failedImages` without the current reference's records.
    pub failed_images: Vec<FailedImage>,
    /// The members whose failed mark is cleared.
    pub marked: Vec<Request>,
    pub resource_version: Option<String>,
}

/// The pool's retry request, if it carries one.
pub fn pool_request<'a>(
    pool: &BootcNodePool,
    bns: impl IntoIterator<Item = &'a BootcNode>,
) -> Option<PoolRequest> {
    if !pool.annotations().contains_key(RETRY_ANNOTATION) {
        return None;
    }
    let failed = pool
        .status
        .as_ref()
        .map(|s| s.failed_images.as_slice())
        .unwrap_or_default();
    Some(PoolRequest {
        failed_images: failed
            .iter()
            .filter(|f| f.reference != pool.spec.image.reference)
            .cloned()
            .collect(),
        marked: bns
            .into_iter()
            .filter(|bn| rollout::owned_by(bn, pool) && bn.health_failed().is_some())
            .map(|bn| Request {
                node: bn.name_any(),
                withdraw: false,
                unskip: false,
                unfail: true,
                resource_version: bn.meta().resource_version.clone(),
            })
            .collect(),
        resource_version: pool.meta().resource_version.clone(),
    })
}

/// Answers a pool's retry request: the marks, the records, then the
/// request itself (guarded by the pool's resourceVersion seen).
#[tracing::instrument(name = "retry_pool", skip_all, fields(pool = %pool))]
pub async fn honour_pool(
    client: &kube::Client,
    pool: &str,
    request: &PoolRequest,
) -> Result<(), kube::Error> {
    honour(client, pool, &request.marked).await?;
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let params = PatchParams {
        field_manager: Some(CONTROLLER_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let records = json!({"status": {"failedImages": request.failed_images}});
    pools
        .patch_status(pool, &params, &Patch::Merge(records))
        .await?;
    let consumed = json!({"metadata": {
        "annotations": {RETRY_ANNOTATION: null},
        "resourceVersion": request.resource_version,
    }});
    match pools.patch(pool, &params, &Patch::Merge(consumed)).await {
        Ok(_) => {
            tracing::info!(
                marks = request.marked.len(),
                "retry of the pool's failed image: cleared"
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
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
    use api::test_support::{BootcNodeBuilder, PoolBuilder};

    fn pool() -> BootcNodePool {
        PoolBuilder::new("workers")
            .image("r.example/os:1")
            .uid("u1")
            .build()
    }

    fn bn(name: &str, approved: bool, degraded: bool, annotated: bool) -> BootcNode {
        let mut bn = BootcNodeBuilder::new(name)
            .desired(format!("r.example/os@sha256:{}", "a".repeat(64)))
            .approved(approved)
            .owner("workers", "u1")
            .resource_version("7");
        if annotated {
            bn = bn.annotation(RETRY_ANNOTATION, "now");
        }
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
        bn.at(now)
            .condition(
                api::ConditionType::Degraded,
                degraded,
                api::Reason::Error,
                "m",
            )
            .build()
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

    #[test]
    fn a_pool_retry_drops_its_current_images_records_and_the_marks() {
        let mut p = pool();
        let at = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH);
        let record = |reference: &str| FailedImage {
            reference: reference.into(),
            digest: "sha256:2".into(),
            node: "n1".into(),
            check: "c".into(),
            at: at.clone(),
        };
        p.status.get_or_insert_default().failed_images =
            vec![record(&p.spec.image.reference), record("r.example/os:old")];
        p.metadata.resource_version = Some("9".into());
        let mut marked = bn("n1", false, false, false);
        marked.annotations_mut().insert(
            api::labels::HEALTH_FAILED_ANNOTATION.into(),
            "sha256:2".into(),
        );
        let clean = bn("n2", false, false, false);
        assert_eq!(pool_request(&p, [&marked, &clean]), None, "no request");
        p.annotations_mut()
            .insert(RETRY_ANNOTATION.into(), "now".into());
        let request = pool_request(&p, [&marked, &clean]).expect("a request");
        assert_eq!(request.failed_images, [record("r.example/os:old")]);
        assert_eq!(
            request
                .marked
                .iter()
                .map(|r| (r.node.as_str(), r.unfail))
                .collect::<Vec<_>>(),
            [("n1", true)]
        );
        assert_eq!(request.resource_version.as_deref(), Some("9"));
    }
}
