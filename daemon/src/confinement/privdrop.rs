//! Giving up every privilege before the daemon starts tokio, in the order
//! SECURITY.md section 2 gives: bounding set (needs CAP_SETPCAP, so first),
//! ambient, inheritable, then groups / gid / uid (leaving uid 0 empties the
//! permitted and effective sets), then a check that all five sets read zero,
//! then no_new_privs. The seccomp filter comes after (see seccomp.rs).
//! Capabilities are per thread, so all of it runs while there is one.

use caps::CapSet;
use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};

/// The uid and gid the daemon runs as by default: ids of its own, which no
/// other process on the node is expected to use. A process of the same uid
/// could be read (`/proc/<pid>/environ`, `root`, `fd`) and written
/// (`/proc/<pid>/mem`) by a compromised daemon, so neither 0 nor the shared
/// `nobody` (65534) is accepted.
pub const DEFAULT_UID: u32 = 41742;
/// See [`DEFAULT_UID`].
pub const DEFAULT_GID: u32 = 41742;
/// `nobody`/`nogroup`: shared by exporters and many other unprivileged
/// processes, so never the daemon's.
pub const SHARED_NOBODY: u32 = 65534;

#[derive(Debug, thiserror::Error)]
pub enum DropError {
    #[error("the daemon must drop privilege while single-threaded, but has {0} threads")]
    NotSingleThreaded(u32),
    #[error("cannot read {what}: {source}")]
    Read {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{step}: {reason}")]
    Step { step: &'static str, reason: String },
    #[error("refusing {what} {id}: {why}; choose an id no other process on the node uses")]
    SharedId {
        what: &'static str,
        id: u32,
        why: &'static str,
    },
    #[error("after the drop, {field} is {value:?} (expected {expected})")]
    Verify {
        field: String,
        value: String,
        expected: &'static str,
    },
}

fn step<E: std::fmt::Display>(step: &'static str) -> impl FnOnce(E) -> DropError {
    move |e| DropError::Step {
        step,
        reason: e.to_string(),
    }
}

/// The value of `field:` in a /proc status file.
pub fn status_field<'a>(status: &'a str, field: &str) -> Option<&'a str> {
    status.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then_some(v.trim())
    })
}

/// Checks a /proc/<pid>/status text for a fully unprivileged process: all
/// five capability sets zero, no uid/gid 0, NoNewPrivs 1, and (when
/// `seccomp` is set) Seccomp 2. Returns the first violation.
pub fn check_unprivileged(status: &str, seccomp: bool) -> Result<(), DropError> {
    let bad = |field: &str, value: Option<&str>, expected: &'static str| DropError::Verify {
        field: field.to_owned(),
        value: value.unwrap_or("<missing>").to_owned(),
        expected,
    };
    for field in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let v = status_field(status, field);
        if !v.is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b == b'0')) {
            return Err(bad(field, v, "0000000000000000"));
        }
    }
    for field in ["Uid", "Gid"] {
        let v = status_field(status, field);
        let ok = v.is_some_and(|v| {
            let ids: Vec<&str> = v.split_whitespace().collect();
            ids.len() == 4 && ids.iter().all(|id| *id != "0" && *id != "65534")
        });
        if !ok {
            return Err(bad(
                field,
                v,
                "no 0 or 65534 among real/effective/saved/fs ids",
            ));
        }
    }
    let groups = status_field(status, "Groups");
    if groups.is_some_and(|g| g.split_whitespace().any(|g| g == "0")) {
        return Err(bad("Groups", groups, "no group 0"));
    }
    if seccomp {
        let v = status_field(status, "NoNewPrivs");
        if v != Some("1") {
            return Err(bad("NoNewPrivs", v, "1"));
        }
        let v = status_field(status, "Seccomp");
        if v != Some("2") {
            return Err(bad("Seccomp", v, "2"));
        }
    }
    Ok(())
}

fn read(path: &'static str) -> Result<String, DropError> {
    std::fs::read_to_string(path).map_err(|source| DropError::Read { what: path, source })
}

/// Refuses ids the daemon must never run as: 0 (root) and 65534 (shared by
/// every `nobody` process on the node).
pub fn check_ids(uid: u32, gid: u32) -> Result<(), DropError> {
    for (what, id) in [("uid", uid), ("gid", gid)] {
        let why = match id {
            0 => "it is root's",
            SHARED_NOBODY => "it is nobody's, shared with other processes on the node",
            _ => continue,
        };
        return Err(DropError::SharedId { what, id, why });
    }
    Ok(())
}

/// Fails unless the process has exactly one thread.
pub fn ensure_single_threaded() -> Result<(), DropError> {
    let status = read("/proc/self/status")?;
    let threads = status_field(&status, "Threads")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0);
    if threads != 1 {
        return Err(DropError::NotSingleThreaded(threads));
    }
    Ok(())
}

/// Drops everything; on return the process is `uid`/`gid` with no
/// capability in any set and no_new_privs set.
pub fn drop_privileges(uid: u32, gid: u32) -> Result<(), DropError> {
    check_ids(uid, gid)?;
    ensure_single_threaded()?;
    let last_cap = read("/proc/sys/kernel/cap_last_cap")?
        .trim()
        .parse::<u32>()
        .map_err(step("cap_last_cap"))?;
    super::sys::drop_bounding_set(last_cap).map_err(step("drop bounding set"))?;
    caps::clear(None, CapSet::Ambient).map_err(step("clear ambient set"))?;
    caps::clear(None, CapSet::Inheritable).map_err(step("clear inheritable set"))?;
    setgroups(&[]).map_err(step("setgroups"))?;
    let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(gid));
    setresgid(gid, gid, gid).map_err(step("setresgid"))?;
    setresuid(uid, uid, uid).map_err(step("setresuid"))?;
    // Already empty after leaving uid 0 without keep-caps; say so explicitly.
    caps::clear(None, CapSet::Effective).map_err(step("clear effective set"))?;
    caps::clear(None, CapSet::Permitted).map_err(step("clear permitted set"))?;
    check_unprivileged(&read("/proc/thread-self/status")?, false)?;
    nix::sys::prctl::set_no_new_privs().map_err(step("PR_SET_NO_NEW_PRIVS"))?;
    // Leaving uid 0 already made the process non-dumpable (fs.suid_dumpable);
    // say so explicitly: its /proc files stay root's, and no core dump holds
    // its token.
    nix::sys::prctl::set_dumpable(false).map_err(step("PR_SET_DUMPABLE"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const GOOD: &str = "Name:\tbootc-daemon\nUid:\t41742\t41742\t41742\t41742\nGid:\t41742\t41742\t41742\t41742\nGroups:\t\nNoNewPrivs:\t1\nSeccomp:\t2\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nThreads:\t2\n";

    #[test]
    fn refuses_to_drop_with_more_than_one_thread() {
        // libtest runs this on a thread of its own, besides main.
        let _other = std::thread::spawn(std::thread::park);
        assert!(matches!(
            ensure_single_threaded(),
            Err(DropError::NotSingleThreaded(n)) if n > 1
        ));
        assert!(matches!(
            drop_privileges(DEFAULT_UID, DEFAULT_GID),
            Err(DropError::NotSingleThreaded(_))
        ));
    }

    #[test]
    fn refuses_root_and_nobody_ids() {
        check_ids(DEFAULT_UID, DEFAULT_GID).unwrap();
        for (uid, gid, what) in [
            (0, 1, "uid"),
            (1, 0, "gid"),
            (65534, 1, "uid"),
            (1, 65534, "gid"),
        ] {
            match check_ids(uid, gid) {
                Err(e @ DropError::SharedId { .. }) => {
                    assert!(
                        e.to_string().starts_with(&format!("refusing {what}")),
                        "{e}"
                    )
                }
                other => panic!("{uid}/{gid}: {other:?}"),
            }
            // Refused before anything is dropped (this test is not root).
            assert!(matches!(
                drop_privileges(uid, gid),
                Err(DropError::SharedId { .. })
            ));
        }
    }

    #[test]
    fn accepts_fully_dropped() {
        check_unprivileged(GOOD, true).unwrap();
        assert_eq!(status_field(GOOD, "Threads"), Some("2"));
    }

    #[test]
    fn names_each_violation() {
        for (from, to, field) in [
            (
                "CapBnd:\t0000000000000000",
                "CapBnd:\t000001ffffffffff",
                "CapBnd",
            ),
            (
                "CapEff:\t0000000000000000",
                "CapEff:\t0000000000000001",
                "CapEff",
            ),
            ("CapAmb:\t0000000000000000\n", "", "CapAmb"),
            (
                "Uid:\t41742\t41742\t41742\t41742",
                "Uid:\t41742\t0\t41742\t41742",
                "Uid",
            ),
            (
                "Gid:\t41742\t41742\t41742\t41742",
                "Gid:\t0\t0\t0\t0",
                "Gid",
            ),
            ("Groups:\t", "Groups:\t0 5", "Groups"),
            (
                "Uid:\t41742\t41742\t41742\t41742",
                "Uid:\t65534\t65534\t65534\t65534",
                "Uid",
            ),
            ("NoNewPrivs:\t1", "NoNewPrivs:\t0", "NoNewPrivs"),
            ("Seccomp:\t2", "Seccomp:\t0", "Seccomp"),
        ] {
            let s = GOOD.replace(from, to);
            match check_unprivileged(&s, true) {
                Err(DropError::Verify { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
