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
use api::reasons;

/// `Ready`, `Reconciling` and `Stalled`, from `UpToDate` and `Degraded`.
pub fn kstatus_conditions(
    up_to_date: &ConditionUpdate,
    degraded: &ConditionUpdate,
) -> [ConditionUpdate; 3] {
    let stalled = degraded.status;
    // Waiting for a maintenance window, for other pools or for a gate is
    // part of the rollout; a pause is not.
    let reconciling = !stalled
        && !up_to_date.status
        && [
            reasons::ROLLOUT_IN_PROGRESS,
            reasons::OUTSIDE_MAINTENANCE_WINDOW,
            reasons::WAITING_FOR_DEPENDENCIES,
            reasons::ALERT_FIRING,
            reasons::GATE_UNANSWERED,
        ]
        .contains(&up_to_date.reason.as_str());
    let ready = !stalled && up_to_date.status;
    // Ready tells why it is not: the problem first, else the rollout's state.
    let why = if stalled { degraded } else { up_to_date };
    [
        ConditionUpdate::new(reasons::READY, ready, &why.reason, why.message.clone()),
        ConditionUpdate::new(
            reasons::RECONCILING,
            reconciling,
            &up_to_date.reason,
            up_to_date.message.clone(),
        ),
        ConditionUpdate::new(
            reasons::STALLED,
            stalled,
            &degraded.reason,
            degraded.message.clone(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(up: (bool, &str), degraded: Option<&str>) -> (bool, bool, bool) {
        let up = ConditionUpdate::new(reasons::UP_TO_DATE, up.0, up.1, "m");
        let deg = match degraded {
            Some(r) => ConditionUpdate::new(reasons::DEGRADED, true, r, "bad"),
            None => ConditionUpdate::new(reasons::DEGRADED, false, reasons::HEALTHY, "ok"),
        };
        let [ready, reconciling, stalled] = kstatus_conditions(&up, &deg);
        (ready.status, reconciling.status, stalled.status)
    }

    #[test]
    fn the_table() {
        use reasons::*;
        // (UpToDate, Degraded reason) -> (Ready, Reconciling, Stalled)
        let rows = [
            ((true, ALL_UPDATED), None, (true, false, false)),
            ((false, ROLLOUT_IN_PROGRESS), None, (false, true, false)),
            ((false, PAUSED), None, (false, false, false)),
            ((false, ALERT_FIRING), None, (false, true, false)),
            ((false, GATE_UNANSWERED), None, (false, true, false)),
            (
                (false, ROLLOUT_IN_PROGRESS),
                Some(ROLLOUT_HALTED),
                (false, false, true),
            ),
            (
                (true, ALL_UPDATED),
                Some(NODE_CONFLICT),
                (false, false, true),
            ),
            ((false, PAUSED), Some(INVALID_SPEC), (false, false, true)),
        ];
        for (up, deg, want) in rows {
            assert_eq!(verdict(up, deg), want, "{up:?} {deg:?}");
        }
    }

    #[test]
    fn ready_says_why_not() {
        let up = ConditionUpdate::new(reasons::UP_TO_DATE, false, reasons::PAUSED, "3/5");
        let deg = ConditionUpdate::new(reasons::DEGRADED, true, reasons::ROLLOUT_HALTED, "x, y");
        let [ready, _, stalled] = kstatus_conditions(&up, &deg);
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            (reasons::ROLLOUT_HALTED, "x, y")
        );
        assert_eq!(stalled.reason, reasons::ROLLOUT_HALTED);
        let ok = ConditionUpdate::new(reasons::DEGRADED, false, reasons::HEALTHY, "no issues");
        let [ready, reconciling, _] = kstatus_conditions(&up, &ok);
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            (reasons::PAUSED, "3/5")
        );
        assert_eq!(reconciling.reason, reasons::PAUSED);
    }
}
