//! A small server that answers each request with a canned response chosen
//! by its path: over HTTPS (a test CA, [`CannedServer::ca_pem`]) it plays a
//! registry that redirects; over plain HTTP, an internal service that must
//! never be reached. Every request's path is recorded. For the controller's
//! redirect rules (`controller/tests/registry.rs`): the real registry
//! (docker-registry) does not redirect.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::pki;

/// One canned answer.
#[derive(Clone, Debug)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Canned {
    pub fn new(status: u16, body: &[u8]) -> Self {
        Canned {
            status,
            headers: Vec::new(),
            body: body.to_vec(),
        }
    }

    /// A redirect (307) to `location`.
    pub fn redirect(location: &str) -> Self {
        Canned::new(307, b"").header("Location", location)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// One request as the routes see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The path and query.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// The answer for each request.
pub type Routes = Arc<dyn Fn(&Request) -> Canned + Send + Sync>;

/// A running server; stopped when dropped.
pub struct CannedServer {
    pub port: u16,
    hits: Arc<Mutex<Vec<Request>>>,
    dir: Option<tempfile::TempDir>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CannedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CannedServer {
    /// Over HTTPS, with a certificate for 127.0.0.1 from its own test CA.
    pub async fn https(routes: Routes) -> Result<Self> {
        crate::registry::install_crypto_provider();
        let dir = tempfile::Builder::new().prefix("bootc-canned-").tempdir()?;
        pki::ca(dir.path())?;
        pki::serving_leaf(dir.path(), "serving")?;
        let certs = CertificateDer::pem_file_iter(dir.path().join("serving.crt"))
            .context("reading the serving certificate")?
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(dir.path().join("serving.key"))
            .context("reading the serving key")?;
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let recorded = hits.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, routes, hits) = (acceptor.clone(), routes.clone(), recorded.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, &routes, &hits).await;
                    }
                });
            }
        });
        Ok(CannedServer {
            port,
            hits,
            dir: Some(dir),
            task,
        })
    }

    /// Over plain HTTP.
    pub async fn http(routes: Routes) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let recorded = hits.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (routes, hits) = (routes.clone(), recorded.clone());
                tokio::spawn(async move { serve(tcp, &routes, &hits).await });
            }
        });
        Ok(CannedServer {
            port,
            hits,
            dir: None,
            task,
        })
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The CA that signed an HTTPS server's certificate.
    pub fn ca_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.path().join("ca.crt"))
    }

    /// The paths requested so far.
    pub fn hits(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.path).collect()
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Request> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> Result<Vec<u8>> {
        let path = self.ca_path().context("a plain-HTTP server has no CA")?;
        Ok(std::fs::read(path)?)
    }
}

/// One request (HTTP/1.1, GET, no body), one answer, then close.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    routes: &Routes,
    hits: &Mutex<Vec<Request>>,
) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 64 << 10 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&request);
    let path = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_owned();
    let authorization = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.trim().to_owned());
    let request = Request {
        path,
        authorization,
    };
    if let Ok(mut h) = hits.lock() {
        h.push(request.clone());
    }
    let answer = routes(&request);
    let mut head = format!(
        "HTTP/1.1 {} Canned\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&answer.body).await;
    let _ = stream.shutdown().await;
}
