//! The harness itself: what it accepts, and what it fails on and says.

use api::Node;
use api::test_support::NodeBuilder;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use scripted_api::{Script, ScriptedApi, collection_path, get, object_path, patch, watch_stream};
use serde_json::json;

fn node(name: &str, resource_version: &str) -> Node {
    NodeBuilder::new(name)
        .resource_version(resource_version)
        .build()
}

async fn read_then_cordon(client: kube::Client, name: &str) -> Result<Node, kube::Error> {
    let nodes: Api<Node> = Api::all(client);
    nodes.get(name).await?;
    let body = json!({"spec": {"unschedulable": true}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
}

fn cordon_script(body: serde_json::Value) -> Script {
    Script::new()
        .then(get(&object_path::<Node>("n-1")).ok(&node("n-1", "1")))
        .then(
            patch(&object_path::<Node>("n-1"))
                .body_includes(body)
                .ok(&node("n-1", "2")),
        )
}

#[tokio::test]
async fn requests_in_order_get_their_answers() {
    let api = ScriptedApi::new(cordon_script(json!({"spec": {"unschedulable": true}})));
    let patched = api.finish(read_then_cordon(api.client(), "n-1")).await;
    assert_eq!(
        patched.unwrap().metadata.resource_version.as_deref(),
        Some("2")
    );
    assert_eq!(api.answered(), 2);
}

#[tokio::test]
async fn a_failure_status_is_the_clients_api_error() {
    let script = Script::new().then(get(&object_path::<Node>("n-1")).fails(404, "NotFound"));
    let api = ScriptedApi::new(script);
    let nodes: Api<Node> = Api::all(api.client());
    let got = api.finish(nodes.get_opt("n-1")).await;
    assert!(got.unwrap().is_none());
}

#[tokio::test]
#[should_panic(expected = "but the body differs: /spec/unschedulable: expected false, found true")]
async fn a_body_that_differs_is_named() {
    let api = ScriptedApi::new(cordon_script(json!({"spec": {"unschedulable": false}})));
    let _ = api.finish(read_then_cordon(api.client(), "n-1")).await;
}

#[tokio::test]
#[should_panic(expected = "unexpected request:\n    GET /api/v1/nodes/n-2")]
async fn an_unexpected_request_is_named() {
    let api = ScriptedApi::new(cordon_script(json!({})));
    let _ = api.finish(read_then_cordon(api.client(), "n-2")).await;
}

#[tokio::test]
#[should_panic(
    expected = "expected requests that never came:\n    step 2: PATCH /api/v1/nodes/n-1"
)]
async fn an_expected_request_that_never_comes_is_named() {
    let api = ScriptedApi::new(cordon_script(json!({})));
    let nodes: Api<Node> = Api::all(api.client());
    let _ = api.finish(nodes.get("n-1")).await;
}

#[tokio::test]
#[should_panic(
    expected = "unexpected request after the script's end:\n    PATCH /api/v1/nodes/n-1"
)]
async fn a_request_after_the_end_is_named() {
    let script = Script::new().then(get(&object_path::<Node>("n-1")).ok(&node("n-1", "1")));
    let api = ScriptedApi::new(script);
    let _ = api.finish(read_then_cordon(api.client(), "n-1")).await;
}

/// Lanes interleave, each in its own order: two nodes read and cordoned
/// concurrently pass whatever the interleaving.
#[tokio::test]
async fn lanes_interleave_each_in_its_order() {
    let lane = |name: &str| {
        vec![
            get(&object_path::<Node>(name)).ok(&node(name, "1")),
            patch(&object_path::<Node>(name)).ok(&node(name, "2")),
        ]
    };
    let api = ScriptedApi::new(Script::new().together([lane("a"), lane("b")]));
    let client = api.client();
    let (a, b) = api
        .finish(async {
            tokio::join!(
                read_then_cordon(client.clone(), "a"),
                read_then_cordon(client.clone(), "b")
            )
        })
        .await;
    assert!(a.is_ok() && b.is_ok());
}

/// A watch stays open and delivers what the test sends, when it sends it.
#[tokio::test]
async fn a_watch_delivers_what_the_test_feeds() {
    let (feed, stream) = watch_stream();
    let script = Script::new().then(
        get(&collection_path::<Node>(None))
            .query("watch", "true")
            .query("sendInitialEvents", "true")
            .streams(stream),
    );
    let api = ScriptedApi::new(script);
    let nodes: Api<Node> = Api::all(api.client());
    let mut objects = watcher(nodes, watcher::Config::default().streaming_lists())
        .applied_objects()
        .boxed();
    feed.added(&node("a", "1"));
    feed.initial_events_end::<Node>("1");
    let first = api.finish(objects.next()).await;
    assert_eq!(first.unwrap().unwrap().metadata.name.as_deref(), Some("a"));
    feed.modified(&node("a", "2"));
    let second = objects.next().await.unwrap().unwrap();
    assert_eq!(second.metadata.resource_version.as_deref(), Some("2"));
}
