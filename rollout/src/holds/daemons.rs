//! The daemons' contract ([`api::daemon_contract`]). A member whose daemon
//! speaks a contract this controller does not drive (its DaemonSet pod not
//! yet rolled to this release, or a controller not yet upgraded to the
//! daemons') is held:
//!
//! * it is not told a new image: it is kept on what it runs, as a member
//!   waiting to be told is (the staging and spec modules);
//! * it is no candidate for a reboot slot, and a slot holder is never
//!   approved to boot by this plan (an approval already given stands: the
//!   daemon may be applying it);
//! * the pool is `Degraded` with [`Reason::DaemonTooOld`] or
//!   [`Reason::DaemonTooNew`], naming the node and its daemon's build.
//!
//! Why: the spec the controller writes and the status it reads mean what
//! the contract says; a daemon of another contract may read an approval or
//! an image differently, or report one the controller misreads. Once its
//! daemon speaks a driven contract, it is told like any other member.

use std::ops::RangeInclusive;

use api::daemon_contract::{self, DaemonSkew, Skew};
use api::{BootcNode, Reason};

use crate::model::Problem;

/// The contracts this controller drives.
pub const DRIVEN: RangeInclusive<i32> = daemon_contract::DRIVEN;

/// `bn`'s daemon, when this controller does not drive it.
pub fn skewed(bn: Option<&BootcNode>) -> Option<DaemonSkew> {
    bn?.daemon_skew(&DRIVEN)
}

/// What one held node is told, for the pool and `kubectl bootc why`.
pub fn message(node: &str, skew: &DaemonSkew) -> String {
    let (which, fix) = match skew.skew {
        Skew::TooOld => (
            "older than",
            "its bootc-daemon pod runs this release (the DaemonSet rolls it)",
        ),
        Skew::TooNew => (
            "newer than",
            "the controller is upgraded to its daemon's release",
        ),
    };
    format!(
        "node {node} runs {}, a contract {which} this controller drives ({}..={}): it is told no new image and not approved to boot until {fix}",
        skew.describe(),
        DRIVEN.start(),
        DRIVEN.end()
    )
}

/// The pool's problems for the held members (`(node, skew)`): one per
/// direction.
pub fn problems(held: &[(&str, &DaemonSkew)]) -> Vec<Problem> {
    [
        (Skew::TooOld, Reason::DaemonTooOld),
        (Skew::TooNew, Reason::DaemonTooNew),
    ]
    .into_iter()
    .filter_map(|(skew, reason)| {
        let messages: Vec<String> = held
            .iter()
            .filter(|(_, s)| s.skew == skew)
            .map(|(n, s)| message(n, s))
            .collect();
        (!messages.is_empty()).then(|| (reason, messages.join("; ")))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_node_its_build_and_the_fix() {
        let old = DaemonSkew {
            skew: Skew::TooOld,
            contract: 0,
            version: Some("0.0.9".into()),
        };
        let new = DaemonSkew {
            skew: Skew::TooNew,
            contract: 99,
            version: Some("9.0.0".into()),
        };
        let m = message("n1", &old);
        assert!(
            m.starts_with("node n1 runs bootc-daemon 0.0.9 (contract 0), a contract older than"),
            "{m}"
        );
        assert!(m.contains("the DaemonSet rolls it"), "{m}");
        assert!(message("n2", &new).contains("the controller is upgraded"));
        let found = problems(&[("n1", &old), ("n2", &new), ("n3", &old)]);
        let reasons: Vec<Reason> = found.iter().map(|(r, _)| *r).collect();
        assert_eq!(reasons, [Reason::DaemonTooOld, Reason::DaemonTooNew]);
        assert!(found[0].1.contains("node n1 ") && found[0].1.contains("node n3 "));
        assert!(problems(&[]).is_empty());
    }
}
