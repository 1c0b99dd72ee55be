//! Step 4, the slot budget: how many reboot slots `maxUnavailable` gives.
//!
//! An integer (at least 1) is a number of nodes; a percentage is of the
//! pool's member count, rounded down, and never less than 1: "25%" of 10
//! nodes is 2 slots, "10%" of 5 nodes is 1. Who may take a free slot within
//! that number is [`crate::disruption::Budget`]'s rule.

use api::{RolloutSpec, reasons};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::model::Problem;

/// The number of reboot slots for `members` nodes (see the module docs).
pub fn max_unavailable(value: &IntOrString, members: usize) -> Result<usize, String> {
    match value {
        IntOrString::Int(n) if *n >= 1 => Ok(usize::try_from(*n).unwrap_or(1)),
        IntOrString::Int(n) => Err(format!(
            "spec.rollout.maxUnavailable must be at least 1, got {n}"
        )),
        IntOrString::String(s) => {
            let pct = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| {
                    format!(
                        "spec.rollout.maxUnavailable {s:?} is neither an integer nor a percentage 1%-100%"
                    )
                })?;
            Ok((members * pct / 100).max(1))
        }
    }
}

/// The pool's slots; an invalid value is reported and gives one slot.
pub fn slots(rollout: &RolloutSpec, members: usize, problems: &mut Vec<Problem>) -> usize {
    max_unavailable(&rollout.max_unavailable, members).unwrap_or_else(|e| {
        problems.push((reasons::INVALID_SPEC, e));
        1
    })
}
