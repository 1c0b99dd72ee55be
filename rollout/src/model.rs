//! The plan's vocabulary: what a plan reads ([`PlanInput`]) and what it
//! returns (`Plan`, `Cleanup`). Types only, below every step.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::Node;
use api::{BootcNode, BootcNodePool, BootcNodeSpec, Reason};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::holds::gates::Gates;
use crate::reboot::stuck;

/// The image the pool's nodes should run, from the `resolve_target` step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `sha256:...`: for a multi-arch image, the index digest.
    pub digest: String,
    /// `repository@digest`: what BootcNodes are told to run.
    pub image: String,
    /// For an index, the digests of its linux platform manifests, as the
    /// registry lists them (empty for a single manifest, or not known): a
    /// host installed from the index's tag reports its platform's digest,
    /// never the index's, and runs the target all the same (the state
    /// module's `runs_target`).
    pub platform_digests: Vec<String>,
    /// The kubelet version the image declares
    /// (`api::image_labels::KUBELET_VERSION`), checked before any node was
    /// told (`os_guard::kubelet_skew`); None when it declares none.
    pub kubelet: Option<String>,
}

/// Why the pool has no (new) target: a Degraded reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetProblem {
    pub reason: Reason,
    pub message: String,
}

/// The pool's pull secret as the controller's cache has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretSeen {
    /// Its version (`api::pull_secret::version`), what the nodes are told.
    pub version: String,
    /// Does it opt in to this pool (`api::pull_secret::allows`)?
    pub allows_pool: bool,
    /// The pools it lists (`api::pull_secret::pools`), for the hint that
    /// opts it in without dropping them.
    pub pools: Vec<String>,
}

/// What the controller knows about a drain of a node of this pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainPhase {
    Running,
    /// Running, and a PodDisruptionBudget refused an eviction: `message`
    /// names the pod and the budget's answer.
    Blocked {
        message: String,
    },
    Succeeded,
    /// Gave up (timeout or error) at `at`; `message` names what blocked.
    Failed {
        message: String,
        at: Timestamp,
    },
}

/// Everything `plan` decides from.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    pub pool: &'a BootcNodePool,
    /// The outcome of target resolution. On a problem the previous target in
    /// `pool.status` stays in force (fail closed).
    pub target: Result<Target, TargetProblem>,
    /// The Nodes the selector matches, plus the Nodes of owned BootcNodes.
    pub nodes: Vec<&'a Node>,
    /// The BootcNodes named after those Nodes, and every BootcNode this pool owns.
    pub bootc_nodes: Vec<&'a BootcNode>,
    /// Every other pool (for NodeConflict).
    pub other_pools: Vec<&'a BootcNodePool>,
    /// The referenced pull secret, if it exists.
    pub pull_secret: Option<SecretSeen>,
    /// Drains of this pool's nodes, by node name.
    pub drains: BTreeMap<String, DrainPhase>,
    /// The operator's namespace: the only one pull secrets may live in.
    pub operator_namespace: &'a str,
    /// When this controller last wrote the pool's status (None: not since
    /// it started).
    pub last_status_write: Option<Timestamp>,
    pub now: Timestamp,
    /// When each member entered the phase it waits in, as far as the
    /// controller remembers (see [`stuck`]).
    /// Shared with the runtime, which keeps it between plans.
    pub phase_clock: std::sync::Arc<stuck::Clock>,
    /// The stuck deadlines in force.
    pub deadlines: stuck::Deadlines,
    /// What the pool's gates outside its objects said (blocking pods,
    /// alerts; see [`crate::holds::gates`]).
    pub gates: Gates,
    /// Set Kubernetes' Node lifecycle conditions on the nodes in slots
    /// (`--node-lifecycle-conditions`; the `lifecycle` module).
    pub node_lifecycle_conditions: bool,
}

impl DrainPhase {
    /// Is the drain still going (blocked or not)?
    pub fn running(&self) -> bool {
        matches!(self, DrainPhase::Running | DrainPhase::Blocked { .. })
    }
}

/// Changes to a Node's `bootc.dev/managed` label, `spec.unschedulable` and
/// the pool's marks on it. Every field is decided by the planner (see
/// `cordon`); the actuator turns each into its merge patch as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePatch {
    /// Some(true): set the managed label; Some(false): remove it.
    pub managed: Option<bool>,
    /// Some(value): set `spec.unschedulable`.
    pub unschedulable: Option<bool>,
    /// Some(true): mark the cordon as the pool's own
    /// (`bootc.dev/cordoned-by: <pool>`); Some(false): remove the mark.
    pub mark: Option<bool>,
    /// Some(true): write the pool's disruption record
    /// (`bootc.dev/disrupted-by`); Some(false): remove it (the node is back).
    pub disrupted: Option<bool>,
    /// Some(true): set Karpenter's `karpenter.sh/do-not-disrupt` with the
    /// pool's mark on it (`bootc.dev/do-not-disrupt-by`); Some(false):
    /// remove both.
    pub do_not_disrupt: Option<bool>,
    /// Some(true): set `node.kubernetes.io/exclude-from-external-load-balancers`
    /// with the pool's mark (`bootc.dev/lb-excluded-by`); Some(false):
    /// remove both.
    pub exclude_lb: Option<bool>,
}

/// One of Kubernetes' Node lifecycle conditions, as a write sets it (its
/// reason is the pool's, `api::node_health::LIFECYCLE_REASON`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleCondition {
    pub type_: &'static str,
    pub status: bool,
}

/// One write; a node's writes are made in the order `order` gives them.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Server-side apply of the fields the controller owns on a BootcNode
    /// (owner reference, slot annotations, spec). Shared: a verdict the
    /// memo keeps holds the same apply as the plan.
    ApplyBootcNode(Arc<BootcNodeApply>),
    DeleteBootcNode {
        name: String,
    },
    PatchNode {
        name: String,
        patch: NodePatch,
    },
    /// A status patch of the Node's lifecycle conditions (the `lifecycle`
    /// module).
    PatchNodeConditions {
        name: String,
        conditions: Vec<LifecycleCondition>,
    },
    StartDrain {
        node: String,
    },
    CancelDrain {
        node: String,
    },
}

impl Write {
    /// The node the write is about.
    pub fn node(&self) -> &str {
        match self {
            Write::ApplyBootcNode(bn) => &bn.name,
            Write::DeleteBootcNode { name }
            | Write::PatchNode { name, .. }
            | Write::PatchNodeConditions { name, .. } => name,
            Write::StartDrain { node } | Write::CancelDrain { node } => node,
        }
    }

    /// Does the write give a reboot slot back: lift the pool's disruption
    /// record from a Node, adding no cordon?
    pub fn frees_slot(&self) -> bool {
        matches!(self, Write::PatchNode { patch, .. }
            if patch.disrupted == Some(false) && patch.unschedulable != Some(true))
    }
}

/// The fields the controller owns on a BootcNode: what it server-side
/// applies (with the owner reference to the pool).
#[derive(Clone, Debug, PartialEq)]
pub struct BootcNodeApply {
    pub name: String,
    /// The pool's, one for every apply of a plan.
    pub owner: Arc<OwnerReference>,
    /// The slot and prior-cordon annotations.
    pub annotations: BTreeMap<String, String>,
    pub spec: BootcNodeSpec,
}

/// A Kubernetes Event to publish once the writes before it succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub reason: &'static str,
    pub message: String,
    pub warning: bool,
    /// The node concerned, if any.
    pub node: Option<String>,
}

/// Event reasons (in `api`, where `kubectl bootc history` reads them too).
pub use api::event_reasons;

/// A Degraded problem: its reason and message (see `status`).
pub type Problem = (Reason, String);
