//! Builders of the objects tests make: Nodes, BootcNodes, BootcNodePools
//! and Pods, each field set in one place. This crate's tests use them, and
//! other crates' tests through the `test-support` feature, enabled only in
//! their `[dev-dependencies]` so that no shipped binary links this module.
//!
//! Every builder starts from the object's name and sets nothing else; the
//! suites' own defaults (a pool label, a repository, a generation) stay in
//! small wrappers beside their tables:
//!
//! ```text
//! use api::test_support::{BootcNodeBuilder, NodeBuilder, PoolBuilder};
//! use api::DaemonPhase;
//! let node = NodeBuilder::new("n1").label("pool", "workers").ready(true).build();
//! let pool = PoolBuilder::new("workers").selects("pool", "workers").image("r.example/os:1").build();
//! let bn = BootcNodeBuilder::new("n1")
//!     .desired("r.example/os@sha256:2")
//!     .booted("r.example/os@sha256:1", "sha256:1")
//!     .phase(DaemonPhase::Idle)
//!     .build();
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};

use crate::node::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use crate::conditions::{self, ConditionUpdate};
use crate::labels::MANAGED_LABEL;
use crate::node::{Node, NodeSpec, NodeStatus};
use crate::node_health::NODE_READY;
use crate::{
    BootEntryStatus, BootcNode, BootcNodePool, BootcNodePoolStatus, BootcNodeSpec, BootcNodeStatus,
    ConditionType, DaemonPhase, DaemonStatus, DesiredImageState, Reason, SecretReference,
};

fn set(map: &mut Option<BTreeMap<String, String>>, key: &str, value: &str) {
    map.get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value.to_owned());
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

/// A Node: `NodeBuilder::new("n1").ready(true).unschedulable(true).build()`.
#[derive(Clone, Debug)]
pub struct NodeBuilder {
    node: Node,
}

impl NodeBuilder {
    /// A Node named `name`, with no spec, no status, no labels.
    pub fn new(name: &str) -> Self {
        NodeBuilder {
            node: Node {
                metadata: named(name),
                ..Node::default()
            },
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set(&mut self.node.metadata.labels, key, value);
        self
    }

    /// The label that marks a node the operator manages.
    pub fn managed(self) -> Self {
        self.label(MANAGED_LABEL, "")
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        set(&mut self.node.metadata.annotations, key, value);
        self
    }

    pub fn resource_version(mut self, version: &str) -> Self {
        self.node.metadata.resource_version = Some(version.to_owned());
        self
    }

    /// `spec.unschedulable`: cordoned or not (an explicit `false` when not).
    pub fn unschedulable(mut self, cordoned: bool) -> Self {
        self.node
            .spec
            .get_or_insert_with(NodeSpec::default)
            .unschedulable = Some(cordoned);
        self
    }

    /// The kubelet's `Ready` condition, True or False.
    pub fn ready(self, ready: bool) -> Self {
        self.condition(NODE_READY, if ready { "True" } else { "False" })
    }

    /// A condition `type_` with `status` ("True", "False", "Unknown"),
    /// replacing one of that type; [`reason`](Self::reason),
    /// [`since`](Self::since) and [`heartbeat`](Self::heartbeat) then set
    /// its other fields.
    pub fn condition(mut self, type_: &str, status: &str) -> Self {
        let conditions = self
            .node
            .status
            .get_or_insert_with(NodeStatus::default)
            .conditions
            .get_or_insert_with(Vec::new);
        conditions.retain(|c| c.type_ != type_);
        conditions.push(NodeCondition {
            type_: type_.into(),
            status: status.into(),
            ..NodeCondition::default()
        });
        self
    }

    fn last_condition(&mut self) -> &mut NodeCondition {
        self.node
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.last_mut())
            .expect("a condition to set the field of: call condition() or ready() first")
    }

    /// The reason of the condition set last.
    pub fn reason(mut self, reason: &str) -> Self {
        self.last_condition().reason = Some(reason.into());
        self
    }

    /// The `lastTransitionTime` of the condition set last.
    pub fn since(mut self, at: Timestamp) -> Self {
        self.last_condition().last_transition_time = Some(Time(at));
        self
    }

    /// The `lastHeartbeatTime` of the condition set last.
    pub fn heartbeat(mut self, at: Timestamp) -> Self {
        self.last_condition().last_heartbeat_time = Some(Time(at));
        self
    }

    pub fn build(self) -> Node {
        self.node
    }
}

/// A BootcNode: `BootcNodeBuilder::new("n1").desired(img).phase(DaemonPhase::Staged).build()`.
///
/// Its conditions are set at [`at`](Self::at) (the Unix epoch unless told)
/// and observe the generation set before them.
#[derive(Clone, Debug)]
pub struct BootcNodeBuilder {
    bn: BootcNode,
    now: Time,
}

impl BootcNodeBuilder {
    /// A BootcNode named `name`, told nothing (an empty `desiredImage`,
    /// Staged, the default reboot policy), without a status.
    pub fn new(name: &str) -> Self {
        let spec = BootcNodeSpec {
            desired_image: Default::default(),
            desired_image_state: DesiredImageState::Staged,
            reboot_policy: Default::default(),
            pull_secret_ref: None,
            pull_secret_hash: None,
            staging_weights: None,
        };
        BootcNodeBuilder {
            bn: BootcNode::new(name, spec),
            now: Time(Timestamp::UNIX_EPOCH),
        }
    }

    /// `spec.desiredImage`.
    pub fn desired(mut self, image: impl Into<crate::Shared>) -> Self {
        self.bn.spec.desired_image = image.into();
        self
    }

    /// `spec.desiredImageState`: Booted (approved to boot) or Staged.
    pub fn approved(mut self, approved: bool) -> Self {
        self.bn.spec.desired_image_state = if approved {
            DesiredImageState::Booted
        } else {
            DesiredImageState::Staged
        };
        self
    }

    /// Owned (as its controller) by the pool `name` of `uid`.
    pub fn owner(mut self, name: &str, uid: &str) -> Self {
        self.bn.metadata.owner_references = Some(vec![OwnerReference {
            api_version: BootcNodePool::api_version(&()).into_owned(),
            kind: BootcNodePool::kind(&()).into_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        set(&mut self.bn.metadata.annotations, key, value);
        self
    }

    /// `metadata.generation`.
    pub fn generation(mut self, generation: i64) -> Self {
        self.bn.metadata.generation = Some(generation);
        self
    }

    pub fn resource_version(mut self, version: &str) -> Self {
        self.bn.metadata.resource_version = Some(version.to_owned());
        self
    }

    fn status(&mut self) -> &mut BootcNodeStatus {
        self.bn.status.get_or_insert_with(BootcNodeStatus::default)
    }

    /// `status.observedGeneration`: the spec generation the daemon last read.
    pub fn observed(mut self, generation: i64) -> Self {
        self.status().observed_generation = Some(generation);
        self
    }

    fn entry(image: &str, digest: &str) -> BootEntryStatus {
        BootEntryStatus {
            image: Some(image.into()),
            image_digest: Some(digest.into()),
            ..BootEntryStatus::default()
        }
    }

    /// `status.booted`: `image`, of `digest`.
    pub fn booted(mut self, image: &str, digest: &str) -> Self {
        self.status().booted = Some(Self::entry(image, digest));
        self
    }

    /// `status.staged`: `image`, of `digest`.
    pub fn staged(mut self, image: &str, digest: &str) -> Self {
        self.status().staged = Some(Self::entry(image, digest));
        self
    }

    fn booted_entry(&mut self) -> &mut BootEntryStatus {
        self.status()
            .booted
            .get_or_insert_with(BootEntryStatus::default)
    }

    /// The booted image's version label.
    pub fn booted_version(mut self, version: &str) -> Self {
        self.booted_entry().version = Some(version.into());
        self
    }

    /// The booted image's architecture (`None`: not reported).
    pub fn booted_architecture(mut self, arch: Option<&str>) -> Self {
        self.booted_entry().architecture = arch.map(Into::into);
        self
    }

    /// `status.daemon`: the daemon's contract and build (`None`: a status
    /// without the report, as a daemon before the report writes).
    pub fn daemon(mut self, report: Option<(i32, &str)>) -> Self {
        self.status().daemon = report.map(|(contract, version)| DaemonStatus {
            version: version.to_owned(),
            contract,
        });
        self
    }

    /// The time the conditions set after this are set at.
    pub fn at(mut self, now: Time) -> Self {
        self.now = now;
        self
    }

    /// The condition `type_`, as [`conditions::apply`] sets it.
    pub fn condition(
        mut self,
        type_: ConditionType,
        status: bool,
        reason: Reason,
        message: &str,
    ) -> Self {
        let update = ConditionUpdate::new(type_, status, reason, message);
        let (generation, now) = (self.bn.metadata.generation, self.now.clone());
        conditions::apply(&mut self.status().conditions, &update, generation, &now);
        self
    }

    /// The daemon's phase: the `Idle` condition.
    pub fn phase(self, phase: DaemonPhase) -> Self {
        self.condition(ConditionType::Idle, phase.is_idle(), phase.reason(), "")
    }

    /// `Degraded` False (Healthy).
    pub fn healthy(self) -> Self {
        self.condition(ConditionType::Degraded, false, Reason::Healthy, "")
    }

    /// `Degraded` True (Error) for `message`.
    pub fn degraded(self, message: &str) -> Self {
        self.condition(ConditionType::Degraded, true, Reason::Error, message)
    }

    pub fn build(self) -> BootcNode {
        self.bn
    }
}

/// A BootcNodePool: `PoolBuilder::new("web").selects("role", "web").image(r).build()`.
///
/// Its conditions are set at [`at`](Self::at) (the Unix epoch unless told)
/// and observe the generation set before them.
#[derive(Clone, Debug)]
pub struct PoolBuilder {
    pool: BootcNodePool,
    now: Time,
}

impl PoolBuilder {
    /// A pool named `name` selecting every node (an empty selector), of
    /// an empty image reference, with the default rollout.
    pub fn new(name: &str) -> Self {
        let spec = serde_json::from_value(serde_json::json!({
            "nodeSelector": {}, "image": {"ref": ""},
        }))
        .expect("the smallest pool spec");
        PoolBuilder {
            pool: BootcNodePool::new(name, spec),
            now: Time(Timestamp::UNIX_EPOCH),
        }
    }

    /// The pool selects the nodes labelled `key=value` (and any label
    /// given before).
    pub fn selects(mut self, key: &str, value: &str) -> Self {
        set(&mut self.pool.spec.node_selector.match_labels, key, value);
        self
    }

    /// `spec.image.ref`.
    pub fn image(mut self, reference: impl Into<String>) -> Self {
        self.pool.spec.image.reference = reference.into();
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.pool.metadata.uid = Some(uid.to_owned());
        self
    }

    pub fn generation(mut self, generation: i64) -> Self {
        self.pool.metadata.generation = Some(generation);
        self
    }

    pub fn resource_version(mut self, version: &str) -> Self {
        self.pool.metadata.resource_version = Some(version.to_owned());
        self
    }

    /// `spec.pullSecretRef`: the Secret `namespace/name`.
    pub fn pull_secret(mut self, namespace: &str, name: &str) -> Self {
        self.pool.spec.pull_secret_ref = Some(SecretReference {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        });
        self
    }

    /// `spec.rollout.maxUnavailable`.
    pub fn max_unavailable(mut self, max: IntOrString) -> Self {
        self.pool.spec.rollout.max_unavailable = max;
        self
    }

    /// `spec.rollout.paused`.
    pub fn paused(mut self, paused: bool) -> Self {
        self.pool.spec.rollout.paused = paused;
        self
    }

    /// `spec.rollout.dependsOn`.
    pub fn depends_on(mut self, pools: &[&str]) -> Self {
        self.pool.spec.rollout.depends_on = pools.iter().map(|p| (*p).to_owned()).collect();
        self
    }

    fn status(&mut self) -> &mut BootcNodePoolStatus {
        self.pool
            .status
            .get_or_insert_with(BootcNodePoolStatus::default)
    }

    /// The target the controller resolved: `status.targetDigest`,
    /// `targetImage` and `targetSummary`.
    pub fn target(mut self, digest: &str, image: &str, summary: &str) -> Self {
        let status = self.status();
        status.target_digest = Some(digest.to_owned());
        status.target_image = Some(image.to_owned());
        status.target_summary = Some(summary.to_owned());
        self
    }

    /// The condition `type_`, as [`conditions::apply`] sets it.
    pub fn condition(
        mut self,
        type_: ConditionType,
        status: bool,
        reason: Reason,
        message: &str,
    ) -> Self {
        let update = ConditionUpdate::new(type_, status, reason, message);
        let (generation, now) = (self.pool.metadata.generation, self.now.clone());
        conditions::apply(&mut self.status().conditions, &update, generation, &now);
        self
    }

    /// The time the conditions set after this are set at.
    pub fn at(mut self, now: Time) -> Self {
        self.now = now;
        self
    }

    pub fn build(self) -> BootcNodePool {
        self.pool
    }
}

/// A Pod: `PodBuilder::new("ns", "p").label("app", "etl").on("n1").phase("Running").build()`.
#[derive(Clone, Debug)]
pub struct PodBuilder {
    pod: Pod,
}

impl PodBuilder {
    /// The pod `namespace/name`, with an empty spec, not scheduled.
    pub fn new(namespace: &str, name: &str) -> Self {
        let mut metadata = named(name);
        metadata.namespace = Some(namespace.to_owned());
        PodBuilder {
            pod: Pod {
                metadata,
                spec: Some(PodSpec::default()),
                ..Pod::default()
            },
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        set(&mut self.pod.metadata.labels, key, value);
        self
    }

    /// `spec.nodeName` (`None`: not scheduled).
    pub fn on(mut self, node: Option<&str>) -> Self {
        self.pod.spec.get_or_insert_with(PodSpec::default).node_name = node.map(str::to_owned);
        self
    }

    /// `status.phase`: Pending, Running, Succeeded, Failed.
    pub fn phase(mut self, phase: &str) -> Self {
        self.pod.status.get_or_insert_with(PodStatus::default).phase = Some(phase.to_owned());
        self
    }

    pub fn build(self) -> Pod {
        self.pod
    }
}
