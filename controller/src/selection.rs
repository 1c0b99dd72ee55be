//! Which cached objects one pool's plan reads, chosen in one pass over the
//! caches: the Nodes its selector matches, those of the BootcNodes it owns
//! and those it disrupted (until they are back), the BootcNodes named after
//! them and those it owns; and, for tag resolution, the architectures of its
//! members (their `kubernetes.io/arch` labels and what their BootcNodes
//! report). Names are compared borrowed: this runs on every reconcile, over
//! every Node of the cluster.

use std::collections::BTreeSet;
use std::sync::Arc;

use api::{BootcNode, BootcNodePool};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};

use crate::{disruption, planner, tag_policy};

/// What a pool's plan reads (see the module docs).
#[derive(Debug, Default)]
pub struct Selection<'a> {
    pub nodes: Vec<&'a Node>,
    pub bns: Vec<&'a BootcNode>,
    /// The members' architectures, for tag resolution.
    pub architectures: BTreeSet<String>,
}

fn name<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}

impl<'a> Selection<'a> {
    pub fn of(pool: &BootcNodePool, nodes: &'a [Arc<Node>], bns: &'a [Arc<BootcNode>]) -> Self {
        let pool_name = pool.name_any();
        let selector = Selector::try_from(pool.spec.node_selector.clone()).ok();
        let owned: Vec<&BootcNode> = bns
            .iter()
            .map(AsRef::as_ref)
            .filter(|bn| planner::owned_by(bn, pool))
            .collect();
        let owned_names: foldhash::HashSet<&str> = owned.iter().map(|b| name(*b)).collect();
        let mut out = Selection::default();
        let mut arch_labels = Vec::new();
        for node in nodes.iter().map(AsRef::as_ref) {
            let selected = selector.as_ref().is_some_and(|s| s.matches(node.labels()));
            if selected {
                arch_labels.push(
                    node.labels()
                        .get(api::labels::ARCH_LABEL)
                        .map(String::as_str),
                );
            }
            if selected
                || owned_names.contains(name(node))
                || disruption::recorded_for(node, &pool_name)
            {
                out.nodes.push(node);
            }
        }
        let node_names: foldhash::HashSet<&str> = out.nodes.iter().map(|n| name(*n)).collect();
        out.bns = bns
            .iter()
            .map(AsRef::as_ref)
            .filter(|bn| owned_names.contains(name(*bn)) || node_names.contains(name(*bn)))
            .collect();
        let reported = owned.iter().map(|bn| {
            bn.status
                .as_ref()
                .and_then(|s| s.booted.as_ref())
                .and_then(|b| b.architecture.as_deref())
        });
        out.architectures = tag_policy::required_architectures(arch_labels, reported);
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn node(name: &str, labels: serde_json::Value, annotations: serde_json::Value) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels, "annotations": annotations}
            }))
            .unwrap(),
        )
    }

    fn bn(name: &str, owner: Option<&str>, arch: Option<&str>) -> Arc<BootcNode> {
        let owners: Vec<_> = owner
            .map(|o| {
                json!({"apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
                             "name": o, "uid": format!("uid-{o}")})
            })
            .into_iter()
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
                "metadata": {"name": name, "ownerReferences": owners},
                "spec": {"desiredImage": "quay.io/os@sha256:1"},
                "status": {"booted": {"architecture": arch}},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_pool_reads_its_selected_owned_and_disrupted_nodes() {
        let mut pool: BootcNodePool = serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
            "metadata": {"name": "web", "uid": "uid-web"},
            "spec": {"nodeSelector": {"matchLabels": {"role": "web"}}, "image": {"ref": "quay.io/os:1"}},
        }))
        .unwrap();
        pool.metadata.uid = Some("uid-web".into());
        let web = json!({"role": "web", api::labels::ARCH_LABEL: "arm64"});
        let nodes = [
            node("selected", web.clone(), json!({})),
            node("owned-relabelled", json!({"role": "db"}), json!({})),
            node(
                "disrupted",
                json!({}),
                json!({api::labels::DISRUPTED_BY_ANNOTATION: "web"}),
            ),
            node("other", json!({"role": "db"}), json!({})),
        ];
        let bns = [
            bn("selected", None, None),
            bn("owned-relabelled", Some("web"), Some("amd64")),
            bn("other", Some("db"), Some("s390x")),
            bn("gone", Some("web"), None),
        ];
        let chosen = Selection::of(&pool, &nodes, &bns);
        let names = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
        let node_names: Vec<String> = chosen.nodes.iter().map(|n| n.name_any()).collect();
        let bn_names: Vec<String> = chosen.bns.iter().map(|b| b.name_any()).collect();
        assert_eq!(
            node_names,
            names(vec!["selected", "owned-relabelled", "disrupted"])
        );
        assert_eq!(
            bn_names,
            names(vec!["selected", "owned-relabelled", "gone"])
        );
        let archs: Vec<&str> = chosen.architectures.iter().map(String::as_str).collect();
        assert_eq!(archs, ["amd64", "arm64"]);
    }
}
