//! The unprivileged loop. **Extension point for issue 4** (watch the
//! BootcNode, drive Idle / Staging / Staged / Rebooting, write status):
//! replace the body of [`run`]. It gets everything it may use in
//! [`AgentContext`]; by the time it runs the process has no capability,
//! runs as an unprivileged uid under seccomp, and cannot execute anything.
//! The caller ([`crate::run_daemon`]) exits non-zero if the helper dies,
//! so `run` need not watch for that.
//!
//! Notes for the loop:
//! - Anything only root can read (a test kubeconfig and its client
//!   certificates in a 0700 directory, for instance) must be read in
//!   `start` before `privdrop::drop_privileges`; after it the process is uid
//!   65534. In a pod, the service-account token is re-read as that uid (the
//!   projected token file is 0644 by default).
//! - Do not create threads before the drop; after it, threads are fine
//!   (they inherit the empty capability sets and the filter).
//! - The filter (`seccomp.rs`) admits what kube + tokio + rustls were
//!   measured to use; anything new fails with EPERM (or kills, for the
//!   kill-list). Run the loop's tests with the real daemon binary so they
//!   run under the filter, and add a needed call with its reason.
//! - bootc's `--apply` never returns; the helper answers Apply once the
//!   reboot is under way. Write `Rebooting` before calling Apply.
//! - Give each helper call a deadline of its own (`tonic::Request::set_timeout`):
//!   Stage may legitimately take many minutes, Status should not.

use crate::helper_client::HelperClient;
use crate::watch::HostEvents;

/// What the loop is given.
#[derive(Debug)]
pub struct AgentContext {
    /// gRPC client of the privileged helper (Stage, Apply, Status, WriteAuth).
    pub helper: HelperClient,
    /// "Host status may have changed" events (inotify on ostree/bootc).
    pub host_events: HostEvents,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("helper call failed: {0}")]
    Helper(#[from] tonic::Status),
    #[error("host watch: {0}")]
    Watch(#[from] std::io::Error),
}

/// For now: report the host's status at start-up and after every change.
pub async fn run(mut ctx: AgentContext) -> Result<(), AgentError> {
    loop {
        let status = ctx
            .helper
            .status(proto::StatusRequest {})
            .await?
            .into_inner();
        tracing::info!(
            boot_id = %status.boot_id,
            booted = ?status.booted.as_ref().map(|b| &b.image),
            staged = ?status.staged.as_ref().map(|b| &b.image),
            download_only_supported = status.download_only_supported,
            "host status"
        );
        ctx.host_events.next().await?;
    }
}
