//! The fake bootc on a real node (a node container with its own systemd, see
//! `crate::nodes`): the same contract, but the machine really goes down.
//!
//! - `--apply` runs `systemctl reboot` (after `--from-downloaded` unlocked
//!   the staged deployment), then parks until the shutdown kills it, as
//!   bootc does.
//! - What happens to a staged deployment is decided at shutdown, as
//!   `ostree-finalize-staged.service` does: an orderly shutdown (the
//!   `--node-shutdown` hook, run by a unit's `ExecStop`) boots an unlocked
//!   staged deployment next and drops a locked one (locked by its flag or by
//!   ostree's lock file in the node's `/run`); a crash runs no hook, and
//!   the next boot (`--node-boot`) drops whatever is still staged.
//! - `--node-boot` also writes `/usr/lib/os-release` for the booted image (the
//!   kubelet reports its `PRETTY_NAME` as the Node's OS image) and records
//!   the boot with the node's boot id, which nspawn gives each boot.
//!
//! The host is in this mode when `<root>/fake-bootc/real-host` exists.

use super::{Layout, Reboot, append_jsonl};
use std::io::Write;
use std::path::PathBuf;

impl Layout {
    /// Present: this root is a real node's `/` (see the module docs).
    pub fn real_host_marker(&self) -> PathBuf {
        self.dir().join("real-host")
    }

    pub fn is_real_host(&self) -> bool {
        self.real_host_marker().exists()
    }

    fn os_release(&self) -> PathBuf {
        self.root.join("usr/lib/os-release")
    }
}

/// The boot id of the running boot, as the node's own processes read it.
fn current_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Runs `systemctl reboot` and waits for the shutdown to end this process.
pub(super) fn reboot_and_park() -> i32 {
    match std::process::Command::new("systemctl")
        .arg("reboot")
        .status()
    {
        Ok(status) if status.success() => loop {
            std::thread::park();
        },
        Ok(status) => {
            let _ = writeln!(std::io::stderr(), "error: systemctl reboot: {status}");
            1
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: systemctl reboot: {e}");
            1
        }
    }
}

/// The shutdown hook: an unlocked staged deployment becomes the booted one
/// (the booted one the rollback); a locked one is dropped.
pub fn on_shutdown(layout: &Layout) -> std::io::Result<()> {
    let mut state = layout.read_state()?;
    let lock_file = layout.finalization_lock().exists();
    let applied = match state.staged.take() {
        Some(staged) if !staged.download_only && !lock_file => {
            state.rollback = state.booted.replace(staged);
            true
        }
        _ => false,
    };
    layout.write_state(&state)?;
    let image = state.booted.map(|b| b.image).unwrap_or_default();
    append_jsonl(
        &layout.reboots(),
        &Reboot {
            soft: false,
            image,
            old_boot_id: current_boot_id(),
            new_boot_id: String::new(),
            unplanned: false,
            applied_staged: applied,
        },
    )
}

/// The boot hook: a staged deployment no shutdown finalized (a crash) is
/// gone; os-release names the booted image.
pub fn on_boot(layout: &Layout) -> std::io::Result<()> {
    let mut state = layout.read_state()?;
    if state.staged.take().is_some() {
        layout.write_state(&state)?;
    }
    let Some(booted) = state.booted else {
        return Ok(());
    };
    let version = booted.version.unwrap_or_default();
    let text = format!(
        "PRETTY_NAME=\"bootc test OS {version}\"\nNAME=\"bootc test OS\"\nID=bootc-test\nVERSION_ID=\"{version}\"\nIMAGE_VERSION=\"{version}\"\nBOOTC_IMAGE=\"{}\"\n",
        booted.image
    );
    std::fs::write(layout.os_release(), text)
}
