//! Writes the CustomResourceDefinitions generated from the Rust types.
//! `cargo run -p api --bin crdgen -- deploy/crds` regenerates them; the
//! `crd_drift` test fails when the checked-in files differ.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("deploy/crds"), PathBuf::from);
    std::fs::create_dir_all(&dir)?;
    let crds = api::crd_yaml().map_err(std::io::Error::other)?;
    for (file, yaml) in crds {
        std::fs::write(dir.join(file), yaml)?;
    }
    Ok(())
}
