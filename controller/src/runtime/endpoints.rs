//! The controller's HTTP endpoints, served by hyper's HTTP/1 server: one
//! accept loop for both ports, `/healthz` and `/readyz` plain on
//! `--health-addr`, `/metrics` over TLS behind the token gate on
//! `--metrics-addr` ([`super::secure_metrics`]).
//!
//! Whoever reaches a port is bounded: a request's head (request line and
//! headers) larger than [`MAX_HEAD`] is answered 431; the TLS handshake and
//! the head must each arrive within [`READ_TIMEOUT`] (a client that sends
//! a byte at a time is cut); one request per connection (as Prometheus and
//! the kubelet send them), and the whole connection is done within
//! [`CONNECTION_DEADLINE`] (a client that never reads its answer is cut
//! too). No request's body is read.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::liveness::Liveness;

/// A request's head larger than this is refused (431); a node-bound token
/// is about 1 KiB.
pub const MAX_HEAD: usize = 16 * 1024;
/// The TLS handshake, and then the request's head, must each arrive
/// within this.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection is closed this long after it was accepted, answered or
/// not: the bound on a client that reads its answer slowly or never (the
/// review itself waits at most `secure_metrics::REVIEW_WAIT` for its turn).
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(30);
/// The content type of every answer but the metrics.
const TEXT: &str = "text/plain";

/// An answer: what every endpoint's service gives.
pub type Answer = Response<Full<Bytes>>;

/// What a request's path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Healthz,
    Readyz,
    Metrics,
    Unknown,
}

/// The endpoint `path` names (the query, if any, is not part of it).
pub fn route(path: &str) -> Endpoint {
    match path {
        "/healthz" => Endpoint::Healthz,
        "/readyz" => Endpoint::Readyz,
        super::secure_metrics::METRICS_PATH => Endpoint::Metrics,
        _ => Endpoint::Unknown,
    }
}

/// The health port's answer to `endpoint`: /healthz fails while the
/// reconcile loop is wedged ([`super::liveness`]), /readyz until `ready`;
/// nothing else is there, the metrics included (those are HTTPS, for
/// permitted tokens only).
pub fn health_answer(endpoint: Endpoint, ready: bool, wedged: bool) -> (StatusCode, &'static str) {
    match endpoint {
        Endpoint::Healthz if wedged => (StatusCode::SERVICE_UNAVAILABLE, "reconcile loop wedged"),
        Endpoint::Healthz => (StatusCode::OK, "ok"),
        Endpoint::Readyz if ready => (StatusCode::OK, "ok"),
        Endpoint::Readyz => (StatusCode::SERVICE_UNAVAILABLE, "not ready"),
        Endpoint::Metrics | Endpoint::Unknown => (StatusCode::NOT_FOUND, "not found"),
    }
}

/// An answer of `status` with `body` as `content_type`.
pub fn answer(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut answer = Response::new(Full::new(body.into()));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    answer
}

/// A plain text answer.
pub fn text(status: StatusCode, body: &'static str) -> Answer {
    answer(status, TEXT, body)
}

/// The health port's service: the flags are read at each request.
pub fn health_service<B>(
    ready: Arc<AtomicBool>,
    liveness: Arc<Liveness>,
) -> impl tower::Service<Request<B>, Response = Answer, Error = Infallible, Future: Send>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |request: Request<B>| {
        let (status, body) = health_answer(
            route(request.uri().path()),
            ready.load(Ordering::Relaxed),
            liveness.wedged(),
        );
        std::future::ready(Ok(text(status, body)))
    })
}

/// Why a connection ended without its answer (logged at debug: whoever
/// reaches the port can cause these).
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("the TLS handshake did not finish within {READ_TIMEOUT:?}")]
    HandshakeTimeout,
    #[error("the TLS handshake: {0}")]
    Handshake(#[source] std::io::Error),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("not done within {CONNECTION_DEADLINE:?}")]
    Deadline,
}

/// Serves `service` on `listener` until `stop`, each connection over TLS
/// when `tls` is given: the one accept loop of both ports (`port` names
/// which in the logs).
pub async fn serve<S>(
    port: &'static str,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    service: S,
    stop: CancellationToken,
) where
    S: tower::Service<Request<Incoming>, Response = Answer, Error = Infallible>,
    S: Clone + Send + 'static,
    S::Future: Send + 'static,
{
    loop {
        let (sock, peer) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(port, %error, "accepting a connection failed");
                    continue;
                }
            },
        };
        let (tls, service) = (tls.clone(), service.clone());
        let span = tracing::debug_span!("endpoint_connection", port, %peer);
        tokio::spawn(
            async move {
                let done =
                    tokio::time::timeout(CONNECTION_DEADLINE, connection(sock, tls, service));
                let outcome = done.await.unwrap_or(Err(ConnectionError::Deadline));
                if let Err(error) = outcome {
                    tracing::debug!(%error, "connection ended without an answer");
                }
            }
            .instrument(span),
        );
    }
}

/// One connection: its TLS handshake if any, then its request.
async fn connection<S>(
    sock: tokio::net::TcpStream,
    tls: Option<TlsAcceptor>,
    service: S,
) -> Result<(), ConnectionError>
where
    S: tower::Service<Request<Incoming>, Response = Answer, Error = Infallible>,
    S: Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let Some(acceptor) = tls else {
        return http1(sock, service).await;
    };
    let tls = tokio::time::timeout(READ_TIMEOUT, acceptor.accept(sock))
        .await
        .map_err(|_| ConnectionError::HandshakeTimeout)?
        .map_err(ConnectionError::Handshake)?;
    http1(tls, service).await
}

/// One request on `io`, with hyper's HTTP/1 and the bounds of the module.
pub async fn http1<I, S>(io: I, service: S) -> Result<(), ConnectionError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<Request<Incoming>, Response = Answer, Error = Infallible>,
    S: Clone + Send + 'static,
    S::Future: Send + 'static,
{
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        .max_header_size(MAX_HEAD)
        // hyper's read buffer: the head must fit in it too.
        .max_buf_size(MAX_HEAD)
        .keep_alive(false)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The plain health port answers the kubelet's probes and serves no
    /// metrics (those are HTTPS, for permitted tokens: `secure_metrics`).
    #[test]
    fn the_health_endpoints_serve_no_metrics() {
        let answer = |path, ready, wedged| health_answer(route(path), ready, wedged).0;
        assert_eq!(answer("/metrics", true, false), StatusCode::NOT_FOUND);
        let body = crate::metrics::global().render();
        assert!(body.contains("# TYPE bootc_leader gauge"), "{body}");
        assert!(body.ends_with("# EOF\n"), "OpenMetrics: {body}");
        assert_eq!(
            answer("/readyz", false, false),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(answer("/readyz", true, false), StatusCode::OK);
        assert_eq!(answer("/healthz", false, false), StatusCode::OK);
        assert_eq!(
            answer("/healthz", true, true),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(answer("/", true, false), StatusCode::NOT_FOUND);
    }

    /// What a client reads of `request` sent whole to the health service
    /// over an in-memory connection, until the server closes it.
    async fn exchange(request: &[u8], ready: bool) -> String {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let service = health_service(
            Arc::new(AtomicBool::new(ready)),
            Arc::new(Liveness::new(Duration::from_secs(60))),
        );
        let served = tokio::spawn(http1(server, service));
        client.write_all(request).await.unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        let _ = served.await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn the_health_port_answers_one_request_and_closes() {
        let out = exchange(b"GET /readyz HTTP/1.1\r\nhost: x\r\n\r\n", false).await;
        assert!(out.starts_with("HTTP/1.1 503 "), "{out}");
        assert!(out.contains("content-type: text/plain"), "{out}");
        assert!(out.ends_with("not ready"), "{out}");
        let out = exchange(b"GET /healthz?verbose HTTP/1.1\r\nhost: x\r\n\r\n", true).await;
        assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
        assert!(out.contains("connection: close"), "{out}");
        assert!(out.ends_with("ok"), "{out}");
    }

    #[tokio::test]
    async fn a_head_over_the_limit_is_refused() {
        let long = format!(
            "GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        let out = exchange(long.as_bytes(), true).await;
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    }

    /// Slowloris: a head that never ends is cut [`READ_TIMEOUT`] after its
    /// first byte, unanswered (the paused clock moves once all wait).
    #[tokio::test(start_paused = true)]
    async fn a_head_sent_slowly_is_cut_at_the_read_timeout() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let service = health_service(
            Arc::new(AtomicBool::new(true)),
            Arc::new(Liveness::new(Duration::from_secs(60))),
        );
        let started = tokio::time::Instant::now();
        let served = tokio::spawn(http1(server, service));
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nho")
            .await
            .unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        let waited = started.elapsed();
        assert!(
            (READ_TIMEOUT..READ_TIMEOUT * 2).contains(&waited),
            "{waited:?}"
        );
        assert!(!String::from_utf8_lossy(&out).contains(" 200 "), "{out:?}");
        assert!(served.await.unwrap().is_err());
    }

    /// The accept loop over a real socket: the health port answers, and
    /// stops accepting once stopped.
    #[tokio::test]
    async fn the_accept_loop_serves_until_stopped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let service = health_service(
            Arc::new(AtomicBool::new(true)),
            Arc::new(Liveness::new(Duration::from_secs(60))),
        );
        let serving = tokio::spawn(serve("health", listener, None, service, stop.clone()));
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        sock.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
        stop.cancel();
        serving.await.unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
