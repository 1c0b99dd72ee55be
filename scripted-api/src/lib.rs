//! A scripted Kubernetes API for the tests in the middle: the code that talks
//! to the API server (the daemon's node loop, the controller's actuator,
//! reconcile and pool cleanup) runs against a `kube::Client` whose every
//! request is checked against a script and answered from it. No API server,
//! no etcd: a test takes milliseconds.
//!
//! A script is a list of [`Exchange`]s, each an expected request (method,
//! path, the query parameters that matter, checks on its JSON body) and its
//! answer (a status and a JSON body, a `Status` failure, or a watch stream
//! the test feeds). The requests must come in the script's order; where
//! the code makes requests concurrently, [`Script::together`] takes lanes
//! that may interleave, each in its own order.
//!
//! ```ignore
//! let script = Script::new()
//!     .then(patch(&status_path::<BootcNode>("node-1"))
//!         .body_includes(json!({"metadata": {"resourceVersion": "7"}}))
//!         .fails(409, "Conflict"))
//!     .then(get(&object_path::<BootcNode>("node-1")).ok(&fresh));
//! let api = ScriptedApi::new(script);
//! let result = api.finish(code_under_test(api.client())).await;
//! ```
//!
//! The test fails, with the request and what the script expected instead,
//! at the first request that does not match (or comes after the script's
//! end), and when an expected request never comes. [`ScriptedApi::finish`]
//! runs code that ends; [`ScriptedApi::run_until`] runs code that does not
//! (a loop) until the test has seen what it waits for. Both give up after
//! [`LIMIT`] (of tokio's clock: a test with paused time fails at once when
//! everything waits for a request that never comes).
//!
//! Each unexpected request is answered with a 500 `Status` naming it: the
//! code under test sees a server error, and the test stops at once.
//!
//! Concurrent requests are checked as they come; with
//! [`ScriptedApi::answers_when_settled`] (and tokio's paused time) each
//! answer also waits until the code under test can make no other request
//! without it, so that a request made too early (a second wave's while the
//! first is in flight) fails the test whatever the scheduling. A loop is
//! driven from the test's side through a [`WatchFeed`], with
//! [`ScriptedApi::until_answered`] as the cue for its next event and
//! [`settled`] to let it finish what it does with the last answer.

mod exchange;
mod server;
mod watch;

pub use exchange::{Exchange, delete, get, patch, post, put};
pub use server::{LIMIT, Script, ScriptedApi, settled};
pub use watch::{WatchFeed, WatchStream, watch_stream};

use kube::Resource;

/// The path of the cluster-scoped `K`s (`/apis/<group>/<version>/<plural>`),
/// or of those in `namespace`.
pub fn collection_path<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> String {
    K::url_path(&(), namespace)
}

/// The path of the cluster-scoped `K` named `name`.
pub fn object_path<K: Resource<DynamicType = ()>>(name: &str) -> String {
    format!("{}/{name}", K::url_path(&(), None))
}

/// The path of the `K` named `name` in `namespace`.
pub fn namespaced_path<K: Resource<DynamicType = ()>>(namespace: &str, name: &str) -> String {
    format!("{}/{name}", K::url_path(&(), Some(namespace)))
}

/// The status subresource of the cluster-scoped `K` named `name`.
pub fn status_path<K: Resource<DynamicType = ()>>(name: &str) -> String {
    format!("{}/status", object_path::<K>(name))
}

/// The body of a failure as the API server sends it (a `metav1.Status`),
/// which kube turns into `kube::Error::Api` with this `code` and `reason`.
pub fn status_failure(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}
