//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! A replica holds the lease while it renews it every `renew_every`; another
//! replica takes it only once `renewTime + leaseDurationSeconds` has passed
//! (or the holder released it). All writes are optimistic (they carry the
//! resourceVersion read), so two replicas never both win the same round.
//!
//! The holder gives up earlier than a standby may take over: every renewal
//! attempt has its own timeout, and a holder that has not renewed within the
//! renew deadline (two thirds of the lease duration, counted from the start
//! of its last successful renewal, so from no later than the `renewTime` it
//! wrote) stops acting. The remaining third is the margin for the holder to
//! stop and for clock differences. The caller is told through a
//! cancellation token and must stop the controller at once.
//!
//! The holder renews on a thread of its own ([`keep_on_own_thread`]), with
//! its own runtime and client: the controller runs on one thread, which a
//! burst of watch events or a long plan can hold for longer than the renew
//! deadline (under load it did, and a healthy leader lost its Lease without
//! a single failed renewal).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where the lease is and who we are.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    pub duration: Duration,
    pub renew_every: Duration,
}

/// How long a Lease is held without renewal (`--lease-duration-seconds`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

impl LeaseConfig {
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        LeaseConfig {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            duration: DEFAULT_LEASE_DURATION,
            renew_every: Duration::from_secs(5),
        }
    }

    /// How long the holder may go without a successful renewal before it
    /// stops acting: two thirds of the lease duration.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }
}

/// What the holder does next, given how long ago its last successful
/// renewal started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Try to renew, giving the attempt at most this long.
    Attempt { budget: Duration },
    /// The renew deadline has passed: stop acting.
    Lose,
}

/// A pure decision: renew (and for how long at most), or give up. An attempt
/// never runs past the renew deadline, and never longer than `renew_every`.
pub fn renewal(
    since_renewed: Duration,
    renew_deadline: Duration,
    renew_every: Duration,
) -> Renewal {
    match renew_deadline.checked_sub(since_renewed) {
        Some(left) if !left.is_zero() => Renewal::Attempt {
            budget: left.min(renew_every),
        },
        _ => Renewal::Lose,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("reading or writing lease {namespace}/{name}: {source}")]
    Api {
        name: String,
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("lease {namespace}/{name}: no answer within {budget:?}")]
    Timeout {
        name: String,
        namespace: String,
        budget: Duration,
    },
}

/// A pure decision: may `me` take `lease` at `now`?
pub fn may_take(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> bool {
    let Some(spec) = spec else { return true };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == me {
        return true;
    }
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
    renewed.0 + duration < now
}

fn api_err(cfg: &LeaseConfig) -> impl Fn(kube::Error) -> LeaseError + '_ {
    move |source| LeaseError::Api {
        name: cfg.name.clone(),
        namespace: cfg.namespace.clone(),
        source,
    }
}

/// One attempt to take or renew the lease. Ok(true) when we hold it.
pub async fn try_acquire(client: &kube::Client, cfg: &LeaseConfig) -> Result<bool, LeaseError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let now = Timestamp::now();
    let duration = i32::try_from(cfg.duration.as_secs()).unwrap_or(15);
    let current = api.get_opt(&cfg.name).await.map_err(api_err(cfg))?;
    match current {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(cfg.identity.clone()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(api_err(cfg)(e)),
            }
        }
        Some(mut lease) => {
            if !may_take(lease.spec.as_ref(), &cfg.identity, now) {
                return Ok(false);
            }
            let mut spec = lease.spec.take().unwrap_or_default();
            let ours = spec.holder_identity.as_deref() == Some(cfg.identity.as_str());
            if !ours {
                spec.acquire_time = Some(MicroTime(now));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                spec.holder_identity = Some(cfg.identity.clone());
            }
            spec.renew_time = Some(MicroTime(now));
            spec.lease_duration_seconds = Some(duration);
            lease.spec = Some(spec);
            match api.replace(&cfg.name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(api_err(cfg)(e)),
            }
        }
    }
}

/// [`try_acquire`] that gives up after `budget`.
async fn try_acquire_within(
    client: &kube::Client,
    cfg: &LeaseConfig,
    budget: Duration,
) -> Result<bool, LeaseError> {
    tokio::time::timeout(budget, try_acquire(client, cfg))
        .await
        .unwrap_or_else(|_| {
            Err(LeaseError::Timeout {
                name: cfg.name.clone(),
                namespace: cfg.namespace.clone(),
                budget,
            })
        })
}

/// Waits until we hold the lease, or `stop` is cancelled (then None). On
/// success, returns when the winning attempt started: no later than the
/// `renewTime` it wrote, so the holder's renew deadline counts from there.
pub async fn acquire(
    client: &kube::Client,
    cfg: &LeaseConfig,
    stop: &CancellationToken,
) -> Option<Instant> {
    let mut logged = false;
    loop {
        let started = Instant::now();
        match try_acquire_within(client, cfg, cfg.renew_every).await {
            Ok(true) => {
                tracing::info!(lease = %cfg.name, identity = %cfg.identity, "became leader");
                return Some(started);
            }
            Ok(false) => {
                if !logged {
                    tracing::info!(lease = %cfg.name, identity = %cfg.identity, "waiting for the lease held by another replica");
                    logged = true;
                }
            }
            Err(error) => tracing::warn!(%error, "leader election attempt failed"),
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(cfg.renew_every) => {}
        }
    }
}

/// Renews the lease until `stop` is cancelled; cancels `lost` (and returns)
/// when someone else holds it, or when the renew deadline passes without a
/// successful renewal. `renewed` is when the last successful attempt started
/// (from [`acquire`]).
pub async fn keep(
    client: kube::Client,
    cfg: LeaseConfig,
    stop: CancellationToken,
    lost: CancellationToken,
    renewed: Instant,
) {
    let deadline = cfg.renew_deadline();
    // After a failure, try again sooner: several attempts fit in the deadline.
    let retry_every = cfg.renew_every / 2;
    let mut renewed = renewed;
    let mut next = renewed + cfg.renew_every;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(next.min(renewed + deadline)) => {}
        }
        let started = Instant::now();
        let budget = match renewal(started - renewed, deadline, cfg.renew_every) {
            Renewal::Attempt { budget } => budget,
            Renewal::Lose => {
                tracing::error!(
                    lease = %cfg.name,
                    ?deadline,
                    "could not renew the lease within the renew deadline: stopping"
                );
                lost.cancel();
                return;
            }
        };
        match try_acquire_within(&client, &cfg, budget).await {
            Ok(true) => {
                renewed = started;
                next = started + cfg.renew_every;
            }
            Ok(false) => {
                tracing::error!(lease = %cfg.name, "lease taken by another replica");
                lost.cancel();
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "lease renewal failed");
                next = Instant::now() + retry_every;
            }
        }
    }
}

/// Runs [`keep`] on a thread of its own, with its own runtime and its own
/// client (built by `client`, inside that runtime): a renewal must not wait
/// for the controller's thread, which a long plan or a burst of watch events
/// can hold for longer than the renew deadline. The thread ends when `stop`
/// is cancelled or the lease is lost (then `lost` is cancelled).
pub fn keep_on_own_thread(
    client: impl FnOnce() -> Result<kube::Client, String> + Send + 'static,
    cfg: LeaseConfig,
    stop: CancellationToken,
    lost: CancellationToken,
    renewed: Instant,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("lease-renewal".into())
        .spawn(move || {
            runtime.block_on(async move {
                match client() {
                    Ok(client) => keep(client, cfg, stop, lost, renewed).await,
                    Err(error) => {
                        tracing::error!(%error, "no client to renew the lease with: stopping");
                        lost.cancel();
                    }
                }
            });
        })
}

/// Gives the lease up (if we hold it) so another replica takes over at once.
pub async fn release(client: &kube::Client, cfg: &LeaseConfig) -> Result<(), LeaseError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let Some(mut lease) = api.get_opt(&cfg.name).await.map_err(api_err(cfg))? else {
        return Ok(());
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(());
    };
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(_) => {
            tracing::info!(lease = %cfg.name, "lease released");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(api_err(cfg)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            renew_time: Some(MicroTime(
                Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago),
            )),
            lease_duration_seconds: Some(duration),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn lease_rules() {
        let now = Timestamp::now();
        assert!(may_take(None, "a", now));
        assert!(may_take(Some(&spec("a", 1, 15)), "a", now));
        assert!(!may_take(Some(&spec("b", 1, 15)), "a", now));
        assert!(may_take(Some(&spec("b", 30, 15)), "a", now));
        assert!(may_take(Some(&spec("", 1, 15)), "a", now));
    }

    #[test]
    fn renewal_stops_at_the_deadline() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let cfg = LeaseConfig::new("l", "ns", "me");
        assert_eq!(cfg.renew_deadline(), s(10));
        // (since the last successful renewal started, expected decision)
        let table = [
            (s(0), Renewal::Attempt { budget: s(5) }),
            (s(5), Renewal::Attempt { budget: s(5) }),
            // The budget shrinks so an attempt never outlives the deadline.
            (s(7), Renewal::Attempt { budget: s(3) }),
            (ms(9_999), Renewal::Attempt { budget: ms(1) }),
            (s(10), Renewal::Lose),
            (s(11), Renewal::Lose),
            (s(300), Renewal::Lose),
        ];
        for (since, want) in table {
            assert_eq!(
                renewal(since, cfg.renew_deadline(), cfg.renew_every),
                want,
                "{since:?} since the last renewal"
            );
        }
        // The holder stops strictly before a standby may take the lease.
        for secs in [2_u64, 6, 15, 60] {
            let mut c = cfg.clone();
            c.duration = s(secs);
            assert!(c.renew_deadline() < c.duration, "{secs}s lease");
        }
    }
}
