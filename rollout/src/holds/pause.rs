//! Pauses (`spec.rollout.paused`, `spec.rollout.pausedUntil`): whether the
//! pool holds new reboot slots and the approvals of the nodes in slots.
//!
//! * `paused: true` holds them until a person resumes the pool.
//! * `pausedUntil` holds them in the same way while now is before it; from
//!   that instant on, the rollout goes on by itself: nothing is written,
//!   the pool is planned again at the instant ([`Pause::ends`]).
//! * Both set: `paused` wins (a person must resume).

use api::RolloutSpec;
use jiff::Timestamp;

/// The pool's pause now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pause {
    #[default]
    Running,
    /// `spec.rollout.paused`: until resumed.
    Paused,
    /// `spec.rollout.pausedUntil`, which is later than now.
    Until(Timestamp),
}

impl Pause {
    /// The pool's pause at `now`.
    pub fn of(rollout: &RolloutSpec, now: Timestamp) -> Pause {
        match &rollout.paused_until {
            _ if rollout.paused => Pause::Paused,
            Some(until) if now < until.0 => Pause::Until(until.0),
            _ => Pause::Running,
        }
    }

    /// Are new slots and approvals held?
    pub fn holds(self) -> bool {
        self != Pause::Running
    }

    /// When the pause ends by itself.
    pub fn ends(self) -> Option<Timestamp> {
        match self {
            Pause::Until(at) => Some(at),
            _ => None,
        }
    }
}
