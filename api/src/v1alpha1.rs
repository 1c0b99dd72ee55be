//! `node.bootc.dev/v1alpha1`: BootcNodePool (user-written) and BootcNode
//! (one per member node: the controller writes spec, the daemon writes status).
//!
//! Validation that the API server can enforce lives in the schema (enums,
//! bounds, and CEL rules: see [`crate::schema`]). Checks that need the
//! cluster's state are done by the controller and reported in the pool's
//! `Degraded/InvalidSpec` condition.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

use crate::conditions::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;

use crate::Shared;
use serde::{Deserialize, Serialize};

pub use crate::schema::SELECTOR_OPERATORS;

/// Default for `spec.rollout.drainTimeoutSeconds`.
pub const DEFAULT_DRAIN_TIMEOUT_SECONDS: i64 = 600;
/// Default for `spec.rollout.maxUnhealthy`.
pub const DEFAULT_MAX_UNHEALTHY: i32 = 2;

/// A group of nodes that run one bootc image, and how to roll it out.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "node.bootc.dev",
    version = "v1alpha1",
    kind = "BootcNodePool",
    plural = "bootcnodepools",
    singular = "bootcnodepool",
    shortname = "bnp",
    category = "bootc",
    status = "BootcNodePoolStatus",
    // `kubectl get bnp` fits 120 columns; `-o wide` adds the digests and
    // the rollout's message. Status is Ready's reason: AllUpdated,
    // RolloutInProgress, Paused, or the Degraded reason.
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".status.targetSummary","description":"The target's version and short digest"}"#,
    printcolumn = r#"{"name":"Nodes","type":"integer","jsonPath":".status.nodeCount"}"#,
    printcolumn = r#"{"name":"Updated","type":"integer","jsonPath":".status.updatedCount"}"#,
    printcolumn = r#"{"name":"Updating","type":"integer","jsonPath":".status.updatingCount"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Degraded","type":"integer","priority":1,"jsonPath":".status.degradedCount"}"#,
    printcolumn = r#"{"name":"Image","type":"string","priority":1,"jsonPath":".spec.image.ref","description":"The image reference the pool follows"}"#,
    printcolumn = r#"{"name":"Target Digest","type":"string","priority":1,"jsonPath":".status.targetDigest","description":"Digest being rolled out"}"#,
    printcolumn = r#"{"name":"Deployed","type":"string","priority":1,"jsonPath":".status.deployedDigest","description":"The last digest every member ran"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"jsonPath":".status.conditions[?(@.type==\"UpToDate\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodePoolSpec {
    /// Nodes whose labels match are members of this pool. A node may belong
    /// to one pool only; overlaps are reported as Degraded/NodeConflict.
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub node_selector: LabelSelector,
    /// The image the members run.
    pub image: ImageSpec,
    /// How fast the rollout goes.
    #[serde(default)]
    pub rollout: RolloutSpec,
    /// What kind of disruption is allowed.
    #[serde(default)]
    pub disruption: DisruptionSpec,
    /// Credentials for the registry, a `kubernetes.io/dockerconfigjson` Secret
    /// in the operator's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<SecretReference>,
    /// What a node must show after it boots the target before its reboot
    /// slot is released (unset: Ready and on the target is enough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthSpec>,
    /// What the pool's deletion leaves of a rollout in progress: Release
    /// (the default) releases the nodes in reboot slots at once; Finish
    /// lets them finish their update first. Either way no new slot is
    /// handed out, and nothing is left cordoned nor staged to boot unasked.
    #[serde(default)]
    pub on_delete: DeletionPolicy,
}

/// What a pool's deletion does to the nodes in its reboot slots
/// (`spec.onDelete`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// At once: each node is uncordoned, loses the pool's labels and its
    /// BootcNode, and its daemon stages the image it runs over the pool's.
    /// A node already rebooting is waited for until it is back.
    #[default]
    Release,
    /// The nodes in slots finish their update (drain, reboot, proving) and
    /// are then released as with Release; no new slot is handed out.
    Finish,
}

/// `spec.health`: the checks a node passes after it boots the target, and
/// what a failure does.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.timeoutSeconds > self.settleSeconds",
    "message": "spec.health.timeoutSeconds must be greater than spec.health.settleSeconds",
    "fieldPath": ".timeoutSeconds"
}, {
    "rule": "!has(self.rollbackUpdated) || !self.rollbackUpdated || self.onFailure == 'Rollback'",
    "message": "spec.health.rollbackUpdated needs spec.health.onFailure: Rollback",
    "fieldPath": ".rollbackUpdated"
}]))]
pub struct HealthSpec {
    /// Node conditions that must have the given status (Ready=True is
    /// always checked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub conditions: Vec<HealthCondition>,
    /// Pods that must be Ready on the node: at least one matches each entry
    /// there, and every match is Ready. They must tolerate the slot's
    /// cordon (DaemonSet pods do): the node stays cordoned until it passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub pods: Vec<HealthPods>,
    /// How long every check must hold, without a break, before the slot is
    /// released.
    #[serde(default = "default_settle_seconds")]
    #[schemars(range(min = 0, max = 86400))]
    pub settle_seconds: i64,
    /// How long after the boot the checks may take to hold for
    /// settleSeconds; past it the node fails its health gate.
    #[serde(default = "default_health_timeout_seconds")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: i64,
    /// What a node that fails does: Halt keeps it in its slot and hands out
    /// no new one for this image; Rollback boots it back into the image it
    /// ran before, in the same slot.
    #[serde(default)]
    pub on_failure: HealthFailurePolicy,
    /// With `onFailure: Rollback`: the members already on a failed image
    /// go back too, the whole pool rolling back to the image of its last
    /// completed rollout under the same budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rollback_updated: bool,
    /// How many distinct nodes must fail their health gate on an image
    /// before it is failed for the whole pool (nobody else told it, and
    /// with `rollbackUpdated` the pool rolled back); unset: 2. Until then
    /// a failing node keeps its slot and the pool names it as the only
    /// witness; a person may confirm the failure sooner (the pool's
    /// `bootc.dev/confirm-image-failure: <digest>` annotation). One node's
    /// own report (its daemon's, its kubelet's) is not enough to decide
    /// for every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub nodes_to_fail_image: Option<i32>,
}

/// The default of `spec.health.nodesToFailImage`.
pub const DEFAULT_NODES_TO_FAIL_IMAGE: i32 = 2;

fn default_settle_seconds() -> i64 {
    60
}

fn default_health_timeout_seconds() -> i64 {
    600
}

/// A Node condition a node must show (`spec.health.conditions`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCondition {
    /// The condition's type, such as `NetworkUnavailable`.
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 316))]
    pub type_: String,
    /// The status it must have.
    pub status: ConditionStatus,
}

/// A condition's status.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// Pods that must be Ready on a node that booted the target
/// (`spec.health.pods`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthPods {
    /// Their namespace.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: String,
    /// Their labels.
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub selector: LabelSelector,
}

/// What a node that fails its health gate does (`spec.health.onFailure`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum HealthFailurePolicy {
    /// The node keeps its slot, cordoned, for a person to look at; no node
    /// is given a new slot for this image.
    #[default]
    Halt,
    /// The node boots the image it ran before, in the same slot; no other
    /// node is given this image.
    Rollback,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// A tag (`quay.io/acme/os:prod`), a digest (`quay.io/acme/os@sha256:...`)
    /// or both. A tag is resolved and re-polled; a digest is checked against
    /// its registry before any node is told (see the schema's description).
    #[serde(rename = "ref")]
    #[schemars(schema_with = "crate::schema::image_ref")]
    pub reference: String,
    /// Allow a target whose OS family or major version differs from what
    /// the members run (its image's `redhat.id` / `redhat.version-id`
    /// labels, as Fedora and CentOS Stream bootc images carry them): such a
    /// target is refused unless this is true. Read the distribution's
    /// upgrade notes first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_major_upgrade: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// How many nodes may be cordoned and rebooting at once: a number of
    /// nodes, or a percentage ("25%") of the pool's nodes, rounded up. 0 (or
    /// "0%"): every node stages and none reboots.
    #[serde(
        default = "default_max_unavailable",
        deserialize_with = "max_unavailable_or_default"
    )]
    #[schemars(schema_with = "crate::schema::max_unavailable")]
    pub max_unavailable: IntOrString,
    /// How many nodes in reboot slots may be unhealthy (Degraded, or NotReady
    /// beyond a reboot) before no new slot is handed out: a number of at
    /// least 1 or a percentage of the pool's nodes, rounded up (unset: 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::max_unhealthy")]
    pub max_unhealthy: Option<IntOrString>,
    /// When true no node is given a new reboot slot. Staging and tag
    /// resolution go on.
    #[serde(default)]
    pub paused: bool,
    /// A pause with an end: until this instant (RFC 3339, such as
    /// `2027-01-04T08:00:00Z`) no node is given a new reboot slot, as with
    /// `paused`; after it the rollout goes on by itself, with no write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<Time>,
    /// How long a drain may take before the node is reported as blocked.
    #[serde(default = "default_drain_timeout")]
    #[schemars(range(min = 1, max = 86400))]
    pub drain_timeout_seconds: i64,
    /// What a drain that fails (times out) does to its node: Retry keeps
    /// the node in its slot, cordoned, and drains again; Release uncordons
    /// it, frees the slot and skips the node for this target.
    #[serde(default)]
    pub on_drain_timeout: DrainTimeoutPolicy,
    /// At most this many nodes download the new image at once (unset: all
    /// members stage in parallel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_concurrent_staging: Option<i32>,
    /// How far staging runs ahead of the reboot slots: at most this many
    /// nodes beyond the free slots are staging or staged and waiting (unset:
    /// no limit). With 0 a node stages only when a free slot awaits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100000))]
    pub stage_ahead: Option<i32>,
    /// How much of the host's disk and CPU the download may take while
    /// other work wants them: systemd's `IOWeight=` and `CPUWeight=` of the
    /// host's stage unit (unset: 50 each, half of the 100 that systemd
    /// gives every other unit by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_weights: Option<StagingWeights>,
    /// When new reboot slots may be handed out (unset: at any time). A node
    /// already in a slot when a window closes finishes its reboot; staging
    /// goes on outside the windows, so that a node waits with its image
    /// downloaded and reboots as soon as a window opens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// Ranges of dates and times (a change freeze) when no new reboot slot
    /// is handed out, even inside a maintenance window; nodes in slots
    /// finish and staging goes on, as outside a window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub blackouts: Vec<Blackout>,
    /// Other pools, by name, that must be up to date on their current
    /// target before this pool hands out a new reboot slot (for example
    /// workers after infra). A pool that does not exist holds this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::depends_on")]
    pub depends_on: Vec<String>,
    /// Node groups in order: the first group's nodes take reboot slots
    /// first, the next group's once every node of the groups before runs
    /// the target; nodes in no group go last. Name order within a group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub order: Vec<NodeGroup>,
    /// While an alert that matches fires in Prometheus, no new reboot slot
    /// is handed out; a Prometheus that does not answer holds them too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_gate: Option<AlertGate>,
    /// While a node holds a reboot slot, the Alertmanager the pool names
    /// silences the node's alerts; the silence is expired when the node
    /// leaves its slot. A silence that cannot be made holds new slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silences: Option<Silences>,
    /// Canary steps (see the schema's description); unset: no steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::batches")]
    pub batches: Vec<IntOrString>,
    /// How long the rollout waits after each step of `batches`, every
    /// updated node healthy, before the next.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0, max = 86400))]
    pub soak_seconds: i64,
    /// The percentage of the updated nodes that must be healthy at the end
    /// of a step's soak for the rollout to go on (unset: 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub success_threshold: Option<i32>,
    /// How long a node may wait in each phase before the pool names it
    /// stuck (`Degraded/NodeStuck`), in place of the operator's defaults
    /// (docs/operations.md, "BootcNodeStuckInPhase"). Draining has its own,
    /// `drainTimeoutSeconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadlines: Option<PhaseDeadlines>,
}

/// `spec.rollout.deadlines`: each phase's deadline in seconds; an unset
/// one keeps the operator's default.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhaseDeadlines {
    /// Downloading the image (default 30 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub staging_seconds: Option<i64>,
    /// Approved, its daemon not yet rebooting it (default 10 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub approved_seconds: Option<i64>,
    /// Rebooting: in its slot and not Ready (default 10 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub rebooting_seconds: Option<i64>,
    /// Back from its reboot but not on the target, Degraded (default 5 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub not_on_target_seconds: Option<i64>,
    /// Its daemon silent: no status for the node's spec (default 5 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 604800))]
    pub daemon_silent_seconds: Option<i64>,
}

/// `spec.rollout.stagingWeights`: the stage unit's weights against the
/// host's other units (systemd's range, 1-10000); an unset one is 50.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagingWeights {
    /// `IOWeight=`: the download's share of the disk (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub io: Option<u32>,
    /// `CPUWeight=`: the download's share of the CPUs (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub cpu: Option<u32>,
}

impl StagingWeights {
    /// Each weight when the pool sets none: below the 100 systemd gives
    /// every other unit, so that the workloads' I/O goes first.
    pub const DEFAULT_WEIGHT: u32 = 50;

    /// `(IOWeight, CPUWeight)` for the stage unit, the defaults filled in.
    pub fn resolved(weights: Option<&StagingWeights>) -> (u32, u32) {
        let w = weights.copied().unwrap_or_default();
        let or_default = |v: Option<u32>| v.unwrap_or(Self::DEFAULT_WEIGHT);
        (or_default(w.io), or_default(w.cpu))
    }
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// `spec.rollout.alertGate`: the Prometheus to ask, by the name the
/// operator's admin gave it, and the alerts that hold the rollout.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.endpoint) != has(self.prometheusURL)",
    "message": "spec.rollout.alertGate needs exactly one of endpoint (the name of a Prometheus endpoint the operator is configured with) and the deprecated prometheusURL"
}]))]
pub struct AlertGate {
    /// The Prometheus endpoint to ask, by its name among those the
    /// operator is installed with (`--alert-gate-endpoint NAME=URL`, the
    /// chart's `controller.alertGateEndpoints`): the addresses are the
    /// admin's, never a pool's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::alert_endpoint_name")]
    pub endpoint: Option<String>,
    /// Deprecated: use `endpoint`. Accepted only when it is, exactly, the
    /// URL of an endpoint the operator is configured with (that endpoint
    /// is then asked); any other URL holds the rollout with a condition
    /// that says so, and nothing is asked.
    #[serde(
        rename = "prometheusURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "crate::schema::prometheus_url")]
    pub prometheus_url: Option<String>,
    /// PromQL label matchers a firing alert must all match to hold the
    /// rollout, such as `severity="critical"` or `alertname=~"Node.*"`
    /// (unset: any firing alert).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::alert_matchers")]
    pub matchers: Vec<String>,
}

/// `spec.rollout.silences`: while a node holds a reboot slot, an
/// Alertmanager silence of its alerts (those whose `nodeLabel` is the
/// node's name, and that match every one of `matchers`), made by the
/// operator at the Alertmanager the pool names among the admin's, and
/// expired when the node leaves its slot. Each silence ends by itself
/// within the hour unless renewed (a controller that stops leaves none for
/// long). A silence that cannot be made holds new slots (fail closed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Silences {
    /// The Alertmanager, by its name among those the operator is
    /// installed with (`--alertmanager-endpoint NAME=URL`, the chart's
    /// `controller.alertmanagerEndpoints`): the addresses are the admin's,
    /// never a pool's.
    #[schemars(schema_with = "crate::schema::alertmanager_endpoint_name")]
    pub endpoint: String,
    /// The alerts' label that names their node (unset: `node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::silence_node_label")]
    pub node_label: Option<String>,
    /// More label matchers every silenced alert must match, such as
    /// `severity!="critical"` (unset: every alert of the node); a value
    /// is taken as written, but for `\"` and `\\`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::silence_matchers")]
    pub matchers: Vec<String>,
}

impl Silences {
    /// The label that names an alert's node (unset: `node`, as
    /// kube-state-metrics and kube-prometheus's rules name it).
    pub fn node_label(&self) -> &str {
        self.node_label.as_deref().unwrap_or("node")
    }
}

/// Nodes of a pool that take their reboot slots together, in the order of
/// `spec.rollout.order`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroup {
    /// The group's nodes: those of the pool its labels match (a node in
    /// several groups belongs to the first).
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub selector: LabelSelector,
}

/// What a failed drain does to its node (`spec.rollout.onDrainTimeout`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DrainTimeoutPolicy {
    /// The node keeps its slot, cordoned, and the drain is tried again.
    #[default]
    Retry,
    /// The node is uncordoned, its slot freed, and it is skipped for this
    /// target (a new target or `kubectl bootc retry NODE` clears it).
    Release,
}

/// A time of the week when the pool's nodes may be given reboot slots.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// The days it opens on, in its time zone (unset: every day).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 7))]
    pub days: Vec<Weekday>,
    /// When it opens, `HH:MM` on a 24-hour clock in its time zone. On a day
    /// a daylight-saving change skips that time, it opens when the clock
    /// jumps; on a day the clock goes back, at the first of the two.
    #[schemars(regex(pattern = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// How long it stays open (elapsed time): hours and minutes such as
    /// `4h`, `90m` or `1h30m`; more than zero, at most `168h` (a week).
    #[schemars(schema_with = "crate::schema::window_duration")]
    pub duration: String,
    /// An IANA time zone such as `Europe/Paris` (unset: UTC). The
    /// controller carries its own time-zone database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_+/-]+$"))]
    pub time_zone: Option<String>,
}

/// A range of wall-clock dates and times when no new reboot slot is
/// handed out (`spec.rollout.blackouts`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.end > self.start",
    "message": "a blackout's end must come after its start"
}]))]
pub struct Blackout {
    /// When it begins, `YYYY-MM-DDTHH:MM` in its time zone. A time the
    /// clock skips (daylight saving) begins when the clock jumps; a time
    /// it passes twice, the first time.
    #[schemars(schema_with = "crate::schema::civil_date_time")]
    pub start: String,
    /// When it ends (new slots again), `YYYY-MM-DDTHH:MM` in its time
    /// zone, after `start`.
    #[schemars(schema_with = "crate::schema::civil_date_time")]
    pub end: String,
    /// An IANA time zone such as `Europe/Paris` (unset: UTC). The
    /// controller carries its own time-zone database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_+/-]+$"))]
    pub time_zone: Option<String>,
}

/// A day of the week.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Weekday {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Default for RolloutSpec {
    fn default() -> Self {
        RolloutSpec {
            max_unavailable: default_max_unavailable(),
            max_unhealthy: None,
            paused: false,
            paused_until: None,
            drain_timeout_seconds: DEFAULT_DRAIN_TIMEOUT_SECONDS,
            on_drain_timeout: DrainTimeoutPolicy::default(),
            max_concurrent_staging: None,
            stage_ahead: None,
            staging_weights: None,
            maintenance_windows: Vec::new(),
            blackouts: Vec::new(),
            depends_on: Vec::new(),
            order: Vec::new(),
            alert_gate: None,
            silences: None,
            batches: Vec::new(),
            soak_seconds: 0,
            success_threshold: None,
            deadlines: None,
        }
    }
}

fn default_max_unavailable() -> IntOrString {
    IntOrString::Int(1)
}

fn default_drain_timeout() -> i64 {
    DEFAULT_DRAIN_TIMEOUT_SECONDS
}

/// An explicit null (`maxUnavailable:` with no value in YAML) means the
/// default. The schema is not nullable, so the API server drops such a null
/// and defaults the field; this covers objects stored under an older schema,
/// which a watcher must still be able to read (one object it cannot parse
/// fails its whole LIST).
fn max_unavailable_or_default<'de, D>(deserializer: D) -> Result<IntOrString, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<IntOrString>::deserialize(deserializer)?.unwrap_or_else(default_max_unavailable))
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionSpec {
    #[serde(default)]
    pub reboot_policy: RebootPolicy,
    /// Pods that keep their node from rebooting: a node that runs one takes
    /// no new reboot slot (a node already in a slot goes on: its drain
    /// evicts such a pod like any other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_pods: Option<BlockingPods>,
}

/// `spec.disruption.blockingPods`: which pods keep their node from taking
/// a reboot slot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockingPods {
    /// The pods' labels. Only pods bound to a node and not finished
    /// (neither Succeeded nor Failed) count.
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub selector: LabelSelector,
    /// The namespaces they may run in, by the namespaces' labels (unset:
    /// every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub namespace_selector: Option<LabelSelector>,
}

/// May a node use a soft reboot (userspace restart) when bootc says the
/// staged deployment allows it?
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RebootPolicy {
    /// Always a full reboot.
    #[default]
    RebootOnly,
    /// `--soft-reboot=auto`: soft when possible, full otherwise.
    AllowSoftReboot,
}

/// A Secret by name and namespace.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodePoolStatus {
    /// The pool generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The digest being rolled out (from the ref, or resolved from its tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_digest: Option<String>,
    /// `repository@targetDigest`: what the BootcNodes are told to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_image: Option<String>,
    /// For a multi-arch target (an index), the digests of its linux
    /// platform manifests: a node reporting one of them runs the target
    /// (a host installed from the index's tag reports its platform's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub target_platform_digests: Vec<String>,
    /// The kubelet version the target declares
    /// (`dev.bootc.kubelet.version`), checked against the API server's
    /// version skew policy before any node was told; absent when it
    /// declares none (condition `KubeletSkewChecked` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub target_kubelet_version: Option<String>,
    /// The target as a person reads it: the version bootc reports for it
    /// (once a member runs it) and the digest's first 12 hex digits, e.g.
    /// `2.0 (sha256:4f1c2a3b4c5d)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_summary: Option<String>,
    /// The last digest every member was running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_digest: Option<String>,
    /// targetDigest differs from deployedDigest.
    #[serde(default)]
    pub update_available: bool,
    #[serde(default)]
    pub node_count: i32,
    #[serde(default)]
    pub updated_count: i32,
    #[serde(default)]
    pub updating_count: i32,
    #[serde(default)]
    pub degraded_count: i32,
    /// While nodes wait for a maintenance window or for a blackout
    /// (`spec.rollout.blackouts`) to end: when new reboot slots may next be
    /// handed out (the first instant inside a window and outside every
    /// blackout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_maintenance_window: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Images that failed their health gate (`spec.health`), newest first
    /// (at most 10). The one for the current image reference and target
    /// digest holds the rollout: no node is given that image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub failed_images: Vec<FailedImage>,
    /// The canary step of `spec.rollout.batches` for the target, while
    /// there are steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchStatus>,
    /// The pool's last rollouts, newest first (at most 10): what
    /// `kubectl bootc history` shows after the Events expire.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub rollouts: Vec<RolloutRecord>,
    /// The pools of `spec.rollout.dependsOn` that exist, each with its uid
    /// and creation time: who the names are now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub dependencies: Vec<PoolDependency>,
}

/// One rollout of a target (`status.rollouts`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    pub digest: String,
    /// `repository@digest`.
    pub image: String,
    /// For an index, the digests of its linux platform manifests
    /// (`status.targetPlatformDigests` of then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub platform_digests: Vec<String>,
    pub started: Time,
    /// Members not on the image when it started.
    pub nodes: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RolloutOutcome>,
    /// Members on the image when it ended.
    #[serde(default)]
    pub updated: i32,
    /// Members that failed their health gate on it.
    #[serde(default)]
    pub failed: i32,
}

/// How a rollout ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RolloutOutcome {
    /// Every member runs the image.
    Completed,
    /// The pool got another image first.
    Superseded,
    /// A node failed its health gate: the image is given to no node.
    Failed,
}

/// Where the rollout of the target stands in `spec.rollout.batches`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchStatus {
    /// The target digest it is for: a new one starts at the first step.
    pub digest: String,
    /// The step in force (0: the first; the number of steps once past the
    /// last): how many members may have been updated, `limit`.
    pub step: i32,
    pub limit: i32,
    /// Since when the step's nodes are all updated: the soak's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soaking_since: Option<Time>,
    /// Updated members healthy, of how many updated.
    pub healthy: i32,
    pub updated: i32,
}

/// A pool that `spec.rollout.dependsOn` names, as found: which object the
/// name is now (pool names are first come, first served: one created after
/// this pool shows as such).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolDependency {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Time>,
}

/// An image a node failed its health gate on.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedImage {
    /// `spec.image.ref` when it failed: a new reference clears the mark.
    #[serde(rename = "ref")]
    pub reference: String,
    pub digest: String,
    /// The node that failed.
    pub node: String,
    /// The check that failed, as the node's message names it.
    pub check: String,
    pub at: Time,
}

/// One managed node. Named after its Node; owned by its pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "node.bootc.dev",
    version = "v1alpha1",
    kind = "BootcNode",
    plural = "bootcnodes",
    singular = "bootcnode",
    shortname = "bn",
    category = "bootc",
    status = "BootcNodeStatus",
    // `kubectl get bn` fits 120 columns: the node's pool, its phase and
    // since when, whether it holds a reboot slot, what it may do (Staged:
    // stage only; Booted: reboot into the image), the version bootc reports.
    // `-o wide` adds the full image references.
    printcolumn = r#"{"name":"Pool","type":"string","jsonPath":".metadata.ownerReferences[0].name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.conditions[?(@.type==\"Idle\")].reason"}"#,
    printcolumn = r#"{"name":"Since","type":"date","jsonPath":".status.conditions[?(@.type==\"Idle\")].lastTransitionTime","description":"When the node entered its phase"}"#,
    printcolumn = r#"{"name":"Allowed","type":"string","jsonPath":".spec.desiredImageState","description":"Staged: stage only; Booted: approved to reboot"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.booted.version","description":"The booted image's version label"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Desired","type":"string","priority":1,"jsonPath":".spec.desiredImage"}"#,
    printcolumn = r#"{"name":"Booted","type":"string","priority":1,"jsonPath":".status.booted.image"}"#,
    printcolumn = r#"{"name":"Staged","type":"string","priority":1,"jsonPath":".status.staged.image"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.pullSecretRef) || !has(self.pullSecretHash)",
    "message": "pullSecretHash names a version of pullSecretRef: it needs pullSecretRef"
}]))]
pub struct BootcNodeSpec {
    /// `repository@sha256:<digest>`: the image this node should run.
    #[schemars(schema_with = "crate::schema::digest_ref")]
    pub desired_image: Shared,
    /// Staged: download and lock only. Booted: apply the staged image (reboot).
    #[serde(default)]
    pub desired_image_state: DesiredImageState,
    /// Copied from the pool: may the daemon ask for a soft reboot?
    #[serde(default)]
    pub reboot_policy: RebootPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret_ref: Option<SecretReference>,
    /// The version of the pull secret (`<uid>/<resourceVersion>`, not a
    /// hash of its content), so that a rotation reaches the daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub pull_secret_hash: Option<String>,
    /// Copied from the pool's `spec.rollout.stagingWeights`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_weights: Option<StagingWeights>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DesiredImageState {
    #[default]
    Staged,
    Booted,
}

impl DesiredImageState {
    /// The value on the wire (and in `kubectl get bn`).
    pub const fn as_str(self) -> &'static str {
        match self {
            DesiredImageState::Staged => "Staged",
            DesiredImageState::Booted => "Booted",
        }
    }
}

/// Written by the daemon from `bootc status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootcNodeStatus {
    /// The BootcNode generation this status answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booted: Option<BootEntryStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<BootEntryStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<BootEntryStatus>,
    /// The host's kernel boot id: changes on every full reboot (a systemd
    /// soft reboot keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// False when this bootc cannot stage without applying (no
    /// `--download-only`): staging then is not locked against a reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_only_supported: Option<bool>,
    /// The host's own automatic updaters that are on (enabled, linked or
    /// active), by systemd unit: `bootc-fetch-apply-updates.timer`,
    /// `rpm-ostreed-automatic.timer`, `zincati.service`. Each would reboot
    /// the node outside any reboot slot, so the controller gives the node no
    /// new image while one is listed: mask it in the OS image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub host_updaters: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The node's updates, newest first (at most 10), written by its daemon
    /// (see [`crate::node_history`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub history: Vec<NodeUpdate>,
    /// The daemon's Landlock sandbox as the node's kernel let it install it
    /// at start: a node running without it is visible here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<LandlockStatus>,
    /// The daemon that writes this status: its build and the BootcNode
    /// contract it speaks. The controller tells a new image, and gives the
    /// approval to boot, only to a daemon whose contract it drives
    /// ([`crate::daemon_contract`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonStatus>,
}

/// The daemon on a node, as it reports itself (`status.daemon`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// Its build (the bootc-daemon version).
    #[schemars(length(max = 64))]
    pub version: String,
    /// The BootcNode contract it speaks: what it reads in a spec and means
    /// by what it writes in a status. Raised when either changes in a way
    /// the other side must know.
    #[schemars(range(min = 0))]
    pub contract: i32,
}

/// The daemon's Landlock sandbox on its node (`status.landlock`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LandlockStatus {
    pub state: LandlockState,
    /// The kernel's Landlock ABI version, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abi: Option<i32>,
    /// Why it is not (fully) enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub message: Option<String>,
}

/// How much of the daemon's Landlock ruleset the kernel enforces.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum LandlockState {
    /// Every restriction the daemon asks for.
    Enforced,
    /// Some of them (an older Landlock ABI).
    Partial,
    /// None: the kernel has no Landlock, or it is not enabled at boot; the
    /// seccomp filter still refuses every open for writing.
    Unavailable,
}

/// One update of a node (`status.history`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeUpdate {
    /// The reference bootc was given.
    pub image: String,
    /// The manifest digest bootc deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The image's version label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// When the daemon reported it staged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<Time>,
    /// When the daemon reported it booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booted: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<UpdateOutcome>,
    /// The check a failed health gate names, or why the node was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How one update of a node ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum UpdateOutcome {
    /// It booted the image.
    Updated,
    /// It booted back an image it ran before.
    RolledBack,
    /// It failed its health gate on the image.
    Failed,
    /// Its drain failed: the image was skipped on it.
    Skipped,
}

/// One bootc deployment (booted, staged or rollback).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootEntryStatus {
    /// The image reference bootc was told to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Shared>,
    /// The manifest digest actually deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<Shared>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Shared>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Shared>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Shared>,
    #[serde(default)]
    pub soft_reboot_capable: bool,
    /// The deployment has local changes bootc cannot manage.
    #[serde(default)]
    pub incompatible: bool,
    /// Staged but locked: an unexpected reboot will not apply it.
    #[serde(default)]
    pub download_only: bool,
}

/// The reasons of the controller's Events about a pool. A rollout tells its
/// story in two Normal events about the pool, when it starts and when it is
/// complete; the others are Warnings about something that needs attention, a
/// retry after one, or a node leaving the pool. A healthy node's update has
/// no event of its own: its steps are the BootcNode's state (`kubectl get
/// bn`), and per-node events would cost two API writes per node, beyond the
/// write budget (BENCHMARKS.md, the targets).
pub mod event_reasons {
    /// The pool has a new target that some members do not run yet.
    pub const ROLLOUT_STARTED: &str = "RolloutStarted";
    /// Every member runs the target.
    pub const ROLLOUT_COMPLETE: &str = "RolloutComplete";
    pub const ROLLOUT_HALTED: &str = "RolloutHalted";
    /// A drain starts again after it failed.
    pub const DRAIN_RETRIED: &str = "DrainRetried";
    pub const DRAIN_FAILED: &str = "DrainFailed";
    /// A PodDisruptionBudget refused an eviction; the drain retries.
    pub const DRAIN_BLOCKED: &str = "DrainBlocked";
    pub const NODE_LEFT: &str = "NodeLeft";
    /// A node passed its phase's deadline (see the controller's `stuck`).
    pub const NODE_STUCK: &str = "NodeStuck";
    /// A node failed its health gate (`spec.health`) on the target.
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
}

impl BootEntryStatus {
    /// Is this deployment the image `desired` (`repository@digest`)?
    ///
    /// bootc records both the reference it was given and the digest of the
    /// manifest it deployed. For a multi-arch image the reference carries
    /// the index digest while `imageDigest` is the per-platform manifest
    /// digest, so either matching counts.
    pub fn is_image(&self, desired: &str) -> bool {
        if self.image.as_deref() == Some(desired) {
            return true;
        }
        match (
            crate::image_ref::digest_of(desired),
            self.image_digest.as_deref(),
        ) {
            (Some(want), Some(have)) => want == have,
            _ => false,
        }
    }

    /// Is this deployment `desired`, or, `desired` naming an index, one of
    /// the index's platform manifests (`platform_digests`, as the registry
    /// lists them)? bootc deploys the platform's manifest of an index and
    /// reports its digest; a host installed from a tag reports the tag, so
    /// neither its reference nor its digest is the index's
    /// ([`Self::is_image`] alone would have it boot what it runs).
    pub fn is_image_or_platform(&self, desired: &str, platform_digests: &[String]) -> bool {
        self.is_image(desired)
            || self
                .image_digest
                .as_ref()
                .is_some_and(|have| platform_digests.iter().any(|d| d == have))
    }

    /// The image this deployment runs, as the controller writes an image:
    /// `repository@imageDigest`, the repository of bootc's `image`.
    ///
    /// bootc's `image` is the reference it was given, as given: a tag for
    /// a host installed from one (`quay.io/fedora/fedora-bootc:42`), a
    /// digest, both, or an index's digest; `imageDigest` is the manifest
    /// it deployed (for an index, the platform's manifest). A BootcNode's
    /// `desiredImage` must be `repository@sha256:…` (the schema refuses
    /// anything else, and a tag would move under the node), so the one
    /// reference that names exactly this deployment is its repository
    /// pinned to `imageDigest`; the daemon takes it as the image it runs
    /// ([`Self::is_image`] matches by digest), so it stages nothing. None
    /// when bootc reports no sha256 digest or an image that does not
    /// parse: the caller keeps a value it knows to be valid rather than
    /// write a guess.
    pub fn pinned_image(&self) -> Option<String> {
        let digest = self
            .image_digest
            .as_deref()
            .filter(|d| crate::image_ref::is_sha256_digest(d))?;
        let image = crate::image_ref::ImageRef::parse(self.image.as_deref()?).ok()?;
        Some(image.pinned(digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const AMD64: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn staging_weights_fill_in_what_the_pool_leaves_unset() {
        let w = |io, cpu| Some(StagingWeights { io, cpu });
        #[rustfmt::skip]
        let rows = [
            (None, (50, 50)),
            (w(None, None), (50, 50)),
            (w(Some(10), None), (10, 50)),
            (w(None, Some(10_000)), (50, 10_000)),
            (w(Some(1), Some(200)), (1, 200)),
        ];
        for (weights, want) in rows {
            assert_eq!(
                StagingWeights::resolved(weights.as_ref()),
                want,
                "{weights:?}"
            );
        }
    }

    #[test]
    fn desired_image_state_names_its_wire_value() {
        for state in [DesiredImageState::Staged, DesiredImageState::Booted] {
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
    }

    #[test]
    fn multi_arch_digest_comparison() {
        let desired = format!("quay.io/acme/os@{INDEX}");
        let booted_from_index = BootEntryStatus {
            image: Some(desired.as_str().into()),
            image_digest: Some(AMD64.into()),
            ..Default::default()
        };
        assert!(
            booted_from_index.is_image(&desired),
            "index pullspec, per-platform digest"
        );
        let booted_by_manifest = BootEntryStatus {
            image: Some("quay.io/acme/os:prod".into()),
            image_digest: Some(AMD64.into()),
            ..Default::default()
        };
        assert!(booted_by_manifest.is_image(&format!("quay.io/acme/os@{AMD64}")));
        assert!(!booted_by_manifest.is_image(&desired));
        assert!(!BootEntryStatus::default().is_image(&desired));
        // Installed from the index's tag: its platform's manifest is one of
        // the index's.
        let platforms = [AMD64.to_owned()];
        assert!(booted_by_manifest.is_image_or_platform(&desired, &platforms));
        assert!(!booted_by_manifest.is_image_or_platform(&desired, &[]));
        assert!(!BootEntryStatus::default().is_image_or_platform(&desired, &platforms));
    }

    #[test]
    fn a_deployment_is_pinned_to_the_digest_bootc_deployed() {
        let entry = |image: Option<&str>, digest: Option<&str>| BootEntryStatus {
            image: image.map(Into::into),
            image_digest: digest.map(Into::into),
            ..Default::default()
        };
        let pinned = Some(format!("quay.io/acme/os@{AMD64}"));
        let tagged_digest = format!("quay.io/acme/os:prod@{INDEX}");
        let index = format!("quay.io/acme/os@{INDEX}");
        // (what, bootc's image, its imageDigest, the image written)
        let rows = [
            (
                "a tag",
                Some("quay.io/acme/os:prod"),
                Some(AMD64),
                pinned.clone(),
            ),
            (
                "a tag and a digest",
                Some(tagged_digest.as_str()),
                Some(AMD64),
                pinned.clone(),
            ),
            (
                "an index's digest",
                Some(index.as_str()),
                Some(AMD64),
                pinned.clone(),
            ),
            (
                "a registry with a port",
                Some("localhost:5000/os:1"),
                Some(AMD64),
                Some(format!("localhost:5000/os@{AMD64}")),
            ),
            ("no digest", Some("quay.io/acme/os:prod"), None, None),
            (
                "not a sha256 digest",
                Some("quay.io/acme/os:prod"),
                Some("sha256:22"),
                None,
            ),
            ("no image", None, Some(AMD64), None),
            (
                "an image that does not parse",
                Some("oci:/var/os"),
                Some(AMD64),
                None,
            ),
        ];
        for (what, image, digest, want) in rows {
            assert_eq!(entry(image, digest).pinned_image(), want, "{what}");
        }
    }
}
