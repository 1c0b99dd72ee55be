//! How the operator reads a Node's health: its `Ready` condition. The one
//! home of the rule, used by the controller's planner and budget, its cache
//! fingerprints, and the kubectl plugin.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition};

/// The kubelet's condition type for a Node that can run pods.
pub const NODE_READY: &str = "Ready";

/// The Node's `Ready` condition, when it reports one.
pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == NODE_READY)
}

/// The `Ready` condition is True (a Node that reports none is not ready).
pub fn is_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

/// `None` while the Node is Ready; otherwise since when it has not been
/// (the condition's last transition), `Some(None)` when that is unknown (no
/// condition, or no transition time).
pub fn not_ready_since(node: &Node) -> Option<Option<Timestamp>> {
    match ready_condition(node) {
        Some(c) if c.status == "True" => None,
        Some(c) => Some(c.last_transition_time.as_ref().map(|t| t.0)),
        None => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn node(conditions: Vec<(&str, &str, Option<Timestamp>)>) -> Node {
        let conditions = conditions
            .into_iter()
            .map(|(type_, status, at)| NodeCondition {
                type_: type_.into(),
                status: status.into(),
                last_transition_time: at.map(Time),
                ..NodeCondition::default()
            })
            .collect();
        Node {
            status: Some(NodeStatus {
                conditions: Some(conditions),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn readiness_table() {
        let t = Timestamp::from_second(1_000).ok();
        let rows: Vec<(&str, Node, bool, Option<Option<Timestamp>>)> = vec![
            ("ready", node(vec![("Ready", "True", t)]), true, None),
            (
                "not ready",
                node(vec![("Ready", "False", t)]),
                false,
                Some(t),
            ),
            (
                "unknown",
                node(vec![("Ready", "Unknown", None)]),
                false,
                Some(None),
            ),
            (
                "other condition only",
                node(vec![("DiskPressure", "True", t)]),
                false,
                Some(None),
            ),
            ("no status", Node::default(), false, Some(None)),
        ];
        for (name, n, ready, since) in rows {
            assert_eq!(is_ready(&n), ready, "{name}");
            assert_eq!(not_ready_since(&n), since, "{name}");
        }
    }
}
