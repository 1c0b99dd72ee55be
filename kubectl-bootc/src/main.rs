//! `kubectl-bootc`: a kubectl plugin (`kubectl bootc ...` once on PATH).
//! The I/O around the pure text of the library: read the objects, make the
//! one write a command needs, print.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write as _;
use std::process::ExitCode;

use api::labels::{CLUSTER_EVENTS_NAMESPACE, RETRY_ANNOTATION};
use api::{BootcNode, BootcNodePool};
use clap::{Parser, Subcommand};
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kubectl_bootc::Snapshot;

/// The field manager of the plugin's writes.
const MANAGER: &str = "kubectl-bootc";

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-bootc",
    bin_name = "kubectl bootc",
    version,
    about = "bootc-operator rollouts: status, pause/resume, retry, history, why, plan",
    long_about = "bootc-operator rollouts at a glance. Uses KUBECONFIG (or ~/.kube/config) \
                  like kubectl; installed on PATH it runs as `kubectl bootc`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The rollout at a glance: nodes, phases, slots, what blocks progress.
    Status {
        /// One pool (default: every pool).
        pool: Option<String>,
    },
    /// Hand out no new reboot slot (spec.rollout.paused: true).
    Pause { pool: String },
    /// Hand out reboot slots again (spec.rollout.paused: false).
    Resume { pool: String },
    /// Try again a node whose reboot failed (approved to boot and
    /// Degraded), or a pool's image that failed its health gate.
    Retry {
        /// A node, or a pool.
        node: String,
    },
    /// The pool's rollouts (its status and Events), or a node's updates.
    History {
        /// A pool, or a node.
        pool: String,
    },
    /// Why a node is not updating.
    Why { node: String },
    /// The rollout ahead, wave by wave, by the controller's planner
    /// (writes nothing).
    Plan {
        pool: String,
        /// Preview this image (`repository@sha256:...`) instead of the
        /// pool's target.
        #[arg(long)]
        image: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("connecting to the cluster (KUBECONFIG): {0}")]
    Connect(#[source] kube::Error),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("no BootcNodePool named {0}")]
    NoPool(String),
    #[error("{0}")]
    Refused(String),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

async fn list<K>(api: Api<K>, what: &str) -> Result<Vec<K>, Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!("listing {what}")))?
        .items)
}

async fn snapshot(client: &kube::Client) -> Result<Snapshot, Error> {
    let events: Api<Event> = Api::namespaced(client.clone(), CLUSTER_EVENTS_NAMESPACE);
    let pool_events = events
        .list(
            &ListParams::default()
                .fields(&format!("involvedObject.kind={}", BootcNodePool::kind(&()))),
        )
        .await
        .map_err(api_error("listing the pools' Events"))?
        .items;
    let pools = list(Api::<BootcNodePool>::all(client.clone()), "BootcNodePools").await?;
    let (pods, namespaces) = blocking_pods(client, &pools).await?;
    Ok(Snapshot {
        pools,
        bootc_nodes: list(Api::<BootcNode>::all(client.clone()), "BootcNodes").await?,
        nodes: list(Api::<Node>::all(client.clone()), "Nodes").await?,
        events: pool_events,
        pods,
        namespaces,
    })
}

/// The pods the pools' `spec.disruption.blockingPods` and `spec.health.pods`
/// select (bound to a node and not finished, as the controller lists them),
/// and the namespaces when one has a namespace selector; nothing for pools
/// without.
async fn blocking_pods(
    client: &kube::Client,
    pools: &[BootcNodePool],
) -> Result<(Vec<Pod>, Vec<Namespace>), Error> {
    let specs: Vec<&api::BlockingPods> = pools
        .iter()
        .filter_map(|p| p.spec.disruption.blocking_pods.as_ref())
        .collect();
    let mut pods = Vec::new();
    for spec in &specs {
        // A selector that cannot be read is reported by `why` itself.
        let Ok(selector) = rollout::gates::pod_selector(spec) else {
            continue;
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields(rollout::gates::RUNNING_ON_A_NODE);
        let listed = Api::<Pod>::all(client.clone())
            .list(&params)
            .await
            .map_err(api_error(format!("listing the pods {selector}")))?;
        pods.extend(listed.items);
    }
    for (spec, entry) in pools
        .iter()
        .filter_map(|p| p.spec.health.as_ref())
        .flat_map(|h| h.pods.iter().zip(0..))
    {
        let Ok(selector) = rollout::gates::health_pod_selector(spec, entry) else {
            continue;
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields(rollout::gates::RUNNING_ON_A_NODE);
        let listed = Api::<Pod>::namespaced(client.clone(), &spec.namespace)
            .list(&params)
            .await
            .map_err(api_error(format!(
                "listing the pods {selector} in {}",
                spec.namespace
            )))?;
        pods.extend(listed.items);
    }
    let namespaces = if specs.iter().any(|s| s.namespace_selector.is_some()) {
        list(Api::<Namespace>::all(client.clone()), "Namespaces").await?
    } else {
        Vec::new()
    };
    Ok((pods, namespaces))
}

async fn set_paused(client: &kube::Client, pool: &str, paused: bool) -> Result<String, Error> {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let body = serde_json::json!({"spec": {"rollout": {"paused": paused}}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match pools.patch(pool, &params, &Patch::Merge(&body)).await {
        Ok(_) => Ok(if paused {
            format!(
                "pool {pool} paused: no new reboot slot is handed out (slots already held are kept; staging goes on)\n"
            )
        } else {
            format!("pool {pool} resumed: reboot slots are handed out again\n")
        }),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(Error::NoPool(pool.to_owned())),
        Err(e) => Err(api_error(format!("patching pool {pool}"))(e)),
    }
}

async fn retry(client: &kube::Client, node: &str) -> Result<String, Error> {
    let snap = snapshot(client).await?;
    let now = jiff::Timestamp::now();
    if let Some(pool) = snap.pool(node) {
        return retry_pool(client, pool, now).await;
    }
    if let Some(refusal) = kubectl_bootc::retry_refusal(&snap, node, now) {
        return Err(Error::Refused(refusal));
    }
    let bns: Api<BootcNode> = Api::all(client.clone());
    let body =
        serde_json::json!({"metadata": {"annotations": {RETRY_ANNOTATION: now.to_string()}}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    };
    bns.patch(node, &params, &Patch::Merge(&body))
        .await
        .map_err(api_error(format!("annotating BootcNode {node}")))?;
    Ok(format!(
        "retry requested for {node}: the controller withdraws its approval; the node stages \
         the target again and is approved again in its reboot slot\n"
    ))
}

/// A pool's retry of its failed image (`bootc.dev/retry` on the pool).
async fn retry_pool(
    client: &kube::Client,
    pool: &BootcNodePool,
    now: jiff::Timestamp,
) -> Result<String, Error> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    if let Some(refusal) = kubectl_bootc::pool_retry_refusal(pool) {
        return Err(Error::Refused(refusal));
    }
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let body =
        serde_json::json!({"metadata": {"annotations": {RETRY_ANNOTATION: now.to_string()}}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    };
    pools
        .patch(&name, &params, &Patch::Merge(&body))
        .await
        .map_err(api_error(format!("annotating pool {name}")))?;
    Ok(format!(
        "retry requested for pool {name}: the controller clears its failed image and the nodes' \
         marks; the image is given again, each node judged again by its health gate\n"
    ))
}

async fn run(cli: Cli) -> Result<String, Error> {
    let client = kube::Client::try_default().await.map_err(Error::Connect)?;
    let now = jiff::Timestamp::now();
    match cli.command {
        Command::Status { pool } => {
            let snap = snapshot(&client).await?;
            Ok(kubectl_bootc::status(&snap, pool.as_deref(), now))
        }
        Command::Pause { pool } => set_paused(&client, &pool, true).await,
        Command::Resume { pool } => set_paused(&client, &pool, false).await,
        Command::Retry { node } => retry(&client, &node).await,
        Command::History { pool } => {
            let snap = snapshot(&client).await?;
            if snap.pool(&pool).is_none() && snap.bootc_node(&pool).is_none() {
                return Err(Error::NoPool(pool));
            }
            Ok(kubectl_bootc::history(&snap, &pool))
        }
        Command::Plan { pool, image } => {
            let snap = snapshot(&client).await?;
            kubectl_bootc::plan(&snap, &pool, image.as_deref(), now).map_err(Error::Refused)
        }
        Command::Why { node } => {
            let snap = snapshot(&client).await?;
            let lines = kubectl_bootc::why(&snap, &node, now);
            Ok(lines.iter().map(|l| format!("{l}\n")).collect())
        }
    }
}

/// The error as printed: an API server's message may quote what a
/// pool writer or a node wrote.
fn report(e: &Error) -> String {
    kubectl_bootc::shown(format!("kubectl bootc: {e}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(cli).await.and_then(|text| {
        std::io::stdout().lock().write_all(text.as_bytes())?;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "{}", report(&e));
            match e {
                Error::Refused(_) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_printed_with_its_control_characters_escaped() {
        let e = Error::Refused("n1 does not await a retry: \u{1b}]0;OWNED\u{7}\u{1b}[2K".into());
        assert_eq!(
            report(&e),
            "kubectl bootc: n1 does not await a retry: \\u{1b}]0;OWNED\\u{7}\\u{1b}[2K"
        );
    }
}
