//! How the operator reads a Node: its `Ready` condition, its cordon, and
//! the marks a pool leaves on it (whose slot cordoned it, whose disruption
//! it counts against). The one home of each reading, used by the planner
//! and its budget, the controller's cache fingerprints, the kubectl plugin,
//! the tests and the benchmark. A BootcNode's readings are methods of
//! [`crate::BootcNode`] (`api/src/bootc_node.rs`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::node::NodeCondition;

use crate::Node;
use crate::labels::{
    CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION, DO_NOT_DISRUPT_BY_ANNOTATION,
    HOLD_ANNOTATION_PREFIX, KARPENTER_DO_NOT_DISRUPT_ANNOTATION,
};

/// The kubelet's condition type for a Node that can run pods.
pub const NODE_READY: &str = "Ready";

/// Kubernetes' Node lifecycle conditions (KEP-5683) a pool sets while a node
/// holds a reboot slot, with `--node-lifecycle-conditions`: the node is
/// under maintenance.
pub const MAINTENANCE_IN_PROGRESS: &str = "MaintenanceInProgress";
/// Its drain runs.
pub const DRAIN_IN_PROGRESS: &str = "DrainInProgress";
/// Its drain is done.
pub const DRAINED: &str = "Drained";
/// The reason on the lifecycle conditions a pool set: the mark that they
/// are the pool's to clear (another actor's are left alone).
pub const LIFECYCLE_REASON: &str = "BootcUpdate";

/// The lifecycle condition `type_` of the Node: (status True, its reason).
pub fn lifecycle_condition<'a>(node: &'a Node, type_: &str) -> Option<(bool, &'a str)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status == "True", c.reason.as_deref().unwrap_or_default()))
}

/// The Node's `Ready` condition, when it reports one.
pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == NODE_READY)
}

/// The Node's condition `type_`: its status and when it last changed.
pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<(&'a str, Option<Timestamp>)> {
    let c = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((
        c.status.as_str(),
        c.last_transition_time.as_ref().map(|t| t.0),
    ))
}

/// The pod's `Ready` condition: True or not, and when it last changed
/// (None: it reports none, so it is not Ready).
pub fn pod_ready(pod: &Pod) -> Option<(bool, Option<Timestamp>)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == NODE_READY)?;
    Some((
        c.status == "True",
        c.last_transition_time.as_ref().map(|t| t.0),
    ))
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

/// Is the Node cordoned (`spec.unschedulable`), by anyone?
pub fn is_cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// The pool whose reboot slot cordoned the Node: it is cordoned and marked
/// `bootc.dev/cordoned-by: <pool>`. None when it is not cordoned, or
/// cordoned by someone else (an admin, another tool); a mark left on an
/// uncordoned Node names nothing.
pub fn cordoned_by(node: &Node) -> Option<&str> {
    annotation(node, CORDONED_BY_ANNOTATION).filter(|_| is_cordoned(node))
}

/// The pool named by the Node's disruption record
/// (`bootc.dev/disrupted-by`), if any: it counts against that pool's
/// `maxUnavailable` until it is back.
pub fn disrupted_by(node: &Node) -> Option<&str> {
    annotation(node, DISRUPTED_BY_ANNOTATION)
}

/// One actor's hold on a Node (`hold.bootc.dev/<who>: <reason>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold<'a> {
    pub who: &'a str,
    pub reason: &'a str,
}

impl std::fmt::Display for Hold<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason {
            "" => write!(f, "{}{}", HOLD_ANNOTATION_PREFIX, self.who),
            reason => write!(f, "{}{} ({reason})", HOLD_ANNOTATION_PREFIX, self.who),
        }
    }
}

/// The holds on the Node, in the order of their holders' names.
pub fn holds(node: &Node) -> impl Iterator<Item = Hold<'_>> {
    node.metadata
        .annotations
        .iter()
        .flatten()
        .filter_map(|(key, reason)| {
            let who = key.strip_prefix(HOLD_ANNOTATION_PREFIX)?;
            Some(Hold {
                who,
                reason: reason.as_str(),
            })
        })
}

/// Does anyone hold the Node?
pub fn is_held(node: &Node) -> bool {
    holds(node).next().is_some()
}

/// Does the Node carry Karpenter's `karpenter.sh/do-not-disrupt`, set by
/// anyone?
pub fn karpenter_do_not_disrupt(node: &Node) -> bool {
    annotation(node, KARPENTER_DO_NOT_DISRUPT_ANNOTATION).is_some()
}

/// Does the Node carry `node.kubernetes.io/exclude-from-external-load-balancers`,
/// set by anyone?
pub fn excluded_from_lbs(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(crate::labels::EXCLUDE_FROM_LBS_LABEL))
}

/// The pool that set the load balancers' exclusion label on the Node, if
/// one did (`bootc.dev/lb-excluded-by`).
pub fn lb_excluded_by(node: &Node) -> Option<&str> {
    annotation(node, crate::labels::LB_EXCLUDED_BY_ANNOTATION)
}

/// The pool that set Karpenter's `do-not-disrupt` on the Node, if one did
/// (`bootc.dev/do-not-disrupt-by`).
pub fn do_not_disrupt_by(node: &Node) -> Option<&str> {
    annotation(node, DO_NOT_DISRUPT_BY_ANNOTATION)
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::NodeBuilder;

    fn node(conditions: Vec<(&str, &str, Option<Timestamp>)>) -> Node {
        conditions
            .into_iter()
            .fold(NodeBuilder::new("n"), |n, (type_, status, at)| {
                let n = n.condition(type_, status);
                match at {
                    Some(at) => n.since(at),
                    None => n,
                }
            })
            .build()
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

    #[test]
    fn cordon_and_marks_table() {
        use crate::node::NodeSpec;
        let node = |unschedulable: Option<bool>, marks: &[(&str, &str)]| {
            let mut n = Node {
                spec: Some(NodeSpec { unschedulable }),
                ..Node::default()
            };
            if !marks.is_empty() {
                n.metadata.annotations = Some(
                    marks
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                );
            }
            n
        };
        let ours = [(CORDONED_BY_ANNOTATION, "workers")];
        let record = [(DISRUPTED_BY_ANNOTATION, "workers")];
        // (what, Node, cordoned, cordoned by, disrupted by)
        type Row<'a> = (&'a str, Node, bool, Option<&'a str>, Option<&'a str>);
        let rows: Vec<Row<'_>> = vec![
            ("no spec", Node::default(), false, None, None),
            ("schedulable", node(Some(false), &[]), false, None, None),
            ("unset", node(None, &[]), false, None, None),
            ("an admin's cordon", node(Some(true), &[]), true, None, None),
            (
                "a slot's cordon",
                node(Some(true), &ours),
                true,
                Some("workers"),
                None,
            ),
            (
                "a stale mark, uncordoned",
                node(Some(false), &ours),
                false,
                None,
                None,
            ),
            (
                "a disruption record alone",
                node(Some(false), &record),
                false,
                None,
                Some("workers"),
            ),
        ];
        for (what, n, cordoned, by, disrupted) in rows {
            assert_eq!(is_cordoned(&n), cordoned, "{what}");
            assert_eq!(cordoned_by(&n), by, "{what}");
            assert_eq!(disrupted_by(&n), disrupted, "{what}");
        }
    }
}
