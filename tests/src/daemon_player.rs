//! A stand-in for the node daemons and the kubelet, for controller tests and
//! benchmarks: one watch on every BootcNode, and per node the daemon's own
//! state machine ([`daemon::agent::machine::decide`]) run against a simulated host
//! (what `bootc status` would report: the booted and staged images and a
//! boot id; staging and reboots are instant). The status written is the one
//! the daemon builds ([`daemon::agent::machine::status_to_write`]), written as the
//! daemon writes it (server-side apply), when the daemon would write it
//! ([`daemon::agent::machine::worth_writing`]): one write per step of the cycle.
//!
//! ```text
//! (no status)                  -> the host boots the initial image
//! desiredImage != booted       -> (the instant pull: staged = desired)
//!                              -> Staged
//! desiredImageState == Booted  -> Node NotReady, Rebooting (then the reboot)
//!                              -> Idle on the new image, Node Ready
//! ```
//!
//! Nodes listed in `fail_after_reboot` come back on the image they ran (a
//! rollback): their daemon reports the failed reboot, Degraded, for as long
//! as the spec stays; nodes in `never_ready` never become Ready again after
//! their reboot; nodes in `ignore_approval` decide as if not approved.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use api::{BootEntryStatus, BootcNode, BootcNodeStatus, DesiredImageState};
use daemon::agent::machine::{self, Action, HostView, Inputs};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;

/// How the player behaves.
#[derive(Clone, Debug, Default)]
pub struct PlayerOptions {
    /// The image every node boots before the test (`repo@digest`).
    pub initial_image: String,
    /// Per-node initial images that differ from `initial_image`.
    pub initial_overrides: BTreeMap<String, String>,
    /// Nodes whose reboot comes back on the old image (reported Degraded).
    pub fail_after_reboot: BTreeSet<String>,
    /// Nodes whose Node stays NotReady after rebooting.
    pub never_ready: BTreeSet<String>,
    /// Nodes whose daemon ignores the approval to boot (stays Staged).
    pub ignore_approval: BTreeSet<String>,
}

/// A running player; stops when dropped.
pub struct DaemonPlayer {
    task: tokio::task::JoinHandle<()>,
    reboots: Arc<Mutex<Vec<String>>>,
}

impl Drop for DaemonPlayer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The kubelet's strategic merge patch of a Node's status that sets its
/// Ready condition.
pub fn ready_body(ready: bool) -> serde_json::Value {
    let now = jiff::Timestamp::now().to_string();
    json!({"status": {"conditions": [{
        "type": api::node_health::NODE_READY, "status": if ready {"True"} else {"False"},
        "reason": if ready {"KubeletReady"} else {"KubeletNotReady"},
        "message": "set by the test", "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}})
}

/// Sets a Node's Ready condition (the kubelet's job).
pub async fn set_ready(client: &kube::Client, node: &str, ready: bool) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let body = ready_body(ready);
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&body))
        .await?;
    Ok(())
}

impl DaemonPlayer {
    /// Starts playing every node's daemon with `client` (admin is simplest).
    pub fn start(client: kube::Client, options: PlayerOptions) -> Self {
        let reboots = Arc::new(Mutex::new(Vec::new()));
        let r = reboots.clone();
        let task = tokio::spawn(async move {
            let api: Api<BootcNode> = Api::all(client.clone());
            let mut stream = watcher(api.clone(), watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            let mut nodes: HashMap<String, PlayedNode> = HashMap::new();
            while let Some(ev) = stream.next().await {
                let Ok(bn) = ev else { continue };
                let name = bn.name_any();
                let node = nodes
                    .entry(name.clone())
                    .or_insert_with(|| PlayedNode::new(&bn, &options));
                if let Err(e) = play(&client, &api, node, &bn, &options, &r).await {
                    tracing::debug!(error = %e, node = %name, "player step failed");
                }
            }
        });
        DaemonPlayer { task, reboots }
    }

    /// Nodes that rebooted so far, in order.
    pub fn reboots(&self) -> Vec<String> {
        self.reboots.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// One step's I/O: the kubelet's NotReady before a reboot, the status
/// write, the kubelet's Ready once the node is back; the simulated host
/// moves on only once its status is written.
async fn play(
    client: &kube::Client,
    api: &Api<BootcNode>,
    node: &mut PlayedNode,
    bn: &BootcNode,
    options: &PlayerOptions,
    reboots: &Arc<Mutex<Vec<String>>>,
) -> Result<()> {
    let name = bn.name_any();
    let Some(step) = node.plan(bn, options, Time(jiff::Timestamp::now())) else {
        return Ok(());
    };
    if step.reboots {
        set_ready(client, &name, false).await?;
    }
    let mut written_version = None;
    if let Some(status) = &step.write {
        let patch = json!({
            "apiVersion": BootcNode::api_version(&()),
            "kind": BootcNode::kind(&()),
            "status": status,
        });
        let params = PatchParams::apply(api::labels::DAEMON_MANAGER).force();
        let written = api
            .patch_status(&name, &params, &Patch::Apply(&patch))
            .await?;
        written_version = resource_version(&written);
    }
    let back = step.back;
    if step.reboots
        && let Ok(mut r) = reboots.lock()
    {
        r.push(name.clone());
    }
    node.adopt(step, written_version);
    if back && !options.never_ready.contains(&name) {
        set_ready(client, &name, true).await?;
    }
    Ok(())
}

fn resource_version(bn: &BootcNode) -> Option<u64> {
    bn.metadata.resource_version.as_deref()?.parse().ok()
}

/// What `bootc status` would report on a played node.
#[derive(Clone, Debug)]
struct SimHost {
    view: HostView,
    /// The daemon's helper staged the staged image (not a daemon before a
    /// reboot or a restart of the player).
    staged_here: bool,
    /// Rebooted, and its daemon has not reported since (the kubelet
    /// reports Ready with that report).
    back_from_reboot: bool,
    boots: u64,
}

fn entry(image: &str) -> BootEntryStatus {
    BootEntryStatus {
        image: Some(image.into()),
        image_digest: api::image_ref::digest_of(image).map(Into::into),
        architecture: Some("amd64".into()),
        ..BootEntryStatus::default()
    }
}

impl SimHost {
    /// The host as the last status tells (a player started mid-test), or
    /// booted into its initial image.
    fn new(name: &str, status: Option<&BootcNodeStatus>, options: &PlayerOptions) -> Self {
        let initial = || {
            let image = options
                .initial_overrides
                .get(name)
                .unwrap_or(&options.initial_image);
            Some(entry(image))
        };
        let reported = status.filter(|s| s.booted.is_some());
        let view = HostView {
            booted: reported.map_or_else(initial, |s| s.booted.clone()),
            staged: reported.and_then(|s| s.staged.clone()),
            rollback: reported.and_then(|s| s.rollback.clone()),
            boot_id: reported
                .and_then(|s| s.boot_id.clone())
                .unwrap_or_else(|| format!("{name}-boot-0")),
            download_only_supported: true,
            host_updaters: reported
                .map(|s| s.host_updaters.clone())
                .unwrap_or_default(),
        };
        SimHost {
            view,
            staged_here: false,
            back_from_reboot: false,
            boots: 0,
        }
    }

    /// Carries out `action` at once: `bootc switch --download-only`
    /// (locked), or the apply and the reboot (onto the staged image, or
    /// back onto the booted one when the reboot is to fail).
    fn carry_out(&mut self, action: &Action, fail_reboot: bool, name: &str) {
        match action {
            Action::Stage { image } => {
                self.view.staged = Some(BootEntryStatus {
                    download_only: true,
                    ..entry(image)
                });
                self.staged_here = true;
            }
            Action::Apply { .. } => {
                let staged = self.view.staged.take();
                if !fail_reboot && let Some(staged) = staged {
                    let booted = BootEntryStatus {
                        download_only: false,
                        ..staged
                    };
                    self.view.rollback = self.view.booted.replace(booted);
                }
                self.boots += 1;
                self.view.boot_id = format!("{name}-boot-{}", self.boots);
                self.staged_here = false;
                self.back_from_reboot = true;
            }
            Action::None | Action::RetryAfter(_) => {}
        }
    }
}

/// A played node: its host, and what its daemon wrote last.
struct PlayedNode {
    /// The BootcNode played (a new one, same name, starts afresh).
    uid: Option<String>,
    host: SimHost,
    last_written: Option<BootcNodeStatus>,
    /// The resource version of that write: older events are stale.
    written_version: Option<u64>,
}

/// What one step does: the status to write (None: nothing new), and the
/// host after the step's actions.
#[derive(Debug)]
struct Step {
    write: Option<BootcNodeStatus>,
    host: SimHost,
    /// The step applies the staged image: the node reboots.
    reboots: bool,
    /// The status written is the first since a reboot: the node is back.
    back: bool,
}

/// Decisions one step may carry out without a status write in between
/// (the daemon re-reads the host after each command and decides again).
const MAX_ACTIONS: usize = 4;

impl PlayedNode {
    fn new(bn: &BootcNode, options: &PlayerOptions) -> Self {
        PlayedNode {
            uid: bn.uid(),
            host: SimHost::new(&bn.name_any(), bn.status.as_ref(), options),
            last_written: None,
            written_version: None,
        }
    }

    /// The daemon's step on `bn`, as watched: decide, write if worth it,
    /// carry out the action; decide again after an action that wrote
    /// nothing. None for an event older than this player's last write.
    fn plan(&mut self, bn: &BootcNode, options: &PlayerOptions, now: Time) -> Option<Step> {
        if bn.uid() != self.uid {
            self.uid = bn.uid();
            self.last_written = None;
            self.written_version = None;
        }
        if let (Some(seen), Some(written)) = (resource_version(bn), self.written_version)
            && seen < written
        {
            return None;
        }
        let name = bn.name_any();
        let mut spec = bn.spec.clone();
        if options.ignore_approval.contains(&name) {
            spec.desired_image_state = DesiredImageState::Staged;
        }
        let fail_reboot = options.fail_after_reboot.contains(&name);
        let stored = self.last_written.as_ref().or(bn.status.as_ref());
        let mut host = self.host.clone();
        let mut reboots = false;
        for _ in 0..MAX_ACTIONS {
            let inputs = Inputs {
                spec: &spec,
                generation: bn.metadata.generation,
                previous: bn.status.as_ref(),
                host: &host.view,
                failure: None,
                now_ms: 0,
                staged_here: host.staged_here,
            };
            let decision = machine::decide(&inputs);
            let status = machine::status_to_write(&decision, &inputs, &now);
            // A pull here is instant: the daemon reports it once, staged
            // (`daemon::agent::node_loop::STAGING_REPORT_AFTER`).
            let pulling = matches!(decision.action, Action::Stage { .. });
            let write = (!pulling && machine::worth_writing(stored, &status)).then_some(status);
            // The write reports the host before the action.
            let back = write.is_some() && host.back_from_reboot;
            if write.is_some() {
                host.back_from_reboot = false;
            }
            host.carry_out(&decision.action, fail_reboot, &name);
            reboots |= matches!(decision.action, Action::Apply { .. });
            let acted = matches!(decision.action, Action::Stage { .. } | Action::Apply { .. });
            if write.is_some() || !acted {
                return Some(Step {
                    write,
                    host,
                    reboots,
                    back,
                });
            }
        }
        tracing::warn!(node = %name, "the played daemon acts without reporting; stopping");
        None
    }

    /// The step happened: its status written (at `version`) and the host
    /// moved on.
    fn adopt(&mut self, step: Step, version: Option<u64>) {
        self.host = step.host;
        if step.write.is_some() {
            self.last_written = step.write;
            self.written_version = version.or(self.written_version);
        }
    }
}

#[cfg(test)]
mod tests;
