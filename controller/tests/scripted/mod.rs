//! The scenes of the controller's scripted tests (`scripted_*.rs`): a pool,
//! its Nodes and BootcNodes built from `api`'s types and names, and the
//! requests the controller makes for them, as `scripted-api` exchanges.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use api::Node;
use api::labels::{
    CONTROLLER_MANAGER, CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION, IN_REBOOT_SLOT_ANNOTATION,
    WAS_CORDONED_ANNOTATION,
};
use api::test_support::{BootcNodeBuilder, NodeBuilder, PoolBuilder};
use api::{BootcNode, BootcNodePool, DaemonPhase, DesiredImageState};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use scripted_api::{Exchange, object_path, patch};
use serde_json::{Value, json};

pub const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
pub const NEW: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
pub const POOL: &str = "workers";
/// The label the pool selects its nodes by.
pub const POOL_LABEL: &str = "pool";

pub fn image(digest: &str) -> String {
    format!("quay.io/acme/os@{digest}")
}

/// A pool of the nodes labelled `pool=workers`, rolling to `NEW`, one
/// reboot slot.
pub fn pool() -> BootcNodePool {
    PoolBuilder::new(POOL)
        .selects(POOL_LABEL, POOL)
        .image(image(NEW))
        .max_unavailable(IntOrString::Int(1))
        .uid(&format!("uid-{POOL}"))
        .generation(1)
        .resource_version("100")
        .build()
}

/// A member Node, Ready, managed, cordoned or not.
pub fn node(name: &str, cordoned: bool) -> Node {
    NodeBuilder::new(name)
        .resource_version("10")
        .label(POOL_LABEL, POOL)
        .managed()
        .unschedulable(cordoned)
        .ready(true)
        .build()
}

/// A Node in this pool's reboot slot: cordoned by it (its mark), disrupted
/// by it (its record).
pub fn slot_node(name: &str) -> Node {
    let mut n = node(name, true);
    n.metadata.annotations = Some(BTreeMap::from([
        (CORDONED_BY_ANNOTATION.to_owned(), POOL.to_owned()),
        (DISRUPTED_BY_ANNOTATION.to_owned(), POOL.to_owned()),
    ]));
    n
}

/// A BootcNode of the pool wanting `desired`, whose daemon reports
/// `phase` on `booted` (and `desired` staged when Staged or Rebooting).
pub fn bootc_node(name: &str, desired: &str, phase: DaemonPhase, booted: &str) -> BootcNode {
    let mut bn = BootcNodeBuilder::new(name)
        .desired(image(desired))
        .owner(POOL, &format!("uid-{POOL}"))
        .generation(1)
        .resource_version("20")
        .observed(1)
        .booted(&image(booted), booted);
    if matches!(phase, DaemonPhase::Staged | DaemonPhase::Rebooting) {
        bn = bn.staged(&image(desired), desired);
    }
    bn.phase(phase).healthy().build()
}

/// `bn` approved to boot (its slot is recorded on its Node: [`slot_node`]).
pub fn approved(mut bn: BootcNode) -> BootcNode {
    bn.spec.desired_image_state = DesiredImageState::Booted;
    bn
}

/// An RFC 6901 pointer to the annotation or label `key` under `/metadata/<map>`.
pub fn metadata_pointer(map: &str, key: &str) -> String {
    format!(
        "/metadata/{map}/{}",
        key.replace('~', "~0").replace('/', "~1")
    )
}

/// What a write's answer needs: the object's new version.
pub fn stored(resource_version: u32) -> Value {
    json!({"metadata": {"resourceVersion": resource_version.to_string()}})
}

/// The controller's server-side apply of BootcNode `name`.
pub fn apply_bootc_node(name: &str) -> Exchange {
    patch(&object_path::<BootcNode>(name))
        .query("fieldManager", CONTROLLER_MANAGER)
        .query("force", "true")
}

/// The controller's merge patch of Node `name`.
pub fn patch_node(name: &str) -> Exchange {
    patch(&object_path::<Node>(name)).query("fieldManager", CONTROLLER_MANAGER)
}

/// A BootcNode apply that withdraws the node's approval to boot (after its
/// slot's release), with no slot record of 0.1.0.
pub fn withdraws_approval(name: &str) -> Exchange {
    apply_bootc_node(name)
        .body_includes(json!({"spec": {"desiredImageState": DesiredImageState::Staged}}))
        .body_lacks(&metadata_pointer("annotations", IN_REBOOT_SLOT_ANNOTATION))
        .body_lacks(&metadata_pointer("annotations", WAS_CORDONED_ANNOTATION))
}

/// A reboot slot taken: the cordon, marked as the pool's, with the slot's
/// record (the disruption record), in one patch.
pub fn cordons(name: &str) -> Exchange {
    patch_node(name).body_includes(json!({
        "spec": {"unschedulable": true},
        "metadata": {"annotations": {
            CORDONED_BY_ANNOTATION: POOL,
            DISRUPTED_BY_ANNOTATION: POOL,
        }},
    }))
}

/// The slot's cordon lifted, with its mark and the disruption record.
pub fn uncordons(name: &str) -> Exchange {
    patch_node(name).body_includes(json!({
        "spec": {"unschedulable": null},
        "metadata": {"annotations": {
            CORDONED_BY_ANNOTATION: null,
            DISRUPTED_BY_ANNOTATION: null,
        }},
    }))
}
