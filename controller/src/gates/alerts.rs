//! The alert gate's question to Prometheus: an instant query of the
//! `ALERTS` series of the firing alerts that match, through the HTTP API
//! (`GET <url>/api/v1/query`), with no credentials.
//!
//! The URL is the pool writer's: only an answer shaped as Prometheus's API
//! is read (the alerts' labels, or its error); of any other answer the pool
//! shows the HTTP status alone, never the body, so that the gate cannot be
//! used to read a service inside the cluster. At most [`MAX_ANSWER`] bytes
//! are read.

use std::collections::BTreeMap;
use std::time::Duration;

use api::AlertGate;
use serde::Deserialize;

/// How long one question to Prometheus may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer read.
const MAX_ANSWER: usize = 1 << 20;

/// At most this many alerts are named; the rest are counted.
const NAMED_ALERTS: usize = 5;

/// Labels of `ALERTS` that say nothing about the alert itself.
const SERIES_LABELS: [&str; 3] = ["__name__", "alertname", "alertstate"];

/// The HTTP client the gate asks with.
pub fn http_client() -> Result<reqwest::Client, String> {
    crate::outbound::http_client(&crate::outbound::ClientPolicy {
        deadline: TIMEOUT,
        ca_bundle: None,
    })
    .map_err(|e| format!("building the HTTP client: {e}"))
}

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
    let url = reqwest::Url::parse_with_params(&url, [("query", query.as_str())])
        .map_err(|e| fail(format!("not a URL: {e}")))?;
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| fail(api::text::error_chain(&e)))?;
    let status = response.status();
    let body = read_limited(response).await.map_err(fail)?;
    let answer: Answer = serde_json::from_slice(&body)
        .map_err(|_| fail(format!("answered {status}, not as Prometheus's API")))?;
    if answer.status != "success" {
        let error = answer.error.unwrap_or_default();
        return Err(fail(format!("answered {status} to {query}: {error}")));
    }
    let series = answer.data.map(|d| d.result).unwrap_or_default();
    Ok(named(series.iter().map(|s| describe_alert(&s.metric))))
}

/// The answer's body, up to [`MAX_ANSWER`] bytes.
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| api::text::error_chain(&e))?
    {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("answered more than {MAX_ANSWER} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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

    /// Serves `body` once per connection on loopback, as HTTP/1.1 200;
    /// returns the base URL.
    async fn serving(body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = conn.read(&mut request).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            }
        });
        url
    }

    fn gate(url: String) -> AlertGate {
        AlertGate {
            prometheus_url: url,
            matchers: vec![],
        }
    }

    #[tokio::test]
    async fn an_answer_that_is_not_prometheus_shows_only_its_status() {
        let url = serving("<html>internal-secret-token</html>").await;
        let error = firing(&http_client().unwrap(), &gate(url))
            .await
            .unwrap_err();
        assert!(
            error.contains("answered 200 OK, not as Prometheus's API"),
            "{error}"
        );
        assert!(!error.contains("internal-secret-token"), "{error}");
    }

    #[tokio::test]
    async fn prometheus_answers_are_read_as_the_alerts_or_its_error() {
        let url = serving(
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing","severity":"critical"},"value":[1,"1"]}]}}"#,
        )
        .await;
        let alerts = firing(&http_client().unwrap(), &gate(url)).await.unwrap();
        assert_eq!(alerts, [r#"NodeDown{severity="critical"}"#]);
        let url =
            serving(r#"{"status":"error","errorType":"bad_data","error":"1:20: parse error"}"#)
                .await;
        let error = firing(&http_client().unwrap(), &gate(url))
            .await
            .unwrap_err();
        assert!(
            error.ends_with(r#"to ALERTS{alertstate="firing"}: 1:20: parse error"#),
            "{error}"
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
