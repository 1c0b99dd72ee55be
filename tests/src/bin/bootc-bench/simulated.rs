//! The simulated cluster's rollout the api and rss sections measure.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use api::BootcNodePool;
use api::Node;
use kube::api::Api;
use serde_json::json;
use tests::k8s;
use tests::sim::{POOL, Sim, SimOptions};

use crate::api_requests::{Counts, audit_len, audit_slice};
use crate::rss::{AgentMemory, merge, sample_agents};

fn rolled_to(pool: &BootcNodePool, digest: &str, nodes: usize) -> bool {
    pool.status.as_ref().is_some_and(|s| {
        s.deployed_digest.as_deref() == Some(digest)
            && usize::try_from(s.updated_count).ok() == Some(nodes)
            && usize::try_from(s.node_count).ok() == Some(nodes)
    })
}

/// Waits until the pool's status says no node holds a reboot slot: the last
/// release is written (a count-only change, coalesced for up to 5 s).
async fn wait_settled(admin: &kube::Client, timeout: Duration) -> Result<()> {
    k8s::wait_for(
        Api::<BootcNodePool>::all(admin.clone()),
        POOL,
        timeout,
        "no reboot slots in the pool's status",
        |p: Option<&BootcNodePool>| {
            p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                api::conditions::message(&s.conditions, api::ConditionType::UpToDate)
                    .is_some_and(|m| !m.contains("in reboot slots"))
            })
        },
    )
    .await?;
    Ok(())
}

pub(crate) async fn wait_rolled(
    admin: &kube::Client,
    digest: &str,
    nodes: usize,
    timeout: Duration,
) -> Result<()> {
    let digest = digest.to_owned();
    k8s::wait_for(
        Api::<BootcNodePool>::all(admin.clone()),
        POOL,
        timeout,
        "the rollout",
        move |p: Option<&BootcNodePool>| p.is_some_and(|p| rolled_to(p, &digest, nodes)),
    )
    .await?;
    Ok(())
}

/// Waits until no Node holds a reboot slot and the pool's
/// `RolloutComplete` event for `image` is published: the last writes of a
/// rollout land just after the status that shows it complete. Polled: the
/// benchmark only needs the end, not each step.
pub(crate) async fn wait_released(
    admin: &kube::Client,
    image: &str,
    timeout: Duration,
) -> Result<()> {
    use k8s_openapi::api::events::v1::Event;
    let nodes = Api::<Node>::all(admin.clone());
    let events = Api::<Event>::namespaced(admin.clone(), api::labels::CLUSTER_EVENTS_NAMESPACE);
    let deadline = Instant::now() + timeout;
    loop {
        let slotted = nodes
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|n| api::node_health::disrupted_by(n).is_some())
            .count();
        let complete = events
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some(api::event_reasons::ROLLOUT_COMPLETE)
                    && e.note.as_deref().is_some_and(|n| n.ends_with(image))
            });
        if slotted == 0 && complete {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{slotted} BootcNodes still in reboot slots, RolloutComplete published: {complete}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub(crate) struct RolloutResult {
    pub(crate) update: Counts,
    pub(crate) idle: Counts,
    pub(crate) daemon_starts: usize,
    pub(crate) rollout_seconds: f64,
    /// Highest VmHWM of any daemon / helper sampled during the rollout.
    pub(crate) during: AgentMemory,
    /// VmRSS / VmHWM at the end of the idle period.
    pub(crate) steady: AgentMemory,
}

/// Starts a simulated cluster, rolls v1 -> v2, waits `idle`, and measures;
/// with `lifecycle`, the controller sets the Node lifecycle conditions.
pub(crate) async fn sim_rollout(
    nodes: usize,
    audit: bool,
    idle: Duration,
    bin_dir: Option<PathBuf>,
    lifecycle: bool,
) -> Result<RolloutResult> {
    let options = SimOptions {
        nodes,
        max_unavailable: json!(1),
        audit,
        agent_bin_dir: bin_dir,
        node_lifecycle_conditions: lifecycle,
        ..SimOptions::default()
    };
    let mut sim = Sim::start(options)
        .await
        .context("starting the simulated cluster")?;
    let v1 = sim.push_version("1.0").await?;
    sim.add_nodes(nodes, &v1).await?;
    sim.create_pool().await?;
    sim.start_kubelet();
    wait_rolled(&sim.admin, &v1, nodes, Duration::from_secs(120))
        .await
        .context("every node on v1")?;
    // Let the first status writes settle before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let audit_path = sim.cp.audit_log();
    let a = audit_len(&audit_path);
    let reboots_before: usize = {
        let all = sim.nodes.lock().await;
        all.iter().map(|n| n.host.layout.read_reboots().len()).sum()
    };
    let started = Instant::now();
    let v2 = sim.push_version("2.0").await?;
    let mut during = AgentMemory::default();
    let admin = sim.admin.clone();
    let wait = wait_rolled(
        &admin,
        &v2,
        nodes,
        Duration::from_secs(120 + 30 * nodes as u64),
    );
    tokio::pin!(wait);
    loop {
        tokio::select! {
            r = &mut wait => { r.context("the rollout to v2")?; break; }
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                during = merge(during, sample_agents(&sim).await);
            }
        }
    }
    let rollout_seconds = started.elapsed().as_secs_f64();
    wait_settled(&admin, Duration::from_secs(60)).await?;
    // The last daemons restarted after their reboot report once more.
    tokio::time::sleep(Duration::from_secs(5)).await;
    during = merge(during, sample_agents(&sim).await);
    let b = audit_len(&audit_path);
    tokio::time::sleep(idle).await;
    let c = audit_len(&audit_path);
    let steady = sample_agents(&sim).await;
    let reboots_after: usize = {
        let all = sim.nodes.lock().await;
        all.iter().map(|n| n.host.layout.read_reboots().len()).sum()
    };
    let (update, idle_counts) = if audit {
        (
            Counts::parse(&audit_slice(&audit_path, a, b)?),
            Counts::parse(&audit_slice(&audit_path, b, c)?),
        )
    } else {
        (Counts::default(), Counts::default())
    };
    sim.kill_controller();
    Ok(RolloutResult {
        update,
        idle: idle_counts,
        daemon_starts: reboots_after - reboots_before,
        rollout_seconds,
        during,
        steady,
    })
}
