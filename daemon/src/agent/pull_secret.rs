//! The pull secret the daemon last read, kept in memory so that the host's
//! auth file can be rewritten before every pull without reading the Secret
//! again: the loop GETs it only when the controller announces other content
//! (a new reference, or a new `pullSecretHash`: the Secret's version,
//! `<uid>/<resourceVersion>`, see `api::pull_secret`) or the last write
//! failed.
//!
//! When the helper writes `/run/ostree/auth.json` ([`write_due`]): before
//! each pull (a Stage) of a new spec of the BootcNode, so the file is there
//! when bootc pulls even if something cleared `/run`; and, once this process
//! has written it, on every announcement, so a rotation reaches a host that
//! holds the old credential. A daemon that starts on a node needing no pull
//! reads no Secret: the file (if `/run` still holds one) waits for the next
//! pull. A Secret deleted or broken is the pool's problem, reported there:
//! a host that already holds the announced content keeps it, and a failure
//! to read it makes the node `Degraded` (and holds its download) only while
//! the node needs to download; a node on its image, or staged and approved,
//! stays healthy and its reboot goes on.

use std::fmt;

use api::SecretReference;

/// A pull secret's `.dockerconfigjson`: a credential. Its `Debug` shows only
/// its length, and its bytes are overwritten when it is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct PullSecretContent(Vec<u8>);

impl PullSecretContent {
    pub fn new(bytes: Vec<u8>) -> PullSecretContent {
        PullSecretContent(bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for PullSecretContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PullSecretContent(<redacted, {} bytes>)", self.0.len())
    }
}

impl Drop for PullSecretContent {
    fn drop(&mut self) {
        self.0.fill(0);
        // Keeps the wipe from being optimised away as a dead store.
        std::hint::black_box(&self.0);
    }
}

/// What a cached content was announced as: the Secret it came from and the
/// version (`pullSecretHash`) the controller published for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announced {
    pub reference: SecretReference,
    pub hash: String,
}

/// A pull secret read and checked against its announced hash.
#[derive(Clone, Debug)]
pub struct Cached {
    pub announced: Announced,
    pub content: PullSecretContent,
}

impl Cached {
    /// Only content checked against an announced hash is worth keeping:
    /// without a hash nothing says when it goes stale.
    pub fn new(
        reference: &SecretReference,
        hash: Option<&str>,
        content: PullSecretContent,
    ) -> Option<Cached> {
        hash.map(|hash| Cached {
            announced: Announced {
                reference: reference.clone(),
                hash: hash.to_owned(),
            },
            content,
        })
    }
}

/// Where the content of the next write of the host's auth file comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The content read before: the BootcNode still announces it.
    Reuse,
    /// One GET of the Secret.
    Fetch,
}

/// Reuses the cached content when the BootcNode announces exactly it (same
/// Secret, same hash) and the last write of it did not fail; reads the
/// Secret otherwise. No announced hash means no way to tell whether the
/// Secret changed: read it.
pub fn source(
    cached: Option<&Announced>,
    reference: &SecretReference,
    hash: Option<&str>,
    last_write_failed: bool,
) -> Source {
    match (cached, hash) {
        (Some(c), Some(h)) if !last_write_failed && c.reference == *reference && c.hash == h => {
            Source::Reuse
        }
        _ => Source::Fetch,
    }
}

/// Whether the loop writes the host's auth file now (if the BootcNode's
/// announcement is not written yet): before a pull, which needs it, and,
/// once this process has written it, to follow announcements (a rotation
/// replaces the host's credential without waiting for a pull). Nothing at
/// start: a restarted daemon reads the Secret only when a pull needs it.
pub fn write_due(pulling: bool, written_since_start: bool) -> bool {
    pulling || written_since_start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str, namespace: &str) -> SecretReference {
        SecretReference {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    fn announced(name: &str, hash: &str) -> Announced {
        Announced {
            reference: reference(name, "ops"),
            hash: hash.to_owned(),
        }
    }

    #[test]
    fn fetch_or_reuse_table() {
        let pull = reference("pull", "ops");
        let cached = announced("pull", "h1");
        // (case, cached, reference, announced hash, last write failed, source)
        type Row<'a> = (
            &'a str,
            Option<&'a Announced>,
            &'a SecretReference,
            Option<&'a str>,
            bool,
            Source,
        );
        #[rustfmt::skip]
        let rows: [Row; 8] = [
            ("nothing read yet",                 None,          &pull,                        Some("h1"), false, Source::Fetch),
            ("same Secret, same hash",           Some(&cached), &pull,                        Some("h1"), false, Source::Reuse),
            ("a new hash (a rotation)",          Some(&cached), &pull,                        Some("h2"), false, Source::Fetch),
            ("another Secret, same hash",        Some(&cached), &reference("other", "ops"),   Some("h1"), false, Source::Fetch),
            ("same name, another namespace",     Some(&cached), &reference("pull", "other"),  Some("h1"), false, Source::Fetch),
            ("no hash announced",                Some(&cached), &pull,                        None,       false, Source::Fetch),
            ("the last write failed",            Some(&cached), &pull,                        Some("h1"), true,  Source::Fetch),
            ("nothing read, the write failed",   None,          &pull,                        None,       true,  Source::Fetch),
        ];
        for (what, cached, reference, hash, failed, want) in rows {
            assert_eq!(source(cached, reference, hash, failed), want, "{what}");
        }
    }

    #[test]
    fn only_announced_content_is_cached() {
        let pull = reference("pull", "ops");
        let content = || PullSecretContent::new(b"{}".to_vec());
        assert!(Cached::new(&pull, None, content()).is_none());
        let cached = Cached::new(&pull, Some("h1"), content()).expect("cached");
        assert_eq!(cached.announced, announced("pull", "h1"));
    }

    #[test]
    fn debug_never_shows_the_credential() {
        let secret = r#"{"auths":{"r":{"auth":"dTE6cDE="}}}"#;
        let cached = Cached::new(
            &reference("pull", "ops"),
            Some("h1"),
            PullSecretContent::new(secret.as_bytes().to_vec()),
        )
        .expect("cached");
        let shown = format!("{cached:?}");
        assert!(!shown.contains("dTE6cDE="), "{shown}");
        assert!(
            shown.contains(&format!("{} bytes", secret.len())),
            "{shown}"
        );
    }

    #[test]
    fn write_due_table() {
        // (pulling, written since start, write due)
        #[rustfmt::skip]
        let rows = [
            (false, false, false), // started, nothing to pull: no Secret read
            (true,  false, true),  // the first pull after a start
            (false, true,  true),  // written before: follows a rotation
            (true,  true,  true),
        ];
        for (pulling, written, due) in rows {
            assert_eq!(write_due(pulling, written), due, "{pulling} {written}");
        }
    }
}
