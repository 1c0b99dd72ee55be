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
//! What cannot be read is not guessed: an image that declares no OS
//! identity, or a member's booted image the registry no longer serves, is
//! not compared (the daemons' own checks and the health gates remain).

use std::collections::BTreeMap;

use api::Reason;
use api::image_labels::{CONTAINERS_BOOTC, OS_ID, OS_VERSION_ID, OSTREE_BOOTABLE};

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
