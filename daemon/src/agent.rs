//! The unprivileged half's entry: everything the loop may use, handed over
//! after the drop. By the time [`run`] runs the process has no capability,
//! runs as an unprivileged uid under seccomp, and cannot execute anything.
//! The caller ([`crate::run_daemon`]) exits non-zero if the helper dies.
//!
//! The agent's room: the node loop ([`node_loop`]) and its state machine
//! ([`machine`], pure), the host watch ([`watch`]), the helper's client
//! ([`helper_client`]), the pull secret and repositories it checks
//! ([`pull_secret`], [`repositories`]), bootc's error texts
//! ([`bootc_errors`]) and the API credentials ([`kubeconf`]).

pub mod bootc_errors;
pub mod helper_client;
pub mod kubeconf;
pub mod machine;
pub mod node_loop;
pub mod pull_secret;
pub mod repositories;
pub mod watch;

use futures::StreamExt;

use helper_client::HelperClient;
use node_loop::{LoopConfig, LoopError};
use watch::HostEvents;

/// What the loop is given.
pub struct AgentContext {
    /// Client of the privileged helper (Stage, Apply, Status, WriteAuth).
    pub helper: HelperClient,
    /// "Host status may have changed" events (inotify on ostree/bootc).
    pub host_events: HostEvents,
    /// The API client (its one watch is on this node's BootcNode).
    pub kube: kube::Client,
    pub config: LoopConfig,
}

impl std::fmt::Debug for AgentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentContext")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Runs the node loop until the helper goes away or the watch ends.
pub async fn run(ctx: AgentContext) -> Result<(), LoopError> {
    let host_changed = futures::stream::unfold(ctx.host_events, |mut events| async move {
        match events.next().await {
            Ok(()) => Some(((), events)),
            Err(e) => {
                tracing::error!(error = %e, "host watch failed");
                None
            }
        }
    })
    .boxed();
    node_loop::run(ctx.helper, host_changed, ctx.kube, ctx.config).await
}
