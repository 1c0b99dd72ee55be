//! The unhealthy halt (rule 3): `spec.rollout.maxUnhealthy` unhealthy nodes
//! in reboot slots (two by default; step 4 reads the limit) stop new slots.
//! A slot holder is unhealthy when its BootcNode is Degraded, or its Node is
//! NotReady without simply rebooting: a node approved to boot and not yet on
//! the target is rebooting for [`NOT_READY_WHILE_REBOOTING`]; back on the
//! target and still NotReady, it counts at once.

use std::time::Duration;

use api::{BootcNodePoolStatus, ConditionType, Reason, conditions};
use jiff::Timestamp;

use crate::model::{PlannedEvent, Problem, event_reasons};

/// How long a node approved to boot may stay NotReady before it counts as
/// unhealthy for rule 3 (not the daemon's `REBOOT_AFTER_APPLY_TIMEOUT`, how
/// long it waits for the host to reboot after an apply): being NotReady is what a reboot looks like, and
/// two nodes rebooting together are not evidence of a bad image. A node
/// that came back on the target and is still NotReady counts at once.
pub const NOT_READY_WHILE_REBOOTING: Duration = Duration::from_secs(600);

/// A slot holder, as rule 3 sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub degraded: bool,
    pub ready: bool,
    /// Approved to boot and not yet on the target.
    pub rebooting: bool,
    /// Since when the Node has been NotReady, if it is.
    pub not_ready_since: Option<Timestamp>,
}

/// Is the slot holder unhealthy now? With it, when to look again if it is
/// rebooting within the grace (it counts once the grace runs out).
pub fn unhealthy(h: Holder, now: Timestamp) -> (bool, Option<Duration>) {
    let down = h
        .not_ready_since
        .filter(|_| h.rebooting)
        .map(|since| now.duration_since(since).unsigned_abs());
    let left = down
        .filter(|down| *down < NOT_READY_WHILE_REBOOTING)
        .map(|down| NOT_READY_WHILE_REBOOTING.saturating_sub(down));
    let healthy = h.ready && !h.degraded;
    (h.degraded || (!healthy && left.is_none()), left)
}

/// Do `unhealthy` slot holders halt the rollout, `max_unhealthy` being
/// the pool's limit?
pub fn halted(unhealthy: usize, max_unhealthy: usize) -> bool {
    unhealthy >= max_unhealthy
}

/// Rule 3's halt on the pool's Degraded condition, and one Warning Event
/// when it starts.
pub fn report(
    unhealthy_in_slots: &[String],
    current: &BootcNodePoolStatus,
    problems: &mut Vec<Problem>,
    events: &mut Vec<PlannedEvent>,
) {
    problems.push((
        Reason::RolloutHalted,
        format!(
            "rollout halted: {} nodes in reboot slots are unhealthy (Degraded or not Ready): {}",
            unhealthy_in_slots.len(),
            unhealthy_in_slots.join(", ")
        ),
    ));
    if conditions::reason(&current.conditions, ConditionType::Degraded)
        != Some(Reason::RolloutHalted.as_str())
    {
        events.push(PlannedEvent {
            reason: event_reasons::ROLLOUT_HALTED,
            message: format!(
                "no new reboot slots: unhealthy nodes in slots: {}",
                unhealthy_in_slots.join(", ")
            ),
            warning: true,
            node: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_counts_as_unhealthy_in_a_slot() {
        let now = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(10_000);
        let ago = |s: i64| Some(now - jiff::SignedDuration::from_secs(s));
        let h = Holder::default();
        let grace_left = Some(Duration::from_secs(500));
        // (what, holder, (unhealthy, look again after))
        type Row = (&'static str, Holder, (bool, Option<Duration>));
        let down = |rebooting: bool, secs: i64| Holder {
            rebooting,
            not_ready_since: ago(secs),
            ..h
        };
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("ready and healthy", Holder { ready: true, ..h }, (false, None)),
            ("ready but degraded", Holder { ready: true, degraded: true, ..h }, (true, None)),
            ("NotReady, not rebooting", down(false, 5), (true, None)),
            ("rebooting within the grace", down(true, 100), (false, grace_left)),
            ("rebooting past the grace", down(true, 600), (true, None)),
            ("Degraded while rebooting", Holder { degraded: true, ..down(true, 100) }, (true, grace_left)),
        ];
        for (what, holder, want) in rows {
            assert_eq!(unhealthy(holder, now), want, "{what}");
        }
        assert!(!halted(1, 2) && halted(2, 2) && halted(1, 1));
    }
}
