//! The pool's health in the words GitOps tools read: kstatus (Flux, Argo CD,
//! `kubectl wait`, cli-utils) looks at `observedGeneration` and the
//! abnormal-true `Reconciling` and `Stalled` conditions, and people and
//! dashboards at `Ready`. All three are derived here from the pool's own
//! `UpToDate` and `Degraded`, so each rule has one home.
//!
//! | UpToDate | Degraded | Ready | Reconciling | Stalled | kstatus |
//! |---|---|---|---|---|---|
//! | any | True | False | False | True | Failed |
//! | False, RolloutInProgress | False | False | True | False | InProgress |
//! | False, OutsideMaintenanceWindow or WaitingForDependencies | False | False | True | False | InProgress |
//! | False, Paused | False | False | False | False | InProgress |
//! | True | False | True | False | False | Current |
//!
//! A pool paused with nodes behind is InProgress, as kstatus judges a paused
//! Deployment that has not rolled out: the rollout is not done, so a GitOps
//! tool waiting for health waits (kstatus reads `Ready=False` as
//! InProgress). `Reconciling` stays False: nothing is making progress.

use api::conditions::ConditionUpdate;
use api::{ConditionType, Reason};

/// `Ready`, `Reconciling` and `Stalled`, from `UpToDate` and `Degraded`.
pub fn kstatus_conditions(
    up_to_date: &ConditionUpdate,
    degraded: &ConditionUpdate,
) -> [ConditionUpdate; 3] {
    let stalled = degraded.status;
    // Waiting for a maintenance window (or a blackout's end), for other
    // pools or for a gate is part of the rollout, and so are the slots a
    // deleted pool lets finish; a pause (until resumed,
    // until an instant, or the fleet's switch) is not.
    let reconciling = !stalled
        && !up_to_date.status
        && [
            Reason::RolloutInProgress,
            Reason::PoolDeleting,
            Reason::OutsideMaintenanceWindow,
            Reason::Blackout,
            Reason::WaitingForDependencies,
            Reason::AlertFiring,
            Reason::GateUnanswered,
        ]
        .contains(&up_to_date.reason);
    let ready = !stalled && up_to_date.status;
    // Ready tells why it is not: the problem first, else the rollout's state.
    let why = if stalled { degraded } else { up_to_date };
    [
        ConditionUpdate::new(ConditionType::Ready, ready, why.reason, why.message.clone()),
        ConditionUpdate::new(
            ConditionType::Reconciling,
            reconciling,
            up_to_date.reason,
            up_to_date.message.clone(),
        ),
        ConditionUpdate::new(
            ConditionType::Stalled,
            stalled,
            degraded.reason,
            degraded.message.clone(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(up: (bool, Reason), degraded: Option<Reason>) -> (bool, bool, bool) {
        let up = ConditionUpdate::new(ConditionType::UpToDate, up.0, up.1, "m");
        let deg = match degraded {
            Some(r) => ConditionUpdate::new(ConditionType::Degraded, true, r, "bad"),
            None => ConditionUpdate::new(ConditionType::Degraded, false, Reason::Healthy, "ok"),
        };
        let [ready, reconciling, stalled] = kstatus_conditions(&up, &deg);
        (ready.status, reconciling.status, stalled.status)
    }

    #[test]
    fn the_table() {
        // (UpToDate, Degraded reason) -> (Ready, Reconciling, Stalled)
        let rows = [
            ((true, Reason::AllUpdated), None, (true, false, false)),
            ((false, Reason::AlertFiring), None, (false, true, false)),
            ((false, Reason::GateUnanswered), None, (false, true, false)),
            (
                (false, Reason::RolloutInProgress),
                None,
                (false, true, false),
            ),
            ((false, Reason::Paused), None, (false, false, false)),
            ((false, Reason::PausedUntil), None, (false, false, false)),
            ((false, Reason::FleetStopped), None, (false, false, false)),
            ((false, Reason::PoolDeleting), None, (false, true, false)),
            ((false, Reason::Blackout), None, (false, true, false)),
            (
                (false, Reason::RolloutInProgress),
                Some(Reason::RolloutHalted),
                (false, false, true),
            ),
            (
                (true, Reason::AllUpdated),
                Some(Reason::NodeConflict),
                (false, false, true),
            ),
            (
                (false, Reason::Paused),
                Some(Reason::InvalidSpec),
                (false, false, true),
            ),
        ];
        for (up, deg, want) in rows {
            assert_eq!(verdict(up, deg), want, "{up:?} {deg:?}");
        }
    }

    #[test]
    fn ready_says_why_not() {
        let up = ConditionUpdate::new(ConditionType::UpToDate, false, Reason::Paused, "3/5");
        let deg =
            ConditionUpdate::new(ConditionType::Degraded, true, Reason::RolloutHalted, "x, y");
        let [ready, _, stalled] = kstatus_conditions(&up, &deg);
        assert_eq!(
            (ready.reason, ready.message.as_str()),
            (Reason::RolloutHalted, "x, y")
        );
        assert_eq!(stalled.reason, Reason::RolloutHalted);
        let ok = ConditionUpdate::new(ConditionType::Degraded, false, Reason::Healthy, "no issues");
        let [ready, reconciling, _] = kstatus_conditions(&up, &ok);
        assert_eq!(
            (ready.reason, ready.message.as_str()),
            (Reason::Paused, "3/5")
        );
        assert_eq!(reconciling.reason, Reason::Paused);
    }
}
