//! "Host status may have changed" events: an inotify watch on the host's
//! `ostree/bootc` directory (bootc touches its mtime after switch, upgrade,
//! rollback...), and on the composefs backend's state directory when that
//! exists. The watch is opened while the daemon is root (the host root is
//! `/proc/1/root`), then read unprivileged through tokio.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::io;
use std::path::{Path, PathBuf};
use tokio::io::unix::AsyncFd;

/// Below the host root: the ostree backend's bootc directory (either
/// spelling; `/ostree` is a symlink to `sysroot/ostree` on hosts).
pub const OSTREE_DIRS: [&str; 2] = ["ostree/bootc", "sysroot/ostree/bootc"];
/// Below the host root: the composefs backend's deployment state.
pub const COMPOSEFS_DIR: &str = "sysroot/state/deploy";

const MASK: AddWatchFlags = AddWatchFlags::IN_ATTRIB
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF);

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("inotify_init: {0}")]
    Init(nix::Error),
    #[error("inotify watch on {path}: {source}")]
    Add { path: PathBuf, source: nix::Error },
}

/// The watch, opened but not yet registered with tokio.
#[derive(Debug)]
pub struct HostWatch {
    inotify: Option<Inotify>,
    pub watched: Vec<PathBuf>,
}

/// Which directories to watch under `host_root`: the first ostree spelling
/// that exists, and the composefs directory if it exists.
pub fn paths_to_watch(host_root: &Path, exists: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = OSTREE_DIRS
        .iter()
        .map(|d| host_root.join(d))
        .find(|p| exists(p))
        .into_iter()
        .collect();
    let composefs = host_root.join(COMPOSEFS_DIR);
    if exists(&composefs) {
        out.push(composefs);
    }
    out
}

impl HostWatch {
    /// Opens the watch. A host with neither directory gets no watch (the
    /// daemon's periodic re-read covers it) and a warning.
    pub fn open(host_root: &Path) -> Result<HostWatch, WatchError> {
        let paths = paths_to_watch(host_root, |p| p.is_dir());
        if paths.is_empty() {
            tracing::warn!(host_root = %host_root.display(), "no ostree/bootc or composefs state directory to watch; relying on polling");
            return Ok(HostWatch {
                inotify: None,
                watched: paths,
            });
        }
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(WatchError::Init)?;
        for path in &paths {
            inotify
                .add_watch(path.as_path(), MASK)
                .map_err(|source| WatchError::Add {
                    path: path.clone(),
                    source,
                })?;
            tracing::info!(path = %path.display(), "watching for bootc status changes");
        }
        Ok(HostWatch {
            inotify: Some(inotify),
            watched: paths,
        })
    }

    /// Registers with the current tokio runtime.
    pub fn into_events(self) -> io::Result<HostEvents> {
        Ok(HostEvents {
            fd: self
                .inotify
                .map(crate::confinement::sys::async_inotify)
                .transpose()?,
        })
    }
}

/// A stream of "host status may have changed" events; a burst of inotify
/// events is one event.
#[derive(Debug)]
pub struct HostEvents {
    fd: Option<AsyncFd<crate::confinement::sys::InotifyFd>>,
}

impl HostEvents {
    /// Never yields (for hosts without a watch, and tests).
    pub fn none() -> HostEvents {
        HostEvents { fd: None }
    }

    /// The events as a stream of `()`, for `select!` loops. A read error on
    /// the inotify fd (which should not happen) is logged and ends the stream.
    pub fn into_stream(self) -> impl futures::Stream<Item = ()> + Send {
        futures::stream::unfold(self, |mut events| async move {
            match events.next().await {
                Ok(()) => Some(((), events)),
                Err(e) => {
                    tracing::error!(error = %e, "host watch failed");
                    None
                }
            }
        })
    }

    /// Waits for the next change. Pending forever when nothing is watched.
    pub async fn next(&mut self) -> io::Result<()> {
        let Some(fd) = &self.fd else {
            return std::future::pending().await;
        };
        loop {
            let mut guard = fd.readable().await?;
            match guard.try_io(|inner| inner.get_ref().0.read_events().map_err(io::Error::from)) {
                Ok(Ok(_events)) => {
                    // Drain whatever else is queued: one wake-up per burst.
                    while fd.get_ref().0.read_events().is_ok() {}
                    return Ok(());
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_paths() {
        let root = Path::new("/h");
        let only =
            |set: &'static [&'static str]| move |p: &Path| set.iter().any(|s| p == Path::new(s));
        assert_eq!(
            paths_to_watch(root, only(&["/h/ostree/bootc", "/h/sysroot/ostree/bootc"])),
            [PathBuf::from("/h/ostree/bootc")]
        );
        assert_eq!(
            paths_to_watch(
                root,
                only(&["/h/sysroot/ostree/bootc", "/h/sysroot/state/deploy"])
            ),
            [
                PathBuf::from("/h/sysroot/ostree/bootc"),
                PathBuf::from("/h/sysroot/state/deploy")
            ]
        );
        assert!(paths_to_watch(root, only(&[])).is_empty());
    }
}
