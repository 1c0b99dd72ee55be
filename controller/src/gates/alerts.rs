//! The alert gate's question to Prometheus: an instant query of the
//! `ALERTS` series of the firing alerts that match, through the HTTP API
//! (`GET <endpoint>/api/v1/query`), with no credentials.
//!
//! The rules, in one place:
//!
//! * **The endpoints are the admin's.** The controller asks only the
//!   Prometheus endpoints it is started with (`--alert-gate-endpoint
//!   NAME=URL`, [`AlertEndpoints`]: an http(s) URL with a host, no
//!   user, query or fragment); a pool names one
//!   (`spec.rollout.alertGate.endpoint`). The deprecated
//!   `spec.rollout.alertGate.prometheusURL` is taken only when it is,
//!   exactly, a configured endpoint's URL, so pools written before
//!   endpoints existed keep working where they pointed at the admin's
//!   Prometheus, and no pool makes the controller ask anything else; any
//!   other URL holds the rollout with a condition naming the field and its
//!   value ([`endpoint`]).
//! * **The query is the controller's alone**: the path and the whole query
//!   string are set on the endpoint's URL with a URL library ([`url`]), and
//!   each matcher is checked to be one label matcher
//!   (`api::schema::is_alert_matcher`) before it is put in the query.
//! * **The client is the controller's one outbound client** (`crate::outbound`):
//!   no redirect followed, a whole-request deadline of [`TIMEOUT`], at most
//!   [`MAX_ANSWER`] bytes read.
//! * **Only the alert names reach a status**: a series that is not a firing
//!   `ALERTS` series makes the answer "not an alerts answer"; of a failure,
//!   a fixed wording of its class ([`GateFailure`]), never a byte the server
//!   wrote. What comes from the pool (a name, a URL) is escaped
//!   (`api::text::escape_controls`).
//! * **A pool that selects no node asks nothing** (`crate::gates`).

use std::collections::BTreeMap;
use std::time::Duration;

use api::AlertGate;
use api::text::escape_controls;
use reqwest::Url;
use serde::Deserialize;

use crate::outbound::{self, Failure};

/// How long one question to Prometheus may take, from connection to the
/// last byte.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer read.
const MAX_ANSWER: usize = 1 << 20;

/// At most this many alert names are shown; the rest are counted.
const NAMED_ALERTS: usize = 5;

/// The field a pool names its endpoint in.
const ENDPOINT_FIELD: &str = "spec.rollout.alertGate.endpoint";
/// The deprecated field of a URL.
const URL_FIELD: &str = "spec.rollout.alertGate.prometheusURL";

/// The flag of the alert gate's endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlertGateFlag;

impl outbound::Flag for AlertGateFlag {
    const FLAG: &'static str = "--alert-gate-endpoint";
}

/// The Prometheus endpoints the alert gate may ask, by name: the admin's.
pub type AlertEndpoints = outbound::Endpoints<AlertGateFlag>;

/// Does the pool's URL name the configured `url`? The same URL, a trailing
/// slash aside.
fn same_url(written: &str, url: &Url) -> bool {
    let written = written.trim_end_matches('/');
    written == url.as_str().trim_end_matches('/')
}

/// The endpoint `gate` asks, with its name, or why it asks none (a
/// message for the pool's condition).
pub fn endpoint<'a>(
    gate: &AlertGate,
    endpoints: &'a AlertEndpoints,
) -> Result<(&'a str, &'a Url), String> {
    match (&gate.endpoint, &gate.prometheus_url) {
        (Some(name), _) => endpoints.get(name).ok_or_else(|| {
                format!(
                    "{ENDPOINT_FIELD} {:?} is not an alert endpoint of this operator ({})",
                    escape_controls(name),
                    endpoints.names()
                )
            }),
        (None, Some(written)) => endpoints
            .iter()
            .find(|(_, url)| same_url(written, url))
            .ok_or_else(|| {
                format!(
                    "{URL_FIELD} {:?} is not the URL of an alert endpoint of this operator: the operator asks only the endpoints its admin configured; name one in {ENDPOINT_FIELD} ({})",
                    escape_controls(written),
                    endpoints.names()
                )
            }),
        (None, None) => Err(format!("{ENDPOINT_FIELD} is not set")),
    }
}

/// The HTTP client the gate asks with.
pub fn http_client() -> Result<reqwest::Client, String> {
    outbound::http_client(&outbound::ClientPolicy {
        deadline: TIMEOUT,
        ca_bundle: None,
    })
    .map_err(|e| format!("building the HTTP client: {e}"))
}

/// The query: the firing alerts that match every matcher, each checked to
/// be one label matcher.
pub fn query(gate: &AlertGate) -> Result<String, String> {
    let mut matchers = vec![r#"alertstate="firing""#.to_owned()];
    for (i, matcher) in gate.matchers.iter().enumerate() {
        if !api::schema::is_alert_matcher(matcher) {
            return Err(format!(
                "spec.rollout.alertGate.matchers[{i}] {:?} is not one PromQL label matcher",
                escape_controls(matcher)
            ));
        }
        matchers.push(matcher.clone());
    }
    Ok(format!("ALERTS{{{}}}", matchers.join(",")))
}

/// The URL of the query on `endpoint`: its path below the endpoint's, and
/// a query string that holds the query alone.
pub fn url(endpoint: &Url, query: &str) -> Result<Url, String> {
    let mut url = endpoint.clone();
    url.path_segments_mut()
        .map_err(|()| "the endpoint's URL cannot have a path".to_owned())?
        .pop_if_empty()
        .extend(["api", "v1", "query"]);
    url.set_fragment(None);
    url.set_query(None);
    url.query_pairs_mut().append_pair("query", query);
    Ok(url)
}

/// Why the gate got no usable answer: a fixed wording per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateFailure {
    #[error("{0}")]
    Request(Failure),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("did not answer as Prometheus's API")]
    NotPrometheus,
    #[error("refused the query")]
    QueryRefused,
    #[error("answered series other than firing alerts")]
    NotAlerts,
}

/// Prometheus's answer to an instant query.
#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
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

/// The firing alerts `gate` matches (their names, [`named`]), or why there
/// is no answer.
#[tracing::instrument(name = "alert_gate", skip_all)]
pub async fn firing(
    http: &reqwest::Client,
    gate: &AlertGate,
    endpoints: &AlertEndpoints,
) -> Result<Vec<String>, String> {
    let (name, endpoint) = endpoint(gate, endpoints)?;
    let query = query(gate)?;
    let url = url(endpoint, &query)?;
    ask(http, &url)
        .await
        .map_err(|failure| format!("alert endpoint {name:?} {failure}"))
}

/// Asks `url`; the alert names of the answer.
async fn ask(http: &reqwest::Client, url: &Url) -> Result<Vec<String>, GateFailure> {
    let response = http.get(url.clone()).send().await.map_err(|e| {
        let e = e.without_url();
        tracing::warn!(error = %api::text::error_chain(&e), "alert gate request failed");
        GateFailure::Request(Failure::of(&e, TIMEOUT))
    })?;
    let status = response.status();
    let body = outbound::read_limited(response, MAX_ANSWER, TIMEOUT)
        .await
        .map_err(GateFailure::Request)?;
    let answer: Answer = match serde_json::from_slice(&body) {
        Ok(answer) => answer,
        Err(_) if !status.is_success() => return Err(GateFailure::Status(status.as_u16())),
        Err(_) => return Err(GateFailure::NotPrometheus),
    };
    if answer.status != "success" {
        return Err(GateFailure::QueryRefused);
    }
    let series = answer.data.map(|d| d.result).unwrap_or_default();
    alert_names(&series)
}

/// The alert names of `series`, if every one is a firing `ALERTS` series.
fn alert_names(series: &[Series]) -> Result<Vec<String>, GateFailure> {
    let label = |s: &Series, k: &str| s.metric.get(k).cloned().unwrap_or_default();
    if series
        .iter()
        .any(|s| label(s, "__name__") != "ALERTS" || label(s, "alertstate") != "firing")
    {
        return Err(GateFailure::NotAlerts);
    }
    Ok(named(series.iter().map(|s| label(s, "alertname"))))
}

/// The distinct names, escaped, in order: the first [`NAMED_ALERTS`], then
/// how many more.
fn named(alerts: impl Iterator<Item = String>) -> Vec<String> {
    let all: std::collections::BTreeSet<String> =
        alerts.map(|a| escape_controls(&a).into_owned()).collect();
    let mut shown: Vec<String> = all.iter().take(NAMED_ALERTS).cloned().collect();
    if all.len() > NAMED_ALERTS {
        shown.push(format!("and {} more", all.len() - NAMED_ALERTS));
    }
    shown
}

#[cfg(test)]
mod tests;
