//! Records every change to Nodes and BootcNodes for a whole test, then
//! replays them in etcd order (resourceVersion) to prove the disruption
//! bound: at no moment were more nodes disrupted than allowed.
//!
//! A node counts as disrupted at a moment when its BootcNode holds a reboot
//! slot (`bootc.dev/in-reboot-slot`) or is approved to boot
//! (`desiredImageState: Booted`), or its Node is cordoned without the test
//! having cordoned it. The two watches are separate streams; replaying by
//! resourceVersion (one etcd, one revision counter) puts them back in the
//! order the server applied them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use api::labels::IN_REBOOT_SLOT_ANNOTATION;
use api::{BootcNode, DesiredImageState};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;

#[derive(Clone, Debug)]
enum Obs {
    Node {
        rv: u64,
        name: String,
        cordoned: bool,
        deleted: bool,
    },
    Bootc {
        rv: u64,
        name: String,
        slot: bool,
        approved: bool,
        deleted: bool,
    },
}

impl Obs {
    fn rv(&self) -> u64 {
        match self {
            Obs::Node { rv, .. } | Obs::Bootc { rv, .. } => *rv,
        }
    }
}

/// A moment of maximum disruption.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    pub count: usize,
    pub nodes: BTreeSet<String>,
    pub resource_version: u64,
}

/// Watches Nodes and BootcNodes until dropped.
pub struct Recorder {
    log: Arc<Mutex<Vec<Obs>>>,
    seen: Arc<tokio::sync::Notify>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The name of the marker objects [`Recorder::sync`] writes (no Node of
/// that name is ever managed: nothing selects it).
pub const MARKER: &str = "zz-recorder-marker";

impl Drop for Recorder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn rv_of<K: kube::Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn node_obs(n: &Node, deleted: bool) -> Obs {
    Obs::Node {
        rv: rv_of(n),
        name: n.name_any(),
        cordoned: n
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        deleted,
    }
}

fn bn_obs(b: &BootcNode, deleted: bool) -> Obs {
    Obs::Bootc {
        rv: rv_of(b),
        name: b.name_any(),
        slot: b.annotations().contains_key(IN_REBOOT_SLOT_ANNOTATION),
        approved: b.spec.desired_image_state == DesiredImageState::Booted,
        deleted,
    }
}

impl Recorder {
    /// Starts both watches and returns once both listed the current state.
    pub async fn start(client: kube::Client) -> anyhow::Result<Self> {
        let log: Arc<Mutex<Vec<Obs>>> = Arc::default();
        let seen = Arc::new(tokio::sync::Notify::new());
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(2);
        let mut tasks = Vec::new();
        {
            let log = log.clone();
            let seen = seen.clone();
            let tx = tx.clone();
            let api: Api<Node> = Api::all(client.clone());
            tasks.push(tokio::spawn(async move {
                let mut s = watcher(api, watcher::Config::default()).boxed();
                while let Some(ev) = s.next().await {
                    let obs = match ev {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            node_obs(&n, false)
                        }
                        Ok(watcher::Event::Delete(n)) => node_obs(&n, true),
                        Ok(watcher::Event::InitDone) => {
                            let _ = tx.send(()).await;
                            continue;
                        }
                        _ => continue,
                    };
                    if let Ok(mut l) = log.lock() {
                        l.push(obs);
                    }
                    seen.notify_waiters();
                }
            }));
        }
        {
            let log = log.clone();
            let seen = seen.clone();
            let api: Api<BootcNode> = Api::all(client.clone());
            tasks.push(tokio::spawn(async move {
                let mut s = watcher(api, watcher::Config::default()).boxed();
                while let Some(ev) = s.next().await {
                    let obs = match ev {
                        Ok(watcher::Event::Apply(b) | watcher::Event::InitApply(b)) => {
                            bn_obs(&b, false)
                        }
                        Ok(watcher::Event::Delete(b)) => bn_obs(&b, true),
                        Ok(watcher::Event::InitDone) => {
                            let _ = tx.send(()).await;
                            continue;
                        }
                        _ => continue,
                    };
                    if let Ok(mut l) = log.lock() {
                        l.push(obs);
                    }
                    seen.notify_waiters();
                }
            }));
        }
        for _ in 0..2 {
            rx.recv().await;
        }
        Ok(Recorder { log, seen, tasks })
    }

    /// Makes sure both watches delivered everything written before this
    /// call: writes a marker Node and a marker BootcNode and waits until the
    /// recorder has seen both writes.
    pub async fn sync(&self, client: &kube::Client) -> anyhow::Result<()> {
        use kube::api::{Patch, PatchParams};
        let stamp = jiff::Timestamp::now().as_nanosecond().to_string();
        let params = PatchParams::apply("recorder").force();
        let node: Node = Api::<Node>::all(client.clone())
            .patch(
                MARKER,
                &params,
                &Patch::Apply(serde_json::json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": MARKER, "annotations": {"recorder/stamp": stamp}},
                })),
            )
            .await?;
        let bn: BootcNode = Api::<BootcNode>::all(client.clone())
            .patch(
                MARKER,
                &params,
                &Patch::Apply(serde_json::json!({
                    "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
                    "metadata": {"name": MARKER, "annotations": {"recorder/stamp": stamp}},
                    "spec": {"desiredImage": format!("example.invalid/marker@sha256:{}", "0".repeat(64))},
                })),
            )
            .await?;
        let (want_node, want_bn) = (rv_of(&node), rv_of(&bn));
        let caught_up = || {
            let l = self.log.lock().map(|l| l.clone()).unwrap_or_default();
            let node_ok = l.iter().any(
                |o| matches!(o, Obs::Node { name, rv, .. } if name == MARKER && *rv >= want_node),
            );
            let bn_ok = l.iter().any(
                |o| matches!(o, Obs::Bootc { name, rv, .. } if name == MARKER && *rv >= want_bn),
            );
            node_ok && bn_ok
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            loop {
                let notified = self.seen.notified();
                if caught_up() {
                    return;
                }
                notified.await;
            }
        })
        .await
        .map_err(|_| anyhow::anyhow!("recorder did not catch up within 60s"))
    }

    /// Replays everything seen so far in resourceVersion order and returns
    /// the moment with the most disrupted nodes among `nodes` (all nodes when
    /// empty). Nodes in `admin_cordoned` were cordoned by the test itself:
    /// their cordon alone does not count.
    pub fn peak(&self, nodes: &BTreeSet<String>, admin_cordoned: &BTreeSet<String>) -> Peak {
        let mut log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        log.sort_by_key(Obs::rv);
        let mut cordoned: BTreeMap<String, bool> = BTreeMap::new();
        let mut held: BTreeMap<String, bool> = BTreeMap::new();
        let mut peak = Peak::default();
        for obs in &log {
            match obs {
                Obs::Node {
                    name,
                    cordoned: c,
                    deleted,
                    ..
                } => {
                    cordoned.insert(
                        name.clone(),
                        *c && !*deleted && !admin_cordoned.contains(name),
                    );
                }
                Obs::Bootc {
                    name,
                    slot,
                    approved,
                    deleted,
                    ..
                } => {
                    held.insert(name.clone(), (*slot || *approved) && !*deleted);
                }
            }
            let now: BTreeSet<String> = cordoned
                .iter()
                .chain(held.iter())
                .filter(|(n, v)| **v && (nodes.is_empty() || nodes.contains(*n)))
                .map(|(n, _)| n.clone())
                .collect();
            if now.len() > peak.count {
                peak = Peak {
                    count: now.len(),
                    nodes: now,
                    resource_version: obs.rv(),
                };
            }
        }
        peak
    }

    /// The observations up to `rv` (the last `n`), for failure messages.
    pub fn timeline(&self, rv: u64, n: usize) -> String {
        let mut log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        log.sort_by_key(Obs::rv);
        let upto: Vec<String> = log
            .iter()
            .filter(|o| o.rv() <= rv)
            .map(|o| format!("{o:?}"))
            .collect();
        upto[upto.len().saturating_sub(n)..].join("\n")
    }

    /// Every approval to boot (a BootcNode going from not approved to
    /// approved), in order: a node rebooted twice appears twice.
    pub fn approvals(&self) -> Vec<String> {
        let mut log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        log.sort_by_key(Obs::rv);
        let mut state: BTreeMap<String, bool> = BTreeMap::new();
        let mut out = Vec::new();
        for obs in log {
            if let Obs::Bootc {
                name,
                approved,
                deleted,
                ..
            } = obs
            {
                let now = approved && !deleted;
                let before = state.insert(name.clone(), now).unwrap_or(false);
                if now && !before {
                    out.push(name);
                }
            }
        }
        out
    }
}
