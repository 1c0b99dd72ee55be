//! The pull secret the daemon last read, kept in memory so that the host's
//! auth file can be rewritten on every spec change without reading the
//! Secret again: the loop GETs it only when the controller announces other
//! content (a new reference, or a new `pullSecretHash`: the Secret's
//! version, `<uid>/<resourceVersion>`, see `api::pull_secret`) or the last
//! write failed.
//!
//! The helper writes it to `/run/ostree/auth.json` at start-up and on every
//! change of the BootcNode's spec, so the file is there before any pull even
//! if something cleared `/run`. A Secret deleted or broken is the pool's
//! problem, reported there: a host that already holds the announced content
//! keeps it, and a failure to read it makes the node `Degraded` (and holds
//! its download) only while the node needs to download; a node on its
//! image, or staged and approved, stays healthy and its reboot goes on.

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
}
