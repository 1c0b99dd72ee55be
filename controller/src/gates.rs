//! The gates layer: what outside a pool's own objects may hold its new
//! reboot slots back, asked before the plan, which reads the answers
//! (`rollout::holds::gates`, where the rules are).
//!
//! * `spec.disruption.blockingPods`: the pods the selector matches, listed
//!   from the API server's watch cache with the selector and "bound, not
//!   finished" as the server's own selectors (one LIST across namespaces),
//!   and the namespaces the namespace selector matches (one more LIST).
//! * `spec.rollout.alertGate`: one instant query to the HTTP API of the
//!   Prometheus endpoint the pool names among the admin's
//!   (`--alert-gate-endpoint`), `ALERTS{alertstate="firing",<matchers>}`,
//!   under the rules of [`alerts`]; asked only for a pool that selects a
//!   node (one that selects none hands out no slot, so sends nothing).
//! * the daemon's pods, while a member's daemon has not answered its spec:
//!   one LIST by the daemon's label, kept like the blocking pods, so that a
//!   daemon that cannot run (crash-looping, its image not pulled) is named
//!   on the pool with the kubelet's reason (`rollout::holds::gates::daemon_pod_problems`).
//! * `spec.health.pods`: one LIST per entry in its namespace, with its
//!   selector, asked at every plan while a member holds a reboot slot (the
//!   health gate judges a node in its slot from them,
//!   `rollout::reboot::health_gate`), never kept: the plan requeues itself while a
//!   node settles, and the controller watches no pods.
//!
//! An answer is kept in the pool's state ([`GateMemory`]) for
//! [`GATE_RECHECK`], for the spec it answered: a pool reconciled often asks
//! each gate at most that often, and a pool that uses no gate asks nothing.
//! A gate that cannot be asked is an answer too (an error, which the plan
//! reads as "hold", fail closed).
//!
//! May import `rollout`, `api` and [`crate::metrics`]; never the runtime
//! above it, nor the actions or the target beside it.

pub mod alerts;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use api::{AlertGate, BlockingPods, BootcNodePool, HealthPods};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams};
use rollout::holds::gates::{GATE_RECHECK, Gates, PodSeen, RUNNING_ON_A_NODE};

/// Asks the gates: the API server for pods, Prometheus for alerts.
pub struct Gatekeeper {
    client: kube::Client,
    http: Result<reqwest::Client, String>,
    endpoints: alerts::AlertEndpoints,
}

/// What the gates ask of the pool's members, lazily (each asked only when
/// a gate needs it).
pub struct Members<S, D> {
    /// Does a member hold a reboot slot?
    pub in_slots: S,
    /// Has a member's daemon not answered its spec?
    pub silent: D,
}

/// The gates' last answers for one pool, with when and for which spec
/// they were given.
#[derive(Debug, Default)]
pub struct GateMemory {
    pods: Option<Kept<BTreeMap<String, String>>>,
    daemons: Option<Kept<BTreeMap<String, String>>>,
    alerts: Option<Kept<Vec<String>>>,
}

#[derive(Debug)]
struct Kept<T> {
    at: Instant,
    /// The gate's spec, as it was asked.
    spec: String,
    answer: Result<T, String>,
}

impl<T: Clone> Kept<T> {
    /// The answer kept in `kept` if it is for `spec` and recent enough;
    /// else `asking`'s, kept in its place.
    async fn or_ask(
        kept: &mut Option<Self>,
        spec: String,
        asking: impl Future<Output = Result<T, String>>,
    ) -> Result<T, String> {
        if let Some(k) = kept.as_ref()
            && k.spec == spec
            && k.at.elapsed() < GATE_RECHECK
        {
            return k.answer.clone();
        }
        let answer = asking.await;
        *kept = Some(Kept {
            at: Instant::now(),
            spec,
            answer: answer.clone(),
        });
        answer
    }
}

impl Gatekeeper {
    /// Asks the API server with `client`, and the alert gates' `endpoints`.
    pub fn new(client: kube::Client, endpoints: alerts::AlertEndpoints) -> Self {
        Gatekeeper {
            client,
            http: alerts::http_client(),
            endpoints,
        }
    }

    /// What the pool's gates say now (the kept answers while fresh);
    /// `members.in_slots` tells whether a member holds a reboot slot,
    /// `members.silent` whether a member's daemon has not answered its
    /// spec, `selects` whether the pool selects any node.
    #[tracing::instrument(name = "gates", skip_all)]
    pub async fn ask(
        &self,
        pool: &BootcNodePool,
        memory: &mut GateMemory,
        members: Members<impl FnOnce() -> bool, impl FnOnce() -> bool>,
        selects: bool,
    ) -> Gates {
        let Members { in_slots, silent } = members;
        let mut gates = Gates::default();
        if silent() {
            let asking = self.daemon_pods();
            gates.daemon_pods = Kept::or_ask(&mut memory.daemons, String::new(), asking).await;
        }
        if let Some(health) = &pool.spec.health
            && !health.pods.is_empty()
            && in_slots()
        {
            gates.health_pods = self.health_pods(&health.pods).await;
        }
        if let Some(spec) = &pool.spec.disruption.blocking_pods {
            let asking = self.blocking_pods(spec);
            gates.blocking_pods = Kept::or_ask(&mut memory.pods, format!("{spec:?}"), asking).await;
        }
        if let Some(gate) = pool.spec.rollout.alert_gate.as_ref().filter(|_| selects) {
            let asking = self.firing(gate);
            gates.alerts = Kept::or_ask(&mut memory.alerts, format!("{gate:?}"), asking).await;
        }
        gates
    }

    /// The daemon pods that cannot run, by node: one LIST across
    /// namespaces by the daemon's label (the controller does not know the
    /// daemon's namespace), from the API server's watch cache.
    async fn daemon_pods(&self) -> Result<BTreeMap<String, String>, String> {
        let selector = format!(
            "{}={}",
            api::labels::APP_NAME_LABEL,
            api::labels::DAEMON_APP_NAME
        );
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&ListParams::default().labels(&selector).match_any())
            .await
            .map_err(|e| format!("listing the daemon pods {selector}: {e}"))?;
        Ok(rollout::holds::gates::daemon_pod_problems(&pods.items))
    }

    /// The nodes that run a pod of `spec`, each with the first one.
    async fn blocking_pods(&self, spec: &BlockingPods) -> Result<BTreeMap<String, String>, String> {
        let selector = rollout::holds::gates::pod_selector(spec)?;
        let namespaces = match rollout::holds::gates::namespace_selector(spec)? {
            None => None,
            Some(selector) => Some(self.namespaces(&selector).await?),
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields(RUNNING_ON_A_NODE)
            .match_any();
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(|e| format!("listing the pods {selector}: {e}"))?;
        rollout::holds::gates::blocking_pods(spec, &pods.items, namespaces.as_ref())
    }

    /// The pods of each entry of `spec.health.pods`, by their node.
    async fn health_pods(
        &self,
        entries: &[HealthPods],
    ) -> Result<BTreeMap<String, Vec<PodSeen>>, String> {
        let mut found = BTreeMap::new();
        for (entry, spec) in entries.iter().enumerate() {
            let selector = rollout::holds::gates::health_pod_selector(spec, entry)?;
            let params = ListParams::default()
                .labels_from(&selector)
                .fields(RUNNING_ON_A_NODE)
                .match_any();
            let pods = Api::<Pod>::namespaced(self.client.clone(), &spec.namespace)
                .list(&params)
                .await
                .map_err(|e| format!("listing the pods {selector} in {}: {e}", spec.namespace))?;
            rollout::holds::gates::health_pods(spec, entry, &pods.items, &mut found)?;
        }
        Ok(found)
    }

    /// The names of the namespaces `selector` matches.
    async fn namespaces(
        &self,
        selector: &kube::core::Selector,
    ) -> Result<BTreeSet<String>, String> {
        let params = ListParams::default().labels_from(selector).match_any();
        let list = Api::<Namespace>::all(self.client.clone())
            .list_metadata(&params)
            .await
            .map_err(|e| format!("listing the namespaces {selector}: {e}"))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect())
    }

    /// The firing alerts `gate` matches, described.
    async fn firing(&self, gate: &AlertGate) -> Result<Vec<String>, String> {
        let http = self.http.as_ref().map_err(Clone::clone)?;
        alerts::firing(http, gate, &self.endpoints).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members neither in slots nor silent.
    fn quiet() -> Members<impl FnOnce() -> bool, impl FnOnce() -> bool> {
        Members {
            in_slots: || false,
            silent: || false,
        }
    }

    /// A loopback server that counts the requests it is sent (answering
    /// none): the pool's Prometheus.
    async fn counting() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(conn);
            }
        });
        (url, count)
    }

    #[tokio::test]
    async fn a_pool_that_selects_no_node_sends_no_alert_query() {
        let (url, count) = counting().await;
        let endpoints = alerts::AlertEndpoints::parse([format!("main={url}").as_str()]).unwrap();
        // No API server: the alert gate is the only gate asked.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let keeper = Gatekeeper::new(kube::Client::try_from(config).unwrap(), endpoints);
        let pool: BootcNodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
            "metadata": {"name": "blind"},
            "spec": {"nodeSelector": {"matchLabels": {"none": "x"}},
                     "image": {"ref": "quay.io/acme/os:1"},
                     "rollout": {"alertGate": {"endpoint": "main"}}},
        }))
        .unwrap();
        let gates = keeper
            .ask(&pool, &mut GateMemory::default(), quiet(), false)
            .await;
        assert_eq!(gates.alerts, Ok(vec![]));
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 0);
        let gates = keeper
            .ask(&pool, &mut GateMemory::default(), quiet(), true)
            .await;
        assert!(gates.alerts.is_err(), "{:?}", gates.alerts);
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
