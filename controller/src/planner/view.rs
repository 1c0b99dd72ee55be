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
    pub nodes: BTreeMap<String, &'a Node>,
    pub bns: BTreeMap<String, &'a BootcNode>,
    /// The pool's status as stored (empty for a new pool).
    pub current: BootcNodePoolStatus,
}

impl<'a> View<'a> {
    pub fn of(input: &'a PlanInput<'a>) -> Self {
        View {
            input,
            pool: input.pool,
            pool_name: input.pool.name_any(),
            nodes: input.nodes.iter().map(|n| (n.name_any(), *n)).collect(),
            bns: input
                .bootc_nodes
                .iter()
                .map(|b| (b.name_any(), *b))
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
