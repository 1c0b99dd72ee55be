//! The effective-state table and the node facts the planner reads.

use super::*;

#[test]
fn effective_state_table() {
    let t = target(NEW);
    #[rustfmt::skip]
    let rows: Vec<(&str, Bn, NodeState)> = vec![
        ("degraded wins", bn("n", NEW, Daemon::Idle(NEW)).degraded(), NodeState::Degraded),
        ("degraded while staging", bn("n", NEW, Daemon::Staging(OLD)).degraded(), NodeState::Degraded),
        ("runs the target", bn("n", NEW, Daemon::Idle(NEW)), NodeState::UpToDate),
        ("no status yet", bn("n", NEW, Daemon::Nothing), NodeState::Pending),
        ("idle on the old image", bn("n", NEW, Daemon::Idle(OLD)), NodeState::Pending),
        ("spec not yet synced", bn("n", OLD, Daemon::Staged(OLD)), NodeState::Pending),
        ("staging", bn("n", NEW, Daemon::Staging(OLD)), NodeState::Staging),
        ("staged", bn("n", NEW, Daemon::Staged(OLD)), NodeState::Staged),
        ("rebooting", bn("n", NEW, Daemon::Rebooting(OLD)), NodeState::Rebooting),
    ];
    for (what, row, want) in rows {
        assert_eq!(classify(&row.build(), &t), want, "{what}");
    }
    // Staged for another image counts as still staging.
    let mut b = bn("n", NEW, Daemon::Staged(OLD)).build();
    b.status.as_mut().unwrap().staged.as_mut().unwrap().image = Some(image(OLD).into());
    b.status
        .as_mut()
        .unwrap()
        .staged
        .as_mut()
        .unwrap()
        .image_digest = Some(OLD.into());
    assert_eq!(classify(&b, &t), NodeState::Staging);
    // A status answering an older generation is pending.
    let mut b = bn("n", NEW, Daemon::Staged(OLD)).build();
    b.metadata.generation = Some(5);
    b.status.as_mut().unwrap().observed_generation = Some(4);
    assert_eq!(classify(&b, &t), NodeState::Pending);
    // A multi-arch target: booted digest is the platform manifest, the
    // reference is the index.
    let mut b = bn("n", NEW, Daemon::Idle(OLD)).build();
    let booted = b.status.as_mut().unwrap().booted.as_mut().unwrap();
    booted.image = Some(image(NEW).into());
    booted.image_digest = Some("sha256:platform".into());
    assert_eq!(classify(&b, &t), NodeState::UpToDate);
}

#[test]
fn reboot_in_flight_table() {
    let rows: Vec<(&str, Bn, bool)> = vec![
        (
            "approved, not on it yet",
            bn("n", NEW, Daemon::Staged(OLD)).approved(),
            true,
        ),
        (
            "approved, rebooting",
            bn("n", NEW, Daemon::Rebooting(OLD)).approved(),
            true,
        ),
        (
            "approved, on it",
            bn("n", NEW, Daemon::Idle(NEW)).approved(),
            false,
        ),
        (
            "approved, gave up (Degraded)",
            bn("n", NEW, Daemon::Rebooting(OLD)).approved().degraded(),
            false,
        ),
        (
            "not approved, answered",
            bn("n", NEW, Daemon::Staged(OLD)),
            false,
        ),
        (
            "approval withdrawn, daemon behind (Staged)",
            bn("n", OLD, Daemon::Staged(OLD)).behind(),
            true,
        ),
        (
            "approval withdrawn, daemon behind (Rebooting)",
            bn("n", OLD, Daemon::Rebooting(OLD)).behind(),
            true,
        ),
        (
            "released: Idle, not acknowledged",
            bn("n", NEW, Daemon::Idle(NEW)).behind(),
            false,
        ),
        ("no status", bn("n", NEW, Daemon::Nothing), false),
    ];
    for (name, b, want) in rows {
        assert_eq!(disruption::reboot_in_flight(&b.build()), want, "{name}");
    }
}

#[test]
fn the_target_summary_is_the_version_and_a_short_digest() {
    let t = target(NEW);
    let mut on_new = bn("a", NEW, Daemon::Idle(NEW)).build();
    assert_eq!(target_summary(&t, &[&on_new]), "sha256:222222222222");
    if let Some(b) = on_new.status.as_mut().and_then(|s| s.booted.as_mut()) {
        b.version = Some("2.0".into());
    }
    let mut on_old = bn("b", NEW, Daemon::Idle(OLD)).build();
    if let Some(b) = on_old.status.as_mut().and_then(|s| s.booted.as_mut()) {
        b.version = Some("1.0".into());
    }
    assert_eq!(
        target_summary(&t, &[&on_old, &on_new]),
        "2.0 (sha256:222222222222)"
    );
}
