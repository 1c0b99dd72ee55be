//! Step 3, membership and conflicts: which Nodes are the pool's members.
//!
//! A Node is a member when the pool's selector selects it and no other pool
//! claims it: a Node that another pool's selector also selects, or whose
//! BootcNode another pool owns, is a conflict (named on the pool's Degraded
//! condition, `NodeConflict`) and gets nothing from this pool. A member the
//! pool already owns stays a member through a conflict (it is not dropped
//! mid-update), but takes no new slot. An unparsable selector changes no
//! membership (fail closed): the pool keeps the nodes it has and takes no
//! new ones. A new member gets its BootcNode only once the pool has a
//! target. Nodes that stop being members leave ([`super::leaving`]).

use std::collections::{BTreeMap, BTreeSet};

use api::Node;
use api::{BootcNode, BootcNodePool, Reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube_core::{Resource, ResourceExt};
use kube_core::{Selector, SelectorExt};

use crate::facts::Claim;
use crate::memo::Answers;
use crate::model::Problem;
use crate::view::View;

/// The pool's members, as this plan sees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership<'a> {
    /// Members in name order.
    pub names: Vec<&'a str>,
    /// Each member's place in the view's rows (in the order of `names`).
    pub(crate) rows: Vec<usize>,
    /// Selected nodes other pools claim too, with those pools.
    pub conflicts: BTreeMap<String, BTreeSet<String>>,
}

impl Membership<'_> {
    pub fn contains(&self, name: &str) -> bool {
        self.names.binary_search(&name).is_ok()
    }

    /// The `NodeConflict` problem, if any node is in conflict.
    pub fn conflict_problem(&self) -> Option<Problem> {
        if self.conflicts.is_empty() {
            return None;
        }
        let text: Vec<String> = self
            .conflicts
            .iter()
            .map(|(node, pools)| {
                let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
                format!(
                    "node {node} is also selected by pool(s) {}",
                    pools.join(", ")
                )
            })
            .collect();
        Some((Reason::NodeConflict, text.join("; ")))
    }
}

/// The members of the pool (see the module docs); an unparsable selector
/// is reported. Each node's answer is kept in `memo` for the next plan.
pub(crate) fn of<'a>(
    view: &View<'a>,
    memo: &mut Answers,
    problems: &mut Vec<Problem>,
) -> Membership<'a> {
    let pool = view.pool;
    let selector = match parse_selector(&pool.spec.node_selector) {
        Ok(s) => Some(s),
        Err(message) => {
            problems.push((Reason::InvalidSpec, message));
            None
        }
    };
    let others = other_selectors(&view.input.other_pools);
    let mut out = Membership::default();
    for (at, (name, row)) in view.rows.iter().enumerate() {
        let Some(node) = row.node else { continue };
        let claim = memo.membership(at, row.versions, || {
            claim(pool, node, row.bn, selector.as_ref(), &others)
        });
        if let Some(pools) = claim.conflict {
            out.conflicts.insert((*name).to_owned(), pools);
        }
        if claim.member {
            out.names.push(name);
            out.rows.push(at);
        }
    }
    out
}

/// The other pools that claim `node` along with `pool`, as the plan
/// decides it (the `NodeConflict` of [`Membership::conflicts`]): None when
/// `pool` does not select the node or no other pool claims it. For one
/// node read on its own (`kubectl bootc why`), with the plan's own rule. A
/// pool being deleted is cleaned up, not planned: it claims nothing.
pub fn conflict(
    pool: &BootcNodePool,
    node: &Node,
    bn: Option<&BootcNode>,
    other_pools: &[&BootcNodePool],
) -> Option<BTreeSet<String>> {
    if pool.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let selector = parse_selector(&pool.spec.node_selector).ok();
    let others = other_selectors(other_pools);
    claim(pool, node, bn, selector.as_ref(), &others).conflict
}

/// One node's claim: selected by this pool, and by which others.
fn claim(
    pool: &BootcNodePool,
    node: &Node,
    bn: Option<&BootcNode>,
    selector: Option<&Selector>,
    others: &[(String, Selector)],
) -> Claim {
    let selected = match selector {
        Some(s) => s.matches(node.labels()),
        None => bn.is_some_and(|bn| owned_by(bn, pool)),
    };
    if !selected {
        return Claim::default();
    }
    let mut claims: BTreeSet<String> = others
        .iter()
        .filter(|(_, s)| s.matches(node.labels()))
        .map(|(name, _)| name.clone())
        .collect();
    match bn {
        Some(bn) if owned_by(bn, pool) => Claim {
            member: true,
            conflict: (!claims.is_empty()).then_some(claims),
        },
        Some(bn) => {
            let owner = owner_pool(bn)
                .map(|(n, _)| n)
                .unwrap_or_else(|| "an unknown owner".to_owned());
            claims.insert(owner);
            Claim {
                member: false,
                conflict: Some(claims),
            }
        }
        None if !claims.is_empty() => Claim {
            member: false,
            conflict: Some(claims),
        },
        // A new member, with or without a target: its BootcNode is
        // created with the target.
        None => Claim {
            member: true,
            conflict: None,
        },
    }
}

/// Other pools' selectors, parsed once (an unparsable one selects nothing;
/// a pool being deleted claims nothing new).
fn other_selectors(pools: &[&BootcNodePool]) -> Vec<(String, Selector)> {
    pools
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            Selector::try_from(p.spec.node_selector.clone())
                .ok()
                .map(|s| (p.name_any(), s))
        })
        .collect()
}

/// `spec.nodeSelector` as a selector, or an error naming the expression that
/// does not parse, with its key, operator and values.
pub fn parse_selector(selector: &LabelSelector) -> Result<Selector, String> {
    crate::members::selector::parse_at(selector, "spec.nodeSelector")
}

/// Does `pool`'s selector select `node`? An unparsable selector selects nothing.
pub fn selects(pool: &BootcNodePool, node: &Node) -> bool {
    match Selector::try_from(pool.spec.node_selector.clone()) {
        Ok(sel) => sel.matches(node.labels()),
        Err(_) => false,
    }
}

/// Is `bn` owned by `pool` (owner reference by uid, or by name without one)?
pub fn owned_by(bn: &BootcNode, pool: &BootcNodePool) -> bool {
    // Compared in place, without copies: every plan asks it of every node.
    owner_reference_of(bn).is_some_and(|o| match (&pool.metadata.uid, o.uid.as_str()) {
        (Some(p), u) if !u.is_empty() => p == u,
        _ => pool.metadata.name.as_deref() == Some(o.name.as_str()),
    })
}

/// The owner reference naming a pool, if any.
pub fn owner_reference_of(bn: &BootcNode) -> Option<&OwnerReference> {
    bn.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == BootcNodePool::kind(&()))
}

/// The name and uid of the pool that owns `bn`, if any.
pub fn owner_pool(bn: &BootcNode) -> Option<(String, Option<String>)> {
    owner_reference_of(bn).map(|o| {
        (
            o.name.clone(),
            Some(o.uid.clone()).filter(|u| !u.is_empty()),
        )
    })
}
