//! The hash of a pull secret's content, written by the controller into
//! `BootcNode.spec.pullSecretHash` and checked by the daemon after its GET,
//! so that both agree on which version of the Secret is meant.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use sha2::{Digest, Sha256};

/// `sha256:<hex>` over the Secret's `data`, keys in order, each key and
/// value length-prefixed so that no two different maps hash alike.
pub fn pull_secret_hash(data: &BTreeMap<String, ByteString>) -> String {
    let mut hasher = Sha256::new();
    for (key, value) in data {
        hasher.update((key.len() as u64).to_be_bytes());
        hasher.update(key.as_bytes());
        hasher.update((value.0.len() as u64).to_be_bytes());
        hasher.update(&value.0);
    }
    let mut out = String::from("sha256:");
    for b in hasher.finalize() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &[u8])]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
            .collect()
    }

    #[test]
    fn content_changes_change_the_hash() {
        let a = pull_secret_hash(&map(&[(".dockerconfigjson", b"{}")]));
        assert_eq!(a, pull_secret_hash(&map(&[(".dockerconfigjson", b"{}")])));
        assert_ne!(a, pull_secret_hash(&map(&[(".dockerconfigjson", b"{ }")])));
        // Moving bytes between key and value is a different secret.
        assert_ne!(
            pull_secret_hash(&map(&[("ab", b"c")])),
            pull_secret_hash(&map(&[("a", b"bc")]))
        );
        assert!(a.starts_with("sha256:") && a.len() == 71);
    }
}
