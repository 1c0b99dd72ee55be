//! The shared vocabulary of bootc-operator: the two custom resources, the
//! label and annotation names, condition helpers, and image references.
//!
//! With the default `crd` feature off, only [`host_updaters`], [`image_ref`],
//! [`labels`] and [`text`] are built; the privileged helper uses that subset
//! and links no Kubernetes code.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod host_updaters;
pub mod image_labels;
pub mod image_ref;
pub mod labels;
pub mod text;

#[cfg(feature = "crd")]
mod bootc_node;
#[cfg(feature = "crd")]
mod bootc_node_pool;
#[cfg(feature = "crd")]
pub mod conditions;
#[cfg(feature = "crd")]
pub mod daemon_contract;
#[cfg(feature = "crd")]
pub mod daemon_phase;
#[cfg(feature = "crd")]
pub mod node;
#[cfg(feature = "crd")]
pub mod node_health;
#[cfg(feature = "crd")]
pub mod node_history;
#[cfg(feature = "crd")]
pub mod pull_secret;
#[cfg(feature = "crd")]
pub mod schema;
#[cfg(feature = "crd")]
pub mod shared;
#[cfg(all(feature = "crd", any(test, feature = "test-support")))]
pub mod test_support;
#[cfg(feature = "crd")]
pub mod v1alpha1;
#[cfg(feature = "crd")]
pub mod watch;

#[cfg(feature = "crd")]
pub use bootc_node::{BOOTC_INCOMPATIBLE, unmanageable};
#[cfg(feature = "crd")]
pub use conditions::{ConditionType, Reason, StandingKind};
#[cfg(feature = "crd")]
pub use daemon_phase::{DaemonPhase, UnknownPhase};
#[cfg(feature = "crd")]
pub use node::Node;
#[cfg(feature = "crd")]
pub use shared::Shared;
#[cfg(feature = "crd")]
pub use v1alpha1::*;

/// The CRDs as `(file name, YAML)`, in the form checked in under `deploy/crds/`.
#[cfg(feature = "crd")]
pub fn crd_yaml() -> Result<Vec<(&'static str, String)>, serde_yaml::Error> {
    use kube::CustomResourceExt;
    let render = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        let body = serde_yaml::to_string(&crd)?;
        Ok::<_, serde_yaml::Error>(format!("# Generated from api/src/v1alpha1.rs by `cargo run -p api --bin crdgen`. Do not edit.\n{body}"))
    };
    Ok(vec![
        (
            "node.bootc.dev_bootcnodepools.yaml",
            render(BootcNodePool::crd())?,
        ),
        ("node.bootc.dev_bootcnodes.yaml", render(BootcNode::crd())?),
    ])
}
