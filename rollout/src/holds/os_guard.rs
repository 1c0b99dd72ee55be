//! The OS guards a new target passes before any node is told about it,
//! read from the image's config labels ([`api::image_labels`]) beside what
//! the members' booted images say of themselves:
//!
//! * **A bootc image.** A target without `containers.bootc=1` (or the older
//!   `ostree.bootable`) is refused: bootc would pull it and the host would
//!   not boot it (`ImageNotBootable`).
//! * **The same OS family and major version.** A target whose `redhat.id`
//!   differs from a member's booted image's, or whose `redhat.version-id`
//!   has another major (`42` to `43`, `9.6` to `10`), is refused unless
//!   the pool says `spec.image.allowMajorUpgrade: true`
//!   (`OsMajorChange`): a major upgrade is a person's decision, made with
//!   the distribution's notes, not a tag that moved.
//!
//! * **A kubelet within the version skew policy.** In a bootc host the
//!   kubelet ships in the OS image: a target that declares its kubelet
//!   (`dev.bootc.kubelet.version`) newer than the API server, or more than
//!   three minor versions older, is refused (`KubeletSkew`), the policy
//!   quoted. A target that declares none is not refused; the pool's
//!   condition `KubeletSkewChecked` says it was not checked.
//!
//! What cannot be read is not guessed: an image that declares no OS
//! identity, or a member's booted image the registry no longer serves, is
//! not compared (the daemons' own checks and the health gates remain).

use std::collections::BTreeMap;

use api::conditions::ConditionUpdate;
use api::image_labels::{CONTAINERS_BOOTC, KUBELET_VERSION, OS_ID, OS_VERSION_ID, OSTREE_BOOTABLE};
use api::{ConditionType, Reason};

use crate::model::TargetProblem;

/// What an image's config says of the OS it carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageOs {
    pub bootable: bool,
    /// os-release's `ID`.
    pub id: Option<String>,
    /// os-release's `VERSION_ID`.
    pub version_id: Option<String>,
}

impl ImageOs {
    /// Reads an image config's labels.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> ImageOs {
        let flag = |key: &str| {
            labels
                .get(key)
                .is_some_and(|v| matches!(v.trim(), "1" | "true"))
        };
        let text = |key: &str| {
            labels
                .get(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        ImageOs {
            bootable: flag(CONTAINERS_BOOTC) || flag(OSTREE_BOOTABLE),
            id: text(OS_ID),
            version_id: text(OS_VERSION_ID),
        }
    }

    /// `fedora 42`, or None when it declares no identity.
    fn identity(&self) -> Option<(&str, &str)> {
        Some((self.id.as_deref()?, major(self.version_id.as_deref()?)))
    }

    fn describe(&self) -> String {
        format!(
            "{} {}",
            self.id.as_deref().unwrap_or("?"),
            self.version_id.as_deref().unwrap_or("?")
        )
    }
}

/// The major of a `VERSION_ID`: what comes before its first dot.
pub fn major(version_id: &str) -> &str {
    version_id.split('.').next().unwrap_or(version_id)
}

/// A member's booted image and what its config says, with how many
/// members boot it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    pub image: String,
    pub os: ImageOs,
    pub members: usize,
}

/// Does [`check`] compare `os` with what the members run? Only a bootc
/// image that declares its OS, when the pool does not allow a major
/// upgrade: otherwise the members' images need not be read.
pub fn compares_members(os: &ImageOs, allow_major_upgrade: bool) -> bool {
    os.bootable && !allow_major_upgrade && os.identity().is_some()
}

/// Checks a new target (`reference`, its config's `os`) against what the
/// members run.
pub fn check(
    reference: &str,
    os: &ImageOs,
    running: &[Running],
    allow_major_upgrade: bool,
) -> Result<(), TargetProblem> {
    if !os.bootable {
        return Err(TargetProblem {
            reason: Reason::ImageNotBootable,
            message: format!(
                "{reference} is not a bootc image: its config has no label {CONTAINERS_BOOTC}=1 (every bootc base image sets it); a host would not boot it"
            ),
        });
    }
    if allow_major_upgrade {
        return Ok(());
    }
    let Some((id, major)) = os.identity() else {
        return Ok(());
    };
    let differs = running.iter().find(|r| {
        r.os.identity()
            .is_some_and(|(their_id, their_major)| their_id != id || their_major != major)
    });
    match differs {
        None => Ok(()),
        Some(r) => Err(TargetProblem {
            reason: Reason::OsMajorChange,
            message: format!(
                "{reference} is {} and {} member(s) run {} ({}): a change of OS family or major version is refused unless the pool sets spec.image.allowMajorUpgrade: true (read the distribution's upgrade notes first)",
                os.describe(),
                r.members,
                r.os.describe(),
                r.image
            ),
        }),
    }
}

/// Kubernetes' version skew policy for the kubelet, quoted where a target
/// is refused for it.
pub const KUBELET_SKEW_POLICY: &str = "Kubernetes' version skew policy: kubelet must not be newer than kube-apiserver, and may be up to three minor versions older";

/// A Kubernetes `major.minor`, as `/version` or a kubelet label gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubeVersion {
    /// Reads `v1.37.2`, `1.37`, `1.37.0-rc.1+k3s1`: the first two numbers.
    pub fn parse(text: &str) -> Option<KubeVersion> {
        let mut parts = text.trim().trim_start_matches('v').split('.');
        let number = |p: Option<&str>| -> Option<u32> {
            let p = p?;
            let digits = p
                .find(|c: char| !c.is_ascii_digit())
                .map_or(p, |end| &p[..end]);
            digits.parse().ok()
        };
        Some(KubeVersion {
            major: number(parts.next())?,
            minor: number(parts.next())?,
        })
    }
}

impl std::fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Checks the kubelet a target declares (`declared`, the label's value)
/// against the API server's version.
pub fn kubelet_skew(
    reference: &str,
    declared: &str,
    api_server: KubeVersion,
) -> Result<(), TargetProblem> {
    let refuse = |why: String| TargetProblem {
        reason: Reason::KubeletSkew,
        message: format!("{reference}: {why} ({KUBELET_SKEW_POLICY})"),
    };
    let Some(kubelet) = KubeVersion::parse(declared) else {
        return Err(refuse(format!(
            "its label {KUBELET_VERSION}={declared:?} is not a Kubernetes version"
        )));
    };
    let behind = api_server.minor.saturating_sub(kubelet.minor);
    if kubelet.major != api_server.major {
        Err(refuse(format!(
            "its kubelet {kubelet} is of another major version than the API server {api_server}"
        )))
    } else if kubelet > api_server {
        Err(refuse(format!(
            "its kubelet {kubelet} is newer than the API server {api_server}"
        )))
    } else if behind > 3 {
        Err(refuse(format!(
            "its kubelet {kubelet} is {behind} minor versions older than the API server {api_server}"
        )))
    } else {
        Ok(())
    }
}

/// The pool's `KubeletSkewChecked` condition for its target's `kubelet`.
pub fn kubelet_condition(kubelet: Option<&str>) -> ConditionUpdate {
    match kubelet {
        Some(v) => ConditionUpdate::new(
            ConditionType::KubeletSkewChecked,
            true,
            Reason::KubeletWithinSkew,
            format!(
                "the target's kubelet {v} ({KUBELET_VERSION}) was checked against the API server before any node was told"
            ),
        ),
        None => ConditionUpdate::new(
            ConditionType::KubeletSkewChecked,
            false,
            Reason::KubeletUndeclared,
            format!(
                "the target declares no kubelet version (label {KUBELET_VERSION}): its kubelet's skew against the API server is not checked"
            ),
        ),
    }
}
