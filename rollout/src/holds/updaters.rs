//! The host's own automatic updaters ([`api::host_updaters`]). A member
//! whose BootcNode reports one on (`status.hostUpdaters`) is refused:
//!
//! * it is not told the target: it is kept on what it runs, as a member
//!   waiting to be told is (the staging and spec modules);
//! * it is no candidate for a reboot slot;
//! * the pool is `Degraded` with [`Reason::HostUpdaterEnabled`], naming the
//!   node, the unit and the fix: mask the unit in the OS image.
//!
//! Why: bootc's own timer runs `bootc upgrade --apply`, which reboots the
//! node into what the operator staged (or, with nothing staged, into the
//! tag it was installed from) outside any reboot slot: undrained,
//! uncordoned, inside or outside a maintenance window. The operator never
//! masks the unit itself: every change to the OS flows through its image.
//!
//! A member already on the target or in a reboot slot is not refused
//! (there is nothing left to hold back). Once it reports none, it is told
//! like any other member.

use api::host_updaters::fix;
use api::{BootcNode, Reason};

use crate::model::Problem;

/// The updaters `bn`'s host reports on.
pub fn on(bn: Option<&BootcNode>) -> &[String] {
    bn.and_then(|bn| bn.status.as_ref())
        .map_or(&[], |s| s.host_updaters.as_slice())
}

/// The updaters that refuse `bn` the target: none when it runs the target
/// or holds a slot.
pub fn refusing(bn: Option<&BootcNode>, runs_target: bool, in_slot: bool) -> Vec<String> {
    match on(bn) {
        units if !runs_target && !in_slot => units.to_vec(),
        _ => Vec::new(),
    }
}

/// What one refused node is told, for the pool and `kubectl bootc why`.
pub fn message(node: &str, units: &[String]) -> String {
    format!(
        "node {node} runs its host's own automatic updater {}, which would reboot it outside any reboot slot: it is given no new image; {} (the operator never masks it itself)",
        units.join(", "),
        fix(units)
    )
}

/// The pool's problem for the refused members (`(node, units)`), if any.
pub fn problem(refused: &[(&str, &[String])]) -> Option<Problem> {
    let messages: Vec<String> = refused.iter().map(|(n, u)| message(n, u)).collect();
    (!messages.is_empty()).then(|| (Reason::HostUpdaterEnabled, messages.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::host_updaters::{BOOTC_TIMER, ZINCATI};

    #[test]
    fn names_the_node_the_unit_and_the_fix() {
        let units = vec![BOOTC_TIMER.to_owned(), ZINCATI.to_owned()];
        let m = message("n1", &units);
        assert!(
            m.starts_with(&format!(
                "node n1 runs its host's own automatic updater {BOOTC_TIMER}, {ZINCATI}"
            )),
            "{m}"
        );
        assert!(
            m.contains(&format!(
                "mask it in the OS image: `RUN systemctl mask {BOOTC_TIMER} {ZINCATI}` in its Containerfile"
            )),
            "{m}"
        );
        assert_eq!(problem(&[]), None);
        let (reason, _) = problem(&[("n1", &units)]).unwrap_or_else(|| panic!("no problem"));
        assert_eq!(reason, Reason::HostUpdaterEnabled);
    }
}
