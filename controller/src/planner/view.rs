//! What a plan sees: the input indexed by node name, and the pool's status
//! as it is now. Built once per plan; every step reads it.

use api::{BootcNode, BootcNodePool, BootcNodePoolStatus};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::PlanInput;
use super::memo::Versions;

pub(crate) struct View<'a> {
    pub input: &'a PlanInput<'a>,
    pub pool: &'a BootcNodePool,
    pub pool_name: String,
    pub nodes: ByName<'a, Node>,
    pub bns: ByName<'a, BootcNode>,
    /// Each name's objects and versions, looked up by one hash.
    rows: foldhash::HashMap<&'a str, Row<'a>>,
    /// The pool's status as stored (empty for a new pool).
    pub current: BootcNodePoolStatus,
}

/// One name's Node and BootcNode, and their versions (see [`super::memo`]),
/// read once per plan: every step asks for them, for every member.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row<'a> {
    pub node: Option<&'a Node>,
    pub bn: Option<&'a BootcNode>,
    pub versions: Option<Versions>,
}

impl Row<'_> {
    const NONE: Row<'static> = Row {
        node: None,
        bn: None,
        versions: Versions::NONE,
    };
}

fn rows<'a>(
    nodes: &ByName<'a, Node>,
    bns: &ByName<'a, BootcNode>,
) -> foldhash::HashMap<&'a str, Row<'a>> {
    let mut rows: foldhash::HashMap<&'a str, Row<'a>> = foldhash::HashMap::default();
    rows.reserve(nodes.len().max(bns.len()));
    for (name, node) in nodes {
        rows.insert(
            name,
            Row {
                node: Some(*node),
                ..Row::NONE
            },
        );
    }
    for (name, bn) in bns {
        rows.entry(name).or_insert(Row::NONE).bn = Some(*bn);
    }
    for row in rows.values_mut() {
        row.versions = Versions::of(row.node, row.bn);
    }
    rows
}

impl<'a> View<'a> {
    pub fn of(input: &'a PlanInput<'a>) -> Self {
        let nodes = ByName::of(&input.nodes);
        let bns = ByName::of(&input.bootc_nodes);
        View {
            input,
            pool: input.pool,
            pool_name: input.pool.name_any(),
            rows: rows(&nodes, &bns),
            nodes,
            bns,
            current: input.pool.status.clone().unwrap_or_default(),
        }
    }

    /// The name's objects and versions (none for an unknown name).
    pub fn row(&self, name: &str) -> Row<'a> {
        self.rows.get(name).copied().unwrap_or(Row::NONE)
    }

    pub fn node(&self, name: &str) -> Option<&'a Node> {
        self.row(name).node
    }

    pub fn bn(&self, name: &str) -> Option<&'a BootcNode> {
        self.row(name).bn
    }
}

/// An object's name, borrowed (objects read from the API always have one).
fn name_of<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}

/// Objects in name order (looked up through [`View::row`]).
pub(crate) struct ByName<'a, K> {
    sorted: Vec<(&'a str, &'a K)>,
}

impl<'a, K: kube::Resource> ByName<'a, K> {
    fn of(objects: &[&'a K]) -> Self {
        let mut sorted: Vec<(&'a str, &'a K)> = objects.iter().map(|o| (name_of(*o), *o)).collect();
        sorted.sort_by_key(|(name, _)| *name);
        sorted.dedup_by_key(|(name, _)| *name);
        ByName { sorted }
    }
}

impl<'a, K> ByName<'a, K> {
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// In name order.
    pub fn iter(&self) -> std::slice::Iter<'_, (&'a str, &'a K)> {
        self.sorted.iter()
    }
}

impl<'s, 'a, K> IntoIterator for &'s ByName<'a, K> {
    type Item = &'s (&'a str, &'a K);
    type IntoIter = std::slice::Iter<'s, (&'a str, &'a K)>;
    fn into_iter(self) -> Self::IntoIter {
        self.sorted.iter()
    }
}
