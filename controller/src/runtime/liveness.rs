//! What `/healthz` means: **the reconcile loop advances.** It answers 503
//! (and the kubelet restarts the controller) while some reconcile has been
//! running for longer than [`WEDGED_AFTER`] (`--wedged-after-seconds`), and
//! 200 again once it ends. It says nothing about the servers a pool names.
//!
//! A reconcile's own work takes milliseconds. What it waits on is bounded:
//! every request to a server other than the API server has a
//! whole-request deadline (`crate::outbound`): a registry resolution ends
//! within twice `--registry-timeout-seconds` (60 s by default), the alert
//! gate's question within 5 s. A registry or a Prometheus that answers a
//! byte at a time therefore fails that pool's resolution or gate (shown in
//! its status, tried again later), never the loop, and reconciles of
//! different pools run concurrently, so it does not hold the others back
//! either. What is left to wedge a reconcile is the API server (a hung
//! connection, whose reads only the client's own timeouts bound) or a
//! lock: a reconcile that runs for minutes waits on something that will
//! not come, and every pool behind it waits too, so restarting is the cure.
//! Keep `--wedged-after-seconds` above the registry's resolution deadline.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one reconcile may run before the loop counts as wedged (the
/// default of `--wedged-after-seconds`).
pub const WEDGED_AFTER: Duration = Duration::from_secs(300);

/// Is a loop whose oldest running reconcile is `oldest` old wedged, when
/// one may run for `limit`?
pub fn is_wedged(oldest: Option<Duration>, limit: Duration) -> bool {
    oldest.is_some_and(|age| age >= limit)
}

/// The reconciles running now, with their start.
#[derive(Debug)]
pub struct Liveness {
    next: AtomicU64,
    running: Mutex<BTreeMap<u64, Instant>>,
    limit: Duration,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness::new(WEDGED_AFTER)
    }
}

/// A running reconcile; dropped when it ends (whichever way).
#[derive(Debug)]
pub struct Running {
    id: u64,
    liveness: Arc<Liveness>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut running) = self.liveness.running.lock() {
            running.remove(&self.id);
        }
    }
}

impl Liveness {
    /// A reconcile running for `limit` makes the loop wedged.
    pub fn new(limit: Duration) -> Self {
        Liveness {
            next: AtomicU64::new(0),
            running: Mutex::default(),
            limit,
        }
    }

    /// Marks a reconcile as started.
    pub fn start(self: &Arc<Self>) -> Running {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut running) = self.running.lock() {
            running.insert(id, Instant::now());
        }
        Running {
            id,
            liveness: self.clone(),
        }
    }

    /// How long the oldest running reconcile has been running.
    pub fn oldest(&self) -> Option<Duration> {
        let running = self.running.lock().ok()?;
        running.values().min().map(Instant::elapsed)
    }

    /// Should `/healthz` fail?
    pub fn wedged(&self) -> bool {
        is_wedged(self.oldest(), self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_running_too_long_is_a_wedged_loop() {
        assert!(!is_wedged(None, WEDGED_AFTER));
        assert!(!is_wedged(Some(Duration::from_secs(1)), WEDGED_AFTER));
        assert!(is_wedged(Some(WEDGED_AFTER), WEDGED_AFTER));
        let quick = Arc::new(Liveness::new(Duration::ZERO));
        let running = quick.start();
        assert!(quick.wedged(), "running past its limit");
        drop(running);
        assert!(!quick.wedged(), "and live again once it ended");
        let l = Arc::new(Liveness::default());
        let a = l.start();
        let b = l.start();
        assert!(l.oldest().is_some());
        drop(a);
        drop(b);
        assert_eq!(l.oldest(), None, "ended reconciles are forgotten");
        assert!(!l.wedged());
    }
}
