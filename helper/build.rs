//! Links `bootc-helper` with packed relative relocations (`DT_RELR`), as
//! `daemon/build.rs` does the daemon: each pointer in its read-only data
//! (vtables of the HTTP/2 and gRPC stack, string tables) otherwise costs a
//! 24-byte record read at every start and resident from then on, some
//! 170 KiB of the helper's memory. Packed, they take a few KiB. Needs
//! binutils 2.38 and glibc 2.36, as the daemon's.

fn main() {
    // Nothing here depends on the sources: rerun only if this file changes.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bin=bootc-helper=-Wl,-z,pack-relative-relocs");
}
