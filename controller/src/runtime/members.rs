//! Which cached objects each pool reads, kept up to date from the watch
//! events, so that a reconcile reads what changed instead of every object
//! of the cluster. The choice is kept by name; the objects stay in the
//! caches and are looked up when a reconcile reads them ([`Members::chosen`]).
//!
//! [`Selection::of`] chooses a pool's objects in one pass over the caches: at
//! 5,000 nodes a sixth of the controller's CPU went there, on every reconcile.
//! The choice is a rule about one name at a time (`selection::reads`, used by
//! both), so it can be kept per name: the Node and BootcNode watches record
//! every name they apply or delete in [`Changes`], and [`Members::update`]
//! re-decides only those names. A relist (the cache replaced wholesale, objects
//! deleted meanwhile gone without an event), a pool whose selector, name or uid
//! changed, and a pool seen for the first time are decided again from scratch.
//! The members' architectures and the retry requests of the pool's own
//! BootcNodes are kept the same way, by name, so neither walks the members.
//! A property test requires the kept selection to equal [`Selection::of`] after
//! any sequence of changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use api::{BootcNode, BootcNodePool};
use api::{Node, Shared};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::core::Selector;

use super::selection::{Selection, reads};
use crate::target::tag_policy;

/// What is left to decide again for one pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    /// Every name (a relist, or a pool not seen before).
    Everything,
    /// These names only.
    Names(foldhash::HashSet<String>),
}

/// The names the watches applied or deleted since each pool last looked,
/// and whether each pool is already asked for: a pool is triggered by the
/// first change after it last looked ([`Changes::arm`]), and the changes
/// that follow wait for that reconcile, which reads them all. So the
/// controller's queue takes a trigger per reconcile, not one per watch event
/// (tens of thousands of them in a large rollout).
#[derive(Debug, Default)]
pub struct Changes {
    pools: Mutex<foldhash::HashMap<String, PoolChanges>>,
}

/// One pool's changes since it last looked.
#[derive(Debug)]
struct PoolChanges {
    pending: Pending,
    /// A trigger was sent since the pool last looked.
    armed: bool,
    /// The names changed since the pool's last look at its changed members
    /// for slots to give back (`reconcile::look`), or since it last looked
    /// at everything.
    fresh: BTreeSet<String>,
}

impl PoolChanges {
    fn new(pending: Pending, armed: bool) -> Self {
        PoolChanges {
            pending,
            armed,
            fresh: BTreeSet::new(),
        }
    }
}

impl Changes {
    /// A Node or BootcNode named `name` was applied or deleted.
    pub fn touched(&self, name: &str) {
        if let Ok(mut pools) = self.pools.lock() {
            for p in pools.values_mut() {
                if let Pending::Names(names) = &mut p.pending {
                    names.insert(name.to_owned());
                    p.fresh.insert(name.to_owned());
                }
            }
        }
    }

    /// A cache was replaced wholesale: every pool decides everything again.
    pub fn everything(&self) {
        if let Ok(mut pools) = self.pools.lock() {
            for p in pools.values_mut() {
                p.pending = Pending::Everything;
            }
        }
    }

    /// Should a change that concerns `pool` trigger it? Only the first
    /// since the pool last looked ([`Changes::take`]): the reconcile it
    /// triggers, or one already queued or running, reads the others.
    pub fn arm(&self, pool: &str) -> bool {
        let Ok(mut pools) = self.pools.lock() else {
            return true;
        };
        match pools.get_mut(pool) {
            Some(p) => !std::mem::replace(&mut p.armed, true),
            None => {
                // Never looked: it decides everything when it does.
                pools.insert(pool.to_owned(), PoolChanges::new(Pending::Everything, true));
                true
            }
        }
    }

    /// What `pool` has to decide again; from now on its changes are
    /// recorded afresh, and the next one triggers it again.
    pub fn take(&self, pool: &str) -> Pending {
        let Ok(mut pools) = self.pools.lock() else {
            return Pending::Everything;
        };
        let fresh = PoolChanges::new(Pending::Names(Default::default()), false);
        pools
            .insert(pool.to_owned(), fresh)
            .map_or(Pending::Everything, |p| p.pending)
    }

    /// The names changed since `pool` last asked (or last took its
    /// changes), in name order; from now on they are recorded afresh. They
    /// stay pending for the pool's next reconcile all the same.
    pub fn fresh(&self, pool: &str) -> BTreeSet<String> {
        let Ok(mut pools) = self.pools.lock() else {
            return BTreeSet::new();
        };
        pools
            .get_mut(pool)
            .map(|p| std::mem::take(&mut p.fresh))
            .unwrap_or_default()
    }

    /// Names read by [`Changes::fresh`] that `pool` could not decide yet
    /// (a write of its own to them on its way): read again next time.
    pub fn again(&self, pool: &str, names: BTreeSet<String>) {
        if let Ok(mut pools) = self.pools.lock()
            && let Some(p) = pools.get_mut(pool)
            && let Pending::Names(_) = p.pending
        {
            p.fresh.extend(names);
        }
    }

    /// The pool's reconcile ended without looking (its caches behind its
    /// own writes): the next change triggers it again, as the one that
    /// brings the caches up would have.
    pub fn rearm(&self, pool: &str) {
        if let Ok(mut pools) = self.pools.lock()
            && let Some(p) = pools.get_mut(pool)
        {
            p.armed = false;
        }
    }

    /// The pool is gone.
    pub fn forget(&self, pool: &str) {
        if let Ok(mut pools) = self.pools.lock() {
            pools.remove(pool);
        }
    }
}

/// What the choice reads of the pool: when it changes, everything is
/// decided again.
#[derive(Clone, Debug, PartialEq)]
struct PoolKey {
    name: String,
    uid: Option<String>,
    selector: LabelSelector,
}

impl PoolKey {
    fn of(pool: &BootcNodePool) -> Self {
        PoolKey {
            name: pool.name_any(),
            uid: pool.metadata.uid.clone(),
            selector: pool.spec.node_selector.clone(),
        }
    }
}

/// Which of one name's objects the pool reads, and what they say of the
/// architectures tag resolution needs. The objects themselves stay in the
/// caches (see [`Members::chosen`]).
#[derive(Clone, Debug)]
struct Entry {
    node: bool,
    bn: bool,
    /// What it tells tag resolution: the `kubernetes.io/arch` label of a
    /// selected Node, the architecture an owned BootcNode reports.
    architectures: Vec<String>,
    /// The image an owned BootcNode boots, pinned (one copy for the
    /// members that boot it).
    booted: Option<Shared>,
    /// An owned BootcNode carries a person's retry request.
    retry: bool,
}

/// Decides one name for the pool ([`reads`]); None when the pool reads
/// neither object.
fn entry_for(
    pool: &BootcNodePool,
    selector: Option<&Selector>,
    node: Option<Arc<Node>>,
    bn: Option<Arc<BootcNode>>,
) -> Option<Entry> {
    let r = reads(pool, selector, node.as_deref(), bn.as_deref());
    let (read_node, read_bn, retry) = (r.node, r.bn, r.retry);
    let booted = r.booted.map(Shared::from);
    if !read_node && !read_bn {
        return None;
    }
    let architectures = tag_policy::required_architectures([r.labelled_arch], [r.reported_arch])
        .into_iter()
        .collect();
    Some(Entry {
        architectures,
        booted,
        retry,
        node: read_node && node.is_some(),
        bn: read_bn && bn.is_some(),
    })
}

/// One more entry counted under `key` (copied only when new).
fn count(counts: &mut BTreeMap<String, usize>, key: &str) {
    match counts.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            counts.insert(key.to_owned(), 1);
        }
    }
}

/// One less entry counted under `key`.
fn uncount(counts: &mut BTreeMap<String, usize>, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(key);
        }
    }
}

/// One name's Node and BootcNode, as the caches have them.
type Objects = (Option<Arc<Node>>, Option<Arc<BootcNode>>);

/// One pool's objects, by name (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Members {
    key: Option<PoolKey>,
    entries: BTreeMap<String, Entry>,
    /// How many entries name each architecture.
    architectures: BTreeMap<String, usize>,
    /// How many entries boot each image.
    booted: BTreeMap<String, usize>,
    /// The names whose BootcNode carries a retry request.
    retries: BTreeSet<String>,
}

/// Where [`Members::update`] reads the caches.
pub trait Caches {
    fn node(&self, name: &str) -> Option<Arc<Node>>;
    fn bn(&self, name: &str) -> Option<Arc<BootcNode>>;
    fn all_nodes(&self) -> Vec<Arc<Node>>;
    fn all_bns(&self) -> Vec<Arc<BootcNode>>;
    /// The Nodes of these names that the cache holds, in the same order.
    fn nodes<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<Arc<Node>> {
        names.filter_map(|name| self.node(name)).collect()
    }
    /// The BootcNodes of these names that the cache holds, in the same order.
    fn bns<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<Arc<BootcNode>> {
        names.filter_map(|name| self.bn(name)).collect()
    }
}

impl Members {
    /// Brings the pool's objects up to date with `caches`, deciding again
    /// the names in `pending` (everything when the pool's key changed or
    /// nothing was kept). Returns how many names were decided.
    pub fn update(
        &mut self,
        pool: &BootcNodePool,
        pending: Pending,
        caches: &impl Caches,
    ) -> usize {
        let key = PoolKey::of(pool);
        let selector = Selector::try_from(pool.spec.node_selector.clone()).ok();
        let pending = if self.key.as_ref() == Some(&key) {
            pending
        } else {
            Pending::Everything
        };
        match pending {
            Pending::Names(names) => {
                for name in &names {
                    self.decide(
                        pool,
                        selector.as_ref(),
                        name,
                        caches.node(name),
                        caches.bn(name),
                    );
                }
                names.len()
            }
            Pending::Everything => {
                *self = Members {
                    key: Some(key),
                    ..Members::default()
                };
                let mut objects: BTreeMap<String, Objects> = BTreeMap::new();
                for node in caches.all_nodes() {
                    let name = node.name_any();
                    objects.entry(name).or_default().0 = Some(node);
                }
                for bn in caches.all_bns() {
                    let name = bn.name_any();
                    objects.entry(name).or_default().1 = Some(bn);
                }
                let decided = objects.len();
                for (name, (node, bn)) in objects {
                    let entry = entry_for(pool, selector.as_ref(), node, bn);
                    self.put(&name, entry);
                }
                decided
            }
        }
    }

    fn decide(
        &mut self,
        pool: &BootcNodePool,
        selector: Option<&Selector>,
        name: &str,
        node: Option<Arc<Node>>,
        bn: Option<Arc<BootcNode>>,
    ) {
        let entry = entry_for(pool, selector, node, bn);
        self.put(name, entry);
    }

    /// Replaces (or removes) the name's entry, and its counts with it.
    fn put(&mut self, name: &str, entry: Option<Entry>) {
        let old = match entry {
            Some(entry) => {
                for arch in &entry.architectures {
                    count(&mut self.architectures, arch);
                }
                if let Some(image) = &entry.booted {
                    count(&mut self.booted, image);
                }
                if entry.retry {
                    self.retries.insert(name.to_owned());
                }
                self.entries.insert(name.to_owned(), entry)
            }
            None => self.entries.remove(name),
        };
        let Some(old) = old else { return };
        for arch in &old.architectures {
            uncount(&mut self.architectures, arch);
        }
        if let Some(image) = &old.booted {
            uncount(&mut self.booted, image);
        }
        if old.retry && !self.entries.get(name).is_some_and(|e| e.retry) {
            self.retries.remove(name);
        }
    }

    /// The pool's objects in name order, as `caches` hold them now, and its
    /// members' architectures: what [`Selection::of`] would choose from the
    /// same caches. Looked up here rather than kept: a kept object would
    /// outlive its replacement in the cache until the pool's next
    /// reconcile, and while a reconcile makes its writes (a minute for
    /// 20,000 new BootcNodes) every object it writes would be held twice.
    pub fn chosen(&self, caches: &impl Caches) -> Chosen {
        let names = |read: fn(&Entry) -> bool| {
            self.entries
                .iter()
                .filter(move |(_, e)| read(e))
                .map(|(name, _)| name.as_str())
        };
        Chosen {
            nodes: caches.nodes(names(|e| e.node)),
            bns: caches.bns(names(|e| e.bn)),
            architectures: self.architectures.keys().cloned().collect(),
            booted: self.booted.clone(),
        }
    }

    /// The objects of `names` the pool reads, as `caches` hold them now, in
    /// name order: Nodes and BootcNodes.
    pub fn some(
        &self,
        names: &BTreeSet<String>,
        caches: &impl Caches,
    ) -> (Vec<Arc<Node>>, Vec<Arc<BootcNode>>) {
        let read = |read: fn(&Entry) -> bool| {
            names
                .iter()
                .filter(move |name| self.entries.get(name.as_str()).is_some_and(read))
                .map(String::as_str)
        };
        (caches.nodes(read(|e| e.node)), caches.bns(read(|e| e.bn)))
    }

    /// The pool's BootcNodes that carry a retry request.
    pub fn retry_requests(&self, caches: &impl Caches) -> Vec<Arc<BootcNode>> {
        let names = self
            .retries
            .iter()
            .filter(|name| self.entries.get(name.as_str()).is_some_and(|e| e.bn));
        caches.bns(names.map(String::as_str))
    }
}

/// A pool's objects, looked up in the caches by [`Members::chosen`].
#[derive(Debug, Default)]
pub struct Chosen {
    nodes: Vec<Arc<Node>>,
    bns: Vec<Arc<BootcNode>>,
    architectures: std::collections::BTreeSet<String>,
    booted: BTreeMap<String, usize>,
}

impl Chosen {
    /// The BootcNodes chosen.
    pub fn bns(&self) -> impl Iterator<Item = &BootcNode> {
        self.bns.iter().map(AsRef::as_ref)
    }

    /// What the plan reads, borrowed.
    pub fn selection(&self) -> Selection<'_> {
        Selection {
            nodes: self.nodes.iter().map(AsRef::as_ref).collect(),
            bns: self.bns.iter().map(AsRef::as_ref).collect(),
            architectures: self.architectures.clone(),
            booted: self.booted.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
