//! Canary batches (`spec.rollout.batches`): the rollout goes in steps, each
//! a limit on how many members may have been updated so far.
//!
//! * **Limits.** Each step is a number of nodes or a percentage of the
//!   members, rounded up (at least 1, at most every member); a step below
//!   the one before is an invalid spec, naming the field. After the last
//!   step the rest follow, with no limit.
//! * **Taken.** A member counts against the step's limit once it runs the
//!   target or holds a reboot slot: no new slot is handed out beyond the
//!   limit (staging goes on).
//! * **Soak.** Once as many members run the target, out of their slots, as
//!   the step allows, the rollout waits `soakSeconds` from that moment (the
//!   pool's `status.batch.soakingSince`, so a controller restart loses
//!   nothing). Then, if at least `successThreshold` percent (default 100)
//!   of the updated members are healthy (Node Ready, BootcNode not
//!   Degraded), the next step is in force; otherwise no new slot is handed
//!   out and the pool is `Degraded/BatchFailed`, naming the nodes, until
//!   enough of them are healthy again or the pool gets a new image.
//! * A new target starts again at the first step.

use std::time::Duration;

use api::{BatchStatus, RolloutSpec};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The field, as errors name it.
pub const BATCHES_FIELD: &str = "spec.rollout.batches";

/// Each step's limit for `members` nodes (see the module docs).
pub fn limits(batches: &[IntOrString], members: usize) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::with_capacity(batches.len());
    for (i, step) in batches.iter().enumerate() {
        let field = format!("{BATCHES_FIELD}[{i}]");
        let limit = match step {
            IntOrString::Int(n) => usize::try_from(*n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{field} must be at least 1, got {n}"))?,
            IntOrString::String(s) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| (1..=100).contains(p))
                .map(|p| (members * p).div_ceil(100).max(1))
                .ok_or_else(|| format!("{field} {s:?} is neither an integer nor 1%-100%"))?,
        }
        .min(members);
        if let Some(before) = out.last().filter(|before| limit < **before) {
            return Err(format!(
                "{field} ({limit} nodes) is below the step before ({before} nodes)"
            ));
        }
        out.push(limit);
    }
    Ok(out)
}

/// One member as the steps see it.
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    pub name: &'a str,
    /// Runs the target, out of its slot.
    pub updated: bool,
    pub in_slot: bool,
    /// Node Ready, BootcNode not Degraded.
    pub healthy: bool,
}

/// Where the rollout stands in its steps, for this plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batching {
    /// How many more members may take a slot (None: no limit).
    pub room: Option<usize>,
    /// What the pool records (`status.batch`).
    pub status: Option<BatchStatus>,
    /// While a step soaks: how long it has left.
    pub soak_left: Option<Duration>,
    /// At a soak's end below the threshold: the updated members not healthy.
    pub failing: Vec<String>,
    /// The step's total count, for messages.
    pub steps: usize,
    /// `successThreshold` (percent).
    pub threshold: usize,
}

impl Batching {
    /// The UpToDate message's part (None: nothing to say).
    pub fn message(&self) -> Option<String> {
        let s = self.status.as_ref()?;
        if usize::try_from(s.step).is_ok_and(|step| step >= self.steps) {
            return Some(format!(
                "canary steps done ({BATCHES_FIELD}), the rest follow"
            ));
        }
        let step = format!(
            "canary step {} of {} ({} nodes)",
            s.step + 1,
            self.steps,
            s.limit
        );
        Some(match self.soak_left {
            Some(left) => format!(
                "{step}: soaking, {}s left, {}/{} updated nodes healthy",
                left.as_secs(),
                s.healthy,
                s.updated
            ),
            None => step,
        })
    }

    /// The Degraded problem of a step that failed its soak.
    pub fn failure(&self) -> Option<String> {
        let s = self.status.as_ref().filter(|_| !self.failing.is_empty())?;
        Some(format!(
            "canary step {} of {} failed ({BATCHES_FIELD}): {}/{} updated nodes healthy, below successThreshold {}%; no new reboot slot until enough are healthy again or a new image: not healthy: {}",
            s.step + 1,
            self.steps,
            s.healthy,
            s.updated,
            self.threshold,
            self.failing.join(", ")
        ))
    }
}

/// The step in force and the room it leaves (see the module docs):
/// `limits` from [`limits`], `previous` the pool's `status.batch`.
pub fn step(
    limits: &[usize],
    spec: &RolloutSpec,
    previous: Option<&BatchStatus>,
    digest: &str,
    members: &[Member<'_>],
    now: Timestamp,
) -> Batching {
    if limits.is_empty() {
        return Batching::default();
    }
    let previous = previous.filter(|b| b.digest == digest);
    let mut at = previous
        .and_then(|b| usize::try_from(b.step).ok())
        .unwrap_or(0)
        .min(limits.len());
    let updated = members.iter().filter(|m| m.updated).count();
    let taken = updated + members.iter().filter(|m| m.in_slot).count();
    let healthy = members.iter().filter(|m| m.updated && m.healthy).count();
    let mut soaking_since = previous
        .filter(|b| usize::try_from(b.step) == Ok(at))
        .and_then(|b| b.soaking_since.as_ref())
        .map(|t| t.0);
    let threshold = usize::try_from(spec.success_threshold.unwrap_or(100)).unwrap_or(100);
    let mut out = Batching {
        steps: limits.len(),
        threshold,
        ..Batching::default()
    };
    if at < limits.len() && updated >= limits[at] {
        let since = *soaking_since.get_or_insert(now);
        let soaked = now.duration_since(since).unsigned_abs();
        let soak = Duration::from_secs(u64::try_from(spec.soak_seconds).unwrap_or(0));
        if soaked < soak {
            out.soak_left = Some(soak - soaked);
        } else if healthy * 100 >= threshold * updated {
            at += 1;
            soaking_since = None;
        } else {
            out.failing = members
                .iter()
                .filter(|m| m.updated && !m.healthy)
                .map(|m| m.name.to_owned())
                .collect();
        }
    }
    let limit = limits.get(at).copied();
    let held = out.soak_left.is_some() || !out.failing.is_empty();
    out.room = match limit {
        _ if held => Some(0),
        Some(limit) => Some(limit.saturating_sub(taken)),
        None => None,
    };
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    out.status = Some(BatchStatus {
        digest: digest.to_owned(),
        step: count(at),
        limit: count(limit.unwrap_or(members.len())),
        soaking_since: soaking_since.map(Time),
        healthy: count(healthy),
        updated: count(updated),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(n: i32) -> IntOrString {
        IntOrString::Int(n)
    }

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn limits_of_the_pool() {
        // (what, steps, members, limits or error has)
        type Row = (
            &'static str,
            Vec<IntOrString>,
            usize,
            Result<Vec<usize>, &'static str>,
        );
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("counts and percentages", vec![int(1), pct("50%"), pct("100%")], 10, Ok(vec![1, 5, 10])),
            ("rounded up, capped", vec![pct("10%"), int(20)], 5, Ok(vec![1, 5])),
            ("a step below", vec![int(3), int(2)], 10, Err("spec.rollout.batches[1] (2 nodes) is below the step before (3 nodes)")),
            ("zero", vec![int(0)], 10, Err("spec.rollout.batches[0] must be at least 1, got 0")),
            ("not a percentage", vec![pct("half")], 10, Err("spec.rollout.batches[0] \"half\" is neither")),
        ];
        for (what, steps, members, want) in rows {
            match (limits(&steps, members), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{what}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{what}: {got}"),
                (got, want) => panic!("{what}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn steps_soak_and_hold() {
        let now = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(10_000);
        let ago = |s: i64| Some(Time(now - jiff::SignedDuration::from_secs(s)));
        let spec = RolloutSpec {
            soak_seconds: 60,
            success_threshold: Some(50),
            ..RolloutSpec::default()
        };
        let names = ["a", "b", "c", "d"];
        // (updated, in slot, healthy) per member
        let members = |m: [(bool, bool, bool); 4]| -> Vec<Member<'static>> {
            names
                .iter()
                .zip(m)
                .map(|(name, (updated, in_slot, healthy))| Member {
                    name,
                    updated,
                    in_slot,
                    healthy,
                })
                .collect()
        };
        let at = |step: i32, soaking: Option<Time>| BatchStatus {
            digest: "d".into(),
            step,
            soaking_since: soaking,
            ..BatchStatus::default()
        };
        let none = (false, false, true);
        let up = (true, false, true);
        let sick = (true, false, false);
        let slot = (false, true, true);
        // (what, previous, members, room, step after, soak left, failing)
        type Flags = [(bool, bool, bool); 4];
        type Row = (
            &'static str,
            Option<BatchStatus>,
            Flags,
            Option<usize>,
            i32,
            Option<u64>,
            Vec<&'static str>,
        );
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            ("the first step", None, [none; 4], Some(1), 0, None, vec![]),
            ("the first in its slot", None, [slot, none, none, none], Some(0), 0, None, vec![]),
            ("the first done: the soak starts", None, [up, none, none, none], Some(0), 0, Some(60), vec![]),
            ("soaking", Some(at(0, ago(40))), [up, none, none, none], Some(0), 0, Some(20), vec![]),
            ("soaked: the next step", Some(at(0, ago(60))), [up, none, none, none], Some(1), 1, None, vec![]),
            ("soaked, not healthy", Some(at(0, ago(60))), [sick, none, none, none], Some(0), 0, None, vec!["a"]),
            ("step 2 soaked, half healthy is enough", Some(at(1, ago(90))), [sick, up, none, none], None, 2, None, vec![]),
            ("another target starts again", Some(BatchStatus { digest: "old".into(), ..at(1, ago(90)) }),
                [none; 4], Some(1), 0, None, vec![]),
        ];
        for (what, previous, m, room, step_after, left, failing) in rows {
            let got = step(&[1, 2], &spec, previous.as_ref(), "d", &members(m), now);
            assert_eq!(got.room, room, "{what}");
            assert_eq!(
                got.status.as_ref().map(|s| s.step),
                Some(step_after),
                "{what}"
            );
            assert_eq!(got.soak_left.map(|d| d.as_secs()), left, "{what}");
            assert_eq!(got.failing, failing, "{what}");
        }
    }
}
