//! Links `bootc-daemon` with packed relative relocations (`DT_RELR`). A
//! position-independent Rust binary carries one 24-byte relocation record
//! per pointer in its read-only data (vtables, string tables): some 620 KiB
//! for the daemon, read in full at every start and resident from then on,
//! about a thirteenth of its memory. Packed, they take 11 KiB. Needs
//! binutils 2.38 and glibc 2.36, which the build machine and the operator's
//! image (built from its libraries) both have.

fn main() {
    // Nothing here depends on the sources: rerun only if this file changes.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bin=bootc-daemon=-Wl,-z,pack-relative-relocs");
}
