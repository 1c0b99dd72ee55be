//! One reconcile, outside the running controller: the seam through which
//! the scripted tests (`controller/tests/scripted_*.rs`) give the reconcile
//! a client of their own and caches holding the objects of their story.

use std::sync::Arc;

use api::Node;
use api::{BootcNode, BootcNodePool};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use super::liveness::Liveness;
use super::pool_state::PoolStates;
use super::reconcile::{Caches, reconcile};
use super::synced::{Cache, Synced};
use super::{Error, Options, Shared, context};
use crate::actions::drain::Drains;
use crate::actions::events::EventSink;
use crate::cache::ByName;

/// The objects the caches hold, as their watches would have listed them.
#[derive(Clone, Debug, Default)]
pub struct Cached {
    pub pools: Vec<BootcNodePool>,
    pub nodes: Vec<Node>,
    pub bootc_nodes: Vec<BootcNode>,
    pub secrets: Vec<Secret>,
    /// The operator's Namespace (the fleet's switch), if listed.
    pub namespaces: Vec<Namespace>,
}

/// One reconcile of `pool` as the running controller makes it (the
/// finalizer, then the plan and its writes, or a deleted pool's cleanup),
/// through `client`, on caches that have listed `cached`. Drains go through
/// `drain_client`. What the controller remembers about pools is `states`,
/// which a test may keep from one reconcile to the next. No watch, no
/// lease, no health server.
pub async fn reconcile_once(
    client: kube::Client,
    drain_client: kube::Client,
    options: &Options,
    cached: Cached,
    pool: BootcNodePool,
    states: &Arc<PoolStates>,
) -> Result<Action, Error> {
    let synced = Synced::new();
    let caches = Caches {
        pools: listed(&synced, Cache::Pools, cached.pools).await,
        nodes: listed_by_name(&synced, Cache::Nodes, cached.nodes),
        bootc_nodes: listed_by_name(&synced, Cache::BootcNodes, cached.bootc_nodes),
        secrets: listed(&synced, Cache::Secrets, cached.secrets).await,
        fleet: listed(&synced, Cache::Fleet, cached.namespaces).await,
    };
    let events = EventSink::new(client.clone(), &options.instance);
    // No drain's end triggers another reconcile here.
    let (trigger, _) = mpsc::unbounded_channel();
    let shared = Shared {
        drains: Drains::new(drain_client, &options.namespace, events, trigger),
        states: Arc::clone(states),
        changes: Arc::default(),
        liveness: Arc::new(Liveness::new(options.wedged_after)),
        synced,
    };
    let ctx = context(client, options, caches, shared);
    reconcile(Arc::new(pool), Arc::new(ctx)).await
}

/// A cache filled as a watch's initial list fills it, and marked listed.
async fn listed<K>(synced: &Arc<Synced>, cache: Cache, objects: Vec<K>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let events = std::iter::once(watcher::Event::Init)
        .chain(objects.into_iter().map(watcher::Event::InitApply))
        .chain(std::iter::once(watcher::Event::InitDone))
        .map(Ok::<_, watcher::Error>);
    let list = reflector::reflector(writer, futures::stream::iter(events));
    synced.track(cache, list).for_each(|_| async {}).await;
    store
}

/// A cache keyed by name holding `objects`, marked listed.
fn listed_by_name<K: Resource + Clone + crate::cache::Tallied>(
    synced: &Synced,
    cache: Cache,
    objects: Vec<K>,
) -> ByName<K> {
    synced.listed(cache);
    ByName::of(objects)
}
