//! What the fake bootc does where real bootc pulls: fetch the manifest (and,
//! for a multi-arch index, the manifest for this host's architecture) and the
//! config from the registry named in the reference, with the credentials of
//! the host's auth file (the first of bootc's three that exists, chosen by
//! the caller) and the CA in `etc/containers/certs.d/<registry>/ca.crt`. A
//! wrong pull secret then fails with the registry's 401 and a missing image
//! with its 404, end to end, in the words containers/image uses.

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;

use crate::registry::install_crypto_provider;

const ACCEPTED: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// What bootc learns from the registry about the image it deploys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledImage {
    /// The digest of the per-platform manifest (bootc's `imageDigest`).
    pub manifest_digest: String,
    pub architecture: String,
    pub version: Option<String>,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    manifests: Option<Vec<IndexEntry>>,
    #[serde(default)]
    config: Option<Descriptor>,
}

#[derive(Deserialize)]
struct IndexEntry {
    digest: String,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
}

#[derive(Deserialize)]
struct ImageConfig {
    #[serde(default)]
    architecture: Option<String>,
    #[serde(default)]
    config: Option<ContainerConfig>,
}

#[derive(Deserialize)]
struct ContainerConfig {
    #[serde(rename = "Labels", default)]
    labels: Option<std::collections::BTreeMap<String, String>>,
}

/// Pulls the metadata of `reference` (`registry/repo@sha256:...`) as a
/// host whose root is `host_root` and whose architecture is `arch`, with
/// the credentials in `auth_file` (None: anonymous, as bootc when none of
/// its auth files exists). Errors read as containers/image words them
/// (what bootc prints after `failed to invoke method OpenImage: `).
pub async fn pull(
    reference: &str,
    host_root: &Path,
    auth_file: Option<&Path>,
    arch: &str,
) -> Result<PulledImage> {
    install_crypto_provider();
    let parsed: Reference = reference
        .parse()
        .with_context(|| format!("invalid reference {reference}"))?;
    let registry = parsed.resolve_registry().to_owned();
    let repo = format!("{registry}/{}", parsed.repository());
    let what = parsed
        .digest()
        .or(parsed.tag())
        .unwrap_or_default()
        .to_owned();

    let auth = match auth_file.map(std::fs::read) {
        Some(Ok(json)) => {
            let shown = auth_file
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            match controller::target::registry::credentials_for(&json, &registry, &shown)? {
                Some(c) => RegistryAuth::Basic(c.username, c.password),
                None => RegistryAuth::Anonymous,
            }
        }
        _ => RegistryAuth::Anonymous,
    };
    let mut config = ClientConfig {
        platform_resolver: None,
        ..Default::default()
    };
    let ca = host_root
        .join("etc/containers/certs.d")
        .join(&registry)
        .join("ca.crt");
    if let Ok(pem) = std::fs::read(&ca) {
        config.extra_root_certificates = vec![Certificate {
            encoding: CertificateEncoding::Pem,
            data: pem,
        }];
    }
    let client = Client::new(config);

    let (body, digest) = client
        .pull_manifest_raw(&parsed, &auth, ACCEPTED)
        .await
        .map_err(|e| anyhow!("{}", describe(&e, &what, &repo, &registry)))?;
    let manifest: Manifest = serde_json::from_slice(&body).context("parsing the manifest")?;
    let (manifest, manifest_digest) = match manifest.manifests {
        Some(entries) => {
            let entry = entries
                .iter()
                .find(|e| {
                    e.platform
                        .as_ref()
                        .is_some_and(|p| p.os == "linux" && p.architecture == arch)
                })
                .ok_or_else(|| anyhow!("no image for linux/{arch} in the index {reference}"))?;
            let by_digest: Reference =
                format!("{}/{}@{}", registry, parsed.repository(), entry.digest).parse()?;
            let (body, d) = client
                .pull_manifest_raw(&by_digest, &auth, ACCEPTED)
                .await
                .map_err(|e| anyhow!("{}", describe(&e, &entry.digest, &repo, &registry)))?;
            (
                serde_json::from_slice::<Manifest>(&body)
                    .context("parsing the platform manifest")?,
                d,
            )
        }
        None => (manifest, digest),
    };
    let config_digest = manifest
        .config
        .ok_or_else(|| anyhow!("manifest of {reference} has no config"))?
        .digest;
    let mut blob = Vec::new();
    client
        .pull_blob(&parsed, config_digest.as_str(), &mut blob)
        .await
        .map_err(|e| anyhow!("{}", describe(&e, config_digest.as_str(), &repo, &registry)))?;
    let image_config: ImageConfig =
        serde_json::from_slice(&blob).context("parsing the image config")?;
    let version = image_config
        .config
        .and_then(|c| c.labels)
        .and_then(|l| l.get("org.opencontainers.image.version").cloned());
    Ok(PulledImage {
        manifest_digest,
        architecture: image_config.architecture.unwrap_or_else(|| arch.to_owned()),
        version,
    })
}

/// The registry's answer in containers/image's words: `reading manifest
/// <tag or digest> in <registry/repo>: manifest unknown` for a 404,
/// `...: authentication required` for distribution's basic-auth 401, and
/// `pinging container registry <host>: ...` when it cannot be reached.
fn describe(
    err: &oci_client::errors::OciDistributionError,
    what: &str,
    repo: &str,
    registry: &str,
) -> String {
    use oci_client::errors::OciDistributionError as E;
    match err {
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => {
            format!("reading manifest {what} in {repo}: authentication required")
        }
        E::ImageManifestNotFoundError(_) => {
            format!("reading manifest {what} in {repo}: manifest unknown")
        }
        E::ServerError { code: 404, .. } => {
            format!("reading manifest {what} in {repo}: manifest unknown")
        }
        E::ServerError { code: 401, .. } => {
            format!("reading manifest {what} in {repo}: authentication required")
        }
        E::ServerError { code, message, .. } => {
            format!(
                "reading manifest {what} in {repo}: received unexpected HTTP status: {code} {message}"
            )
        }
        E::RegistryError { envelope, .. } => {
            use oci_client::errors::OciErrorCode as C;
            let code = envelope.errors.first().map(|e| &e.code);
            match code {
                Some(C::ManifestUnknown | C::NameUnknown | C::NotFound | C::BlobUnknown) => {
                    format!("reading manifest {what} in {repo}: manifest unknown")
                }
                Some(C::Unauthorized | C::Denied) => {
                    format!("reading manifest {what} in {repo}: authentication required")
                }
                _ => format!("reading manifest {what} in {repo}: {envelope}"),
            }
        }
        E::RequestError(e) if e.is_connect() || e.is_timeout() => format!(
            "pinging container registry {registry}: Get \"https://{registry}/v2/\": dial tcp {registry}: connect: connection refused"
        ),
        other => other.to_string(),
    }
}
