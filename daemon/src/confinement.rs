//! Everything that confines the daemon, the part of it a security reviewer
//! reads: the helper's spawn with its socket ([`spawn`], [`sys`]), the
//! privilege drop ([`privdrop`]), the Landlock sandbox ([`sandbox`]), the
//! seccomp allow-list ([`seccomp`]) and the self-test that proves each in
//! force ([`selftest`]). Nothing here talks to the API server.

pub mod privdrop;
pub mod sandbox;
pub mod seccomp;
pub mod selftest;
pub mod spawn;
pub mod sys;

/// Everything that confines the daemon, in order: the privilege drop, the
/// Landlock sandbox (which needs no_new_privs), then the seccomp filter
/// (which refuses the Landlock calls). Single-threaded only.
pub fn confine(uid: u32, gid: u32) -> Result<sandbox::Protections, crate::StartError> {
    privdrop::drop_privileges(uid, gid)?;
    let landlock = sandbox::install()?;
    if !matches!(landlock, sandbox::LandlockState::Full { .. }) {
        tracing::warn!(%landlock, "Landlock sandbox not fully in force; the seccomp filter still refuses every open for writing");
    }
    seccomp::install()?;
    Ok(sandbox::Protections {
        landlock,
        seccomp: true,
    })
}
