//! Test support for bootc-operator: a real control plane, CRD installation,
//! and (in later modules) the fake bootc host and the node simulator.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod alertmanager;
pub mod binaries;
pub mod control_plane;
pub mod daemon_loop;
pub mod daemon_player;
pub mod daemon_proc;
pub mod display;
pub mod e2e;
pub mod fake_bootc;
pub mod fake_host;
pub mod fake_systemd;
pub mod freeze_proxy;
pub mod h2_raw;
pub mod helm;
pub mod helper_size;

pub mod image;
pub mod image_pull;
pub mod k8s;
pub mod kstatus;
pub mod metrics_client;
pub mod node_agent;
pub mod nodes;
pub mod pki;
pub mod prometheus;
pub mod recorder;
pub mod redirecting_registry;
pub mod registry;
pub mod sim;
pub mod write_probe;

pub use control_plane::{ControlPlane, Identity};

use std::path::PathBuf;

/// The repository root (tests run with the crate directory as cwd).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The environment variable naming bootc's fixtures directory (the one
/// holding `host-v1.schema.json`, the `spec-*` status fixtures and
/// `contract/help/`).
pub const BOOTC_FIXTURES_ENV: &str = "BOOTC_FIXTURES";

/// Where bootc's own files are expected: `$BOOTC_FIXTURES`, else
/// `fixtures/bootc` in the directory named `shared` beside the repository's
/// top directory. They are another project's files and are not copied into
/// this repository. Whether the directory exists is [`bootc_fixtures`]'s
/// question.
pub fn bootc_fixtures_path() -> PathBuf {
    match std::env::var_os(BOOTC_FIXTURES_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            let top = repo_root();
            let beside = top.parent().map(PathBuf::from).unwrap_or_default();
            beside.join("shared").join("fixtures").join("bootc")
        }
    }
}

/// bootc's fixtures directory when it is there. Every test and tool that
/// reads bootc's schema, status fixtures or help texts goes through this.
pub fn bootc_fixtures() -> Option<PathBuf> {
    let dir = bootc_fixtures_path();
    dir.join("host-v1.schema.json").is_file().then_some(dir)
}

/// Returns bootc's fixtures directory, or skips the calling test (returns
/// from it) with a loud message naming where they were looked for.
#[macro_export]
macro_rules! require_bootc_fixtures {
    () => {
        match $crate::bootc_fixtures() {
            Some(dir) => dir,
            None => {
                eprintln!(
                    "SKIPPED (LOUDLY): bootc's fixtures are not at {} (set {} to the directory holding host-v1.schema.json); CI always has them",
                    $crate::bootc_fixtures_path().display(),
                    $crate::BOOTC_FIXTURES_ENV
                );
                return;
            }
        }
    };
}
