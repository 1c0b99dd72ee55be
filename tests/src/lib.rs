//! Test support for bootc-operator: a real control plane, CRD installation,
//! and (in later modules) the fake bootc host and the node simulator.

pub mod binaries;
pub mod control_plane;
pub mod daemon_player;
pub mod daemon_proc;
pub mod display;
pub mod fake_bootc;
pub mod fake_host;
pub mod freeze_proxy;
pub mod image;
pub mod image_pull;
pub mod k8s;
pub mod kstatus;
pub mod node_agent;
pub mod pki;
pub mod recorder;
pub mod registry;
pub mod sim;

pub use control_plane::{ControlPlane, Identity};

use std::path::PathBuf;

/// The repository root (tests run with the crate directory as cwd).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}
