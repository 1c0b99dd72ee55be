//! `kubectl bootc history POOL`: what the pool's status and Events tell of
//! its rollouts. The status keeps the present (the target, the last digest
//! every member ran) and the last ten rollouts (`status.rollouts`: when
//! each started and ended, how, on how many nodes); the Events keep the
//! detail (halts, drain problems, stuck nodes, failed health gates, nodes
//! leaving), for as long as the API server keeps Events (one hour by
//! default: `--event-ttl`).

use api::{BootcNodePool, event_reasons, labels::GROUP};
use k8s_openapi::api::core::v1::Event;
use kube::{Resource, ResourceExt};

use crate::Snapshot;

/// When an event last happened.
pub(crate) fn when(e: &Event) -> Option<jiff::Timestamp> {
    e.series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.last_timestamp.as_ref().map(|t| t.0))
        .or(e.first_timestamp.as_ref().map(|t| t.0))
        .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The Events about `pool`, oldest first.
pub fn pool_events<'a>(snap: &'a Snapshot, pool: &str) -> Vec<&'a Event> {
    let mut events: Vec<&Event> = snap
        .events
        .iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some(&BootcNodePool::kind(&()))
                && o.name.as_deref() == Some(pool)
                && o.api_version
                    .as_deref()
                    .is_none_or(|v| v.starts_with(&format!("{GROUP}/")))
        })
        .collect();
    events.sort_by_key(|e| when(e));
    events
}

/// The rollouts the pool's status keeps, newest first.
fn rollouts(records: &[api::RolloutRecord]) -> String {
    if records.is_empty() {
        return "\nno rollout recorded in the pool's status yet\n".to_owned();
    }
    let time = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
        t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    };
    let rows: Vec<[String; 6]> = records
        .iter()
        .map(|r| {
            [
                time(&r.started),
                r.ended.as_ref().map_or_else(|| "-".to_owned(), time),
                r.outcome
                    .map_or_else(|| "InProgress".to_owned(), |o| format!("{o:?}")),
                r.nodes.to_string(),
                r.ended
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |_| r.updated.to_string()),
                r.image.clone(),
            ]
        })
        .collect();
    let header = ["STARTED", "ENDED", "OUTCOME", "NODES", "UPDATED", "IMAGE"].map(str::to_owned);
    let mut out = "\nRollouts (status.rollouts, newest first):\n".to_owned();
    out.push_str(&table(&header, &rows));
    out
}

/// Rows in columns, the last one as it is.
fn table<const N: usize>(header: &[String; N], rows: &[[String; N]]) -> String {
    let all: Vec<&[String; N]> = std::iter::once(header).chain(rows.iter()).collect();
    let widths: Vec<usize> = (0..N - 1)
        .map(|i| all.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in all {
        for (i, w) in widths.iter().enumerate() {
            out.push_str(&format!("{:<w$}   ", row[i], w = *w));
        }
        out.push_str(&row[N - 1]);
        out.push('\n');
    }
    out
}

/// The history of `pool`, or of the node of that name when no pool has it.
pub fn history(snap: &Snapshot, pool: &str) -> String {
    if snap.pool(pool).is_none()
        && let Some(bn) = snap.bootc_node(pool)
    {
        return crate::shown(node_history(bn));
    }
    crate::shown(history_text(snap, pool))
}

/// A node's updates, as its daemon records them (`status.history`).
fn node_history(bn: &api::BootcNode) -> String {
    let updates = bn
        .status
        .as_ref()
        .map(|s| s.history.as_slice())
        .unwrap_or_default();
    let mut out = format!(
        "Node {}: its updates (status.history, newest first)\n",
        bn.name_any()
    );
    if updates.is_empty() {
        out.push_str("none recorded yet\n");
        return out;
    }
    let time = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.as_ref().map_or_else(
            || "-".to_owned(),
            |t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
    };
    let rows: Vec<[String; 6]> = updates
        .iter()
        .map(|u| {
            [
                time(&u.staged),
                time(&u.booted),
                u.outcome
                    .map_or_else(|| "-".to_owned(), |o| format!("{o:?}")),
                u.version.clone().unwrap_or_else(|| "-".to_owned()),
                u.image.clone(),
                u.reason.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = ["STAGED", "BOOTED", "OUTCOME", "VERSION", "IMAGE", "WHY"].map(str::to_owned);
    out.push_str(&table(&header, &rows));
    out
}

fn history_text(snap: &Snapshot, pool: &str) -> String {
    let Some(p) = snap.pool(pool) else {
        return format!("no BootcNodePool named {pool}\n");
    };
    let status = p.status.clone().unwrap_or_default();
    let mut out = format!(
        "Pool {}: follows {}\n",
        p.name_any(),
        p.spec.image.reference
    );
    let target = status
        .target_summary
        .or(status.target_image)
        .unwrap_or_else(|| "none yet".to_owned());
    out.push_str(&format!("  target now:     {target}\n"));
    out.push_str(&format!(
        "  last deployed:  {} (the last digest every member ran)\n",
        status.deployed_digest.as_deref().unwrap_or("none yet")
    ));
    out.push_str(&rollouts(&status.rollouts));
    let events = pool_events(snap, pool);
    let count = |reason: &str| {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .count()
    };
    out.push_str(&format!(
        "\nEvents kept: {} rollouts started, {} complete\n",
        count(event_reasons::ROLLOUT_STARTED),
        count(event_reasons::ROLLOUT_COMPLETE)
    ));
    if events.is_empty() {
        out.push_str(
            "no Events kept about this pool (the API server keeps them an hour by default)\n",
        );
        return out;
    }
    let rows: Vec<[String; 5]> = events
        .iter()
        .map(|e| {
            [
                when(e).map_or(String::new(), |t| {
                    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
                }),
                e.type_.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.related
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = ["TIME", "TYPE", "REASON", "NODE", "MESSAGE"].map(str::to_owned);
    out.push_str(&table(&header, &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn the_rollouts_in_the_order_they_happened() {
        let mut snap = snapshot(vec![pool("workers", false)], vec![], vec![]);
        snap.events = vec![
            event(
                "workers",
                event_reasons::ROLLOUT_COMPLETE,
                None,
                30,
                "every member runs 2.0",
            ),
            event(
                "workers",
                event_reasons::ROLLOUT_STARTED,
                None,
                10,
                "rolling out 2.0 to 3 nodes, 1 at a time",
            ),
            event(
                "workers",
                event_reasons::DRAIN_BLOCKED,
                Some("n2"),
                20,
                "pod web-1: PDB web",
            ),
            event(
                "other",
                event_reasons::ROLLOUT_STARTED,
                None,
                15,
                "not this pool",
            ),
        ];
        let text = history(&snap, "workers");
        let want = "\
Pool workers: follows r.example/acme/os:stable
  target now:     2.0 (sha256:222222222222)
  last deployed:  none yet (the last digest every member ran)

no rollout recorded in the pool's status yet

Events kept: 1 rollouts started, 1 complete
TIME                   TYPE      REASON            NODE   MESSAGE
2026-11-23T16:00:10Z   Normal    RolloutStarted           rolling out 2.0 to 3 nodes, 1 at a time
2026-11-23T16:00:20Z   Warning   DrainBlocked      n2     pod web-1: PDB web
2026-11-23T16:00:30Z   Normal    RolloutComplete          every member runs 2.0
";
        assert_eq!(text, want, "\n{text}");
        assert!(history(&snap, "nope").starts_with("no BootcNodePool named nope"));
    }

    #[test]
    fn the_rollouts_the_status_keeps_outlive_the_events() {
        let mut p = pool("workers", false);
        let at = |s: i64| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::from_second(1_795_000_000 + s).unwrap(),
            )
        };
        p.status.get_or_insert_default().rollouts = vec![
            api::RolloutRecord {
                digest: "sha256:2".into(),
                image: "r.example/acme/os@sha256:2".into(),
                platform_digests: Vec::new(),
                started: at(100),
                nodes: 3,
                ended: Some(at(160)),
                outcome: Some(api::RolloutOutcome::Failed),
                updated: 0,
                failed: 1,
            },
            api::RolloutRecord {
                digest: "sha256:1".into(),
                image: "r.example/acme/os@sha256:1".into(),
                platform_digests: Vec::new(),
                started: at(0),
                nodes: 3,
                ended: Some(at(90)),
                outcome: Some(api::RolloutOutcome::Completed),
                updated: 3,
                failed: 0,
            },
        ];
        let snap = snapshot(vec![p], vec![], vec![]);
        let text = history(&snap, "workers");
        let want = "\
Rollouts (status.rollouts, newest first):
STARTED                ENDED                  OUTCOME     NODES   UPDATED   IMAGE
2026-11-18T11:08:20Z   2026-11-18T11:09:20Z   Failed      3       0         r.example/acme/os@sha256:2
2026-11-18T11:06:40Z   2026-11-18T11:08:10Z   Completed   3       3         r.example/acme/os@sha256:1
";
        assert!(text.contains(want), "\n{text}");
        assert!(text.contains("no Events kept about this pool"), "\n{text}");
    }

    #[test]
    fn a_node_s_updates_as_its_daemon_records_them() {
        let at = |s: i64| {
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::from_second(1_795_000_000 + s).unwrap(),
            ))
        };
        let mut node = bn("n1", V1, Phase::Idle);
        node.status.get_or_insert_default().history = vec![
            api::NodeUpdate {
                image: "r/os@sha256:1".into(),
                booted: at(60),
                outcome: Some(api::UpdateOutcome::RolledBack),
                ..Default::default()
            },
            api::NodeUpdate {
                image: "r/os@sha256:2".into(),
                version: Some("2.0".into()),
                staged: at(0),
                booted: at(30),
                outcome: Some(api::UpdateOutcome::Failed),
                reason: Some("pod gpu/driver Ready not shown".into()),
                ..Default::default()
            },
        ];
        let snap = snapshot(vec![pool("workers", false)], vec![node], vec![]);
        let text = history(&snap, "n1");
        let want = "\
Node n1: its updates (status.history, newest first)
STAGED                 BOOTED                 OUTCOME      VERSION   IMAGE           WHY
-                      2026-11-18T11:07:40Z   RolledBack   -         r/os@sha256:1   
2026-11-18T11:06:40Z   2026-11-18T11:07:10Z   Failed       2.0       r/os@sha256:2   pod gpu/driver Ready not shown
";
        assert_eq!(text, want, "\n{text}");
    }
}
