//! The pool's record of its rollouts (`status.rollouts`, newest first, at
//! most [`KEPT`]), which outlives the Events:
//!
//! * a rollout starts when the pool's target is not the newest record's and
//!   some members do not run it; an unended record before it is
//!   `Superseded`;
//! * it is `Completed` once every member runs it, and `Failed` once a node
//!   failed its health gate on it ([`crate::reboot::health_gate`]), with the members on
//!   it then and the failed ones.
//!
//! Only starts and ends change the record: a rollout's progress is in the
//! status's counts, so the record costs no status write of its own.

use api::{RolloutOutcome, RolloutRecord};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::Target;

/// How many rollouts a pool keeps.
pub const KEPT: usize = 10;

/// What the plan saw of the target's rollout.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    pub target: &'a Target,
    pub members: usize,
    pub updated: usize,
    /// A member failed its health gate on the target.
    pub failed: bool,
    pub now: Timestamp,
}

/// The record after this plan (see the module docs).
pub fn record(before: &[RolloutRecord], seen: Seen<'_>) -> Vec<RolloutRecord> {
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let now = Time(seen.now);
    let mut out = before.to_vec();
    let newest_is_target = out.first().is_some_and(|r| r.digest == seen.target.digest);
    if !newest_is_target && seen.updated < seen.members {
        if let Some(open) = out.first_mut().filter(|r| r.ended.is_none()) {
            open.ended = Some(now.clone());
            open.outcome = Some(RolloutOutcome::Superseded);
        }
        out.insert(
            0,
            RolloutRecord {
                digest: seen.target.digest.clone(),
                image: seen.target.image.clone(),
                platform_digests: seen.target.platform_digests.clone(),
                started: now.clone(),
                nodes: count(seen.members - seen.updated),
                ended: None,
                outcome: None,
                updated: 0,
                failed: 0,
            },
        );
        out.truncate(KEPT);
    }
    if let Some(open) = out
        .first_mut()
        .filter(|r| r.ended.is_none() && r.digest == seen.target.digest)
    {
        let outcome = if seen.failed {
            Some(RolloutOutcome::Failed)
        } else {
            (seen.updated == seen.members).then_some(RolloutOutcome::Completed)
        };
        if let Some(outcome) = outcome {
            open.ended = Some(now);
            open.outcome = Some(outcome);
            open.updated = count(seen.updated);
            open.failed = i32::from(seen.failed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(d: &str) -> Target {
        Target {
            digest: d.into(),
            image: format!("r@{d}"),
            platform_digests: Vec::new(),
            kubelet: None,
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(s)
    }

    fn seen(target: &Target, updated: usize, failed: bool, now: i64) -> Seen<'_> {
        Seen {
            target,
            members: 3,
            updated,
            failed,
            now: at(now),
        }
    }

    /// (digest, started, ended, outcome, updated)
    type Brief = (String, i64, Option<i64>, Option<RolloutOutcome>, i32);

    fn brief(r: &[RolloutRecord]) -> Vec<Brief> {
        r.iter()
            .map(|r| {
                (
                    r.digest.clone(),
                    r.started.0.as_second(),
                    r.ended.as_ref().map(|e| e.0.as_second()),
                    r.outcome,
                    r.updated,
                )
            })
            .collect()
    }

    #[test]
    fn starts_and_ends() {
        use RolloutOutcome::{Completed, Failed, Superseded};
        let (a, b) = (t("a"), t("b"));
        let started = record(&[], seen(&a, 0, false, 10));
        assert_eq!(brief(&started), [("a".into(), 10, None, None, 0)]);
        // Progress changes nothing.
        assert_eq!(record(&started, seen(&a, 2, false, 20)), started);
        let done = record(&started, seen(&a, 3, false, 30));
        assert_eq!(
            brief(&done),
            [("a".into(), 10, Some(30), Some(Completed), 3)]
        );
        // Up to date when first seen: nothing rolled out.
        assert!(record(&[], seen(&a, 3, false, 10)).is_empty());
        // Another image mid-rollout supersedes it.
        let next = record(&started, seen(&b, 0, false, 40));
        assert_eq!(
            brief(&next),
            [
                ("b".into(), 40, None, None, 0),
                ("a".into(), 10, Some(40), Some(Superseded), 0)
            ]
        );
        let failed = record(&next, seen(&b, 1, true, 50));
        assert_eq!(
            brief(&failed)[0],
            ("b".into(), 40, Some(50), Some(Failed), 1)
        );
        // At most ten kept.
        let mut many = Vec::new();
        for i in 0..12 {
            let target = t(&format!("d{i}"));
            many = record(&many, seen(&target, 0, false, i));
        }
        assert_eq!(many.len(), KEPT);
        assert_eq!(many[0].digest, "d11");
    }
}
