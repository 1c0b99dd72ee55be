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
//! and a revoked grant stops working within the TTL.
//!
//! `/healthz` and `/readyz` stay plain and unauthenticated on
//! `--health-addr`, for the kubelet's probes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a token's verdict is kept.
pub const VERDICT_TTL: Duration = Duration::from_secs(60);
/// How many tokens' verdicts are kept at most.
pub const VERDICT_CACHE_SIZE: usize = 256;
/// The one path served, and the non-resource URL a reader must be granted.
pub const METRICS_PATH: &str = "/metrics";
/// A request's head larger than this is dropped (a node-bound token is
/// about 1 KiB).
const MAX_HEAD: usize = 16 * 1024;
/// The TLS handshake and the request's head must arrive within this.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

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

impl Verdicts {
    /// The verdict on `key` made less than [`VERDICT_TTL`] before `now`.
    pub fn get(&self, key: &[u8; 32], now: Instant) -> Option<Verdict> {
        self.by_token
            .get(key)
            .filter(|(_, at)| now.saturating_duration_since(*at) < VERDICT_TTL)
            .map(|(verdict, _)| *verdict)
    }

    /// Keeps `verdict` on `key`; when full, expired verdicts go first, then
    /// the oldest.
    pub fn put(&mut self, key: [u8; 32], verdict: Verdict, now: Instant) {
        if self.by_token.len() >= VERDICT_CACHE_SIZE && !self.by_token.contains_key(&key) {
            self.by_token
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < VERDICT_TTL);
            let oldest = self
                .by_token
                .iter()
                .min_by_key(|(_, (_, at))| *at)
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

/// A request's path and bearer token, from its head (request line and
/// headers).
pub fn parse_head(head: &str) -> (Option<&str>, Option<&str>) {
    let mut lines = head.split("\r\n");
    let path = lines.next().and_then(|l| l.split_whitespace().nth(1));
    let token = lines.find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        let (scheme, token) = value.trim().split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim())
            .filter(|t| !t.is_empty())
    });
    (path, token)
}

/// The status line of each verdict.
pub fn status_of(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Unauthenticated => "401 Unauthorized",
        Verdict::Forbidden => "403 Forbidden",
        Verdict::Allowed => "200 OK",
    }
}

/// Asks the API server about tokens, and remembers its answers.
pub struct Reviewer {
    client: kube::Client,
    verdicts: Mutex<Verdicts>,
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
        }
    }

    /// The verdict on `token`: remembered, or asked of the API server.
    pub async fn verdict(&self, token: &str) -> Result<Verdict, kube::Error> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(verdict) = self.verdicts.lock().ok().and_then(|v| v.get(&key, now)) {
            return Ok(verdict);
        }
        let verdict = self.review(token).await?;
        if let Ok(mut verdicts) = self.verdicts.lock() {
            verdicts.put(key, verdict, now);
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
    loop {
        let sock = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            r = listener.accept() => match r {
                Ok((sock, _)) => sock,
                Err(error) => {
                    tracing::warn!(%error, "metrics accept failed");
                    continue;
                }
            },
        };
        let (acceptor, reviewer) = (acceptor.clone(), reviewer.clone());
        tokio::spawn(async move {
            let Ok(Ok(mut tls)) = tokio::time::timeout(READ_TIMEOUT, acceptor.accept(sock)).await
            else {
                return;
            };
            let Ok(Some(head)) = tokio::time::timeout(READ_TIMEOUT, read_head(&mut tls)).await
            else {
                return;
            };
            let (status, content_type, body) = respond(&head, &reviewer).await;
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.shutdown().await;
        });
    }
}

/// The request's head, up to the blank line; None past [`MAX_HEAD`] or at
/// an early end.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok().filter(|n| *n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return None;
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn respond(head: &str, reviewer: &Reviewer) -> (&'static str, &'static str, String) {
    const TEXT: &str = "text/plain";
    let (path, token) = parse_head(head);
    if path != Some(METRICS_PATH) {
        return ("404 Not Found", TEXT, "not found".into());
    }
    let Some(token) = token else {
        return (
            status_of(Verdict::Unauthenticated),
            TEXT,
            "a bearer token is required".into(),
        );
    };
    match reviewer.verdict(token).await {
        Ok(Verdict::Allowed) => (
            status_of(Verdict::Allowed),
            crate::metrics::CONTENT_TYPE,
            crate::metrics::global().render(),
        ),
        Ok(Verdict::Forbidden) => (
            status_of(Verdict::Forbidden),
            TEXT,
            "this user may not get /metrics".into(),
        ),
        Ok(Verdict::Unauthenticated) => (
            status_of(Verdict::Unauthenticated),
            TEXT,
            "the token was not authenticated".into(),
        ),
        Err(error) => {
            tracing::warn!(%error, "reviewing a metrics token failed");
            (
                "503 Service Unavailable",
                TEXT,
                "cannot review the token now".into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_gives_path_and_bearer_token() {
        let head = "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc.def\r\n\r\n";
        assert_eq!(parse_head(head), (Some("/metrics"), Some("abc.def")));
        let lower = "GET /metrics HTTP/1.1\r\nauthorization: bearer t\r\n\r\n";
        assert_eq!(parse_head(lower).1, Some("t"));
        for no_token in [
            "GET /metrics HTTP/1.1\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAuthorization: Basic dXNlcjpwYXNz\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nAuthorization: Bearer \r\n\r\n",
            "GET /metrics HTTP/1.1\r\nX-Authorization: Bearer t\r\n\r\n",
        ] {
            assert_eq!(parse_head(no_token).1, None, "{no_token:?}");
        }
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
