//! Maintenance windows: new slots only inside one; staging and the nodes
//! already in slots go on outside.

use super::*;
use crate::holds::window::Window;

/// 1970-01-12 (a Monday), where the World's clock stands at 13:46:40 UTC.
fn windows(start: &str, zone: Option<&str>) -> Vec<api::MaintenanceWindow> {
    vec![api::MaintenanceWindow {
        days: vec![],
        start: start.to_owned(),
        duration: "2h".to_owned(),
        time_zone: zone.map(str::to_owned),
    }]
}

/// The pool of [`slot_staged_idle`], with these windows.
fn world(windows: Vec<api::MaintenanceWindow>) -> World {
    slot_staged_idle(|r| r.maintenance_windows = windows)
}

#[test]
fn new_slots_wait_for_a_window_and_nothing_else_does() {
    // (what, windows, a new slot, UpToDate reason, message has,
    //  nextMaintenanceWindow)
    type Row = (
        &'static str,
        Vec<api::MaintenanceWindow>,
        bool,
        Reason,
        &'static str,
        Option<&'static str>,
    );
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("no windows", vec![], true, Reason::RolloutInProgress, "in reboot slots: slot, staged", None),
        ("inside one, until 15:00", windows("13:00", None), true, Reason::RolloutInProgress, "in reboot slots: slot, staged", None),
        ("outside: the next opens at 20:00", windows("20:00", None), false, Reason::OutsideMaintenanceWindow,
            "outside the maintenance windows, no new reboot slot: the next opens at 1970-01-12T20:00:00Z; the nodes in reboot slots finish",
            Some("1970-01-12T20:00:00Z")),
        ("in its time zone: 21:00 in Paris is 20:00 UTC", windows("21:00", Some("Europe/Paris")), false, Reason::OutsideMaintenanceWindow,
            "the next opens at 1970-01-12T20:00:00Z", Some("1970-01-12T20:00:00Z")),
        ("a window that cannot be read holds slots", windows("13:00", Some("Atlantis/Capital")), false, Reason::OutsideMaintenanceWindow,
            "a window cannot be read (see Degraded)", None),
    ];
    for (what, windows, new_slot, reason, says, next) in rows {
        let p = world(windows).plan();
        // Staging does not wait: the free slot a window will open is
        // awaited by a node told the target now.
        holds_slots_not_staging(&p, what, new_slot, reason, says);
        // The node in its slot finishes either way: nothing withdraws its
        // approval or takes its slot.
        assert!(
            node_writes(&p, "slot").is_empty(),
            "{what}: {:?}",
            node_writes(&p, "slot")
        );
        let status = p.status.as_ref().unwrap();
        let got_next = status.next_maintenance_window.as_ref().map(|t| t.0);
        assert_eq!(got_next, next.map(at), "{what}");
    }
}

#[test]
fn the_pool_is_looked_at_again_when_its_window_opens_or_closes() {
    let waiting = |windows| {
        let mut p = pool("a", IntOrString::Int(1), false);
        p.spec.rollout.maintenance_windows = windows;
        World::new(p)
            .node(node("staged", "a", true, false))
            .bn(bn("staged", NEW, Daemon::Staged(OLD)))
            .plan()
    };
    // Opens at 20:00, 6h13m20s from now; nothing else to wait for.
    let closed = waiting(windows("20:00", None));
    assert_eq!(closed.requeue_after, Some(Duration::from_secs(22_400)));
    // Closes at 15:00, 1h13m20s from now (or sooner for the drain).
    let open = waiting(windows("13:00", None));
    assert!(
        open.requeue_after
            .is_some_and(|d| d <= Duration::from_secs(4_400)),
        "{:?}",
        open.requeue_after
    );
    // Without windows, nothing to look at again for.
    assert_eq!(waiting(vec![]).requeue_after, None);
}

#[test]
fn a_window_that_cannot_be_read_is_invalid_spec_naming_it() {
    let p = world(windows("13:00", Some("Atlantis/Capital"))).plan();
    assert_eq!(degraded_reason(&p), Reason::InvalidSpec);
    assert!(
        degraded_message(&p)
            .contains(r#"spec.rollout.maintenanceWindows[0].timeZone "Atlantis/Capital""#),
        "{}",
        degraded_message(&p)
    );
}

#[test]
fn the_plugin_and_the_planner_read_the_same_window() {
    let w = world(windows("20:00", None));
    let mut problems = Vec::new();
    let window = crate::holds::window::at(
        &w.pool.spec.rollout.maintenance_windows,
        now(),
        &mut problems,
    );
    assert_eq!(
        window,
        Window::Closed {
            opens: Some(at("1970-01-12T20:00:00Z"))
        }
    );
}
