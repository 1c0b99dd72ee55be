//! The alert gate's question to Prometheus: an instant query of the
//! `ALERTS` series of the firing alerts that match, through the HTTP API
//! (`GET <url>/api/v1/query`).

use std::collections::BTreeMap;

use api::AlertGate;
use serde::Deserialize;

/// At most this many alerts are named; the rest are counted.
const NAMED_ALERTS: usize = 5;

/// Labels of `ALERTS` that say nothing about the alert itself.
const SERIES_LABELS: [&str; 3] = ["__name__", "alertname", "alertstate"];

/// The query: the firing alerts that match every matcher.
pub fn query(gate: &AlertGate) -> String {
    let mut matchers = vec![r#"alertstate="firing""#.to_owned()];
    matchers.extend(gate.matchers.iter().cloned());
    format!("ALERTS{{{}}}", matchers.join(","))
}

/// Prometheus's answer to an instant query.
#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(default)]
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
}

/// The firing alerts `gate` matches, described ([`describe_alert`]), or
/// why Prometheus did not answer.
pub async fn firing(http: &reqwest::Client, gate: &AlertGate) -> Result<Vec<String>, String> {
    let base = gate.prometheus_url.trim_end_matches('/');
    let url = format!("{base}/api/v1/query");
    let query = query(gate);
    let fail = |what: String| format!("Prometheus at {base}: {what}");
    let response = http
        .get(&url)
        .query(&[("query", query.as_str())])
        .send()
        .await
        .map_err(|e| fail(error_text(&e)))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| fail(error_text(&e)))?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|_| {
        let text = String::from_utf8_lossy(&body);
        let excerpt: String = text.chars().take(200).collect();
        fail(format!("answered {status} with no API answer: {excerpt}"))
    })?;
    if answer.status != "success" {
        let error = answer.error.unwrap_or_default();
        return Err(fail(format!("answered {status} to {query}: {error}")));
    }
    let series = answer.data.map(|d| d.result).unwrap_or_default();
    Ok(named(series.iter().map(|s| describe_alert(&s.metric))))
}

/// An alert as a person reads it: `alertname{label="value",...}`.
pub fn describe_alert(labels: &BTreeMap<String, String>) -> String {
    let name = labels.get("alertname").map_or("", String::as_str);
    let rest: Vec<String> = labels
        .iter()
        .filter(|(k, _)| !SERIES_LABELS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    if rest.is_empty() {
        name.to_owned()
    } else {
        format!("{name}{{{}}}", rest.join(","))
    }
}

/// The first [`NAMED_ALERTS`] descriptions in order, then how many more.
fn named(alerts: impl Iterator<Item = String>) -> Vec<String> {
    let mut all: Vec<String> = alerts.collect();
    all.sort();
    if all.len() > NAMED_ALERTS {
        let more = all.len() - NAMED_ALERTS;
        all.truncate(NAMED_ALERTS);
        all.push(format!("and {more} more"));
    }
    all
}

/// The text of a reqwest error and its sources.
fn error_text(err: &reqwest::Error) -> String {
    let mut text = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(err);
    while let Some(s) = source {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_asks_for_the_firing_alerts_that_match() {
        let gate = AlertGate {
            prometheus_url: "http://prom:9090".into(),
            matchers: vec![
                r#"severity="critical""#.into(),
                r#"alertname=~"Node.*""#.into(),
            ],
        };
        assert_eq!(
            query(&gate),
            r#"ALERTS{alertstate="firing",severity="critical",alertname=~"Node.*"}"#
        );
    }

    #[test]
    fn alerts_are_named_with_their_labels_and_counted_past_five() {
        let labels = BTreeMap::from([
            ("__name__".to_owned(), "ALERTS".to_owned()),
            ("alertname".to_owned(), "NodeDown".to_owned()),
            ("alertstate".to_owned(), "firing".to_owned()),
            ("instance".to_owned(), "n1".to_owned()),
            ("severity".to_owned(), "critical".to_owned()),
        ]);
        assert_eq!(
            describe_alert(&labels),
            r#"NodeDown{instance="n1",severity="critical"}"#
        );
        let many = named((0..7).map(|i| format!("A{i}")));
        assert_eq!(many, ["A0", "A1", "A2", "A3", "A4", "and 2 more"]);
    }
}
