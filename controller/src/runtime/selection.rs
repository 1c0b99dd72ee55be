//! Which cached objects one pool's plan reads, chosen in one pass over the
//! caches: the Nodes its selector matches, those of the BootcNodes it owns
//! and those it disrupted (until they are back), the BootcNodes named after
//! them and those it owns; and, for tag resolution, the architectures of its
//! members (their `kubernetes.io/arch` labels and what their BootcNodes
//! report). The rule is about one name at a time (`reads`): the runtime
//! keeps each pool's choice name by name from the watch events
//! (`crate::runtime::members`); [`Selection::of`] chooses from scratch, for a deleted
//! pool's cleanup and as the reference the kept choice is tested against.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::Node;
use api::labels::RETRY_ANNOTATION;
use api::{BootcNode, BootcNodePool};
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};

use crate::target::tag_policy;

use rollout::holds::disruption;

/// What a pool's plan reads (see the module docs).
#[derive(Debug, Default)]
pub struct Selection<'a> {
    pub nodes: Vec<&'a Node>,
    pub bns: Vec<&'a BootcNode>,
    /// The members' architectures, for tag resolution.
    pub architectures: BTreeSet<String>,
    /// The images the members boot (`repository@digest`), each with how
    /// many boot it: what a new target's OS is compared with.
    pub booted: BTreeMap<String, usize>,
}

fn name<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}

/// What a pool reads of one name's objects: the one home of the rule
/// (used here from scratch, and name by name by `members`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Reads<'o> {
    pub node: bool,
    pub bn: bool,
    /// The selected Node's `kubernetes.io/arch` label.
    pub labelled_arch: Option<&'o str>,
    /// The architecture the owned BootcNode reports.
    pub reported_arch: Option<&'o str>,
    /// The image the owned BootcNode boots, pinned to its digest.
    pub booted: Option<String>,
    /// The owned BootcNode carries a person's retry request.
    pub retry: bool,
}

/// Decides one name for `pool` (`pool_name`, its parsed `selector`): a
/// Node is read when the selector matches it, when the pool owns the
/// BootcNode named after it, or when it carries the pool's disruption
/// record; a BootcNode when the pool owns it or its Node is read.
pub(crate) fn reads<'o>(
    pool: &BootcNodePool,
    selector: Option<&Selector>,
    node: Option<&'o Node>,
    bn: Option<&'o BootcNode>,
) -> Reads<'o> {
    let selected = node.is_some_and(|n| selector.is_some_and(|s| s.matches(n.labels())));
    let owned = bn.is_some_and(|b| rollout::owned_by(b, pool));
    let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
    let node_read =
        node.is_some_and(|n| selected || owned || disruption::recorded_for(n, pool_name));
    let owned_bn = bn.filter(|_| owned);
    Reads {
        node: node_read,
        bn: bn.is_some() && (owned || node_read),
        labelled_arch: node
            .filter(|_| selected)
            .and_then(|n| n.labels().get(api::labels::ARCH_LABEL))
            .map(String::as_str),
        reported_arch: owned_bn
            .and_then(|b| b.status.as_ref())
            .and_then(|s| s.booted.as_ref())
            .and_then(|b| b.architecture.as_deref()),
        booted: owned_bn
            .and_then(|b| b.status.as_ref())
            .and_then(|s| s.booted.as_ref())
            .and_then(api::BootEntryStatus::pinned_image),
        retry: owned_bn.is_some_and(|b| b.annotations().contains_key(RETRY_ANNOTATION)),
    }
}

impl<'a> Selection<'a> {
    /// What tag resolution checks a new target against.
    pub fn members_run(&self) -> crate::target::MembersRun<'_> {
        crate::target::MembersRun {
            architectures: &self.architectures,
            booted: &self.booted,
        }
    }

    /// The pool's objects chosen from scratch, name by name (`reads`).
    pub fn of(pool: &BootcNodePool, nodes: &'a [Arc<Node>], bns: &'a [Arc<BootcNode>]) -> Self {
        let selector = Selector::try_from(pool.spec.node_selector.clone()).ok();
        let bn_of: foldhash::HashMap<&str, &BootcNode> =
            bns.iter().map(|b| (name(b.as_ref()), b.as_ref())).collect();
        let node_of: foldhash::HashMap<&str, &Node> = nodes
            .iter()
            .map(|n| (name(n.as_ref()), n.as_ref()))
            .collect();
        let mut out = Selection::default();
        let mut arches = Vec::new();
        for node in nodes.iter().map(AsRef::as_ref) {
            let r = reads(
                pool,
                selector.as_ref(),
                Some(node),
                bn_of.get(name(node)).copied(),
            );
            if r.node {
                out.nodes.push(node);
            }
            arches.push(r.labelled_arch);
        }
        for bn in bns.iter().map(AsRef::as_ref) {
            let r = reads(
                pool,
                selector.as_ref(),
                node_of.get(name(bn)).copied(),
                Some(bn),
            );
            if r.bn {
                out.bns.push(bn);
            }
            arches.push(r.reported_arch);
            if let Some(image) = r.booted {
                *out.booted.entry(image).or_default() += 1;
            }
        }
        out.architectures = tag_policy::required_architectures(arches, []);
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use api::test_support::{BootcNodeBuilder, NodeBuilder, PoolBuilder};
    use serde_json::json;

    use super::*;

    /// A Node of these labels and annotations (JSON objects of strings).
    fn node(name: &str, labels: serde_json::Value, annotations: serde_json::Value) -> Arc<Node> {
        let pairs = |v: &serde_json::Value| {
            let map = v.as_object().cloned().unwrap_or_default();
            map.into_iter()
                .map(|(k, v)| (k, v.as_str().unwrap().to_owned()))
                .collect::<Vec<_>>()
        };
        let n = pairs(&labels)
            .iter()
            .fold(NodeBuilder::new(name), |n, (k, v)| n.label(k, v));
        let n = pairs(&annotations)
            .iter()
            .fold(n, |n, (k, v)| n.annotation(k, v));
        Arc::new(n.build())
    }

    fn bn(name: &str, owner: Option<&str>, arch: Option<&str>) -> Arc<BootcNode> {
        let b = BootcNodeBuilder::new(name)
            .desired("quay.io/os@sha256:1")
            .booted_architecture(arch);
        Arc::new(match owner {
            Some(o) => b.owner(o, &format!("uid-{o}")).build(),
            None => b.build(),
        })
    }

    #[test]
    fn a_pool_reads_its_selected_owned_and_disrupted_nodes() {
        let pool = PoolBuilder::new("web")
            .selects("role", "web")
            .image("quay.io/os:1")
            .uid("uid-web")
            .build();
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
