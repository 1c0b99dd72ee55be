//! The node loop's decisions against a scripted API (`scripted-api`): each
//! test is the story of one BootcNode as the API server tells it (a watch
//! the test feeds, the answers to the daemon's writes and reads), with the
//! host played by a stand-in helper served by the helper's own gRPC server.
//! The end-to-end versions, against a real API server and a fake bootc
//! host, are `tests/tests/daemon_loop/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::labels::{DAEMON_MANAGER, OPERATOR_NAMESPACE};
use api::{
    BootcNode, BootcNodeSpec, BootcNodeStatus, DaemonPhase, DesiredImageState, RebootPolicy,
};
use daemon::agent::node_loop::{self, LoopConfig};
use proto::helper_server::Helper;
use scripted_api::{
    Exchange, Script, ScriptedApi, WatchFeed, collection_path, get, object_path, patch, settled,
    status_path, watch_stream,
};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

const NODE: &str = "node-1";

fn image(c: char) -> String {
    format!(
        "registry.example.com/acme/os@sha256:{}",
        c.to_string().repeat(64)
    )
}

/// What the stand-in helper was asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Stage(String),
    Apply { soft_reboot: bool },
}

/// The host, as the helper reports it: booted and staged images. A stage
/// stages (locked), an apply is recorded (the host "goes down" and the
/// test ends there).
#[derive(Clone)]
struct Host {
    state: Arc<Mutex<(String, Option<String>)>>,
    calls: Arc<Mutex<Vec<Call>>>,
    applied: Arc<Notify>,
    /// How long a pull takes (the stories' clock is paused: exact).
    pull_takes: Duration,
    /// Whether what it stages is left unlocked (the next reboot boots
    /// it) rather than locked (bootc's download-only: a reboot discards it).
    stages_unlocked: Arc<std::sync::atomic::AtomicBool>,
}

impl Host {
    fn booted(image: &str) -> Self {
        Host {
            state: Arc::new(Mutex::new((image.to_owned(), None))),
            calls: Arc::default(),
            applied: Arc::default(),
            pull_takes: Duration::ZERO,
            stages_unlocked: Arc::default(),
        }
    }

    /// A host whose stages are not locked: its next reboot, planned or
    /// not, boots what was staged (a bootc without download-only).
    fn staging_unlocked(self) -> Self {
        self.unlock();
        self
    }

    /// What is staged, and what will be, is unlocked from now on (its lock
    /// released), with no event the daemon would see.
    fn unlock(&self) {
        self.stages_unlocked
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn unlocked(&self) -> bool {
        self.stages_unlocked
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A host whose pulls take `d`.
    fn pulling_for(mut self, d: Duration) -> Self {
        self.pull_takes = d;
        self
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

fn entry(image: &str, download_only: bool) -> proto::BootEntry {
    proto::BootEntry {
        image: image.to_owned(),
        digest: image.split_once('@').unwrap().1.to_owned(),
        architecture: "amd64".to_owned(),
        download_only,
        ..Default::default()
    }
}

#[tonic::async_trait]
impl Helper for Host {
    async fn stage(
        &self,
        r: Request<proto::StageRequest>,
    ) -> Result<Response<proto::StageResponse>, Status> {
        let image = r.into_inner().image;
        self.calls.lock().unwrap().push(Call::Stage(image.clone()));
        tokio::time::sleep(self.pull_takes).await;
        self.state.lock().unwrap().1 = Some(image);
        Ok(Response::new(proto::StageResponse {
            locked: !self.unlocked(),
        }))
    }
    async fn apply(
        &self,
        r: Request<proto::ApplyRequest>,
    ) -> Result<Response<proto::ApplyResponse>, Status> {
        let soft_reboot = r.into_inner().soft_reboot;
        self.calls.lock().unwrap().push(Call::Apply { soft_reboot });
        self.applied.notify_one();
        Ok(Response::new(proto::ApplyResponse {}))
    }
    async fn status(
        &self,
        _: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusResponse>, Status> {
        let (booted, staged) = self.state.lock().unwrap().clone();
        Ok(Response::new(proto::StatusResponse {
            booted: Some(entry(&booted, false)),
            staged: staged.map(|s| entry(&s, !self.unlocked())),
            rollback: None,
            boot_id: "boot-1".to_owned(),
            download_only_supported: true,
            host_updaters: Vec::new(),
        }))
    }
    async fn write_auth(
        &self,
        _: Request<proto::WriteAuthRequest>,
    ) -> Result<Response<proto::WriteAuthResponse>, Status> {
        Err(Status::unimplemented("no pull secret in these stories"))
    }
}

/// The node loop of `NODE` on `host`, talking to `client`.
async fn node_loop(host: &Host, client: kube::Client) -> Result<(), node_loop::LoopError> {
    let (mine, theirs) = UnixStream::pair().unwrap();
    let stand_in = host.clone();
    tokio::spawn(async move { helper::server::serve(theirs, stand_in).await });
    let helper = daemon::agent::helper_client::connect(mine).await.unwrap();
    let config = LoopConfig {
        node_name: NODE.to_owned(),
        operator_namespace: OPERATOR_NAMESPACE.to_owned(),
        // No poll within a story: the host changes only through the helper.
        poll_interval: Duration::from_secs(3600),
        landlock: None,
        updater_recheck: Duration::from_secs(3600),
    };
    node_loop::run(helper, futures::stream::pending(), client, config).await
}

fn bootc_node(generation: i64, resource_version: &str, spec: BootcNodeSpec) -> BootcNode {
    let mut bn = BootcNode::new(NODE, spec);
    bn.metadata.uid = Some("uid-1".to_owned());
    bn.metadata.generation = Some(generation);
    bn.metadata.resource_version = Some(resource_version.to_owned());
    bn
}

fn spec(desired: &str, state: DesiredImageState) -> BootcNodeSpec {
    BootcNodeSpec {
        desired_image: desired.into(),
        desired_image_state: state,
        reboot_policy: RebootPolicy::RebootOnly,
        pull_secret_ref: None,
        pull_secret_hash: None,
        staging_weights: None,
    }
}

/// The daemon's one watch: its own BootcNode, as a streaming list.
fn the_watch(stream: scripted_api::WatchStream) -> Exchange {
    get(&collection_path::<BootcNode>(None))
        .query("watch", "true")
        .query("sendInitialEvents", "true")
        .query("fieldSelector", &format!("metadata.name={NODE}"))
        .streams(stream)
}

/// The statuses the daemon wrote, in order, as the API server stored them.
#[derive(Clone, Default)]
struct Written(Arc<Mutex<Vec<BootcNodeStatus>>>);

impl Written {
    fn last(&self) -> BootcNodeStatus {
        self.0
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a status written")
    }
}

fn phase_of(body: &Value) -> Option<DaemonPhase> {
    let status: BootcNodeStatus = serde_json::from_value(body["status"].clone()).ok()?;
    status.phase().ok().flatten()
}

/// A status write reporting `phase` (server-side apply as the daemon),
/// answered with `node` carrying it (its version unchanged: the stories
/// feed the daemon every later version themselves). A guarded one carries
/// the version it is conditional on.
fn report(
    phase: DaemonPhase,
    guard: Option<&str>,
    node: &BootcNode,
    written: &Written,
) -> Exchange {
    let exchange = patch(&status_path::<BootcNode>(NODE))
        .query("fieldManager", DAEMON_MANAGER)
        .query("force", "true")
        .body_where(&format!("reports phase {}", phase.as_str()), move |b| {
            phase_of(b) == Some(phase)
        });
    let exchange = match guard {
        Some(version) => exchange.body_includes(json!({"metadata": {"resourceVersion": version}})),
        None => exchange.body_lacks("/metadata/resourceVersion"),
    };
    let (node, written) = (node.clone(), written.clone());
    exchange.answer_with(move |body| {
        let status: BootcNodeStatus = serde_json::from_value(body["status"].clone()).unwrap();
        written.0.lock().unwrap().push(status.clone());
        let mut stored = node;
        stored.status = Some(status);
        (200, serde_json::to_value(stored).unwrap())
    })
}

/// The first part of every approval story: a BootcNode wanting `b` staged
/// on a host booted on `a`; the daemon stages it, a quick pull with no
/// Staging report, and reports it Staged. Returns the script so far and the BootcNode as
/// stored after that.
fn staged_story(
    desired: &str,
    feed: &WatchFeed,
    stream: scripted_api::WatchStream,
    written: &Written,
) -> (Script, BootcNode) {
    let first = bootc_node(1, "5", spec(desired, DesiredImageState::Staged));
    feed.added(&first);
    feed.initial_events_end::<BootcNode>("5");
    let script = Script::new().then(the_watch(stream)).then(report(
        DaemonPhase::Staged,
        None,
        &first,
        written,
    ));
    (script, first)
}

/// The approval: the controller's write of `desiredImageState: Booted`,
/// at resourceVersion 7, carrying the daemon's last report.
fn approved(desired: &str, written: &Written) -> BootcNode {
    let mut bn = bootc_node(2, "7", spec(desired, DesiredImageState::Booted));
    bn.status = Some(written.last());
    bn
}

/// A new spec seen in the watch is staged: a pull that takes longer than
/// `STAGING_REPORT_AFTER` is reported Staging while it runs, then the daemon
/// reports Staged, and nothing is applied.
#[tokio::test(start_paused = true)]
async fn a_new_spec_is_staged_and_reported() {
    let (a, b) = (image('a'), image('b'));
    let host =
        Host::booted(&a).pulling_for(node_loop::STAGING_REPORT_AFTER + Duration::from_secs(1));
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let on_a = bootc_node(1, "5", spec(&a, DesiredImageState::Staged));
    feed.added(&on_a);
    feed.initial_events_end::<BootcNode>("5");
    let mut to_b = bootc_node(2, "6", spec(&b, DesiredImageState::Staged));
    let script = Script::new()
        .then(the_watch(stream))
        .then(report(DaemonPhase::Idle, None, &on_a, &written))
        .then(report(DaemonPhase::Staging, None, &to_b, &written))
        .then(report(DaemonPhase::Staged, None, &to_b, &written));
    let api = ScriptedApi::new(script);
    let new_spec = async {
        // The Idle report answered: the controller's new spec arrives.
        api.until_answered(2).await;
        to_b.status = Some(written.last());
        feed.modified(&to_b);
        api.done().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), new_spec)
        .await;
    assert_eq!(host.calls(), [Call::Stage(b.clone())]);
    let staged = written.last();
    assert_eq!(staged.observed_generation, Some(2));
    assert!(
        staged.staged.as_ref().is_some_and(|s| s.is_image(&b)),
        "{staged:?}"
    );
}

/// An approval is applied once the API server accepted the Rebooting
/// report made on condition of the approving version (resourceVersion 7):
/// that answer is the confirmation, no read of its own.
#[tokio::test(start_paused = true)]
async fn an_approval_is_applied_once_its_guarded_report_is_accepted() {
    let (a, b) = (image('a'), image('b'));
    let host = Host::booted(&a);
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let (script, _) = staged_story(&b, &feed, stream, &written);
    let api = ScriptedApi::new(script.then(report(
        DaemonPhase::Rebooting,
        Some("7"),
        &bootc_node(2, "7", spec(&b, DesiredImageState::Booted)),
        &written,
    )));
    let approve_then_reboot = async {
        api.until_answered(2).await;
        feed.modified(&approved(&b, &written));
        host.applied.notified().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), approve_then_reboot)
        .await;
    assert_eq!(
        host.calls(),
        [Call::Stage(b.clone()), Call::Apply { soft_reboot: false }]
    );
}

/// The guarded report refused (409: the BootcNode changed since the copy
/// that approved): no apply on the stale copy. A fresh read, a new
/// decision, and the report guarded by the fresh version; only its
/// acceptance applies.
#[tokio::test(start_paused = true)]
async fn a_refused_guarded_report_means_a_fresh_read_and_a_new_guarded_report() {
    let (a, b) = (image('a'), image('b'));
    let host = Host::booted(&a);
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let (script, _) = staged_story(&b, &feed, stream, &written);
    let fresh = Arc::new(Mutex::new(None::<BootcNode>));
    let read = fresh.clone();
    let script = script
        .then(
            patch(&status_path::<BootcNode>(NODE))
                .body_includes(json!({"metadata": {"resourceVersion": "7"}}))
                .fails(409, "Conflict"),
        )
        .then(get(&object_path::<BootcNode>(NODE)).answer_with(move |_| {
            (
                200,
                serde_json::to_value(read.lock().unwrap().clone()).unwrap(),
            )
        }))
        .then(report(
            DaemonPhase::Rebooting,
            Some("8"),
            &bootc_node(2, "8", spec(&b, DesiredImageState::Booted)),
            &written,
        ));
    let api = ScriptedApi::new(script);
    let approve_then_reboot = async {
        api.until_answered(2).await;
        let approval = approved(&b, &written);
        // Something else wrote the BootcNode after the approval (its
        // version moved on, the approval stands).
        let mut later = approval.clone();
        later.metadata.resource_version = Some("8".to_owned());
        *fresh.lock().unwrap() = Some(later);
        feed.modified(&approval);
        host.applied.notified().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), approve_then_reboot)
        .await;
    assert_eq!(
        host.calls(),
        [Call::Stage(b.clone()), Call::Apply { soft_reboot: false }]
    );
}

/// The guarded report refused, and the fresh read shows the approval
/// withdrawn: the node stays staged (reported for the new generation) and
/// nothing is applied.
#[tokio::test(start_paused = true)]
async fn an_approval_withdrawn_before_the_report_is_not_applied() {
    let (a, b) = (image('a'), image('b'));
    let host = Host::booted(&a);
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let (script, _) = staged_story(&b, &feed, stream, &written);
    let fresh = Arc::new(Mutex::new(None::<BootcNode>));
    let read = fresh.clone();
    let withdrawn = bootc_node(3, "8", spec(&b, DesiredImageState::Staged));
    let script = script
        .then(
            patch(&status_path::<BootcNode>(NODE))
                .body_includes(json!({"metadata": {"resourceVersion": "7"}}))
                .fails(409, "Conflict"),
        )
        .then(get(&object_path::<BootcNode>(NODE)).answer_with(move |_| {
            (
                200,
                serde_json::to_value(read.lock().unwrap().clone()).unwrap(),
            )
        }))
        .then(report(DaemonPhase::Staged, None, &withdrawn, &written));
    let api = ScriptedApi::new(script);
    let approve_then_withdraw = async {
        api.until_answered(2).await;
        let mut now = withdrawn.clone();
        now.status = Some(written.last());
        *fresh.lock().unwrap() = Some(now);
        feed.modified(&approved(&b, &written));
        api.done().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), approve_then_withdraw)
        .await;
    assert_eq!(host.calls(), [Call::Stage(b.clone())], "applied anyway");
    assert_eq!(written.last().observed_generation, Some(3));
}

/// A status write lost to a passing API outage (a 503) is written again
/// after a backoff; one refused for good (a 422) ends the loop with the
/// write's error, for the pod to restart.
#[tokio::test(start_paused = true)]
async fn a_status_write_is_retried_through_an_outage_and_a_refusal_ends_the_loop() {
    let a = image('a');
    let host = Host::booted(&a);
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let on_a = bootc_node(1, "5", spec(&a, DesiredImageState::Staged));
    feed.added(&on_a);
    feed.initial_events_end::<BootcNode>("5");
    let idle = || {
        patch(&status_path::<BootcNode>(NODE)).body_where("reports phase Idle", |b| {
            phase_of(b) == Some(DaemonPhase::Idle)
        })
    };
    let script = Script::new()
        .then(the_watch(stream))
        .then(idle().fails(503, "ServiceUnavailable"))
        .then(report(DaemonPhase::Idle, None, &on_a, &written));
    let api = ScriptedApi::new(script);
    let written_once = async {
        api.done().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), written_once)
        .await;
    assert_eq!(written.last().phase(), Ok(Some(DaemonPhase::Idle)));

    let (feed, stream) = watch_stream();
    feed.added(&on_a);
    feed.initial_events_end::<BootcNode>("5");
    let script = Script::new()
        .then(the_watch(stream))
        .then(idle().fails(422, "Invalid"));
    let api = ScriptedApi::new(script);
    let ended = api.finish(node_loop(&host, api.client())).await;
    assert!(
        matches!(ended, Err(node_loop::LoopError::StatusWrite { .. })),
        "{ended:?}"
    );
}

/// The BootcNode deleted while the daemon's watch was down (its pool's
/// label removed, say): the resumed watch is too old (410 Expired), and
/// the re-list finds nothing. The daemon takes that for a deletion, as it
/// would a DELETED event, and stages the booted image over the pool's
/// unlocked one, so that its next reboot boots what it ran.
#[tokio::test(start_paused = true)]
async fn a_bootcnode_deleted_while_the_watch_was_down_is_seen_at_the_relist() {
    let (a, b) = (image('a'), image('b'));
    let host = Host::booted(&a).staging_unlocked();
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let (script, _) = staged_story(&b, &feed, stream, &written);
    let (relist, relisted) = watch_stream();
    relist.initial_events_end::<BootcNode>("9");
    let (too_old, resumed_stream) = watch_stream();
    too_old.expired();
    let resumed = get(&collection_path::<BootcNode>(None))
        .query("watch", "true")
        .query("resourceVersion", "5")
        .streams(resumed_stream);
    let api = ScriptedApi::new(script.then(resumed).then(the_watch(relisted)));
    let watch_drops = async {
        api.until_answered(2).await;
        drop(feed);
        api.done().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), watch_drops)
        .await;
    assert_eq!(
        host.calls(),
        [Call::Stage(b.clone()), Call::Stage(a.clone())]
    );
}

/// The BootcNode deleted under a status write (the node left its pool: a
/// deleted pool's cleanup) while the pool's image is staged unlocked: the
/// refused write (404) is the node leaving, not the end of the loop (a
/// daemon restarted then finds no BootcNode and would never undo what the
/// pool staged). It stages the booted image over the pool's.
#[tokio::test(start_paused = true)]
async fn a_bootc_node_deleted_under_a_status_write_is_left_not_fatal() {
    let (a, b) = (image('a'), image('b'));
    let host = Host::booted(&a).staging_unlocked();
    host.state.lock().unwrap().1 = Some(b.clone());
    let (feed, stream) = watch_stream();
    let bn = bootc_node(1, "5", spec(&b, DesiredImageState::Staged));
    feed.added(&bn);
    feed.initial_events_end::<BootcNode>("5");
    let report = patch(&status_path::<BootcNode>(NODE)).body_where("a report", |_| true);
    let script = Script::new()
        .then(the_watch(stream))
        .then(report.fails(404, "NotFound"));
    let api = ScriptedApi::new(script);
    let deleted = async {
        api.until_answered(2).await;
        feed.deleted(&bn);
        api.done().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), deleted).await;
    assert_eq!(host.calls().last(), Some(&Call::Stage(a.clone())));
}

/// The staged image's lock released after the daemon last read the host
/// (no event says so), then the BootcNode deleted: the daemon decides on
/// the host as it is now, and stages the booted image over the unlocked
/// one.
#[tokio::test(start_paused = true)]
async fn a_node_that_leaves_reads_its_host_again_before_deciding() {
    let (a, b) = (image('a'), image('b'));
    let host = Host::booted(&a);
    let (feed, stream) = watch_stream();
    let written = Written::default();
    let (script, staged) = staged_story(&b, &feed, stream, &written);
    let api = ScriptedApi::new(script);
    let unlocked_then_deleted = async {
        api.until_answered(2).await;
        host.unlock();
        feed.deleted(&staged);
        api.done().await;
        settled().await;
    };
    api.run_until(node_loop(&host, api.client()), unlocked_then_deleted)
        .await;
    assert_eq!(
        host.calls(),
        [Call::Stage(b.clone()), Call::Stage(a.clone())]
    );
}
