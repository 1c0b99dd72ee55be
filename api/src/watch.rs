//! The watch backoff shared by the controller and the daemon.

use std::time::Duration;

use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// Quick to come back after an API server restart: kube's default backoff
/// grows to 30 s (jitter to a minute), which left caches stale for minutes
/// while the daemons had moved on. At most 5 s; resets after 30 s without
/// errors.
pub fn backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    ResetTimerBackoff::new(
        ExponentialBackoff::from(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_delay(Duration::from_secs(5))
                .with_factor(2.0)
                .with_jitter()
                .without_max_times(),
        ),
        Duration::from_secs(30),
    )
}
