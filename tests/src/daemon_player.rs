//! A stand-in for the node daemons and the kubelet, for controller tests and
//! benchmarks: it watches every BootcNode and moves its status through the
//! daemon's cycle, one write per step, as the real daemon would:
//!
//! ```text
//! (no status) -> Idle on the initial image
//! desiredImage != booted         -> Staging -> Staged (staged = desired)
//! desiredImageState == Booted    -> Rebooting, Node NotReady
//!                                -> booted = staged, Idle, Node Ready
//! ```
//!
//! Nodes listed in `fail_after_reboot` come back Degraded (and stay so);
//! nodes in `never_ready` never become Ready again after their reboot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use api::{BootcNode, DesiredImageState};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

/// How the player behaves.
#[derive(Clone, Debug, Default)]
pub struct PlayerOptions {
    /// The image every node boots before the test (`repo@digest`).
    pub initial_image: String,
    /// Per-node initial images that differ from `initial_image`.
    pub initial_overrides: BTreeMap<String, String>,
    /// Nodes that report Degraded after rebooting.
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

fn digest_of(image: &str) -> String {
    image
        .split_once('@')
        .map(|(_, d)| d.to_owned())
        .unwrap_or_default()
}

fn entry(image: &str) -> serde_json::Value {
    json!({"image": image, "imageDigest": digest_of(image), "architecture": "amd64"})
}

fn conditions(idle: bool, reason: &str, degraded: bool) -> serde_json::Value {
    let now = jiff::Timestamp::now().to_string();
    json!([
        {"type": "Idle", "status": if idle {"True"} else {"False"}, "reason": reason,
         "message": reason, "lastTransitionTime": now},
        {"type": "Degraded", "status": if degraded {"True"} else {"False"},
         "reason": if degraded {"Error"} else {"Healthy"},
         "message": if degraded {"the new image does not come up"} else {"ok"},
         "lastTransitionTime": now},
    ])
}

/// Sets a Node's Ready condition (the kubelet's job).
pub async fn set_ready(client: &kube::Client, node: &str, ready: bool) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let now = jiff::Timestamp::now().to_string();
    let body = json!({"status": {"conditions": [{
        "type": "Ready", "status": if ready {"True"} else {"False"},
        "reason": if ready {"KubeletReady"} else {"KubeletNotReady"},
        "message": "set by the test", "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}});
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
            while let Some(ev) = stream.next().await {
                let Ok(bn) = ev else { continue };
                if let Err(e) = step(&client, &api, &bn, &options, &r).await {
                    tracing::debug!(error = %e, node = %bn.name_any(), "player step failed");
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

async fn step(
    client: &kube::Client,
    api: &Api<BootcNode>,
    bn: &BootcNode,
    options: &PlayerOptions,
    reboots: &Arc<Mutex<Vec<String>>>,
) -> Result<()> {
    let name = bn.name_any();
    let generation = bn.metadata.generation;
    let params = PatchParams::default();
    let status = bn.status.clone().unwrap_or_default();
    let idle_reason = api::conditions::reason(&status.conditions, "Idle").unwrap_or("");
    let degraded = api::conditions::is_true(&status.conditions, "Degraded");
    let desired = &bn.spec.desired_image;
    let Some(booted) = status.booted.as_ref().and_then(|b| b.image.clone()) else {
        let initial = options
            .initial_overrides
            .get(&name)
            .cloned()
            .unwrap_or_else(|| options.initial_image.clone());
        let body = json!({"status": {
            "observedGeneration": generation,
            "booted": entry(&initial),
            "conditions": conditions(true, "Idle", false),
        }});
        api.patch_status(&name, &params, &Patch::Merge(&body))
            .await?;
        return Ok(());
    };
    if degraded {
        return Ok(());
    }
    let staged = status.staged.as_ref().and_then(|s| s.image.clone());
    if &booted == desired {
        if idle_reason != "Idle" {
            let body = json!({"status": {
                "observedGeneration": generation, "staged": null,
                "conditions": conditions(true, "Idle", false),
            }});
            api.patch_status(&name, &params, &Patch::Merge(&body))
                .await?;
        }
        return Ok(());
    }
    match idle_reason {
        "Rebooting" => {
            // The reboot: booted = staged, then the kubelet reports Ready.
            let new_boot = staged.clone().unwrap_or_else(|| desired.clone());
            if let Ok(mut r) = reboots.lock() {
                r.push(name.clone());
            }
            let fail = options.fail_after_reboot.contains(&name);
            let body = json!({"status": {
                "observedGeneration": generation,
                "booted": entry(&new_boot), "staged": null,
                "conditions": conditions(!fail, if fail {"Staged"} else {"Idle"}, fail),
            }});
            api.patch_status(&name, &params, &Patch::Merge(&body))
                .await?;
            if !options.never_ready.contains(&name) {
                set_ready(client, &name, true).await?;
            }
        }
        "Staged" if staged.as_deref() == Some(desired.as_str()) => {
            if bn.spec.desired_image_state == DesiredImageState::Booted
                && !options.ignore_approval.contains(&name)
            {
                set_ready(client, &name, false).await?;
                let body = json!({"status": {
                    "observedGeneration": generation,
                    "conditions": conditions(false, "Rebooting", false),
                }});
                api.patch_status(&name, &params, &Patch::Merge(&body))
                    .await?;
            } else if status.observed_generation != generation {
                let body = json!({"status": {"observedGeneration": generation}});
                api.patch_status(&name, &params, &Patch::Merge(&body))
                    .await?;
            }
        }
        "Staging" if status.observed_generation == generation => {
            let body = json!({"status": {
                "observedGeneration": generation,
                "staged": entry(desired),
                "conditions": conditions(false, "Staged", false),
            }});
            api.patch_status(&name, &params, &Patch::Merge(&body))
                .await?;
        }
        _ => {
            let body = json!({"status": {
                "observedGeneration": generation,
                "conditions": conditions(false, "Staging", false),
            }});
            api.patch_status(&name, &params, &Patch::Merge(&body))
                .await?;
        }
    }
    Ok(())
}
