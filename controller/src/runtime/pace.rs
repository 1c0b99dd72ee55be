//! Pacing: how often one pool is planned.
//!
//! Every change to a pool's nodes triggers its reconcile; in a large rollout
//! they arrive without pause, and planning after each would keep the
//! controller busy (taking the API server's CPU on a small control plane)
//! for little: changes that arrive while a reconcile runs, or while the pool
//! waits its turn, are planned together. So a pool's next reconcile starts
//! no sooner than [`Pace::rest`] times its last planning (choosing the
//! pool's objects from the caches, planning and ticking its phase clock:
//! the part that costs CPU, not the writes, which wait on the API server)
//! after the last reconcile ended, nor sooner than [`Pace::per_member`]
//! for each of its members, and never more than [`Pace::longest`] after.
//! With a rest of 9, planning one pool takes at most a tenth of the
//! controller's time however fast its events arrive, so the controller's
//! CPU follows the rollout's length rather than its event rate; a pool
//! planned in 10 ms reacts within 0.1 s, a small one (planned in 0.1 ms)
//! is barely delayed, and none waits more than half a second (a second was
//! tried: the 5,000-node benchmark's rollout took 1.43 times its ideal
//! instead of 1.00, since each wave needs several rounds of planning).
//! The rest per member keeps a large pool's plans as far apart when they
//! get cheaper: every plan still reads every member, so making plans
//! faster would otherwise buy more of them, not less CPU (a 5,000-node
//! pool rests the longest half second either way; a 100-node one 10 ms).
//! Safety does not depend on it: every plan reads the whole state afresh.

use std::time::{Duration, Instant};

/// The pacing rule's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Rest after a reconcile, as a multiple of its duration.
    pub rest: u32,
    /// The shortest rest, per member of the pool.
    pub per_member: Duration,
    /// The longest rest.
    pub longest: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            rest: 9,
            per_member: Duration::from_micros(100),
            longest: Duration::from_millis(500),
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
            .max(self.per_member.saturating_mul(members))
            .min(self.longest);
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
            ("a cheap plan of many members", ms(2), 1000, ms(0), ms(100)),
            ("members, less what passed", ms(2), 1000, ms(30), ms(70)),
            ("nine times, when longer", ms(20), 1000, ms(0), ms(180)),
            (
                "members, at most the longest",
                ms(2),
                20_000,
                ms(0),
                ms(500),
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
