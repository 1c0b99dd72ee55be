//! Step 4, the pool's limits from `spec.rollout`: how many reboot slots
//! `maxUnavailable` gives, and how many unhealthy slot holders
//! `maxUnhealthy` tolerates before the rollout halts ([`crate::holds::halt`]).
//!
//! Both are an integer or a percentage of the pool's member count, and a
//! percentage rounds up, as the Go bootc-operator, DaemonSets and the
//! machine-config operator do: "25%" of 10 nodes is 3 slots, "10%" of 5
//! nodes is 1. `maxUnavailable: 0` (or "0%") gives no slot at all: every
//! member stages and none reboots, the mode a higher-level operator drives.
//! `maxUnhealthy` is at least 1 (default 2). Who may take a free slot
//! within that number is [`crate::holds::disruption::Budget`]'s rule.

use api::{DEFAULT_MAX_UNHEALTHY, Reason, RolloutSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::model::Problem;

/// The pool's limits for `members` nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Reboot slots.
    pub slots: usize,
    /// Unhealthy slot holders that halt the rollout.
    pub max_unhealthy: usize,
}

/// The number of reboot slots for `members` nodes (see the module docs).
pub fn max_unavailable(value: &IntOrString, members: usize) -> Result<usize, String> {
    of_pool(value, members, 0, "spec.rollout.maxUnavailable")
}

/// How many unhealthy slot holders halt the rollout of `members` nodes.
pub fn max_unhealthy(value: Option<&IntOrString>, members: usize) -> Result<usize, String> {
    match value {
        None => Ok(usize::try_from(DEFAULT_MAX_UNHEALTHY).unwrap_or(2)),
        Some(value) => of_pool(value, members, 1, "spec.rollout.maxUnhealthy"),
    }
}

/// An integer of at least `min`, or a percentage of `members` rounded up
/// (and at least `min`); the error names `field` and the value.
fn of_pool(value: &IntOrString, members: usize, min: usize, field: &str) -> Result<usize, String> {
    match value {
        IntOrString::Int(n) => usize::try_from(*n)
            .ok()
            .filter(|n| *n >= min)
            .ok_or_else(|| format!("{field} must be at least {min}, got {n}")),
        IntOrString::String(s) => {
            let pct = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| (min.min(1)..=100).contains(p))
                .ok_or_else(|| {
                    format!(
                        "{field} {s:?} is neither an integer nor a percentage {}%-100%",
                        min.min(1)
                    )
                })?;
            Ok((members * pct).div_ceil(100).max(min))
        }
    }
}

/// The pool's limits; an invalid value is reported and gives the safest
/// one (one slot; a halt at the first unhealthy holder).
pub fn limits(rollout: &RolloutSpec, members: usize, problems: &mut Vec<Problem>) -> Limits {
    let mut invalid = |e: String| {
        problems.push((Reason::InvalidSpec, e));
        1
    };
    Limits {
        slots: max_unavailable(&rollout.max_unavailable, members).unwrap_or_else(&mut invalid),
        max_unhealthy: max_unhealthy(rollout.max_unhealthy.as_ref(), members)
            .unwrap_or_else(&mut invalid),
    }
}
