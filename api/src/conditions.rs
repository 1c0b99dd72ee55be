//! Helpers for standard Kubernetes conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// A condition as a decision makes it, before timestamps are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl ConditionUpdate {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        ConditionUpdate {
            type_,
            status,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Is the condition of `type_` present with status "True"?
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// The reason of the condition of `type_`, if present.
pub fn reason<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a str> {
    find(conditions, type_).map(|c| c.reason.as_str())
}

/// The message of the condition of `type_`, if present.
pub fn message<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a str> {
    find(conditions, type_).map(|c| c.message.as_str())
}

fn status_str(status: bool) -> &'static str {
    if status { "True" } else { "False" }
}

/// Does `update` differ from what `conditions` already say (ignoring times)?
pub fn differs(
    conditions: &[Condition],
    update: &ConditionUpdate,
    generation: Option<i64>,
) -> bool {
    match find(conditions, update.type_) {
        None => true,
        Some(c) => {
            c.status != status_str(update.status)
                || c.reason != update.reason
                || c.message != update.message
                || c.observed_generation != generation
        }
    }
}

/// Applies `update`, keeping `lastTransitionTime` unless the status flips.
/// Returns whether anything changed.
pub fn apply(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    apply_with(conditions, update, generation, now, false)
}

/// Like [`apply`], but `lastTransitionTime` also moves when the reason
/// changes: for a condition whose reason is a phase (the BootcNode's `Idle`:
/// Staging, Staged, Rebooting), so that its time says since when the node
/// is in its phase (`kubectl get bn` shows it).
pub fn apply_phase(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    generation: Option<i64>,
    now: &Time,
) -> bool {
    apply_with(conditions, update, generation, now, true)
}

fn apply_with(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    generation: Option<i64>,
    now: &Time,
    reason_is_phase: bool,
) -> bool {
    if !differs(conditions, update, generation) {
        return false;
    }
    let status = status_str(update.status);
    match conditions.iter_mut().find(|c| c.type_ == update.type_) {
        Some(c) => {
            if c.status != status || (reason_is_phase && c.reason != update.reason) {
                c.last_transition_time = now.clone();
            }
            c.status = status.to_owned();
            c.reason = update.reason.clone();
            c.message = update.message.clone();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: update.type_.to_owned(),
            status: status.to_owned(),
            reason: update.reason.clone(),
            message: update.message.clone(),
            observed_generation: generation,
            last_transition_time: now.clone(),
        }),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_reason_moves_the_transition_time() {
        let t = |s| Time(jiff::Timestamp::from_second(s).unwrap_or_default());
        let staging = ConditionUpdate::new("Idle", false, "Staging", "");
        let staged = ConditionUpdate::new("Idle", false, "Staged", "");
        let mut plain = Vec::new();
        apply(&mut plain, &staging, None, &t(1));
        apply(&mut plain, &staged, None, &t(2));
        assert_eq!(plain[0].last_transition_time, t(1), "status did not flip");
        let mut phase = Vec::new();
        apply_phase(&mut phase, &staging, None, &t(1));
        apply_phase(&mut phase, &staged, None, &t(2));
        assert_eq!(phase[0].last_transition_time, t(2));
        apply_phase(
            &mut phase,
            &ConditionUpdate::new("Idle", false, "Staged", "m"),
            None,
            &t(3),
        );
        assert_eq!(phase[0].last_transition_time, t(2), "same phase");
    }
}
