//! `spec.rollout.silences`: the silences of the nodes in reboot slots, at
//! the Alertmanager the pool names, through its API v2 (`GET
//! /api/v2/silences`, `POST /api/v2/silences`, `DELETE
//! /api/v2/silence/{id}`), with no credentials. Which silences to make,
//! renew and expire is `rollout::reboot::silences`'s; this is the I/O:
//!
//! * **The endpoints are the admin's** (`--alertmanager-endpoint NAME=URL`,
//!   [`AlertmanagerEndpoints`]); a pool names one. An unknown name holds
//!   the pool's new slots with a condition naming the field.
//! * **The client is the controller's one outbound client**
//!   (`crate::outbound`): no redirect followed, [`TIMEOUT`] per request,
//!   bounded answers; of a failure, a fixed wording of its class
//!   ([`SilenceFailure`]), never a byte Alertmanager wrote.
//! * **No Kubernetes write**: the silences are their own record (their
//!   `createdBy` and comment name the operator, the pool and the node). The
//!   pool's silences are listed once when first seen and then every
//!   [`RELIST`] while any are wanted or found; between two lists the
//!   controller keeps what it made ([`SilenceMemory`]), and asks
//!   Alertmanager only when a step is due (a node took or left a slot, a
//!   renewal): nothing on a pass that changes nothing.
//! * **Before the plan** ([`Silencer::check`]), the silences of the nodes
//!   in slots at the last plan are made if missing; if that fails (or
//!   failed less than `GATE_RECHECK` ago), the answer holds the pool's
//!   next slot (`rollout::holds::gates::Gates::silences`). **After the
//!   plan, before its writes** ([`Silencer::sync`]), the slots it hands out
//!   are silenced before their Nodes are cordoned, and the ones it releases
//!   are expired.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use api::text::escape_controls;
use api::{BootcNodePool, Silences};
use kube::ResourceExt;
use reqwest::Url;
use rollout::holds::gates::GATE_RECHECK;
use rollout::reboot::silences::{self as rule, Matcher, Silence, Step};
use serde::{Deserialize, Serialize};

use crate::outbound::{self, Failure};

/// How long one request to Alertmanager may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The pool's silences are listed again this often while any are wanted
/// or found (one expired by hand, or lost by an Alertmanager without
/// storage, is made again).
pub const RELIST: Duration = Duration::from_secs(600);

/// The largest list of silences read (expired ones are listed too, for
/// Alertmanager's retention).
const MAX_LIST: usize = 16 << 20;
/// The largest answer to a POST or DELETE read.
const MAX_ANSWER: usize = 64 << 10;

/// The field a pool names its Alertmanager in.
const ENDPOINT_FIELD: &str = "spec.rollout.silences.endpoint";

/// The flag of the Alertmanager endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlertmanagerFlag;

impl outbound::Flag for AlertmanagerFlag {
    const FLAG: &'static str = "--alertmanager-endpoint";
}

/// The Alertmanagers pools may name, by name: the admin's.
pub type AlertmanagerEndpoints = outbound::Endpoints<AlertmanagerFlag>;

/// Why Alertmanager gave no usable answer: a fixed wording per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SilenceFailure {
    #[error("{0}")]
    Request(Failure),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("did not answer as Alertmanager's API v2")]
    NotAlertmanager,
}

/// What the controller knows of one pool's silences between reconciles.
#[derive(Debug, Default)]
pub struct SilenceMemory {
    /// The pool's silences in force at `endpoint`, as last listed and
    /// changed since by the controller; None: to be listed.
    ours: Option<Vec<Silence>>,
    endpoint: Option<String>,
    listed_at: Option<Instant>,
    /// The slot holders of the last plan (None before the first).
    holders: Option<BTreeSet<String>>,
    /// The last failure, and when.
    failed: Option<(Instant, String)>,
}

/// Makes and expires the pools' silences.
pub struct Silencer {
    http: Result<reqwest::Client, String>,
    endpoints: AlertmanagerEndpoints,
}

/// One silence as Alertmanager lists it (the fields read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    id: String,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    matchers: Vec<WireMatcher>,
    ends_at: String,
    #[serde(default)]
    created_by: String,
    #[serde(default)]
    comment: String,
}

#[derive(Deserialize)]
struct Status {
    state: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMatcher {
    name: String,
    value: String,
    #[serde(default)]
    is_regex: bool,
    #[serde(default = "yes")]
    is_equal: bool,
}

fn yes() -> bool {
    true
}

/// A silence as it is posted (with the id of the one it renews).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Posted<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    matchers: Vec<WireMatcher>,
    starts_at: String,
    ends_at: String,
    created_by: &'static str,
    comment: String,
}

#[derive(Deserialize)]
struct Made {
    #[serde(rename = "silenceID")]
    silence_id: String,
}

impl From<&Matcher> for WireMatcher {
    fn from(m: &Matcher) -> Self {
        WireMatcher {
            name: m.name.clone(),
            value: m.value.clone(),
            is_regex: m.is_regex,
            is_equal: m.is_equal,
        }
    }
}

/// The pool's silences in force among those `body` lists: made by the
/// operator, for the pool (by their comment), not expired.
fn ours_in(body: &[u8], pool: &str) -> Result<Vec<Silence>, SilenceFailure> {
    let listed: Vec<Listed> =
        serde_json::from_slice(body).map_err(|_| SilenceFailure::NotAlertmanager)?;
    Ok(listed
        .into_iter()
        .filter(|s| s.created_by == rule::CREATED_BY)
        .filter(|s| s.status.as_ref().is_none_or(|st| st.state != "expired"))
        .filter_map(|s| {
            let node = rule::read_comment(&s.comment, pool)?.to_owned();
            Some(Silence {
                id: s.id,
                node,
                matchers: s
                    .matchers
                    .into_iter()
                    .map(|m| Matcher {
                        name: m.name,
                        value: m.value,
                        is_regex: m.is_regex,
                        is_equal: m.is_equal,
                    })
                    .collect(),
                ends_at: s.ends_at.parse().ok()?,
            })
        })
        .collect())
}

/// `endpoint`'s URL with `segments` below its path.
fn url(endpoint: &Url, segments: &[&str]) -> Result<Url, String> {
    let mut url = endpoint.clone();
    url.path_segments_mut()
        .map_err(|()| "the endpoint's URL cannot have a path".to_owned())?
        .pop_if_empty()
        .extend(segments);
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// Sends `request`; the answer's body if it succeeded.
async fn send(request: reqwest::RequestBuilder, limit: usize) -> Result<Vec<u8>, SilenceFailure> {
    let response = request.send().await.map_err(|e| {
        let e = e.without_url();
        tracing::warn!(error = %api::text::error_chain(&e), "Alertmanager request failed");
        SilenceFailure::Request(Failure::of(&e, TIMEOUT))
    })?;
    let status = response.status();
    let body = outbound::read_limited(response, limit, TIMEOUT)
        .await
        .map_err(SilenceFailure::Request)?;
    if !status.is_success() {
        return Err(SilenceFailure::Status(status.as_u16()));
    }
    Ok(body)
}

/// Where a pool's silences are: its endpoint's name and URL, or why none.
struct At<'a> {
    name: &'a str,
    url: &'a Url,
    http: &'a reqwest::Client,
}

impl At<'_> {
    fn failed(&self, doing: &str, failure: SilenceFailure) -> String {
        format!("{doing}: Alertmanager endpoint {:?} {failure}", self.name)
    }

    async fn list(&self, pool: &str) -> Result<Vec<Silence>, String> {
        let doing = "listing the silences";
        let url = url(self.url, &["api", "v2", "silences"])?;
        let body = send(self.http.get(url), MAX_LIST)
            .await
            .map_err(|f| self.failed(doing, f))?;
        ours_in(&body, pool).map_err(|f| self.failed(doing, f))
    }

    /// Makes (or renews, with `id`) the silence of `node`; its id.
    async fn post(
        &self,
        pool: &str,
        (id, node, matchers): (Option<&str>, &str, &[Matcher]),
        ends_at: jiff::Timestamp,
    ) -> Result<String, String> {
        let doing = format!("silencing node {node}");
        let posted = Posted {
            id,
            matchers: matchers.iter().map(WireMatcher::from).collect(),
            starts_at: jiff::Timestamp::now().to_string(),
            ends_at: ends_at.to_string(),
            created_by: rule::CREATED_BY,
            comment: rule::comment(pool, node),
        };
        let url = url(self.url, &["api", "v2", "silences"])?;
        let json = serde_json::to_vec(&posted).map_err(|e| format!("{doing}: {e}"))?;
        let request = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(json);
        let body = send(request, MAX_ANSWER)
            .await
            .map_err(|f| self.failed(&doing, f))?;
        serde_json::from_slice::<Made>(&body)
            .map(|m| m.silence_id)
            .map_err(|_| self.failed(&doing, SilenceFailure::NotAlertmanager))
    }

    async fn expire(&self, id: &str, node: &str) -> Result<(), String> {
        let url = url(self.url, &["api", "v2", "silence", id])?;
        match send(self.http.delete(url), MAX_ANSWER).await {
            // Gone already: expired all the same.
            Ok(_) | Err(SilenceFailure::Status(404)) => Ok(()),
            Err(f) => Err(self.failed(&format!("expiring the silence of node {node}"), f)),
        }
    }

    /// Carries `step` out on `ours`.
    async fn make(&self, pool: &str, step: Step, ours: &mut Vec<Silence>) -> Result<(), String> {
        match step {
            Step::Create {
                node,
                matchers,
                ends_at,
            } => {
                let id = self.post(pool, (None, &node, &matchers), ends_at).await?;
                tracing::info!(
                    pool,
                    node,
                    id,
                    "silenced at Alertmanager while in its reboot slot"
                );
                ours.push(Silence {
                    id,
                    node,
                    matchers,
                    ends_at,
                });
            }
            Step::Renew {
                id,
                node,
                matchers,
                ends_at,
            } => {
                let new = self
                    .post(pool, (Some(&id), &node, &matchers), ends_at)
                    .await?;
                ours.retain(|s| s.id != id);
                ours.push(Silence {
                    id: new,
                    node,
                    matchers,
                    ends_at,
                });
            }
            Step::Expire { id, node } => {
                self.expire(&id, &node).await?;
                tracing::info!(pool, node, id, "silence expired: out of its reboot slot");
                ours.retain(|s| s.id != id);
            }
        }
        Ok(())
    }
}

impl Silencer {
    /// Silences at the admin's `endpoints`.
    pub fn new(endpoints: AlertmanagerEndpoints) -> Self {
        let http = outbound::http_client(&outbound::ClientPolicy {
            deadline: TIMEOUT,
            ca_bundle: None,
        })
        .map_err(|e| format!("building the HTTP client: {e}"));
        Silencer { http, endpoints }
    }

    /// Where `spec`'s silences are, or why none can be made.
    fn at(&self, spec: &Silences) -> Result<At<'_>, String> {
        let http = self.http.as_ref().map_err(Clone::clone)?;
        let (name, url) = self.endpoints.get(&spec.endpoint).ok_or_else(|| {
            format!(
                "{ENDPOINT_FIELD} {:?} is not an Alertmanager endpoint of this operator ({})",
                escape_controls(&spec.endpoint),
                self.endpoints.names()
            )
        })?;
        // The pool's matchers, checked once for every node.
        rule::matchers(spec, "")?;
        Ok(At { name, url, http })
    }

    /// Before the plan: are the silences of the nodes in slots made (those
    /// of the last plan, or none before it)? Err: why not, which holds the
    /// pool's next slot. Asks Alertmanager only when something is due.
    pub async fn check(
        &self,
        pool: &BootcNodePool,
        memory: &mut SilenceMemory,
    ) -> Result<(), String> {
        let Some(spec) = &pool.spec.rollout.silences else {
            return Ok(());
        };
        let holders = memory.holders.clone();
        self.reconcile(pool, spec, holders.as_ref(), memory).await
    }

    /// After the plan, before its writes: `holders` (the slot holders once
    /// they are made) silenced, every other silence of the pool's expired.
    /// A failure is kept for the next [`Self::check`]. When to look again
    /// (a renewal, a list, a retry).
    pub async fn sync(
        &self,
        pool: &BootcNodePool,
        holders: BTreeSet<String>,
        memory: &mut SilenceMemory,
    ) -> Option<Duration> {
        let spec = pool.spec.rollout.silences.clone().or_else(|| {
            // The field removed: the silences made for it are expired.
            let endpoint = memory.endpoint.clone()?;
            memory.ours.as_ref().filter(|o| !o.is_empty())?;
            Some(Silences {
                endpoint,
                node_label: None,
                matchers: Vec::new(),
            })
        })?;
        let holders = if pool.spec.rollout.silences.is_some() {
            holders
        } else {
            BTreeSet::new()
        };
        let _ = self.reconcile(pool, &spec, Some(&holders), memory).await;
        memory.holders = Some(holders);
        Self::next_look(memory)
    }

    /// When the pool's silences need a look again.
    fn next_look(memory: &SilenceMemory) -> Option<Duration> {
        if memory.failed.is_some() {
            return Some(GATE_RECHECK);
        }
        let ours = memory.ours.as_deref().unwrap_or_default();
        let renewal = rule::renewal_due(ours, jiff::Timestamp::now());
        let relist = (!ours.is_empty()).then_some(RELIST);
        [renewal, relist].into_iter().flatten().min()
    }

    /// Lists the pool's silences if due, then makes the steps to silence
    /// `holders` (None: unknown yet, nothing made or expired).
    async fn reconcile(
        &self,
        pool: &BootcNodePool,
        spec: &Silences,
        holders: Option<&BTreeSet<String>>,
        memory: &mut SilenceMemory,
    ) -> Result<(), String> {
        let at = self.at(spec)?;
        if memory.endpoint.as_deref() != Some(at.name) {
            // Another Alertmanager: the old one's silences end by themselves.
            *memory = SilenceMemory {
                endpoint: Some(at.name.to_owned()),
                holders: memory.holders.take(),
                ..SilenceMemory::default()
            };
        }
        if let Some((when, error)) = &memory.failed
            && when.elapsed() < GATE_RECHECK
        {
            return Err(error.clone());
        }
        let outcome = self.carry_out(&at, pool, spec, holders, memory).await;
        memory.failed = outcome.as_ref().err().map(|e| (Instant::now(), e.clone()));
        if let Err(error) = &outcome {
            tracing::warn!(pool = %pool.name_any(), %error, "spec.rollout.silences: the next slot waits");
            // Listed again before the next step: what was made is unsure.
            memory.ours = None;
        }
        outcome
    }

    async fn carry_out(
        &self,
        at: &At<'_>,
        pool: &BootcNodePool,
        spec: &Silences,
        holders: Option<&BTreeSet<String>>,
        memory: &mut SilenceMemory,
    ) -> Result<(), String> {
        let name = pool.name_any();
        let wanted = holders.is_some_and(|h| !h.is_empty());
        let found = memory.ours.as_ref().is_some_and(|o| !o.is_empty());
        let stale = memory
            .listed_at
            .is_none_or(|t| t.elapsed() >= RELIST && (wanted || found));
        if memory.ours.is_none() || stale {
            memory.ours = Some(at.list(&name).await?);
            memory.listed_at = Some(Instant::now());
        }
        let (Some(holders), Some(ours)) = (holders, memory.ours.as_mut()) else {
            return Ok(());
        };
        for step in rule::steps(spec, holders, ours, jiff::Timestamp::now())? {
            at.make(&name, step, ours).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_are_the_operators_silences_of_the_pool_in_force() {
        let comment = rule::comment("workers", "n1");
        let silence = |id: &str, by: &str, comment: &str, state: &str| {
            serde_json::json!({
                "id": id, "status": {"state": state}, "createdBy": by, "comment": comment,
                "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2026-01-01T01:00:00.5Z",
                "updatedAt": "2026-01-01T00:00:00Z",
                "matchers": [{"name": "node", "value": "n1", "isRegex": false, "isEqual": true}],
            })
        };
        let body = serde_json::to_vec(&serde_json::json!([
            silence("a", rule::CREATED_BY, &comment, "active"),
            silence("b", "alice", &comment, "active"),
            silence("c", rule::CREATED_BY, &comment, "expired"),
            silence(
                "d",
                rule::CREATED_BY,
                &rule::comment("infra", "n1"),
                "active"
            ),
            silence("e", rule::CREATED_BY, "n1 holds a reboot slot", "active"),
        ]))
        .unwrap();
        let ours = ours_in(&body, "workers").unwrap();
        assert_eq!(ours.len(), 1, "{ours:?}");
        assert_eq!((ours[0].id.as_str(), ours[0].node.as_str()), ("a", "n1"));
        assert_eq!(
            ours[0].ends_at,
            "2026-01-01T01:00:00.5Z".parse::<jiff::Timestamp>().unwrap()
        );
        assert_eq!(
            ours_in(br#"{"status":"success"}"#, "workers"),
            Err(SilenceFailure::NotAlertmanager)
        );
    }

    #[test]
    fn endpoints_are_the_admins_and_refused_naming_their_flag() {
        for bad in [
            "am=http://am:9093/?x=1",
            "am=http://user:pw@am:9093",
            "am=file:///etc/passwd",
            "AM=http://am:9093",
            "http://am:9093",
        ] {
            let refused = AlertmanagerEndpoints::parse([bad]).unwrap_err().to_string();
            assert!(refused.starts_with("--alertmanager-endpoint "), "{refused}");
        }
        let endpoints = AlertmanagerEndpoints::parse(["main=http://am:9093"]).unwrap();
        let silencer = Silencer::new(endpoints);
        let spec = |endpoint: &str| Silences {
            endpoint: endpoint.into(),
            node_label: None,
            matchers: Vec::new(),
        };
        assert!(silencer.at(&spec("main")).is_ok());
        let unknown = silencer.at(&spec("other")).err().unwrap();
        assert_eq!(
            unknown,
            r#"spec.rollout.silences.endpoint "other" is not an Alertmanager endpoint of this operator (configured: main)"#
        );
        let none = Silencer::new(AlertmanagerEndpoints::default());
        let unknown = none.at(&spec("main")).err().unwrap();
        assert!(
            unknown.ends_with("(none is configured (--alertmanager-endpoint))"),
            "{unknown}"
        );
    }

    #[test]
    fn the_paths_are_below_the_endpoints_and_an_id_is_one_segment() {
        let base = Url::parse("http://am:9093/prefix/").unwrap();
        assert_eq!(
            url(&base, &["api", "v2", "silences"]).unwrap().as_str(),
            "http://am:9093/prefix/api/v2/silences"
        );
        assert_eq!(
            url(&base, &["api", "v2", "silence", "../x?y"])
                .unwrap()
                .as_str(),
            "http://am:9093/prefix/api/v2/silence/..%2Fx%3Fy"
        );
    }
}
