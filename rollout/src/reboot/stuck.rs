//! Stuck is never silent: every phase a node of a pool can wait in has a
//! name and a deadline, and a node past its phase's deadline is named on the
//! pool (Degraded, reason `NodeStuck`: the node, the phase, for how long and
//! the next step) and by one Warning Event. Pure; the planner calls it.
//!
//! | Phase | Deadline | Since | What the controller does | Next step for the admin |
//! |---|---|---|---|---|
//! | staging | 30 min | first seen | nothing: the node holds no slot, others go on | the BootcNode's Degraded message (registry, disk) |
//! | draining | `drainTimeoutSeconds` | the drain | `DrainTimedOut`, retried, slot kept | the blocking pods and their budgets |
//! | approved, not rebooting | 10 min | first seen | slot kept | the daemon's log on the node |
//! | rebooting (NotReady) | 10 min | NotReady (see below) | slot kept; counts for the two-unhealthy halt | the node's console |
//! | back, not on the target (Degraded) | 5 min | first seen | slot kept; counts for the halt | point the pool at another image |
//! | daemon silent | 5 min | first seen | nothing new is asked of the node | the daemon pod on the node |
//!
//! A pool may set its own (`spec.rollout.deadlines`, in seconds, taken as
//! given); the others are the table's, scaled as a whole with the
//! controller's `--stuck-deadline-scale` ([`Deadlines`]; 1 keeps the
//! table's).
//!
//! A reboot is timed from the earlier of the Node's Ready transition and
//! the controller's first sight of the phase: about 50 s into a silent
//! reboot the node lifecycle controller turns Ready from False to Unknown,
//! a new transition that would otherwise start the clock again.
//!
//! "First seen" phases are timed by the controller's memory (their objects
//! carry no timestamp of the phase): a restarted controller starts their
//! clocks again, so it reports late, never early.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

/// A phase a node can wait in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Staging,
    ApprovedNotRebooting,
    Rebooting,
    BackNotOnTarget,
    DaemonSilent,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Staging,
        Phase::ApprovedNotRebooting,
        Phase::Rebooting,
        Phase::BackNotOnTarget,
        Phase::DaemonSilent,
    ];

    /// Its place in [`Phase::ALL`].
    fn index(self) -> usize {
        match self {
            Phase::Staging => 0,
            Phase::ApprovedNotRebooting => 1,
            Phase::Rebooting => 2,
            Phase::BackNotOnTarget => 3,
            Phase::DaemonSilent => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Staging => "staging",
            Phase::ApprovedNotRebooting => "approved but not rebooting",
            Phase::Rebooting => "rebooting (NotReady)",
            Phase::BackNotOnTarget => "back but not on the target",
            Phase::DaemonSilent => "daemon silent (no status for its spec)",
        }
    }

    /// The default deadlines, defined here and nowhere else.
    pub fn deadline(self) -> Duration {
        match self {
            Phase::Staging => Duration::from_secs(30 * 60),
            Phase::ApprovedNotRebooting | Phase::Rebooting => Duration::from_secs(10 * 60),
            Phase::BackNotOnTarget | Phase::DaemonSilent => Duration::from_secs(5 * 60),
        }
    }

    /// What to look at next (the table in the module docs).
    pub fn next_step(self) -> &'static str {
        match self {
            Phase::Staging => "see the BootcNode's Degraded message (registry, disk)",
            Phase::ApprovedNotRebooting => "the slot is kept; see the bootc-daemon log on the node",
            Phase::Rebooting => {
                "the slot is kept and counts toward the two-unhealthy halt; check the node's console"
            }
            Phase::BackNotOnTarget => {
                "the slot is kept; point the pool at another image (roll back or forward)"
            }
            Phase::DaemonSilent => "check that the bootc-daemon pod runs on the node",
        }
    }

    /// Does an object carry this phase's start too (the Node's Ready
    /// transition), beside the controller's first sight of it?
    pub fn on_the_node(self) -> bool {
        self == Phase::Rebooting
    }
}

/// The deadlines in force: a pool's own (`spec.rollout.deadlines`), else
/// the table's times a scale (the controller's `--stuck-deadline-scale`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deadlines {
    scale: f64,
    /// The pool's own, by [`Phase::index`].
    pool: [Option<Duration>; 5],
}

/// A scale that is not a positive finite number.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("stuck deadline scale {0}: must be a positive finite number (1 keeps the defaults)")]
pub struct BadScale(pub f64);

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            scale: Deadlines::DEFAULT_SCALE,
            pool: [None; 5],
        }
    }
}

impl Deadlines {
    /// The scale that keeps the table's deadlines (the controller's
    /// `--stuck-deadline-scale` default).
    pub const DEFAULT_SCALE: f64 = 1.0;

    pub fn scaled(scale: f64) -> Result<Self, BadScale> {
        if scale.is_finite() && scale > 0.0 {
            Ok(Deadlines {
                scale,
                pool: [None; 5],
            })
        } else {
            Err(BadScale(scale))
        }
    }

    /// These deadlines with a pool's own in place of the defaults, taken
    /// as given (not scaled).
    pub fn for_pool(self, set: Option<&api::PhaseDeadlines>) -> Self {
        let Some(set) = set else { return self };
        let seconds = |s: Option<i64>| {
            s.and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs)
        };
        let mut pool = [None; 5];
        for phase in Phase::ALL {
            pool[phase.index()] = seconds(match phase {
                Phase::Staging => set.staging_seconds,
                Phase::ApprovedNotRebooting => set.approved_seconds,
                Phase::Rebooting => set.rebooting_seconds,
                Phase::BackNotOnTarget => set.not_on_target_seconds,
                Phase::DaemonSilent => set.daemon_silent_seconds,
            });
        }
        Deadlines { pool, ..self }
    }

    /// The deadline of `phase`: the pool's own, or the default scaled (at
    /// least one second).
    pub fn of(self, phase: Phase) -> Duration {
        self.pool[phase.index()].unwrap_or_else(|| {
            phase
                .deadline()
                .mul_f64(self.scale)
                .max(Duration::from_secs(1))
        })
    }
}

/// What the planner knows of one member, for [`phase_of`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    pub in_slot: bool,
    pub approved: bool,
    pub ready: bool,
    pub runs_target: bool,
    pub degraded: bool,
    /// The daemon reports Staging.
    pub staging: bool,
    /// The daemon's last report is for an older spec.
    pub daemon_behind: bool,
}

/// The phase a member waits in, if any.
pub fn phase_of(f: Facts) -> Option<Phase> {
    if f.in_slot && !f.ready {
        return Some(Phase::Rebooting);
    }
    if f.runs_target {
        return None;
    }
    if f.daemon_behind {
        return Some(Phase::DaemonSilent);
    }
    if f.in_slot && f.degraded {
        return Some(Phase::BackNotOnTarget);
    }
    if f.in_slot && f.approved {
        return Some(Phase::ApprovedNotRebooting);
    }
    f.staging.then_some(Phase::Staging)
}

/// A node past its phase's deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    pub node: String,
    pub phase: Phase,
    pub since: Duration,
    /// The deadline it passed.
    pub deadline: Duration,
}

impl Stuck {
    /// "node n2 rebooting (NotReady) for 12m (deadline 10m): <next step>".
    pub fn message(&self) -> String {
        format!(
            "node {} {} for {} (deadline {}): {}",
            self.node,
            self.phase.name(),
            minutes(self.since),
            minutes(self.deadline),
            self.phase.next_step()
        )
    }

    /// The part of [`Stuck::message`] that names the node and its phase
    /// (to tell whether the pool already reports it).
    pub fn key(&self) -> String {
        format!("node {} {} for ", self.node, self.phase.name())
    }
}

fn minutes(d: Duration) -> String {
    let m = d.as_secs() / 60;
    if m >= 1 {
        format!("{m}m")
    } else {
        format!("{}s", d.as_secs())
    }
}

/// Judges one node: stuck now, or when to look again.
pub fn assess(
    deadlines: Deadlines,
    node: &str,
    phase: Phase,
    since: Timestamp,
    now: Timestamp,
) -> Result<Stuck, Duration> {
    let elapsed = now.duration_since(since).unsigned_abs();
    let deadline = deadlines.of(phase);
    if elapsed >= deadline {
        Ok(Stuck {
            node: node.to_owned(),
            phase,
            since: elapsed,
            deadline,
        })
    } else {
        Err(deadline.saturating_sub(elapsed))
    }
}

/// The controller's memory of when each node of a pool entered its clocked
/// phase: node -> (phase, since).
pub type Clock = BTreeMap<String, (Phase, Timestamp)>;

/// The clock after a plan that saw `phases` at `now`: a phase seen again
/// keeps its start, a new one starts now, a node in none is forgotten.
/// (Both are in name order: the clock is walked along, not searched.)
pub fn tick(clock: &Clock, phases: BTreeMap<String, Phase>, now: Timestamp) -> Clock {
    let mut kept = clock.iter().peekable();
    phases
        .into_iter()
        .map(|(node, phase)| {
            while kept.next_if(|(n, _)| **n < node).is_some() {}
            let since = match kept.peek() {
                Some((n, (seen, since))) if **n == node && *seen == phase => *since,
                _ => now,
            };
            (node, (phase, since))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_pools_own_deadlines_replace_the_defaults_unscaled() {
        let tests = Deadlines::scaled(0.01).unwrap();
        let set = api::PhaseDeadlines {
            staging_seconds: Some(90),
            daemon_silent_seconds: Some(7),
            ..Default::default()
        };
        let pool = tests.for_pool(Some(&set));
        let rows = [
            (Phase::Staging, 90),
            (Phase::DaemonSilent, 7),
            // Unset: the default, scaled.
            (Phase::Rebooting, 6),
            (Phase::ApprovedNotRebooting, 6),
            (Phase::BackNotOnTarget, 3),
        ];
        for (phase, seconds) in rows {
            assert_eq!(pool.of(phase), Duration::from_secs(seconds), "{phase:?}");
        }
        assert_eq!(tests.for_pool(None), tests, "no deadlines set");
        let nonsense = api::PhaseDeadlines {
            staging_seconds: Some(0),
            ..Default::default()
        };
        let kept = tests.for_pool(Some(&nonsense));
        assert_eq!(
            kept.of(Phase::Staging),
            Duration::from_secs(18),
            "0: the default"
        );
    }

    #[test]
    fn phase_table() {
        let base = Facts {
            ready: true,
            ..Facts::default()
        };
        let slot = Facts {
            in_slot: true,
            approved: true,
            ..base
        };
        let rows: Vec<(&str, Facts, Option<Phase>)> = vec![
            (
                "idle on target",
                Facts {
                    runs_target: true,
                    ..base
                },
                None,
            ),
            ("waiting for a slot", base, None),
            (
                "staging",
                Facts {
                    staging: true,
                    ..base
                },
                Some(Phase::Staging),
            ),
            (
                "approved and down",
                Facts {
                    ready: false,
                    ..slot
                },
                Some(Phase::Rebooting),
            ),
            (
                "on the target, NotReady in its slot",
                Facts {
                    ready: false,
                    runs_target: true,
                    ..slot
                },
                Some(Phase::Rebooting),
            ),
            (
                "approved, still up",
                slot,
                Some(Phase::ApprovedNotRebooting),
            ),
            (
                "approved, never answered",
                Facts {
                    daemon_behind: true,
                    ..slot
                },
                Some(Phase::DaemonSilent),
            ),
            (
                "rebooted onto the wrong image",
                Facts {
                    degraded: true,
                    ..slot
                },
                Some(Phase::BackNotOnTarget),
            ),
            (
                "released",
                Facts {
                    runs_target: true,
                    ..slot
                },
                None,
            ),
        ];
        for (name, facts, want) in rows {
            assert_eq!(phase_of(facts), want, "{name}");
        }
    }

    #[test]
    fn deadlines_and_the_clock() {
        let t0 = Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(1000);
        let later = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        assert_eq!(
            assess(Deadlines::default(), "n", Phase::Rebooting, t0, later(60)),
            Err(Duration::from_secs(540))
        );
        let stuck = assess(Deadlines::default(), "n", Phase::Rebooting, t0, later(720)).unwrap();
        assert_eq!(
            stuck.message(),
            "node n rebooting (NotReady) for 12m (deadline 10m): the slot is kept and counts toward the two-unhealthy halt; check the node's console"
        );
        assert!(stuck.message().starts_with(&stuck.key()));
        let fast = Deadlines::scaled(0.01).unwrap();
        assert_eq!(fast.of(Phase::Rebooting), Duration::from_secs(6));
        assert_eq!(
            assess(fast, "n", Phase::Rebooting, t0, later(7))
                .unwrap()
                .message(),
            "node n rebooting (NotReady) for 7s (deadline 6s): the slot is kept and counts toward the two-unhealthy halt; check the node's console"
        );
        assert_eq!(Deadlines::scaled(0.0), Err(BadScale(0.0)));
        assert!(Deadlines::scaled(f64::NAN).is_err());

        let phases = BTreeMap::from([
            ("a".to_owned(), Phase::Staging),
            ("b".to_owned(), Phase::Rebooting),
        ]);
        let c1 = tick(&Clock::new(), phases.clone(), t0);
        assert_eq!(c1.get("a"), Some(&(Phase::Staging, t0)));
        assert_eq!(
            c1.get("b"),
            Some(&(Phase::Rebooting, t0)),
            "first sight, beside the Node's Ready transition"
        );
        let c2 = tick(&c1, phases.clone(), later(10));
        assert_eq!(c2.get("a"), Some(&(Phase::Staging, t0)), "kept");
        let next = BTreeMap::from([("a".to_owned(), Phase::DaemonSilent)]);
        assert_eq!(
            tick(&c2, next.clone(), later(20)).get("a"),
            Some(&(Phase::DaemonSilent, later(20)))
        );
        assert!(tick(&c2, BTreeMap::new(), later(20)).is_empty());
        // Several nodes: the clock is walked in name order past the ones gone.
        let clock = Clock::from([
            ("a".to_owned(), (Phase::Staging, t0)),
            ("c".to_owned(), (Phase::Staging, t0)),
            ("e".to_owned(), (Phase::Staging, t0)),
        ]);
        let seen = BTreeMap::from([
            ("b".to_owned(), Phase::Staging),
            ("c".to_owned(), Phase::Staging),
            ("d".to_owned(), Phase::Staging),
            ("e".to_owned(), Phase::DaemonSilent),
        ]);
        let want = Clock::from([
            ("b".to_owned(), (Phase::Staging, later(30))),
            ("c".to_owned(), (Phase::Staging, t0)),
            ("d".to_owned(), (Phase::Staging, later(30))),
            ("e".to_owned(), (Phase::DaemonSilent, later(30))),
        ]);
        assert_eq!(tick(&clock, seen, later(30)), want);
    }
}
