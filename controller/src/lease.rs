//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! A replica holds the lease while it renews it every `renew_every`; another
//! replica takes it only once `renewTime + leaseDurationSeconds` has passed
//! (or the holder released it). All writes are optimistic (they carry the
//! resourceVersion read), so two replicas never both win the same round. A
//! holder that cannot renew within the lease duration stops acting: the
//! caller is told through a cancellation token and must stop the controller.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
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

impl LeaseConfig {
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        LeaseConfig {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
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

/// Waits until we hold the lease, or `stop` is cancelled (then false).
pub async fn acquire(client: &kube::Client, cfg: &LeaseConfig, stop: &CancellationToken) -> bool {
    let mut logged = false;
    loop {
        match try_acquire(client, cfg).await {
            Ok(true) => {
                tracing::info!(lease = %cfg.name, identity = %cfg.identity, "became leader");
                return true;
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
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(cfg.renew_every) => {}
        }
    }
}

/// Renews the lease until `stop` is cancelled; cancels `lost` (and returns)
/// when it could not renew within the lease duration or someone else holds it.
pub async fn keep(
    client: kube::Client,
    cfg: LeaseConfig,
    stop: CancellationToken,
    lost: CancellationToken,
) {
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(cfg.renew_every) => {}
        }
        match try_acquire(&client, &cfg).await {
            Ok(true) => last_renewed = tokio::time::Instant::now(),
            Ok(false) => {
                tracing::error!(lease = %cfg.name, "lease taken by another replica");
                lost.cancel();
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "lease renewal failed");
                if last_renewed.elapsed() >= cfg.duration {
                    tracing::error!(lease = %cfg.name, "could not renew the lease in time");
                    lost.cancel();
                    return;
                }
            }
        }
    }
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
}
