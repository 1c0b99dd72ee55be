//! Step 1 of the plan, the target, failing closed: the image resolved for this plan, or,
//! when resolution failed, the one the pool's status already names. Nothing
//! is rolled to an image the controller could not verify; the problem goes
//! on the pool's Degraded condition.

use api::{BootcNodePool, BootcNodePoolStatus, Reason};

use crate::model::{Problem, Target, TargetProblem};

/// The target in force (None: the pool has never had one).
pub fn in_force(
    resolved: &Result<Target, TargetProblem>,
    current: &BootcNodePoolStatus,
    problems: &mut Vec<Problem>,
) -> Option<Target> {
    match resolved {
        Ok(t) => Some(t.clone()),
        Err(p) => {
            problems.push((p.reason, p.message.clone()));
            recorded(current)
        }
    }
}

/// The target the pool's status records (its digest, image and platform
/// digests, so that a restarted controller keeps them): the one
/// kept in force until a new one is verified. The one home of "keep the
/// previous target": the controller's tag resolver and `kubectl bootc`
/// read it here too.
pub fn recorded(status: &BootcNodePoolStatus) -> Option<Target> {
    match (&status.target_digest, &status.target_image) {
        (Some(digest), Some(image)) => Some(Target {
            digest: digest.clone(),
            image: image.clone(),
            platform_digests: status.target_platform_digests.clone(),
            kubelet: status.target_kubelet_version.clone(),
        }),
        _ => None,
    }
}

/// No target at all: say so, unless a problem already explains it.
pub fn report_none(pool: &BootcNodePool, problems: &mut Vec<Problem>) {
    if problems.is_empty() {
        problems.push((
            Reason::InvalidSpec,
            format!(
                "spec.image.ref {:?}: no target image",
                pool.spec.image.reference
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(d: &str) -> Target {
        Target {
            digest: d.into(),
            image: format!("r@{d}"),
            platform_digests: Vec::new(),
            kubelet: None,
        }
    }

    #[test]
    fn a_failed_resolution_keeps_the_previous_target_and_reports() {
        let before = BootcNodePoolStatus {
            target_digest: Some("sha256:a".into()),
            target_image: Some("r@sha256:a".into()),
            ..BootcNodePoolStatus::default()
        };
        let failed = Err(TargetProblem {
            reason: Reason::RegistryUnreachable,
            message: "down".into(),
        });
        // (what, resolved, status before, in force, problems)
        type Row = (
            &'static str,
            Result<Target, TargetProblem>,
            BootcNodePoolStatus,
            Option<Target>,
            usize,
        );
        let rows: Vec<Row> = vec![
            (
                "resolved",
                Ok(t("sha256:b")),
                before.clone(),
                Some(t("sha256:b")),
                0,
            ),
            (
                "failed: kept",
                failed.clone(),
                before,
                Some(t("sha256:a")),
                1,
            ),
            (
                "failed, none before",
                failed,
                BootcNodePoolStatus::default(),
                None,
                1,
            ),
        ];
        for (what, resolved, current, want, n) in rows {
            let mut problems = Vec::new();
            assert_eq!(in_force(&resolved, &current, &mut problems), want, "{what}");
            assert_eq!(problems.len(), n, "{what}");
        }
    }
}
