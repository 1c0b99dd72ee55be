//! The cache of a cluster-scoped kind (Nodes, BootcNodes), keyed by name
//! alone and filled from its watch.
//!
//! Why not kube's reflector store: it keys each object by an `ObjectRef`
//! that copies the object's name, resource version and uid (about 170 bytes
//! an object, twice per node at 20,000 nodes), and every lookup builds one
//! (a `String` per call). Here an entry is the object itself, found by the
//! name it carries, so a lookup takes a `&str` and allocates nothing.
//!
//! A relist (the watch's `Init` .. `InitDone`) updates the objects in place
//! and, at its end, drops those it did not list: the cache holds one copy of
//! each object throughout (kube's store builds a second map and swaps it in,
//! twice the memory for the relist's length). Meanwhile it shows each object
//! at least as new as before, and still the ones deleted while the watch was
//! down, until the relist ends.
//!
//! A kind may name a key its objects are counted by ([`Tallied`]): the
//! cache keeps the count of each key in use as objects come and go, so
//! that a reader of the keys (the daemons' pull-secret grant: which pool's
//! BootcNodes name which Secret) reads a few counts, not every object.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::Resource;
use kube::runtime::watcher::Event;

/// The cache; clones share it.
#[derive(Clone)]
pub struct ByName<K: Tallied> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K: Tallied> std::fmt::Debug for ByName<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByName")
            .field("objects", &self.read().objects.len())
            .finish()
    }
}

struct Inner<K: Tallied> {
    objects: HashSet<Entry<K>, foldhash::fast::RandomState>,
    /// How many relists have begun: entries carry the last that listed them.
    relist: u64,
    /// How many cached objects have each key in use.
    tally: BTreeMap<K::Key, usize>,
}

/// The key a cache counts its objects by (None: not counted).
pub trait Tallied {
    type Key: Ord;
    fn tally_key(&self) -> Option<Self::Key>;
}

/// Nodes are not counted.
impl Tallied for api::Node {
    type Key = ();
    fn tally_key(&self) -> Option<()> {
        None
    }
}

/// An object, hashed and compared by its name, so that the set finds it by
/// a `&str`; `listed` is the last relist that listed it.
struct Entry<K> {
    object: Arc<K>,
    listed: u64,
}

impl<K: Resource> Entry<K> {
    fn name(&self) -> &str {
        self.object.meta().name.as_deref().unwrap_or_default()
    }
}

impl<K: Resource> Borrow<str> for Entry<K> {
    fn borrow(&self) -> &str {
        self.name()
    }
}

impl<K: Resource> Hash for Entry<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes: `Borrow<str>` requires the same hash.
        self.name().hash(state);
    }
}

impl<K: Resource> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl<K: Resource> Eq for Entry<K> {}

impl<K: Tallied> Default for ByName<K> {
    fn default() -> Self {
        ByName {
            inner: Arc::new(RwLock::new(Inner {
                objects: HashSet::default(),
                relist: 0,
                tally: BTreeMap::new(),
            })),
        }
    }
}

impl<K: Tallied> ByName<K> {
    // A panic while holding the lock leaves the set whole (each change is
    // one insert or remove), so a poisoned lock is used as it is.
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Resource + Tallied> ByName<K> {
    /// The object named `name`, if cached.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.read().objects.get(name).map(|e| e.object.clone())
    }

    /// The cached objects of these names, in their order (one lock for
    /// all: a pool of 20,000 asks for each member at every reconcile).
    pub fn get_all<'n>(&self, names: impl Iterator<Item = &'n str>) -> Vec<Arc<K>> {
        let inner = self.read();
        names
            .filter_map(|name| inner.objects.get(name).map(|e| e.object.clone()))
            .collect()
    }

    /// Every cached object, in no order.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.read()
            .objects
            .iter()
            .map(|e| e.object.clone())
            .collect()
    }

    /// The keys of the cached objects ([`Tallied`]), each once, in order.
    pub fn tally(&self) -> Vec<K::Key>
    where
        K::Key: Clone,
    {
        self.read().tally.keys().cloned().collect()
    }
}

impl<K: Resource + Clone + Tallied> ByName<K> {
    /// A cache holding `objects`, as after a list of them (for tests and
    /// one-off reconciles).
    pub fn of(objects: impl IntoIterator<Item = K>) -> Self {
        let cache = ByName::default();
        cache.apply(&Event::Init);
        for o in objects {
            cache.apply(&Event::InitApply(Arc::new(o)));
        }
        cache.apply(&Event::InitDone);
        cache
    }

    /// Takes in one event of the kind's watch. Objects without a name
    /// (never sent by an API server) are ignored.
    pub fn apply(&self, event: &Event<Arc<K>>) {
        let mut inner = self.write();
        match event {
            Event::Apply(o) | Event::InitApply(o) => inner.put(o),
            Event::Delete(o) => {
                if let Some(name) = o.meta().name.as_deref()
                    && let Some(gone) = inner.objects.take(name)
                {
                    uncount(&mut inner.tally, &*gone.object);
                }
            }
            Event::Init => inner.relist += 1,
            Event::InitDone => {
                let Inner {
                    objects,
                    relist,
                    tally,
                } = &mut *inner;
                objects.retain(|e| {
                    let listed = e.listed == *relist;
                    if !listed {
                        uncount(tally, &*e.object);
                    }
                    listed
                });
            }
        }
    }
}

impl<K: Resource + Clone + Tallied> Inner<K> {
    /// Caches `object` in place of the one of its name. Outside a relist an
    /// object counts as listed by the last one, so that a relist's end keeps
    /// what a later event brought.
    fn put(&mut self, object: &Arc<K>) {
        if object.meta().name.is_none() {
            return;
        }
        let listed = self.relist;
        let replaced = self.objects.replace(Entry {
            object: Arc::clone(object),
            listed,
        });
        if let Some(old) = replaced {
            uncount(&mut self.tally, &*old.object);
        }
        if let Some(key) = object.tally_key() {
            *self.tally.entry(key).or_default() += 1;
        }
    }
}

/// Takes `object` out of the count of its key.
fn uncount<K: Tallied>(tally: &mut BTreeMap<K::Key, usize>, object: &K) {
    let Some(key) = object.tally_key() else {
        return;
    };
    if let Some(n) = tally.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            tally.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::Node;

    fn node(name: &str, version: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.to_owned());
        n.metadata.resource_version = Some(version.to_owned());
        n
    }

    fn version(cache: &ByName<Node>, name: &str) -> Option<String> {
        cache
            .get(name)
            .and_then(|n| n.metadata.resource_version.clone())
    }

    fn names(cache: &ByName<Node>) -> Vec<String> {
        let mut names: Vec<String> = cache
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn applies_replace_and_deletes_remove_by_name() {
        let cache = ByName::default();
        cache.apply(&Event::Apply(Arc::new(node("a", "1"))));
        cache.apply(&Event::Apply(Arc::new(node("b", "1"))));
        cache.apply(&Event::Apply(Arc::new(node("a", "2"))));
        assert_eq!(version(&cache, "a").as_deref(), Some("2"));
        cache.apply(&Event::Delete(Arc::new(node("b", "3"))));
        assert_eq!(names(&cache), ["a"]);
        assert!(cache.get("b").is_none());
    }

    /// A relist keeps the cache whole while it runs, and at its end drops
    /// what it did not list, but not what an event brought meanwhile.
    #[test]
    fn a_relist_updates_in_place_and_drops_what_it_did_not_list() {
        let cache = ByName::of([node("a", "1"), node("gone", "1"), node("b", "1")]);
        cache.apply(&Event::Init);
        cache.apply(&Event::InitApply(Arc::new(node("a", "5"))));
        assert_eq!(names(&cache), ["a", "b", "gone"], "whole meanwhile");
        assert_eq!(version(&cache, "a").as_deref(), Some("5"));
        cache.apply(&Event::InitApply(Arc::new(node("b", "5"))));
        cache.apply(&Event::InitApply(Arc::new(node("new", "5"))));
        cache.apply(&Event::InitDone);
        assert_eq!(names(&cache), ["a", "b", "new"]);
        cache.apply(&Event::Apply(Arc::new(node("later", "6"))));
        cache.apply(&Event::Init);
        cache.apply(&Event::InitApply(Arc::new(node("a", "7"))));
        cache.apply(&Event::InitDone);
        assert_eq!(names(&cache), ["a"], "a second relist drops the first's");
    }

    /// A ConfigMap counted by its `key` label, for the tally's test.
    impl Tallied for k8s_openapi::api::core::v1::ConfigMap {
        type Key = String;
        fn tally_key(&self) -> Option<String> {
            self.metadata.labels.as_ref()?.get("key").cloned()
        }
    }

    /// The keys in use follow every change: an apply, a replacement, a
    /// deletion, and the objects a relist drops at its end.
    #[test]
    fn the_tally_holds_the_keys_of_the_objects_cached() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let object = |name: &str, key: Option<&str>| {
            let mut c = ConfigMap::default();
            c.metadata.name = Some(name.to_owned());
            c.metadata.labels = key.map(|k| [("key".to_owned(), k.to_owned())].into());
            Arc::new(c)
        };
        let cache = ByName::default();
        // (what, the event, the keys after it)
        let steps: Vec<(&str, Event<_>, Vec<&str>)> = vec![
            ("a first", Event::Apply(object("a", Some("k1"))), vec!["k1"]),
            (
                "a second",
                Event::Apply(object("b", Some("k1"))),
                vec!["k1"],
            ),
            (
                "another",
                Event::Apply(object("c", Some("k2"))),
                vec!["k1", "k2"],
            ),
            (
                "one of two moves",
                Event::Apply(object("a", Some("k2"))),
                vec!["k1", "k2"],
            ),
            (
                "the last leaves",
                Event::Apply(object("b", None)),
                vec!["k2"],
            ),
            (
                "deleted",
                Event::Delete(object("c", Some("k2"))),
                vec!["k2"],
            ),
            ("the last deleted", Event::Delete(object("a", None)), vec![]),
            (
                "relisted",
                Event::Apply(object("gone", Some("k3"))),
                vec!["k3"],
            ),
            ("a relist begins", Event::Init, vec!["k3"]),
            (
                "it lists",
                Event::InitApply(object("x", Some("k1"))),
                vec!["k1", "k3"],
            ),
            ("it drops the rest", Event::InitDone, vec!["k1"]),
        ];
        for (what, event, keys) in steps {
            cache.apply(&event);
            assert_eq!(cache.tally(), keys, "{what}");
        }
    }

    #[test]
    fn objects_without_a_name_are_not_cached() {
        let cache = ByName::default();
        cache.apply(&Event::Apply(Arc::new(Node::default())));
        assert!(cache.state().is_empty());
    }
}
