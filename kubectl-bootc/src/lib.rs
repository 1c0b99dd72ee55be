//! `kubectl bootc`: the rollout as a person asks about it.
//!
//! Everything here is pure: functions from the objects the API server holds
//! (a [`Snapshot`]: pools, BootcNodes, Nodes, the pools' Events) to text.
//! `main.rs` reads the objects, makes the one write a command needs (pause,
//! resume, retry) and prints. The words are the `api` crate's: phases,
//! reasons, annotations and event reasons come from there. So are the
//! readings of each object (in a slot, approved, Degraded, which image it
//! runs, its daemon behind, the Node Ready or cordoned and by whom), and the
//! rules are the planner's (`rollout`: the target in force, the node's state,
//! who holds a slot, who may take one, who is unavailable), so that what the
//! plugin says and what the controller does cannot disagree.
//!
//! * [`status`]: a pool's rollout at a glance, one line per node;
//! * [`why`]: the chain of reasons a node is not updating;
//! * [`history`]: what the pool's status and Events tell of its rollouts;
//! * [`retry_refusal`]: whether a node awaits a retry (`kubectl bootc retry`);
//! * [`lookup`]: the names a command is given, found or refused;
//! * [`output`]: the documents of `-o json|yaml`;
//! * [`cli`]: the command line, kubectl's flags, the exit status.
//!
//! Their text is [`shown`]: control characters read from the cluster are
//! escaped, never sent to the terminal.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod cli;
pub mod history;
pub mod lookup;
pub mod output;
pub mod plan;
pub mod status;
pub mod why;

use api::Node;
use api::{BootcNode, BootcNodePool, ConditionType};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::{Resource, ResourceExt};

pub use history::history;
pub use plan::plan;
pub use status::status;
pub use why::why;

/// What the commands read: every pool, BootcNode and Node, and the Events
/// about the pools (kept by the API server in the `default` namespace);
/// for pools with `spec.disruption.blockingPods`, the pods their selectors
/// match and the namespaces.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub pools: Vec<BootcNodePool>,
    pub bootc_nodes: Vec<BootcNode>,
    pub nodes: Vec<Node>,
    pub events: Vec<Event>,
    pub pods: Vec<Pod>,
    pub namespaces: Vec<Namespace>,
}

impl Snapshot {
    pub fn pool(&self, name: &str) -> Option<&BootcNodePool> {
        self.pools.iter().find(|p| p.name_any() == name)
    }

    pub fn bootc_node(&self, name: &str) -> Option<&BootcNode> {
        self.bootc_nodes.iter().find(|b| b.name_any() == name)
    }

    /// The blocking pod on `node` for `pool`'s `spec.disruption.blockingPods`,
    /// as the planner reads it (`Err`: the selector cannot be read).
    pub fn blocking_pod(&self, pool: &BootcNodePool, node: &str) -> Result<Option<String>, String> {
        let Some(spec) = &pool.spec.disruption.blocking_pods else {
            return Ok(None);
        };
        let namespaces = rollout::holds::gates::matching_namespaces(spec, &self.namespaces)?;
        let mut found =
            rollout::holds::gates::blocking_pods(spec, &self.pods, namespaces.as_ref())?;
        Ok(found.remove(node))
    }

    /// The pods of `pool`'s `spec.health.pods` bound to `node`, as the
    /// health gate reads them (`Err`: a selector cannot be read).
    pub fn health_pods(
        &self,
        pool: &BootcNodePool,
        node: &str,
    ) -> Result<Vec<rollout::holds::gates::PodSeen>, String> {
        let mut found = std::collections::BTreeMap::new();
        for (entry, spec) in pool
            .spec
            .health
            .iter()
            .flat_map(|h| h.pods.iter())
            .enumerate()
        {
            rollout::holds::gates::health_pods(spec, entry, &self.pods, &mut found)?;
        }
        Ok(found.remove(node).unwrap_or_default())
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name_any() == name)
    }

    /// The pool's BootcNodes, by name.
    pub fn members<'a>(&'a self, pool: &'a str) -> impl Iterator<Item = &'a BootcNode> + 'a {
        let mut members: Vec<&BootcNode> = self
            .bootc_nodes
            .iter()
            .filter(|b| pool_of(b) == Some(pool))
            .collect();
        members.sort_by_key(|b| b.name_any());
        members.into_iter()
    }
}

/// The pool that owns `bn`.
pub fn pool_of(bn: &BootcNode) -> Option<&str> {
    bn.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == BootcNodePool::kind(&()))
        .map(|o| o.name.as_str())
}

/// The daemon's phase for display: a phase this plugin does not know is
/// shown as the daemon wrote it; `missing` when none is reported.
pub fn phase_label(bn: &BootcNode, missing: &str) -> String {
    match bn.status.as_ref().map(api::BootcNodeStatus::phase) {
        Some(Ok(Some(phase))) => phase.to_string(),
        Some(Err(api::UnknownPhase(reason))) => reason,
        Some(Ok(None)) | None => missing.to_owned(),
    }
}

/// The pool's target, as the planner keeps it in force: the digest and
/// image its status records (`rollout::target::recorded`).
pub fn target(pool: &BootcNodePool) -> Option<rollout::Target> {
    rollout::target::recorded(pool.status.as_ref()?)
}

/// The pool's maintenance windows and blackouts at `now`, as the planner
/// reads them (`rollout::holds::window::of`).
pub fn window(pool: &BootcNodePool, now: jiff::Timestamp) -> rollout::holds::window::Window {
    rollout::holds::window::of(&pool.spec.rollout, now, &mut Vec::new())
}

/// Does the member hold a reboot slot of `pool`, as the planner counts it
/// (`rollout::reboot::slots::holds_slot`): its Node's disruption record for
/// the pool (or its BootcNode's slot record of 0.1.0)?
pub fn holds_slot(snap: &Snapshot, bn: &BootcNode, pool: &str) -> bool {
    rollout::reboot::slots::holds_slot(snap.node(&bn.name_any()), Some(bn), pool)
}

/// The pool's condition of `type_` when it is True: (reason, message).
pub fn pool_condition(pool: &BootcNodePool, type_: ConditionType) -> Option<(&str, &str)> {
    let status = pool.status.as_ref()?;
    api::conditions::find(&status.conditions, type_)
        .filter(|c| c.status == "True")
        .map(|c| (c.reason.as_str(), c.message.as_str()))
}

/// The pool's condition of `type_` whatever its status: (reason, message).
pub fn pool_condition_any(pool: &BootcNodePool, type_: ConditionType) -> Option<(&str, &str)> {
    let status = pool.status.as_ref()?;
    api::conditions::find(&status.conditions, type_)
        .map(|c| (c.reason.as_str(), c.message.as_str()))
}

/// A duration as `kubectl get` prints ages: 45s, 3m, 2h, 4d.
pub use rollout::standing::age;

/// `text` as the plugin prints it: what it read from the cluster (status
/// messages, Events, names) may carry terminal control sequences, escaped
/// here.
pub fn shown(text: String) -> String {
    match api::text::escape_controls(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

/// Why `kubectl bootc retry` refuses: None when the node awaits a retry
/// (approved to boot and Degraded, see [`BootcNode::awaits_retry`]), else
/// what the node is doing instead.
/// Why `kubectl bootc refresh POOL` is refused (None: the pool follows a
/// tag, which the controller can resolve again).
pub fn refresh_refusal(pool: &BootcNodePool) -> Option<String> {
    let reference = &pool.spec.image.reference;
    let pinned = api::image_ref::ImageRef::parse(reference).is_ok_and(|r| r.digest.is_some());
    pinned.then(|| {
        format!(
            "pool {} follows a digest (spec.image.ref {reference:?}): there is no tag to resolve",
            pool.name_any()
        )
    })
}

/// Why `kubectl bootc retry POOL` is refused (None: the pool has a failed
/// image for its current reference to clear).
pub fn pool_retry_refusal(pool: &BootcNodePool) -> Option<String> {
    let failed = pool
        .status
        .as_ref()
        .map(|s| s.failed_images.as_slice())
        .unwrap_or_default();
    let reference = &pool.spec.image.reference;
    (!failed.iter().any(|f| f.reference == *reference)).then(|| {
        format!(
            "pool {} has no failed image for spec.image.ref {reference:?}: nothing to retry",
            pool.name_any()
        )
    })
}

pub fn retry_refusal(snap: &Snapshot, name: &str, now: jiff::Timestamp) -> Option<String> {
    match snap.bootc_node(name) {
        Some(bn) if bn.awaits_retry() || bn.skipped().is_some() || bn.health_failed().is_some() => {
            None
        }
        Some(_) => Some(format!(
            "{name} does not await a retry: {}. Only a node approved to boot whose reboot \
             failed (Degraded), one skipped after its drain failed, or one that failed its health gate needs one; a failed \
             download is retried by its daemon and a failed drain by the controller, on their own.",
            why(snap, name, now).first().map_or("", String::as_str)
        )),
        None => Some(format!(
            "{name} has no BootcNode: {}",
            why(snap, name, now).first().map_or("", String::as_str)
        )),
    }
}

#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod tests {
    use super::*;
    use api::{ConditionType, Reason};
    use fixtures::{Phase, V1, bn};

    /// An OSC window title, a line erasure and a cursor move, as a registry
    /// (through bootc's stderr) or a node could write them.
    const HOSTILE: &str = "pull failed: \u{1b}]0;OWNED\u{7}\u{1b}[2K\u{1b}[1Ahidden\u{9b}2J";

    #[test]
    fn text_read_from_the_cluster_reaches_the_terminal_escaped() {
        use fixtures::*;
        let mut snap = alone_in(
            halted(pool("workers", false), HOSTILE),
            degrade(slotted(bn("n1", V1, Phase::Rebooting), true), HOSTILE),
            true,
            true,
        );
        snap.events = vec![event(
            "workers",
            api::event_reasons::DRAIN_BLOCKED,
            Some("n1"),
            10,
            HOSTILE,
        )];
        let why = why(&snap, "n1", now()).join("\n");
        let refusal = retry_refusal(&snap, "n9", now()).unwrap_or_default();
        for (what, text) in [
            ("status", status(&snap, None, now())),
            ("why", why),
            ("history", history(&snap, "workers")),
            ("retry", refusal),
        ] {
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "{what}: {text:?}"
            );
        }
        let status = status(&snap, None, now());
        assert!(
            status.contains("\\u{1b}]0;OWNED\\u{7}\\u{1b}[2K\\u{1b}[1Ahidden\\u{9b}2J"),
            "{status}"
        );
    }

    #[test]
    fn a_phase_this_plugin_does_not_know_is_shown_as_written() {
        let known = bn("n1", V1, Phase::Staged);
        assert_eq!(known.phase(), Some(api::DaemonPhase::Staged));
        assert_eq!(phase_label(&known, "?"), Reason::Staged);

        let mut newer = known.clone();
        if let Some(s) = newer.status.as_mut() {
            for c in &mut s.conditions {
                if c.type_ == ConditionType::Idle {
                    c.reason = "Verifying".into();
                }
            }
        }
        assert_eq!(newer.phase(), None);
        assert_eq!(phase_label(&newer, "?"), "Verifying");

        let mut silent = known;
        silent.status = None;
        assert_eq!(phase_label(&silent, "?"), "?");
    }
}
