//! The one rule for every HTTP client the controller has toward a server
//! other than the API server (registries, [`crate::target::registry`];
//! Prometheus, [`crate::gates`]). Each is built here ([`http_client`]) and
//! reads answers here ([`read_limited`]):
//!
//! * **No redirect is followed by the client.** Its policy is "none"; a
//!   caller that must follow one (a registry's blob on other storage) does
//!   so itself, one hop at a time, under its own rules
//!   (`target::registry::protocol::redirect`); the alert gate follows none.
//! * **Every request has a whole-request deadline**, from the connection to
//!   the last byte of the body, besides a connect timeout: a server that
//!   answers a byte at a time cannot hold a reconcile past it. A caller that
//!   makes several requests bounds them together as well (a registry
//!   resolution: [`crate::target::registry::Resolver::resolve`]), so that
//!   one pool's slow server delays only that pool's reconcile, by a bounded
//!   time, never the others' nor `/healthz` (`runtime::liveness`).
//! * **Bodies are read up to a bound** and, on a failure, never copied into
//!   a status: what a pool shows is a fixed wording of the failure's class
//!   ([`Failure`]) and, where useful, the HTTP status or a registry's error
//!   codes, each through `api::text::escape_controls`.
//! * **The server's address is the admin's or the image's**: registries are
//!   the hosts of the pools' image references and the mirrors the admin's
//!   registries.conf gives them (each location's credentials go to that
//!   origin only); Prometheus and Alertmanager endpoints are configured
//!   where the operator is installed (`--alert-gate-endpoint`,
//!   `--alertmanager-endpoint`: [`Endpoints`]), never written in a pool,
//!   which names one.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::Duration;

use reqwest::Url;

/// The connect timeout of every client (within its deadline).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What an outbound client trusts and how long a request may take.
#[derive(Clone, Debug)]
pub struct ClientPolicy {
    /// The whole-request deadline (connect, send, every byte of the answer).
    pub deadline: Duration,
    /// Extra CA certificates (PEM) trusted besides the system's.
    pub ca_bundle: Option<Vec<u8>>,
}

/// An HTTP client under the rules above.
pub fn http_client(policy: &ClientPolicy) -> Result<reqwest::Client, String> {
    // reqwest is built without a rustls provider (no aws-lc): use ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(policy.deadline)
        .connect_timeout(CONNECT_TIMEOUT.min(policy.deadline))
        .user_agent(concat!("bootc-controller/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = &policy.ca_bundle {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("CA bundle: {}", api::text::error_chain(&e)))?;
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|e| api::text::error_chain(&e))
}

/// Why an outbound request failed, as a class with a fixed wording: what a
/// status may say about a server the controller asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error("did not answer within {0:?}")]
    TimedOut(Duration),
    #[error("could not be reached")]
    Unreachable,
    #[error("answered more than {0} bytes")]
    TooLarge(usize),
    /// Reached, but its TLS certificate is not trusted: what is wrong with
    /// it, in rustls's fixed words ([`untrusted_certificate`]).
    #[error("presented a certificate that is not trusted ({0})")]
    Untrusted(&'static str),
}

impl Failure {
    /// The class of a client error (its text stays in the log).
    pub fn of(error: &reqwest::Error, deadline: Duration) -> Self {
        if error.is_timeout() {
            Failure::TimedOut(deadline)
        } else if let Some(problem) = untrusted_certificate(error) {
            Failure::Untrusted(problem)
        } else {
            Failure::Unreachable
        }
    }
}

/// What is wrong with the server's certificate, when `error` is rustls
/// refusing it, somewhere in its chain of causes. An `io::Error` carries
/// its cause as its inner error (nested, from the TLS connector), which its
/// `source()` skips: the walk goes through `get_ref()` there.
pub fn untrusted_certificate(error: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidCertificate(c)) = e.downcast_ref() {
            return Some(certificate_problem(c));
        }
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

/// A certificate error in fixed words (never the server's own text).
fn certificate_problem(error: &rustls::CertificateError) -> &'static str {
    use rustls::CertificateError as C;
    match error {
        C::UnknownIssuer => "issued by an unknown CA",
        C::Expired | C::ExpiredContext { .. } => "expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "not valid yet",
        C::NotValidForName | C::NotValidForNameContext { .. } => "not valid for its name",
        C::Revoked => "revoked",
        C::BadSignature | C::BadEncoding => "malformed or badly signed",
        _ => "refused by the certificate check",
    }
}

/// The command-line flag a kind of [`Endpoints`] is given with.
pub trait Flag {
    const FLAG: &'static str;
}

/// Why a `NAME=URL` endpoint setting is refused at start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("{0} {1:?}: expected NAME=URL")]
    Form(&'static str, String),
    #[error("{0} {1:?}: the name must be a DNS label (a-z, 0-9, -)")]
    Name(&'static str, String),
    #[error("{0} {1:?}: the URL must be http or https with a host, and no user, query or fragment")]
    Url(&'static str, String),
    #[error("{0} {1:?}: the name is given twice")]
    Twice(&'static str, String),
}

/// The endpoints of one kind the controller may ask, by name: the admin's
/// (`NAME=URL`, each an http(s) URL with a host and no user, query or
/// fragment, given with `F`'s flag). A pool names one; no pool writes a URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoints<F>(BTreeMap<String, Url>, PhantomData<F>);

impl<F: Flag> Endpoints<F> {
    /// Parses `NAME=URL` settings.
    pub fn parse<'a>(settings: impl IntoIterator<Item = &'a str>) -> Result<Self, EndpointError> {
        let mut endpoints = BTreeMap::new();
        for setting in settings {
            let (name, url) = setting
                .split_once('=')
                .ok_or_else(|| EndpointError::Form(F::FLAG, setting.to_owned()))?;
            if !api::schema::is_alert_endpoint_name(name) {
                return Err(EndpointError::Name(F::FLAG, setting.to_owned()));
            }
            let url = Url::parse(url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .filter(|u| u.host_str().is_some_and(|h| !h.is_empty()))
                .filter(|u| u.username().is_empty() && u.password().is_none())
                .filter(|u| u.query().is_none() && u.fragment().is_none())
                .ok_or_else(|| EndpointError::Url(F::FLAG, setting.to_owned()))?;
            if endpoints.insert(name.to_owned(), url).is_some() {
                return Err(EndpointError::Twice(F::FLAG, setting.to_owned()));
            }
        }
        Ok(Endpoints(endpoints, PhantomData))
    }

    /// The endpoint of that name, with its name.
    pub fn get(&self, name: &str) -> Option<(&str, &Url)> {
        self.0.get_key_value(name).map(|(n, u)| (n.as_str(), u))
    }

    /// Every endpoint, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Url)> {
        self.0.iter().map(|(n, u)| (n.as_str(), u))
    }

    /// The names configured, for a message.
    pub fn names(&self) -> String {
        if self.0.is_empty() {
            return format!("none is configured ({})", F::FLAG);
        }
        let names: Vec<&str> = self.0.keys().map(String::as_str).collect();
        format!("configured: {}", names.join(", "))
    }
}

/// The answer's body, up to `limit` bytes.
pub async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
    deadline: Duration,
) -> Result<Vec<u8>, Failure> {
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            tracing::debug!(error = %api::text::error_chain(&e), "reading an answer");
            Failure::of(&e, deadline)
        })?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > limit {
            return Err(Failure::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server that answers every request with headers promising
    /// a long body, then trickles it a byte every 100 ms, for as long as
    /// the connection is held open.
    async fn trickling() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = conn.read(&mut request).await;
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n";
                    if conn.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let mut tick = tokio::time::interval(Duration::from_millis(100));
                    while conn.write_all(b" ").await.is_ok() {
                        tick.tick().await;
                    }
                });
            }
        });
        url
    }

    /// rustls's refusal, nested in the io errors the TLS connector wraps it
    /// in (as reqwest reports it), is an untrusted certificate; any other
    /// failure is not.
    #[test]
    fn a_refused_certificate_is_found_in_nested_io_errors() {
        use std::io::{Error, ErrorKind};
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let nested = Error::other(Error::new(ErrorKind::InvalidData, refused));
        assert_eq!(
            untrusted_certificate(&nested),
            Some("issued by an unknown CA")
        );
        let closed = Error::other(Error::new(ErrorKind::UnexpectedEof, "peer closed"));
        assert_eq!(untrusted_certificate(&closed), None);
    }

    #[tokio::test]
    async fn a_server_that_trickles_is_cut_at_the_deadline() {
        let url = trickling().await;
        let deadline = Duration::from_millis(700);
        let http = http_client(&ClientPolicy {
            deadline,
            ca_bundle: None,
        })
        .unwrap();
        let asking = async {
            let response = http
                .get(&url)
                .send()
                .await
                .map_err(|e| Failure::of(&e, deadline))?;
            read_limited(response, 1 << 20, deadline).await
        };
        // The bound of the test, far past the deadline: without a
        // whole-request deadline the per-read timeout never trips.
        let outcome = tokio::time::timeout(Duration::from_secs(10), asking)
            .await
            .expect("the request ended at its deadline");
        assert_eq!(outcome, Err(Failure::TimedOut(deadline)));
    }
}
