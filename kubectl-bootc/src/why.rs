//! `kubectl bootc why NODE`: where a node stands and why, then the
//! evidence. The first line is the headline (`status` shows it in its WHY
//! column); the lines after it are the evidence.
//!
//! The headline is the planner's: the plugin runs the controller's plan on
//! what it read ([`crate::plan::standings`]) and renders the member's
//! [`rollout::Standing`], decided once by `rollout` for the pool's status,
//! the metrics and this command alike. Nothing here decides again; the
//! evidence only reads the objects (the Node's readiness and cordon, the
//! BootcNode's Degraded condition, the pool's own words and Events).

use api::Node;
use api::node_health::{cordoned_by, is_cordoned, not_ready_since};
use api::{BootcNode, BootcNodePool, ConditionType, Reason, event_reasons};
use kube::ResourceExt;
use rollout::standing::About;
use rollout::{Standing, Standings};

use crate::{Snapshot, age, pool_condition, pool_condition_any, pool_of};

/// Why node `name` is (or is not) updating, at `now`.
pub fn why(snap: &Snapshot, name: &str, now: jiff::Timestamp) -> Vec<String> {
    why_lines(snap, name, now)
        .into_iter()
        .map(crate::shown)
        .collect()
}

fn why_lines(snap: &Snapshot, name: &str, now: jiff::Timestamp) -> Vec<String> {
    let node = snap.node(name);
    let Some(bn) = snap.bootc_node(name) else {
        return conflict(snap, name, node)
            .map_or_else(|| not_a_member(snap, name, node), |c| vec![c]);
    };
    let Some(pool) = pool_of(bn).and_then(|p| snap.pool(p)) else {
        return vec![format!(
            "{name}'s pool {} no longer exists: the controller removes its BootcNode",
            pool_of(bn).unwrap_or("<none>")
        )];
    };
    let standings = crate::plan::standings(snap, pool, now);
    member(snap, pool, standings.as_ref(), bn, now)
}

/// The lines of `why` for member `bn` of `pool`, whose members' standings
/// are `standings` (None: the pool has no target yet).
pub fn member(
    snap: &Snapshot,
    pool: &BootcNodePool,
    standings: Option<&Standings>,
    bn: &BootcNode,
    now: jiff::Timestamp,
) -> Vec<String> {
    let pool_name = pool.name_any();
    let name = bn.name_any();
    // Under Finish the plan goes on, and the standings say the rest.
    if pool.metadata.deletion_timestamp.is_some()
        && pool.spec.on_delete == api::DeletionPolicy::Release
    {
        return vec![format!(
            "pool {pool_name} is being deleted: its nodes are uncordoned and released, none is updated"
        )];
    }
    let Some(standings) = standings else {
        let problem = pool_condition(pool, ConditionType::Degraded)
            .map_or(String::new(), |(r, m)| format!(": {r}: {m}"));
        return vec![format!("pool {pool_name} has no target image yet{problem}")];
    };
    let mut out = Vec::new();
    if let Some(c) = bn.degraded() {
        out.push(format!(
            "the node is Degraded ({}): {}",
            c.reason, c.message
        ));
    }
    let Some(standing) = standings.members.get(&name) else {
        out.push(format!(
            "{name} is not a member of pool {pool_name} as the controller plans it (its Node is gone, or no longer matches spec.nodeSelector)"
        ));
        return out;
    };
    let about = About {
        name: &name,
        bn: Some(bn),
        now,
    };
    out.push(standing.headline(about, &standings.pool));
    let node = snap.node(&name);
    evidence(snap, pool, standing, &name, node, now, &mut out);
    out
}

/// A node with no BootcNode that more than one pool claims, as the planner
/// decides it for each pool ([`rollout::members::membership::conflict`]): the pools
/// and what to do (None: no conflict).
fn conflict(snap: &Snapshot, name: &str, node: Option<&Node>) -> Option<String> {
    let node = node?;
    let mut pools = std::collections::BTreeSet::new();
    for pool in &snap.pools {
        let others: Vec<&BootcNodePool> = snap
            .pools
            .iter()
            .filter(|o| o.name_any() != pool.name_any())
            .collect();
        if let Some(claims) = rollout::members::membership::conflict(pool, node, None, &others) {
            pools.insert(pool.name_any());
            pools.extend(claims);
        }
    }
    let mut pools: Vec<String> = pools.into_iter().collect();
    let own = pools.pop()?;
    Some(Standing::InConflict { pools }.headline(
        About {
            name,
            bn: None,
            now: jiff::Timestamp::UNIX_EPOCH,
        },
        &rollout::standing::Pool {
            name: own,
            ..Default::default()
        },
    ))
}

/// A node with no BootcNode: which pools its labels match.
fn not_a_member(snap: &Snapshot, name: &str, node: Option<&Node>) -> Vec<String> {
    use kube::core::SelectorExt;
    let Some(node) = node else {
        return vec![format!("there is no Node named {name}")];
    };
    let matching: Vec<String> = snap
        .pools
        .iter()
        .filter(|p| {
            kube::core::Selector::try_from(p.spec.node_selector.clone())
                .is_ok_and(|s| s.matches(node.labels()))
        })
        .map(|p| p.name_any())
        .collect();
    vec![match matching.as_slice() {
        [] => {
            format!("{name} is not in any pool: no BootcNodePool's nodeSelector matches its labels")
        }
        [one] => format!(
            "{name}'s labels match pool {one}, but it has no BootcNode yet: the controller has not taken it in (is bootc-controller running?)"
        ),
        many => format!(
            "{name}'s labels match pools {}: a node belongs to one pool only (the pools say Degraded/{})",
            many.join(", "),
            Reason::NodeConflict
        ),
    }]
}

/// What the objects add to the standing: the newest drain Warning while it
/// drains, the pool's own words while it waits outside a slot, a stuck
/// report naming the node, the Node not Ready or cordoned.
fn evidence(
    snap: &Snapshot,
    pool: &BootcNodePool,
    standing: &Standing,
    name: &str,
    node: Option<&Node>,
    now: jiff::Timestamp,
    out: &mut Vec<String>,
) {
    if matches!(standing, Standing::Draining { .. })
        && let Some(drain) = last_drain_problem(snap, pool, name)
    {
        out.push(drain);
    }
    let waits = !standing.in_slot() && *standing != Standing::UpToDate;
    if waits && let Some((_, message)) = pool_condition_any(pool, ConditionType::UpToDate) {
        out.push(format!("pool {}: {message}", pool.name_any()));
    }
    if let Some((reason, message)) = pool_condition(pool, ConditionType::Degraded)
        && reason == Reason::NodeStuck
        && message.contains(name)
    {
        out.push(format!("stuck: {message}"));
    }
    if let Some((reason, message)) = pool_condition(pool, ConditionType::Degraded)
        && Reason::parse(reason).is_some_and(Reason::refuses_target)
    {
        out.push(format!(
            "pool {} refuses its new target ({reason}), keeping the one in force: {message}",
            pool.name_any()
        ));
    }
    let Some(node) = node else {
        out.push(format!("there is no Node named {name} (deleted?)"));
        return;
    };
    if let Some(since) = not_ready_since(node) {
        let how_long = since.map_or(String::new(), |t| format!(" for {}", age(t, now)));
        out.push(format!("Node {name} is NotReady{how_long}"));
    }
    if is_cordoned(node) {
        let by = cordoned_by(node).map_or(
            "by someone else (an admin?): it counts against maxUnavailable".to_owned(),
            |p| format!("by the reboot slot of pool {p}"),
        );
        out.push(format!("Node {name} is cordoned {by}"));
    }
}

/// The newest drain Warning about the node (DrainBlocked, DrainFailed).
fn last_drain_problem(snap: &Snapshot, pool: &BootcNodePool, node: &str) -> Option<String> {
    crate::history::pool_events(snap, &pool.name_any())
        .into_iter()
        .rfind(|e| {
            matches!(
                e.reason.as_deref(),
                Some(event_reasons::DRAIN_BLOCKED | event_reasons::DRAIN_FAILED)
            ) && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(node)
        })
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    /// Each case: the headline of `why` contains every wanted piece.
    fn check(cases: Vec<(&str, Snapshot, &str, Vec<&str>)>) {
        for (name, snap, node, wants) in cases {
            let lines = why(&snap, node, now());
            let headline = lines.first().cloned().unwrap_or_default();
            for want in wants {
                assert!(
                    headline.contains(want),
                    "{name}: {headline:?} lacks {want:?}; all: {lines:#?}"
                );
            }
        }
    }

    #[test]
    fn the_headline_names_what_blocks_a_node_outside_a_slot() {
        check(vec![
            (
                "no node",
                snapshot(vec![], vec![], vec![]),
                "ghost",
                vec!["there is no Node named ghost"],
            ),
            (
                "no pool matches",
                snapshot(
                    vec![pool("workers", false)],
                    vec![],
                    vec![labelled(node("n1", true, false), "pool", "infra")],
                ),
                "n1",
                vec!["n1 is not in any pool"],
            ),
            (
                "up to date",
                alone(bn("n1", V2, Phase::Idle), true, false),
                "n1",
                vec!["up to date: runs the target 2.0 (sha256:222222222222)"],
            ),
            (
                "paused",
                alone_in(
                    pool("workers", true),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec!["the pool is paused", "kubectl bootc resume workers"],
            ),
            (
                "held twice",
                snapshot(
                    vec![pool("workers", true)],
                    vec![bn("n1", V1, Phase::Staged)],
                    vec![held(
                        held(node("n1", true, false), "alice", "kernel debugging"),
                        "batch",
                        "",
                    )],
                ),
                "n1",
                vec![
                    "held: given no reboot slot while its Node carries",
                    "hold.bootc.dev/alice (kernel debugging), hold.bootc.dev/batch;",
                ],
            ),
            (
                "on a blocking pod",
                Snapshot {
                    pods: vec![
                        pod_on("n1", "batch", "etl-7", "etl"),
                        pod_on("n1", "apps", "web", "web"),
                    ],
                    ..alone_in(
                        blocking_etl(pool("workers", false)),
                        bn("n1", V1, Phase::Staged),
                        true,
                        false,
                    )
                },
                "n1",
                vec![
                    "staged for 3m, its Node runs batch/etl-7, a blocking pod (spec.disruption.blockingPods): given no reboot slot until it is gone",
                ],
            ),
            (
                "a blocking pod elsewhere: waiting for a slot as usual",
                Snapshot {
                    pods: vec![pod_on("n9", "batch", "etl-7", "etl")],
                    ..alone_in(
                        blocking_etl(pool("workers", false)),
                        bn("n1", V1, Phase::Staged),
                        true,
                        false,
                    )
                },
                "n1",
                vec!["a reboot slot is free for it: it takes it now"],
            ),
            (
                "an alert fires",
                alone_in(
                    alerting(pool("workers", false), "NodeDown"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec![
                    "staged for 3m, held by the pool's gate: alerts fire (spec.rollout.alertGate), no new reboot slot until they resolve",
                ],
            ),
            (
                "waiting for another pool",
                alone_in(
                    depending(pool("workers", false), "infra"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec![
                    "staged for 3m, no new reboot slot until the pools of spec.rollout.dependsOn are up to date (no such pool: infra)",
                ],
            ),
            (
                "waiting for its group's turn",
                snapshot(
                    vec![ordered(pool("workers", false), "zone", "a")],
                    vec![bn("n1", V1, Phase::Staged), bn("n2", V1, Phase::Staging)],
                    vec![
                        node("n1", true, false),
                        labelled(node("n2", true, false), "zone", "a"),
                    ],
                ),
                "n1",
                vec![
                    "waiting for its turn: it is in the nodes in no group of spec.rollout.order, and group 1 of spec.rollout.order has nodes not yet on the target: n2",
                ],
            ),
            (
                "outside the maintenance windows",
                alone_in(
                    windowed(pool("workers", false), "22:00"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec![
                    "outside the pool's maintenance windows (spec.rollout.maintenanceWindows)",
                    "the next opens at 2026-11-23T22:00:00Z, in 5h",
                ],
            ),
            (
                "inside one: waiting for a slot as usual",
                alone_in(
                    windowed(pool("workers", false), "15:00"),
                    bn("n1", V1, Phase::Staged),
                    true,
                    false,
                ),
                "n1",
                vec!["a reboot slot is free for it: it takes it now"],
            ),
            (
                "waiting for a slot held by another node",
                snapshot(
                    vec![pool("workers", false)],
                    vec![
                        bn("n1", V1, Phase::Staged),
                        slotted(bn("n2", V1, Phase::Rebooting), true),
                    ],
                    vec![node("n1", true, false), node("n2", false, true)],
                ),
                "n1",
                vec![
                    "waiting for a reboot slot",
                    "maxUnavailable 1; slots held by n2 (Rebooting)",
                ],
            ),
        ]);
    }

    #[test]
    fn the_headline_names_the_slot_or_what_holds_the_node_back() {
        check(vec![
            (
                "rebooting",
                alone(slotted(bn("n2", V1, Phase::Rebooting), true), false, true),
                "n2",
                vec!["rebooting: approved to boot, the Node NotReady for 3m"],
            ),
            (
                "draining",
                alone(slotted(bn("n2", V1, Phase::Staged), false), true, true),
                "n2",
                vec!["in a reboot slot: cordoned and draining"],
            ),
            (
                "degraded after a failed reboot",
                alone(
                    degrade(
                        slotted(bn("n2", V1, Phase::Idle), true),
                        "rebooted into the wrong image",
                    ),
                    true,
                    true,
                ),
                "n2",
                vec!["the node is Degraded (Error): rebooted into the wrong image"],
            ),
            (
                "halted",
                snapshot(
                    vec![wide(pool("workers", false), 3)],
                    vec![
                        bn("n1", V1, Phase::Staged),
                        degrade(slotted(bn("n3", V1, Phase::Rebooting), true), "no boot"),
                        degrade(slotted(bn("n4", V1, Phase::Rebooting), true), "no boot"),
                    ],
                    vec![
                        node("n1", true, false),
                        node("n3", true, true),
                        node("n4", true, true),
                    ],
                ),
                "n1",
                vec![
                    "the rollout is halted: 2 nodes in reboot slots are unhealthy (Degraded or not Ready): n3, n4",
                ],
            ),
            (
                "daemon silent",
                alone(behind(bn("n1", V1, Phase::Staged)), true, false),
                "n1",
                vec!["its daemon has not answered its spec yet (generation 3, last status for 2)"],
            ),
            (
                "held by the staging bound",
                snapshot(
                    vec![staging_bound(pool("workers", false), 1)],
                    vec![
                        told(bn("n1", V1, Phase::Idle), V1),
                        bn("n2", V1, Phase::Staging),
                    ],
                    vec![node("n1", true, false), node("n2", true, false)],
                ),
                "n1",
                vec!["held by the staging bounds: maxConcurrentStaging 1 (staging now: n2)"],
            ),
        ]);
    }

    /// Where the plugin once read an object its own way, it now says what
    /// the planner decides.
    #[test]
    fn the_headline_follows_the_planners_rules() {
        // The slot record lost (BootcNode recreated), the Node still
        // recorded as disrupted by the pool: the planner holds its slot.
        let mut recorded = node("n2", false, true);
        recorded.annotations_mut().insert(
            api::labels::DISRUPTED_BY_ANNOTATION.into(),
            "workers".into(),
        );
        let mut approved = bn("n2", V1, Phase::Rebooting);
        approved.spec.desired_image_state = api::DesiredImageState::Booted;
        let lost_record = snapshot(vec![pool("workers", false)], vec![approved], vec![recorded]);
        // Degraded on the target: the pool counts it Degraded, not updated.
        let degraded_on_target = alone(
            degrade(bn("n1", V2, Phase::Idle), "bootc status failed"),
            true,
            false,
        );
        // The daemon says Staged, but for another image than the target.
        let mut other_staged = bn("n1", V1, Phase::Staged);
        other_staged.status.as_mut().unwrap().staged = Some(api::BootEntryStatus {
            image: Some(api::Shared::from(format!("r.example/acme/os@{V1}"))),
            image_digest: Some(V1.into()),
            ..api::BootEntryStatus::default()
        });
        // A staged member whose Node is being deleted takes no slot.
        let mut deleting = node("n1", true, false);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
        let being_deleted = snapshot(
            vec![pool("workers", false)],
            vec![bn("n1", V1, Phase::Staged)],
            vec![deleting],
        );
        check(vec![
            (
                "slot record lost, disruption recorded",
                lost_record.clone(),
                "n2",
                vec!["rebooting: approved to boot, the Node NotReady for 3m"],
            ),
            (
                "Degraded on the target",
                degraded_on_target.clone(),
                "n1",
                vec!["the node is Degraded (Error): bootc status failed"],
            ),
            (
                "staged for another image",
                alone(other_staged, true, false),
                "n1",
                vec!["staging: downloading the target for 3m"],
            ),
        ]);
        let lines = why(&degraded_on_target, "n1", now());
        assert_eq!(
            lines.get(1).map(String::as_str),
            Some("runs the target 2.0 (sha256:222222222222)"),
            "{lines:#?}"
        );
        let lines = why(&being_deleted, "n1", now());
        assert_eq!(
            lines.first().map(String::as_str),
            Some("a Node being deleted is given no reboot slot"),
            "{lines:#?}"
        );
        let table = crate::status(&lost_record, Some("workers"), now());
        assert!(
            table.contains("Slots:    maxUnavailable 1; slots held by n2 (Rebooting)\n"),
            "{table}"
        );
        let row = table
            .lines()
            .find(|l| l.starts_with("n2 "))
            .unwrap_or_default();
        assert!(row.contains(" yes "), "the SLOT column: {row}");
    }

    /// n1 labelled for `workers` and for `canary`, whose BootcNode
    /// `owner` owns (None: it has none yet), on `booted`.
    fn claimed_twice(owner: Option<&str>, booted: &str, phase: Phase) -> Snapshot {
        use kube::Resource;
        let mut canary = pool("canary", false);
        canary.spec.node_selector.match_labels =
            Some([("canary".to_owned(), "yes".to_owned())].into());
        let n1 = labelled(
            labelled(node("n1", true, false), "pool", "workers"),
            "canary",
            "yes",
        );
        let bns = owner
            .map(|owner| {
                let mut b = bn("n1", booted, phase);
                if owner == "canary" {
                    b.metadata.owner_references =
                        Some(vec![canary.controller_owner_ref(&()).unwrap()]);
                }
                b
            })
            .into_iter()
            .collect();
        snapshot(vec![pool("workers", false), canary], bns, vec![n1])
    }

    #[test]
    fn a_node_two_pools_claim_says_the_conflict_first() {
        let conflict = vec![
            "in conflict: pools canary, workers all claim n1",
            api::Reason::NodeConflict.as_str(),
            "change the others' spec.nodeSelector, or the Node's labels",
        ];
        check(vec![
            (
                "staged, waiting",
                claimed_twice(Some("workers"), V1, Phase::Staged),
                "n1",
                conflict.clone(),
            ),
            (
                "up to date",
                claimed_twice(Some("workers"), V2, Phase::Idle),
                "n1",
                conflict.clone(),
            ),
            (
                "owned by the other pool",
                claimed_twice(Some("canary"), V1, Phase::Staged),
                "n1",
                conflict.clone(),
            ),
            (
                "no BootcNode yet",
                claimed_twice(None, V1, Phase::Idle),
                "n1",
                conflict,
            ),
        ]);
        // The evidence follows: what the owning pool's rollout says.
        let lines = why(
            &claimed_twice(Some("workers"), V1, Phase::Staged),
            "n1",
            now(),
        );
        assert!(
            lines.len() > 1 && lines[1].starts_with("pool workers: "),
            "{lines:#?}"
        );
        // One pool alone: no conflict.
        let alone = alone(bn("n1", V1, Phase::Staged), true, false);
        assert!(!why(&alone, "n1", now()).join("\n").contains("conflict"));
    }

    #[test]
    fn a_failed_reboot_points_at_retry() {
        let snap = alone(
            degrade(
                slotted(bn("n2", V1, Phase::Rebooting), true),
                "rebooted into the wrong image",
            ),
            true,
            true,
        );
        let lines = why(&snap, "n2", now());
        assert_eq!(
            lines.get(1).map(String::as_str),
            Some(
                "approved to boot, but its reboot (or apply) failed: `kubectl bootc retry n2` tries the same image again, or point the pool at another image"
            ),
            "{lines:#?}"
        );
        assert_eq!(crate::retry_refusal(&snap, "n2", now()), None);
        let healthy = alone(slotted(bn("n2", V1, Phase::Rebooting), true), false, true);
        let refusal = crate::retry_refusal(&healthy, "n2", now()).unwrap();
        assert!(
            refusal.starts_with("n2 does not await a retry: rebooting: approved to boot"),
            "{refusal}"
        );
    }

    #[test]
    fn a_node_whose_host_runs_its_own_updater_names_the_unit_and_the_fix() {
        let timer = api::host_updaters::BOOTC_TIMER;
        let mut refused = bn("n1", V1, Phase::Idle);
        if let Some(s) = refused.status.as_mut() {
            s.host_updaters = vec![timer.to_owned()];
        }
        let lines = why(&alone(refused, true, false), "n1", now());
        let headline = lines.first().cloned().unwrap_or_default();
        assert!(
            headline.starts_with(&format!(
                "node n1 runs its host's own automatic updater {timer}, which would reboot it outside any reboot slot"
            )) && headline.contains(&format!("`RUN systemctl mask {timer}` in its Containerfile")),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_node_skipped_after_its_drain_failed_points_at_retry() {
        let mut skipped = bn("n1", V1, Phase::Staged);
        let ann = skipped.annotations_mut();
        ann.insert(api::labels::SKIPPED_ANNOTATION.into(), V2.into());
        ann.insert(
            api::labels::SKIPPED_BECAUSE_ANNOTATION.into(),
            "n1: pod apps/web would not leave".into(),
        );
        let snap = alone(skipped, true, false);
        let lines = why(&snap, "n1", now());
        assert_eq!(
            lines.first().map(String::as_str),
            Some(
                "skipped for this target: its drain failed (n1: pod apps/web would not leave) and the pool releases such nodes (spec.rollout.onDrainTimeout: Release); `kubectl bootc retry n1` drains it again"
            ),
            "{lines:#?}"
        );
        assert_eq!(crate::retry_refusal(&snap, "n1", now()), None);
    }

    #[test]
    fn a_target_a_guard_refuses_is_named_for_every_member() {
        let message = "r.io/os:stable: its kubelet 1.38 is newer than the API server 1.37";
        let snap = alone_in(
            degraded_pool(pool("workers", false), Reason::KubeletSkew, message),
            bn("n1", V1, Phase::Idle),
            true,
            false,
        );
        let lines = why(&snap, "n1", now());
        let said = format!(
            "pool workers refuses its new target (KubeletSkew), keeping the one in force: {message}"
        );
        assert!(lines.contains(&said), "{lines:#?}");
        let stuck_only = alone_in(
            stuck(pool("workers", false), "n2"),
            bn("n1", V1, Phase::Idle),
            true,
            false,
        );
        let lines = why(&stuck_only, "n1", now());
        assert!(!lines.iter().any(|l| l.contains("refuses")), "{lines:#?}");
    }

    #[test]
    fn the_evidence_follows_the_headline() {
        let snap = alone_in(
            stuck(pool("workers", false), "n2"),
            slotted(bn("n2", V1, Phase::Rebooting), true),
            false,
            true,
        );
        let lines = why(&snap, "n2", now());
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("stuck: n2 has been rebooting")),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l == "Node n2 is NotReady for 3m"),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l == "Node n2 is cordoned by the reboot slot of pool workers"),
            "{lines:#?}"
        );
    }
}
