//! The tag policy, pure: when the registry is asked about a pool's
//! reference, and how its answer is folded into the target.
//!
//! A digest reference is its own answer and never touches a registry. A tag
//! is resolved at most once per interval (and at once when the spec
//! changes), the result checked against the nodes' architectures, and any
//! failure keeps the previous target ([`rollout::target::recorded`]): the
//! controller fails closed.

use std::collections::BTreeSet;
use std::time::Duration;

use api::image_ref::ImageRef;
use jiff::Timestamp;
use rollout::Target;

use crate::target::registry::{RegistryError, Resolved, check_architectures};

/// Default interval between two resolutions of a tag.
pub const DEFAULT_RESOLVE_INTERVAL: Duration = Duration::from_secs(300);
/// After a failed resolution, retry no later than this.
pub const MAX_RETRY_AFTER_ERROR: Duration = Duration::from_secs(60);

/// The shortest time between two resolutions a person asks for
/// (`kubectl bootc refresh`, [`api::labels::REFRESH_ANNOTATION`]): a request
/// sooner is honoured once it has passed.
pub const REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(10);

/// A person's request to resolve the tag now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refresh {
    /// No request, or the one already honoured.
    None,
    /// A new request: resolve now.
    Now,
    /// A new request too soon after the last one honoured: resolve then.
    Later(Duration),
}

/// Whether the request on the pool (`asked`: the annotation's value) is new
/// since the one last honoured (`honoured`: its value and when), and may be
/// honoured at `now` (one every [`REFRESH_MIN_INTERVAL`]).
pub fn refresh(
    asked: Option<&str>,
    honoured: Option<&(String, Timestamp)>,
    now: Timestamp,
) -> Refresh {
    let Some(asked) = asked else {
        return Refresh::None;
    };
    match honoured {
        Some((value, _)) if value == asked => Refresh::None,
        Some((_, at)) => {
            let since = at.duration_until(now).unsigned_abs();
            match REFRESH_MIN_INTERVAL.checked_sub(since) {
                Some(left) if !left.is_zero() && *at <= now => Refresh::Later(left),
                _ => Refresh::Now,
            }
        }
        None => Refresh::Now,
    }
}

/// The target in force before this resolution, and when the next is due.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurrentTarget {
    /// [`rollout::target::recorded`] of the pool's status.
    pub previous: Option<Target>,
    pub next_resolution: Option<Timestamp>,
}

/// What to do about the target before planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetStep {
    /// The ref is a digest: use it, no registry.
    Pinned { digest: String, image: String },
    /// A tag whose resolution is not due: keep the current target.
    NotDue { requeue_after: Duration },
    /// A tag to resolve now.
    Resolve,
}

/// Decides whether the registry must be asked.
pub fn plan_target(
    reference: &ImageRef,
    current: &CurrentTarget,
    spec_changed: bool,
    now: Timestamp,
) -> TargetStep {
    if let Some(digest) = &reference.digest {
        return TargetStep::Pinned {
            digest: digest.clone(),
            image: reference.pinned(digest),
        };
    }
    let repository_changed = current
        .previous
        .as_ref()
        .and_then(|t| t.image.split_once('@'))
        .is_some_and(|(repo, _)| repo != reference.repository());
    if spec_changed || repository_changed || current.previous.is_none() {
        return TargetStep::Resolve;
    }
    match current.next_resolution {
        Some(next) if next > now => {
            let wait = now.duration_until(next).unsigned_abs();
            TargetStep::NotDue {
                requeue_after: wait,
            }
        }
        _ => TargetStep::Resolve,
    }
}

/// The outcome of a resolution, ready for the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetOutcome {
    /// The target in force after this step (unchanged on error), with an
    /// index's platform digests.
    pub target: Option<Target>,
    pub next_resolution: Timestamp,
    pub requeue_after: Duration,
    /// Set when resolution failed: the condition reason and message.
    pub error: Option<(api::Reason, String)>,
}

/// Folds a resolution result into the target, failing closed: an error or
/// an image the nodes cannot run keeps the previous target.
pub fn apply_resolution(
    current: &CurrentTarget,
    result: Result<Resolved, RegistryError>,
    required_architectures: &BTreeSet<String>,
    reference: &str,
    interval: Duration,
    now: Timestamp,
) -> TargetOutcome {
    let checked = result.and_then(|resolved| {
        check_architectures(&resolved.facts, required_architectures, reference)?;
        Ok(resolved)
    });
    match checked {
        Ok(resolved) => TargetOutcome {
            target: Some(Target {
                digest: resolved.facts.digest,
                image: resolved.pinned,
                platform_digests: resolved.facts.platform_digests,
                kubelet: resolved
                    .facts
                    .labels
                    .get(api::image_labels::KUBELET_VERSION)
                    .cloned(),
            }),
            next_resolution: add(now, interval),
            requeue_after: interval,
            error: None,
        },
        Err(err) => {
            let retry = interval.min(MAX_RETRY_AFTER_ERROR);
            TargetOutcome {
                target: current.previous.clone(),
                next_resolution: add(now, retry),
                requeue_after: retry,
                error: Some((err.reason(), fail_closed_message(&err, current))),
            }
        }
    }
}

fn fail_closed_message(err: &RegistryError, current: &CurrentTarget) -> String {
    match &current.previous {
        Some(Target { digest, .. }) => format!("{err}; keeping the previous target {digest}"),
        None => format!("{err}; no target yet, nothing will be rolled out"),
    }
}

fn add(now: Timestamp, d: Duration) -> Timestamp {
    let span = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::from_secs(300));
    now.checked_add(span).unwrap_or(now)
}

/// The architectures a pool's image must cover: each member's
/// `kubernetes.io/arch` label and each architecture its BootcNode reports.
pub fn required_architectures<'a>(
    node_arch_labels: impl IntoIterator<Item = Option<&'a str>>,
    reported: impl IntoIterator<Item = Option<&'a str>>,
) -> BTreeSet<String> {
    // Inserted borrowed, one by one: thousands of members name a handful of
    // architectures (collecting would copy, sort and deduplicate them all).
    let mut distinct: BTreeSet<&str> = BTreeSet::new();
    for arch in node_arch_labels.into_iter().chain(reported).flatten() {
        if !arch.is_empty() {
            distinct.insert(arch);
        }
    }
    distinct.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn a_refresh_is_honoured_once_and_at_most_every_interval() {
        let honoured = ("t1".to_owned(), at(0));
        let cases = [
            ("no request", None, None, 5, Refresh::None),
            ("a first request", Some("t1"), None, 5, Refresh::Now),
            (
                "the one honoured",
                Some("t1"),
                Some(&honoured),
                5,
                Refresh::None,
            ),
            (
                "a new one too soon",
                Some("t2"),
                Some(&honoured),
                4,
                Refresh::Later(Duration::from_secs(6)),
            ),
            (
                "a new one later",
                Some("t2"),
                Some(&honoured),
                10,
                Refresh::Now,
            ),
        ];
        for (what, asked, last, now, want) in cases {
            assert_eq!(refresh(asked, last, at(now)), want, "{what}");
        }
    }
    use crate::target::registry::ManifestFacts;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn current(next_in: i64) -> CurrentTarget {
        CurrentTarget {
            previous: Some(Target {
                digest: D1.into(),
                image: format!("r.io/os@{D1}"),
                platform_digests: Vec::new(),
                kubelet: None,
            }),
            next_resolution: Some(
                now()
                    .checked_add(jiff::SignedDuration::from_secs(next_in))
                    .unwrap(),
            ),
        }
    }

    fn resolved(digest: &str, archs: &[&str]) -> Resolved {
        Resolved {
            facts: ManifestFacts {
                digest: digest.into(),
                media_type: "x".into(),
                architectures: archs.iter().map(|a| (*a).to_owned()).collect(),
                platform_digests: Vec::new(),
                labels: Default::default(),
            },
            pinned: format!("r.io/os@{digest}"),
        }
    }

    #[test]
    fn when_to_ask_the_registry() {
        let tag = ImageRef::parse("r.io/os:prod").unwrap();
        let pinned = ImageRef::parse(&format!("r.io/os@{D2}")).unwrap();
        let other_repo = ImageRef::parse("r.io/other:prod").unwrap();
        let rows: Vec<(&str, &ImageRef, CurrentTarget, bool, TargetStep)> = vec![
            (
                "digest ref never resolves",
                &pinned,
                current(100),
                true,
                TargetStep::Pinned {
                    digest: D2.into(),
                    image: format!("r.io/os@{D2}"),
                },
            ),
            (
                "no target yet",
                &tag,
                CurrentTarget::default(),
                false,
                TargetStep::Resolve,
            ),
            (
                "not due",
                &tag,
                current(100),
                false,
                TargetStep::NotDue {
                    requeue_after: Duration::from_secs(100),
                },
            ),
            ("due", &tag, current(0), false, TargetStep::Resolve),
            ("overdue", &tag, current(-5), false, TargetStep::Resolve),
            (
                "spec changed",
                &tag,
                current(100),
                true,
                TargetStep::Resolve,
            ),
            (
                "repository changed",
                &other_repo,
                current(100),
                false,
                TargetStep::Resolve,
            ),
        ];
        for (name, reference, cur, changed, want) in rows {
            assert_eq!(plan_target(reference, &cur, changed, now()), want, "{name}");
        }
    }

    #[test]
    fn success_adopts_the_new_digest() {
        let archs = BTreeSet::from(["amd64".to_owned()]);
        // An index: its platforms' manifests are kept with the target.
        let mut index = resolved(D2, &["amd64", "arm64"]);
        index.facts.platform_digests = vec![D1.to_owned()];
        let out = apply_resolution(
            &current(0),
            Ok(index),
            &archs,
            "r.io/os:prod",
            DEFAULT_RESOLVE_INTERVAL,
            now(),
        );
        assert_eq!(
            out.target,
            Some(Target {
                digest: D2.into(),
                image: format!("r.io/os@{D2}"),
                platform_digests: vec![D1.to_owned()],
                kubelet: None,
            })
        );
        assert_eq!(out.error, None);
        assert_eq!(out.requeue_after, DEFAULT_RESOLVE_INTERVAL);
        assert_eq!(
            out.next_resolution,
            now()
                .checked_add(jiff::SignedDuration::from_secs(300))
                .unwrap()
        );
    }

    #[test]
    fn failures_keep_the_previous_target() {
        let archs = BTreeSet::from(["amd64".to_owned(), "arm64".to_owned()]);
        let cases = vec![
            (
                "wrong arch",
                Ok(resolved(D2, &["amd64"])),
                api::Reason::UnsupportedArchitecture,
            ),
            (
                "401",
                Err(RegistryError::Unauthorized {
                    registry: "r.io".into(),
                    reference: "r.io/os:prod".into(),
                    message: "401".into(),
                }),
                api::Reason::RegistryUnauthorized,
            ),
            (
                "404",
                Err(RegistryError::NotFound {
                    reference: "r.io/os:prod".into(),
                    message: "404".into(),
                }),
                api::Reason::ImageNotFound,
            ),
            (
                "down",
                Err(RegistryError::Unreachable {
                    registry: "r.io".into(),
                    message: "refused".into(),
                }),
                api::Reason::RegistryUnreachable,
            ),
        ];
        for (name, result, reason) in cases {
            let out = apply_resolution(
                &current(0),
                result,
                &archs,
                "r.io/os:prod",
                DEFAULT_RESOLVE_INTERVAL,
                now(),
            );
            assert_eq!(
                out.target.map(|t| t.digest).as_deref(),
                Some(D1),
                "{name}: target changed"
            );
            let (got_reason, message) = out.error.unwrap();
            assert_eq!(got_reason, reason, "{name}");
            assert!(
                message.contains("keeping the previous target"),
                "{name}: {message}"
            );
            assert_eq!(out.requeue_after, MAX_RETRY_AFTER_ERROR, "{name}");
        }
        let out = apply_resolution(
            &CurrentTarget::default(),
            Err(RegistryError::NotFound {
                reference: "r".into(),
                message: "m".into(),
            }),
            &archs,
            "r",
            Duration::from_secs(10),
            now(),
        );
        assert_eq!(out.target, None);
        assert!(out.error.unwrap().1.contains("no target yet"));
        assert_eq!(
            out.requeue_after,
            Duration::from_secs(10),
            "a short interval is not lengthened"
        );
    }

    #[test]
    fn architectures_come_from_labels_and_reports() {
        let got = required_architectures(
            [Some("amd64"), None, Some("arm64")],
            [Some("amd64"), Some(""), None],
        );
        assert_eq!(
            got,
            BTreeSet::from(["amd64".to_owned(), "arm64".to_owned()])
        );
    }
}
