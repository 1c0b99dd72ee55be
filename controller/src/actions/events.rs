//! Kubernetes Events about pools (and the node concerned), best effort.
//!
//! Pools and Nodes are cluster-scoped. The API server keeps an event about a
//! cluster-scoped object in the `default` namespace, with no namespace in its
//! reference, and that is where `kubectl describe bnp NAME` finds it.
//!
//! Events are few: a healthy node's steps are its BootcNode's state and the
//! controller's log, not Events. A pool gets two Normal Events per rollout,
//! `RolloutStarted` (the image, how many nodes, how many at a time) and
//! `RolloutComplete`; the others are Warnings about a node or the pool
//! (`DrainBlocked`, `DrainFailed`, `RolloutHalted`, `NodeStuck`), a
//! `DrainRetried` after a failed drain, and `NodeLeft` when a node leaves.

use std::sync::atomic::{AtomicU64, Ordering};

use api::BootcNodePool;
use api::labels::CLUSTER_EVENTS_NAMESPACE;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

/// Publishes events as `bootc-controller` with one instance name.
#[derive(Clone)]
pub struct EventSink {
    client: kube::Client,
    instance: String,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl EventSink {
    pub fn new(client: kube::Client, instance: &str) -> Self {
        EventSink {
            client,
            instance: instance.to_owned(),
        }
    }

    /// Publishes one event regarding `pool`, related to `node` if given.
    /// Failures are logged, never returned: events are advisory.
    pub async fn publish(
        &self,
        pool: &BootcNodePool,
        node: Option<&str>,
        reason: &str,
        message: &str,
        warning: bool,
    ) {
        let now = jiff::Timestamp::now();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let regarding = ObjectReference {
            api_version: Some(BootcNodePool::api_version(&()).into_owned()),
            kind: Some(BootcNodePool::kind(&()).into_owned()),
            name: Some(pool.name_any()),
            uid: pool.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        let related = node.map(|n| ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(n.to_owned()),
            ..ObjectReference::default()
        });
        let note = note(message);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}{:x}",
                    pool.name_any(),
                    now.as_nanosecond(),
                    seq
                )),
                namespace: Some(CLUSTER_EVENTS_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            action: Some(reason.to_owned()),
            reason: Some(reason.to_owned()),
            note: Some(note),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding),
            related,
            reporting_controller: Some(format!(
                "node.bootc.dev/{}",
                api::labels::CONTROLLER_MANAGER
            )),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if warning { "Warning" } else { "Normal" }.to_owned()),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), CLUSTER_EVENTS_NAMESPACE);
        if let Err(error) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(%error, reason, pool = %pool.name_any(), "could not publish event");
        }
    }
}

/// The longest note an Event may carry (the API server's limit is 1 kB).
const NOTE_LIMIT: usize = 1024;

/// An Event's note from `message`: control characters escaped (it may carry
/// text from outside, `api::text::escape_controls`), cut at a character
/// boundary within [`NOTE_LIMIT`] bytes.
fn note(message: &str) -> String {
    let mut note = api::text::escape_controls(message).into_owned();
    let mut end = note.len().min(NOTE_LIMIT);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note.truncate(end);
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_escaped_and_cut_at_a_character() {
        assert_eq!(
            note("drain blocked: \u{1b}[2K\u{7}pod"),
            "drain blocked: \\u{1b}[2K\\u{7}pod"
        );
        let long = "é".repeat(NOTE_LIMIT);
        let cut = note(&long);
        assert!(cut.len() <= NOTE_LIMIT && cut.chars().all(|c| c == 'é'));
    }
}
