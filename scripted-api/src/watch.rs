//! A watch the test feeds: the answer to a watch request stays open, and
//! the test sends its events when the story needs them.

use bytes::Bytes;
use kube::Resource;
use serde::Serialize;
use serde_json::json;
use tokio::sync::mpsc;

/// The test's end of a watch: each call sends one event. The watch stays
/// open while the feed lives (a dropped feed ends it, and a watcher then
/// watches again: a request the script must expect).
#[derive(Debug, Clone)]
pub struct WatchFeed(mpsc::UnboundedSender<Bytes>);

/// The answer's end, for [`crate::Exchange::streams`].
#[derive(Debug)]
pub struct WatchStream(pub(crate) mpsc::UnboundedReceiver<Bytes>);

/// A watch: the feed for the test, the stream for the script.
pub fn watch_stream() -> (WatchFeed, WatchStream) {
    let (tx, rx) = mpsc::unbounded_channel();
    (WatchFeed(tx), WatchStream(rx))
}

impl WatchFeed {
    fn send(&self, kind: &str, object: serde_json::Value) {
        let mut line = json!({"type": kind, "object": object}).to_string();
        line.push('\n');
        // The watch's reader is gone: the code under test stopped watching,
        // which the script's next request shows.
        let _ = self.0.send(Bytes::from(line));
    }

    fn value(object: &impl Serialize) -> serde_json::Value {
        serde_json::to_value(object).unwrap_or_else(|e| panic!("a watched object is not JSON: {e}"))
    }

    /// An `ADDED` event (also how a streaming list sends its initial objects).
    pub fn added(&self, object: &impl Serialize) {
        self.send("ADDED", Self::value(object));
    }

    /// A `MODIFIED` event.
    pub fn modified(&self, object: &impl Serialize) {
        self.send("MODIFIED", Self::value(object));
    }

    /// A `DELETED` event.
    pub fn deleted(&self, object: &impl Serialize) {
        self.send("DELETED", Self::value(object));
    }

    /// The `ERROR` event an API server sends when the watch's resource
    /// version is too old (410 Expired): a watcher lists again.
    pub fn expired(&self) {
        self.send(
            "ERROR",
            json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "reason": "Expired",
                "code": 410,
                "message": "too old resource version",
            }),
        );
    }

    /// The bookmark that ends a streaming list's initial events
    /// (`sendInitialEvents=true`), at `resource_version`.
    pub fn initial_events_end<K: Resource<DynamicType = ()>>(&self, resource_version: &str) {
        self.send(
            "BOOKMARK",
            json!({
                "kind": K::kind(&()),
                "apiVersion": K::api_version(&()),
                "metadata": {
                    "resourceVersion": resource_version,
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            }),
        );
    }
}
