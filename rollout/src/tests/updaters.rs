//! A member whose host runs its own automatic updater ([`crate::holds::updaters`]):
//! not told the target, no reboot slot, named on the pool with the fix.

use super::*;
use api::host_updaters::{BOOTC_TIMER, ZINCATI};

/// `b` with its host reporting `units` on.
fn with_updaters(b: Bn, units: &[&str]) -> BootcNode {
    let mut b = b.build();
    if let Some(s) = b.status.as_mut() {
        s.host_updaters = units.iter().map(|u| (*u).to_owned()).collect();
    }
    b
}

/// Is `name` given a reboot slot by this plan?
fn given_slot(p: &Plan, name: &str) -> bool {
    slot_record(p, name) == Some(true) || slotted(p).iter().any(|n| n == name)
}

#[test]
fn a_host_running_its_own_updater_is_refused_and_named() {
    // (case, the refused member "r" as its daemon reports it, its updaters,
    //  "r" in a slot, the image "r" is left pointed at (None: not written),
    //  the pool names "r")
    type Row = (
        &'static str,
        Bn,
        &'static [&'static str],
        bool,
        Option<&'static str>,
        bool,
    );
    let rows: Vec<Row> = vec![
        (
            "idle, the timer on: kept on what it runs",
            bn("r", OLD, Daemon::Idle(OLD)),
            &[BOOTC_TIMER],
            false,
            None,
            true,
        ),
        (
            "told and staged before the timer was seen: put back",
            bn("r", NEW, Daemon::Staged(OLD)),
            &[BOOTC_TIMER],
            false,
            Some(OLD),
            true,
        ),
        (
            "two updaters: both named",
            bn("r", OLD, Daemon::Idle(OLD)),
            &[BOOTC_TIMER, ZINCATI],
            false,
            None,
            true,
        ),
        (
            "already on the target: nothing to refuse",
            bn("r", NEW, Daemon::Idle(NEW)),
            &[BOOTC_TIMER],
            false,
            None,
            false,
        ),
        (
            "in a slot: it goes on",
            bn("r", NEW, Daemon::Staged(OLD)).slot(false),
            &[BOOTC_TIMER],
            true,
            None,
            false,
        ),
        (
            "none reported: told",
            bn("r", OLD, Daemon::Idle(OLD)),
            &[],
            false,
            Some(NEW),
            false,
        ),
    ];
    for (case, r, units, in_slot, pointed_at, named) in rows {
        let r_node = node("r", "a", true, in_slot);
        let mut w = World::new(pool("a", IntOrString::Int(2), false))
            .node(node("ok", "a", true, false))
            .node(if in_slot {
                in_slot_of(r_node, "a")
            } else {
                r_node
            })
            .bn(bn("ok", NEW, Daemon::Staged(OLD)));
        w.bns.push(with_updaters(r, units));
        let p = w.plan();
        assert_eq!(
            applied(&p, "r").map(|a| a.spec.desired_image.clone()),
            pointed_at.map(|d| image(d).into()),
            "{case}: {:?}",
            p.writes
        );
        if !in_slot && !units.is_empty() {
            assert!(!given_slot(&p, "r"), "{case}: given a slot: {:?}", p.writes);
        }
        // The others roll on.
        assert!(given_slot(&p, "ok"), "{case}: {:?}", p.writes);
        let message = degraded_message(&p);
        assert_eq!(message.contains("node r "), named, "{case}: {message}");
        if named {
            assert_eq!(
                degraded_reason(&p),
                Reason::HostUpdaterEnabled.as_str(),
                "{case}"
            );
            let fix = format!(
                "`RUN systemctl mask {}` in its Containerfile",
                units.join(" ")
            );
            assert!(message.contains(&fix), "{case}: {message}");
            assert!(
                message.contains("never masks it itself"),
                "{case}: {message}"
            );
        }
    }
}

#[test]
fn once_masked_the_node_is_told_and_given_its_slot() {
    // Refused while the timer is on, staged by nobody.
    let on = World::new(pool("a", IntOrString::Int(1), false)).node(node("r", "a", true, false));
    let mut w = on;
    w.bns.push(with_updaters(
        bn("r", OLD, Daemon::Idle(OLD)),
        &[BOOTC_TIMER],
    ));
    let p = w.plan();
    assert!(applied(&p, "r").is_none(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::HostUpdaterEnabled.as_str());
    // Masked: its daemon reports none; it is told the target...
    w.bns = vec![with_updaters(bn("r", OLD, Daemon::Idle(OLD)), &[])];
    let p = w.plan();
    assert_eq!(
        applied(&p, "r").map(|a| a.spec.desired_image.clone()),
        Some(image(NEW).into())
    );
    assert_ne!(degraded_reason(&p), Reason::HostUpdaterEnabled.as_str());
    // ...and, staged, takes the slot.
    w.bns = vec![with_updaters(bn("r", NEW, Daemon::Staged(OLD)), &[])];
    assert!(given_slot(&w.plan(), "r"));
}
