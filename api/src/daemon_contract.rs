//! The contract between the controller and the node daemons: what a daemon
//! reads in its BootcNode's spec and means by what it writes in its status.
//! Each daemon reports the contract it speaks (`status.daemon`); the
//! controller drives only the contracts it knows ([`DRIVEN`]). While the
//! operator is upgraded, its controller and its DaemonSet roll at different
//! times: a daemon of another contract is told no new image and never
//! approved to boot, and the pool names it (`DaemonTooOld`,
//! `DaemonTooNew`), until its pod runs a build the controller drives.

use std::ops::RangeInclusive;

use crate::BootcNode;

/// The contract this build's daemon speaks.
pub const CONTRACT: i32 = 1;

/// The contracts this build's controller drives: from the oldest daemon it
/// still knows how to drive to its own.
pub const DRIVEN: RangeInclusive<i32> = 1..=CONTRACT;

/// The contract of a daemon that reports none: it predates the report, and
/// speaks the first contract (the one of the day the report was added).
pub const UNREPORTED: i32 = 1;

/// Which way a daemon's contract is off the driven range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skew {
    /// Older than the oldest the controller drives: its DaemonSet has not
    /// rolled yet.
    TooOld,
    /// Newer than the controller's own: the controller has not been
    /// upgraded yet.
    TooNew,
}

/// A daemon the controller does not drive: which way, its contract and its
/// build (None: not reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSkew {
    pub skew: Skew,
    pub contract: i32,
    pub version: Option<String>,
}

/// Is `contract` off `driven`, and which way?
pub fn skew(contract: i32, driven: &RangeInclusive<i32>) -> Option<Skew> {
    if contract < *driven.start() {
        Some(Skew::TooOld)
    } else if contract > *driven.end() {
        Some(Skew::TooNew)
    } else {
        None
    }
}

impl BootcNode {
    /// Its daemon, when it speaks a contract outside `driven`. None also
    /// when no daemon has reported yet (the controller waits for it as a
    /// daemon behind its spec).
    pub fn daemon_skew(&self, driven: &RangeInclusive<i32>) -> Option<DaemonSkew> {
        let status = self.status.as_ref()?;
        let daemon = status.daemon.as_ref();
        let contract = daemon.map_or(UNREPORTED, |d| d.contract);
        Some(DaemonSkew {
            skew: skew(contract, driven)?,
            contract,
            version: daemon.map(|d| d.version.clone()),
        })
    }
}

impl DaemonSkew {
    /// "bootc-daemon 0.1.0 (contract 0)", for the messages.
    pub fn describe(&self) -> String {
        match &self.version {
            Some(v) => format!("bootc-daemon {v} (contract {})", self.contract),
            None => format!("a daemon reporting no version (contract {})", self.contract),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::BootcNodeBuilder;

    fn bn(daemon: Option<(i32, &str)>) -> BootcNode {
        BootcNodeBuilder::new("n1")
            .desired("r.example/os@sha256:1")
            .daemon(daemon)
            .build()
    }

    #[test]
    fn a_daemon_outside_the_driven_contracts_is_named_with_its_build() {
        let driven = 2..=3;
        // (what, BootcNode, the skew)
        let rows = [
            ("oldest driven", bn(Some((2, "0.2.0"))), None),
            ("newest driven", bn(Some((3, "0.3.0"))), None),
            ("older", bn(Some((1, "0.1.0"))), Some(Skew::TooOld)),
            ("newer", bn(Some((4, "0.4.0"))), Some(Skew::TooNew)),
            (
                "unreported: the first contract",
                bn(None),
                Some(Skew::TooOld),
            ),
        ];
        for (what, b, want) in rows {
            assert_eq!(b.daemon_skew(&driven).map(|s| s.skew), want, "{what}");
        }
        let mut silent = bn(None);
        silent.status = None;
        assert_eq!(silent.daemon_skew(&driven), None, "no status yet");
        let old = bn(Some((1, "0.1.0"))).daemon_skew(&driven);
        assert_eq!(
            old.map(|s| s.describe()).as_deref(),
            Some("bootc-daemon 0.1.0 (contract 1)")
        );
    }

    #[test]
    fn this_build_drives_its_own_daemon_and_those_that_predate_the_report() {
        assert_eq!(skew(CONTRACT, &DRIVEN), None);
        assert_eq!(skew(UNREPORTED, &DRIVEN), None);
        assert_eq!(bn(None).daemon_skew(&DRIVEN), None);
    }
}
