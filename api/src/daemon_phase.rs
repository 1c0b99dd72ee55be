//! The daemon's phase: where a node is in its update cycle, as its daemon
//! reports it. One enum for everything that writes or reads it: the daemon's
//! state machine, the controller's classification of a member, the kubectl
//! plugin and the test players.
//!
//! On the wire the phase is the reason of the BootcNode's `Idle` condition
//! (True only in [`DaemonPhase::Idle`]); these are the strings of
//! [`crate::Reason`]'s Idle reasons, so the CRD and other readers of it are
//! unchanged.

use std::fmt;
use std::str::FromStr;

use crate::{BootcNodeStatus, ConditionType, Reason, conditions};

/// Where a node is in its update cycle (the `Idle` condition's reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DaemonPhase {
    /// On the desired image, nothing to do.
    Idle,
    /// Downloading the desired image.
    Staging,
    /// The desired image is staged; waiting for the approval to boot it.
    Staged,
    /// Applying the staged image (the node reboots).
    Rebooting,
}

/// A reason of the `Idle` condition that names no phase.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown daemon phase {0:?} (the Idle condition's reason is one of Idle, Staging, Staged, Rebooting)"
)]
pub struct UnknownPhase(pub String);

impl DaemonPhase {
    /// Every phase, in the order of the cycle.
    pub const ALL: [DaemonPhase; 4] = [
        DaemonPhase::Idle,
        DaemonPhase::Staging,
        DaemonPhase::Staged,
        DaemonPhase::Rebooting,
    ];

    /// The `Idle` condition's reason in this phase: the one place a phase's
    /// wire string comes from.
    pub const fn reason(self) -> Reason {
        match self {
            DaemonPhase::Idle => Reason::Idle,
            DaemonPhase::Staging => Reason::Staging,
            DaemonPhase::Staged => Reason::Staged,
            DaemonPhase::Rebooting => Reason::Rebooting,
        }
    }

    /// The reason string on the wire.
    pub const fn as_str(self) -> &'static str {
        self.reason().as_str()
    }

    /// The status of the `Idle` condition in this phase.
    pub const fn is_idle(self) -> bool {
        matches!(self, DaemonPhase::Idle)
    }

    /// The phase `status` reports: None when it has no `Idle` condition
    /// (the daemon has not written yet).
    pub fn of(status: &BootcNodeStatus) -> Result<Option<Self>, UnknownPhase> {
        conditions::reason(&status.conditions, ConditionType::Idle)
            .map(str::parse)
            .transpose()
    }
}

impl FromStr for DaemonPhase {
    type Err = UnknownPhase;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DaemonPhase::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPhase(s.to_owned()))
    }
}

impl fmt::Display for DaemonPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl BootcNodeStatus {
    /// The phase this status reports ([`DaemonPhase::of`]).
    pub fn phase(&self) -> Result<Option<DaemonPhase>, UnknownPhase> {
        DaemonPhase::of(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::conditions::ConditionUpdate;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn every_phase_parses_back_from_its_wire_string() {
        for phase in DaemonPhase::ALL {
            assert_eq!(phase.as_str().parse::<DaemonPhase>(), Ok(phase));
            assert_eq!(phase.to_string(), phase.as_str());
        }
        // The wire strings the CRD's readers (and the Go operator) know.
        let wire: Vec<_> = DaemonPhase::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(wire, ["Idle", "Staging", "Staged", "Rebooting"]);
    }

    #[test]
    fn an_unknown_reason_is_an_error_naming_it() {
        let err = "Exploding".parse::<DaemonPhase>().unwrap_err();
        assert_eq!(err, UnknownPhase("Exploding".to_owned()));
        assert!(err.to_string().contains("\"Exploding\""), "{err}");
        assert!("staged".parse::<DaemonPhase>().is_err(), "case matters");
    }

    #[test]
    fn read_from_the_idle_condition_of_a_status() {
        let mut status = BootcNodeStatus::default();
        assert_eq!(status.phase(), Ok(None), "nothing written yet");
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let set = |status: &mut BootcNodeStatus, type_, reason| {
            conditions::apply(
                &mut status.conditions,
                &ConditionUpdate::new(type_, false, reason, ""),
                None,
                &now,
            );
        };
        set(&mut status, ConditionType::Degraded, Reason::Staged);
        assert_eq!(status.phase(), Ok(None), "only the Idle condition counts");
        set(&mut status, ConditionType::Idle, Reason::Staged);
        assert_eq!(status.phase(), Ok(Some(DaemonPhase::Staged)));
        // A reason the enum does not know, as another writer may leave it.
        if let Some(c) = status.conditions.iter_mut().find(|c| c.type_ == "Idle") {
            c.reason = "Later".into();
        }
        assert_eq!(status.phase(), Err(UnknownPhase("Later".to_owned())));
    }
}
