//! Pacing: how often one pool is planned.
//!
//! Every change to a pool's nodes triggers its reconcile; in a large rollout
//! they arrive without pause, and planning after each would keep the
//! controller busy (taking the API server's CPU on a small control plane)
//! for little: changes that arrive while a reconcile runs, or while the pool
//! waits its turn, are planned together. So a pool's next reconcile starts,
//! after the last one ended, no sooner than the longer of two rests:
//!
//! - [`Pace::rest`] times its last planning (choosing the pool's objects
//!   from the caches, planning and ticking its phase clock: the part that
//!   costs CPU, not the writes, which wait on the API server), but at most
//!   [`Pace::longest`]. With a rest of 9, planning one pool takes at most a
//!   tenth of the controller's time however fast its events arrive; a pool
//!   planned in 10 ms reacts within 0.1 s, a small one (planned in 0.1 ms)
//!   is barely delayed.
//! - [`Pace::per_member`] for each of its members. Every reconcile reads
//!   every member, at about 5 µs each (planning, the metrics, the phase
//!   clock; measured at 20,000 nodes), so this rest keeps a large pool's
//!   reconciles within about a thirtieth of a core whatever they cost, and
//!   as far apart when they get cheaper (faster plans would otherwise buy
//!   more of them, not less CPU). It is not capped: at 20,000 members it
//!   rests 3 s, where the rollout waits on the API server's writes, not on
//!   the plans (with a cap of half a second there, the controller used 0.2
//!   cores per second of rollout).
//!
//! A 100-member pool rests 15 ms, a 5,000-member one 0.75 s. Safety does
//! not depend on it: every plan reads the whole state afresh.
//!
//! A slot is not held for the length of a rest, nor of a plan's writes:
//! every [`Pace::look_every`] of either, the pool looks at the members that
//! changed meanwhile and gives back the slots of those back on the target
//! (`reconcile::look`, with `rollout::releases`). A look reads the changed
//! slot holders alone, so a large pool's rest stays long and its slots are
//! given back within a look.
//!
//! Nor does a plan's writes hold its reconcile: a wave of 2,000 slots is
//! 2,000 cordons, several seconds of the API server's writes. A reconcile
//! makes its writes for [`Pace::reconcile_writes`], writes the pool's status
//! and ends; the rest of its writes are made while the pool rests (looks
//! between them, as above), and the rest is timed from the last of them, so
//! a large pool is planned no more often than before. They are cut short
//! (those not started are dropped, the next plan decides them again) when
//! the pool's spec changes or the fleet is stopped: a pause stops a wave's
//! cordons within a look.

use std::time::{Duration, Instant};

/// The pacing rule's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Rest after a reconcile, as a multiple of its duration.
    pub rest: u32,
    /// The shortest rest, per member of the pool.
    pub per_member: Duration,
    /// The longest rest the multiple of the planning's duration gives.
    pub longest: Duration,
    /// How often a resting pool looks at its changed members for slots to
    /// give back.
    pub look_every: Duration,
    /// How long a reconcile makes its plan's writes before it ends (and its
    /// status is written): the rest are made while the pool rests.
    pub reconcile_writes: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            rest: 9,
            per_member: Duration::from_micros(150),
            longest: Duration::from_millis(500),
            look_every: Duration::from_millis(250),
            reconcile_writes: Duration::from_millis(500),
        }
    }
}

impl Pace {
    /// How long to wait at `now` before reconciling a pool whose last
    /// reconcile planned `last.members` members in `last.took` and ended at
    /// `last.ended`.
    /// How long a pool whose last reconcile was `last` (None: never, in
    /// this controller's memory) should wait now.
    pub fn wait_after(self, last: Option<Last>) -> Duration {
        last.map_or(Duration::ZERO, |last| self.wait(last, Instant::now()))
    }

    pub fn wait(self, last: Last, now: Instant) -> Duration {
        let members = u32::try_from(last.members).unwrap_or(u32::MAX);
        let rest = last
            .took
            .saturating_mul(self.rest)
            .min(self.longest)
            .max(self.per_member.saturating_mul(members));
        rest.saturating_sub(now.saturating_duration_since(last.ended))
    }
}

/// A pool's last reconcile, as pacing sees it.
#[derive(Clone, Copy, Debug)]
pub struct Last {
    pub ended: Instant,
    /// Its planning's duration.
    pub took: Duration,
    pub members: usize,
}

impl Last {
    /// A reconcile that ends now, whose planning of `members` members took
    /// `took`.
    pub fn ended_now(took: Duration, members: usize) -> Self {
        Last {
            ended: Instant::now(),
            took,
            members,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_follows_the_last_reconcile() {
        let ms = Duration::from_millis;
        let pace = Pace::default();
        let ended = Instant::now();
        // (what, last planning took, members, time since it ended, wait)
        let rows = [
            ("a short reconcile barely waits", ms(2), 10, ms(0), ms(18)),
            ("nine times its duration", ms(40), 10, ms(0), ms(360)),
            ("less what already passed", ms(40), 10, ms(100), ms(260)),
            ("nothing once the rest is over", ms(40), 10, ms(400), ms(0)),
            ("at most the longest rest", ms(900), 10, ms(0), ms(500)),
            ("longest, less what passed", ms(900), 10, ms(300), ms(200)),
            ("a cheap plan of many members", ms(2), 1000, ms(0), ms(150)),
            ("members, less what passed", ms(2), 1000, ms(30), ms(120)),
            ("nine times, when longer", ms(20), 1000, ms(0), ms(180)),
            (
                "members, beyond the longest",
                ms(2),
                20_000,
                ms(0),
                ms(3000),
            ),
            (
                "the longest caps the multiple only",
                ms(900),
                20_000,
                ms(0),
                ms(3000),
            ),
            (
                "a large pool, less what passed",
                ms(100),
                20_000,
                ms(1000),
                ms(2000),
            ),
        ];
        for (what, took, members, since, want) in rows {
            let last = Last {
                ended,
                took,
                members,
            };
            assert_eq!(pace.wait(last, ended + since), want, "{what}");
        }
    }

    #[test]
    fn a_pool_never_reconciled_does_not_wait() {
        let pace = Pace::default();
        assert_eq!(pace.wait_after(None), Duration::ZERO);
        let last = Last::ended_now(Duration::from_millis(100), 3);
        assert!(pace.wait_after(Some(last)) > Duration::from_millis(400));
    }
}
