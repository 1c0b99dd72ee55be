//! Have the caches listed their objects? Each cache's watch stream reports
//! its first complete list here, and any number of tasks wait on that: the
//! reconciles (Nodes, BootcNodes and Secrets) and `/readyz` (all four).
//!
//! Not kube's `Store::wait_until_ready`: its one-shot channel keeps a single
//! waker, so of several tasks waiting at once only the last is woken. kube's
//! own runner already waits on the pools' store, and several reconciles
//! start together: a second waiter could wait for ever (a reconcile wedged
//! from the start, or a controller never ready).

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio::sync::watch;

/// One of the controller's caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    Pools = 1,
    Nodes = 2,
    BootcNodes = 4,
    Secrets = 8,
    /// The operator's Namespace (the fleet's switch).
    Fleet = 16,
}

impl Cache {
    pub const ALL: [Cache; 5] = [
        Cache::Pools,
        Cache::Nodes,
        Cache::BootcNodes,
        Cache::Secrets,
        Cache::Fleet,
    ];
}

fn mask(caches: &[Cache]) -> u8 {
    caches.iter().fold(0, |m, c| m | *c as u8)
}

/// The caches that have listed their objects at least once.
#[derive(Debug)]
pub struct Synced {
    listed: watch::Sender<u8>,
}

impl Synced {
    pub fn new() -> Arc<Synced> {
        Arc::new(Synced {
            listed: watch::Sender::new(0),
        })
    }

    /// Passes `events` on, noting when `cache` has listed its objects. Put
    /// it after the reflector, which has stored an event when it passes it.
    pub fn track<K, S>(
        self: &Arc<Self>,
        cache: Cache,
        events: S,
    ) -> impl Stream<Item = S::Item> + use<K, S>
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    {
        let me = self.clone();
        events.inspect(move |event| {
            if let Ok(watcher::Event::InitDone) = event {
                me.listed(cache);
            }
        })
    }

    /// Notes that `cache` has listed its objects.
    pub fn listed(&self, cache: Cache) {
        self.listed.send_if_modified(|listed| {
            let before = *listed;
            *listed |= cache as u8;
            *listed != before
        });
    }

    /// Have all of `caches` listed their objects?
    pub fn all(&self, caches: &[Cache]) -> bool {
        let want = mask(caches);
        *self.listed.borrow() & want == want
    }

    /// Waits until all of `caches` have listed their objects.
    pub async fn wait(&self, caches: &[Cache]) {
        let want = mask(caches);
        let mut rx = self.listed.subscribe();
        // The sender lives as long as `self`: the wait cannot fail.
        let _ = rx.wait_for(|listed| *listed & want == want).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::Node;

    #[tokio::test]
    async fn every_waiter_is_woken() {
        let synced = Synced::new();
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let s = synced.clone();
                tokio::spawn(async move { s.wait(&[Cache::Nodes]).await })
            })
            .collect();
        tokio::task::yield_now().await;
        let events = futures::stream::iter([
            Ok::<_, watcher::Error>(watcher::Event::<Node>::Init),
            Ok(watcher::Event::InitDone),
        ]);
        let passed: Vec<_> = synced.track(Cache::Nodes, events).collect().await;
        assert_eq!(passed.len(), 2, "events pass through");
        for w in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(5), w)
                .await
                .expect("a waiter was not woken")
                .unwrap();
        }
        assert!(synced.all(&[Cache::Nodes]));
        assert!(!synced.all(&Cache::ALL));
    }
}
