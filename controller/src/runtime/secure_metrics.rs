//! `/metrics` for Prometheus only, as controller-runtime's secure metrics
//! serve them: over HTTPS on `--metrics-addr`, and answered only to a
//! bearer token that the API server authenticates (a TokenReview) and whose
//! user may `get` the non-resource URL `/metrics` (a SubjectAccessReview).
//! No token, or one the API server does not know, is 401; a user without
//! the grant is 403; an API server that cannot answer is 503 (never an
//! answer by default).
//!
//! The certificate is `tls.crt` and `tls.key` of `--metrics-cert-dir` (a
//! `kubernetes.io/tls` Secret mounted there, deploy/controller.yaml's
//! optional `bootc-controller-metrics-tls`); without them the controller
//! makes a self-signed one at start. It is read once: a new Secret takes a
//! restart.
//!
//! Each token's verdict is kept for [`VERDICT_TTL`], for at most
//! [`VERDICT_CACHE_SIZE`] tokens, keyed by the token's SHA-256 (the token
//! itself is never kept): a scrape costs no API request after the first,
//! and a revoked grant stops working within the TTL. A token the API
//! server does not know is remembered briefly ([`NEGATIVE_TTL`]), and such
//! verdicts are the first to make room: a flood of junk tokens cannot push
//! Prometheus's verdict out. At most [`MAX_REVIEWS`] reviews run at once;
//! a request that waits [`REVIEW_WAIT`] for its turn is answered 503, so
//! that whoever reaches the port cannot make the controller flood the API
//! server with TokenReviews. Deploy it behind the NetworkPolicy of
//! `deploy/monitoring/networkpolicy.yaml` (only the monitoring namespace
//! reaches the port).
//!
//! hyper serves the port ([`super::endpoints`], which bounds each
//! request's head and how long it may take to arrive); the gate is a tower
//! layer, tower-http's async authorization with [`TokenGate`] deciding,
//! before the service that renders the metrics. The status of each outcome
//! is [`refusal`]'s, a pure function.
//!
//! `/healthz` and `/readyz` stay plain and unauthenticated on
//! `--health-addr`, for the kubelet's probes.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use http::header::AUTHORIZATION;
use http::{HeaderMap, Request, StatusCode};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower_http::auth::{AsyncAuthorizeRequest, AsyncRequireAuthorizationLayer};

use super::endpoints::{self, Answer, Endpoint, route};

/// How long a token's verdict is kept.
pub const VERDICT_TTL: Duration = Duration::from_secs(60);
/// How many tokens' verdicts are kept at most.
pub const VERDICT_CACHE_SIZE: usize = 256;
/// How long a token the API server did not authenticate is remembered.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(10);
/// How many token reviews (each a TokenReview, then perhaps a
/// SubjectAccessReview) run at once at most.
pub const MAX_REVIEWS: usize = 4;
/// How long a request waits for its review's turn before a 503.
pub const REVIEW_WAIT: Duration = Duration::from_secs(2);
/// The one path served, and the non-resource URL a reader must be granted.
pub const METRICS_PATH: &str = "/metrics";

/// What the API server says of a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not authenticated: 401.
    Unauthenticated,
    /// Authenticated, without `get` on `/metrics`: 403.
    Forbidden,
    /// May read the metrics: 200.
    Allowed,
}

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--metrics-cert-dir: reading {path}: {source}")]
    ReadCert {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("--metrics-cert-dir: {path} holds no certificate")]
    NoCert { path: PathBuf },
    #[error("generating the self-signed metrics certificate for {names:?}: {source}")]
    Generate {
        names: Vec<String>,
        #[source]
        source: rcgen::Error,
    },
    #[error("the metrics TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("--metrics-addr {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Verdicts by token digest, each with when it was made.
#[derive(Debug, Default)]
pub struct Verdicts {
    by_token: HashMap<[u8; 32], (Verdict, Instant)>,
}

/// How long `verdict` is kept.
fn ttl(verdict: Verdict) -> Duration {
    match verdict {
        Verdict::Unauthenticated => NEGATIVE_TTL,
        Verdict::Forbidden | Verdict::Allowed => VERDICT_TTL,
    }
}

impl Verdicts {
    /// The verdict on `key`, if made less than its TTL before `now`.
    pub fn get(&self, key: &[u8; 32], now: Instant) -> Option<Verdict> {
        self.by_token
            .get(key)
            .filter(|(verdict, at)| now.saturating_duration_since(*at) < ttl(*verdict))
            .map(|(verdict, _)| *verdict)
    }

    /// Keeps `verdict` on `key`; when full, expired verdicts go first, then
    /// the oldest of the unknown tokens, then the oldest.
    pub fn put(&mut self, key: [u8; 32], verdict: Verdict, now: Instant) {
        if self.by_token.len() >= VERDICT_CACHE_SIZE && !self.by_token.contains_key(&key) {
            self.by_token
                .retain(|_, (verdict, at)| now.saturating_duration_since(*at) < ttl(*verdict));
            let oldest = self
                .by_token
                .iter()
                .min_by_key(|(_, (verdict, at))| (*verdict != Verdict::Unauthenticated, *at))
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest.filter(|_| self.by_token.len() >= VERDICT_CACHE_SIZE) {
                self.by_token.remove(&oldest);
            }
        }
        self.by_token.insert(key, (verdict, now));
    }

    /// How many verdicts are kept.
    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }
}

/// A request's bearer token: that of its first `Authorization` header
/// that says `Bearer` (in any case) and a token.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get_all(AUTHORIZATION).iter().find_map(|value| {
        let (scheme, token) = value.to_str().ok()?.trim().split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim())
            .filter(|t| !t.is_empty())
    })
}

/// What the gate learnt of a request for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It carried no bearer token.
    NoToken,
    /// The API server's verdict on its token (perhaps remembered).
    Reviewed(Verdict),
    /// No verdict: the API server did not answer, or the review's turn did
    /// not come within [`REVIEW_WAIT`].
    Unreviewed,
}

/// The answer that stops a request at the gate, or None when it passes:
/// only a token allowed to read the metrics passes, and no verdict is no
/// answer (503), never a default one.
pub fn refusal(outcome: Outcome) -> Option<(StatusCode, &'static str)> {
    match outcome {
        Outcome::NoToken => Some((StatusCode::UNAUTHORIZED, "a bearer token is required")),
        Outcome::Reviewed(Verdict::Unauthenticated) => {
            Some((StatusCode::UNAUTHORIZED, "the token was not authenticated"))
        }
        Outcome::Reviewed(Verdict::Forbidden) => {
            Some((StatusCode::FORBIDDEN, "this user may not get /metrics"))
        }
        Outcome::Reviewed(Verdict::Allowed) => None,
        Outcome::Unreviewed => Some((
            StatusCode::SERVICE_UNAVAILABLE,
            "cannot review the token now",
        )),
    }
}

/// Why a token has no verdict.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("reviewing the token: {0}")]
    Api(#[from] kube::Error),
    #[error("{MAX_REVIEWS} token reviews were running for {REVIEW_WAIT:?}")]
    Busy,
}

/// Asks the API server about tokens, and remembers its answers.
pub struct Reviewer {
    client: kube::Client,
    verdicts: Mutex<Verdicts>,
    reviews: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("verdicts", &self.verdicts)
            .finish()
    }
}

impl Reviewer {
    pub fn new(client: kube::Client) -> Self {
        Reviewer {
            client,
            verdicts: Mutex::default(),
            reviews: tokio::sync::Semaphore::new(MAX_REVIEWS),
        }
    }

    /// The verdict on `token`: remembered, or asked of the API server.
    pub async fn verdict(&self, token: &str) -> Result<Verdict, ReviewError> {
        self.verdict_by(token, |t| self.review(t)).await
    }

    /// The verdict on `token`: remembered, or `review`'s, at most
    /// [`MAX_REVIEWS`] at once.
    async fn verdict_by<'t, F, R>(&self, token: &'t str, review: R) -> Result<Verdict, ReviewError>
    where
        R: FnOnce(&'t str) -> F,
        F: Future<Output = Result<Verdict, kube::Error>>,
    {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let remembered = |now| self.verdicts.lock().ok().and_then(|v| v.get(&key, now));
        if let Some(verdict) = remembered(Instant::now()) {
            return Ok(verdict);
        }
        let _turn = tokio::time::timeout(REVIEW_WAIT, self.reviews.acquire())
            .await
            .map_err(|_| ReviewError::Busy)?
            .map_err(|_| ReviewError::Busy)?;
        // Answered while this one waited (the same token, twice at once).
        if let Some(verdict) = remembered(Instant::now()) {
            return Ok(verdict);
        }
        let verdict = review(token).await?;
        if let Ok(mut verdicts) = self.verdicts.lock() {
            verdicts.put(key, verdict, Instant::now());
        }
        Ok(verdict)
    }

    #[tracing::instrument(name = "metrics_review", skip_all)]
    async fn review(&self, token: &str) -> Result<Verdict, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let user = reviewed
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user);
        let Some(user) = user else {
            return Ok(Verdict::Unauthenticated);
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        Ok(if answered.status.is_some_and(|s| s.allowed) {
            Verdict::Allowed
        } else {
            Verdict::Forbidden
        })
    }
}

/// The TLS acceptor: `tls.crt` and `tls.key` of `cert_dir` when it has
/// them, else a self-signed certificate for `names`.
pub fn acceptor(cert_dir: Option<&Path>, names: &[String]) -> Result<TlsAcceptor, MetricsError> {
    let (certs, key) = match cert_dir.filter(|d| d.join("tls.crt").exists()) {
        Some(dir) => mounted(dir)?,
        None => self_signed(names)?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

type CertAndKey = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn mounted(dir: &Path) -> Result<CertAndKey, MetricsError> {
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let certs = CertificateDer::pem_file_iter(&crt)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| MetricsError::ReadCert {
            path: crt.clone(),
            source,
        })?;
    if certs.is_empty() {
        return Err(MetricsError::NoCert { path: crt });
    }
    let key = PrivateKeyDer::from_pem_file(&key)
        .map_err(|source| MetricsError::ReadCert { path: key, source })?;
    tracing::info!(dir = %dir.display(), "metrics certificate from the mounted Secret");
    Ok((certs, key))
}

fn self_signed(names: &[String]) -> Result<CertAndKey, MetricsError> {
    let made = rcgen::generate_simple_self_signed(names.to_vec()).map_err(|source| {
        MetricsError::Generate {
            names: names.to_vec(),
            source,
        }
    })?;
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    tracing::info!(?names, "metrics certificate self-signed at start");
    Ok((vec![made.cert.der().clone()], key.into()))
}

/// The TokenReview and SubjectAccessReview gate, as tower-http's async
/// authorization layer asks it: a request for `/metrics` goes on to the
/// metrics only if [`refusal`] has no answer for it. Another path goes on
/// unreviewed, to its 404: a wrong path costs the API server nothing.
#[derive(Clone, Debug)]
pub struct TokenGate {
    reviewer: Arc<Reviewer>,
}

impl TokenGate {
    pub fn new(reviewer: Arc<Reviewer>) -> Self {
        TokenGate { reviewer }
    }

    /// What the gate learns of a request with `headers` (not of the
    /// request: its body need not be `Sync`).
    async fn outcome(&self, headers: &HeaderMap) -> Outcome {
        let Some(token) = bearer(headers) else {
            return Outcome::NoToken;
        };
        match self.reviewer.verdict(token).await {
            Ok(verdict) => Outcome::Reviewed(verdict),
            Err(error) => {
                tracing::warn!(%error, "reviewing a metrics token failed");
                Outcome::Unreviewed
            }
        }
    }
}

impl<B: Send + 'static> AsyncAuthorizeRequest<B> for TokenGate {
    type RequestBody = B;
    type ResponseBody = http_body_util::Full<bytes::Bytes>;
    type Future = BoxFuture<'static, Result<Request<B>, Answer>>;

    fn authorize(&mut self, request: Request<B>) -> Self::Future {
        let gate = self.clone();
        Box::pin(async move {
            if route(request.uri().path()) != Endpoint::Metrics {
                return Ok(request);
            }
            match refusal(gate.outcome(request.headers()).await) {
                None => Ok(request),
                Some((status, body)) => Err(endpoints::text(status, body)),
            }
        })
    }
}

/// The metrics port's service: the gate, then the metrics (or a 404).
pub fn service<B: Send + 'static>(
    reviewer: Arc<Reviewer>,
) -> impl tower::Service<Request<B>, Response = Answer, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    tower::ServiceBuilder::new()
        .layer(AsyncRequireAuthorizationLayer::new(TokenGate::new(
            reviewer,
        )))
        .service_fn(|request: Request<B>| {
            std::future::ready(Ok(match route(request.uri().path()) {
                Endpoint::Metrics => endpoints::answer(
                    StatusCode::OK,
                    crate::metrics::CONTENT_TYPE,
                    crate::metrics::global().render(),
                ),
                _ => endpoints::text(StatusCode::NOT_FOUND, "not found"),
            }))
        })
}

/// Serves `/metrics` on `addr` until `stop`.
pub async fn serve(
    addr: SocketAddr,
    acceptor: TlsAcceptor,
    reviewer: Arc<Reviewer>,
    stop: CancellationToken,
) -> Result<(), MetricsError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Bind { addr, source })?;
    tracing::info!(%addr, "metrics endpoint listening (HTTPS, TokenReview and SubjectAccessReview)");
    endpoints::serve("metrics", listener, Some(acceptor), service(reviewer), stop).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `head` as hyper parses it off the wire, as the endpoints serve it.
    async fn parsed(head: &str) -> http::request::Parts {
        use tokio::io::AsyncWriteExt;
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let (sent, mut received) = tokio::sync::mpsc::unbounded_channel();
        let service = tower::service_fn(move |request: Request<hyper::body::Incoming>| {
            let _ = sent.send(request.into_parts().0);
            std::future::ready(Ok::<_, Infallible>(endpoints::text(StatusCode::OK, "")))
        });
        let served = tokio::spawn(endpoints::http1(server, service));
        client.write_all(head.as_bytes()).await.unwrap();
        let parts = received.recv().await.unwrap();
        drop(client);
        let _ = served.await.unwrap();
        parts
    }

    #[tokio::test]
    async fn the_head_gives_path_and_bearer_token() {
        let head = "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc.def\r\n\r\n";
        let parts = parsed(head).await;
        assert_eq!(
            (parts.uri.path(), bearer(&parts.headers)),
            ("/metrics", Some("abc.def"))
        );
        assert_eq!(route(parts.uri.path()), Endpoint::Metrics);
        let lower = "GET /metrics HTTP/1.1\r\nauthorization: bearer t\r\n\r\n";
        assert_eq!(bearer(&parsed(lower).await.headers), Some("t"));
        for no_token in [
            "GET /metrics HTTP/1.1\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAuthorization: Bearer \r\n\r\n",
            "GET /metrics HTTP/1.1\r\nX-Authorization: Bearer t\r\n\r\n",
        ] {
            assert_eq!(
                bearer(&parsed(no_token).await.headers),
                None,
                "{no_token:?}"
            );
        }
    }

    /// One row per outcome: only an allowed token passes, and no verdict is
    /// 503, never a default answer.
    #[test]
    fn each_outcome_has_its_status() {
        let rows = [
            (Outcome::NoToken, Some(StatusCode::UNAUTHORIZED)),
            (
                Outcome::Reviewed(Verdict::Unauthenticated),
                Some(StatusCode::UNAUTHORIZED),
            ),
            (
                Outcome::Reviewed(Verdict::Forbidden),
                Some(StatusCode::FORBIDDEN),
            ),
            (Outcome::Reviewed(Verdict::Allowed), None),
            (Outcome::Unreviewed, Some(StatusCode::SERVICE_UNAVAILABLE)),
        ];
        for (outcome, status) in rows {
            assert_eq!(refusal(outcome).map(|(s, _)| s), status, "{outcome:?}");
        }
    }

    /// The gate as a tower layer before the metrics: each verdict's status,
    /// the metrics behind the allowed one only, a 503 when the API server
    /// cannot answer, and a wrong path's 404 without a review.
    #[tokio::test]
    async fn the_gate_answers_each_verdict_before_the_metrics() {
        use tower::ServiceExt;
        // Nothing listens there: a review fails at once.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let reviewer = Arc::new(Reviewer::new(kube::Client::try_from(config).unwrap()));
        for (token, verdict) in [("a", Verdict::Allowed), ("f", Verdict::Forbidden)] {
            let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            let mut verdicts = reviewer.verdicts.lock().unwrap();
            verdicts.put(key, verdict, Instant::now());
        }
        let ask = |path: &str, token: Option<&str>| {
            let mut request = Request::get(path);
            if let Some(token) = token {
                request = request.header(AUTHORIZATION, format!("Bearer {token}"));
            }
            let request = request.body(()).unwrap();
            let service = service(reviewer.clone());
            async move { service.oneshot(request).await.unwrap() }
        };
        assert_eq!(
            ask("/metrics", None).await.status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            ask("/metrics", Some("f")).await.status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            ask("/metrics", Some("unknown")).await.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            ask("/other", Some("unknown")).await.status(),
            StatusCode::NOT_FOUND
        );
        let allowed = ask("/metrics", Some("a")).await;
        assert_eq!(allowed.status(), StatusCode::OK);
        assert_eq!(
            allowed.headers()[http::header::CONTENT_TYPE],
            crate::metrics::CONTENT_TYPE
        );
        use http_body_util::BodyExt;
        let body = allowed.into_body().collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&body).contains("bootc_leader"));
    }

    /// A flood of unknown tokens: at most [`MAX_REVIEWS`] reviews at once,
    /// the rest answered 503 after [`REVIEW_WAIT`]; their verdicts kept
    /// [`NEGATIVE_TTL`] only, and never at the cost of a known token's.
    #[tokio::test(start_paused = true)]
    async fn reviews_are_bounded_and_unknown_tokens_make_room_first() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let reviewer = Arc::new(Reviewer::new(kube::Client::try_from(config).unwrap()));
        let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (release, _) = tokio::sync::broadcast::channel::<()>(1);
        let mut asked = Vec::new();
        // The reviews' turn waits are timed on the paused clock.
        for i in 0..20 {
            let (reviewer, running, most) = (reviewer.clone(), running.clone(), most.clone());
            let mut released = release.subscribe();
            asked.push(tokio::spawn(async move {
                let token = format!("junk-{i}");
                reviewer
                    .verdict_by(&token, |_| async move {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        let _ = released.recv().await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(Verdict::Unauthenticated)
                    })
                    .await
            }));
        }
        // The clock is paused: it moves past REVIEW_WAIT once every task
        // waits, and the waiting ones give up; then the running ones are
        // let go. Without a bound none gives up: the test's own bound ends it.
        let counting = async {
            use futures::StreamExt;
            let mut pending: futures::stream::FuturesUnordered<_> = asked.into_iter().collect();
            let (mut busy, mut answered) = (0, 0);
            while let Some(outcome) = pending.next().await {
                match outcome.unwrap() {
                    Err(ReviewError::Busy) => busy += 1,
                    Ok(Verdict::Unauthenticated) => answered += 1,
                    other => panic!("{other:?}"),
                }
                if busy == 20 - MAX_REVIEWS {
                    let _ = release.send(());
                }
            }
            (busy, answered)
        };
        let (busy, answered) = tokio::time::timeout(Duration::from_secs(600), counting)
            .await
            .expect("the reviews beyond the bound gave up");
        assert_eq!((busy, answered), (20 - MAX_REVIEWS, MAX_REVIEWS));
        assert_eq!(most.load(Ordering::SeqCst), MAX_REVIEWS);

        let t0 = Instant::now();
        let mut verdicts = Verdicts::default();
        verdicts.put([1; 32], Verdict::Allowed, t0);
        for i in 0..VERDICT_CACHE_SIZE * 2 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64 + 2).to_le_bytes());
            verdicts.put(
                key,
                Verdict::Unauthenticated,
                t0 + Duration::from_millis(i as u64),
            );
        }
        let later = t0 + Duration::from_secs(1);
        assert_eq!(verdicts.get(&[1; 32], later), Some(Verdict::Allowed));
        let mut last = [0u8; 32];
        last[..8].copy_from_slice(&(VERDICT_CACHE_SIZE as u64 * 2 + 1).to_le_bytes());
        assert_eq!(verdicts.get(&last, later), Some(Verdict::Unauthenticated));
        assert_eq!(
            verdicts.get(&last, t0 + NEGATIVE_TTL + Duration::from_secs(1)),
            None
        );
    }

    #[test]
    fn verdicts_expire_and_stay_bounded() {
        let t0 = Instant::now();
        let mut verdicts = Verdicts::default();
        verdicts.put([1; 32], Verdict::Allowed, t0);
        assert_eq!(
            verdicts.get(&[1; 32], t0 + VERDICT_TTL / 2),
            Some(Verdict::Allowed)
        );
        assert_eq!(verdicts.get(&[1; 32], t0 + VERDICT_TTL), None);
        for i in 0..VERDICT_CACHE_SIZE + 10 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            verdicts.put(
                key,
                Verdict::Forbidden,
                t0 + Duration::from_millis(i as u64 + 1),
            );
        }
        assert_eq!(verdicts.len(), VERDICT_CACHE_SIZE);
        // The newest is kept; the oldest went first.
        let mut newest = [0u8; 32];
        newest[..8].copy_from_slice(&((VERDICT_CACHE_SIZE + 9) as u64).to_le_bytes());
        assert!(verdicts.get(&newest, t0 + Duration::from_secs(1)).is_some());
        assert!(
            verdicts
                .get(&[1; 32], t0 + Duration::from_secs(1))
                .is_none()
        );
    }
}
