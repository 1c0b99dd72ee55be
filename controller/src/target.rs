//! The target layer: which digest a pool should run, found before the plan
//! (whose step 1, `rollout::target`, keeps the previous target in force when
//! this fails). It holds the [`Resolve`] seam and the resolver without a
//! registry ([`DigestOnly`]) here, the tag policy ([`tag_policy`], pure),
//! the registry client ([`registry`]) and the resolver that schedules it
//! ([`resolver`], its memory in the pool's state: [`TargetMemory`]).
//!
//! A digest reference (`repo@sha256:...`, with or without a tag) names its
//! target; the registry resolver (`crate::target::resolver`) checks it against the
//! registry as it checks a tag's digest (the manifest exists and covers
//! every member's architecture) before any node is told. A tag-only
//! reference is resolved against the registry. Without a registry
//! ([`DigestOnly`], the in-process tests' resolver) a digest is taken as
//! it is, and tag references are reported as `Degraded/InvalidSpec` "tag
//! resolution not yet available"; the previous target (if any) stays in
//! force.
//!
//! May import `rollout`, `api` and [`crate::metrics`]; never the runtime
//! above it, nor the actions beside it.

pub mod api_server;
pub mod registry;
pub mod resolver;
pub mod tag_policy;

use std::time::Duration;

use api::BootcNodePool;
use api::Reason;
use api::image_ref::ImageRef;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;

use rollout::{Target, TargetProblem};

/// The outcome of resolving a pool's image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub target: Result<Target, TargetProblem>,
    /// When to resolve again (tag polling); None for digest references.
    pub requeue_after: Option<Duration>,
}

/// Resolves a pool's reference to a target. Implementations may call a
/// registry for tag references; they must keep working while the pool is
/// paused and must fail closed (return a [`TargetProblem`]).
pub trait Resolve: Send + Sync + 'static {
    /// `members`: what the pool's members run, which a new target is
    /// checked against. `memory`: what the resolver keeps about this pool
    /// between reconciles (in the pool's state).
    fn resolve<'a>(
        &'a self,
        pool: &'a BootcNodePool,
        pull_secret: Option<&'a Secret>,
        members: MembersRun<'a>,
        memory: &'a mut TargetMemory,
    ) -> BoxFuture<'a, Resolution>;
}

/// What a pool's members run, as a new target is checked against it.
#[derive(Clone, Copy, Debug)]
pub struct MembersRun<'a> {
    /// Every architecture they run (labels and reports): a new target must
    /// cover all of them.
    pub architectures: &'a std::collections::BTreeSet<String>,
    /// The images they boot (`repository@digest`), with how many boot
    /// each: a new target's OS is compared with theirs
    /// (`rollout::holds::os_guard`).
    pub booted: &'a std::collections::BTreeMap<String, usize>,
}

/// What a resolver remembers about one pool between its reconciles: when
/// its reference is next checked against the registry, for which spec, and
/// the last check's failure (shown until the next try).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetMemory {
    pub(crate) schedule: Option<Schedule>,
    pub(crate) last_error: Option<(Reason, String)>,
    /// The last refresh request honoured (`kubectl bootc refresh`): its
    /// value, and when.
    pub(crate) refreshed: Option<(String, jiff::Timestamp)>,
}

/// When a pool's reference is next resolved, and for which spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// The pool generation the last resolution was made for.
    pub(crate) generation: Option<i64>,
    pub(crate) next: jiff::Timestamp,
}

/// A pool's reference as resolving it sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not usable: the resolution that says why (`InvalidSpec`).
    Invalid(Resolution),
    /// Pinned by a sha256 digest (a tag beside it is dropped).
    Digest(ImageRef),
    /// A tag only: resolved against the registry.
    Tag(ImageRef),
}

fn invalid(message: String) -> Parsed {
    Parsed::Invalid(Resolution {
        target: Err(TargetProblem {
            reason: Reason::InvalidSpec,
            message,
        }),
        requeue_after: None,
    })
}

/// Parses a pool's `spec.image.ref`.
pub fn parse_reference(reference: &str) -> Parsed {
    match ImageRef::parse(reference) {
        Err(e) => invalid(format!("spec.image.ref: {e}")),
        Ok(image) => match &image.digest {
            Some(digest) if api::image_ref::is_sha256_digest(digest) => Parsed::Digest(image),
            Some(digest) => invalid(format!(
                "spec.image.ref: only sha256 digests are supported, got {digest}"
            )),
            None => Parsed::Tag(image),
        },
    }
}

/// The target a digest reference names, unchecked: an index's platform
/// digests are not known without the registry.
pub fn pinned_target(image: &ImageRef) -> Option<Target> {
    image.digest.as_ref().map(|digest| Target {
        digest: digest.clone(),
        image: image.pinned(digest),
        platform_digests: Vec::new(),
        kubelet: None,
    })
}

/// Answers a digest reference without a registry ([`DigestOnly`]); returns
/// `Err(image)` with the parsed reference when it is a tag.
pub fn resolve_digest_ref(reference: &str) -> Result<Resolution, ImageRef> {
    match parse_reference(reference) {
        Parsed::Invalid(resolution) => Ok(resolution),
        Parsed::Digest(image) => Ok(Resolution {
            target: pinned_target(&image).ok_or_else(|| TargetProblem {
                reason: Reason::InvalidSpec,
                message: format!("spec.image.ref {image} has no digest"),
            }),
            requeue_after: None,
        }),
        Parsed::Tag(image) => Err(image),
    }
}

/// The resolver without a registry: digest references only.
#[derive(Clone, Copy, Debug, Default)]
pub struct DigestOnly;

impl Resolve for DigestOnly {
    fn resolve<'a>(
        &'a self,
        pool: &'a BootcNodePool,
        _pull_secret: Option<&'a Secret>,
        _members: MembersRun<'a>,
        _memory: &'a mut TargetMemory,
    ) -> BoxFuture<'a, Resolution> {
        let out = match resolve_digest_ref(&pool.spec.image.reference) {
            Ok(resolution) => resolution,
            Err(image) => Resolution {
                target: Err(TargetProblem {
                    reason: Reason::InvalidSpec,
                    message: format!(
                        "spec.image.ref {image} is a tag: tag resolution not yet available; use a digest reference"
                    ),
                }),
                requeue_after: None,
            },
        };
        Box::pin(async move { out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    #[test]
    fn digest_refs_resolve_without_a_registry() {
        let r = resolve_digest_ref(&format!("quay.io/acme/os@{D}")).unwrap();
        assert_eq!(
            r.target,
            Ok(Target {
                digest: D.into(),
                image: format!("quay.io/acme/os@{D}"),
                platform_digests: Vec::new(),
                kubelet: None,
            })
        );
        // Tag and digest: the digest wins, the tag is dropped from the image.
        let r = resolve_digest_ref(&format!("quay.io/acme/os:prod@{D}")).unwrap();
        assert_eq!(r.target.unwrap().image, format!("quay.io/acme/os@{D}"));
    }

    #[tokio::test]
    async fn tag_refs_need_a_registry() {
        assert!(resolve_digest_ref("quay.io/acme/os:prod").is_err());
        let pool = BootcNodePool::new(
            "p",
            serde_json::from_value(serde_json::json!({
                "nodeSelector": {}, "image": {"ref": "quay.io/acme/os:prod"}
            }))
            .unwrap(),
        );
        let (architectures, booted) = (Default::default(), Default::default());
        let members = MembersRun {
            architectures: &architectures,
            booted: &booted,
        };
        let r = DigestOnly
            .resolve(&pool, None, members, &mut TargetMemory::default())
            .await;
        let problem = r.target.unwrap_err();
        assert_eq!(problem.reason, Reason::InvalidSpec);
        assert!(problem.message.contains("tag resolution not yet available"));
    }
}
