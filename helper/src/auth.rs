//! The host files the helper writes, each refusing to follow any symlink
//! below the host root: `/run/ostree/auth.json` (atomically: temporary
//! file, fsync, rename, fsync of the directory; mode 0600), and ostree's
//! finalization lock `/run/ostree/staged-deployment-locked`.
//!
//! The lock is how staging is locked on released bootc, which has no
//! `switch --download-only`: ostree's `ostree-finalize-staged.service`
//! does not finalize a staged deployment while that file exists (it checks
//! the file as well as the staged deployment's own `locked` flag, in every
//! ostree since 2018: `_ostree_sysroot_finalize_impl_staged_deployment`).
//! ostree removes it when a deployment is staged over another one (ostree
//! commit ac69c707), so Stage creates it before bootc runs and again after.

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Below the host root: the directories walked, then the file.
pub const AUTH_DIRS: [&str; 2] = ["run", "ostree"];
pub const AUTH_FILE: &str = "auth.json";
/// ostree's finalization lock file, beside the auth file.
pub const FINALIZATION_LOCK: &str = "staged-deployment-locked";
const AUTH_TMP: &str = ".auth.json.bootc-helper.tmp";

#[derive(Debug, thiserror::Error)]
pub enum AuthWriteError {
    #[error("refusing symlink at {0}")]
    Symlink(PathBuf),
    /// The path, and what it should have been.
    #[error("{0} is not a {1}")]
    WrongType(PathBuf, &'static str),
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io<E: Into<std::io::Error>>(op: &'static str, path: &Path) -> impl FnOnce(E) -> AuthWriteError {
    let path = path.to_owned();
    move |e| AuthWriteError::Io {
        op,
        path,
        source: e.into(),
    }
}

/// The file type of `name` in `dir` (`None`: missing), refusing a symlink.
fn kind_nofollow(dir: &OwnedFd, name: &str, shown: &Path) -> Result<Option<SFlag>, AuthWriteError> {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFLNK => Err(AuthWriteError::Symlink(shown.to_owned())),
            kind => Ok(Some(kind)),
        },
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(io("stat", shown)(e)),
    }
}

/// Opens `name` in `dir` as a directory without following a symlink,
/// creating it (0755, as /run/ostree is on hosts) if it is missing.
fn open_dir_nofollow(dir: &OwnedFd, name: &str, shown: &Path) -> Result<OwnedFd, AuthWriteError> {
    match kind_nofollow(dir, name, shown)? {
        Some(SFlag::S_IFDIR) => {}
        Some(_) => return Err(AuthWriteError::WrongType(shown.to_owned(), "directory")),
        None => match mkdirat(dir, name, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(io("mkdir", shown)(e)),
        },
    }
    // O_NOFOLLOW closes the race with a symlink swapped in after the stat.
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY;
    openat(dir, name, flags, Mode::empty()).map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => AuthWriteError::Symlink(shown.to_owned()),
        e => io("open", shown)(e),
    })
}

/// Opens `<host_root>/<dirs...>` as a directory, creating missing parts
/// (0755) and refusing a symlink anywhere below `host_root`. Returns the
/// directory and its path (for messages).
pub fn open_host_dir(
    host_root: &Path,
    dirs: &[&str],
) -> Result<(OwnedFd, PathBuf), AuthWriteError> {
    let flags = OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_RDONLY;
    let mut dir = openat(nix::fcntl::AT_FDCWD, host_root, flags, Mode::empty())
        .map_err(io("open", host_root))?;
    let mut shown = host_root.to_path_buf();
    for name in dirs {
        shown.push(name);
        dir = open_dir_nofollow(&dir, name, &shown)?;
    }
    Ok((dir, shown))
}

/// Reads at most `max` bytes of the tail of the regular file `name` in
/// `dir`, without following a symlink. A missing file reads as empty.
pub fn read_tail_nofollow(dir: &OwnedFd, name: &str, max: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
    let Ok(fd) = openat(dir, name, flags, Mode::empty()) else {
        return Vec::new();
    };
    let mut file = std::fs::File::from(fd);
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let max64 = u64::try_from(max).unwrap_or(u64::MAX);
    if !regular || (len > max64 && file.seek(SeekFrom::Start(len - max64)).is_err()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let _ = file.take(max64).read_to_end(&mut out);
    out
}

/// Creates (`lock`) or removes ostree's finalization lock file.
pub fn lock_finalization(host_root: &Path, lock: bool) -> Result<(), AuthWriteError> {
    let (dir, shown) = open_host_dir(host_root, &AUTH_DIRS)?;
    let (name, mode) = (FINALIZATION_LOCK, Mode::from_bits_truncate(0o640));
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let done = match lock {
        true => openat(&dir, name, flags, mode).map(drop),
        false => unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir)
            .or_else(|e| (e == Errno::ENOENT).then_some(()).ok_or(e)),
    };
    done.map_err(io("lock", &shown.join(name)))
}

/// Does ostree's finalization lock file exist (read only: nothing created)?
pub fn finalization_locked(host_root: &Path) -> bool {
    let dir = host_root.join(AUTH_DIRS.join("/"));
    std::fs::symlink_metadata(dir.join(FINALIZATION_LOCK)).is_ok()
}

/// Writes `content` to `<host_root>/run/ostree/auth.json`. `host_root` itself
/// may be a symlink (it is `/proc/<pid>/root`); nothing below it may be.
pub fn write(host_root: &Path, content: &[u8]) -> Result<PathBuf, AuthWriteError> {
    let (dir, shown) = open_host_dir(host_root, &AUTH_DIRS)?;
    let target = shown.join(AUTH_FILE);
    if kind_nofollow(&dir, AUTH_FILE, &target)?.is_some_and(|k| k != SFlag::S_IFREG) {
        return Err(AuthWriteError::WrongType(target, "regular file"));
    }
    let tmp = shown.join(AUTH_TMP);
    // A leftover from a crash: unlink never follows a symlink.
    match unlinkat(&dir, AUTH_TMP, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(io("unlink", &tmp)(e)),
    }
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
    let mode = Mode::from_bits_truncate(0o600);
    let fd = openat(&dir, AUTH_TMP, flags | OFlag::O_CLOEXEC, mode).map_err(io("create", &tmp))?;
    let mut file = std::fs::File::from(fd);
    // The umask cannot widen 0600, but fchmod makes the mode explicit.
    let written = nix::sys::stat::fchmod(&file, mode)
        .map_err(std::io::Error::from)
        .and_then(|()| file.write_all(content))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = unlinkat(&dir, AUTH_TMP, UnlinkatFlags::NoRemoveDir);
        return Err(io("write", &tmp)(e));
    }
    drop(file);
    renameat(&dir, AUTH_TMP, &dir, AUTH_FILE).map_err(io("rename", &target))?;
    std::fs::File::from(dir)
        .sync_all()
        .map_err(io("fsync", &shown))?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_atomically_with_mode_0600() {
        let root = tempfile::tempdir().unwrap();
        let path = write(root.path(), b"{\"auths\":{}}").unwrap();
        assert_eq!(path, root.path().join("run/ostree/auth.json"));
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"auths\":{}}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Replacing works and leaves no temporary file behind.
        write(root.path(), b"{\"auths\":{\"a\":{}}}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"auths\":{\"a\":{}}}");
        let names: Vec<_> = std::fs::read_dir(root.path().join("run/ostree"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("auth.json")]);
    }

    #[test]
    fn refuses_symlinks_anywhere_below_the_root() {
        for (setup, which) in [
            ("run", "run"),
            ("ostree", "run/ostree"),
            ("file", "run/ostree/auth.json"),
        ] {
            let root = tempfile::tempdir().unwrap();
            let elsewhere = tempfile::tempdir().unwrap();
            match setup {
                "run" => {
                    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("run")).unwrap()
                }
                "ostree" => {
                    std::fs::create_dir(root.path().join("run")).unwrap();
                    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("run/ostree"))
                        .unwrap();
                }
                _ => {
                    std::fs::create_dir_all(root.path().join("run/ostree")).unwrap();
                    std::os::unix::fs::symlink(
                        elsewhere.path().join("x"),
                        root.path().join("run/ostree/auth.json"),
                    )
                    .unwrap();
                }
            }
            match write(root.path(), b"{}") {
                Err(AuthWriteError::Symlink(p)) => assert_eq!(p, root.path().join(which)),
                other => panic!("{setup}: expected a symlink refusal, got {other:?}"),
            }
            assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        }
    }
}
