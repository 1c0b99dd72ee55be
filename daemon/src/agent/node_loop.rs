//! The daemon's unprivileged loop: one watch on its own BootcNode, host
//! status from the helper, decisions from [`super::machine`], status writes
//! only when something changed, and bootc commands only through the helper.
//!
//! Inputs that wake the loop: a BootcNode event, a host-change event
//! (inotify on `ostree/bootc`), the fallback poll, and a retry timer after a
//! failure. Host status is re-read after each of the daemon's own commands
//! too, because bootc does not always touch its mtime.
//!
//! No heartbeats: a spec change that leaves the node Idle on its desired
//! image (an approval withdrawn as its slot is released) is not
//! acknowledged with a write. The apply is guarded (SECURITY.md P28): the
//! `Rebooting` report (boot id, booted and staged deployments) is written
//! first, on condition that the BootcNode is still the version that
//! approved it (its `resourceVersion`); a refused report means a fresh read
//! and a new decision. So a reboot into the wrong image is detected and not
//! retried; after a soft reboot, which keeps the boot id, the booted
//! deployment changing (or the staged one gone) counts as the reboot.

use std::pin::Pin;
use std::time::{Duration, Instant};

use api::conditions;
use api::{BootEntryStatus, BootcNode, BootcNodeStatus, SecretReference, labels};
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};

use super::helper_client::CallError;
use super::machine::{self, Action, Decision, Failure, HostProblem, HostView, Inputs, Operation};
use super::pull_secret::{self, PullSecretContent};

/// The helper client over the socketpair.
pub type Helper = super::helper_client::HelperClient;

/// The default fallback poll of the host's status.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(300);
/// How often the host is read while it reports an automatic updater.
pub const DEFAULT_UPDATER_RECHECK: Duration = Duration::from_secs(60);

/// After bootc accepted an apply, how long to wait for the host to reboot
/// before reporting that it did not (the apply failed). Not the planner's
/// `rollout::NOT_READY_WHILE_REBOOTING`, which is how long a node approved to
/// boot may be NotReady before it counts as unhealthy.
pub const REBOOT_AFTER_APPLY_TIMEOUT: Duration = Duration::from_secs(600);

/// A pull that ends within this is reported once, by its outcome (Staged,
/// or the failure): its Staging report would be outdated within seconds, a
/// status write per update for nothing (a pull of an image whose layers the
/// host has is that quick). A longer pull is reported Staging from then on,
/// while it runs; until then the node shows the spec not yet acknowledged
/// (the controller's silent-daemon deadline is minutes).
pub const STAGING_REPORT_AFTER: Duration = Duration::from_secs(5);

/// Settings of the loop.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    pub node_name: String,
    /// The only namespace pull secrets are read from.
    pub operator_namespace: String,
    pub poll_interval: Duration,
    /// The Landlock sandbox this daemon runs under (None: not known, as in
    /// tests that run the loop unconfined), reported on every status.
    pub landlock: Option<api::LandlockStatus>,
    /// How often the host is read while it reports an automatic updater
    /// ([`machine::updaters_recheck`]).
    pub updater_recheck: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("the helper is gone ({0}); exiting so that the pod restarts with a new one")]
    HelperGone(CallError),
    #[error("writing the status of BootcNode {node}: {source}")]
    StatusWrite { node: String, source: kube::Error },
    #[error("the watch of BootcNode {node} ended")]
    WatchEnded { node: String },
    #[error("the host-change event source ended")]
    HostEventsEnded,
}

/// A Stage call for `image` with the pool's staging weights (the defaults
/// when it sets none, or when the node has left its pool).
fn stage_request(image: String, weights: Option<&api::StagingWeights>) -> proto::StageRequest {
    let (io_weight, cpu_weight) = api::StagingWeights::resolved(weights);
    proto::StageRequest {
        image,
        io_weight,
        cpu_weight,
    }
}

/// Is this helper error a broken connection (fatal) rather than a refused
/// or failed command (reported, retried)?
fn helper_gone(error: &CallError) -> bool {
    error.is_gone()
}

fn entry(e: Option<proto::BootEntry>) -> Option<BootEntryStatus> {
    e.map(|e| BootEntryStatus {
        image: Some(e.image).filter(|s| !s.is_empty()).map(Into::into),
        image_digest: Some(e.digest).filter(|s| !s.is_empty()).map(Into::into),
        version: e.version.map(Into::into),
        timestamp: e.timestamp.map(Into::into),
        architecture: Some(e.architecture)
            .filter(|s| !s.is_empty())
            .map(Into::into),
        soft_reboot_capable: e.soft_reboot_capable,
        incompatible: e.incompatible,
        download_only: e.download_only,
    })
}

/// Maps the helper's Status answer to what the state machine reads.
pub fn host_view(status: proto::StatusResponse) -> HostView {
    HostView {
        booted: entry(status.booted),
        staged: entry(status.staged),
        rollback: entry(status.rollback),
        boot_id: status.boot_id,
        download_only_supported: status.download_only_supported,
        host_updaters: status.host_updaters,
    }
}

/// Which pull secret the host's auth file was last written from, and for
/// which spec of which BootcNode. When due ([`pull_secret::write_due`]) it
/// is written again for every new spec (a new `metadata.generation`), not
/// only a new reference or hash: something on the host may have removed or
/// replaced it (`/run` is a tmpfs), and it must be there before bootc pulls.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AuthWritten {
    reference: SecretReference,
    hash: Option<String>,
    /// The BootcNode's uid: a re-created object starts its generations anew.
    uid: Option<String>,
    generation: Option<i64>,
}

/// Why the pull secret could not be read for the host.
enum AuthProblem {
    /// The Secret's content is not what the controller announced (it
    /// changed since, or the announcement is late).
    NotAnnounced(String),
    Other(String),
}

/// The last `bootc status` failed: what to report, and when to read again.
#[derive(Clone, Debug)]
struct StatusFailure {
    problem: HostProblem,
    attempts: u32,
    retry_at: Instant,
}

/// What became of a decision's status report. The `Rebooting` report is
/// written on condition that the BootcNode is still the version the apply
/// was decided on (its `resourceVersion`, a precondition the API server
/// checks): its answer confirms the approval with no read of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Report {
    /// Written.
    Written,
    /// Written on condition: the BootcNode had not changed.
    Confirmed,
    /// Not written: it told nothing new (or goes out with the pull).
    Unwritten,
    /// Refused (409): the BootcNode changed since the copy decided on.
    Stale,
}

/// A fresh read's answer on the approval an apply was decided on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Approval {
    Holds,
    Changed,
    /// The read failed: not applying now, retried later.
    Unknown,
}

/// After a step of [`NodeLoop::reconcile`]: decide again, or wait for the
/// next wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Again,
    Done,
}

type WatchStream =
    Pin<Box<dyn Stream<Item = Result<watcher::Event<BootcNode>, watcher::Error>> + Send>>;

struct NodeLoop {
    helper: Helper,
    watch: WatchStream,
    nodes: Api<BootcNode>,
    secrets: Api<Secret>,
    config: LoopConfig,
    started: Instant,
    node: Option<BootcNode>,
    host: Option<HostView>,
    /// Set while `bootc status` fails: `host` is then the last good answer
    /// (or none), not to be acted on.
    status_failure: Option<StatusFailure>,
    failure: Option<Failure>,
    auth_written: Option<AuthWritten>,
    /// The pull secret last read, as announced: the auth file is rewritten
    /// from it while the BootcNode announces the same content.
    pull_secret: Option<pull_secret::Cached>,
    retry_at: Option<Instant>,
    /// When the host is read again for its automatic updaters.
    updaters_recheck_at: Option<Instant>,
    /// Set when bootc accepted an apply: the host is going down, so the
    /// loop only waits (it does not report what the half-rebooted host says).
    rebooting_since: Option<Instant>,
    /// The image this helper staged (it applies only what it staged itself,
    /// so after a restart the decision is to stage again: a no-op for bootc).
    staged_by_me: Option<String>,
    /// The last status written, so that an identical one is not re-sent
    /// while the watch has not yet delivered our own write.
    last_written: Option<BootcNodeStatus>,
    /// The credential strings of the pull secret last read: removed from
    /// every message before it can reach the BootcNode's status.
    redact: Vec<String>,
    /// The image the pool last told this node, once its BootcNode is
    /// deleted (the node left its pool): what it may have to undo
    /// ([`machine::on_leaving`]).
    left: Option<String>,
    /// While the watch lists again (after a gap): the image of the
    /// BootcNode held before, until the list shows it still exists. A
    /// deletion in the gap has no Delete event of its own.
    relisting: Option<String>,
}

/// Runs until the helper goes away or the watch ends for good.
pub async fn run(
    helper: Helper,
    host_changed: impl Stream<Item = ()> + Send,
    kube: kube::Client,
    config: LoopConfig,
) -> Result<(), LoopError> {
    let nodes: Api<BootcNode> = Api::all(kube.clone());
    let secrets: Api<Secret> = Api::namespaced(kube, &config.operator_namespace);
    // One WATCH that starts with the current object (sendInitialEvents)
    // instead of a LIST and then a WATCH: every supported API server serves it.
    let watch_config = watcher::Config::default()
        .fields(&format!("metadata.name={}", config.node_name))
        .streaming_lists();
    let watch: WatchStream =
        Box::pin(watcher(nodes.clone(), watch_config).backoff(api::watch::backoff()));
    let mut host_changed: Pin<Box<dyn Stream<Item = ()> + Send>> = Box::pin(host_changed);
    let mut poll = tokio::time::interval(config.poll_interval);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await;

    let mut me = NodeLoop {
        helper,
        watch,
        nodes,
        secrets,
        config,
        started: Instant::now(),
        node: None,
        host: None,
        status_failure: None,
        failure: None,
        auth_written: None,
        pull_secret: None,
        retry_at: None,
        updaters_recheck_at: None,
        rebooting_since: None,
        staged_by_me: None,
        last_written: None,
        redact: Vec::new(),
        left: None,
        relisting: None,
    };
    me.refresh_host().await?;
    tracing::info!(node = %me.config.node_name, "watching BootcNode");

    loop {
        let (retry, recheck) = (me.retry_at, me.updaters_recheck_at);
        tokio::select! {
            event = me.watch.next() => {
                match event {
                    Some(Ok(ev)) => me.on_watch_event(ev),
                    Some(Err(e)) => {
                        // The watcher backs off and resumes by itself.
                        tracing::warn!(error = %e, "BootcNode watch error");
                        continue;
                    }
                    None => return Err(LoopError::WatchEnded { node: me.config.node_name.clone() }),
                }
            }
            ev = host_changed.next() => {
                if ev.is_none() {
                    return Err(LoopError::HostEventsEnded);
                }
                me.refresh_host().await?;
            }
            _ = poll.tick() => me.refresh_host().await?,
            _ = sleep_until(recheck) => me.refresh_host().await?,
            _ = sleep_until(retry) => {
                me.retry_at = None;
                if me.status_failure.is_some() {
                    me.refresh_host().await?;
                }
            }
        }
        me.reconcile().await?;
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl NodeLoop {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Did this daemon's helper stage the node's desired image?
    fn staged_here(&self, node: &BootcNode) -> bool {
        self.staged_by_me.as_deref() == Some(node.spec.desired_image.as_str())
    }

    fn on_watch_event(&mut self, event: watcher::Event<BootcNode>) {
        match event {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => {
                // Our own write coming back is the new baseline; an older
                // one (its event late) is not: what we wrote since stays
                // the baseline, or it would be written again.
                let ours_back = self
                    .last_written
                    .as_ref()
                    .is_none_or(|w| !machine::worth_writing(node.status.as_ref(), w));
                if node.status.is_some() && ours_back {
                    self.last_written = None;
                }
                let generation = node.metadata.generation;
                if self.node.as_ref().map(|n| n.metadata.generation) != Some(generation) {
                    // The start of "spec change seen -> Stage" (a performance target).
                    tracing::info!(?generation, desired = %node.spec.desired_image, "spec seen");
                }
                self.node = Some(node);
                self.left = None;
                self.relisting = None;
            }
            watcher::Event::Delete(node) => self.deleted(node.spec.desired_image.into()),
            watcher::Event::Init => {
                self.relisting = self.node.as_ref().map(|n| n.spec.desired_image.to_string());
            }
            watcher::Event::InitDone => {
                if let Some(desired) = self.relisting.take() {
                    self.deleted(desired);
                }
                if self.node.is_none() {
                    tracing::info!(node = %self.config.node_name, "no BootcNode yet; waiting for the controller");
                }
            }
        }
    }

    /// The BootcNode is gone: the node left its pool, told `desired` last.
    fn deleted(&mut self, desired: String) {
        tracing::info!("BootcNode deleted: the node left its pool; waiting");
        self.left = Some(desired);
        self.node = None;
        self.last_written = None;
    }

    async fn refresh_host(&mut self) -> Result<(), LoopError> {
        match self.helper.status(proto::StatusRequest {}).await {
            Ok(resp) => {
                let host = host_view(resp);
                let recheck = machine::updaters_recheck(&host, self.config.updater_recheck);
                self.updaters_recheck_at = recheck.map(|after| Instant::now() + after);
                self.host = Some(host);
                if self.status_failure.take().is_some() {
                    tracing::info!("bootc status answers again");
                }
                Ok(())
            }
            Err(status) if helper_gone(&status) => Err(LoopError::HelperGone(status)),
            Err(status) => {
                let attempts = self.status_failure.as_ref().map_or(1, |f| f.attempts + 1);
                let delay = machine::status_retry(attempts);
                let message = super::bootc_errors::redact(status.message(), &self.redact);
                tracing::warn!(error = %message, attempts, retry_in = ?delay, "bootc status failed");
                self.status_failure = Some(StatusFailure {
                    problem: machine::status_failed(&message),
                    attempts,
                    retry_at: Instant::now() + delay,
                });
                Ok(())
            }
        }
    }

    /// Decides and acts until nothing more is to be done right now. Bounded:
    /// each action changes the host or records a failure.
    async fn reconcile(&mut self) -> Result<(), LoopError> {
        if self.awaiting_reboot()? {
            return Ok(());
        }
        for _ in 0..8 {
            // A command may have taken long: take in what the controller
            // said meanwhile before deciding again.
            self.take_queued_events();
            let Some(node) = self.node.clone() else {
                return self.leave().await;
            };
            if self.report_host_problem(&node).await? {
                return Ok(());
            }
            let Some(host) = self.host.clone() else {
                return Ok(());
            };
            let decision = self.auth_before_pull(&node, &host).await?;
            // A Staging report goes out during a long pull (below), not before it.
            let report = match decision.action {
                Action::Stage { .. } => Report::Unwritten,
                _ => self.write_status(&node, &host, &decision).await?,
            };
            let next = match decision.action.clone() {
                Action::None => Next::Done,
                Action::RetryAfter(after) => {
                    self.retry_at = Some(Instant::now() + after);
                    Next::Done
                }
                Action::Stage { image } => self.stage(&node, &host, &decision, image).await?,
                Action::Apply { soft_reboot } => self.apply(&node, soft_reboot, report).await?,
            };
            if next == Next::Done {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Out of any pool: undoes what the pool had staged, if a reboot would
    /// boot it ([`machine::on_leaving`]). A failure is retried after
    /// [`machine::BACKOFF_BASE`], with nothing to report it on but the log.
    async fn leave(&mut self) -> Result<(), LoopError> {
        if self.left.is_none() {
            return Ok(());
        }
        // Decided on the host as it is now, not as the last event left it:
        // whether a reboot would boot what is staged (its lock) may have
        // changed with no event of its own.
        self.refresh_host().await?;
        let (Some(told), Some(host)) = (self.left.clone(), self.host.as_ref()) else {
            return Ok(());
        };
        if self.status_failure.is_some() {
            return Ok(());
        }
        let Some(image) = machine::on_leaving(&told, host) else {
            self.left = None;
            return Ok(());
        };
        tracing::info!(%told, %image, "left the pool with its image staged unlocked: staging the booted image over it");
        let result = self.helper.stage(stage_request(image.clone(), None)).await;
        self.staged_by_me = None;
        match result {
            Ok(_) => self.left = None,
            Err(status) if helper_gone(&status) => return Err(LoopError::HelperGone(status)),
            Err(status) => {
                let message = super::bootc_errors::redact(status.message(), &self.redact);
                tracing::warn!(%image, error = %message, retry_in = ?machine::BACKOFF_BASE, "could not stage the booted image over the pool's");
                self.retry_at = Some(Instant::now() + machine::BACKOFF_BASE);
            }
        }
        self.refresh_host().await
    }

    /// True while the host is going down after an accepted apply (nothing
    /// to decide then). Past [`REBOOT_AFTER_APPLY_TIMEOUT`] without a reboot, records the
    /// apply as failed and returns false.
    fn awaiting_reboot(&mut self) -> Result<bool, LoopError> {
        let Some(since) = self.rebooting_since else {
            return Ok(false);
        };
        if since.elapsed() < REBOOT_AFTER_APPLY_TIMEOUT {
            return Ok(true);
        }
        self.rebooting_since = None;
        let image = self
            .node
            .as_ref()
            .map(|n| n.spec.desired_image.clone())
            .unwrap_or_default();
        let message = format!(
            "bootc accepted the apply {} s ago but the node has not rebooted",
            since.elapsed().as_secs()
        );
        self.record(
            Operation::Apply,
            &image,
            Err(CallError::failed(proto::Code::DeadlineExceeded, message)),
        )?;
        Ok(false)
    }

    /// Takes in the watch events already delivered, without waiting.
    fn take_queued_events(&mut self) {
        while let Some(Some(event)) = self.watch.next().now_or_never() {
            match event {
                Ok(ev) => self.on_watch_event(ev),
                Err(e) => tracing::warn!(error = %e, "BootcNode watch error"),
            }
        }
    }

    /// Decides, first writing the host's auth file when that is due
    /// ([`pull_secret::write_due`]); a pull is decided again after the
    /// write, whose failure holds it.
    async fn auth_before_pull(
        &mut self,
        node: &BootcNode,
        host: &HostView,
    ) -> Result<Decision, LoopError> {
        let decision = self.decide(node, host);
        let pulling = matches!(decision.action, Action::Stage { .. });
        if !pull_secret::write_due(pulling, self.auth_written.is_some()) {
            return Ok(decision);
        }
        self.sync_pull_secret(node).await?;
        Ok(if pulling {
            self.decide(node, host)
        } else {
            decision
        })
    }

    /// The state machine's decision on what is known now.
    fn decide(&self, node: &BootcNode, host: &HostView) -> Decision {
        let decision = machine::decide(&Inputs {
            spec: &node.spec,
            generation: node.metadata.generation,
            previous: node.status.as_ref(),
            host,
            failure: self.failure.as_ref(),
            now_ms: self.now_ms(),
            staged_here: self.staged_here(node),
        });
        self.with_auth_failure(decision)
    }

    /// Pulls `image` (reported Staging if it runs past
    /// [`STAGING_REPORT_AFTER`]), records the outcome and reads the host again.
    async fn stage(
        &mut self,
        node: &BootcNode,
        host: &HostView,
        decision: &Decision,
        image: String,
    ) -> Result<Next, LoopError> {
        tracing::info!(%image, "staging");
        // The pull starts at once; its Staging report goes out only if it
        // is still running after STAGING_REPORT_AFTER (it disrupts
        // nothing), and then whatever the pull's outcome.
        let mut helper = self.helper.clone();
        let request = stage_request(image.clone(), node.spec.staging_weights.as_ref());
        let pull = helper.stage(request);
        tokio::pin!(pull);
        let result = tokio::select! {
            result = &mut pull => result,
            () = tokio::time::sleep(STAGING_REPORT_AFTER) => {
                let (written, result) =
                    tokio::join!(self.write_status(node, host, decision), &mut pull);
                written?;
                result
            }
        };
        // The helper forgets what it staged before it stages: after a
        // failure it has nothing to apply.
        self.staged_by_me = result.is_ok().then(|| image.clone());
        self.record(
            Operation::Stage,
            &image,
            result.map(|r| {
                if !r.locked {
                    tracing::warn!(%image, "staged unlocked: this bootc has no --download-only");
                }
            }),
        )?;
        self.refresh_host().await?;
        Ok(Next::Again)
    }

    /// The one disruptive step, made only once the server confirmed that
    /// the BootcNode is unchanged since the copy that approved it (not the
    /// watch's word alone): by accepting the guarded `Rebooting` report,
    /// or, when there was nothing new to report, by a fresh read. Done once
    /// bootc accepted it: the host is going down and the next daemon reports.
    async fn apply(
        &mut self,
        node: &BootcNode,
        soft_reboot: bool,
        report: Report,
    ) -> Result<Next, LoopError> {
        let approval = match report {
            Report::Confirmed => Approval::Holds,
            Report::Stale => match self.approval_still_holds(node).await {
                // The report was refused: decide again on the fresh copy,
                // whose Rebooting report goes out guarded by it.
                Approval::Holds | Approval::Changed => Approval::Changed,
                Approval::Unknown => Approval::Unknown,
            },
            Report::Written | Report::Unwritten => self.approval_still_holds(node).await,
        };
        match approval {
            Approval::Holds => {}
            Approval::Changed => return Ok(Next::Again),
            Approval::Unknown => return Ok(Next::Done),
        }
        tracing::info!(soft_reboot, image = %node.spec.desired_image, "applying the staged image");
        let result = self.helper.apply(proto::ApplyRequest { soft_reboot }).await;
        let applied = result.is_ok();
        self.record(
            Operation::Apply,
            &node.spec.desired_image,
            result.map(|_| ()),
        )?;
        if applied {
            self.rebooting_since = Some(Instant::now());
            self.retry_at = Some(Instant::now() + REBOOT_AFTER_APPLY_TIMEOUT);
            return Ok(Next::Done);
        }
        self.refresh_host().await?;
        Ok(Next::Again)
    }

    /// When bootc's status cannot be gone by (it failed, or the host is not
    /// deployed via bootc), reports why on the BootcNode and returns true:
    /// nothing is decided on a host the daemon cannot see. A failed read is
    /// retried after its backoff.
    async fn report_host_problem(&mut self, node: &BootcNode) -> Result<bool, LoopError> {
        let (problem, host) = match &self.status_failure {
            Some(f) => {
                self.retry_at = Some(f.retry_at);
                (f.problem.clone(), None)
            }
            None => match self.host.as_ref().and_then(machine::host_problem) {
                Some(p) => (p, self.host.clone()),
                None => return Ok(false),
            },
        };
        let (mut status, degraded) = machine::status_for_problem(
            node.status.as_ref(),
            node.metadata.generation,
            host.as_ref(),
            &problem,
        );
        let now = Time(jiff::Timestamp::now());
        conditions::apply(
            &mut status.conditions,
            &degraded,
            node.metadata.generation,
            &now,
        );
        if self.store_status(node, status).await? {
            tracing::warn!(reason = problem.reason.as_str(), message = %problem.message, "host problem reported");
        }
        Ok(true)
    }

    /// Re-reads the BootcNode: the approval holds when its spec is
    /// unchanged, so the apply decided on it may go ahead. The fresh object
    /// replaces the cached one, for the caller to decide again on a change.
    async fn approval_still_holds(&mut self, node: &BootcNode) -> Approval {
        match self.nodes.get_opt(&self.config.node_name).await {
            Ok(Some(fresh)) => {
                let same = fresh.spec == node.spec;
                if !same {
                    tracing::info!("the BootcNode changed before the apply; deciding again");
                }
                self.node = Some(fresh);
                if same {
                    Approval::Holds
                } else {
                    Approval::Changed
                }
            }
            Ok(None) => {
                self.node = None;
                Approval::Changed
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot confirm the approval; not applying now");
                self.retry_at = Some(Instant::now() + Duration::from_secs(5));
                Approval::Unknown
            }
        }
    }

    fn record(
        &mut self,
        operation: Operation,
        image: &str,
        result: Result<(), CallError>,
    ) -> Result<(), LoopError> {
        match result {
            Ok(()) => {
                if self
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.operation == operation)
                {
                    self.failure = None;
                }
                Ok(())
            }
            Err(status) if helper_gone(&status) => Err(LoopError::HelperGone(status)),
            Err(status) => {
                let before = self
                    .failure
                    .as_ref()
                    .filter(|f| f.operation == operation && f.image == image);
                let attempts = before.map_or(1, |f| f.attempts + 1);
                let first_at_ms = before.map_or_else(|| self.now_ms(), |f| f.first_at_ms);
                let delay = Failure::backoff(attempts);
                let verb = match operation {
                    Operation::Stage => "staging",
                    Operation::Apply => "applying",
                    Operation::WriteAuth => "writing the pull secret for",
                };
                let message = super::bootc_errors::redact(
                    &format!(
                        "{verb} {image} failed (attempt {attempts}): {}",
                        status.message()
                    ),
                    &self.redact,
                );
                tracing::warn!(%message, retry_in = ?delay, "bootc command failed");
                self.failure = Some(Failure {
                    operation,
                    image: image.to_owned(),
                    message,
                    attempts,
                    first_at_ms,
                    retry_at_ms: self.now_ms()
                        + u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                });
                Ok(())
            }
        }
    }

    /// A pull-secret failure holds a download, and makes the node degraded
    /// while it needs one. A node that needs none (on its image, or staged
    /// and approved) is not degraded by it: a Secret deleted or broken is
    /// the pool's problem, reported there once, not every node's.
    fn with_auth_failure(&self, mut decision: Decision) -> Decision {
        if let Some(f) = self
            .failure
            .as_ref()
            .filter(|f| f.operation == Operation::WriteAuth)
            && matches!(decision.action, Action::Stage { .. })
        {
            decision.degraded = Some(f.message.clone());
            let wait = f.retry_at_ms.saturating_sub(self.now_ms()).max(1);
            decision.action = Action::RetryAfter(Duration::from_millis(wait));
        }
        decision
    }

    /// Writes the node's pull secret to the host, once per spec of the
    /// BootcNode (its reference or hash, and any other field): from the
    /// content read before while the BootcNode announces the same
    /// (reference and hash), otherwise after one GET checked against the
    /// hash. A failure is retried after its backoff, not on every wake-up,
    /// and its retry reads the Secret again.
    async fn sync_pull_secret(&mut self, node: &BootcNode) -> Result<(), LoopError> {
        let auth_failed = self
            .failure
            .as_ref()
            .filter(|f| f.operation == Operation::WriteAuth);
        let Some(reference) = node.spec.pull_secret_ref.clone() else {
            if auth_failed.is_some() {
                self.failure = None;
            }
            self.pull_secret = None;
            return Ok(());
        };
        let wanted = AuthWritten {
            reference: reference.clone(),
            hash: node.spec.pull_secret_hash.clone(),
            uid: node.metadata.uid.clone(),
            generation: node.metadata.generation,
        };
        if self.auth_written.as_ref() == Some(&wanted) {
            return Ok(());
        }
        let write_failed = auth_failed.is_some();
        if auth_failed.is_some_and(|f| f.retry_at_ms > self.now_ms()) {
            return Ok(());
        }
        let label = format!("{}/{}", reference.namespace, reference.name);
        let hash = node.spec.pull_secret_hash.as_deref();
        let source = pull_secret::source(
            self.pull_secret.as_ref().map(|c| &c.announced),
            &reference,
            hash,
            write_failed,
        );
        let content = match (source, &self.pull_secret) {
            (pull_secret::Source::Reuse, Some(cached)) => cached.content.clone(),
            _ => match self.fetch_auth(&reference, hash).await {
                Ok(content) => {
                    self.redact = super::bootc_errors::secret_strings(content.bytes());
                    self.pull_secret = pull_secret::Cached::new(&reference, hash, content.clone());
                    content
                }
                Err(problem) => return self.auth_unreadable(problem, wanted, &label),
            },
        };
        let result = self
            .helper
            .write_auth(proto::WriteAuthRequest {
                docker_config_json: content.bytes().to_vec(),
            })
            .await
            .map(|_| ());
        let ok = result.is_ok();
        self.record(Operation::WriteAuth, &label, result)?;
        if ok {
            tracing::info!(secret = %label, generation = ?wanted.generation, ?source, "pull secret written to the host");
            self.auth_written = Some(wanted);
        }
        Ok(())
    }

    /// The Secret could not be read (or not as announced). When the host
    /// already holds the announced content (this spec's write is only in
    /// case something cleared `/run`), that is kept: a Secret changed since
    /// is the controller's next announcement, and one gone or unreadable
    /// now is the pool's problem, not this node's. Otherwise it is a failure.
    fn auth_unreadable(
        &mut self,
        problem: AuthProblem,
        wanted: AuthWritten,
        label: &str,
    ) -> Result<(), LoopError> {
        let holds_announced = self
            .auth_written
            .as_ref()
            .is_some_and(|w| w.reference == wanted.reference && w.hash == wanted.hash);
        match problem {
            AuthProblem::NotAnnounced(message) if holds_announced => {
                tracing::info!(secret = %label, %message, "keeping the host's auth file until the controller announces the new content");
                self.auth_written = Some(wanted);
                Ok(())
            }
            AuthProblem::Other(message) if holds_announced => {
                tracing::warn!(secret = %label, %message, "cannot read the pull secret again; keeping the host's auth file");
                self.auth_written = Some(wanted);
                Ok(())
            }
            AuthProblem::NotAnnounced(message) | AuthProblem::Other(message) => self.record(
                Operation::WriteAuth,
                label,
                Err(CallError::failed(proto::Code::FailedPrecondition, message)),
            ),
        }
    }

    async fn fetch_auth(
        &self,
        reference: &SecretReference,
        hash: Option<&str>,
    ) -> Result<PullSecretContent, AuthProblem> {
        if reference.namespace != self.config.operator_namespace {
            return Err(AuthProblem::Other(format!(
                "pull secret {}/{} is outside the operator namespace {}; refusing to read it",
                reference.namespace, reference.name, self.config.operator_namespace
            )));
        }
        let secret = self.secrets.get(&reference.name).await.map_err(|e| {
            // RBAC lets the daemons read only the Secrets a pool names.
            let hint = match &e {
                kube::Error::Api(s) if s.code == 403 => format!(
                    " (daemons may read only the Secrets a pool names: bootc-controller grants them in Role {}/{})",
                    self.config.operator_namespace,
                    labels::DAEMON_PULL_SECRETS_ROLE
                ),
                _ => String::new(),
            };
            AuthProblem::Other(format!(
                "reading Secret {}/{}: {e}{hint}",
                reference.namespace, reference.name
            ))
        })?;
        if let Some(want) = hash {
            let have = api::pull_secret::version(&secret.metadata).unwrap_or_default();
            if have != want {
                return Err(AuthProblem::NotAnnounced(format!(
                    "Secret {}/{} is at version {have}, the controller announced {want}; waiting for it to catch up",
                    reference.namespace, reference.name
                )));
            }
        }
        let mut data = secret.data.unwrap_or_default();
        data.remove(".dockerconfigjson").map(|v| PullSecretContent::new(v.0)).ok_or_else(|| {
            AuthProblem::Other(format!(
                "Secret {}/{} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)",
                reference.namespace, reference.name
            ))
        })
    }

    /// Writes the status for `decision`, unless it is what is stored. The
    /// report of an apply is guarded by the version of `node` (see [`Report`]).
    async fn write_status(
        &mut self,
        node: &BootcNode,
        host: &HostView,
        decision: &Decision,
    ) -> Result<Report, LoopError> {
        let inputs = Inputs {
            spec: &node.spec,
            generation: node.metadata.generation,
            previous: node.status.as_ref(),
            host,
            failure: None,
            now_ms: 0,
            staged_here: self.staged_here(node),
        };
        // Whole seconds, as the API server keeps a time.
        let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
            .map_or_else(|_| Time(jiff::Timestamp::now()), Time);
        let mut status = machine::status_to_write(decision, &inputs, &now);
        // The record as last written: the watched object may not show it yet.
        let written = self.last_written.as_ref().or(node.status.as_ref());
        status.history = api::node_history::record(
            written.map_or(&[][..], |s| s.history.as_slice()),
            status.booted.as_ref(),
            status.staged.as_ref(),
            node,
            &now,
        );
        let guard = match decision.action {
            Action::Apply { .. } => node.metadata.resource_version.as_deref(),
            _ => None,
        };
        let report = self.store_guarded(node, status, guard).await?;
        match report {
            Report::Written | Report::Confirmed => tracing::info!(
                phase = decision.phase.as_str(),
                degraded = decision.degraded.is_some(),
                message = %decision.phase_message,
                "status written"
            ),
            Report::Stale => {
                tracing::info!(
                    "the BootcNode changed since the apply was decided; reading it again"
                );
            }
            Report::Unwritten => {}
        }
        Ok(report)
    }

    /// Writes `status` unless it tells nothing new; true when written.
    async fn store_status(
        &mut self,
        node: &BootcNode,
        status: BootcNodeStatus,
    ) -> Result<bool, LoopError> {
        Ok(self.store_guarded(node, status, None).await? != Report::Unwritten)
    }

    /// Writes `status` unless it tells nothing new, on condition that the
    /// BootcNode is still at `guard`'s resourceVersion when one is given.
    async fn store_guarded(
        &mut self,
        node: &BootcNode,
        status: BootcNodeStatus,
        guard: Option<&str>,
    ) -> Result<Report, LoopError> {
        let mut status = status;
        status.landlock.clone_from(&self.config.landlock);
        let stored = self.last_written.as_ref().or(node.status.as_ref());
        if !machine::worth_writing(stored, &status) {
            return Ok(Report::Unwritten);
        }
        tracing::debug!(
            stored = %serde_json::to_string(&stored).unwrap_or_default(),
            new = %serde_json::to_string(&status).unwrap_or_default(),
            "status differs"
        );
        let mut patch = serde_json::json!({
            "apiVersion": BootcNode::api_version(&()),
            "kind": BootcNode::kind(&()),
            "status": status,
        });
        if let Some(version) = guard {
            patch["metadata"] = serde_json::json!({ "resourceVersion": version });
        }
        let name = self.config.node_name.clone();
        // A status lost to a passing API outage (a restart: refused
        // connections, then 403s while its RBAC cache warms) is retried with
        // backoff; only a lasting or non-transient failure ends the loop.
        let deadline = Instant::now() + STATUS_WRITE_PATIENCE;
        let mut delay = Duration::from_millis(200);
        loop {
            match self
                .nodes
                .patch_status(
                    &name,
                    &PatchParams::apply(labels::DAEMON_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(status)) if guard.is_some() && status.code == 409 => {
                    return Ok(Report::Stale);
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    // Deleted under the write: the node left its pool (its
                    // Delete event may be behind). Not the end of the loop:
                    // a daemon restarted now would find no BootcNode and
                    // never undo what the pool staged.
                    self.deleted(node.spec.desired_image.to_string());
                    return Ok(Report::Stale);
                }
                Err(source) if transient(&source) && Instant::now() + delay < deadline => {
                    tracing::warn!(error = %source, retry_in = ?delay, "status write failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                Err(source) => {
                    return Err(LoopError::StatusWrite {
                        node: name.clone(),
                        source,
                    });
                }
            }
        }
        self.last_written = Some(status);
        Ok(if guard.is_some() {
            Report::Confirmed
        } else {
            Report::Written
        })
    }
}

/// How long a status write is retried before the daemon gives up (and is
/// restarted by its DaemonSet).
const STATUS_WRITE_PATIENCE: Duration = Duration::from_secs(120);

/// Worth retrying: no answer at all, a server error, throttling, or the
/// 403 a restarted API server gives while its RBAC cache warms.
fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429 || status.code == 403,
        _ => true,
    }
}
