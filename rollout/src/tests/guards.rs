//! The guards that hold a member back whatever the pool's rules say: a
//! host bootc cannot update from an image ([`api::unmanageable`]).

use super::*;
use crate::standing::Standing;
use api::StandingKind;

/// `b` with its status changed by `f`.
fn with_status(b: Bn, f: impl FnOnce(&mut BootcNodeStatus)) -> BootcNode {
    let mut b = b.build();
    if let Some(s) = b.status.as_mut() {
        f(s);
    }
    b
}

fn booted_incompatible(s: &mut BootcNodeStatus) {
    if let Some(b) = s.booted.as_mut() {
        b.incompatible = true;
    }
}

fn staged_incompatible(s: &mut BootcNodeStatus) {
    if let Some(b) = s.staged.as_mut() {
        b.incompatible = true;
    }
}

fn not_from_an_image(s: &mut BootcNodeStatus) {
    if let Some(b) = s.booted.as_mut() {
        b.image = None;
        b.image_digest = None;
    }
}

fn no_digest(s: &mut BootcNodeStatus) {
    if let Some(b) = s.booted.as_mut() {
        b.image_digest = None;
    }
}

/// Is `name` given a reboot slot by this plan?
fn given_slot(p: &Plan, name: &str) -> bool {
    slot_record(p, name) == Some(true) || slotted(p).iter().any(|n| n == name)
}

/// bootc's `incompatible`, a booted deployment from no image or with no
/// digest: never UpToDate (even on the target's reference), Degraded, not
/// told, no slot, named on the pool in bootc's words; the others roll on.
#[test]
fn a_host_bootc_cannot_update_from_an_image_never_counts_and_never_moves() {
    type Mutation = fn(&mut BootcNodeStatus);
    // (case, "h" as its daemon reports it, what bootc reports, the pool's
    //  message says)
    let rows: Vec<(&str, Bn, Mutation, &str)> = vec![
        (
            "on the target's reference, booted incompatible",
            bn("h", NEW, Daemon::Idle(NEW)),
            booted_incompatible,
            api::BOOTC_INCOMPATIBLE,
        ),
        (
            "staged, the staged deployment incompatible",
            bn("h", NEW, Daemon::Staged(OLD)),
            staged_incompatible,
            "staged deployment incompatible",
        ),
        (
            "idle on another origin",
            bn("h", OLD, Daemon::Idle(OLD)),
            not_from_an_image,
            "not from a container image",
        ),
        (
            "on the target's reference, no digest",
            bn("h", NEW, Daemon::Idle(NEW)),
            no_digest,
            "with no digest",
        ),
    ];
    for (case, h, bootc_reports, says) in rows {
        let mut w = World::new(pool("a", IntOrString::Int(2), false))
            .node(node("ok", "a", true, false))
            .node(node("h", "a", true, false))
            .bn(bn("ok", NEW, Daemon::Staged(OLD)));
        w.bns.push(with_status(h, bootc_reports));
        let p = w.plan();
        assert_eq!(
            p.summary.states.get("h"),
            Some(&NodeState::Degraded),
            "{case}"
        );
        assert_eq!(
            p.summary.standings.members.get("h").map(Standing::kind),
            Some(StandingKind::HostIncompatible),
            "{case}"
        );
        assert_ne!(up_to_date(&p).1, Reason::AllUpdated.as_str(), "{case}");
        assert!(!given_slot(&p, "h"), "{case}: given a slot: {:?}", p.writes);
        let told_now = w.bns[1].spec.desired_image != image(NEW)
            && applied(&p, "h").is_some_and(|a| a.spec.desired_image == image(NEW));
        assert!(!told_now, "{case}: told the target: {:?}", p.writes);
        assert!(given_slot(&p, "ok"), "{case}: {:?}", p.writes);
        assert_eq!(
            degraded_reason(&p),
            Reason::HostIncompatible.as_str(),
            "{case}"
        );
        let message = degraded_message(&p);
        assert!(
            message.contains("node h: ") && message.contains(says),
            "{case}: {message}"
        );
    }
}

/// Once a person repairs the host (its daemon reports a deployment bootc
/// manages), it counts and moves like any other member.
#[test]
fn once_repaired_the_node_counts_again() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false)).node(node("h", "a", true, false));
    w.bns.push(with_status(
        bn("h", NEW, Daemon::Idle(NEW)),
        booted_incompatible,
    ));
    assert_eq!(up_to_date(&w.plan()).0, "False");
    w.bns = vec![bn("h", NEW, Daemon::Idle(NEW)).build()];
    let p = w.plan();
    assert_eq!(up_to_date(&p).1, Reason::AllUpdated.as_str());
    assert_eq!(
        p.summary.standings.members.get("h").map(Standing::kind),
        Some(StandingKind::UpToDate)
    );
}

/// `b` with its daemon reporting `contract` (None: no report, a daemon
/// older than the report).
fn daemon(b: Bn, contract: Option<i32>) -> BootcNode {
    with_status(b, |s| {
        s.daemon = contract.map(|contract| api::DaemonStatus {
            version: format!("0.{contract}.0"),
            contract,
        });
    })
}

/// A daemon of a contract this controller does not drive: not told, no
/// slot, never approved by the plan (one approved already stands), named
/// on the pool with its build; one on the target is left alone; one that
/// reports no contract predates the report and is driven.
#[test]
fn a_daemon_of_a_contract_not_driven_is_never_told_nor_approved() {
    let old = Some(crate::holds::daemons::DRIVEN.start() - 1);
    let new = Some(crate::holds::daemons::DRIVEN.end() + 1);
    let ours = Some(api::daemon_contract::CONTRACT);
    // (case, "d" with its daemon, "d" in a slot (drained), the image "d"
    //  is pointed at (None: not written), approved after the plan, the
    //  pool's reason naming it (None: not named), its standing)
    type Row = (
        &'static str,
        BootcNode,
        bool,
        Option<&'static str>,
        bool,
        Option<Reason>,
        StandingKind,
    );
    let rows: Vec<Row> = vec![
        (
            "idle, too old: kept on what it runs",
            daemon(bn("d", OLD, Daemon::Idle(OLD)), old),
            false,
            None,
            false,
            Some(Reason::DaemonTooOld),
            StandingKind::DaemonSkew,
        ),
        (
            "told and staged, then too old: put back",
            daemon(bn("d", NEW, Daemon::Staged(OLD)), old),
            false,
            Some(OLD),
            false,
            Some(Reason::DaemonTooOld),
            StandingKind::DaemonSkew,
        ),
        (
            "idle, too new",
            daemon(bn("d", OLD, Daemon::Idle(OLD)), new),
            false,
            None,
            false,
            Some(Reason::DaemonTooNew),
            StandingKind::DaemonSkew,
        ),
        (
            "drained and staged in its slot, too old: not approved",
            daemon(bn("d", NEW, Daemon::Staged(OLD)).slot(false), old),
            true,
            None,
            false,
            Some(Reason::DaemonTooOld),
            StandingKind::DaemonSkew,
        ),
        (
            "approved already, too old: the approval stands",
            daemon(
                bn("d", NEW, Daemon::Rebooting(OLD)).slot(false).approved(),
                old,
            ),
            true,
            None,
            true,
            Some(Reason::DaemonTooOld),
            StandingKind::Rebooting,
        ),
        (
            "on the target, too old: nothing to hold",
            daemon(bn("d", NEW, Daemon::Idle(NEW)), old),
            false,
            None,
            false,
            None,
            StandingKind::UpToDate,
        ),
        (
            "this build's daemon: told",
            daemon(bn("d", OLD, Daemon::Idle(OLD)), ours),
            false,
            Some(NEW),
            false,
            None,
            StandingKind::Told,
        ),
        (
            "no contract reported: told",
            daemon(bn("d", OLD, Daemon::Idle(OLD)), None),
            false,
            Some(NEW),
            false,
            None,
            StandingKind::Told,
        ),
        (
            "drained and staged in its slot, this build's: approved",
            daemon(bn("d", NEW, Daemon::Staged(OLD)).slot(false), ours),
            true,
            Some(NEW),
            true,
            None,
            StandingKind::Approved,
        ),
    ];
    for (case, d, in_slot, pointed_at, approved, named, standing) in rows {
        let mut w = World::new(pool("a", IntOrString::Int(2), false))
            .node(node("ok", "a", true, false))
            .node(node("d", "a", true, in_slot))
            .bn(bn("ok", NEW, Daemon::Staged(OLD)));
        if in_slot {
            w = w.drain("d", DrainPhase::Succeeded);
            w.slots.push(("d".into(), "a".into(), false));
        }
        w.bns.push(d);
        let p = w.plan();
        let written = applied(&p, "d");
        assert_eq!(
            written.map(|a| a.spec.desired_image.clone()),
            pointed_at.map(|d| image(d).into()),
            "{case}: {:?}",
            p.writes
        );
        let now_approved = written.map_or(w.bns[1].spec.approved(), |a| a.spec.approved());
        assert_eq!(now_approved, approved, "{case}: {:?}", p.writes);
        if !in_slot {
            assert!(
                !given_slot(&p, "d") || named.is_none(),
                "{case}: given a slot"
            );
        }
        assert!(given_slot(&p, "ok") || in_slot, "{case}: {:?}", p.writes);
        assert_eq!(
            p.summary.standings.members.get("d").map(Standing::kind),
            Some(standing),
            "{case}"
        );
        let message = degraded_message(&p);
        match named {
            Some(reason) => {
                assert_eq!(degraded_reason(&p), reason.as_str(), "{case}");
                assert!(
                    message.contains("node d runs bootc-daemon 0."),
                    "{case}: {message}"
                );
            }
            None => assert!(!message.contains("node d runs"), "{case}: {message}"),
        }
    }
}
