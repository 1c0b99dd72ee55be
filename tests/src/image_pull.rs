//! What the fake bootc does where real bootc pulls: fetch the manifest (and,
//! for a multi-arch index, the manifest for this host's architecture) and the
//! config, from where containers/image would: the locations the host's
//! registries.conf (and its drop-ins) gives the reference (its mirrors in
//! order, then the source; a `blocked` registry refused), each with the
//! credentials the host's auth file has for it (the first of bootc's three
//! that exists, chosen by the caller) and the CA in
//! `etc/containers/certs.d/<registry>/ca.crt`. A wrong pull secret then fails
//! with the registry's 401, a missing image with its 404, and a source that a
//! host reaches only through its mirror fails without the mirror, end to
//! end, in the words containers/image uses.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use api::image_ref::ImageRef;
use controller::target::registry::mirrors::{self, Plan, RegistriesConf};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
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
///
/// Where it asks is the host's registries.conf ([`host_registries`]),
/// applied by the controller's own rules (`mirrors::plan`): a `blocked`
/// registry is refused, otherwise each location is opened in turn (its
/// manifest fetched, with that location's credentials and CA) and the
/// first that answers serves the rest of the pull, as containers/image's
/// `newImageSource` does; when none does, every location's failure is named.
pub async fn pull(
    reference: &str,
    host_root: &Path,
    auth_file: Option<&Path>,
    arch: &str,
) -> Result<PulledImage> {
    install_crypto_provider();
    let conf = host_registries(host_root)?;
    let image =
        ImageRef::parse(reference).with_context(|| format!("invalid reference {reference}"))?;
    let candidates = match mirrors::plan(&conf, &image)? {
        Plan::Blocked { prefix } => {
            bail!("registry {prefix} is blocked in {REGISTRIES_CONF} or {REGISTRIES_CONF_D}")
        }
        Plan::Ask { candidates, .. } => candidates,
    };
    let mut failed: Vec<(String, anyhow::Error)> = Vec::new();
    for candidate in &candidates {
        let at = candidate.image.to_string();
        match Location::open(&at, candidate.insecure, host_root, auth_file).await {
            Ok((location, body, digest)) => {
                return location.finish(reference, &body, digest, arch).await;
            }
            Err(e) => failed.push((at, e)),
        }
    }
    Err(all_failed(failed))
}

/// containers/image's error when no location answered: the source's
/// failure alone when it was the only one asked, else the mirrors' in
/// brackets before it.
fn all_failed(mut failed: Vec<(String, anyhow::Error)>) -> anyhow::Error {
    let Some((primary, err)) = failed.pop() else {
        return anyhow!("Internal error: newImageSource returned without trying any endpoint");
    };
    if failed.is_empty() {
        return err;
    }
    let extras: Vec<String> = failed
        .iter()
        .map(|(at, e)| format!("[{at}: {e:#}]"))
        .collect();
    anyhow!(
        "(Mirrors also failed: {}): {primary}: {err:#}",
        extras.join("\n")
    )
}

/// The host's registries.conf files, as containers/image names them.
const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";
const REGISTRIES_CONF_D: &str = "/etc/containers/registries.conf.d";

/// The host's registries.conf as containers/image reads it: `REGISTRIES_CONF`
/// (absent: no rules), then the drop-ins `REGISTRIES_CONF_D/*.conf` in name
/// order, a later file's `[[registry]]` replacing an earlier one of the same
/// prefix (containers-registries.conf.d(5)). Each file is parsed by the
/// controller's own parser: the format has one home, and a file the
/// controller refuses the fake refuses too.
pub fn host_registries(host_root: &Path) -> Result<RegistriesConf> {
    let at = |p: &str| host_root.join(p.trim_start_matches('/'));
    let mut files = vec![at(REGISTRIES_CONF)];
    match std::fs::read_dir(at(REGISTRIES_CONF_D)) {
        Ok(entries) => {
            let mut drop_ins: Vec<_> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect();
            drop_ins.sort();
            files.extend(drop_ins);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context(format!("reading {REGISTRIES_CONF_D}")),
    }
    let mut merged = RegistriesConf::default();
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).context(format!("reading {}", file.display())),
        };
        let conf = mirrors::parse(&text)
            .with_context(|| format!("loading registries configuration {}", file.display()))?;
        for rule in conf.rules {
            match merged.rules.iter_mut().find(|r| r.prefix == rule.prefix) {
                Some(earlier) => *earlier = rule,
                None => merged.rules.push(rule),
            }
        }
    }
    Ok(merged)
}

/// One location a pull asks: its client, credentials and names.
struct Location {
    client: Client,
    auth: RegistryAuth,
    parsed: Reference,
    registry: String,
    repo: String,
}

impl Location {
    /// Opens `reference` at its location: the client (plain HTTP when
    /// `insecure`; else TLS with the CA of `etc/containers/certs.d/<registry>`),
    /// the credentials the auth file has for its registry, and its manifest
    /// (body and digest), fetched.
    async fn open(
        reference: &str,
        insecure: bool,
        host_root: &Path,
        auth_file: Option<&Path>,
    ) -> Result<(Location, Vec<u8>, String)> {
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
        if insecure {
            config.protocol = ClientProtocol::HttpsExcept(vec![registry.clone()]);
        }
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
        let location = Location {
            client,
            auth,
            parsed,
            registry,
            repo,
        };
        Ok((location, body.to_vec(), digest))
    }

    /// The rest of the pull from this location: the platform's manifest of
    /// an index, and the config.
    async fn finish(
        &self,
        reference: &str,
        body: &[u8],
        digest: String,
        arch: &str,
    ) -> Result<PulledImage> {
        let (client, auth, registry, repo) = (&self.client, &self.auth, &self.registry, &self.repo);
        let manifest: Manifest = serde_json::from_slice(body).context("parsing the manifest")?;
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
                    format!("{registry}/{}@{}", self.parsed.repository(), entry.digest).parse()?;
                let (body, d) = client
                    .pull_manifest_raw(&by_digest, auth, ACCEPTED)
                    .await
                    .map_err(|e| anyhow!("{}", describe(&e, &entry.digest, repo, registry)))?;
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
            .pull_blob(&self.parsed, config_digest.as_str(), &mut blob)
            .await
            .map_err(|e| anyhow!("{}", describe(&e, config_digest.as_str(), repo, registry)))?;
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
