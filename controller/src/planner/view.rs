//! What a plan sees: the input indexed by node name, and the pool's status
//! as it is now. Built once per plan; every step reads it.

use std::collections::BTreeMap;

use api::{BootcNode, BootcNodePool, BootcNodePoolStatus};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::PlanInput;

pub(crate) struct View<'a> {
    pub input: &'a PlanInput<'a>,
    pub pool: &'a BootcNodePool,
    pub pool_name: String,
    pub nodes: BTreeMap<&'a str, &'a Node>,
    pub bns: BTreeMap<&'a str, &'a BootcNode>,
    /// The pool's status as stored (empty for a new pool).
    pub current: BootcNodePoolStatus,
}

impl<'a> View<'a> {
    pub fn of(input: &'a PlanInput<'a>) -> Self {
        View {
            input,
            pool: input.pool,
            pool_name: input.pool.name_any(),
            nodes: input.nodes.iter().map(|n| (name_of(*n), *n)).collect(),
            bns: input
                .bootc_nodes
                .iter()
                .map(|b| (name_of(*b), *b))
                .collect(),
            current: input.pool.status.clone().unwrap_or_default(),
        }
    }

    pub fn node(&self, name: &str) -> Option<&'a Node> {
        self.nodes.get(name).copied()
    }

    pub fn bn(&self, name: &str) -> Option<&'a BootcNode> {
        self.bns.get(name).copied()
    }
}

/// An object's name, borrowed (objects read from the API always have one).
fn name_of<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}
