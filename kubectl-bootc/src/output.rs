//! `-o json|yaml`: the documents `status`, `plan` and `history` print,
//! for scripts. Stable: within `apiVersion: kubectl-bootc/v1` a field may be
//! added, never renamed, retyped or removed. Keys are camelCase; times are
//! RFC 3339; a field with nothing to say is left out (an absent `Option`)
//! or empty (a list).
//!
//! * `kind: Status`: `pools`, each a [`PoolStatus`] with its [`NodeStatus`]
//!   rows (`why`: the lines of `kubectl bootc why`, headline first);
//! * `kind: Plan`: a [`Plan`], the waves the planner would make;
//! * `kind: PoolHistory`: a [`PoolHistory`], the pool's `status.rollouts`
//!   (as the CRD writes them) and its Events, oldest first;
//! * `kind: NodeHistory`: a [`NodeHistory`], the BootcNode's
//!   `status.history` (as the CRD writes it).
//!
//! What the text escapes (control characters read from the cluster) the
//! encoders escape too.

use api::{BootcNode, BootcNodePool, ConditionType, NodeUpdate, RolloutRecord};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use serde::Serialize;

use crate::cli::{Error, Format};
use crate::plan::Planned;
use crate::{Snapshot, holds_slot, pool_condition, pool_condition_any};

/// The documents' version.
pub const API_VERSION: &str = "kubectl-bootc/v1";

/// A document: its version and kind, then its fields.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Document<T> {
    pub api_version: &'static str,
    pub kind: &'static str,
    #[serde(flatten)]
    pub body: T,
}

fn document<T>(kind: &'static str, body: T) -> Document<T> {
    Document {
        api_version: API_VERSION,
        kind,
        body,
    }
}

/// A condition's reason and message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reasoned {
    pub reason: String,
    pub message: String,
}

fn reasoned((reason, message): (&str, &str)) -> Reasoned {
    Reasoned {
        reason: reason.to_owned(),
        message: message.to_owned(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub pools: Vec<PoolStatus>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub name: String,
    /// `spec.image.ref`.
    pub image: String,
    /// `repository@digest` the pool rolls out (`status.targetImage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_digest: Option<String>,
    /// The last digest every member ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployed_digest: Option<String>,
    pub paused: bool,
    /// The `UpToDate` condition, whatever its status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Reasoned>,
    /// The `Degraded` condition when True.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<Reasoned>,
    /// `spec.rollout.maxUnavailable`, as written.
    pub max_unavailable: IntOrString,
    /// The members holding a reboot slot, as the planner counts them.
    pub slot_holders: Vec<String>,
    pub nodes: Vec<NodeStatus>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub name: String,
    /// The daemon's phase, as it wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<jiff::Timestamp>,
    pub in_slot: bool,
    /// `spec.desiredImageState`: Staged, or Booted once approved to boot.
    pub allowed: String,
    /// The booted image's version label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The Node's Ready (absent: no Node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Where it stands, as the controller's plan decides it
    /// (`rollout::Standing`'s kind, the metrics' `standing` label).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standing: Option<&'static str>,
    /// `kubectl bootc why`, headline first.
    pub why: Vec<String>,
}

/// `status [POOL]` as a document: `pools` (one pool, or all, by name).
pub fn status(snap: &Snapshot, pools: &[&BootcNodePool], now: jiff::Timestamp) -> Document<Status> {
    let mut pools: Vec<PoolStatus> = pools.iter().map(|p| pool_status(snap, p, now)).collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    document("Status", Status { pools })
}

fn pool_status(snap: &Snapshot, pool: &BootcNodePool, now: jiff::Timestamp) -> PoolStatus {
    let name = pool.name_any();
    let status = pool.status.clone().unwrap_or_default();
    let standings = crate::plan::standings(snap, pool, now);
    PoolStatus {
        image: pool.spec.image.reference.clone(),
        target: status.target_image,
        target_digest: status.target_digest,
        deployed_digest: status.deployed_digest,
        paused: pool.spec.rollout.paused,
        progress: pool_condition_any(pool, ConditionType::UpToDate).map(reasoned),
        degraded: pool_condition(pool, ConditionType::Degraded).map(reasoned),
        max_unavailable: pool.spec.rollout.max_unavailable.clone(),
        slot_holders: snap
            .members(&name)
            .filter(|m| holds_slot(snap, m, &name))
            .map(ResourceExt::name_any)
            .collect(),
        nodes: snap
            .members(&name)
            .map(|bn| node_status(snap, bn, pool, standings.as_ref(), now))
            .collect(),
        name,
    }
}

fn node_status(
    snap: &Snapshot,
    bn: &BootcNode,
    pool: &BootcNodePool,
    standings: Option<&rollout::Standings>,
    now: jiff::Timestamp,
) -> NodeStatus {
    let name = bn.name_any();
    NodeStatus {
        standing: standings
            .and_then(|s| s.members.get(&name))
            .map(|s| s.kind().as_str()),
        phase: Some(crate::phase_label(bn, "")).filter(|p| !p.is_empty()),
        phase_since: bn.phase_since(),
        in_slot: holds_slot(snap, bn, &pool.name_any()),
        allowed: bn.spec.desired_image_state.as_str().to_owned(),
        version: bn
            .status
            .as_ref()
            .and_then(|s| s.booted.as_ref())
            .and_then(|b| b.version.as_deref().map(str::to_owned)),
        ready: snap.node(&name).map(api::node_health::is_ready),
        why: crate::why::member(snap, pool, standings, bn, now)
            .into_iter()
            .map(crate::shown)
            .collect(),
        name,
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub pool: String,
    /// The image previewed: `repository@digest`.
    pub image: String,
    pub digest: String,
    /// The nodes given reboot slots together, wave after wave.
    pub waves: Vec<Vec<String>>,
    /// What holds the members not on the image at the end (the pool's
    /// UpToDate reason and message); absent: every member runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Reasoned>,
    /// spec.rollout.alertGate is set, and the preview took it as open (the
    /// plugin does not ask Prometheus).
    pub alert_gate_not_asked: bool,
}

/// `plan POOL` as a document.
pub fn plan(pool: &BootcNodePool, planned: Planned) -> Document<Plan> {
    let Planned { target, preview } = planned;
    document(
        "Plan",
        Plan {
            pool: pool.name_any(),
            image: target.image,
            digest: target.digest,
            waves: preview.waves,
            held: preview
                .held
                .map(|(reason, message)| Reasoned { reason, message }),
            alert_gate_not_asked: pool.spec.rollout.alert_gate.is_some(),
        },
    )
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolHistory {
    pub pool: String,
    /// `spec.image.ref`.
    pub follows: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployed_digest: Option<String>,
    /// `status.rollouts`, newest first.
    pub rollouts: Vec<RolloutRecord>,
    /// The Events about the pool the API server still keeps, oldest first.
    pub events: Vec<PoolEvent>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolEvent {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<jiff::Timestamp>,
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    /// The node it is about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub message: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHistory {
    pub node: String,
    /// `status.history`, newest first.
    pub updates: Vec<NodeUpdate>,
}

/// `history NAME`'s document.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum History {
    Pool(Document<PoolHistory>),
    Node(Document<NodeHistory>),
}

/// `history NAME` as a document: the pool's, or else the BootcNode's
/// (None: neither exists).
pub fn history(snap: &Snapshot, name: &str) -> Option<History> {
    if let Some(pool) = snap.pool(name) {
        return Some(History::Pool(pool_history(snap, pool)));
    }
    let bn = snap.bootc_node(name)?;
    let updates = bn
        .status
        .as_ref()
        .map(|s| s.history.clone())
        .unwrap_or_default();
    Some(History::Node(document(
        "NodeHistory",
        NodeHistory {
            node: bn.name_any(),
            updates,
        },
    )))
}

fn pool_history(snap: &Snapshot, pool: &BootcNodePool) -> Document<PoolHistory> {
    let name = pool.name_any();
    let status = pool.status.clone().unwrap_or_default();
    let events = crate::history::pool_events(snap, &name)
        .into_iter()
        .map(|e| PoolEvent {
            time: crate::history::when(e),
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            node: e.related.as_ref().and_then(|r| r.name.clone()),
            message: e.message.clone().unwrap_or_default(),
        })
        .collect();
    document(
        "PoolHistory",
        PoolHistory {
            follows: pool.spec.image.reference.clone(),
            target: status.target_image,
            deployed_digest: status.deployed_digest,
            rollouts: status.rollouts,
            events,
            pool: name,
        },
    )
}

/// `doc` in `format`, ending with a newline.
pub fn render(doc: &impl Serialize, format: Format) -> Result<String, Error> {
    let encode =
        |source: Box<dyn std::error::Error + Send + Sync>| Error::Encode { format, source };
    match format {
        Format::Json => serde_json::to_string_pretty(doc)
            .map(|text| text + "\n")
            .map_err(|e| encode(Box::new(e))),
        Format::Yaml => serde_yaml::to_string(doc).map_err(|e| encode(Box::new(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::why;
    use serde_json::json;

    /// The keys of an object, sorted.
    fn keys(value: &serde_json::Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        keys.sort_unstable();
        keys
    }

    fn workers() -> Snapshot {
        let mut snap = alone(slotted(bn("n1", V1, Phase::Staged), false), true, true);
        snap.events = vec![event(
            "workers",
            api::event_reasons::ROLLOUT_STARTED,
            None,
            10,
            "rolling out 2.0",
        )];
        snap
    }

    #[test]
    fn the_status_document_keeps_its_documented_fields() {
        let snap = workers();
        let pools: Vec<&BootcNodePool> = snap.pools.iter().collect();
        let doc = serde_json::to_value(status(&snap, &pools, now())).unwrap();
        assert_eq!(keys(&doc), ["apiVersion", "kind", "pools"]);
        assert_eq!(doc["apiVersion"], API_VERSION);
        assert_eq!(doc["kind"], "Status");
        let pool = &doc["pools"][0];
        #[rustfmt::skip]
        assert_eq!(keys(pool), ["image", "maxUnavailable", "name", "nodes", "paused", "progress", "slotHolders", "target", "targetDigest"]);
        assert_eq!(
            pool["progress"]["reason"],
            api::Reason::RolloutInProgress.as_str()
        );
        assert_eq!(pool["slotHolders"], json!(["n1"]));
        let node = &pool["nodes"][0];
        #[rustfmt::skip]
        assert_eq!(keys(node), ["allowed", "inSlot", "name", "phase", "phaseSince", "ready", "standing", "version", "why"]);
        assert_eq!(node["inSlot"], true);
        assert_eq!(node["ready"], true);
        assert_eq!(node["phase"], api::DaemonPhase::Staged.as_str());
        assert_eq!(node["phaseSince"], "2026-11-23T16:00:00Z");
        assert_eq!(node["why"][0], why(&snap, "n1", now())[0]);
    }

    #[test]
    fn the_history_documents_keep_their_documented_fields() {
        let snap = workers();
        let doc = serde_json::to_value(history(&snap, "workers")).unwrap();
        assert_eq!(doc["kind"], "PoolHistory");
        #[rustfmt::skip]
        assert_eq!(keys(&doc), ["apiVersion", "events", "follows", "kind", "pool", "rollouts", "target"]);
        assert_eq!(
            doc["events"][0],
            json!({"time": "2026-11-23T16:00:10Z", "type": "Normal", "reason": api::event_reasons::ROLLOUT_STARTED, "message": "rolling out 2.0"})
        );
        let doc = serde_json::to_value(history(&snap, "n1")).unwrap();
        assert_eq!(keys(&doc), ["apiVersion", "kind", "node", "updates"]);
        assert_eq!(doc["kind"], "NodeHistory");
        assert!(history(&snap, "nosuch").is_none());
    }

    #[test]
    fn the_plan_document_names_the_waves() {
        let snap = workers();
        let pool = snap.pool("workers").unwrap();
        let planned = crate::plan::planned(&snap, pool, None, "bootc-operator", now()).unwrap();
        let waves = planned.preview.waves.clone();
        let doc = serde_json::to_value(plan(pool, planned)).unwrap();
        assert_eq!(doc["kind"], "Plan");
        assert_eq!(doc["waves"], json!(waves));
        assert_eq!(doc["digest"], V2);
        assert_eq!(doc["alertGateNotAsked"], false);
    }

    #[test]
    fn both_formats_escape_what_the_cluster_wrote() {
        let hostile = "pull failed: \u{1b}]0;OWNED\u{7}\u{1b}[2K";
        let snap = alone_in(
            halted(pool("workers", false), hostile),
            bn("n1", V1, Phase::Staged),
            true,
            false,
        );
        // As the cluster may hold it (written by anyone who may write the
        // status, not only through `ConditionUpdate`, which escapes).
        let mut snap = snap;
        let held = format!("{hostile} (raw)");
        for c in &mut snap.pools[0].status.as_mut().unwrap().conditions {
            if c.type_ == api::ConditionType::Degraded.as_str() {
                c.message = held.as_str().into();
            }
        }
        let pools: Vec<&BootcNodePool> = snap.pools.iter().collect();
        let doc = status(&snap, &pools, now());
        for format in [Format::Json, Format::Yaml] {
            let text = render(&doc, format).unwrap();
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "{format:?}: {text}"
            );
            assert!(text.ends_with('\n'), "{format:?}");
            // What a script reads back is what the cluster holds.
            let back: serde_json::Value = match format {
                Format::Json => serde_json::from_str(&text).unwrap(),
                Format::Yaml => serde_yaml::from_str(&text).unwrap(),
            };
            assert_eq!(
                back["pools"][0]["degraded"]["message"].as_str(),
                Some(held.as_str()),
                "{format:?}: {text}"
            );
        }
    }
}
