//! A node's record of its updates (`status.history`, newest first, at most
//! [`KEPT`]), written by its daemon in the status writes it makes anyway:
//!
//! * an image is added when the daemon first reports it staged, and gets
//!   its boot time (outcome `Updated`) when the daemon first reports it
//!   booted; an image booted without being staged here first (a rollback,
//!   or a boot another tool made) is added then, `RolledBack` when the
//!   record has it from before;
//! * the controller's marks on the BootcNode name what the daemon cannot
//!   see: a failed health gate (`Failed`, with the check) and a skip after
//!   a failed drain (`Skipped`, with why), on the entries of that digest;
//! * the image running when the record starts is its first entry, with no
//!   times.
//!
//! Nothing else changes the record, so it costs no status write of its own
//! but on a mark.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::{BootEntryStatus, BootcNode, NodeUpdate, UpdateOutcome};

/// How many updates a node keeps.
pub const KEPT: usize = 10;

/// The record after a report of `booted` and `staged` at `now`, with the
/// marks `bn` carries (see the module docs).
pub fn record(
    before: &[NodeUpdate],
    booted: Option<&BootEntryStatus>,
    staged: Option<&BootEntryStatus>,
    bn: &BootcNode,
    now: &Time,
) -> Vec<NodeUpdate> {
    let mut out = before.to_vec();
    if let Some(b) = booted.and_then(|b| Some((b, b.image.as_deref()?))) {
        booted_now(&mut out, b, now);
    }
    if let Some((s, image)) = staged.and_then(|s| Some((s, s.image.as_deref()?))) {
        let new = out
            .first()
            .is_none_or(|e| e.image != image || e.booted.is_some());
        let running = booted.is_some_and(|b| b.image.as_deref() == Some(image));
        if new && !running {
            out.insert(0, entry(s, image, Some(now.clone()), None));
        }
    }
    if let Some((digest, check)) = bn.health_failed() {
        mark(&mut out, digest, UpdateOutcome::Failed, check);
    }
    if let Some((digest, why)) = bn.skipped() {
        mark(&mut out, digest, UpdateOutcome::Skipped, why);
    }
    out.truncate(KEPT);
    out
}

/// The booted image: its boot time on the newest entry when it is that
/// image, staged and not yet booted; else a new entry unless it is what the
/// record says runs.
fn booted_now(out: &mut Vec<NodeUpdate>, (b, image): (&BootEntryStatus, &str), now: &Time) {
    let running = out
        .iter()
        .find(|e| e.booted.is_some() || e.staged.is_none());
    if running.is_some_and(|e| e.image == image) {
        return;
    }
    let ran_before = out.iter().skip(1).any(|e| e.image == image);
    let back_or_new = if ran_before {
        UpdateOutcome::RolledBack
    } else {
        UpdateOutcome::Updated
    };
    if let Some(newest) = out
        .first_mut()
        .filter(|e| e.image == image && e.booted.is_none())
    {
        newest.booted = Some(now.clone());
        newest.outcome = Some(back_or_new);
        return;
    }
    let (booted, outcome) = if out.is_empty() {
        (None, None)
    } else if out.iter().any(|e| e.image == image) {
        (Some(now.clone()), Some(UpdateOutcome::RolledBack))
    } else {
        (Some(now.clone()), Some(back_or_new))
    };
    let mut new = entry(b, image, None, booted);
    new.outcome = outcome;
    out.insert(0, new);
}

fn entry(
    e: &BootEntryStatus,
    image: &str,
    staged: Option<Time>,
    booted: Option<Time>,
) -> NodeUpdate {
    NodeUpdate {
        image: image.to_owned(),
        digest: e.image_digest.as_deref().map(str::to_owned),
        version: e.version.as_deref().map(str::to_owned),
        staged,
        booted,
        outcome: None,
        reason: None,
    }
}

/// The entries of `digest` (by their reference's digest or bootc's) get
/// `outcome` and `reason`; a skip only on entries never booted.
fn mark(out: &mut [NodeUpdate], digest: &str, outcome: UpdateOutcome, reason: &str) {
    for e in out.iter_mut() {
        let of_digest = crate::image_ref::digest_of(&e.image) == Some(digest)
            || e.digest.as_deref() == Some(digest);
        if of_digest && (outcome != UpdateOutcome::Skipped || e.booted.is_none()) {
            e.outcome = Some(outcome);
            e.reason = Some(reason.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{HEALTH_FAILED_ANNOTATION, HEALTH_FAILED_BECAUSE_ANNOTATION};
    use crate::test_support::BootcNodeBuilder;

    const A: &str = "r/os@sha256:aaaa";
    const B: &str = "r/os@sha256:bbbb";

    fn e(image: &str) -> BootEntryStatus {
        BootEntryStatus {
            image: Some(image.into()),
            ..BootEntryStatus::default()
        }
    }

    fn at(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).unwrap())
    }

    fn bn(marks: &[(&str, &str)]) -> BootcNode {
        marks
            .iter()
            .fold(BootcNodeBuilder::new("n").desired(B), |b, (k, v)| {
                b.annotation(k, v)
            })
            .build()
    }

    /// (image, staged, booted, outcome) of an entry.
    type Brief = (String, Option<i64>, Option<i64>, Option<UpdateOutcome>);

    fn brief(h: &[NodeUpdate]) -> Vec<Brief> {
        h.iter()
            .map(|u| {
                let s = |t: &Option<Time>| t.as_ref().map(|t| t.0.as_second());
                (u.image.clone(), s(&u.staged), s(&u.booted), u.outcome)
            })
            .collect()
    }

    #[test]
    fn a_node_records_what_it_stages_and_boots() {
        use UpdateOutcome::{Failed, RolledBack, Updated};
        let none = bn(&[]);
        // First seen running A.
        let h = record(&[], Some(&e(A)), None, &none, &at(1));
        assert_eq!(brief(&h), [(A.into(), None, None, None)]);
        // The same report again changes nothing.
        assert_eq!(record(&h, Some(&e(A)), None, &none, &at(2)), h);
        // B staged, then booted.
        let h = record(&h, Some(&e(A)), Some(&e(B)), &none, &at(10));
        assert_eq!(record(&h, Some(&e(A)), Some(&e(B)), &none, &at(11)), h);
        let h = record(&h, Some(&e(B)), None, &none, &at(20));
        assert_eq!(
            brief(&h),
            [
                (B.into(), Some(10), Some(20), Some(Updated)),
                (A.into(), None, None, None)
            ]
        );
        // B fails its health gate; A is booted back.
        let failed = bn(&[
            (HEALTH_FAILED_ANNOTATION, "sha256:bbbb"),
            (HEALTH_FAILED_BECAUSE_ANNOTATION, "pod gpu/driver Ready"),
        ]);
        let h = record(&h, Some(&e(B)), None, &failed, &at(30));
        assert_eq!(h[0].outcome, Some(Failed));
        assert_eq!(h[0].reason.as_deref(), Some("pod gpu/driver Ready"));
        let h = record(&h, Some(&e(A)), Some(&e(A)), &failed, &at(40));
        assert_eq!(
            brief(&h)[0],
            (A.into(), None, Some(40), Some(RolledBack)),
            "{h:?}"
        );
        assert_eq!(h[1].outcome, Some(Failed));
        // Booted back through staging, as the controller's rollback does.
        let h2 = record(&h[1..], Some(&e(B)), Some(&e(A)), &failed, &at(50));
        let h2 = record(&h2, Some(&e(A)), None, &failed, &at(60));
        assert_eq!(
            brief(&h2)[0],
            (A.into(), Some(50), Some(60), Some(RolledBack))
        );
        // At most ten.
        let mut h = Vec::new();
        for i in 0..12 {
            h = record(
                &h,
                Some(&e(&format!("r/os@sha256:{i}"))),
                None,
                &none,
                &at(i),
            );
        }
        assert_eq!(h.len(), KEPT);
    }
}
