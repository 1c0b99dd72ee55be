//! Shared setup of the daemon loop's tests (`tests/tests/daemon_loop/`): a
//! control plane with the CRDs and the daemon's RBAC, the test's side of
//! the controller (BootcNode specs), and what the fake host, the daemon's
//! log and the API server's audit log say the daemon did. The helpers
//! panic with what they waited for: they are the tests' assertions.

use std::time::Duration;

use api::conditions;
use api::{BootcNode, BootcNodeSpec, ConditionType, DesiredImageState, RebootPolicy};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::fake_bootc::Invocation;
use crate::fake_host::FakeHost;
use crate::node_agent::{Agent, install_daemon_rbac};
use crate::{ControlPlane, control_plane, k8s};

/// How long any one step of a test may take.
pub const WAIT: Duration = Duration::from_secs(30);

/// A spec wanting `desired` staged, reboots only, no pull secret.
pub fn spec(desired: &str) -> BootcNodeSpec {
    BootcNodeSpec {
        desired_image: desired.into(),
        desired_image_state: DesiredImageState::Staged,
        reboot_policy: RebootPolicy::RebootOnly,
        pull_secret_ref: None,
        pull_secret_hash: None,
        staging_weights: None,
    }
}

/// The node's phase (the Idle condition's reason).
pub fn phase(bn: &BootcNode) -> Option<&str> {
    bn.status
        .as_ref()
        .and_then(|s| conditions::reason(&s.conditions, ConditionType::Idle))
}

/// The Degraded condition's message, when it is true.
pub fn degraded(bn: &BootcNode) -> Option<String> {
    bn.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, ConditionType::Degraded))
        .filter(|c| c.status == "True")
        .map(|c| c.message.to_string())
}

/// Waits until BootcNode `name` satisfies `cond`, and returns it.
pub async fn wait_bn(
    api: &Api<BootcNode>,
    name: &str,
    what: &str,
    cond: impl Fn(&BootcNode) -> bool,
) -> BootcNode {
    let found = k8s::wait_for(
        api.clone(),
        name,
        WAIT,
        what,
        move |o: Option<&BootcNode>| o.is_some_and(&cond),
    )
    .await;
    match found {
        Ok(Some(bn)) => bn,
        Ok(None) => panic!("BootcNode {name} gone while waiting for {what}"),
        Err(e) => panic!("{e}"),
    }
}

/// Merges `spec` into BootcNode `name`'s spec, as the controller would.
pub async fn patch_spec(api: &Api<BootcNode>, name: &str, spec: serde_json::Value) {
    let patch = Patch::Merge(json!({ "spec": spec }));
    if let Err(e) = api.patch(name, &PatchParams::default(), &patch).await {
        panic!("patching the spec of {name}: {e}");
    }
}

/// A control plane with the CRDs and the daemon's RBAC, its admin, and a
/// directory for the daemons' logs.
pub struct World {
    pub cp: ControlPlane,
    pub admin: kube::Client,
    pub nodes: Api<BootcNode>,
    pub logs: tempfile::TempDir,
}

pub async fn world() -> World {
    world_with(control_plane::Options::default()).await
}

pub async fn world_with(options: control_plane::Options) -> World {
    match try_world(options).await {
        Ok(w) => w,
        Err(e) => panic!("setting up the control plane: {e:#}"),
    }
}

async fn try_world(options: control_plane::Options) -> anyhow::Result<World> {
    let cp = ControlPlane::start_with(options).await?;
    let admin = cp.admin().await?;
    k8s::install_crds(&admin).await?;
    install_daemon_rbac(&cp)?;
    let nodes = Api::all(admin.clone());
    Ok(World {
        cp,
        admin,
        nodes,
        logs: tempfile::tempdir()?,
    })
}

/// Waits until the fake host records a (simulated) reboot. The reboot is a
/// file the fake bootc appends to: poll it.
pub async fn wait_for_reboot(host: &FakeHost, what: impl Fn() -> String) {
    let deadline = std::time::Instant::now() + WAIT;
    while host.layout.read_reboots().is_empty() {
        assert!(std::time::Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The fake bootc's staging runs (`switch` without `--apply`).
pub fn stages(host: &FakeHost) -> Vec<Invocation> {
    host.layout
        .read_invocations()
        .into_iter()
        .filter(|i| {
            i.argv.first().is_some_and(|a| a == "switch")
                && !i.argv.iter().any(|a| a == "--help" || a == "--apply")
        })
        .collect()
}

/// The fake bootc's apply runs.
pub fn applies(host: &FakeHost) -> Vec<Invocation> {
    host.layout
        .read_invocations()
        .into_iter()
        .filter(|i| i.argv.iter().any(|a| a == "--apply"))
        .collect()
}

/// The phases of the daemon's "status written" log lines, in order.
pub fn written_phases(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("status written"))
        .filter_map(|l| l.split("phase=").nth(1))
        .filter_map(|rest| {
            rest.trim_start_matches('"')
                .split(['"', ' '])
                .next()
                .map(str::to_owned)
        })
        .collect()
}

/// The agent's log and the phases it wrote, once it logged at least `n`
/// writes (or after [`WAIT`]). The daemon logs a write once the API server
/// answered it, which may be after the test saw it: wait for the lines.
pub async fn wait_written_phases(agent: &Agent, n: usize) -> (String, Vec<String>) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let log = agent.log_text();
        let phases = written_phases(&log);
        if phases.len() >= n || std::time::Instant::now() > deadline {
            return (log, phases);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `verb uri` of every request the daemon's identity made (one entry per
/// request: its RequestReceived stage), from the audit log.
pub fn daemon_requests(cp: &ControlPlane) -> Vec<String> {
    cp.audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == control_plane::DAEMON_USER)
        .filter(|e| e["stage"] == "RequestReceived")
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap_or(""),
                e["requestURI"].as_str().unwrap_or("")
            )
        })
        .collect()
}
