//! A Node as the operator reads it: its metadata, its cordon
//! (`spec.unschedulable`) and its conditions, nothing else.
//!
//! The planner, the controller's cache and the kubectl plugin all read
//! Nodes through this type (the readings themselves are in
//! [`crate::node_health`]). It keeps the shape and field names of
//! Kubernetes' own `Node`, so a Node decodes into it straight from the API
//! (every other field skipped unread), and converts from the full type.
//! Why not the full type: it is 1.5 KiB before any of its strings, a
//! third of what the controller held per node at 20,000 nodes; this one is
//! under 0.4 KiB. Its conditions' strings are [`Shared`]: every kubelet
//! reports the same types, reasons and messages.

use std::borrow::Cow;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::Shared;
use kube::Resource;
use serde::{Deserialize, Serialize};

/// A Node, as much of it as the operator reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Node {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

/// A Node's spec: its cordon.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct NodeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

/// A Node's status: its conditions.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<NodeCondition>>,
}

/// A Node's condition, as Kubernetes' `NodeCondition`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCondition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Shared>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Shared>,
    #[serde(default)]
    pub status: Shared,
    #[serde(default, rename = "type")]
    pub type_: Shared,
}

impl From<core::NodeCondition> for NodeCondition {
    fn from(c: core::NodeCondition) -> NodeCondition {
        NodeCondition {
            last_heartbeat_time: c.last_heartbeat_time,
            last_transition_time: c.last_transition_time,
            message: c.message.map(Shared::from),
            reason: c.reason.map(Shared::from),
            status: c.status.into(),
            type_: c.type_.into(),
        }
    }
}

impl From<core::Node> for Node {
    fn from(node: core::Node) -> Node {
        Node {
            metadata: node.metadata,
            spec: node.spec.map(|s| NodeSpec {
                unschedulable: s.unschedulable,
            }),
            status: node.status.map(|s| NodeStatus {
                conditions: s
                    .conditions
                    .map(|cs| cs.into_iter().map(NodeCondition::from).collect()),
            }),
        }
    }
}

/// Listed, watched and patched as Kubernetes' Node.
impl Resource for Node {
    type DynamicType = ();
    type Scope = <core::Node as Resource>::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        <core::Node as Resource>::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        <core::Node as Resource>::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        <core::Node as Resource>::version(&())
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        <core::Node as Resource>::api_version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        <core::Node as Resource>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real Node's JSON decodes with every other field skipped, and the
    /// type stays small (the reason it exists).
    #[test]
    fn a_node_decodes_what_the_operator_reads() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"a": "b"}},
            "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24",
                     "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.0"},
                       "images": [{"names": ["x"], "sizeBytes": 1}]},
        });
        let node: Node = serde_json::from_value(json.clone()).unwrap();
        let full: core::Node = serde_json::from_value(json).unwrap();
        assert_eq!(node, Node::from(full));
        assert_eq!(node.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
        assert_eq!(node.status.unwrap().conditions.unwrap().len(), 1);
        assert!(std::mem::size_of::<Node>() * 3 < std::mem::size_of::<core::Node>());
    }
}
