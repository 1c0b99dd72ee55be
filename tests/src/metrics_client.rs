//! What reads the controller's `/metrics` (HTTPS, for permitted tokens
//! only): Prometheus's token as deploy/monitoring/ grants it, and a GET as
//! Prometheus sends it, trusting one CA, with a bearer token or none.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The status code and body of `GET /metrics` at `addr` (whose certificate
/// names `localhost` and is signed by the CA in `ca`), with `token` as the
/// bearer token.
pub async fn get_metrics(addr: &str, ca: &Path, token: Option<&str>) -> Result<(u16, String)> {
    crate::registry::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("{}", ca.display()))? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let mut tls = connector
        .connect(ServerName::try_from("localhost")?, tcp)
        .await
        .context("TLS handshake")?;
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    tls.write_all(format!("GET /metrics HTTP/1.1\r\nhost: localhost\r\n{auth}\r\n").as_bytes())
        .await?;
    let mut out = Vec::new();
    tls.read_to_end(&mut out)
        .await
        .context("reading the answer")?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no status line in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// A token of the ServiceAccount `monitoring/prometheus`, bound to the
/// scraping ClusterRole of deploy/monitoring/metrics-reader.yaml as that
/// file's comment tells users to.
pub fn reader_token(cp: &crate::ControlPlane) -> Result<String> {
    let reader = crate::repo_root().join("deploy/monitoring/metrics-reader.yaml");
    let reader = reader.to_str().context("repository path")?;
    let steps: [&[&str]; 4] = [
        &["apply", "-f", reader],
        &["create", "namespace", "monitoring"],
        &["create", "serviceaccount", "prometheus", "-n", "monitoring"],
        &[
            "create",
            "clusterrolebinding",
            "bootc-operator-metrics-reader",
            "--clusterrole=bootc-operator-metrics-reader",
            "--serviceaccount=monitoring:prometheus",
        ],
    ];
    for args in steps {
        cp.run_kubectl(args)?;
    }
    Ok(cp
        .run_kubectl(&["create", "token", "prometheus", "-n", "monitoring"])?
        .trim()
        .to_owned())
}
