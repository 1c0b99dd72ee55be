//! deploy/monitoring against the tools that will read it: promtool checks
//! the PrometheusRule's syntax and runs the scenarios of
//! tests/fixtures/monitoring/alerts-test.yaml (each alert fires when it
//! should and not in its near miss), and every metric the alerts and the
//! Grafana dashboard name is one the controller exposes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::Command;

use tests::repo_root;

fn rule_spec() -> serde_yaml::Value {
    let text =
        std::fs::read_to_string(repo_root().join("deploy/monitoring/prometheusrule.yaml")).unwrap();
    let rule: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    rule["spec"].clone()
}

fn promtool(args: &[&str], dir: &std::path::Path) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (Debian's prometheus package; tests/scripts/install-deps.sh)");
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn alert_rules_pass_promtool_and_fire_in_their_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(&rule_spec()).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo_root().join("tests/fixtures/monitoring/alerts-test.yaml"),
        dir.path().join("alerts-test.yaml"),
    )
    .unwrap();
    promtool(&["check", "rules", "rules.yaml"], dir.path());
    promtool(&["test", "rules", "alerts-test.yaml"], dir.path());
}

/// The sample names the controller exposes: each family's name with the
/// suffixes its type gives its samples.
pub fn exposed_metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    names
}

/// The `bootc_*` metric names in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("bootc_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

fn dashboard_exprs() -> Vec<String> {
    let text =
        std::fs::read_to_string(repo_root().join("deploy/monitoring/dashboard.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            exprs.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    exprs
}

fn alert_exprs() -> Vec<(String, String)> {
    rule_spec()["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().clone())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_owned(),
                r["expr"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Makes every metric family have a sample: a family shows in the scrape
/// once something happened to it (a pool reconciled, a drain failed...).
fn exercise_every_metric() -> String {
    use controller::planner::{NodeState, PlannedEvent, Summary, event_reasons};
    use std::time::Duration;
    let m = controller::metrics::global();
    let summary = Summary {
        states: [
            ("a", NodeState::Staging),
            ("b", NodeState::Rebooting),
            ("c", NodeState::UpToDate),
        ]
        .into_iter()
        .map(|(n, s)| (n.to_owned(), s))
        .collect(),
        slots: 1,
        ..Summary::default()
    };
    let event = |reason| PlannedEvent {
        reason,
        message: String::new(),
        warning: false,
        node: None,
    };
    m.observe_plan(
        "p",
        &summary,
        &[event(event_reasons::ROLLOUT_STARTED)],
        Some("NodeDegraded"),
    );
    let mut done = summary.clone();
    for state in done.states.values_mut() {
        *state = NodeState::UpToDate;
    }
    m.observe_plan("p", &done, &[event(event_reasons::ROLLOUT_COMPLETE)], None);
    m.observe_plan("p", &summary, &[], Some("NodeDegraded"));
    m.tag_resolution("p", Duration::from_millis(5), Some("RegistryUnreachable"));
    m.drain_succeeded(Duration::from_secs(1));
    m.drain_failed("DrainTimedOut");
    m.eviction_refused("PodDisruptionBudget");
    m.reconciled(Duration::from_millis(1));
    m.reconcile_failed("Write");
    m.api_request(&http::Method::GET, "/api/v1/nodes", None);
    m.set_leader(true);
    m.render()
}

#[test]
fn alerts_and_dashboard_name_only_metrics_the_controller_exposes() {
    let exposed = exposed_metric_names(&exercise_every_metric());
    assert!(exposed.contains("bootc_leader"), "{exposed:?}");
    let mut named = 0;
    let exprs = alert_exprs()
        .into_iter()
        .map(|(alert, expr)| (format!("alert {alert}"), expr))
        .chain(
            dashboard_exprs()
                .into_iter()
                .map(|e| ("dashboard".to_owned(), e)),
        );
    for (whose, expr) in exprs {
        let names = metric_names(&expr);
        assert!(!names.is_empty(), "{whose} names no bootc metric: {expr}");
        for name in names {
            assert!(
                exposed.contains(&name),
                "{whose} uses {name}, which the controller does not expose: {expr}\nexposed: {exposed:?}"
            );
            named += 1;
        }
    }
    assert!(named > 10);
}

#[test]
fn every_alert_has_a_runbook() {
    let docs = std::fs::read_to_string(repo_root().join("docs/operations.md")).unwrap();
    for (alert, _) in alert_exprs() {
        assert!(
            docs.contains(&format!("### {alert}\n")),
            "docs/operations.md has no runbook section for {alert}"
        );
    }
}
