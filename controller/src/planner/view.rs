//! What a plan sees: the input indexed by node name, and the pool's status
//! as it is now. Built once per plan; every step reads it.

use api::{BootcNode, BootcNodePool, BootcNodePoolStatus};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::PlanInput;

pub(crate) struct View<'a> {
    pub input: &'a PlanInput<'a>,
    pub pool: &'a BootcNodePool,
    pub pool_name: String,
    pub nodes: ByName<'a, Node>,
    pub bns: ByName<'a, BootcNode>,
    /// The pool's status as stored (empty for a new pool).
    pub current: BootcNodePoolStatus,
}

impl<'a> View<'a> {
    pub fn of(input: &'a PlanInput<'a>) -> Self {
        View {
            input,
            pool: input.pool,
            pool_name: input.pool.name_any(),
            nodes: ByName::of(&input.nodes),
            bns: ByName::of(&input.bootc_nodes),
            current: input.pool.status.clone().unwrap_or_default(),
        }
    }

    pub fn node(&self, name: &str) -> Option<&'a Node> {
        self.nodes.get(name)
    }

    pub fn bn(&self, name: &str) -> Option<&'a BootcNode> {
        self.bns.get(name)
    }
}

/// An object's name, borrowed (objects read from the API always have one).
fn name_of<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}

/// Objects by name: iterated in name order, looked up by a fast hash (every
/// step looks up every member; names share long prefixes, which makes
/// ordered comparisons slow).
pub(crate) struct ByName<'a, K> {
    sorted: Vec<(&'a str, &'a K)>,
    index: foldhash::HashMap<&'a str, &'a K>,
}

impl<'a, K: kube::Resource> ByName<'a, K> {
    fn of(objects: &[&'a K]) -> Self {
        let mut sorted: Vec<(&'a str, &'a K)> = objects.iter().map(|o| (name_of(*o), *o)).collect();
        sorted.sort_by_key(|(name, _)| *name);
        sorted.dedup_by_key(|(name, _)| *name);
        let index = sorted.iter().copied().collect();
        ByName { sorted, index }
    }
}

impl<'a, K> ByName<'a, K> {
    pub fn get(&self, name: &str) -> Option<&'a K> {
        self.index.get(name).copied()
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

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
