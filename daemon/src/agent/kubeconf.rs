//! Kubernetes credentials, read while the daemon is still root and turned
//! into a client after the privilege drop.
//!
//! A kubeconfig (tests, or a daemon run by hand) may point at files the
//! unprivileged uid cannot read: they are inlined before the drop. In a pod
//! the in-cluster service-account token is world-readable and re-read by the
//! client as the kubelet rotates it.

use std::path::Path;

use base64::Engine;
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Debug, thiserror::Error)]
pub enum KubeconfError {
    #[error("reading kubeconfig {path}: {source}")]
    Read {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("reading {what} {path} named in the kubeconfig: {source}")]
    File {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("building the Kubernetes client configuration: {0}")]
    Config(String),
    #[error("building the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// Where the client's configuration comes from.
#[derive(Clone, Debug)]
pub enum KubeSource {
    /// A kubeconfig with every referenced file inlined.
    Kubeconfig(Box<Kubeconfig>),
    /// The in-cluster service account.
    InCluster,
}

fn read_b64(what: &'static str, path: &str) -> Result<String, KubeconfError> {
    let bytes = std::fs::read(path).map_err(|source| KubeconfError::File {
        what,
        path: path.to_owned(),
        source,
    })?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Reads `path` (if given) and inlines the files it references.
pub fn preload(path: Option<&Path>) -> Result<KubeSource, KubeconfError> {
    let Some(path) = path else {
        return Ok(KubeSource::InCluster);
    };
    let mut kc = Kubeconfig::read_from(path).map_err(|source| KubeconfError::Read {
        path: path.display().to_string(),
        source,
    })?;
    for cluster in kc.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        if let Some(ca) = cluster.certificate_authority.take() {
            cluster.certificate_authority_data = Some(read_b64("certificate-authority", &ca)?);
        }
    }
    for auth in kc
        .auth_infos
        .iter_mut()
        .filter_map(|a| a.auth_info.as_mut())
    {
        if let Some(file) = auth.token_file.take() {
            let token = std::fs::read_to_string(&file).map_err(|source| KubeconfError::File {
                what: "token-file",
                path: file.clone(),
                source,
            })?;
            auth.token = Some(token.trim().to_owned().into());
        }
        if let Some(cert) = auth.client_certificate.take() {
            auth.client_certificate_data = Some(read_b64("client-certificate", &cert)?);
        }
        if let Some(key) = auth.client_key.take() {
            auth.client_key_data = Some(read_b64("client-key", &key)?.into());
        }
    }
    Ok(KubeSource::Kubeconfig(Box::new(kc)))
}

/// Builds the client (after the drop).
pub async fn client(source: KubeSource) -> Result<kube::Client, KubeconfError> {
    let config = match source {
        KubeSource::Kubeconfig(kc) => {
            kube::Config::from_custom_kubeconfig(*kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| KubeconfError::Config(e.to_string()))?
        }
        KubeSource::InCluster => {
            kube::Config::incluster().map_err(|e| KubeconfError::Config(e.to_string()))?
        }
    };
    Ok(kube::Client::try_from(config)?)
}
