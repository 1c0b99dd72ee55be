//! What a plan sees: the input's objects merged by name, and the pool's
//! status as it is now. Built once per plan; every step reads it.
//!
//! The steps walk the rows in name order rather than looking names up: a
//! plan of a large pool visits every member several times, and a walk
//! costs no hashing and no string comparison. The runtime gives the Nodes
//! and BootcNodes in name order, so the view merges them in one pass and
//! sorts nothing; membership records each member's row, and the drains,
//! the phase clock and the conflicts are walked along in the same order.

use std::cmp::Ordering;
use std::collections::{BTreeMap, btree_map};
use std::iter::Peekable;
use std::sync::Arc;

use api::Node;
use api::{BootcNode, BootcNodePool, BootcNodePoolStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_core::Resource;
use kube_core::ResourceExt;

use crate::holds::pause::Pause;
use crate::members::owned::owner_reference;
use crate::model::PlanInput;

pub(crate) struct View<'a> {
    pub input: &'a PlanInput<'a>,
    pub pool: &'a BootcNodePool,
    pub pool_name: String,
    /// Every name that has a Node or a BootcNode, in name order, with both.
    pub rows: Vec<(&'a str, Row<'a>)>,
    /// The pool's status as stored (empty for a new pool).
    pub current: BootcNodePoolStatus,
    /// The pool's pause now ([`Pause::of`]): every step reads this one.
    pub pause: Pause,
    /// The owner reference every member's BootcNode carries, shared by the
    /// plan's applies.
    pub owner: Arc<OwnerReference>,
}

/// One name's Node and BootcNode, and their versions (see [`super::memo`]),
/// read once per plan: every step asks for them, for every member.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row<'a> {
    pub node: Option<&'a Node>,
    pub bn: Option<&'a BootcNode>,
    pub versions: Option<Versions>,
}

impl<'a> View<'a> {
    pub fn of(input: &'a PlanInput<'a>) -> Self {
        let rows = merged(by_name(&input.nodes), by_name(&input.bootc_nodes));
        View {
            input,
            pool: input.pool,
            pool_name: input.pool.name_any(),
            rows,
            current: input.pool.status.clone().unwrap_or_default(),
            pause: Pause::of(&input.pool.spec.rollout, input.now),
            owner: Arc::new(owner_reference(input.pool)),
        }
    }
}

/// An object's name, borrowed (objects read from the API always have one).
fn name_of<K: kube_core::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or_default()
}

/// Objects in name order, one per name. The runtime gives them so: then
/// one pass checks it, and nothing is sorted.
fn by_name<'a, K: kube_core::Resource>(objects: &[&'a K]) -> Vec<(&'a str, &'a K)> {
    let mut sorted: Vec<(&'a str, &'a K)> = objects.iter().map(|o| (name_of(*o), *o)).collect();
    if !sorted.windows(2).all(|w| w[0].0 < w[1].0) {
        sorted.sort_by_key(|(name, _)| *name);
        sorted.dedup_by_key(|(name, _)| *name);
    }
    sorted
}

/// The Nodes and BootcNodes merged by name, with their versions.
fn merged<'a>(
    nodes: Vec<(&'a str, &'a Node)>,
    bns: Vec<(&'a str, &'a BootcNode)>,
) -> Vec<(&'a str, Row<'a>)> {
    let mut rows = Vec::with_capacity(nodes.len().max(bns.len()));
    let (mut nodes, mut bns) = (nodes.into_iter().peekable(), bns.into_iter().peekable());
    loop {
        let order = match (nodes.peek(), bns.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((n, _)), Some((b, _))) => n.cmp(b),
        };
        let node = nodes.next_if(|_| order != Ordering::Greater);
        let bn = bns.next_if(|_| order != Ordering::Less);
        let Some(name) = node.map(|(n, _)| n).or(bn.map(|(n, _)| n)) else {
            break;
        };
        let (node, bn) = (node.map(|(_, o)| o), bn.map(|(_, o)| o));
        let versions = Versions::of(node, bn);
        rows.push((name, Row { node, bn, versions }));
    }
    rows
}

/// Looks names up in a name-ordered map, for names asked in name order:
/// each lookup moves forward, so a walk over every member is one pass over
/// the map.
pub(crate) struct Walk<'m, V> {
    entries: Peekable<btree_map::Iter<'m, String, V>>,
}

impl<'m, V> Walk<'m, V> {
    pub fn of(map: &'m BTreeMap<String, V>) -> Self {
        Walk {
            entries: map.iter().peekable(),
        }
    }

    /// The value for `name`, which must not come before the last name asked.
    pub fn get(&mut self, name: &str) -> Option<&'m V> {
        while self.entries.next_if(|(k, _)| k.as_str() < name).is_some() {}
        self.entries
            .peek()
            .filter(|(k, _)| k.as_str() == name)
            .map(|(_, v)| *v)
    }
}

/// The versions of one node's objects (None: the object does not exist).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Versions {
    node: Option<u64>,
    bn: Option<u64>,
}

fn version<K: Resource>(object: Option<&K>) -> Result<Option<u64>, ()> {
    match object {
        None => Ok(None),
        Some(o) => o
            .meta()
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .map(Some)
            .ok_or(()),
    }
}

impl Versions {
    /// None when an object has no numeric version (never kept).
    pub fn of(node: Option<&Node>, bn: Option<&BootcNode>) -> Option<Self> {
        Some(Versions {
            node: version(node).ok()?,
            bn: version(bn).ok()?,
        })
    }
}
