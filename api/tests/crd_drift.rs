//! The checked-in CRDs are exactly what the Rust types generate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

#[test]
fn checked_in_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
    for (file, generated) in api::crd_yaml().unwrap() {
        let path = dir.join(file);
        let on_disk =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            on_disk == generated,
            "{} is out of date: run `cargo run -p api --features crd --bin crdgen -- deploy/crds`",
            path.display()
        );
    }
}
