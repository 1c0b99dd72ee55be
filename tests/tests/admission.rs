//! The ValidatingAdmissionPolicies of `deploy/admission/`, installed by
//! `kubectl apply -k deploy/`, against a real API server: what a daemon's
//! node-bound token, the controller's ServiceAccount and an admin may write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::{BootcNode, BootcNodeSpec, ConditionType, Reason};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tests::k8s::refused;
use tests::{ControlPlane, Identity, repo_root};

const IMAGE_A: &str =
    "quay.io/acme/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const IMAGE_B: &str =
    "quay.io/acme/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// A control plane with everything of `deploy/` applied, the CRDs
/// established, and BootcNodes node-a and node-b written by the controller.
async fn installed() -> (ControlPlane, kube::Client) {
    let cp = ControlPlane::start().await.unwrap();
    let deploy = repo_root().join("deploy");
    for args in [
        vec!["apply", "-k", deploy.to_str().unwrap()],
        vec![
            "wait",
            "--for=condition=Established",
            "crd/bootcnodes.node.bootc.dev",
            "--timeout=60s",
        ],
    ] {
        let out = cp.kubectl().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let controller = cp.client(Identity::Controller).await.unwrap();
    let bns: Api<BootcNode> = Api::all(controller.clone());
    for name in ["node-a", "node-b"] {
        let spec = BootcNodeSpec {
            desired_image: IMAGE_A.into(),
            desired_image_state: Default::default(),
            reboot_policy: Default::default(),
            pull_secret_ref: None,
            pull_secret_hash: None,
            staging_weights: None,
        };
        bns.create(&PostParams::default(), &BootcNode::new(name, spec))
            .await
            .unwrap();
    }
    (cp, controller)
}

/// A client with a node-bound token of the daemon's ServiceAccount.
async fn daemon_on(cp: &ControlPlane, node: &str) -> kube::Client {
    let path = cp.node_bound_kubeconfig(node).unwrap();
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn status_patch(phase: &str) -> Patch<Value> {
    Patch::Merge(json!({"status": {"conditions": [{
        "type": ConditionType::Idle.as_str(), "status": "False", "reason": phase, "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
}

#[tokio::test]
async fn a_daemon_writes_only_its_own_nodes_status() {
    let (cp, _) = installed().await;
    let daemon_a = daemon_on(&cp, "node-a").await;
    let as_a: Api<BootcNode> = Api::all(daemon_a.clone());
    let pp = PatchParams::default();

    let message = refused("node-a's daemon writing node-b's status", |_| async {
        as_a.patch_status("node-b", &pp, &status_patch(Reason::Staging.as_str()))
            .await
            .map(|_| ())
    })
    .await;
    assert!(
        message.contains("only the status of the BootcNode named after its own node")
            && message.contains("\"node-b\" is forbidden"),
        "{message}"
    );
    // Its own status it may write.
    as_a.patch_status("node-a", &pp, &status_patch(Reason::Staging.as_str()))
        .await
        .unwrap();
    // No spec, even its own: RBAC already refuses, and so would the policy.
    let err = as_a
        .patch(
            "node-a",
            &pp,
            &Patch::Merge(json!({"spec": {"desiredImage": IMAGE_B}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );

    // A token of the same ServiceAccount that names no node (not one the
    // kubelet hands out) may write no status at all.
    let unbound = cp.client(Identity::Daemon).await.unwrap();
    let as_unbound: Api<BootcNode> = Api::all(unbound);
    let message = refused("a daemon token naming no node", |_| async {
        as_unbound
            .patch_status("node-a", &pp, &status_patch(Reason::Idle.as_str()))
            .await
            .map(|_| ())
    })
    .await;
    assert!(message.contains("token names no node"), "{message}");
}

#[tokio::test]
async fn only_the_controller_changes_a_bootc_nodes_spec_or_marks() {
    let (cp, controller) = installed().await;
    let admin: Api<BootcNode> = Api::all(cp.admin().await.unwrap());
    let pp = PatchParams::default();
    // Borrowed by the attempts' `async move` blocks.
    let (admin, pp) = (&admin, &pp);

    let message = refused("an admin's edit of desiredImage", |attempt| async move {
        let image = format!("quay.io/acme/os@sha256:{attempt:064x}");
        admin
            .patch(
                "node-a",
                pp,
                &Patch::Merge(json!({"spec": {"desiredImage": image}})),
            )
            .await
            .map(|_| ())
    })
    .await;
    assert!(
        message.contains("spec of BootcNode node-a is written by bootc-controller only")
            && message.contains("edit the pool"),
        "{message}"
    );
    let message = refused(
        "an admin's edit of the slot annotation",
        |attempt| async move {
            admin
                .patch(
                    "node-a",
                    pp,
                    &Patch::Merge(json!({"metadata": {"annotations": {
                    api::labels::IN_REBOOT_SLOT_ANNOTATION: format!("try-{attempt}")}}})),
                )
                .await
                .map(|_| ())
        },
    )
    .await;
    assert!(
        message.contains(api::labels::IN_REBOOT_SLOT_ANNOTATION),
        "{message}"
    );
    // A failed health gate is cleared by `kubectl bootc retry`, which the
    // controller answers, never by hand.
    let message = refused(
        "an admin's edit of a failed health gate's mark",
        |attempt| async move {
            admin
                .patch(
                    "node-a",
                    pp,
                    &Patch::Merge(json!({"metadata": {"annotations": {
                    api::labels::HEALTH_FAILED_ANNOTATION: format!("sha256:try-{attempt}")}}})),
                )
                .await
                .map(|_| ())
        },
    )
    .await;
    assert!(
        message.contains(api::labels::HEALTH_FAILED_ANNOTATION),
        "{message}"
    );
    let message = refused("an admin's BootcNode", |attempt| async move {
        let spec = BootcNodeSpec {
            desired_image: IMAGE_B.into(),
            desired_image_state: Default::default(),
            reboot_policy: Default::default(),
            pull_secret_ref: None,
            pull_secret_hash: None,
            staging_weights: None,
        };
        admin
            .create(
                &PostParams::default(),
                &BootcNode::new(&format!("node-c{attempt}"), spec),
            )
            .await
            .map(|_| ())
    })
    .await;
    assert!(
        message.contains("create or edit a pool instead"),
        "{message}"
    );

    // An admin's own annotation is fine, and so is deleting a BootcNode.
    admin
        .patch(
            "node-a",
            pp,
            &Patch::Merge(json!({"metadata": {"annotations": {"example.com/note": "x"}}})),
        )
        .await
        .unwrap();
    // The controller may change both.
    let as_controller: Api<BootcNode> = Api::all(controller);
    as_controller
        .patch(
            "node-a",
            pp,
            &Patch::Merge(json!({
                "metadata": {"annotations": {api::labels::IN_REBOOT_SLOT_ANNOTATION: "true"}},
                "spec": {"desiredImage": IMAGE_B, "desiredImageState": "Booted"}})),
        )
        .await
        .unwrap();
    admin.delete("node-b", &Default::default()).await.unwrap();
}

#[tokio::test]
async fn the_controller_changes_only_cordons_and_its_marks_on_nodes() {
    let (cp, controller) = installed().await;
    let admin: Api<Node> = Api::all(cp.admin().await.unwrap());
    admin
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "node-a", "labels": {"pool": "workers"}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let nodes_client = controller.clone();
    let nodes: Api<Node> = Api::all(controller);
    let pp = PatchParams::default();
    // Borrowed by the attempts' `async move` blocks.
    let (nodes, pp) = (&nodes, &pp);

    let message = refused("a taint by the controller", |attempt| async move {
        nodes
            .patch(
                "node-a",
                pp,
                &Patch::Merge(json!({"spec": {"taints": [{"key": "example.com/evil",
                    "value": format!("v{attempt}"), "effect": "NoSchedule"}]}})),
            )
            .await
            .map(|_| ())
    })
    .await;
    assert!(
        message.contains("nodes \"node-a\" is forbidden")
            && message.contains("may change only spec.unschedulable in the spec of a Node"),
        "{message}"
    );
    let message = refused("a foreign label by the controller", |attempt| async move {
        nodes
            .patch(
                "node-a",
                pp,
                &Patch::Merge(
                    json!({"metadata": {"labels": {"pool": format!("other-{attempt}")}}}),
                ),
            )
            .await
            .map(|_| ())
    })
    .await;
    assert!(message.contains("only bootc.dev/ labels"), "{message}");
    // Of Kubernetes' node labels, only the load balancers' exclusion.
    let message = refused(
        "another node.kubernetes.io label by the controller",
        |attempt| async move {
            let labels = json!({"node.kubernetes.io/exclude-disruption": format!("{attempt}")});
            nodes
                .patch(
                    "node-a",
                    pp,
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await
                .map(|_| ())
        },
    )
    .await;
    assert!(message.contains("only bootc.dev/ labels"), "{message}");
    // Of Karpenter's annotations, only do-not-disrupt.
    let message = refused(
        "another Karpenter annotation by the controller",
        |attempt| async move {
            let annotations = json!({"karpenter.sh/do-not-consolidate": format!("{attempt}")});
            nodes
                .patch(
                    "node-a",
                    pp,
                    &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
                )
                .await
                .map(|_| ())
        },
    )
    .await;
    assert!(
        message.contains("only bootc.dev/ annotations and karpenter.sh/do-not-disrupt"),
        "{message}"
    );

    // Fields the policy does not name are refused too (it masks what may
    // change, not what may not): an owner reference that does not resolve
    // would have the garbage collector delete the Node, a finalizer would
    // block its deletion; and other spec fields.
    let ghost_owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "v1", "kind": "Node", "name": "ghost",
        "uid": "11111111-2222-3333-4444-555555555555"}]}});
    let finalizer = json!({"metadata": {"finalizers": ["example.com/block-deletion"]}});
    for (what, patch, says) in [
        (
            "an owner reference",
            ghost_owner,
            "in the metadata of a Node",
        ),
        ("a finalizer", finalizer, "in the metadata of a Node"),
        (
            "a provider ID",
            json!({"spec": {"providerID": "evil://node-a"}}),
            "only spec.unschedulable in the spec of a Node",
        ),
        (
            "a pod CIDR",
            json!({"spec": {"podCIDR": "10.9.0.0/24", "podCIDRs": ["10.9.0.0/24"]}}),
            "only spec.unschedulable in the spec of a Node",
        ),
    ] {
        let message = refused(&format!("{what} by the controller"), |_| async {
            nodes
                .patch("node-a", pp, &Patch::Merge(patch.clone()))
                .await
                .map(|_| ())
        })
        .await;
        assert!(message.contains(says), "{what}: {message}");
    }
    let node = admin.get("node-a").await.unwrap();
    assert_eq!(node.metadata.owner_references, None);
    assert_eq!(node.metadata.finalizers, None);

    // A Node as big as kubelets make them (50 images of many names, the
    // kubelet's default limit; 1,000 were seen to pass too): comparing it
    // whole stays within CEL's cost limits.
    let images: Vec<Value> = (0..50)
        .map(|i| {
            let names: Vec<String> = (0..8)
                .map(|n| {
                    format!(
                        "registry.example.com/team-{i}/image-{n}@sha256:{:064x}",
                        i * 8 + n
                    )
                })
                .collect();
            json!({"names": names, "sizeBytes": 1_000_000 + i})
        })
        .collect();
    admin
        .patch_status(
            "node-a",
            pp,
            &Patch::Merge(json!({"status": {"images": images}})),
        )
        .await
        .unwrap();

    // What the controller does in a rollout (the actuator's merge patches):
    // label, cordon with its mark in one patch, uncordon (unschedulable
    // removed) with the mark, mark a disruption and lift it, set and remove
    // Karpenter's do-not-disrupt, unlabel.
    for patch in [
        json!({"metadata": {"labels": {api::labels::MANAGED_LABEL: ""}}}),
        json!({"metadata": {"annotations": {api::labels::CORDONED_BY_ANNOTATION: "workers"}},
               "spec": {"unschedulable": true}}),
        json!({"metadata": {"annotations": {api::labels::CORDONED_BY_ANNOTATION: null}},
               "spec": {"unschedulable": null}}),
        json!({"metadata": {"annotations": {api::labels::DISRUPTED_BY_ANNOTATION: "workers"}},
               "spec": {"unschedulable": true}}),
        json!({"metadata": {"annotations": {api::labels::DISRUPTED_BY_ANNOTATION: null}},
               "spec": {"unschedulable": false}}),
        json!({"metadata": {"annotations": {api::labels::KARPENTER_DO_NOT_DISRUPT_ANNOTATION: "true",
                                            api::labels::DO_NOT_DISRUPT_BY_ANNOTATION: "workers"}}}),
        json!({"metadata": {"annotations": {api::labels::KARPENTER_DO_NOT_DISRUPT_ANNOTATION: null,
                                            api::labels::DO_NOT_DISRUPT_BY_ANNOTATION: null}}}),
        json!({"metadata": {"labels": {api::labels::EXCLUDE_FROM_LBS_LABEL: ""},
                            "annotations": {api::labels::LB_EXCLUDED_BY_ANNOTATION: "workers"}},
               "spec": {"unschedulable": true}}),
        json!({"metadata": {"labels": {api::labels::EXCLUDE_FROM_LBS_LABEL: null},
                            "annotations": {api::labels::LB_EXCLUDED_BY_ANNOTATION: null}},
               "spec": {"unschedulable": null}}),
        json!({"metadata": {"labels": {api::labels::MANAGED_LABEL: null}}}),
    ] {
        // As the actuator makes them: the answer is the Node's metadata
        // alone, and the version it reads is the one the Node now has.
        let version = controller::actions::actuator::patch_version::<Node>(
            &nodes_client,
            "node-a",
            pp,
            &Patch::Merge(patch.clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{patch}: {e}"));
        let now = admin.get("node-a").await.unwrap();
        assert_eq!(
            Some(version.to_string()),
            now.metadata.resource_version,
            "{patch}"
        );
    }
}

/// With the grant of `deploy/optional/node-lifecycle-conditions`, the
/// controller may patch a Node's status, but only its lifecycle conditions
/// (MaintenanceInProgress, DrainInProgress, Drained): the kubelet's
/// conditions, a condition of another name and any other status field are
/// refused, on the API server with the `NodeLifecycleConditions` gate
/// where it has one.
#[tokio::test]
async fn the_controller_changes_only_the_lifecycle_conditions_in_node_status() {
    use api::node_health::{DRAIN_IN_PROGRESS, DRAINED, MAINTENANCE_IN_PROGRESS, NODE_READY};
    let cp = ControlPlane::start_with(tests::control_plane::Options {
        feature_gates: tests::binaries::node_lifecycle_gates().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let deploy = repo_root().join("deploy");
    for dir in [
        deploy.clone(),
        deploy.join("optional/node-lifecycle-conditions"),
    ] {
        let out = cp
            .kubectl()
            .args(["apply", "-k", dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{dir:?}: {out:?}");
    }
    let admin: Api<Node> = Api::all(cp.admin().await.unwrap());
    admin
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "node-a"}})).unwrap(),
        )
        .await
        .unwrap();
    let ready = json!({"status": {"conditions": [{"type": NODE_READY, "status": "True",
        "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        "addresses": [{"type": "InternalIP", "address": "10.1.0.7"}]}});
    admin
        .patch_status("node-a", &PatchParams::default(), &Patch::Strategic(ready))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cp.client(Identity::Controller).await.unwrap());
    let pp = PatchParams::default();
    let (nodes, pp) = (&nodes, &pp);
    let condition = |type_: &str, status: &str, message: String| {
        json!({"status": {"conditions": [{"type": type_, "status": status,
            "reason": api::node_health::LIFECYCLE_REASON, "message": message}]}})
    };
    // Each attempt writes something new: one made before the policy is in
    // force must not let the next pass as a no-op.
    type Attempt = Box<dyn Fn(u32) -> Value>;
    let attempts: [(&str, Attempt); 3] = [
        (
            "the kubelet's Ready",
            Box::new(move |i| condition(NODE_READY, "False", format!("attempt {i}"))),
        ),
        (
            "a condition of another name",
            Box::new(move |i| condition("FirmwareUpdate", "True", format!("attempt {i}"))),
        ),
        (
            "an address",
            Box::new(
                |i| json!({"status": {"addresses": [{"type": "InternalIP", "address": format!("10.9.9.{i}")}]}}),
            ),
        ),
    ];
    for (what, patch) in &attempts {
        let message = refused(&format!("{what} by the controller"), |attempt| async move {
            nodes
                .patch_status("node-a", pp, &Patch::Strategic(patch(attempt % 250)))
                .await
                .map(|_| ())
        })
        .await;
        assert!(
            message.contains("may change only the conditions MaintenanceInProgress, DrainInProgress and Drained in the status of a Node"),
            "{what}: {message}"
        );
    }
    // What the actuator does through a slot: set, then clear.
    for (type_, status) in [
        (MAINTENANCE_IN_PROGRESS, "True"),
        (DRAIN_IN_PROGRESS, "True"),
        (DRAIN_IN_PROGRESS, "False"),
        (DRAINED, "True"),
        (MAINTENANCE_IN_PROGRESS, "False"),
        (DRAINED, "False"),
    ] {
        nodes
            .patch_status(
                "node-a",
                pp,
                &Patch::Strategic(condition(type_, status, "m".into())),
            )
            .await
            .unwrap_or_else(|e| panic!("{type_}={status}: {e}"));
    }
}
