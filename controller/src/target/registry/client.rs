//! The thin HTTP layer over `reqwest` that talks to registries under the
//! rules of [`super::protocol`]: redirects are never followed by the HTTP
//! client itself (its policy is "none"), but here, one at a time, where and
//! as far as the rules allow; credentials go to the registry's origin (and
//! to the token realm it names) only; bodies are read up to a bound, and a
//! failure's body gives only its error codes.

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, LOCATION, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};

use super::protocol::{self, Challenge, Endpoint, Refused};
use super::{Credentials, RegistryOptions};

/// The largest manifest or config read (the distribution spec's manifest
/// limit).
pub const BODY_LIMIT: usize = 4 << 20;
/// The largest token answer read.
const TOKEN_LIMIT: usize = 64 << 10;
/// The most of an error body read (for its error codes).
const ERROR_LIMIT: usize = 64 << 10;

/// Why a request failed, before it is named for a reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// Not reached (connection, TLS, deadline): the failure's class only
    /// (its text is logged).
    Unreachable(crate::outbound::Failure),
    /// An answer with a failure status: its summary and class.
    Status {
        failure: protocol::Failure,
        summary: String,
        /// The request's URL without its query.
        url: String,
    },
    Refused(Refused),
    /// Anything else wrong with an answer (too large, no token).
    Invalid(String),
}

/// A successful answer.
#[derive(Debug)]
pub struct Answer {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// The HTTP client for registries, under the controller's one rule for
/// outbound clients (`crate::outbound`): redirects off (followed by
/// [`Session`]), a whole-request deadline.
pub fn http_client(options: &RegistryOptions) -> Result<reqwest::Client, String> {
    crate::outbound::http_client(&crate::outbound::ClientPolicy {
        deadline: options.request_deadline(),
        ca_bundle: options.ca_bundle.clone(),
    })
    .map_err(|e| format!("registry {e}"))
}

/// One resolution's conversation with one registry: the credentials it
/// may use and the token it obtained.
pub struct Session<'a> {
    http: &'a reqwest::Client,
    /// Each request's deadline (for naming a timeout).
    deadline: std::time::Duration,
    /// `scheme://registry`: credentials go to this origin only.
    base: Url,
    repository: String,
    credentials: Option<&'a Credentials>,
    authorization: Option<String>,
}

impl<'a> Session<'a> {
    pub fn new(
        http: &'a reqwest::Client,
        deadline: std::time::Duration,
        base: Url,
        repository: &str,
        credentials: Option<&'a Credentials>,
    ) -> Self {
        Session {
            http,
            deadline,
            base,
            repository: repository.to_owned(),
            credentials,
            authorization: None,
        }
    }

    /// The URL of `path` (below `/v2/<repository>/`) on the registry.
    pub fn url(&self, path: &str) -> Result<Url, HttpError> {
        self.base
            .join(&format!("/v2/{}/{path}", self.repository))
            .map_err(|e| HttpError::Invalid(format!("cannot form a registry URL: {e}")))
    }

    /// GETs `url`, answering one authentication challenge of the registry
    /// and following redirects as the rules allow for `endpoint`.
    pub async fn get(
        &mut self,
        url: Url,
        endpoint: Endpoint,
        accept: Option<&str>,
    ) -> Result<Answer, HttpError> {
        let requested = protocol::without_query(&url);
        let mut at = url;
        let (mut hops, mut challenged) = (0, false);
        loop {
            let mut request = self.http.get(at.clone());
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            let ours = protocol::same_origin(&at, &self.base);
            if let Some(auth) = self.authorization.as_ref().filter(|_| ours) {
                request = request.header(AUTHORIZATION, auth);
            }
            let response = request
                .send()
                .await
                .map_err(|e| unreachable(e, self.deadline))?;
            let status = response.status();
            if status.is_redirection() {
                let location = header(response.headers(), LOCATION);
                at = protocol::redirect(&at, &location, hops, endpoint)
                    .map_err(HttpError::Refused)?;
                hops += 1;
                continue;
            }
            if status == StatusCode::UNAUTHORIZED && ours && !challenged {
                challenged = true;
                let asked = header(response.headers(), WWW_AUTHENTICATE);
                if self.authenticate(&asked).await? {
                    continue;
                }
            }
            return answer(response, &requested, self.deadline).await;
        }
    }

    /// Answers a challenge: true when there is something to retry with.
    async fn authenticate(&mut self, asked: &str) -> Result<bool, HttpError> {
        let Some(credentials) = self.credentials else {
            // Anonymous token requests are how public images are read.
            if let Some(Challenge::Bearer { .. }) = protocol::challenge(asked) {
                return self.bearer(asked, None).await;
            }
            return Ok(false);
        };
        match protocol::challenge(asked) {
            Some(Challenge::Basic) => {
                self.authorization = Some(basic(credentials));
                Ok(true)
            }
            Some(Challenge::Bearer { .. }) => self.bearer(asked, Some(credentials)).await,
            None => Ok(false),
        }
    }

    /// A token from the realm the challenge names.
    async fn bearer(
        &mut self,
        asked: &str,
        credentials: Option<&Credentials>,
    ) -> Result<bool, HttpError> {
        let Some(Challenge::Bearer {
            realm,
            service,
            scope,
        }) = protocol::challenge(asked)
        else {
            return Ok(false);
        };
        let mut url = protocol::token_realm(&self.base, &realm).map_err(HttpError::Refused)?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = &service {
                query.append_pair("service", service);
            }
            let pull = format!("repository:{}:pull", self.repository);
            query.append_pair("scope", scope.as_deref().unwrap_or(&pull));
        }
        let realm_origin = url.clone();
        let requested = protocol::without_query(&url);
        let mut hops = 0;
        let response = loop {
            let mut request = self.http.get(url.clone());
            if let Some(c) = credentials.filter(|_| protocol::same_origin(&url, &realm_origin)) {
                request = request.header(AUTHORIZATION, basic(c));
            }
            let response = request
                .send()
                .await
                .map_err(|e| unreachable(e, self.deadline))?;
            if !response.status().is_redirection() {
                break response;
            }
            let location = header(response.headers(), LOCATION);
            url = protocol::redirect(&url, &location, hops, Endpoint::Token)
                .map_err(HttpError::Refused)?;
            hops += 1;
        };
        let body = answer_limited(response, &requested, TOKEN_LIMIT, self.deadline)
            .await?
            .body;
        #[derive(serde::Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body)
            .map_err(|_| HttpError::Invalid("the token realm's answer is not a token".into()))?;
        let token = token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| HttpError::Invalid("the token realm gave no token".into()))?;
        self.authorization = Some(format!("Bearer {token}"));
        Ok(true)
    }
}

fn basic(c: &Credentials) -> String {
    use base64::Engine;
    let pair = format!("{}:{}", c.username, c.password);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

fn header(headers: &HeaderMap, name: reqwest::header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A request that failed before an answer, by its class; the error's text
/// (which says more about the server than a status should) goes to the log.
fn unreachable(err: reqwest::Error, deadline: std::time::Duration) -> HttpError {
    let err = err.without_url();
    tracing::warn!(error = %api::text::error_chain(&err), "registry request failed");
    HttpError::Unreachable(crate::outbound::Failure::of(&err, deadline))
}

async fn answer(
    response: reqwest::Response,
    requested: &str,
    deadline: std::time::Duration,
) -> Result<Answer, HttpError> {
    answer_limited(response, requested, BODY_LIMIT, deadline).await
}

/// A successful answer's headers and body (at most `limit` bytes), or the
/// failure it is, summarised from its error codes only.
async fn answer_limited(
    response: reqwest::Response,
    requested: &str,
    limit: usize,
    deadline: std::time::Duration,
) -> Result<Answer, HttpError> {
    use crate::outbound::{Failure, read_limited};
    let status = response.status();
    let headers = response.headers().clone();
    if !status.is_success() {
        let body = read_limited(response, ERROR_LIMIT, deadline)
            .await
            .unwrap_or_default();
        let codes = protocol::error_codes(&body);
        return Err(HttpError::Status {
            failure: protocol::failure(status.as_u16(), &codes),
            summary: protocol::summary(status.as_u16(), &codes),
            url: requested.to_owned(),
        });
    }
    let body = read_limited(response, limit, deadline)
        .await
        .map_err(|failure| match failure {
            Failure::TooLarge(limit) => {
                HttpError::Invalid(format!("the answer is larger than {limit} bytes"))
            }
            other => HttpError::Unreachable(other),
        })?;
    Ok(Answer { headers, body })
}
