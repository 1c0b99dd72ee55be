//! `kubectl bootc status [POOL]`: the rollout at a glance. Per pool: what it
//! follows and when the tag is checked, the target, the controller's
//! summary, what is wrong, the reboot slots; then one line per node with
//! its phase, since when, its slot and the headline of [`crate::why`].

use api::{BootcNodePool, ConditionType};
use kube::ResourceExt;
use rollout::holds::window::Window;

use crate::{Snapshot, age, holds_slot, phase_label, pool_condition, pool_condition_any, window};

/// The status of `pool`, or of every pool when None.
pub fn status(snap: &Snapshot, pool: Option<&str>, now: jiff::Timestamp) -> String {
    crate::shown(status_text(snap, pool, now))
}

fn status_text(snap: &Snapshot, pool: Option<&str>, now: jiff::Timestamp) -> String {
    let mut pools: Vec<&BootcNodePool> = snap
        .pools
        .iter()
        .filter(|p| pool.is_none_or(|name| p.name_any() == name))
        .collect();
    pools.sort_by_key(|p| p.name_any());
    if pools.is_empty() {
        return match pool {
            Some(name) => format!("no BootcNodePool named {name}\n"),
            None => "no BootcNodePools\n".to_owned(),
        };
    }
    pools
        .into_iter()
        .map(|p| pool_status(snap, p, now))
        .collect::<Vec<_>>()
        .join("\n")
}

fn pool_status(snap: &Snapshot, pool: &BootcNodePool, now: jiff::Timestamp) -> String {
    let name = pool.name_any();
    let status = pool.status.clone().unwrap_or_default();
    let reference = &pool.spec.image.reference;
    let mut rows = vec![
        ("Pool", name.clone()),
        ("Image", format!("{reference} ({})", tag_check(reference))),
        (
            "Target",
            status
                .target_summary
                .clone()
                .or(status.target_digest.clone())
                .unwrap_or_else(|| "none yet".to_owned()),
        ),
    ];
    if let Some(deployed) = &status.deployed_digest {
        rows.push(("Deployed", deployed.clone()));
    }
    let progress = pool_condition_any(pool, ConditionType::UpToDate)
        .map_or("not reconciled yet".to_owned(), |(r, m)| {
            format!("{r}: {m}")
        });
    rows.push(("Progress", progress));
    if let Some((reason, message)) = pool_condition(pool, ConditionType::Degraded) {
        rows.push((
            ConditionType::Degraded.as_str(),
            format!("{reason}: {message}"),
        ));
    }
    match rollout::holds::pause::Pause::of(&pool.spec.rollout, now) {
        rollout::holds::pause::Pause::Paused => rows.push((
            "Paused",
            format!("yes: no new reboot slot until `kubectl bootc resume {name}`"),
        )),
        rollout::holds::pause::Pause::Until(at) => rows.push((
            "Paused",
            format!(
                "until {at} (in {}, spec.rollout.pausedUntil): no new reboot slot before",
                age(now, at)
            ),
        )),
        rollout::holds::pause::Pause::Running => {}
    }
    if let Some(windows) = windows(pool, now) {
        rows.push(("Windows", windows));
    }
    if let Some(gates) = gates(pool) {
        rows.push(("Gates", gates));
    }
    if let Some(silences) = silences(pool) {
        rows.push(("Silences", silences));
    }
    if let Some(batch) = batch(pool) {
        rows.push(("Batch", batch));
    }
    if let Some(health) = &pool.spec.health {
        rows.push(("Health", health_gate(health)));
    }
    if let Some(failed) = failed_images(pool) {
        rows.push(("Failed", failed));
    }
    let standings = crate::plan::standings(snap, pool, now);
    if let Some(standings) = &standings {
        rows.push(("Slots", rollout::standing::slot_holders(&standings.pool)));
    }
    let mut out = String::new();
    for (key, value) in rows {
        out.push_str(&format!("{:<10}{value}\n", format!("{key}:")));
    }
    out.push('\n');
    out.push_str(&node_table(snap, pool, standings.as_ref(), now));
    out
}

/// The canary step the pool records (`status.batch`), with its soak.
fn batch(pool: &BootcNodePool) -> Option<String> {
    let steps = pool.spec.rollout.batches.len();
    let b = pool.status.as_ref()?.batch.as_ref().filter(|_| steps > 0)?;
    let step = usize::try_from(b.step).unwrap_or(0);
    if step >= steps {
        return Some(format!("steps done ({steps}), the rest follow"));
    }
    let soak = match &b.soaking_since {
        Some(since) => format!(
            ", soaking since {} (soakSeconds {})",
            since.0, pool.spec.rollout.soak_seconds
        ),
        None => String::new(),
    };
    Some(format!(
        "step {} of {steps}: up to {} nodes updated{soak}; {}/{} updated nodes healthy (successThreshold {}%)",
        step + 1,
        b.limit,
        b.healthy,
        b.updated,
        pool.spec.rollout.success_threshold.unwrap_or(100)
    ))
}

/// What a node shows after its boot before its slot is released.
fn health_gate(health: &api::HealthSpec) -> String {
    let mut checks = vec!["Node Ready".to_owned()];
    checks.extend(
        health
            .conditions
            .iter()
            .map(|c| format!("{}={}", c.type_, c.status.as_str())),
    );
    checks.extend(health.pods.iter().enumerate().map(|(entry, p)| {
        match rollout::holds::gates::health_pod_selector(p, entry) {
            Ok(selector) => format!("pods {selector} in {} Ready", p.namespace),
            Err(e) => format!("pods in {} Ready ({e})", p.namespace),
        }
    }));
    format!(
        "{} held {}s within {}s, else {:?}",
        checks.join(", "),
        health.settle_seconds,
        health.timeout_seconds,
        health.on_failure
    )
}

/// The images nodes failed their health gate on (newest first).
fn failed_images(pool: &BootcNodePool) -> Option<String> {
    let failed = &pool.status.as_ref()?.failed_images;
    (!failed.is_empty()).then(|| {
        failed
            .iter()
            .map(|f| {
                format!(
                    "{} ({}) on {} at {}: {}",
                    f.reference, f.digest, f.node, f.at.0, f.check
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// The gates the pool asks before a new reboot slot (none: no row); the
/// Progress row says whether one holds.
fn gates(pool: &BootcNodePool) -> Option<String> {
    let mut gates = Vec::new();
    if let Some(gate) = &pool.spec.rollout.alert_gate {
        let matching = if gate.matchers.is_empty() {
            "any firing alert".to_owned()
        } else {
            format!("firing alerts matching {}", gate.matchers.join(","))
        };
        let at = match (&gate.endpoint, &gate.prometheus_url) {
            (Some(name), _) => format!("endpoint {name}"),
            (None, Some(url)) => url.clone(),
            (None, None) => "no endpoint".to_owned(),
        };
        gates.push(format!("{matching} at {at}"));
    }
    if let Some(spec) = &pool.spec.disruption.blocking_pods {
        let mut text = match rollout::holds::gates::pod_selector(spec) {
            Ok(pods) => format!("nodes running pods {pods}"),
            Err(e) => format!("nodes running blocking pods ({e})"),
        };
        match rollout::holds::gates::namespace_selector(spec) {
            Ok(Some(namespaces)) => text.push_str(&format!(" in namespaces {namespaces}")),
            Ok(None) => {}
            Err(e) => text.push_str(&format!(" ({e})")),
        }
        gates.push(text);
    }
    (!gates.is_empty()).then(|| format!("no new reboot slot for {}", gates.join("; nor for ")))
}

/// The Alertmanager silences of the nodes in reboot slots (none: no row).
fn silences(pool: &BootcNodePool) -> Option<String> {
    let spec = pool.spec.rollout.silences.as_ref()?;
    let mut matching = format!("{}=<node>", spec.node_label());
    for m in &spec.matchers {
        matching.push_str(&format!(",{m}"));
    }
    Some(format!(
        "the alerts of each node in a reboot slot ({matching}) silenced at Alertmanager endpoint {}; a silence not made holds the next slot",
        spec.endpoint
    ))
}

/// The pool's maintenance windows now, as the planner reads them (none: no
/// row).
fn windows(pool: &BootcNodePool, now: jiff::Timestamp) -> Option<String> {
    Some(match window(pool, now) {
        Window::Always => return None,
        Window::Open { closes } => format!(
            "open: new reboot slots until {closes} (in {})",
            age(now, closes)
        ),
        Window::Closed { opens: Some(opens) } => format!(
            "closed: no new reboot slot until {opens} (in {}); nodes stage meanwhile",
            age(now, opens)
        ),
        Window::Closed { opens: None } => {
            "a window cannot be read: no new reboot slot (see Degraded)".to_owned()
        }
        Window::Blackout {
            ends: Some(ends),
            opens,
        } => format!(
            "in a blackout until {ends} (in {}): no new reboot slot{}; nodes stage meanwhile",
            age(now, ends),
            opens.map_or_else(String::new, |at| format!(", the next from {at}"))
        ),
        Window::Blackout { ends: None, .. } => {
            "a blackout cannot be read: no new reboot slot (see Degraded)".to_owned()
        }
    })
}

/// When the controller looks at the reference again.
fn tag_check(reference: &str) -> String {
    if reference.contains('@') {
        "a digest: never re-resolved".to_owned()
    } else {
        "a tag: re-resolved by the controller every --tag-resolution-interval-seconds, \
         300 s by default, and at once when the pool changes"
            .to_owned()
    }
}

fn node_table(
    snap: &Snapshot,
    pool: &BootcNodePool,
    standings: Option<&rollout::Standings>,
    now: jiff::Timestamp,
) -> String {
    let pool_name = pool.name_any();
    let pool_name = pool_name.as_str();
    let header = [
        "NODE", "PHASE", "SINCE", "SLOT", "ALLOWED", "VERSION", "READY", "WHY",
    ];
    let mut rows: Vec<[String; 8]> = vec![header.map(str::to_owned)];
    for bn in snap.members(pool_name) {
        let name = bn.name_any();
        let ready = snap.node(&name).map_or("?", |n| {
            if api::node_health::is_ready(n) {
                "True"
            } else {
                "False"
            }
        });
        let version = bn
            .status
            .as_ref()
            .and_then(|s| s.booted.as_ref())
            .and_then(|b| b.version.as_deref())
            .unwrap_or_default()
            .to_owned();
        rows.push([
            name.clone(),
            phase_label(bn, ""),
            bn.phase_since().map_or(String::new(), |t| age(t, now)),
            if holds_slot(snap, bn, pool_name) {
                "yes"
            } else {
                ""
            }
            .to_owned(),
            bn.spec.desired_image_state.as_str().to_owned(),
            version,
            ready.to_owned(),
            crate::why::member(snap, pool, standings, bn, now)
                .into_iter()
                .next()
                .map(crate::shown)
                .unwrap_or_default(),
        ]);
    }
    if rows.len() == 1 {
        return "no member nodes\n".to_owned();
    }
    let widths: Vec<usize> = (0..header.len() - 1)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            match widths.get(i) {
                Some(w) => out.push_str(&format!("{cell:<w$}   ", w = *w)),
                None => out.push_str(cell),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn a_rollout_in_progress_at_a_glance() {
        let snap = snapshot(
            vec![pool("workers", false)],
            vec![
                bn("n1", V2, Phase::Idle),
                bn("n2", V1, Phase::Staged),
                slotted(bn("n3", V1, Phase::Rebooting), true),
            ],
            vec![
                node("n1", true, false),
                node("n2", true, false),
                node("n3", false, true),
            ],
        );
        let text = status(&snap, Some("workers"), now());
        let want = "\
Pool:     workers
Image:    r.example/acme/os:stable (a tag: re-resolved by the controller every --tag-resolution-interval-seconds, 300 s by default, and at once when the pool changes)
Target:   2.0 (sha256:222222222222)
Progress: RolloutInProgress: 1/3 updated; 1 staged, 1 rebooting; in reboot slots: n3
Slots:    maxUnavailable 1; slots held by n3 (Rebooting)

NODE   PHASE       SINCE   SLOT   ALLOWED   VERSION   READY   WHY
n1     Idle        3m             Staged    2.0       True    up to date: runs the target 2.0 (sha256:222222222222)
n2     Staged      3m             Staged    1.0       True    staged for 3m, waiting for a reboot slot: maxUnavailable 1; slots held by n3 (Rebooting)
n3     Rebooting   3m      yes    Booted    1.0       False   rebooting: approved to boot, the Node NotReady for 3m
";
        assert_eq!(text, want, "\n{text}");
    }

    #[test]
    fn the_maintenance_windows_say_when_slots_are_handed_out() {
        let rows = [
            (
                "22:00",
                "Windows:  closed: no new reboot slot until 2026-11-23T22:00:00Z (in 5h); nodes stage meanwhile",
            ),
            (
                "15:00",
                "Windows:  open: new reboot slots until 2026-11-23T17:00:00Z (in 57m)",
            ),
        ];
        for (start, want) in rows {
            let snap = snapshot(
                vec![windowed(pool("workers", false), start)],
                vec![],
                vec![],
            );
            let text = status(&snap, None, now());
            assert!(text.contains(want), "{start}: {text}");
        }
        let snap = snapshot(vec![pool("workers", false)], vec![], vec![]);
        assert!(!status(&snap, None, now()).contains("Windows:"));
    }

    #[test]
    fn the_gates_are_named_and_progress_says_when_one_holds() {
        let gated = alerting(blocking_etl(pool("workers", false)), "NodeDown");
        let text = status(&snapshot(vec![gated], vec![], vec![]), None, now());
        assert!(
            text.contains(
                r#"Gates:    no new reboot slot for firing alerts matching severity="critical" at endpoint main; nor for nodes running pods app=etl"#
            ),
            "{text}"
        );
        assert!(text.contains("Progress: AlertFiring: "), "{text}");
        let snap = snapshot(vec![pool("workers", false)], vec![], vec![]);
        assert!(!status(&snap, None, now()).contains("Gates:"));
    }

    #[test]
    fn a_paused_and_degraded_pool_says_so() {
        let snap = snapshot(vec![stuck(pool("workers", true), "n3")], vec![], vec![]);
        let text = status(&snap, None, now());
        assert!(
            text.contains("Degraded: NodeStuck: n3 has been rebooting"),
            "{text}"
        );
        assert!(
            text.contains("Paused:   yes: no new reboot slot until `kubectl bootc resume workers`"),
            "{text}"
        );
        assert!(text.ends_with("no member nodes\n"), "{text}");
        assert_eq!(
            status(&snap, Some("other"), now()),
            "no BootcNodePool named other\n"
        );
    }
}
