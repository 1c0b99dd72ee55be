//! `kubectl-bootc`: a kubectl plugin (`kubectl bootc ...` once on PATH).
//! The I/O around the pure text of the library: read the objects, make the
//! one write a command needs, print.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write as _;
use std::process::ExitCode;

use api::Node;
use api::labels::{CLUSTER_EVENTS_NAMESPACE, RETRY_ANNOTATION};
use api::{BootcNode, BootcNodePool};
use clap::Parser;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::config::{Config, Kubeconfig};
use kubectl_bootc::cli::{Cli, ClusterFlags, Command, Error, Format, Source, exit_code};
use kubectl_bootc::{Snapshot, lookup, output};

/// The field manager of the plugin's writes.
const MANAGER: &str = "kubectl-bootc";

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
    let (pods, mut namespaces) = blocking_pods(client, &pools).await?;
    operator_namespace(client, &mut namespaces).await;
    Ok(Snapshot {
        pools,
        bootc_nodes: list(Api::<BootcNode>::all(client.clone()), "BootcNodes").await?,
        nodes: list(Api::<Node>::all(client.clone()), "Nodes").await?,
        events: pool_events,
        pods,
        namespaces,
    })
}

/// Adds the operator's Namespace, which carries the fleet's switch, when
/// not listed already. Best effort: a user who may not read it still gets
/// every other answer.
async fn operator_namespace(client: &kube::Client, namespaces: &mut Vec<Namespace>) {
    let name = api::labels::OPERATOR_NAMESPACE;
    if namespaces
        .iter()
        .any(|ns| ns.metadata.name.as_deref() == Some(name))
    {
        return;
    }
    if let Ok(Some(ns)) = Api::<Namespace>::all(client.clone()).get_opt(name).await {
        namespaces.push(ns);
    }
}

/// The pods the pools' `spec.disruption.blockingPods` and `spec.health.pods`
/// select (bound to a node and not finished, as the controller lists them),
/// the daemon's pods, and the namespaces when one has a namespace
/// selector.
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
        let Ok(selector) = rollout::holds::gates::pod_selector(spec) else {
            continue;
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields(rollout::holds::gates::RUNNING_ON_A_NODE);
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
        let Ok(selector) = rollout::holds::gates::health_pod_selector(spec, entry) else {
            continue;
        };
        let params = ListParams::default()
            .labels_from(&selector)
            .fields(rollout::holds::gates::RUNNING_ON_A_NODE);
        let listed = Api::<Pod>::namespaced(client.clone(), &spec.namespace)
            .list(&params)
            .await
            .map_err(api_error(format!(
                "listing the pods {selector} in {}",
                spec.namespace
            )))?;
        pods.extend(listed.items);
    }
    // The daemon's pods: a member whose daemon cannot run says why. Best
    // effort: a user who may not list pods still gets every other answer.
    let daemons = format!(
        "{}={}",
        api::labels::APP_NAME_LABEL,
        api::labels::DAEMON_APP_NAME
    );
    if let Ok(listed) = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels(&daemons))
        .await
    {
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
        Err(kube::Error::Api(s)) if s.code == 404 => Err(lookup::Missing::pool(pool).into()),
        Err(e) => Err(api_error(format!("patching pool {pool}"))(e)),
    }
}

/// Turns the fleet's switch on (`why`, holding approvals too or not) or
/// off: the annotations [`api::labels::FLEET_STOP_ANNOTATION`] and
/// [`api::labels::FLEET_STOP_BEFORE_APPROVAL_ANNOTATION`] on the operator's
/// Namespace, in one write (off removes both).
async fn set_fleet_stop(
    client: &kube::Client,
    namespace: &str,
    why: Option<String>,
    before_approval: bool,
) -> Result<String, Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let stopping = why.is_some();
    let holds = (stopping && before_approval).then_some("true");
    let body = serde_json::json!({"metadata": {"annotations": {
        api::labels::FLEET_STOP_ANNOTATION: why,
        api::labels::FLEET_STOP_BEFORE_APPROVAL_ANNOTATION: holds,
    }}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match namespaces.patch(namespace, &params, &Patch::Merge(&body)).await {
        Ok(_) if holds.is_some() => Ok("fleet stopped: no pool hands out a new reboot slot or approves a node to boot until `kubectl bootc resume --all` (nodes in slots wait cordoned; those already approved finish; staging goes on)\n".to_owned()),
        Ok(_) if stopping => Ok("fleet stopped: no pool hands out a new reboot slot until `kubectl bootc resume --all` (nodes in slots finish; staging goes on)\n".to_owned()),
        Ok(_) => Ok("fleet resumed: pools hand out reboot slots again (pools paused one by one stay paused)\n".to_owned()),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(Error::Refused(format!(
            "namespace {namespace} not found: the fleet's switch lives on the operator's namespace (-n NAMESPACE)"
        ))),
        Err(e) => Err(api_error(format!("patching namespace {namespace}"))(e)),
    }
}

/// Asks the controller to resolve the pool's tag now
/// ([`api::labels::REFRESH_ANNOTATION`], the value when).
async fn refresh(client: &kube::Client, pool: &str) -> Result<String, Error> {
    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let found = match pools.get(pool).await {
        Ok(found) => found,
        Err(kube::Error::Api(s)) if s.code == 404 => return Err(lookup::Missing::pool(pool).into()),
        Err(e) => return Err(api_error(format!("reading pool {pool}"))(e)),
    };
    if let Some(refusal) = kubectl_bootc::refresh_refusal(&found) {
        return Err(Error::Refused(refusal));
    }
    let now = jiff::Timestamp::now().to_string();
    let body =
        serde_json::json!({"metadata": {"annotations": {api::labels::REFRESH_ANNOTATION: now}}});
    let params = PatchParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PatchParams::default()
    };
    pools
        .patch(pool, &params, &Patch::Merge(&body))
        .await
        .map_err(api_error(format!("patching pool {pool}")))?;
    Ok(format!(
        "pool {pool}: the controller resolves {} now; `kubectl bootc status {pool}` shows the target\n",
        found.spec.image.reference
    ))
}

async fn retry(client: &kube::Client, node: &str) -> Result<String, Error> {
    let snap = snapshot(client).await?;
    lookup::pool_or_node(&snap, node)?;
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

/// A client as kubectl would connect with the flags (see
/// [`ClusterFlags::source`]).
async fn client(flags: &ClusterFlags) -> Result<kube::Client, Error> {
    let source = flags.source();
    let connect = |e: Box<dyn std::error::Error + Send + Sync>| Error::Connect {
        flags: source.describe(),
        source: e,
    };
    let config = match source {
        Source::Inferred => Config::infer().await.map_err(|e| connect(e.into()))?,
        Source::Context(_) => Config::from_kubeconfig(&flags.options())
            .await
            .map_err(|e| connect(e.into()))?,
        Source::File { path, .. } => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| connect(e.into()))?;
            Config::from_custom_kubeconfig(kubeconfig, &flags.options())
                .await
                .map_err(|e| connect(e.into()))?
        }
    };
    kube::Client::try_from(config).map_err(|e| connect(e.into()))
}

/// The text, or the document in `format`.
fn shown<T: serde::Serialize>(
    format: Option<Format>,
    doc: impl FnOnce() -> T,
    text: impl FnOnce() -> String,
) -> Result<String, Error> {
    match format {
        Some(format) => output::render(&doc(), format),
        None => Ok(text()),
    }
}

async fn run(cli: Cli) -> Result<String, Error> {
    let client = client(&cli.cluster).await?;
    let now = jiff::Timestamp::now();
    match cli.command {
        Command::Status { pool, output } => {
            let snap = snapshot(&client).await?;
            let pools = match pool.as_deref() {
                Some(name) => vec![lookup::pool(&snap, name)?],
                None => snap.pools.iter().collect(),
            };
            shown(
                output.output,
                || output::status(&snap, &pools, now),
                || kubectl_bootc::status(&snap, pool.as_deref(), now),
            )
        }
        Command::Pause { pool } => set_paused(&client, &pool, true).await,
        Command::Resume {
            pool: Some(pool), ..
        } => set_paused(&client, &pool, false).await,
        Command::Resume { namespace, .. } => set_fleet_stop(&client, &namespace, None, false).await,
        Command::Stop {
            reason,
            namespace,
            before_approval,
            ..
        } => {
            let why = reason.unwrap_or_else(|| format!("kubectl bootc stop --all at {now}"));
            set_fleet_stop(&client, &namespace, Some(why), before_approval).await
        }
        Command::Refresh { pool } => refresh(&client, &pool).await,
        Command::Retry { node } => retry(&client, &node).await,
        Command::History { pool, output } => {
            let snap = snapshot(&client).await?;
            lookup::pool_or_node(&snap, &pool)?;
            shown(
                output.output,
                || output::history(&snap, &pool),
                || kubectl_bootc::history(&snap, &pool),
            )
        }
        Command::Plan {
            pool,
            image,
            namespace,
            output,
        } => {
            let snap = snapshot(&client).await?;
            let pool = lookup::pool(&snap, &pool)?;
            let planned =
                kubectl_bootc::plan::planned(&snap, pool, image.as_deref(), &namespace, now)
                    .map_err(Error::Refused)?;
            shown(
                output.output,
                || output::plan(pool, planned.clone()),
                || kubectl_bootc::plan::text(pool, &planned),
            )
        }
        Command::Why { node } => {
            let snap = snapshot(&client).await?;
            lookup::node(&snap, &node)?;
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
            ExitCode::from(exit_code(&e))
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
