//! How the operator reads a BootcNode: every question the planner, the
//! kubectl plugin, the daemon, the tests and the benchmark ask of one (in a
//! slot, approved, Degraded, which image it runs, whether its daemon is
//! behind its spec, its phase and since when) is one method here, so that no
//! consumer answers it its own way. The Node's readings are in
//! [`crate::node_health`].

use crate::conditions::Condition;
use jiff::Timestamp;

use crate::labels::{
    HEALTH_FAILED_ANNOTATION, HEALTH_FAILED_BECAUSE_ANNOTATION, IN_REBOOT_SLOT_ANNOTATION,
    SKIPPED_ANNOTATION, SKIPPED_BECAUSE_ANNOTATION,
};
use crate::{
    BootEntryStatus, BootcNode, BootcNodeSpec, ConditionType, DaemonPhase, DesiredImageState,
    conditions,
};

/// bootc's own words when it refuses to update a host with an incompatible
/// deployment (`bootc upgrade` and `bootc switch`, `deploy.rs`): quoted to
/// the person who must act.
pub const BOOTC_INCOMPATIBLE: &str = "Deployment contains local rpm-ostree modifications; cannot upgrade via bootc. You can run `rpm-ostree reset` to undo the modifications.";

/// Why bootc's report of a host is one the operator cannot update from an
/// image, if it is (lossy or strange metadata falls back to the
/// conservative answer: not up to date, not to be moved):
///
/// * a deployment bootc marks `incompatible` (local rpm-ostree changes):
///   bootc itself refuses to switch such a host;
/// * a booted deployment with no container image (an ostree remote or a
///   plain commit: another origin), or with an image but no digest: what it
///   runs cannot be compared with any target, so it is never up to date.
///
/// None when nothing is booted (not reported yet, or not a bootc host: the
/// daemon's `NotBootcHost`) or the host is one bootc manages from an image.
pub fn unmanageable(
    booted: Option<&BootEntryStatus>,
    staged: Option<&BootEntryStatus>,
) -> Option<String> {
    let booted = booted?;
    let incompatible = [("booted", Some(booted)), ("staged", staged)]
        .into_iter()
        .find(|(_, e)| e.is_some_and(|e| e.incompatible));
    if let Some((which, _)) = incompatible {
        return Some(format!(
            "bootc marks the {which} deployment incompatible: \"{BOOTC_INCOMPATIBLE}\" The node is given no new image and no reboot slot until a person undoes the local changes"
        ));
    }
    let Some(image) = booted.image.as_deref() else {
        return Some("bootc reports a booted deployment that is not from a container image (another origin, such as an ostree remote): it cannot be compared with any target; the node is given no new image and no reboot slot until a person switches it to an image (`bootc switch`)".to_owned());
    };
    booted.image_digest.is_none().then(|| format!(
        "bootc reports the booted image {image} with no digest: what it runs cannot be compared with any target; the node is given no new image and no reboot slot until a person repairs the host"
    ))
}

impl BootcNodeSpec {
    /// Approved to boot the staged image (`desiredImageState: Booted`): what
    /// a BootcNode says, and what a plan writes.
    pub fn approved(&self) -> bool {
        self.desired_image_state == DesiredImageState::Booted
    }
}

impl BootcNode {
    /// Does the BootcNode carry a slot record of 0.1.0
    /// (`bootc.dev/in-reboot-slot`)? A slot is recorded on the Node
    /// (`rollout::reboot::slots::holds_slot`); this old record is only read
    /// so that a slot taken before an upgrade is kept.
    pub fn legacy_slot_record(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(IN_REBOOT_SLOT_ANNOTATION))
    }

    /// Approved to boot its staged image (`desiredImageState: Booted`).
    pub fn approved(&self) -> bool {
        self.spec.approved()
    }

    /// Its `Degraded` condition, when that is True.
    pub fn degraded(&self) -> Option<&Condition> {
        conditions::find(&self.status.as_ref()?.conditions, ConditionType::Degraded)
            .filter(|c| c.status == "True")
    }

    /// Is its `Degraded` condition True?
    pub fn is_degraded(&self) -> bool {
        self.degraded().is_some()
    }

    /// Why bootc's report of its host is one the operator cannot update
    /// from an image ([`unmanageable`]), read from its status whatever its
    /// daemon says of it: never up to date, never moved.
    pub fn unmanageable(&self) -> Option<String> {
        let status = self.status.as_ref()?;
        unmanageable(status.booted.as_ref(), status.staged.as_ref())
    }

    /// Does it boot `image` (`repository@digest`)? See
    /// [`crate::BootEntryStatus::is_image`]: the reference bootc was given,
    /// or the manifest digest it deployed, matches.
    pub fn runs(&self, image: &str) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.booted.as_ref())
            .is_some_and(|b| b.is_image(image))
    }

    /// Does it boot `image` (`repository@digest`) or, `image` naming an
    /// index, one of the index's platform manifests (`platform_digests`)?
    /// A host installed from the index's tag reports the tag and its
    /// platform's digest, never the index's: it runs the image all the
    /// same. See [`crate::BootEntryStatus::is_image_or_platform`].
    pub fn runs_image_or_platform(&self, image: &str, platform_digests: &[String]) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.booted.as_ref())
            .is_some_and(|b| b.is_image_or_platform(image, platform_digests))
    }

    /// The image it runs, as its spec may name it: the spec itself when it
    /// boots that (so that nothing is written), else its booted deployment
    /// pinned ([`crate::BootEntryStatus::pinned_image`]: a host installed
    /// from a tag reports the tag, which no spec may hold). None: bootc
    /// reports no booted image with a digest.
    pub fn running_image(&self) -> Option<String> {
        if self.runs(&self.spec.desired_image) {
            return Some(self.spec.desired_image.to_string());
        }
        self.status.as_ref()?.booted.as_ref()?.pinned_image()
    }

    /// Has its daemon not reported on its current spec? No status yet, or
    /// the last one answers an older generation.
    pub fn daemon_behind(&self) -> bool {
        match &self.status {
            None => true,
            Some(s) => matches!(
                (s.observed_generation, self.metadata.generation),
                (Some(seen), Some(generation)) if seen < generation
            ),
        }
    }

    /// Does the controller wait on its daemon? It is behind its spec, unless
    /// it is Idle on the desired image: a spec change that leaves that image
    /// booted (the approval withdrawn as a slot is released) asks nothing of
    /// the daemon, which writes nothing for it (the daemon's
    /// `machine::worth_writing`).
    pub fn owes_an_answer(&self) -> bool {
        self.daemon_behind()
            && !(self.phase() == Some(DaemonPhase::Idle) && self.runs(&self.spec.desired_image))
    }

    /// The daemon's phase (None: not reported yet, or one this build does
    /// not know, from a newer daemon: it counts as none).
    pub fn phase(&self) -> Option<DaemonPhase> {
        self.status.as_ref()?.phase().ok().flatten()
    }

    /// Since when it is in its phase (the `Idle` condition's last
    /// transition).
    pub fn phase_since(&self) -> Option<Timestamp> {
        conditions::find(&self.status.as_ref()?.conditions, ConditionType::Idle)
            .map(|c| c.last_transition_time.0)
    }

    /// Approved to boot and Degraded: its reboot or apply failed. After a
    /// reboot into the wrong image the daemon does not apply again for the
    /// same spec (that could loop), so only a person moves such a node: a
    /// new image for the pool, or a retry
    /// ([`crate::labels::RETRY_ANNOTATION`]). Every other failure is retried
    /// on its own (a download with backoff, a drain by the controller).
    pub fn awaits_retry(&self) -> bool {
        self.approved() && self.is_degraded()
    }

    /// The target digest the node was skipped for after a failed drain, and
    /// why (`bootc.dev/skipped`, `bootc.dev/skipped-because`).
    pub fn skipped(&self) -> Option<(&str, &str)> {
        self.digest_mark(SKIPPED_ANNOTATION, SKIPPED_BECAUSE_ANNOTATION)
    }

    /// The target digest the node failed its health gate on, and the check
    /// it failed (`bootc.dev/health-failed`,
    /// `bootc.dev/health-failed-because`).
    pub fn health_failed(&self) -> Option<(&str, &str)> {
        self.digest_mark(HEALTH_FAILED_ANNOTATION, HEALTH_FAILED_BECAUSE_ANNOTATION)
    }

    /// A mark the controller keeps for one target digest: the digest, and
    /// why ("" when the reason is missing).
    fn digest_mark(&self, digest_key: &str, why_key: &str) -> Option<(&str, &str)> {
        let annotations = self.metadata.annotations.as_ref()?;
        let digest = annotations.get(digest_key)?;
        let why = annotations.get(why_key).map_or("", String::as_str);
        Some((digest.as_str(), why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::BootcNodeBuilder;
    use crate::{BootEntryStatus, BootcNodeStatus, Reason};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn image(d: &str) -> String {
        format!("r.example/os@{d}")
    }

    fn bn() -> BootcNode {
        BootcNodeBuilder::new("n1").desired(image(D2)).build()
    }

    fn condition(type_: ConditionType, status: &str, reason: &str, at: i64) -> Condition {
        Condition {
            type_: type_.as_str().into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{type_} {status}").into(),
            last_transition_time: Time(Timestamp::from_second(at).unwrap_or_default()),
            observed_generation: None,
        }
    }

    fn with_status(mut b: BootcNode, f: impl FnOnce(&mut BootcNodeStatus)) -> BootcNode {
        f(b.status.get_or_insert_default());
        b
    }

    #[test]
    fn slot_and_approval() {
        let mut b = bn();
        assert!(!b.legacy_slot_record() && !b.approved());
        b.metadata
            .annotations
            .get_or_insert_default()
            .insert(IN_REBOOT_SLOT_ANNOTATION.into(), "true".into());
        b.spec.desired_image_state = DesiredImageState::Booted;
        assert!(b.legacy_slot_record() && b.approved());
        // Another annotation is no slot.
        let mut other = bn();
        other
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::labels::WAS_CORDONED_ANNOTATION.into(), "true".into());
        assert!(!other.legacy_slot_record());
    }

    #[test]
    fn degraded_and_awaiting_a_retry() {
        let degraded = |status: &str| {
            with_status(bn(), |s| {
                s.conditions = vec![
                    condition(ConditionType::Idle, "False", Reason::Rebooting.as_str(), 5),
                    condition(ConditionType::Degraded, status, Reason::Error.as_str(), 7),
                ];
            })
        };
        // (what, BootcNode, degraded, awaits a retry)
        let mut approved = degraded("True");
        approved.spec.desired_image_state = DesiredImageState::Booted;
        let mut approved_healthy = degraded("False");
        approved_healthy.spec.desired_image_state = DesiredImageState::Booted;
        let rows = [
            ("no status", bn(), false, false),
            ("Degraded, not approved", degraded("True"), true, false),
            ("Degraded False", degraded("False"), false, false),
            ("approved and Degraded", approved, true, true),
            ("approved and healthy", approved_healthy, false, false),
        ];
        for (what, b, is_degraded, awaits) in rows {
            assert_eq!(b.is_degraded(), is_degraded, "{what}");
            assert_eq!(b.awaits_retry(), awaits, "{what}");
        }
        let d = degraded("True");
        assert_eq!(
            d.degraded()
                .map(|c| (c.reason.as_str(), c.message.as_str())),
            Some((Reason::Error.as_str(), "Degraded True"))
        );
    }

    #[test]
    fn runs_by_reference_or_by_digest() {
        let booted = |reference: Option<String>, digest: Option<&str>| {
            with_status(bn(), |s| {
                s.booted = Some(BootEntryStatus {
                    image: reference.map(Into::into),
                    image_digest: digest.map(Into::into),
                    ..BootEntryStatus::default()
                });
            })
        };
        // (what, BootcNode, runs image(D2))
        let rows = [
            ("no status", bn(), false),
            ("nothing booted", with_status(bn(), |_| {}), false),
            ("the reference", booted(Some(image(D2)), Some(D1)), true),
            (
                "the digest (by tag)",
                booted(Some("r.example/os:v2".into()), Some(D2)),
                true,
            ),
            ("another image", booted(Some(image(D1)), Some(D1)), false),
            ("a digest only, another", booted(None, Some(D1)), false),
        ];
        for (what, b, want) in rows {
            assert_eq!(b.runs(&image(D2)), want, "{what}");
        }
    }

    #[test]
    fn the_image_it_runs_as_a_spec_names_it() {
        let booted = |reference: &str, digest: Option<&str>| {
            with_status(bn(), |s| {
                s.booted = Some(BootEntryStatus {
                    image: Some(reference.into()),
                    image_digest: digest.map(Into::into),
                    ..BootEntryStatus::default()
                });
            })
        };
        // (what, BootcNode (its spec image(D2)), the image it runs)
        let rows = [
            ("no status", bn(), None),
            (
                "its spec, by tag",
                booted("r.example/os:v2", Some(D2)),
                Some(image(D2)),
            ),
            (
                "another, by tag",
                booted("r.example/os:v1", Some(D1)),
                Some(image(D1)),
            ),
            ("another, no digest", booted("r.example/os:v1", None), None),
        ];
        for (what, b, want) in rows {
            assert_eq!(b.running_image(), want, "{what}");
        }
    }

    #[test]
    fn a_host_bootc_cannot_update_from_an_image_is_named_in_its_words() {
        let entry = |image: Option<&str>, digest: Option<&str>, incompatible: bool| {
            Some(BootEntryStatus {
                image: image.map(Into::into),
                image_digest: digest.map(Into::into),
                incompatible,
                ..BootEntryStatus::default()
            })
        };
        let ok = entry(Some("r.example/os:v1"), Some(D1), false);
        // (what, booted, staged, the reason's words, None: manageable)
        let rows = [
            ("nothing booted", None, None, None),
            ("an image with its digest", ok.clone(), ok.clone(), None),
            (
                "booted incompatible",
                entry(None, None, true),
                None,
                Some(BOOTC_INCOMPATIBLE),
            ),
            (
                "staged incompatible",
                ok.clone(),
                entry(None, None, true),
                Some("staged deployment incompatible"),
            ),
            (
                "another origin",
                entry(None, None, false),
                None,
                Some("not from a container image"),
            ),
            (
                "no digest",
                entry(Some("r.example/os:v1"), None, false),
                None,
                Some("r.example/os:v1 with no digest"),
            ),
        ];
        for (what, booted, staged, says) in rows {
            let why = unmanageable(booted.as_ref(), staged.as_ref());
            match says {
                None => assert_eq!(why, None, "{what}"),
                Some(words) => assert!(
                    why.as_deref().is_some_and(|w| w.contains(words)),
                    "{what}: {why:?}"
                ),
            }
            let b = with_status(bn(), |s| {
                s.booted = booted;
                s.staged = staged;
            });
            assert_eq!(b.unmanageable(), why, "{what}");
        }
    }

    #[test]
    fn the_daemon_is_behind_until_it_answers_the_spec() {
        let answered = |seen: Option<i64>, generation: Option<i64>| {
            let mut b = with_status(bn(), |s| s.observed_generation = seen);
            b.metadata.generation = generation;
            b
        };
        // (what, BootcNode, behind)
        let rows = [
            ("no status", bn(), true),
            ("answers an older spec", answered(Some(2), Some(3)), true),
            ("answers this spec", answered(Some(3), Some(3)), false),
            ("a generation not known", answered(Some(3), None), false),
            ("a status for no generation", answered(None, Some(3)), false),
        ];
        for (what, b, want) in rows {
            assert_eq!(b.daemon_behind(), want, "{what}");
        }
    }

    #[test]
    fn a_daemon_idle_on_its_desired_image_owes_no_answer() {
        let behind = |phase: Reason, booted: &str| {
            let mut b = with_status(bn(), |s| {
                s.observed_generation = Some(2);
                s.booted = Some(BootEntryStatus {
                    image: Some(image(booted).into()),
                    image_digest: Some(booted.into()),
                    ..BootEntryStatus::default()
                });
                let idle = if phase == Reason::Idle {
                    "True"
                } else {
                    "False"
                };
                s.conditions = vec![condition(ConditionType::Idle, idle, phase.as_str(), 1)];
            });
            b.metadata.generation = Some(3);
            b
        };
        // (what, BootcNode, owes an answer)
        let rows = [
            ("Idle on the desired image", behind(Reason::Idle, D2), false),
            ("Idle on another image", behind(Reason::Idle, D1), true),
            (
                "Staged for the desired image",
                behind(Reason::Staged, D1),
                true,
            ),
            ("no status", bn(), true),
        ];
        for (what, b, want) in rows {
            assert_eq!(b.owes_an_answer(), want, "{what}");
        }
        let mut answered = behind(Reason::Idle, D1);
        answered.metadata.generation = Some(2);
        assert!(!answered.owes_an_answer(), "not behind");
    }

    #[test]
    fn phase_and_since_when() {
        assert_eq!((bn().phase(), bn().phase_since()), (None, None));
        let staged = with_status(bn(), |s| {
            s.conditions = vec![condition(
                ConditionType::Idle,
                "False",
                Reason::Staged.as_str(),
                42,
            )];
        });
        assert_eq!(staged.phase(), Some(DaemonPhase::Staged));
        assert_eq!(staged.phase_since(), Timestamp::from_second(42).ok());
        let newer = with_status(bn(), |s| {
            s.conditions = vec![condition(ConditionType::Idle, "False", "Verifying", 42)];
        });
        assert_eq!(newer.phase(), None, "a phase this build does not know");
        assert_eq!(newer.phase_since(), Timestamp::from_second(42).ok());
    }
}
