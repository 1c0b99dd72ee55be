//! deploy/monitoring against the tools that will read it: promtool checks
//! the PrometheusRule's syntax and runs the scenarios of
//! tests/fixtures/monitoring/alerts-test.yaml (each alert fires when it
//! should and not in its near miss), and every metric the alerts and the
//! Grafana dashboard name is one the controller exposes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

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
    use api::Reason;
    use rollout::{NodeState, PlannedEvent, Summary, event_reasons};
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
        Some(Reason::NodeDegraded.as_str()),
    );
    let mut done = summary.clone();
    for state in done.states.values_mut() {
        *state = NodeState::UpToDate;
    }
    m.observe_plan("p", &done, &[event(event_reasons::ROLLOUT_COMPLETE)], None);
    m.observe_plan("p", &summary, &[], Some(Reason::NodeDegraded.as_str()));
    m.tag_resolution(
        "p",
        Duration::from_millis(5),
        Some(Reason::RegistryUnreachable),
    );
    m.drain_succeeded(Duration::from_secs(1));
    m.drain_failed(Reason::DrainTimedOut);
    m.eviction_refused(controller::actions::drain::EVICTION_REFUSED_BY_BUDGET);
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

/// The alert rules with their thresholds and `for` durations scaled from
/// minutes to seconds, for a test that cannot wait an hour: every number a
/// `>` compares with that is 60 or more becomes 3, every `for` 1s. The
/// expressions keep their metrics, labels and logic.
fn rules_in_seconds() -> serde_yaml::Value {
    let mut spec = rule_spec();
    for group in spec["groups"].as_sequence_mut().unwrap() {
        for rule in group["rules"].as_sequence_mut().unwrap() {
            let expr = rule["expr"].as_str().unwrap().to_owned();
            let mut scaled = String::new();
            let mut rest = expr.as_str();
            while let Some(at) = rest.find("> ") {
                let (head, tail) = rest.split_at(at + 2);
                scaled.push_str(head);
                let end = tail
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(tail.len());
                let number: u64 = tail[..end].parse().unwrap_or(0);
                scaled.push_str(if end > 0 && number >= 60 {
                    "3"
                } else {
                    &tail[..end]
                });
                rest = &tail[end..];
            }
            scaled.push_str(rest);
            rule["expr"] = scaled.into();
            rule["for"] = "1s".into();
        }
    }
    spec
}

/// GET `path` from `addr` (HTTP/1.0: a body without chunks); the body, or
/// "" while the server does not answer yet.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut response = String::new();
    let answered = std::net::TcpStream::connect(addr).and_then(|mut stream| {
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
        stream.read_to_string(&mut response)
    });
    if answered.is_err() {
        return String::new();
    }
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn prometheus_api(addr: &str, path: &str) -> serde_json::Value {
    serde_json::from_str(&http_get(addr, path)).unwrap_or(serde_json::Value::Null)
}

/// The alerts firing now, as "name phase".
fn firing_alerts(web: &str) -> BTreeSet<String> {
    prometheus_api(web, "/api/v1/alerts")["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["state"] == "firing")
        .map(|a| {
            format!(
                "{} {}",
                a["labels"]["alertname"].as_str().unwrap_or(""),
                a["labels"]["phase"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Has Prometheus scraped the controller and judged the rules on what it
/// scraped: it sees a leader, and no longer fires `BootcNoLeader` (which
/// `absent(bootc_leader)` fires before the first scrape)?
fn scraping(web: &str) -> bool {
    let leader = prometheus_api(web, "/api/v1/query?query=bootc_leader")["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["value"][1] == "1");
    leader
        && !firing_alerts(web)
            .iter()
            .any(|a| a.starts_with("BootcNoLeader"))
}

/// A real Prometheus (Debian's) scrapes the controller of a simulated
/// cluster whose new image leaves the rebooted nodes down: the stuck-node
/// alert fires while they reboot (slowly), then the halted-rollout alert
/// once they are back broken, and every metric the alerts name is in what
/// it scraped (the failure counters appear with a first failure, which this
/// scenario does not have).
///
/// The two alerts fire one after the other, never together: the stuck one
/// ends when the nodes come back (on the target, NotReady: that is what
/// halts the rollout). So the test collects every alert it saw firing. And
/// Prometheus must be scraping before the rollout starts, or the reboots
/// pass unseen.
#[tokio::test]
async fn a_real_prometheus_fires_the_halt_and_stuck_node_alerts_on_the_simulated_cluster() {
    use api::BootcNodePool;
    use kube::runtime::wait::await_condition;
    use tests::sim::{POOL, Sim, SimOptions};
    tests::require_root!();
    // A slow reboot: a node stays Rebooting for 20 s (beyond the scaled
    // threshold of 3 s), then comes back broken.
    let options = SimOptions {
        max_unavailable: serde_json::json!(2),
        reboot_time: std::time::Duration::from_secs(20),
        ..SimOptions::default()
    };
    let mut sim = Sim::start(options).await.unwrap();
    let v1 = sim.push_version("1.0").await.unwrap();
    let names = sim.add_nodes(4, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    let pools: kube::Api<BootcNodePool> = kube::Api::all(sim.admin.clone());
    let ready = |p: Option<&BootcNodePool>| {
        p.and_then(|p| p.status.as_ref())
            .is_some_and(|s| api::conditions::is_true(&s.conditions, api::ConditionType::Ready))
    };
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        await_condition(pools.clone(), POOL, ready),
    )
    .await
    .expect("v1 rolled out")
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(&rules_in_seconds()).unwrap(),
    )
    .unwrap();
    // As deploy/monitoring/servicemonitor.yaml scrapes: HTTPS (the
    // controller's certificate is self-signed here, as in a pod without the
    // Secret), Prometheus's own ServiceAccount token from a file.
    std::fs::write(
        dir.path().join("token"),
        tests::metrics_client::reader_token(&sim.cp).unwrap(),
    )
    .unwrap();
    let config = serde_json::json!({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [{
            "job_name": "bootc-controller",
            "scheme": "https",
            "tls_config": {"insecure_skip_verify": true},
            "authorization": {"credentials_file": "token"},
            "static_configs": [{"targets": [sim.metrics_addr.to_string()]}],
        }],
    });
    std::fs::write(
        dir.path().join("prometheus.yml"),
        serde_yaml::to_string(&config).unwrap(),
    )
    .unwrap();
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _prometheus = tokio::process::Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .current_dir(dir.path())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus (Debian's package; tests/scripts/install-deps.sh)");

    // Prometheus has no event to wait on: poll its API.
    let started = std::time::Instant::now();
    while !scraping(&web) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "Prometheus does not scrape the controller at {}: {}",
            sim.metrics_addr,
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    eprintln!("Prometheus scraping after {:?}", started.elapsed());

    // v2 leaves every node that boots it NotReady: two slots, two dead nodes.
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    sim.break_after_reboot(&refs).await;
    sim.push_version("2.0").await.unwrap();

    let started = std::time::Instant::now();
    let deadline = started + std::time::Duration::from_secs(90);
    let mut firing = BTreeSet::new();
    let mut stuck_at = None;
    loop {
        for alert in firing_alerts(&web) {
            if alert == "BootcNodeStuckInPhase Rebooting" && stuck_at.is_none() {
                stuck_at = Some(started.elapsed());
            }
            firing.insert(alert);
        }
        if firing.contains("BootcRolloutHalted ")
            && firing.contains("BootcNodeStuckInPhase Rebooting")
        {
            break;
        }
        if std::time::Instant::now() > deadline {
            let scraped = prometheus_api(
                &web,
                "/api/v1/query?query=%7B__name__%3D~%22bootc_pool.%2A%22%7D",
            );
            let pool = pools.get(POOL).await.unwrap();
            panic!(
                "alerts seen firing: {firing:?}\npool status: {:?}\nthe controller's pool metrics as scraped:\n{scraped}",
                pool.status,
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    eprintln!(
        "v2 pushed; stuck-node alert firing after {stuck_at:?}, both seen after {:?}",
        started.elapsed()
    );
    assert!(
        !firing.iter().any(|a| a.starts_with("BootcNoLeader")),
        "{firing:?}"
    );

    let scraped: BTreeSet<String> = prometheus_api(&web, "/api/v1/label/__name__/values")["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    for (alert, expr) in alert_exprs() {
        for name in metric_names(&expr) {
            assert!(
                scraped.contains(&name) || name.ends_with("_failures_total"),
                "alert {alert} uses {name}, not scraped from the controller: {scraped:?}"
            );
        }
    }
}
