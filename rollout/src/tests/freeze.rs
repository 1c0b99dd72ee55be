//! Pauses and freezes with an end: `spec.rollout.pausedUntil` holds new
//! slots (and approvals) as `paused` does until its instant, then lets the
//! rollout go on with no write; `spec.rollout.blackouts` hold new slots as
//! a closed window does, even inside an open one.

use super::*;
use crate::holds::window::Window;
use crate::standing::Standing;

fn blackout(start: &str, end: &str, zone: Option<&str>) -> api::Blackout {
    api::Blackout {
        start: start.to_owned(),
        end: end.to_owned(),
        time_zone: zone.map(str::to_owned),
    }
}

fn daily(start: &str, duration: &str) -> api::MaintenanceWindow {
    api::MaintenanceWindow {
        days: vec![],
        start: start.to_owned(),
        duration: duration.to_owned(),
        time_zone: None,
    }
}

fn standing_of(p: &Plan, name: &str) -> Standing {
    p.summary.standings.members[name].clone()
}

#[test]
fn a_pause_with_an_end_holds_until_it_and_not_after() {
    // (what, pausedUntil, paused, a new slot, UpToDate reason, message has,
    //  the staged member's standing, requeue no later than)
    type Row = (
        &'static str,
        Option<&'static str>,
        bool,
        bool,
        Reason,
        &'static str,
        Standing,
        Option<u64>,
    );
    let until = at("1970-01-12T14:00:00Z");
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("before its end: held, looked at again at the end", Some("1970-01-12T14:00:00Z"), false, false, Reason::PausedUntil,
            "paused until 1970-01-12T14:00:00Z", Standing::PausedUntil { until }, Some(800)),
        ("at its end: goes on by itself", Some("1970-01-12T13:46:40Z"), false, true, Reason::RolloutInProgress,
            "in reboot slots: slot, staged", Standing::TakingSlot, None),
        ("after it: goes on", Some("1970-01-01T00:00:00Z"), false, true, Reason::RolloutInProgress,
            "in reboot slots: slot, staged", Standing::TakingSlot, None),
        ("paused as well: a person resumes", Some("1970-01-12T14:00:00Z"), true, false, Reason::Paused,
            "", Standing::Paused, None),
    ];
    for (what, paused_until, paused, new_slot, reason, says, standing, requeue) in rows {
        let p = slot_staged_idle(|r| {
            r.paused = paused;
            r.paused_until = paused_until.map(|t| Time(at(t)));
        })
        .plan();
        assert_eq!(
            slotted(&p) == ["staged"],
            new_slot,
            "{what}: {:?}",
            p.writes
        );
        let (_, got, message) = up_to_date(&p);
        assert_eq!(got, reason, "{what}");
        assert!(message.contains(says), "{what}: {message}");
        assert_eq!(standing_of(&p, "staged"), standing, "{what}");
        if let Some(secs) = requeue {
            assert!(
                p.requeue_after
                    .is_some_and(|d| d <= Duration::from_secs(secs)),
                "{what}: {:?}",
                p.requeue_after
            );
        }
        // The node approved before the pause finishes either way.
        assert!(node_writes(&p, "slot").is_empty(), "{what}");
    }
}

#[test]
fn a_pause_with_an_end_holds_approvals_in_slots_as_a_pause_does() {
    let mut p = pool("a", IntOrString::Int(1), false);
    p.spec.rollout.paused_until = Some(Time(at("1970-01-12T15:00:00Z")));
    let w = World::new(p)
        .node(node("n", "a", true, true))
        .bn(bn("n", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("n", DrainPhase::Succeeded);
    let plan = w.plan();
    assert_eq!(standing_of(&plan, "n"), Standing::HeldByPause);
    assert!(applied(&plan, "n").is_none(), "{:?}", plan.writes);
    let (_, reason, message) = up_to_date(&plan);
    assert_eq!(reason, Reason::PausedUntil);
    assert!(
        message.contains("held cordoned in reboot slots until 1970-01-12T15:00:00Z: n"),
        "{message}"
    );
}

#[test]
fn a_blackout_holds_new_slots_even_inside_a_window() {
    // (what, windows, blackouts, a new slot, UpToDate reason, message has,
    //  the staged member's standing, nextMaintenanceWindow)
    type Row = (
        &'static str,
        Vec<api::MaintenanceWindow>,
        Vec<api::Blackout>,
        bool,
        Reason,
        &'static str,
        Standing,
        Option<&'static str>,
    );
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("no blackout", vec![], vec![], true, Reason::RolloutInProgress, "in reboot slots", Standing::TakingSlot, None),
        ("inside one: held until its end", vec![],
            vec![blackout("1970-01-12T00:00", "1970-01-13T00:00", None)], false, Reason::Blackout,
            "in a blackout (spec.rollout.blackouts), no new reboot slot: it ends at 1970-01-13T00:00:00Z, new slots from 1970-01-13T00:00:00Z; the nodes in reboot slots finish",
            Standing::Blackout, Some("1970-01-13T00:00:00Z")),
        ("wins over an open window; opens at the next window after it", vec![daily("13:00", "2h")],
            vec![blackout("1970-01-12T13:30", "1970-01-12T16:00", None)], false, Reason::Blackout,
            "it ends at 1970-01-12T16:00:00Z, new slots from 1970-01-13T13:00:00Z", Standing::Blackout,
            Some("1970-01-13T13:00:00Z")),
        ("in its time zone: 15:00 in Paris is 14:00 UTC", vec![],
            vec![blackout("1970-01-12T12:00", "1970-01-12T15:00", Some("Europe/Paris"))], false, Reason::Blackout,
            "it ends at 1970-01-12T14:00:00Z", Standing::Blackout, Some("1970-01-12T14:00:00Z")),
        ("one ahead: slots now", vec![],
            vec![blackout("1970-01-12T18:00", "1970-01-13T00:00", None)], true, Reason::RolloutInProgress,
            "in reboot slots", Standing::TakingSlot, None),
        ("a window opening inside a blackout opens at its end", vec![daily("20:00", "2h")],
            vec![blackout("1970-01-12T19:00", "1970-01-12T21:00", None)], false, Reason::OutsideMaintenanceWindow,
            "the next opens at 1970-01-12T21:00:00Z", Standing::OutsideWindow, Some("1970-01-12T21:00:00Z")),
        ("a blackout that cannot be read holds slots", vec![],
            vec![blackout("1970-02-30T00:00", "1970-03-02T00:00", None)], false, Reason::Blackout,
            "a blackout cannot be read (see Degraded)", Standing::Blackout, None),
    ];
    for (what, windows, blackouts, new_slot, reason, says, standing, next) in rows {
        let p = slot_staged_idle(|r| {
            r.maintenance_windows = windows;
            r.blackouts = blackouts;
        })
        .plan();
        holds_slots_not_staging(&p, what, new_slot, reason, says);
        assert_eq!(standing_of(&p, "staged"), standing, "{what}");
        assert!(node_writes(&p, "slot").is_empty(), "{what}");
        let got = p
            .status
            .as_ref()
            .unwrap()
            .next_maintenance_window
            .as_ref()
            .map(|t| t.0);
        assert_eq!(got, next.map(at), "{what}");
    }
}

#[test]
fn the_pool_is_looked_at_again_when_a_blackout_begins_or_ends() {
    let waiting = |blackouts| {
        let mut p = pool("a", IntOrString::Int(1), false);
        p.spec.rollout.blackouts = blackouts;
        World::new(p)
            .node(node("staged", "a", true, false))
            .bn(bn("staged", NEW, Daemon::Staged(OLD)))
            .plan()
    };
    // Ends at 14:00, 13m20s from now.
    let inside = waiting(vec![blackout("1970-01-12T00:00", "1970-01-12T14:00", None)]);
    assert_eq!(inside.requeue_after, Some(Duration::from_secs(800)));
    // Begins at 14:00: no new slot from then (or sooner for the drain).
    let ahead = waiting(vec![blackout("1970-01-12T14:00", "1970-01-13T00:00", None)]);
    assert!(
        ahead
            .requeue_after
            .is_some_and(|d| d <= Duration::from_secs(800)),
        "{:?}",
        ahead.requeue_after
    );
}

#[test]
fn a_blackout_that_cannot_be_read_is_invalid_spec_naming_it() {
    let rows = [
        (
            blackout(
                "1970-01-12T00:00",
                "1970-01-13T00:00",
                Some("Atlantis/Capital"),
            ),
            r#"spec.rollout.blackouts[0].timeZone "Atlantis/Capital""#,
        ),
        (
            blackout("1970-02-30T00:00", "1970-03-02T00:00", None),
            r#"spec.rollout.blackouts[0].start "1970-02-30T00:00""#,
        ),
        (
            blackout("1970-01-12T00:00", "1970-01-11T00:00", None),
            r#"spec.rollout.blackouts[0].end "1970-01-11T00:00" does not come after start"#,
        ),
    ];
    for (bad, named) in rows {
        let p = slot_staged_idle(|r| r.blackouts = vec![bad]).plan();
        assert_eq!(degraded_reason(&p), Reason::InvalidSpec, "{named}");
        assert!(
            degraded_message(&p).contains(named),
            "{}",
            degraded_message(&p)
        );
        assert_eq!(standing_of(&p, "staged"), Standing::Blackout, "{named}");
    }
}

#[test]
fn blackouts_across_daylight_saving() {
    // America/New_York goes back from 02:00 EDT to 01:00 EST on 2026-11-01
    // (06:00 UTC); Europe/Paris jumps from 02:00 to 03:00 on 2026-03-29
    // (01:00 UTC).
    let spec = |b: api::Blackout, windows: Vec<api::MaintenanceWindow>| api::RolloutSpec {
        blackouts: vec![b],
        maintenance_windows: windows,
        ..api::RolloutSpec::default()
    };
    let ny = |s, e| blackout(s, e, Some("America/New_York"));
    let paris = |s, e| blackout(s, e, Some("Europe/Paris"));
    #[rustfmt::skip]
    let rows: Vec<(&str, api::RolloutSpec, &str, Window)> = vec![
        ("an end passed twice ends the first time", spec(ny("2026-11-01T00:00", "2026-11-01T01:30"), vec![]),
            "2026-11-01T05:00:00Z", Window::Blackout { ends: Some(at("2026-11-01T05:30:00Z")), opens: Some(at("2026-11-01T05:30:00Z")) }),
        ("so the second 01:15 is outside it", spec(ny("2026-11-01T00:00", "2026-11-01T01:30"), vec![]),
            "2026-11-01T06:15:00Z", Window::Always),
        ("an end the clock skips ends at the jump", spec(paris("2026-03-28T22:00", "2026-03-29T02:30"), vec![]),
            "2026-03-29T00:30:00Z", Window::Blackout { ends: Some(at("2026-03-29T01:00:00Z")), opens: Some(at("2026-03-29T01:00:00Z")) }),
        ("inside an open window: the window's time is lost", spec(blackout("2026-11-25T03:00", "2026-11-25T04:00", None), vec![daily("02:00", "4h")]),
            "2026-11-25T03:30:00Z", Window::Blackout { ends: Some(at("2026-11-25T04:00:00Z")), opens: Some(at("2026-11-25T04:00:00Z")) }),
        ("an open window closes at the blackout's start", spec(blackout("2026-11-25T03:00", "2026-11-25T04:00", None), vec![daily("02:00", "4h")]),
            "2026-11-25T02:30:00Z", Window::Open { closes: at("2026-11-25T03:00:00Z") }),
        ("a freeze over the year's end skips the windows in it", spec(paris("2026-12-20T00:00", "2027-01-04T08:00"), vec![daily("02:00", "4h")]),
            "2026-12-25T03:00:00Z", Window::Blackout { ends: Some(at("2027-01-04T07:00:00Z")), opens: Some(at("2027-01-05T02:00:00Z")) }),
    ];
    for (what, spec, now, want) in rows {
        let mut problems = Vec::new();
        assert_eq!(
            crate::holds::window::of(&spec, at(now), &mut problems),
            want,
            "{what}"
        );
        assert!(problems.is_empty(), "{what}: {problems:?}");
    }
}

#[test]
fn the_fleets_switch_holds_every_new_slot_and_nothing_else() {
    // (what, the switch, a new slot, UpToDate reason, message has, the
    //  staged member's standing)
    let stop = Some("incident 4521".to_owned());
    type Row = (
        &'static str,
        Option<String>,
        bool,
        Reason,
        &'static str,
        Standing,
    );
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("off", None, true, Reason::RolloutInProgress, "in reboot slots", Standing::TakingSlot),
        ("on: held, the nodes in slots finish", stop.clone(), false, Reason::FleetStopped,
            "the fleet is stopped (bootc.dev/stop: incident 4521), no new reboot slot until `kubectl bootc resume --all`; the nodes in reboot slots finish",
            Standing::FleetStopped),
    ];
    for (what, fleet_stop, new_slot, reason, says, standing) in rows {
        let mut w = slot_staged_idle(|_| {});
        w.gates.fleet_stop = fleet_stop;
        let p = w.plan();
        holds_slots_not_staging(&p, what, new_slot, reason, says);
        assert_eq!(standing_of(&p, "staged"), standing, "{what}");
        assert!(node_writes(&p, "slot").is_empty(), "{what}");
    }
    // Over a pool's own pause and window: the switch is named first.
    let mut w = slot_staged_idle(|r| {
        r.paused = true;
        r.blackouts = vec![blackout("1970-01-12T00:00", "1970-01-13T00:00", None)];
    });
    w.gates.fleet_stop = stop;
    let p = w.plan();
    assert_eq!(standing_of(&p, "staged"), Standing::FleetStopped);
    assert_eq!(up_to_date(&p).1, Reason::FleetStopped);
}

#[test]
fn the_fleets_switch_with_its_flag_holds_approvals_in_slots() {
    let world = |holds: bool| {
        let mut w = World::new(pool("a", IntOrString::Int(1), false))
            .node(node("n", "a", true, true))
            .bn(bn("n", NEW, Daemon::Staged(OLD)).slot(false))
            .drain("n", DrainPhase::Succeeded);
        w.gates.fleet_stop = Some("incident 4521".into());
        w.gates.fleet_holds_approvals = holds;
        w
    };
    let approved = |plan: &Plan| {
        applied(plan, "n").is_some_and(|a| a.spec.desired_image_state == DesiredImageState::Booted)
    };
    // Without the flag the drained node in its slot finishes: approved.
    let plan = world(false).plan();
    assert!(approved(&plan), "{:?}", plan.writes);
    // With it, it waits cordoned in its slot, unapproved, and says why.
    let plan = world(true).plan();
    assert!(!approved(&plan), "{:?}", plan.writes);
    assert!(node_writes(&plan, "n").is_empty(), "{:?}", plan.writes);
    assert_eq!(standing_of(&plan, "n"), Standing::HeldByFleetStop);
    let (_, reason, message) = up_to_date(&plan);
    assert_eq!(reason, Reason::FleetStopped);
    assert!(
        message.contains("held cordoned in reboot slots, not approved to boot: n"),
        "{message}"
    );
}
