//! `kubectl bootc plan POOL [--image REF]`: the rollout ahead, wave by
//! wave, as the controller's own planner would run it
//! ([`rollout::preview`]), from the objects the plugin reads, writing
//! nothing. The pull secret is taken as the nodes were told it (the plugin
//! reads no Secret), and the alert gate is not asked (the plugin does not
//! reach Prometheus): the preview says so.

use api::BootcNodePool;
use api::image_ref::ImageRef;
use kube::ResourceExt;
use rollout::holds::gates::Gates;
use rollout::preview::{Preview, Start};
use rollout::{SecretSeen, Target};

use crate::Snapshot;

/// A preview: the target it rolls and the waves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub target: Target,
    pub preview: Preview,
}

/// The preview of `pool`'s rollout of `image` (a pinned reference; None:
/// its current target), the operator running in `namespace`; Err says why
/// there is none.
pub fn planned(
    snap: &Snapshot,
    pool: &BootcNodePool,
    image: Option<&str>,
    namespace: &str,
    now: jiff::Timestamp,
) -> Result<Planned, String> {
    let target = target(pool, image)?;
    let start = start(snap, pool, namespace, now);
    let preview = rollout::preview::preview(start, &target);
    Ok(Planned { target, preview })
}

/// Where each member of `pool` stands now, by the controller's plan run
/// once on what the plugin read (None: the pool has no target yet). The
/// drains in flight live in the controller alone: a slot holder not yet
/// approved reads as draining.
pub fn standings(
    snap: &Snapshot,
    pool: &BootcNodePool,
    now: jiff::Timestamp,
) -> Option<rollout::Standings> {
    let target = rollout::target::recorded(&pool.status.clone().unwrap_or_default())?;
    let start = start(snap, pool, api::labels::OPERATOR_NAMESPACE, now);
    Some(rollout::preview::standings(&start, &target))
}

/// What the plan reads, from the plugin's snapshot.
fn start(snap: &Snapshot, pool: &BootcNodePool, namespace: &str, now: jiff::Timestamp) -> Start {
    let name = pool.name_any();
    Start {
        pool: pool.clone(),
        nodes: snap.nodes.clone(),
        bootc_nodes: snap.bootc_nodes.clone(),
        other_pools: snap
            .pools
            .iter()
            .filter(|o| o.name_any() != name)
            .cloned()
            .collect(),
        pull_secret: told_secret(snap, pool),
        gates: {
            let (fleet_stop, fleet_holds_approvals) = fleet_switch(snap, namespace);
            Gates {
                fleet_stop,
                fleet_holds_approvals,
                ..gates(snap, pool)
            }
        },
        operator_namespace: namespace.to_owned(),
        now,
    }
}

/// [`planned`], as text.
pub fn plan(
    snap: &Snapshot,
    pool: &BootcNodePool,
    image: Option<&str>,
    namespace: &str,
    now: jiff::Timestamp,
) -> Result<String, String> {
    let planned = planned(snap, pool, image, namespace, now)?;
    Ok(text(pool, &planned))
}

/// The preview as the plugin prints it.
pub fn text(pool: &BootcNodePool, planned: &Planned) -> String {
    crate::shown(preview_text(pool, &planned.target, &planned.preview))
}

/// The target to preview: `image`, which must be pinned, or the pool's.
fn target(pool: &BootcNodePool, image: Option<&str>) -> Result<Target, String> {
    match image {
        Some(image) => {
            let parsed = ImageRef::parse_pinned(image).map_err(|e| {
                format!("--image {image:?}: {e} (the preview resolves no tag: give repository@sha256:...)")
            })?;
            let digest = parsed.digest.clone().unwrap_or_default();
            // An index's platform digests are not known without the
            // registry: a host installed from its tag shows as to update.
            Ok(Target {
                image: parsed.pinned(&digest),
                digest,
                platform_digests: Vec::new(),
                kubelet: None,
            })
        }
        None => rollout::target::recorded(&pool.status.clone().unwrap_or_default())
            .ok_or_else(|| format!("pool {} has no target yet: give --image", pool.name_any())),
    }
}

/// The pull secret as the pool's nodes were told it (the plugin reads no
/// Secret).
fn told_secret(snap: &Snapshot, pool: &BootcNodePool) -> Option<SecretSeen> {
    pool.spec.pull_secret_ref.as_ref()?;
    let version = snap
        .members(&pool.name_any())
        .find_map(|bn| bn.spec.pull_secret_hash.clone())?;
    Some(SecretSeen {
        version,
        allows_pool: true,
        pools: Vec::new(),
    })
}

/// The gates as the plugin can read them: the blocking and health pods;
/// the alert gate (the plugin does not reach Prometheus) as the controller
/// last found it, by the reason of the pool's UpToDate.
fn gates(snap: &Snapshot, pool: &BootcNodePool) -> Gates {
    let mut gates = Gates {
        alerts: last_alerts(pool),
        silences: last_silences(pool),
        daemon_pods: Ok(rollout::holds::gates::daemon_pod_problems(&snap.pods)),
        ..Gates::default()
    };
    if let Some(spec) = &pool.spec.disruption.blocking_pods {
        gates.blocking_pods = rollout::holds::gates::matching_namespaces(spec, &snap.namespaces)
            .and_then(|ns| rollout::holds::gates::blocking_pods(spec, &snap.pods, ns.as_ref()));
    }
    if let Some(health) = &pool.spec.health {
        let mut found = std::collections::BTreeMap::new();
        gates.health_pods = health
            .pods
            .iter()
            .enumerate()
            .try_for_each(|(entry, spec)| {
                rollout::holds::gates::health_pods(spec, entry, &snap.pods, &mut found)
            })
            .map(|()| found);
    }
    gates
}

/// The fleet's switch on the operator's namespace, as the controller reads
/// it (its value, while on, and whether it holds approvals too).
pub fn fleet_switch(snap: &Snapshot, namespace: &str) -> (Option<String>, bool) {
    snap.namespaces
        .iter()
        .find(|ns| ns.name_any() == namespace)
        .map_or((None, false), |ns| {
            rollout::holds::gates::fleet_switch(ns.annotations())
        })
}

/// The alert gate as the controller last asked it: firing or unanswered
/// when the pool's UpToDate says so (its message names the alerts).
fn last_alerts(pool: &BootcNodePool) -> Result<Vec<String>, String> {
    let reason = crate::pool_condition_any(pool, api::ConditionType::UpToDate)
        .and_then(|(reason, _)| api::Reason::parse(reason));
    if last_silences(pool).is_err() {
        // The silences hold: the alert gate's answer is not said.
        return Ok(Vec::new());
    }
    match reason {
        Some(api::Reason::AlertFiring) => Ok(vec![
            "as the controller last found them (the pool's UpToDate names them)".to_owned(),
        ]),
        Some(api::Reason::GateUnanswered) if pool.spec.rollout.alert_gate.is_some() => {
            Err("as the controller last found it (the pool's UpToDate says why)".to_owned())
        }
        _ => Ok(Vec::new()),
    }
}

/// The silences of `spec.rollout.silences` (the plugin does not reach
/// Alertmanager) as the controller last found them: not made while the
/// pool's UpToDate says so.
fn last_silences(pool: &BootcNodePool) -> Result<(), String> {
    let Some((reason, message)) = crate::pool_condition_any(pool, api::ConditionType::UpToDate)
    else {
        return Ok(());
    };
    let unanswered = api::Reason::parse(reason) == Some(api::Reason::GateUnanswered);
    let field = format!("{} could not be checked", rollout::reboot::silences::FIELD);
    if unanswered && pool.spec.rollout.silences.is_some() && message.contains(&field) {
        return Err("as the controller last found them (the pool's UpToDate says why)".to_owned());
    }
    Ok(())
}

fn preview_text(pool: &BootcNodePool, target: &Target, preview: &Preview) -> String {
    let mut out = format!(
        "Pool {}: the rollout of {} ahead, by the controller's planner on a copy (nothing is written)\n",
        pool.name_any(),
        target.image
    );
    if pool.spec.rollout.alert_gate.is_some() {
        out.push_str("(spec.rollout.alertGate is not asked: taken as no alert firing)\n");
    }
    if preview.waves.is_empty() {
        out.push_str("no node takes a reboot slot\n");
    }
    for (i, wave) in preview.waves.iter().enumerate() {
        out.push_str(&format!("wave {}: {}\n", i + 1, wave.join(", ")));
    }
    match &preview.held {
        None => out.push_str("then every member runs the target\n"),
        Some((reason, message)) => {
            out.push_str(&format!("then held: {reason}: {message}\n"));
            behind(preview, &mut out);
        }
    }
    out
}

/// Each member the preview leaves behind, with where it stands.
fn behind(preview: &Preview, out: &mut String) {
    let standings = &preview.standings;
    for (name, standing) in &standings.members {
        if *standing == rollout::Standing::UpToDate {
            continue;
        }
        let about = rollout::standing::About {
            name,
            bn: None,
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        out.push_str(&format!(
            "  {name}: {}\n",
            standing.headline(about, &standings.pool)
        ));
    }
}
