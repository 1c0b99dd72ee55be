//! The registry-backed [`Resolve`]: tag references are resolved with the
//! pool's pull secret at most once per interval (at once after a spec
//! change, a controller start or a person's request, `kubectl bootc
//! refresh`, at most one every `tag_policy::REFRESH_MIN_INTERVAL`; also
//! while the pool is paused); digest references are checked the same
//! way (the manifest exists, hashes to the digest, and covers every
//! member's architecture) before any node is told, then answered from the
//! cache of what that digest was found to be. Either way any failure keeps
//! the previous target in force (fail closed) with a condition that says
//! why, and is tried again after the retry interval, not on every event.
//!
//! The schedule lives in memory ([`TargetMemory`], in the pool's state), not in
//! the pool's status: a poll
//! that finds the same digest writes nothing (no heartbeats). A restarted
//! controller resolves every tag once at start, then keeps the interval.

use std::time::Duration;

use api::BootcNodePool;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use crate::target::api_server::ApiServerVersion;
use crate::target::registry::{PullSecret, RegistryError, Resolver};
use crate::target::tag_policy::{self, CurrentTarget, TargetStep};
use crate::target::{
    MembersRun, Parsed, Resolution, Resolve, Schedule, TargetMemory, parse_reference,
};
use api::image_labels::KUBELET_VERSION;
use rollout::{Target, TargetProblem, holds::os_guard};

/// Resolves tags against registries.
pub struct RegistryResolver {
    registry: Resolver,
    interval: Duration,
    /// What a target's kubelet is checked against.
    api_server: ApiServerVersion,
}

impl std::fmt::Debug for RegistryResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryResolver")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl RegistryResolver {
    pub fn new(registry: Resolver, interval: Duration, api_server: ApiServerVersion) -> Self {
        RegistryResolver {
            registry,
            interval,
            api_server,
        }
    }

    async fn resolve_tag(
        &self,
        pool: &BootcNodePool,
        image: api::image_ref::ImageRef,
        pull_secret: Option<&Secret>,
        members: MembersRun<'_>,
        memory: &mut TargetMemory,
    ) -> Resolution {
        let name = pool.name_any();
        let schedule = memory.schedule;
        let current = current_target(pool, schedule.map(|s| s.next));
        // Not resolved since this controller started, or resolved for an
        // older spec: at once.
        let spec_changed = schedule.is_none_or(|s| s.generation != pool.metadata.generation);
        let now = jiff::Timestamp::now();
        let asked = pool.annotations().get(api::labels::REFRESH_ANNOTATION);
        let refresh =
            tag_policy::refresh(asked.map(String::as_str), memory.refreshed.as_ref(), now);
        let due = spec_changed || refresh == tag_policy::Refresh::Now;
        match tag_policy::plan_target(&image, &current, due, now) {
            TargetStep::Pinned { digest, image } => Resolution {
                target: Ok(Target {
                    digest,
                    image,
                    platform_digests: Vec::new(),
                    kubelet: None,
                }),
                requeue_after: None,
            },
            TargetStep::NotDue { requeue_after } => Resolution {
                target: kept(pool, &current, memory),
                requeue_after: Some(match refresh {
                    tag_policy::Refresh::Later(left) => left.min(requeue_after),
                    _ => requeue_after,
                }),
            },
            TargetStep::Resolve => {
                // Whatever made it due, the request on the pool is answered.
                memory.refreshed = asked.map(|a| (a.clone(), now));
                let asked = std::time::Instant::now();
                let result = self.query_guarded(pool, &image, pull_secret, members).await;
                let took = asked.elapsed();
                let out = tag_policy::apply_resolution(
                    &current,
                    result,
                    members.architectures,
                    &pool.spec.image.reference,
                    self.interval,
                    now,
                );
                remember(memory, pool, &out);
                crate::metrics::global().tag_schedule(&name, now, out.next_resolution);
                let target = match (out.error, out.target) {
                    (None, Some(target)) => Ok(target),
                    (Some((reason, message)), _) => Err(TargetProblem { reason, message }),
                    (None, None) => Err(TargetProblem {
                        reason: api::Reason::TagNotResolved,
                        message: "resolution returned no digest".into(),
                    }),
                };
                crate::metrics::global().tag_resolution(
                    &name,
                    took,
                    target.as_ref().err().map(|p| p.reason),
                );
                log_outcome(&name, &image, &current, &target);
                Resolution {
                    target,
                    requeue_after: Some(out.requeue_after),
                }
            }
        }
    }

    /// Checks a digest reference against its registry, as a tag's digest is
    /// checked. A failure is kept (and answered) until its retry is due.
    async fn check_digest(
        &self,
        pool: &BootcNodePool,
        image: api::image_ref::ImageRef,
        pull_secret: Option<&Secret>,
        members: MembersRun<'_>,
        memory: &mut TargetMemory,
    ) -> Resolution {
        let name = pool.name_any();
        let current = current_target(pool, None);
        let now = jiff::Timestamp::now();
        if let Some((problem, left)) = failure_not_due(memory, pool, now) {
            return Resolution {
                target: Err(problem),
                requeue_after: Some(left),
            };
        }
        let result = self.query_guarded(pool, &image, pull_secret, members).await;
        let reference = &pool.spec.image.reference;
        let out = tag_policy::apply_resolution(
            &current,
            result,
            members.architectures,
            reference,
            self.interval,
            now,
        );
        remember(memory, pool, &out);
        // The registry's answer, with an index's platform digests: the
        // digest the reference names (the body hashed to it).
        match (
            out.error,
            out.target
                .filter(|t| image.digest.as_ref() == Some(&t.digest)),
        ) {
            (None, Some(target)) => Resolution {
                target: Ok(target),
                requeue_after: None,
            },
            (Some((reason, message)), _) => {
                tracing::warn!(pool = %name, reason = reason.as_str(), %message, "digest reference refused");
                Resolution {
                    target: Err(TargetProblem { reason, message }),
                    requeue_after: Some(out.requeue_after),
                }
            }
            (None, None) => Resolution {
                target: Err(TargetProblem {
                    reason: api::Reason::InvalidSpec,
                    message: format!("spec.image.ref {image} has no digest"),
                }),
                requeue_after: None,
            },
        }
    }

    /// Resolves `image` and checks it against what the members run and,
    /// when it declares its kubelet, against the API server's version
    /// (`rollout::holds::os_guard`), then its signatures against the signature
    /// policy (`crate::target::registry::signatures`): a refusal fails the
    /// resolution as a registry failure does (fail closed, the previous
    /// target kept, no node told).
    async fn query_guarded(
        &self,
        pool: &BootcNodePool,
        image: &api::image_ref::ImageRef,
        pull_secret: Option<&Secret>,
        members: MembersRun<'_>,
    ) -> Result<crate::target::registry::Resolved, RegistryError> {
        let resolved = self.query(image, pull_secret).await?;
        let os = os_guard::ImageOs::from_labels(&resolved.facts.labels);
        let allow = pool.spec.image.allow_major_upgrade;
        let running = if os_guard::compares_members(&os, allow) {
            self.running(&resolved, pull_secret, members).await
        } else {
            Vec::new()
        };
        os_guard::check(&image.to_string(), &os, &running, allow).map_err(refused)?;
        if let Some(kubelet) = resolved.facts.labels.get(KUBELET_VERSION) {
            let api_server = self.api_server.get().await.map_err(|e| RegistryError::Refused {
                reason: api::Reason::KubeletSkew,
                message: format!(
                    "{image} declares kubelet {kubelet:?}, and the API server's version to check it against could not be read: {e}"
                ),
            })?;
            os_guard::kubelet_skew(&image.to_string(), kubelet, api_server).map_err(refused)?;
        }
        let (secret, _) = pull_secret_of(pull_secret)?;
        self.registry
            .check_signatures(&resolved, secret.as_ref())
            .await?;
        Ok(resolved)
    }

    /// What the members' booted images say of their OS, each read once
    /// (cached by digest). One the registry does not answer for is left
    /// out: not compared, never guessed.
    async fn running(
        &self,
        target: &crate::target::registry::Resolved,
        pull_secret: Option<&Secret>,
        members: MembersRun<'_>,
    ) -> Vec<os_guard::Running> {
        let mut out = Vec::new();
        for (booted, count) in members.booted {
            let digest = api::image_ref::digest_of(booted);
            let is_target = digest.is_some_and(|d| {
                d == target.facts.digest || target.facts.platform_digests.iter().any(|p| p == d)
            });
            let Some(image) = api::image_ref::ImageRef::parse(booted)
                .ok()
                .filter(|_| !is_target)
            else {
                continue;
            };
            match self.query(&image, pull_secret).await {
                Ok(read) => out.push(os_guard::Running {
                    image: booted.clone(),
                    os: os_guard::ImageOs::from_labels(&read.facts.labels),
                    members: *count,
                }),
                Err(e) => {
                    tracing::debug!(image = %booted, error = %e, "a member's booted image not read: its OS is not compared");
                }
            }
        }
        out
    }

    async fn query(
        &self,
        image: &api::image_ref::ImageRef,
        pull_secret: Option<&Secret>,
    ) -> Result<crate::target::registry::Resolved, RegistryError> {
        let (secret, hash) = pull_secret_of(pull_secret)?;
        self.registry.resolve(image, secret.as_ref(), &hash).await
    }
}

/// A pool's pull secret as the registry client takes it, and its version
/// (which keys what was learned with it).
fn pull_secret_of(
    pull_secret: Option<&Secret>,
) -> Result<(Option<PullSecret>, String), RegistryError> {
    let Some(secret) = pull_secret else {
        return Ok((None, String::new()));
    };
    let label = format!(
        "{}/{}",
        secret.namespace().unwrap_or_default(),
        secret.name_any()
    );
    let data = secret.data.clone().unwrap_or_default();
    let hash = api::pull_secret::version(&secret.metadata).unwrap_or_default();
    let json = data
        .get(".dockerconfigjson")
        .ok_or_else(|| RegistryError::InvalidPullSecret {
            secret: label.clone(),
            message: "no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
                .into(),
        })?;
    // Looked up for each location asked (a mirror's own entry).
    let secret = PullSecret {
        label,
        docker_config: json.0.clone(),
    };
    Ok((Some(secret), hash))
}

impl Resolve for RegistryResolver {
    fn resolve<'a>(
        &'a self,
        pool: &'a BootcNodePool,
        pull_secret: Option<&'a Secret>,
        members: MembersRun<'a>,
        memory: &'a mut TargetMemory,
    ) -> BoxFuture<'a, Resolution> {
        Box::pin(async move {
            match parse_reference(&pool.spec.image.reference) {
                Parsed::Invalid(resolution) => resolution,
                Parsed::Digest(image) => {
                    self.check_digest(pool, image, pull_secret, members, memory)
                        .await
                }
                Parsed::Tag(image) => {
                    self.resolve_tag(pool, image, pull_secret, members, memory)
                        .await
                }
            }
        })
    }
}

/// A guard's refusal, failing the resolution as a registry failure does.
fn refused(problem: TargetProblem) -> RegistryError {
    RegistryError::Refused {
        reason: problem.reason,
        message: problem.message,
    }
}

/// Logs a resolution: a new digest, or a failure.
fn log_outcome(
    name: &str,
    tag: &api::image_ref::ImageRef,
    current: &CurrentTarget,
    target: &Result<Target, TargetProblem>,
) {
    match target {
        Ok(t) if current.previous.as_ref().map(|p| &p.digest) != Some(&t.digest) => {
            tracing::info!(pool = %name, %tag, digest = %t.digest, "tag resolved to a new digest");
        }
        Err(p) => {
            tracing::warn!(pool = %name, reason = p.reason.as_str(), message = %p.message, "tag resolution failed")
        }
        _ => {}
    }
}

/// The target the pool's status records, with the next resolution due.
fn current_target(pool: &BootcNodePool, next_resolution: Option<jiff::Timestamp>) -> CurrentTarget {
    let status = pool.status.as_ref();
    CurrentTarget {
        previous: status.and_then(rollout::target::recorded),
        next_resolution,
    }
}

/// The last failure for this spec, while its retry is not due yet.
fn failure_not_due(
    memory: &TargetMemory,
    pool: &BootcNodePool,
    now: jiff::Timestamp,
) -> Option<(TargetProblem, Duration)> {
    let schedule = memory.schedule?;
    if schedule.generation != pool.metadata.generation || schedule.next <= now {
        return None;
    }
    let (reason, message) = memory.last_error.clone()?;
    let left = schedule.next.duration_since(now).unsigned_abs();
    Some((TargetProblem { reason, message }, left))
}

/// Between two resolutions: the last failure, or the target in force.
fn kept(
    pool: &BootcNodePool,
    current: &CurrentTarget,
    memory: &TargetMemory,
) -> Result<Target, TargetProblem> {
    match (&memory.last_error, &current.previous) {
        (Some((reason, message)), _) => Err(TargetProblem {
            reason: *reason,
            message: message.clone(),
        }),
        (None, Some(previous)) => Ok(previous.clone()),
        (None, None) => Err(TargetProblem {
            reason: api::Reason::TagNotResolved,
            message: format!("{} has not been resolved yet", pool.spec.image.reference),
        }),
    }
}

/// Keeps a resolution's schedule and failure, if any.
fn remember(memory: &mut TargetMemory, pool: &BootcNodePool, out: &tag_policy::TargetOutcome) {
    memory.schedule = Some(Schedule {
        generation: pool.metadata.generation,
        next: out.next_resolution,
    });
    tracing::debug!(pool = %pool.name_any(), next = %out.next_resolution, "next tag resolution scheduled");
    memory.last_error = out.error.clone();
}
