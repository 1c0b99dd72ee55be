//! The daemon's loop end to end: the real bootc-daemon and bootc-helper
//! against a fake bootc host, a real API server, and the daemon's own RBAC.
//! The test plays the controller (it writes BootcNode specs) and the node
//! simulator (it restarts the daemon after a simulated reboot). One file a
//! rule; the shared setup is `tests::daemon_loop`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_use;
mod cycle;
mod host_status;
mod pull_secret;
mod reboot;
mod versions;
