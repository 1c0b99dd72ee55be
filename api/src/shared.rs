//! [`Shared`]: a string that many objects hold alike, kept once.
//!
//! A pool's BootcNodes report the same few image references, digests,
//! versions and architectures: every node of a pool boots the same image,
//! keeps the same rollback and is asked for the same target. Their
//! conditions, and the kubelets' on the Nodes, mostly say the same things
//! too. Held as `String`s, a controller caching 20,000 of them keeps 20,000
//! copies of each (about a KiB a node). As [`Shared`] they are decoded once:
//! each value decoded is looked up in one table of the values alive, and a
//! value seen before is shared rather than allocated again.
//!
//! The table holds only values still in use: it drops those nothing else
//! holds whenever it has doubled since it last did (so a rollout's old
//! digests go, and the cost stays constant per value decoded). Fields whose
//! values are each node's own (names, boot ids) stay `String`s: each would be
//! an entry of the table for nothing. A [`Shared`] serialises, hashes,
//! compares and prints as its text: nothing on the wire or in the CRDs'
//! schema tells it from a `String`.
//!
//! Written here rather than taken from an interning crate: those bring a
//! concurrent map (and its hasher) into every binary that reads a
//! BootcNode, the daemon's included, for what is one locked `HashSet`.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string kept once however many objects hold it (see the module docs).
#[derive(Clone, Default, PartialOrd, Ord)]
pub struct Shared(Arc<str>);

impl Shared {
    /// `text`, shared with every live [`Shared`] of the same text.
    pub fn new(text: &str) -> Shared {
        intern(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The values alive, and when to drop the ones no longer held.
struct Values {
    set: HashSet<Arc<str>>,
    /// The size at which the unheld values are dropped next.
    sweep_at: usize,
}

const FIRST_SWEEP: usize = 64;

static VALUES: LazyLock<Mutex<Values>> = LazyLock::new(|| {
    Mutex::new(Values {
        set: HashSet::new(),
        sweep_at: FIRST_SWEEP,
    })
});

fn values() -> std::sync::MutexGuard<'static, Values> {
    // A panic while holding the lock leaves the set whole.
    VALUES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn intern(text: &str) -> Shared {
    let mut values = values();
    if let Some(kept) = values.set.get(text) {
        return Shared(kept.clone());
    }
    if values.set.len() >= values.sweep_at {
        // Held only here: no object has it any more.
        values.set.retain(|v| Arc::strong_count(v) > 1);
        values.sweep_at = (2 * values.set.len()).max(FIRST_SWEEP);
    }
    let value: Arc<str> = Arc::from(text);
    values.set.insert(value.clone());
    Shared(value)
}

impl Deref for Shared {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Shared {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Shared {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for Shared {}

impl std::hash::Hash for Shared {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes: `Borrow<str>` requires the same hash.
        (*self.0).hash(state);
    }
}

impl PartialEq<str> for Shared {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Shared {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Shared {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Shared> for str {
    fn eq(&self, other: &Shared) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Shared> for &str {
    fn eq(&self, other: &Shared) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Shared> for String {
    fn eq(&self, other: &Shared) -> bool {
        **self == *other.0
    }
}

impl From<&str> for Shared {
    fn from(text: &str) -> Shared {
        Shared::new(text)
    }
}

impl From<String> for Shared {
    fn from(text: String) -> Shared {
        Shared::new(&text)
    }
}

impl From<&String> for Shared {
    fn from(text: &String) -> Shared {
        Shared::new(text)
    }
}

impl From<Shared> for String {
    fn from(text: Shared) -> String {
        text.0.as_ref().to_owned()
    }
}

impl From<&Shared> for String {
    fn from(text: &Shared) -> String {
        text.0.as_ref().to_owned()
    }
}

impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for Shared {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Shared {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Shared, D::Error> {
        deserializer.deserialize_str(SharedVisitor)
    }
}

struct SharedVisitor;

impl serde::de::Visitor<'_> for SharedVisitor {
    type Value = Shared;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Shared, E> {
        Ok(Shared::new(text))
    }
}

/// The schema of a `String`: the CRD cannot tell them apart.
impl schemars::JsonSchema for Shared {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        String::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_decoded_apart_share_one_copy() {
        let a: Shared = serde_json::from_str("\"quay.io/os@sha256:abc\"").unwrap();
        let b: Shared = serde_json::from_str("\"quay.io/os@sha256:abc\"").unwrap();
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, "quay.io/os@sha256:abc");
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            "\"quay.io/os@sha256:abc\""
        );
    }

    /// The table drops what nothing holds once it has doubled, so the texts
    /// of past rollouts do not pile up.
    #[test]
    fn texts_no_longer_held_leave_the_table() {
        let held: Vec<Shared> = (0..10).map(|i| Shared::new(&format!("held-{i}"))).collect();
        for i in 0..10_000 {
            drop(Shared::new(&format!("dropped-{i}")));
        }
        assert!(
            values().set.len() < 1_000,
            "{} values kept",
            values().set.len()
        );
        let again = Shared::new("held-3");
        assert!(
            Arc::ptr_eq(&again.0, &held[3].0),
            "a held text stays shared"
        );
    }

    #[test]
    fn compares_orders_and_prints_as_its_text() {
        let (a, b) = (Shared::from("a"), Shared::from("b".to_owned()));
        assert!(a < b);
        assert_eq!(format!("{a}/{b:?}"), "a/\"b\"");
        assert_eq!(String::from(&a), "a");
        assert!("a" == a && a == *"a");
    }
}
