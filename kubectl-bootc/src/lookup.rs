//! The names a command is given: a pool, a node, or either, found in the
//! [`Snapshot`] or refused with an error naming the kind and the name. A
//! name that exists but is not bootc-operator's (a Node no pool selects,
//! with no BootcNode) is refused too: there is nothing to say of it.

use api::Node;
use api::{BootcNode, BootcNodePool};
use kube::Resource;

use crate::Snapshot;

/// A name a command cannot act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    #[error("{kind} {name:?} not found")]
    NotFound { kind: String, name: String },
    #[error("{kind} {name:?} is not managed by bootc-operator: {why}")]
    NotManaged {
        kind: String,
        name: String,
        why: String,
    },
}

fn pool_kind() -> String {
    BootcNodePool::kind(&()).into_owned()
}

fn node_kind() -> String {
    Node::kind(&()).into_owned()
}

fn not_found(kind: String, name: &str) -> Missing {
    Missing::NotFound {
        kind,
        name: name.to_owned(),
    }
}

impl Missing {
    /// No pool named `name` (as the API server answers a write to it).
    pub fn pool(name: &str) -> Self {
        not_found(pool_kind(), name)
    }
}

/// The pool named `name`.
pub fn pool<'a>(snap: &'a Snapshot, name: &str) -> Result<&'a BootcNodePool, Missing> {
    snap.pool(name).ok_or_else(|| Missing::pool(name))
}

/// A pool or a node's BootcNode named `name` (`history`, `retry`): a Node
/// without one is refused as [`node`] refuses it, or as not taken in yet.
pub fn pool_or_node(snap: &Snapshot, name: &str) -> Result<(), Missing> {
    if snap.pool(name).is_some() || snap.bootc_node(name).is_some() {
        return Ok(());
    }
    node(snap, name).map_err(|e| match e {
        Missing::NotFound { .. } => {
            not_found(format!("{} or {}", pool_kind(), BootcNode::kind(&())), name)
        }
        not_managed => not_managed,
    })?;
    Err(Missing::NotManaged {
        kind: node_kind(),
        name: name.to_owned(),
        why: format!(
            "it has no {} yet (`kubectl bootc why {name}` says why)",
            BootcNode::kind(&())
        ),
    })
}

/// A node `why` can answer for: one with a BootcNode, or a Node some pool
/// selects (the planner's rule, [`rollout::selects`]) that has none yet.
pub fn node(snap: &Snapshot, name: &str) -> Result<(), Missing> {
    if snap.bootc_node(name).is_some() {
        return Ok(());
    }
    let node = snap
        .node(name)
        .ok_or_else(|| not_found(node_kind(), name))?;
    if snap.pools.iter().any(|p| rollout::selects(p, node)) {
        return Ok(());
    }
    Err(Missing::NotManaged {
        kind: node_kind(),
        name: name.to_owned(),
        why: format!(
            "no {}'s spec.nodeSelector matches its labels",
            BootcNodePool::kind(&())
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{self as fx, Phase, V1, labelled};

    /// A pool "workers" selecting `pool=workers`; n1 its member, n2 a Node
    /// it selects without a BootcNode yet, n3 a Node no pool selects.
    fn cluster() -> Snapshot {
        fx::snapshot(
            vec![fx::pool("workers", false)],
            vec![fx::bn("n1", V1, Phase::Idle)],
            vec![
                labelled(fx::node("n1", true, false), "pool", "workers"),
                labelled(fx::node("n2", true, false), "pool", "workers"),
                labelled(fx::node("n3", true, false), "pool", "elsewhere"),
            ],
        )
    }

    #[test]
    fn a_name_that_is_not_there_or_not_managed_is_an_error_naming_its_kind() {
        let snap = cluster();
        let found = |r: Result<(), Missing>| r.map_err(|e| e.to_string());
        type Row = (&'static str, Result<(), Missing>, Result<(), String>);
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("pool", pool(&snap, "workers").map(|_| ()), Ok(())),
            ("pool: a node's name", pool(&snap, "n1").map(|_| ()), Err("BootcNodePool \"n1\" not found".into())),
            ("pool: nothing", pool(&snap, "nosuch").map(|_| ()), Err("BootcNodePool \"nosuch\" not found".into())),
            ("history: pool", pool_or_node(&snap, "workers"), Ok(())),
            ("history: member", pool_or_node(&snap, "n1"), Ok(())),
            ("history: selected, not yet taken in", pool_or_node(&snap, "n2"), Err("Node \"n2\" is not managed by bootc-operator: it has no BootcNode yet (`kubectl bootc why n2` says why)".into())),
            ("history: selected by no pool", pool_or_node(&snap, "n3"), Err("Node \"n3\" is not managed by bootc-operator: no BootcNodePool's spec.nodeSelector matches its labels".into())),
            ("history: nothing", pool_or_node(&snap, "nosuch"), Err("BootcNodePool or BootcNode \"nosuch\" not found".into())),
            ("why: member", node(&snap, "n1"), Ok(())),
            ("why: selected, not yet taken in", node(&snap, "n2"), Ok(())),
            ("why: selected by no pool", node(&snap, "n3"), Err("Node \"n3\" is not managed by bootc-operator: no BootcNodePool's spec.nodeSelector matches its labels".into())),
            ("why: a pool's name", node(&snap, "workers"), Err("Node \"workers\" not found".into())),
            ("why: nothing", node(&snap, "nosuch"), Err("Node \"nosuch\" not found".into())),
        ];
        for (what, got, want) in rows {
            assert_eq!(found(got), want, "{what}");
        }
    }
}
