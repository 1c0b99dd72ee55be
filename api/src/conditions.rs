//! Helpers for standard Kubernetes conditions, and their vocabulary: the
//! condition types ([`ConditionType`]) and the condition reasons
//! ([`Reason`]), as in the architecture note. Two enums, so that a type is
//! never passed where a reason belongs.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{self as meta, Time};
use serde::{Deserialize, Serialize};

use crate::Shared;

/// A condition of a pool or a BootcNode: Kubernetes' `metav1.Condition`,
/// field for field and in the CRDs' schema, with its strings [`Shared`]: a
/// pool's BootcNodes mostly say the same things (the same types, statuses,
/// reasons and messages), which a controller caching 20,000 of them then
/// holds once.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    pub last_transition_time: Time,
    #[serde(default)]
    pub message: Shared,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub reason: Shared,
    #[serde(default)]
    pub status: Shared,
    #[serde(default, rename = "type")]
    pub type_: Shared,
}

/// Kubernetes' own schema of a condition.
impl schemars::JsonSchema for Condition {
    fn inline_schema() -> bool {
        <meta::Condition as schemars::JsonSchema>::inline_schema()
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        <meta::Condition as schemars::JsonSchema>::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <meta::Condition as schemars::JsonSchema>::json_schema(generator)
    }
}

/// An enum of wire strings: each variant with its string, `ALL` listing
/// every variant (generated, so none is forgotten), `as_str`, `parse`,
/// `Display`, and equality with the strings of a stored `Condition`.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $wire:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every variant, in the order of declaration.
            pub const ALL: &[Self] = &[$(Self::$variant),*];

            /// The string on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }

            /// The variant whose wire string is `s` (case matters), if any:
            /// for what is read back from the cluster.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        // A stored `Condition` holds strings: it compares with a variant
        // through the variant's wire string.
        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<$name> for crate::Shared {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }
    };
}

wire_enum! {
    /// The type of a condition of a BootcNodePool or a BootcNode.
    pub enum ConditionType {
        UpToDate = "UpToDate",
        Degraded = "Degraded",
        Idle = "Idle",

        // Pool conditions for GitOps tools (kstatus: Flux, Argo CD,
        // cli-utils), derived from UpToDate and Degraded. Reconciling and
        // Stalled are "abnormal-true": False when all is well. Their reasons
        // are those of the condition they come from.
        /// True when every member runs the target and nothing is degraded.
        Ready = "Ready",
        /// True while a rollout is making progress (kstatus: InProgress).
        Reconciling = "Reconciling",
        /// True while the pool is Degraded: progress needs a person (kstatus:
        /// Failed).
        Stalled = "Stalled",
        /// Whether the target's kubelet was checked against the API server's
        /// version skew policy: False (`KubeletUndeclared`) when the image
        /// declares no kubelet version (`crate::image_labels::KUBELET_VERSION`).
        /// Present while the pool has a target.
        KubeletSkewChecked = "KubeletSkewChecked",
    }
}

wire_enum! {
    /// The reason of a condition (of any [`ConditionType`]).
    pub enum Reason {
        // Pool UpToDate reasons.
        AllUpdated = "AllUpdated",
        RolloutInProgress = "RolloutInProgress",
        Paused = "Paused",
        /// Nodes wait for a maintenance window (`status.nextMaintenanceWindow`
        /// says when the next opens).
        OutsideMaintenanceWindow = "OutsideMaintenanceWindow",
        /// The pool is paused until `spec.rollout.pausedUntil` (the message
        /// says when it goes on by itself).
        PausedUntil = "PausedUntil",
        /// The fleet is stopped (`kubectl bootc stop --all`, the
        /// `bootc.dev/stop` annotation on the operator's Namespace): no pool
        /// hands out a new slot.
        FleetStopped = "FleetStopped",
        /// The pool is being deleted with `spec.onDelete: Finish`: the
        /// nodes in reboot slots finish, no new slot is handed out.
        PoolDeleting = "PoolDeleting",
        /// A blackout of `spec.rollout.blackouts` holds new slots
        /// (`status.nextMaintenanceWindow` says when they may go on).
        Blackout = "Blackout",
        /// The pools of `spec.rollout.dependsOn` are not all up to date (the
        /// message names them).
        WaitingForDependencies = "WaitingForDependencies",
        /// Alerts that `spec.rollout.alertGate` matches fire (the message
        /// names them).
        AlertFiring = "AlertFiring",
        /// A gate (`spec.rollout.alertGate`, `spec.disruption.blockingPods`)
        /// could not be checked: no new slot (fail closed; the message says
        /// why).
        GateUnanswered = "GateUnanswered",

        // Pool Degraded reasons.
        NodeConflict = "NodeConflict",
        NodeDegraded = "NodeDegraded",
        RolloutHalted = "RolloutHalted",
        /// `spec.rollout.dependsOn` leads back to the pool (the message names
        /// the cycle): no new slot until a person breaks it.
        DependencyCycle = "DependencyCycle",
        /// A node failed its health gate (`spec.health`) on the target and
        /// keeps its slot (`onFailure: Halt`): no node is given the image.
        HealthCheckFailed = "HealthCheckFailed",
        /// A node failed its health gate on the target and was booted back
        /// into the image it ran before (`onFailure: Rollback`): no node is
        /// given the image.
        RolledBack = "RolledBack",
        /// A canary step of `spec.rollout.batches` ended its soak with fewer
        /// healthy updated nodes than `successThreshold` (the message names
        /// them): no new slot until enough are healthy again.
        BatchFailed = "BatchFailed",
        /// A node past its phase's deadline (the message names the node, the
        /// phase, for how long, and the next step).
        NodeStuck = "NodeStuck",
        /// A member's daemon pod cannot run (crash-looping, its image not
        /// pulled): the message names the node, the pod and the kubelet's
        /// reason.
        DaemonNotRunning = "DaemonNotRunning",
        InvalidSpec = "InvalidSpec",
        /// The pull Secret is not a docker config (a pool-wide credentials
        /// problem: reported on the pool, not passed to the nodes).
        InvalidPullSecret = "InvalidPullSecret",
        /// `spec.pullSecretRef` names a Secret that does not exist (ranked
        /// before the registry's 401 that it causes).
        PullSecretNotFound = "PullSecretNotFound",
        /// `spec.pullSecretRef` names a Secret that does not opt in to the
        /// pool (its `bootc.dev/pools` annotation does not list it): not used.
        PullSecretNotAllowed = "PullSecretNotAllowed",
        /// Degraded is False: nothing wrong (a pool's and a BootcNode's).
        Healthy = "Healthy",
        /// A drain did not finish within `drainTimeoutSeconds` (also the
        /// controller's `drain_failed` metric reason).
        DrainTimedOut = "DrainTimedOut",
        /// A member's host runs its own automatic updater
        /// ([`crate::host_updaters`]), which would reboot it outside any
        /// reboot slot: it is given no new image until its OS image masks
        /// the unit (the message names the node, the unit and the fix).
        HostUpdaterEnabled = "HostUpdaterEnabled",
        /// bootc reports a deployment it cannot update from an image (see
        /// [`crate::unmanageable`]): one it marks incompatible
        /// (local rpm-ostree changes), or a booted one with no container
        /// image or no digest. A BootcNode's Degraded reason, in bootc's
        /// words, and the pool's naming the node: it is given no new image
        /// and no reboot slot until a person repairs the host.
        HostIncompatible = "HostIncompatible",
        /// A member's daemon speaks a contract older than any this
        /// controller drives ([`crate::daemon_contract`]): it is told no new
        /// image and not approved to boot until its DaemonSet pod is
        /// upgraded (the message names the node and its daemon's build).
        DaemonTooOld = "DaemonTooOld",
        /// A member's daemon speaks a contract newer than this controller's:
        /// held the same way until the controller is upgraded.
        DaemonTooNew = "DaemonTooNew",

        // Pool Degraded reasons of the target's resolution (the registry's
        // answer for the pool's image).
        /// The tag has no digest yet (not resolved, or the resolution
        /// returned none).
        TagNotResolved = "TagNotResolved",
        /// The image has no manifest for one of the members' architectures.
        UnsupportedArchitecture = "UnsupportedArchitecture",
        /// The image is not a bootc image: its config lacks the label
        /// `containers.bootc=1` (`crate::image_labels`).
        ImageNotBootable = "ImageNotBootable",
        /// The image changes the OS family or major version the members
        /// run, and the pool does not allow it (`spec.image.allowMajorUpgrade`).
        OsMajorChange = "OsMajorChange",
        /// The image's kubelet (`crate::image_labels::KUBELET_VERSION`)
        /// breaks Kubernetes' version skew policy against the API server
        /// (newer than it, or more than three minor versions older), or its
        /// version cannot be read: the message quotes the policy.
        KubeletSkew = "KubeletSkew",
        /// KubeletSkewChecked True: the target's kubelet is within the
        /// policy.
        KubeletWithinSkew = "KubeletWithinSkew",
        /// KubeletSkewChecked False: the target declares no kubelet version,
        /// so its skew is not checked (nothing is refused for it).
        KubeletUndeclared = "KubeletUndeclared",
        /// The registry's manifest could not be read.
        InvalidManifest = "InvalidManifest",
        /// Any other registry failure.
        RegistryError = "RegistryError",
        /// The registry answered with a certificate the controller does not
        /// trust (an unknown issuer, an expired or mismatched certificate):
        /// reached, but not trusted. The message names the registry and the
        /// CA to add (`--registry-ca-dir`, the chart's `registryCA`).
        RegistryUntrusted = "RegistryUntrusted",
        /// The admin's registries.conf (`--registries-conf`, the ConfigMap
        /// `bootc-registries`) blocks the image's registry (`blocked =
        /// true`): the message names the table's prefix.
        RegistryBlocked = "RegistryBlocked",
        /// The admin's registries.conf cannot be read or parsed: the
        /// message names the file and the error. No pool resolves until it
        /// is put right (a rule is never half applied).
        InvalidRegistriesConf = "InvalidRegistriesConf",
        /// The admin's signature policy (containers-policy.json(5),
        /// `--signature-policy`, the ConfigMap `bootc-signature-policy`)
        /// refuses the target: its scope says `reject`, or `sigstoreSigned`
        /// and the image has no signature that the scope's key verifies for
        /// its digest and repository. The message names the scope and why.
        /// Checked before any node is told; the previous target is kept.
        SignatureRefused = "SignatureRefused",
        /// The admin's signature policy cannot be read or parsed: the
        /// message names the file, the field and its value. No pool
        /// resolves until it is put right (fail closed).
        InvalidSignaturePolicy = "InvalidSignaturePolicy",

        // BootcNode Idle reasons: the wire strings of `crate::DaemonPhase`
        // (`DaemonPhase::reason`; read and match the phase, not these).
        /// [`crate::DaemonPhase::Idle`].
        Idle = "Idle",
        /// [`crate::DaemonPhase::Staging`].
        Staging = "Staging",
        /// [`crate::DaemonPhase::Staged`].
        Staged = "Staged",
        /// [`crate::DaemonPhase::Rebooting`].
        Rebooting = "Rebooting",

        // BootcNode Degraded reasons.
        Error = "Error",
        /// bootc could not find the image in its registry (404, manifest
        /// unknown).
        ImageNotFound = "ImageNotFound",
        /// The registry refused the host's credentials (401).
        RegistryUnauthorized = "RegistryUnauthorized",
        /// The host could not reach the registry.
        RegistryUnreachable = "RegistryUnreachable",
        /// Not enough disk space on the host for the image.
        InsufficientSpace = "InsufficientSpace",
        /// bootc says this host is not a bootc host (not booted via bootc, or
        /// a container).
        NotABootcHost = "NotBootcHost",
        /// `bootc status` failed on the host (a broken bootc): the daemon
        /// cannot tell what the host runs, so it does nothing until it can.
        BootcStatusFailed = "BootcStatusFailed",
    }
}

wire_enum! {
    /// Where a pool's member stands, and why, as the planner decides it
    /// once for everything that renders it (`rollout::Standing`): the kinds,
    /// as the metrics' `standing` label and `kubectl bootc status -o json`
    /// name them.
    pub enum StandingKind {
        UpToDate = "UpToDate",
        OnTargetDegraded = "OnTargetDegraded",
        InConflict = "InConflict",
        HostUpdaters = "HostUpdaters",
        HostIncompatible = "HostIncompatible",
        DaemonSkew = "DaemonSkew",
        FailedHealth = "FailedHealth",
        TargetFailed = "TargetFailed",
        NotTold = "NotTold",
        DaemonDown = "DaemonDown",
        DaemonBehind = "DaemonBehind",
        Staging = "Staging",
        Degraded = "Degraded",
        Told = "Told",
        Skipped = "Skipped",
        Held = "Held",
        BlockingPod = "BlockingPod",
        Unfit = "Unfit",
        FleetStopped = "FleetStopped",
        PoolDeleting = "PoolDeleting",
        Paused = "Paused",
        PausedUntil = "PausedUntil",
        Halted = "Halted",
        WaitingForDependencies = "WaitingForDependencies",
        OrderUnreadable = "OrderUnreadable",
        WaitingForTurn = "WaitingForTurn",
        CanaryStep = "CanaryStep",
        Gated = "Gated",
        OutsideWindow = "OutsideWindow",
        Blackout = "Blackout",
        NoSlots = "NoSlots",
        WaitingForBudget = "WaitingForBudget",
        WaitingForSlot = "WaitingForSlot",
        TakingSlot = "TakingSlot",
        Draining = "Draining",
        StagingInSlot = "StagingInSlot",
        HeldByPause = "HeldByPause",
        HeldByFleetStop = "HeldByFleetStop",
        Approved = "Approved",
        Rebooting = "Rebooting",
        RebootFailed = "RebootFailed",
        Proving = "Proving",
        ComingBack = "ComingBack",
        FailedInSlot = "FailedInSlot",
    }
}

impl Reason {
    /// A guard's refusal of a new target (the previous one kept, no node
    /// told): what `kubectl bootc why` names for every member while it
    /// holds.
    pub fn refuses_target(self) -> bool {
        matches!(
            self,
            Reason::ImageNotBootable
                | Reason::OsMajorChange
                | Reason::KubeletSkew
                | Reason::SignatureRefused
                | Reason::UnsupportedArchitecture
        )
    }
}

/// A condition as a decision makes it, before timestamps are attached.
/// Made only by [`ConditionUpdate::new`], which escapes the message's
/// control characters ([`crate::text::escape_controls`]): a message may
/// carry text from outside (a registry, Prometheus, a pool's own fields),
/// and the one place every status condition is made is where it is made
/// safe to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub type_: ConditionType,
    pub status: bool,
    pub reason: Reason,
    pub message: String,
}

impl ConditionUpdate {
    pub fn new(
        type_: ConditionType,
        status: bool,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        let message: String = message.into();
        ConditionUpdate {
            type_,
            status,
            reason,
            message: crate::text::escape_controls(&message).into_owned(),
        }
    }
}

/// The condition of `type_`, if present.
pub fn find(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

/// Is the condition of `type_` present with status "True"?
pub fn is_true(conditions: &[Condition], type_: ConditionType) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// The reason of the condition of `type_`, if present.
pub fn reason(conditions: &[Condition], type_: ConditionType) -> Option<&str> {
    find(conditions, type_).map(|c| c.reason.as_str())
}

/// The message of the condition of `type_`, if present.
pub fn message(conditions: &[Condition], type_: ConditionType) -> Option<&str> {
    find(conditions, type_).map(|c| c.message.as_str())
}

fn status_str(status: bool) -> &'static str {
    if status { "True" } else { "False" }
}

/// Does `update` differ from what `conditions` already say (ignoring times)?
pub fn differs(
    conditions: &[Condition],
    update: &ConditionUpdate,
    generation: Option<i64>,
) -> bool {
    match find(conditions, update.type_) {
        None => true,
        Some(c) => {
            c.status != status_str(update.status)
                || c.reason != update.reason.as_str()
                || c.message != update.message
                || c.observed_generation != generation
        }
    }
}

/// Applies `update`, keeping `lastTransitionTime` unless the status flips.
/// Returns whether anything changed.
pub fn apply(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    apply_with(conditions, update, generation, now, false)
}

/// Like [`apply`], but `lastTransitionTime` also moves when the reason
/// changes: for a condition whose reason is a phase (the BootcNode's `Idle`:
/// Staging, Staged, Rebooting), so that its time says since when the node
/// is in its phase (`kubectl get bn` shows it).
pub fn apply_phase(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    apply_with(conditions, update, generation, now, true)
}

fn apply_with(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    generation: Option<i64>,
    now: &Time,
    reason_is_phase: bool,
) -> bool {
    if !differs(conditions, update, generation) {
        return false;
    }
    let status = status_str(update.status);
    match conditions
        .iter_mut()
        .find(|c| c.type_ == update.type_.as_str())
    {
        Some(c) => {
            if c.status != status || (reason_is_phase && c.reason != update.reason.as_str()) {
                c.last_transition_time = now.clone();
            }
            c.status = status.into();
            c.reason = update.reason.as_str().into();
            c.message = update.message.as_str().into();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: update.type_.as_str().into(),
            status: status.into(),
            reason: update.reason.as_str().into(),
            message: update.message.as_str().into(),
            observed_generation: generation,
            last_transition_time: now.clone(),
        }),
    }
    true
}

#[cfg(test)]
mod tests {

    /// BEL and ESC from a registry's or Prometheus's answer reach a status
    /// shown, not obeyed (issue 46, S5).
    #[test]
    fn a_conditions_message_has_its_control_characters_escaped() {
        let c = ConditionUpdate::new(
            ConditionType::Degraded,
            true,
            Reason::RegistryError,
            "registry said: hunter2 \u{1b}]0;TITLE\u{7}\nnext line",
        );
        assert_eq!(
            c.message,
            "registry said: hunter2 \\u{1b}]0;TITLE\\u{7}\nnext line"
        );
    }

    use super::*;

    #[test]
    fn a_phase_reason_moves_the_transition_time() {
        let t = |s| Time(jiff::Timestamp::from_second(s).unwrap_or_default());
        let staging = ConditionUpdate::new(ConditionType::Idle, false, Reason::Staging, "");
        let staged = ConditionUpdate::new(ConditionType::Idle, false, Reason::Staged, "");
        let mut plain = Vec::new();
        apply(&mut plain, &staging, None, &t(1));
        apply(&mut plain, &staged, None, &t(2));
        assert_eq!(plain[0].last_transition_time, t(1), "status did not flip");
        let mut phase = Vec::new();
        apply_phase(&mut phase, &staging, None, &t(1));
        apply_phase(&mut phase, &staged, None, &t(2));
        assert_eq!(phase[0].last_transition_time, t(2));
        apply_phase(
            &mut phase,
            &ConditionUpdate::new(ConditionType::Idle, false, Reason::Staged, "m"),
            None,
            &t(3),
        );
        assert_eq!(phase[0].last_transition_time, t(2), "same phase");
    }

    #[test]
    fn every_name_parses_back_from_its_wire_string() {
        for &t in ConditionType::ALL {
            assert_eq!(ConditionType::parse(t.as_str()), Some(t));
            assert_eq!(t.to_string(), t.as_str());
        }
        for &r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
            assert_eq!(r.to_string(), r.as_str());
        }
        assert_eq!(Reason::parse("healthy"), None, "case matters");
        // A stored condition's strings compare with the variants.
        let stored = |s: &str| s.to_owned();
        assert!(stored("Healthy") == Reason::Healthy && "Idle" == ConditionType::Idle);
        assert!(stored("healthy") != Reason::Healthy);
        assert_eq!(
            ConditionType::parse("Healthy"),
            None,
            "a reason, not a type"
        );
    }

    #[test]
    fn no_two_names_share_a_wire_string() {
        let types: std::collections::HashSet<_> =
            ConditionType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(types.len(), ConditionType::ALL.len());
        let reasons: std::collections::HashSet<_> =
            Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(reasons.len(), Reason::ALL.len());
    }
}
