//! The controller's watches, one function each: what it lists, the cache it
//! fills, how its objects are trimmed, which changes reach the controller.
//! Every watch backs off on its own, quickly (`api::watch::backoff`), and
//! its errors are logged and dropped (see `log_errors`).

use std::fmt::Debug;

use api::Node;
use api::{BootcNode, BootcNodePool};
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tokio::sync::mpsc;

use super::members::Changes;
use super::synced::{Cache, Synced};
use super::wire::{self, BootcNodeWire, NodeWire};
use super::{
    changed_only, log_errors, node_fingerprint, pool_fingerprint, secret_fingerprint, strip_secret,
};
use crate::cache::ByName;

/// The objects a watch passes on to the controller.
pub(super) trait Objects<K>:
    Stream<Item = Result<K, watcher::Error>> + Send + 'static
{
}
impl<K, S: Stream<Item = Result<K, watcher::Error>> + Send + 'static> Objects<K> for S {}

/// A watch of every object of `objects`, with the shared backoff.
fn watch<K>(
    objects: Api<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(objects, watcher::Config::default()).backoff(api::watch::backoff())
}

/// Records, once the cache has it, each name a watch applied or deleted,
/// and a relist (see `members`).
fn record<K: Resource>(changes: &Changes, event: &watcher::Event<Arc<K>>) {
    match event {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
            changes.touched(o.meta().name.as_deref().unwrap_or_default());
        }
        watcher::Event::InitDone => changes.everything(),
        watcher::Event::Init => {}
    }
}

/// Every BootcNode, cached without managed fields (not even decoded: see
/// `wire`); each change passes on, and is recorded in `changes`.
pub(super) fn bootc_nodes(
    client: &kube::Client,
    synced: &Arc<Synced>,
    changes: &Arc<Changes>,
) -> (ByName<BootcNode>, impl Objects<Arc<BootcNode>>) {
    let events = watch(Api::<BootcNodeWire>::all(client.clone())).map_ok(wire::real);
    let (cache, cached) = cached_by_name(events, changes.clone());
    let cached = synced.track(Cache::BootcNodes, cached);
    (cache, log_errors(cached.touched_objects(), "bootcnodes"))
}

/// `events` stored in a cache keyed by name, then recorded in `changes`
/// (once the cache has them).
fn cached_by_name<K: Resource + Clone + crate::cache::Tallied>(
    events: impl Stream<Item = Result<watcher::Event<Arc<K>>, watcher::Error>>,
    changes: Arc<Changes>,
) -> (
    ByName<K>,
    impl Stream<Item = Result<watcher::Event<Arc<K>>, watcher::Error>>,
) {
    let cache = ByName::default();
    let writer = cache.clone();
    let cached = events.inspect_ok(move |e| {
        writer.apply(e);
        record(&changes, e);
    });
    (cache, cached)
}

/// Every Node, trimmed (`strip_node`) as it is decoded (see `wire`); only
/// changes of what the plan reads (`node_fingerprint`) pass on, every
/// change is recorded in `changes`.
pub(super) fn nodes(
    client: &kube::Client,
    synced: &Arc<Synced>,
    changes: &Arc<Changes>,
) -> (ByName<Node>, impl Objects<Arc<Node>>) {
    let events = watch(Api::<NodeWire>::all(client.clone())).map_ok(wire::real);
    let (cache, cached) = cached_by_name(events, changes.clone());
    let cached = synced.track(Cache::Nodes, cached);
    (
        cache,
        log_errors(changed_only(cached, node_fingerprint), "nodes"),
    )
}

/// The Secrets of the operator's `namespace`, trimmed (`strip_secret`);
/// only content changes pass on.
pub(super) fn secrets(
    client: &kube::Client,
    namespace: &str,
    synced: &Arc<Synced>,
) -> (Store<Secret>, impl Objects<Secret>) {
    let (store, writer) = reflector::store();
    let events = watch(Api::namespaced(client.clone(), namespace)).modify(strip_secret);
    let cached = synced.track(Cache::Secrets, reflector::reflector(writer, events));
    (
        store,
        log_errors(changed_only(cached, secret_fingerprint), "secrets"),
    )
}

/// The operator's own Namespace, for the fleet's switch
/// ([`api::labels::FLEET_STOP_ANNOTATION`]): watched by name (the grant
/// names it), trimmed to that annotation; only its changes pass on, and
/// each concerns every pool. A watch rather than a poll: a stop reaches
/// every pool at once.
pub(super) fn fleet_switch(
    client: &kube::Client,
    namespace: &str,
    synced: &Arc<Synced>,
) -> (Store<Namespace>, impl Objects<Namespace>) {
    let (store, writer) = reflector::store();
    let config = watcher::Config::default().fields(&format!("metadata.name={namespace}"));
    let events = watcher(Api::<Namespace>::all(client.clone()), config)
        .backoff(api::watch::backoff())
        .modify(strip_namespace);
    let cached = synced.track(Cache::Fleet, reflector::reflector(writer, events));
    (
        store,
        log_errors(changed_only(cached, fleet_fingerprint), "namespace"),
    )
}

/// Keeps only the fleet's switch of a Namespace (and its flag).
fn strip_namespace(ns: &mut Namespace) {
    ns.metadata.managed_fields = None;
    ns.metadata.labels = None;
    ns.spec = None;
    ns.status = None;
    ns.annotations_mut().retain(|k, _| {
        k == api::labels::FLEET_STOP_ANNOTATION
            || k == api::labels::FLEET_STOP_BEFORE_APPROVAL_ANNOTATION
    });
}

fn fleet_fingerprint(ns: &Namespace) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    rollout::holds::gates::fleet_switch(ns.annotations()).hash(&mut h);
    h.finish()
}

/// The pools' own cache and the controller's main stream: every pool applied.
pub(super) fn pools(
    client: &kube::Client,
    synced: &Arc<Synced>,
) -> (Store<BootcNodePool>, impl Objects<BootcNodePool>) {
    let (store, writer) = reflector::store();
    let events = watch(Api::all(client.clone()));
    let cached = synced.track(Cache::Pools, reflector::reflector(writer, events));
    (
        store,
        log_errors(cached.applied_objects(), "bootcnodepools (cache)"),
    )
}

/// A second watch of the pools, for the other pools' sake: a pool's new
/// generation or deletion (`pool_fingerprint`) can change their conflicts,
/// and its becoming up to date or not the pools that depend on it.
pub(super) fn pool_changes(client: &kube::Client) -> impl Objects<BootcNodePool> {
    let events = changed_only(watch(Api::all(client.clone())), pool_fingerprint);
    log_errors(events, "bootcnodepools")
}

/// The pools whose drain finished, as the drains report them.
pub(super) fn drain_done(
    done: mpsc::UnboundedReceiver<ObjectRef<BootcNodePool>>,
) -> impl Stream<Item = ObjectRef<BootcNodePool>> + Send + 'static {
    futures::stream::unfold(
        done,
        |mut rx| async move { rx.recv().await.map(|r| (r, rx)) },
    )
}

/// Every pool in `pools`.
pub(super) fn every_pool(pools: &Store<BootcNodePool>) -> Vec<ObjectRef<BootcNodePool>> {
    pools
        .state()
        .iter()
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// The pools that `objects` concern (`pools_of`), each passed on only for
/// the first change since it last looked ([`Changes::arm`]): the reconcile
/// that change triggers reads every change recorded until it starts.
pub(super) fn triggers<K, I>(
    objects: impl Objects<K>,
    pools_of: impl Fn(&K) -> I + Send + 'static,
    changes: Arc<Changes>,
) -> impl Stream<Item = ObjectRef<BootcNodePool>> + Send + 'static
where
    K: Send + 'static,
    I: IntoIterator<Item = ObjectRef<BootcNodePool>>,
{
    objects.flat_map(move |object| {
        let armed: Vec<_> = object
            .into_iter()
            .flat_map(|o| pools_of(&o))
            .filter(|pool| changes.arm(&pool.name))
            .collect();
        futures::stream::iter(armed)
    })
}

/// The pool a BootcNode belongs to.
pub(super) fn pool_of(bn: &Arc<BootcNode>) -> Option<ObjectRef<BootcNodePool>> {
    rollout::owner_pool(bn).map(|(name, _)| ObjectRef::new(&name))
}
