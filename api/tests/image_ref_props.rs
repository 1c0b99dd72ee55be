#![allow(clippy::unwrap_used)]
//! Properties of the image-reference grammar (the same function the fuzz
//! target `image_ref` drives; these run in every `./dev test`).

use api::image_ref::ImageRef;
use proptest::prelude::*;

/// Well-formed pinned references: a registry (a dotted host, optionally
/// with a port), one to three lowercase path components, a sha256 digest.
/// (Without a registry, a first component with a dot would be read as one.)
fn pinned() -> impl Strategy<Value = String> {
    (
        "[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){1,2}(:[0-9]{1,5})?",
        proptest::collection::vec("[a-z0-9]{1,6}([._-][a-z0-9]{1,6}){0,2}", 1..4),
        "[0-9a-f]{64}",
    )
        .prop_map(|(registry, path, hex)| format!("{registry}/{}@sha256:{hex}", path.join("/")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Anything: no panic; what is accepted is pinned, printable and
    /// spelled exactly one way.
    #[test]
    fn arbitrary_input_never_panics_and_accepts_only_canonical_pinned(input in any::<String>()) {
        if let Ok(r) = ImageRef::parse_pinned(&input) {
            prop_assert_eq!(r.to_string(), input.clone());
            prop_assert!(r.digest.as_deref().is_some_and(|d| d.starts_with("sha256:") && d.len() == 71));
            prop_assert!(r.tag.is_none());
            prop_assert!(!input.starts_with('-'));
            prop_assert!(input.bytes().all(|b| b.is_ascii_graphic()));
            prop_assert!(!input.contains("://"));
        }
        let _ = ImageRef::parse(&input);
    }

    /// Near-misses of valid references (one byte changed, inserted or
    /// removed): never a panic, and still canonical when accepted.
    #[test]
    fn mutated_references_never_panic(
        valid in pinned(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        op in 0u8..3,
    ) {
        let mut bytes = valid.clone().into_bytes();
        let i = at.index(bytes.len());
        match op {
            0 => bytes[i] = byte,
            1 => bytes.insert(i, byte),
            _ => { bytes.remove(i); }
        }
        let input = String::from_utf8_lossy(&bytes).into_owned();
        if let Ok(r) = ImageRef::parse_pinned(&input) {
            prop_assert_eq!(r.to_string(), input);
        }
    }

    /// Every well-formed pinned reference is accepted as written.
    #[test]
    fn well_formed_pinned_references_are_accepted(valid in pinned()) {
        let r = ImageRef::parse_pinned(&valid).unwrap();
        prop_assert_eq!(r.to_string(), valid);
    }
}
