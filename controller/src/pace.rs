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
//! after the last reconcile ended, and never more than [`Pace::longest`]
//! after. With a rest of 9, planning one pool takes at most a tenth of the
//! controller's time however fast its events arrive, so the controller's
//! CPU follows the rollout's length rather than its event rate; a pool
//! planned in 10 ms reacts within 0.1 s, a small one (planned in 0.1 ms)
//! is barely delayed, and none waits more than half a second (a second was
//! tried: the 5,000-node benchmark's rollout took 1.43 times its ideal
//! instead of 1.00, since each wave needs several rounds of planning). Safety does not depend on it: every
//! plan reads the whole state afresh.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The pacing rule's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    /// Rest after a reconcile, as a multiple of its duration.
    pub rest: u32,
    /// The longest rest.
    pub longest: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            rest: 9,
            longest: Duration::from_millis(500),
        }
    }
}

impl Pace {
    /// How long to wait at `now` before reconciling a pool whose last
    /// reconcile took `took` and ended at `ended`.
    pub fn wait(self, ended: Instant, took: Duration, now: Instant) -> Duration {
        let rest = took.saturating_mul(self.rest).min(self.longest);
        rest.saturating_sub(now.saturating_duration_since(ended))
    }
}

/// The last reconcile of each pool, for [`Pace::wait`].
#[derive(Debug, Default)]
pub struct Pacer {
    pace: Pace,
    last: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Pacer {
    pub fn new(pace: Pace) -> Self {
        Pacer {
            pace,
            last: Mutex::default(),
        }
    }

    /// How long the pool's next reconcile should wait now.
    pub fn wait(&self, pool: &str) -> Duration {
        let last = self.last.lock().ok().and_then(|l| l.get(pool).copied());
        last.map_or(Duration::ZERO, |(ended, took)| {
            self.pace.wait(ended, took, Instant::now())
        })
    }

    /// Records a reconcile of `pool` that ends now, whose planning took `took`.
    pub fn done(&self, pool: &str, took: Duration) {
        if let Ok(mut last) = self.last.lock() {
            last.insert(pool.to_owned(), (Instant::now(), took));
        }
    }

    pub fn forget(&self, pool: &str) {
        if let Ok(mut last) = self.last.lock() {
            last.remove(pool);
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
        // (what, last reconcile took, time since it ended, wait)
        let rows = [
            ("a short reconcile barely waits", ms(2), ms(0), ms(18)),
            ("nine times its duration", ms(40), ms(0), ms(360)),
            ("less what already passed", ms(40), ms(100), ms(260)),
            ("nothing once the rest is over", ms(40), ms(400), ms(0)),
            ("at most the longest rest", ms(900), ms(0), ms(500)),
            (
                "the longest rest, less what passed",
                ms(900),
                ms(300),
                ms(200),
            ),
        ];
        for (what, took, since, want) in rows {
            assert_eq!(pace.wait(ended, took, ended + since), want, "{what}");
        }
    }

    #[test]
    fn an_unknown_pool_does_not_wait() {
        let pacer = Pacer::new(Pace::default());
        assert_eq!(pacer.wait("new"), Duration::ZERO);
        pacer.done("p", Duration::from_millis(100));
        assert!(pacer.wait("p") > Duration::from_millis(400));
        pacer.forget("p");
        assert_eq!(pacer.wait("p"), Duration::ZERO);
    }
}
