//! Small helpers for setting up the world in tests.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use api::BootcNodePool;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};

/// Creates the CRDs generated from the Rust types and waits until both are
/// established.
pub async fn install_crds(client: &kube::Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, yaml) in api::crd_yaml()? {
        let crd: CustomResourceDefinition = serde_yaml::from_str(&yaml)?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &crd)
            .await
            .with_context(|| format!("creating CRD {name}"))?;
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .with_context(|| format!("CRD {name} not established in 30s"))??;
    }
    Ok(())
}

/// The pool's condition of `type_`: (status, reason, message).
pub fn condition(p: &BootcNodePool, type_: api::ConditionType) -> Option<(String, String, String)> {
    let s = p.status.as_ref()?;
    api::conditions::find(&s.conditions, type_).map(|c| {
        (
            c.status.to_string(),
            c.reason.to_string(),
            c.message.to_string(),
        )
    })
}

/// The kubelet's condition type for a Pod that is ready (Kubernetes' word,
/// not the operator's vocabulary).
const POD_READY: &str = "Ready";

/// Creates `pod` and plays the kubelet's part: the pod runs and is Ready (a
/// Pending pod ignores PodDisruptionBudgets).
pub async fn create_running_pod(pods: &Api<Pod>, pod: &Pod) -> Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    pods.create(&PostParams::default(), pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    let running = serde_json::json!({"status": {"phase": "Running", "conditions": [
        {"type": POD_READY, "status": "True"}]}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(running))
        .await
        .with_context(|| format!("marking pod {name} running"))?;
    Ok(())
}

/// The name of [`guarded_pod_on`]'s pod, of its app label and of its
/// budget (delete the budget by it to let the drain go on).
pub const GUARDED: &str = "web";

/// A Ready pod on `node` in `default` that a PodDisruptionBudget
/// (`minAvailable: 1`) guards, both named [`GUARDED`]. The simulated
/// cluster runs no disruption controller, so the API server refuses every
/// eviction under the budget ("still being processed") until it is deleted:
/// the node's drain waits for as long as a test needs.
pub async fn guarded_pod_on(client: &kube::Client, node: &str) -> Result<()> {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let labels = serde_json::json!({"app": GUARDED});
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": GUARDED, "labels": labels},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": GUARDED, "image": "example.invalid/web:1"}]},
    }))?;
    create_running_pod(&Api::namespaced(client.clone(), "default"), &pod).await?;
    let budget: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": GUARDED},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }))?;
    Api::<PodDisruptionBudget>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &budget)
        .await
        .context("creating the PodDisruptionBudget")?;
    Ok(())
}

/// Waits until `api`'s object `name` satisfies `cond`, up to `timeout`.
/// Event-driven: a watch, not a poll.
pub async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    timeout: Duration,
    what: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let fut = await_condition(api, name, move |obj: Option<&K>| cond(obj));
    let obj = tokio::time::timeout(timeout, fut)
        .await
        .with_context(|| format!("timed out after {timeout:?} waiting for {what} on {name}"))??;
    Ok(obj)
}

/// Collects every event of a watch stream until `stop` (used by recorders).
pub async fn drain_stream<S, T>(stream: S) -> Result<Vec<T>>
where
    S: futures::Stream<Item = Result<T, kube::runtime::watcher::Error>>,
{
    Ok(stream.try_collect().await?)
}

/// The error of a write that must be refused, polled until the policy is
/// in force: a policy takes effect a moment after it is created, and no
/// event tells when. `write` is given the attempt's number, and a write
/// that a policy judges by what it changes must change something new each
/// time: one that slipped through before the policy was in force has made
/// its change, and the same write again would change nothing, which such a
/// policy allows (a 30 s wait that then failed, seen once on 1.34).
pub async fn refused<F, Fut>(what: &str, write: F) -> String
where
    F: Fn(u32) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    for attempt in 0.. {
        match write(attempt).await {
            Err(kube::Error::Api(status)) if status.code == 403 || status.code == 422 => {
                return status.message;
            }
            other => assert!(
                Instant::now() < deadline,
                "{what} was not refused: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    unreachable!("the attempts never end")
}

/// The nodes that hold a reboot slot, as the cluster shows it: their Node
/// carries a slot's record (`bootc.dev/disrupted-by`, written with the
/// cordon).
pub async fn slot_holders(client: &kube::Client) -> Result<std::collections::BTreeSet<String>> {
    use api::Node;
    let nodes = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .context("listing Nodes")?;
    Ok(nodes
        .items
        .iter()
        .filter(|n| api::node_health::disrupted_by(n).is_some())
        .filter_map(|n| n.metadata.name.clone())
        .collect())
}
