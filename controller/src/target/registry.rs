//! Resolving a pool's image against its registry, and checking that the
//! nodes can run it, before any BootcNode is told about a new digest.
//!
//! Pure parts (pull-secret parsing, manifest parsing, the architecture check,
//! the registry protocol's rules in [`protocol`]) are plain functions with
//! unit tests; [`Resolver`] is the thin I/O layer over [`client`].
//!
//! **What the controller contacts** for a pool: the registry its
//! `spec.image.ref` names, and before it the mirrors the admin's
//! registries.conf gives that registry ([`mirrors`]: addresses the admin
//! configured, in the operator's namespace, never a pool's; a `blocked`
//! registry is asked nothing), each over HTTPS (plain HTTP only for a
//! registry given with `--insecure-registry` or a location registries.conf
//! marks `insecure`); the token realm each names in its challenge (HTTPS
//! unless that registry itself is plain HTTP); and, for a config blob only,
//! where a registry redirects it (storage), at most
//! [`protocol::MAX_REDIRECTS`] hops and never from HTTPS to HTTP. A
//! manifest request is never redirected. Through `HTTPS_PROXY` when set.
//! Credentials (the pool's pull secret's entry for the host asked: a
//! mirror's own) go to that location's origin and its token realm only.
//! Nothing of an answer's body reaches a status but the distribution error
//! codes it carries.
//! Since anyone who may write a pool chooses the registry, the controller's
//! pod can be made to connect to any address over HTTPS: a NetworkPolicy on
//! its egress closes that (SECURITY.md). The only other addresses it asks
//! are the admin's alert endpoints (the gates layer beside it). Every
//! request here follows `crate::outbound`'s rule: a whole-request deadline
//! ([`RegistryOptions::request_deadline`]), a resolution's too.
//!
//! **Errors** are told apart in the pool's `Degraded` reason
//! (`RegistryUnauthorized`, `ImageNotFound`, `RegistryUnreachable`,
//! `RegistryUntrusted` (reached, its certificate not trusted),
//! `UnsupportedArchitecture`, `InvalidManifest`, `InvalidPullSecret`,
//! `RegistryBlocked`, `InvalidRegistriesConf`, `SignatureRefused` and
//! `InvalidSignaturePolicy` ([`signatures`]); when a registries.conf
//! table chose several locations and all failed, each is named with its
//! class, the reason by [`tried_reason`]), with
//! the registry's HTTP status and error codes (`HTTP 404
//! (MANIFEST_UNKNOWN)`). Extra CAs come from `--registry-ca-file` and
//! `--registry-ca-dir`, the directory re-read while the controller runs
//! ([`trust`]). For a
//! multi-arch image the target is the index digest, with the digests of
//! its linux platform manifests beside it ([`ManifestFacts::platform_digests`]):
//! a node reports its platform's digest, and a host installed from the
//! index's tag reports nothing else, so either counts as running the
//! target (`rollout::members::state::runs_target`).

mod client;
pub mod mirrors;
pub mod policy;
pub mod protocol;
pub mod signatures;
pub mod trust;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use api::image_ref::ImageRef;
use base64::Engine;
use mirrors::{Candidate, Plan};
use reqwest::Url;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use client::{HttpError, Session};
use protocol::Endpoint;

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const ACCEPTED: &[&str] = &[OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST];

/// A registry problem, classified so the pool's condition can say which
/// kind of problem it is. An unreachable registry is named by the class of
/// its failure (`crate::outbound::Failure`); an answer, by its HTTP status
/// and error codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("registry {registry} refused the credentials for {reference}: {message}")]
    Unauthorized {
        registry: String,
        reference: String,
        message: String,
    },
    #[error("{reference} was not found in the registry: {message}")]
    NotFound { reference: String, message: String },
    #[error("registry {registry} could not be reached: {message}")]
    Unreachable { registry: String, message: String },
    #[error(
        "registry {registry} {message}: trust its CA (the controller's --registry-ca-dir: the ConfigMap bootc-registry-ca in the operator's namespace, read again while it runs)"
    )]
    Untrusted { registry: String, message: String },
    #[error(
        "{reference} does not support the architecture(s) {missing:?} of the pool's nodes (image has {available:?})"
    )]
    UnsupportedArchitecture {
        reference: String,
        missing: Vec<String>,
        available: Vec<String>,
    },
    #[error("the manifest of {reference} cannot be used: {message}")]
    InvalidManifest { reference: String, message: String },
    #[error("pull secret {secret}: {message}")]
    InvalidPullSecret { secret: String, message: String },
    #[error("registry error for {reference}: {message}")]
    Other { reference: String, message: String },
    /// Read, and refused by a guard (`rollout::holds::os_guard`).
    #[error("{message}")]
    Refused {
        reason: api::Reason,
        message: String,
    },
    #[error(
        "{reference} is refused: registries.conf blocks it ([[registry]] prefix {prefix:?}, blocked = true)"
    )]
    Blocked { reference: String, prefix: String },
    #[error("registries.conf {0}; no image is resolved until it is put right")]
    BadRegistriesConf(String),
    #[error("signature policy {0}; no image is resolved until it is put right")]
    BadSignaturePolicy(String),
    /// Every location a registries.conf table chose failed: each is named
    /// with its failure's class and words ([`tried_reason`]).
    #[error("{}", locations_message(.reference, .prefix, .skipped_mirrors, .tried))]
    Locations {
        reference: String,
        /// The `[[registry]]` table's prefix.
        prefix: String,
        /// The table's mirrors this reference may not use (a tag, and
        /// `mirror-by-digest-only`).
        skipped_mirrors: bool,
        /// Each location asked, in order, and its failure.
        tried: Vec<(String, RegistryError)>,
    },
}

/// The message of [`RegistryError::Locations`].
fn locations_message(
    reference: &str,
    prefix: &str,
    skipped_mirrors: &bool,
    tried: &[(String, RegistryError)],
) -> String {
    let each: Vec<String> = tried
        .iter()
        .map(|(location, e)| format!("{location}: {} ({e})", e.reason().as_str()))
        .collect();
    let mut message = format!(
        "no location of {reference} answered (registries.conf [[registry]] prefix {prefix:?}; tried in order): {}",
        each.join("; ")
    );
    if *skipped_mirrors {
        let (kind, rule) = if reference.contains('@') {
            ("a digest", "pull-from-mirror = \"tag-only\"")
        } else {
            (
                "a tag",
                "mirror-by-digest-only = true, or pull-from-mirror = \"digest-only\"",
            )
        };
        message.push_str(&format!(
            "; the mirrors of prefix {prefix:?} are not asked for {kind} reference ({rule}): it goes to the primary location"
        ));
    }
    message
}

/// The reason of a resolution whose every location failed: the first
/// failure of a location that answered (a mirror that has not the image
/// says more than a source that cannot be reached, the normal state of a
/// disconnected cluster's source), else unreachable.
pub fn tried_reason(tried: &[(String, RegistryError)]) -> api::Reason {
    tried
        .iter()
        .map(|(_, e)| e.reason())
        .find(|r| *r != api::Reason::RegistryUnreachable)
        .unwrap_or(api::Reason::RegistryUnreachable)
}

impl RegistryError {
    /// The pool condition reason for this error.
    pub fn reason(&self) -> api::Reason {
        match self {
            RegistryError::Unauthorized { .. } => api::Reason::RegistryUnauthorized,
            RegistryError::NotFound { .. } => api::Reason::ImageNotFound,
            RegistryError::Unreachable { .. } => api::Reason::RegistryUnreachable,
            RegistryError::Untrusted { .. } => api::Reason::RegistryUntrusted,
            RegistryError::UnsupportedArchitecture { .. } => api::Reason::UnsupportedArchitecture,
            RegistryError::InvalidManifest { .. } => api::Reason::InvalidManifest,
            RegistryError::InvalidPullSecret { .. } => api::Reason::InvalidPullSecret,
            RegistryError::Other { .. } => api::Reason::RegistryError,
            RegistryError::Refused { reason, .. } => *reason,
            RegistryError::Blocked { .. } => api::Reason::RegistryBlocked,
            RegistryError::BadRegistriesConf(_) => api::Reason::InvalidRegistriesConf,
            RegistryError::BadSignaturePolicy(_) => api::Reason::InvalidSignaturePolicy,
            RegistryError::Locations { tried, .. } => tried_reason(tried),
        }
    }
}

/// Username and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: HashMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The registry part of a docker config `auths` key: keys may be bare
/// hosts, or URLs such as `https://index.docker.io/v1/`.
fn auth_key_host(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

fn same_registry(key_host: &str, registry: &str) -> bool {
    let docker_hub =
        |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    key_host == registry || (docker_hub(key_host) && docker_hub(registry))
}

/// Finds the credentials for `registry` in a docker config JSON
/// (`.dockerconfigjson`). `Ok(None)`: the config has no entry for it.
pub fn credentials_for(
    docker_config: &[u8],
    registry: &str,
    secret: &str,
) -> Result<Option<Credentials>, RegistryError> {
    let invalid = |message: String| RegistryError::InvalidPullSecret {
        secret: secret.to_owned(),
        message,
    };
    let config: DockerConfig = serde_json::from_slice(docker_config).map_err(|e| {
        invalid(format!(
            "not a docker config JSON ({{\"auths\": {{...}}}}): {e}"
        ))
    })?;
    let Some((key, entry)) = config
        .auths
        .iter()
        .find(|(key, _)| same_registry(auth_key_host(key), registry))
    else {
        return Ok(None);
    };
    if let (Some(username), Some(password)) = (&entry.username, &entry.password) {
        return Ok(Some(Credentials {
            username: username.clone(),
            password: password.clone(),
        }));
    }
    let encoded = entry.auth.as_deref().ok_or_else(|| {
        invalid(format!(
            "entry {key:?} has neither auth nor username/password"
        ))
    })?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| invalid(format!("entry {key:?}: auth is not base64: {e}")))?;
    let decoded = String::from_utf8(decoded)
        .map_err(|_| invalid(format!("entry {key:?}: auth is not UTF-8")))?;
    let (username, password) = decoded
        .split_once(':')
        .ok_or_else(|| invalid(format!("entry {key:?}: auth is not user:password")))?;
    Ok(Some(Credentials {
        username: username.to_owned(),
        password: password.to_owned(),
    }))
}

/// A pool's pull secret: its docker config JSON, whose entry for each
/// location asked is looked up when that location is asked (a mirror's
/// credentials are the mirror's own, as with containers-auth.json).
#[derive(Clone)]
pub struct PullSecret {
    /// `namespace/name`, for messages.
    pub label: String,
    /// `.dockerconfigjson`.
    pub docker_config: Vec<u8>,
}

impl std::fmt::Debug for PullSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullSecret")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl PullSecret {
    /// The credentials for `registry` (host[:port]), if the secret has some.
    pub fn credentials(&self, registry: &str) -> Result<Option<Credentials>, RegistryError> {
        credentials_for(&self.docker_config, registry, &self.label)
    }
}

/// What the controller needs to know about a manifest. Keyed by digest, it
/// never changes, so it is cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFacts {
    /// The digest of the manifest the reference points at (for an index,
    /// the index digest).
    pub digest: String,
    pub media_type: String,
    /// Architectures the image runs on (`amd64`, `arm64`, ...), linux only.
    pub architectures: BTreeSet<String>,
    /// For an index, the sha256 digests of its linux platform manifests,
    /// sorted (empty for an image manifest): what bootc reports as the
    /// digest it deployed from the index, on each platform.
    pub platform_digests: Vec<String>,
    /// The config's labels the guards read ([`api::image_labels::READ`]);
    /// for an index, its first linux platform's.
    pub labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<RawIndexEntry>>,
    #[serde(default)]
    config: Option<RawDescriptor>,
}

#[derive(Deserialize)]
struct RawIndexEntry {
    #[serde(default)]
    digest: Option<String>,
    #[serde(default)]
    platform: Option<RawPlatform>,
}

#[derive(Deserialize)]
struct RawPlatform {
    architecture: String,
    os: String,
}

#[derive(Deserialize)]
struct RawDescriptor {
    digest: String,
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    architecture: Option<String>,
    #[serde(default)]
    os: Option<String>,
    #[serde(default)]
    config: Option<RawRuntimeConfig>,
}

#[derive(Deserialize)]
struct RawRuntimeConfig {
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

/// What the controller reads of an image config blob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFacts {
    /// Its architecture (linux only).
    pub architectures: BTreeSet<String>,
    /// The labels the guards read ([`api::image_labels::READ`]).
    pub labels: BTreeMap<String, String>,
}

/// A parsed manifest: an index lists its platforms (their architectures
/// and manifest digests, linux only); an image manifest names its config
/// blob, which holds the architecture.
#[derive(Debug, PartialEq, Eq)]
pub enum ParsedManifest {
    Index {
        architectures: BTreeSet<String>,
        platform_digests: Vec<String>,
    },
    Image {
        config_digest: String,
    },
}

/// Parses a manifest body (OCI or Docker, image or index).
pub fn parse_manifest(
    body: &[u8],
    reference: &str,
) -> Result<(String, ParsedManifest), RegistryError> {
    let invalid = |message: String| RegistryError::InvalidManifest {
        reference: reference.to_owned(),
        message,
    };
    let raw: RawManifest =
        serde_json::from_slice(body).map_err(|e| invalid(format!("not a manifest JSON: {e}")))?;
    if let Some(entries) = raw.manifests {
        let linux: Vec<(RawPlatform, Option<String>)> = entries
            .into_iter()
            .filter_map(|e| e.platform.map(|p| (p, e.digest)))
            .filter(|(p, _)| p.os == "linux")
            .collect();
        // Only well-formed digests: what bootc reports is one, and they
        // are kept in the pool's status.
        let platform_digests: BTreeSet<String> = linux
            .iter()
            .filter_map(|(_, digest)| digest.clone())
            .filter(|d| api::image_ref::is_sha256_digest(d))
            .collect();
        let media_type = raw.media_type.unwrap_or_else(|| OCI_INDEX.to_owned());
        return Ok((
            media_type,
            ParsedManifest::Index {
                architectures: linux.into_iter().map(|(p, _)| p.architecture).collect(),
                platform_digests: platform_digests.into_iter().collect(),
            },
        ));
    }
    let config = raw.config.ok_or_else(|| {
        invalid("neither an index (manifests) nor an image manifest (config)".into())
    })?;
    let media_type = raw.media_type.unwrap_or_else(|| OCI_MANIFEST.to_owned());
    Ok((
        media_type,
        ParsedManifest::Image {
            config_digest: config.digest,
        },
    ))
}

/// The architecture (linux only) and the guards' labels of an image
/// config blob.
pub fn parse_config(body: &[u8], reference: &str) -> Result<ConfigFacts, RegistryError> {
    let config: RawConfig =
        serde_json::from_slice(body).map_err(|e| RegistryError::InvalidManifest {
            reference: reference.to_owned(),
            message: format!("image config is not JSON: {e}"),
        })?;
    let architectures = match (config.os.as_deref(), config.architecture) {
        (Some("linux") | None, Some(arch)) => BTreeSet::from([arch]),
        _ => BTreeSet::new(),
    };
    let labels = config
        .config
        .and_then(|c| c.labels)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| api::image_labels::READ.contains(&k.as_str()))
        .collect();
    Ok(ConfigFacts {
        architectures,
        labels,
    })
}

/// Does the image cover every architecture the pool's nodes have?
pub fn check_architectures(
    facts: &ManifestFacts,
    required: &BTreeSet<String>,
    reference: &str,
) -> Result<(), RegistryError> {
    let missing: Vec<String> = required.difference(&facts.architectures).cloned().collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(RegistryError::UnsupportedArchitecture {
            reference: reference.to_owned(),
            missing,
            available: facts.architectures.iter().cloned().collect(),
        })
    }
}

/// Names an HTTP failure for `reference` on `registry`.
fn named(err: HttpError, registry: &str, reference: &str) -> RegistryError {
    let reference = reference.to_owned();
    match err {
        HttpError::Unreachable(failure @ crate::outbound::Failure::Untrusted(_)) => {
            RegistryError::Untrusted {
                registry: registry.to_owned(),
                message: failure.to_string(),
            }
        }
        HttpError::Unreachable(failure) => RegistryError::Unreachable {
            registry: registry.to_owned(),
            message: failure.to_string(),
        },
        HttpError::Status {
            failure,
            summary,
            url,
        } => {
            let message = format!("{summary} from {url}");
            match failure {
                protocol::Failure::Unauthorized => RegistryError::Unauthorized {
                    registry: registry.to_owned(),
                    reference,
                    message,
                },
                protocol::Failure::NotFound => RegistryError::NotFound { reference, message },
                protocol::Failure::Other => RegistryError::Other { reference, message },
            }
        }
        HttpError::Refused(refused) => RegistryError::Other {
            reference,
            message: refused.to_string(),
        },
        HttpError::Invalid(message) => RegistryError::Other { reference, message },
    }
}

/// The registry's API origin: Docker Hub's names (`docker.io`) are served
/// by `registry-1.docker.io`.
fn api_host(registry: &str) -> &str {
    match registry {
        "docker.io" | "index.docker.io" => "registry-1.docker.io",
        other => other,
    }
}

/// The digest of a manifest answer: a digest reference's own, which the
/// body must hash to; for a tag, the body's, which the registry's
/// `Docker-Content-Digest` (when it sends one) must agree with.
pub fn manifest_digest(
    pinned: Option<&str>,
    header: Option<&str>,
    body: &[u8],
    reference: &str,
) -> Result<String, RegistryError> {
    let computed = sha256_digest(body);
    let invalid = |message: String| RegistryError::InvalidManifest {
        reference: reference.to_owned(),
        message,
    };
    match (pinned, header) {
        (Some(want), _) if want != computed => Err(invalid(format!(
            "the registry's manifest for {want} hashes to {computed}"
        ))),
        (None, Some(said)) if said != computed => Err(invalid(format!(
            "registry says {said}, body hashes to {computed}"
        ))),
        _ => Ok(computed),
    }
}

/// How the controller talks to registries.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Registries (host[:port]) that may be reached over plain HTTP. Empty
    /// unless the operator is started with `--insecure-registry`.
    pub plain_http: Vec<String>,
    /// Extra CA certificates (PEM) trusted for registries.
    pub ca_bundle: Option<Vec<u8>>,
    /// A directory of PEM files trusted as well, read again before every
    /// resolution that asks a registry ([`trust`]).
    pub ca_dir: Option<std::path::PathBuf>,
    /// Each request's whole deadline (unset: [`REQUEST_DEADLINE`]); a
    /// resolution's is twice it ([`Self::resolution_deadline`]).
    pub timeout: Option<Duration>,
    /// The registries.conf (version 2) of mirrors and blocked registries,
    /// read again before every resolution ([`mirrors`]); unset or absent:
    /// none.
    pub registries_conf: Option<std::path::PathBuf>,
    /// The signature policy (containers-policy.json(5)) a target must meet
    /// before any node is told, read again before every check
    /// ([`policy`], [`signatures`]); unset, absent or empty: none.
    pub signature_policy: Option<std::path::PathBuf>,
}

/// The default deadline of one registry request, from its connection to
/// the last byte of its answer.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

impl RegistryOptions {
    /// One request's deadline.
    pub fn request_deadline(&self) -> Duration {
        self.timeout.unwrap_or(REQUEST_DEADLINE)
    }

    /// A whole resolution's deadline (its requests together).
    pub fn resolution_deadline(&self) -> Duration {
        self.request_deadline() * 2
    }
}

/// Resolves references and inspects manifests. Manifest facts are cached by
/// (repository, digest, pull secret version): content addressed, so they
/// never go stale; by repository too, so that a digest found in one
/// repository is not taken to exist in another.
pub struct Resolver {
    options: RegistryOptions,
    /// The HTTP client on the CAs in force, or why it could not be built
    /// (a bad CA bundle).
    trust: trust::Trust,
    /// The mirrors and blocked registries in force.
    conf: mirrors::ConfFile,
    cache: Mutex<HashMap<CacheKey, ManifestFacts>>,
    /// The signature policy in force.
    policy: policy::PolicyFile,
    /// The targets whose signatures met the policy: (`repository@digest`,
    /// the policy's version). Content addressed: never stale.
    verified: Mutex<BTreeSet<(String, String)>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("options", &self.options)
            .finish()
    }
}

/// (`registry/repository`, digest, pull secret version).
type CacheKey = (String, String, String);

fn cache_key(image: &ImageRef, digest: &str, secret_hash: &str) -> CacheKey {
    (
        image.repository(),
        digest.to_owned(),
        secret_hash.to_owned(),
    )
}

/// The result of a resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub facts: ManifestFacts,
    /// `repository@digest`: what BootcNodes are told to run.
    pub pinned: String,
}

impl Resolver {
    pub fn new(options: RegistryOptions) -> Self {
        let conf = mirrors::ConfFile::new(options.registries_conf.clone());
        // Read once at the start, so that a bad file is logged at once, not
        // at the first resolution (its problem is answered again there).
        let _ = conf.current();
        let policy = policy::PolicyFile::new(options.signature_policy.clone());
        let _ = policy.current();
        Resolver {
            trust: trust::Trust::new(options.clone()),
            conf,
            policy,
            verified: Mutex::new(BTreeSet::new()),
            options,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Facts learned before for this digest and these credentials.
    fn cached(&self, image: &ImageRef, digest: &str, secret_hash: &str) -> Option<ManifestFacts> {
        let key = cache_key(image, digest, secret_hash);
        self.cache.lock().ok().and_then(|c| c.get(&key).cloned())
    }

    /// Resolves `image` (a tag, or a digest) with the pool's pull secret,
    /// if any: the manifest must exist (a digest's must hash to it) and its
    /// architectures are read. `secret_hash` keys the cache so that facts
    /// learned with one set of credentials are not served to a pool with
    /// other credentials.
    ///
    /// The locations asked are registries.conf's ([`mirrors::plan`]): its
    /// mirrors in order, then the primary location, each with the pull
    /// secret's credentials for that location; the first that answers
    /// gives the digest, and the reference pinned is the pool's own. A
    /// blocked registry is asked nothing.
    ///
    /// The whole resolution (every location's token, manifest and config
    /// requests, each under its own deadline) ends within
    /// [`RegistryOptions::resolution_deadline`]: a registry that answers a
    /// byte at a time fails it as unreachable, "did not answer within".
    #[tracing::instrument(name = "registry", skip_all, fields(image = %image))]
    pub async fn resolve(
        &self,
        image: &ImageRef,
        pull_secret: Option<&PullSecret>,
        secret_hash: &str,
    ) -> Result<Resolved, RegistryError> {
        let conf = self
            .conf
            .current()
            .map_err(|p| RegistryError::BadRegistriesConf(p.to_string()))?;
        let (candidates, rule, skipped_mirrors) = match mirrors::plan(&conf, image) {
            Err(e) => return Err(RegistryError::BadRegistriesConf(e.to_string())),
            Ok(Plan::Blocked { prefix }) => {
                return Err(RegistryError::Blocked {
                    reference: image.to_string(),
                    prefix,
                });
            }
            Ok(Plan::Ask {
                candidates,
                rule,
                skipped_mirrors,
            }) => (candidates, rule, skipped_mirrors),
        };
        if let Some(digest) = &image.digest
            && let Some(facts) = self.cached(image, digest, secret_hash)
        {
            return Ok(Resolved {
                pinned: image.pinned(digest),
                facts,
            });
        }
        let window = self.options.resolution_deadline();
        let deadline = tokio::time::Instant::now() + window;
        let mut tried = Vec::with_capacity(candidates.len());
        for candidate in &candidates {
            let registry = candidate.image.registry();
            let credentials = match pull_secret {
                Some(secret) => secret.credentials(registry)?,
                None => None,
            };
            let asking = self.resolve_at(image, candidate, credentials.as_ref(), secret_hash);
            match tokio::time::timeout_at(deadline, asking).await {
                Ok(Ok(resolved)) => return Ok(resolved),
                Ok(Err(e @ RegistryError::InvalidPullSecret { .. })) => return Err(e),
                Ok(Err(e)) => tried.push((candidate.image.to_string(), e)),
                Err(_) => {
                    let failure = crate::outbound::Failure::TimedOut(window);
                    tried.push((
                        candidate.image.to_string(),
                        RegistryError::Unreachable {
                            registry: registry.to_owned(),
                            message: failure.to_string(),
                        },
                    ));
                    break;
                }
            }
            if candidates.len() > 1 {
                tracing::warn!(location = %candidate.image, mirror = candidate.mirror, "registry location failed; asking the next, if any");
            }
        }
        Err(match rule {
            // No table: the reference's own registry, its error as it is.
            None => tried
                .pop()
                .map(|(_, e)| e)
                .unwrap_or_else(|| RegistryError::Other {
                    reference: image.to_string(),
                    message: "no location to ask".into(),
                }),
            Some(prefix) => RegistryError::Locations {
                reference: image.to_string(),
                prefix,
                skipped_mirrors,
                tried,
            },
        })
    }

    /// The client and the API origin of one location: plain HTTP only for
    /// a registry given with `--insecure-registry` or a location
    /// registries.conf marks `insecure`.
    fn location(&self, candidate: &Candidate) -> Result<(reqwest::Client, Url), RegistryError> {
        let registry = candidate.image.registry();
        let other = |message: String| RegistryError::Other {
            reference: candidate.image.to_string(),
            message,
        };
        let http = self.trust.client().map_err(other)?;
        let plain = candidate.insecure || self.options.plain_http.iter().any(|p| p == registry);
        let scheme = if plain { "http" } else { "https" };
        let base = Url::parse(&format!("{scheme}://{}/", api_host(registry)))
            .map_err(|e| other(format!("cannot form a registry URL for {registry:?}: {e}")))?;
        Ok((http, base))
    }

    /// Asks one location (`candidate`) for `image`: its error names the
    /// location; what it finds is cached and pinned as `image`'s.
    async fn resolve_at(
        &self,
        image: &ImageRef,
        candidate: &Candidate,
        credentials: Option<&Credentials>,
        secret_hash: &str,
    ) -> Result<Resolved, RegistryError> {
        let at = &candidate.image;
        let registry = at.registry().to_owned();
        let display = at.to_string();
        let (http, base) = self.location(candidate)?;
        let deadline = self.options.request_deadline();
        let mut session = Session::new(&http, deadline, base, &at.registry_path(), credentials);
        let name_it = |e| named(e, &registry, &display);
        let wanted = at.digest.as_deref().unwrap_or(at.tag_or_latest());
        let url = session
            .url(&format!("manifests/{wanted}"))
            .map_err(name_it)?;
        let manifest = session
            .get(url, Endpoint::Manifest, Some(&ACCEPTED.join(", ")))
            .await
            .map_err(name_it)?;
        let header = manifest
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok());
        let digest = manifest_digest(at.digest.as_deref(), header, &manifest.body, &display)?;
        if let Some(facts) = self.cached(image, &digest, secret_hash) {
            return Ok(Resolved {
                pinned: image.pinned(&digest),
                facts,
            });
        }
        let (media_type, parsed) = parse_manifest(&manifest.body, &display)?;
        let (architectures, platform_digests, labels) = match parsed {
            ParsedManifest::Index {
                architectures,
                platform_digests,
            } => {
                let labels = match platform_digests.first() {
                    Some(first) => {
                        platform_labels(&mut session, first, &display, &registry).await?
                    }
                    None => BTreeMap::new(),
                };
                (architectures, platform_digests, labels)
            }
            ParsedManifest::Image { config_digest } => {
                let config = read_config(&mut session, &config_digest, &display, &registry).await?;
                (config.architectures, Vec::new(), config.labels)
            }
        };
        let facts = ManifestFacts {
            digest: digest.clone(),
            media_type,
            architectures,
            platform_digests,
            labels,
        };
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(cache_key(image, &digest, secret_hash), facts.clone());
        }
        Ok(Resolved {
            pinned: image.pinned(&digest),
            facts,
        })
    }
}

/// Reads an image config blob, checked against its digest.
async fn read_config(
    session: &mut Session<'_>,
    config_digest: &str,
    display: &str,
    registry: &str,
) -> Result<ConfigFacts, RegistryError> {
    let name_it = |e| named(e, registry, display);
    let url = session
        .url(&format!("blobs/{config_digest}"))
        .map_err(name_it)?;
    let blob = session
        .get(url, Endpoint::Blob, None)
        .await
        .map_err(name_it)?;
    if sha256_digest(&blob.body) != config_digest {
        return Err(RegistryError::InvalidManifest {
            reference: display.to_owned(),
            message: format!("the config blob does not hash to {config_digest}"),
        });
    }
    parse_config(&blob.body, display)
}

/// The guards' labels of an index's platform manifest (`digest`): its
/// manifest, then its config. The platforms of one OS image are built
/// from one source, so the first tells the OS of all.
async fn platform_labels(
    session: &mut Session<'_>,
    digest: &str,
    display: &str,
    registry: &str,
) -> Result<BTreeMap<String, String>, RegistryError> {
    let name_it = |e| named(e, registry, display);
    let url = session
        .url(&format!("manifests/{digest}"))
        .map_err(name_it)?;
    let manifest = session
        .get(url, Endpoint::Manifest, Some(&ACCEPTED.join(", ")))
        .await
        .map_err(name_it)?;
    manifest_digest(Some(digest), None, &manifest.body, display)?;
    match parse_manifest(&manifest.body, display)? {
        (_, ParsedManifest::Image { config_digest }) => {
            Ok(read_config(session, &config_digest, display, registry)
                .await?
                .labels)
        }
        (_, ParsedManifest::Index { .. }) => Err(RegistryError::InvalidManifest {
            reference: display.to_owned(),
            message: format!("the index's platform entry {digest} is itself an index"),
        }),
    }
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    let hash = Sha256::digest(data);
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for b in hash {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn credentials_from_docker_config() {
        let config = format!(
            r#"{{"auths": {{"127.0.0.1:5000": {{"auth": "{}"}}, "https://index.docker.io/v1/": {{"username": "hub", "password": "pw"}}}}}}"#,
            b64("alice:s3:cret")
        );
        let c = credentials_for(config.as_bytes(), "127.0.0.1:5000", "s")
            .unwrap()
            .unwrap();
        assert_eq!(c.username, "alice");
        assert_eq!(c.password, "s3:cret");
        let hub = credentials_for(config.as_bytes(), "docker.io", "s")
            .unwrap()
            .unwrap();
        assert_eq!(hub.username, "hub");
        assert_eq!(
            credentials_for(config.as_bytes(), "quay.io", "s").unwrap(),
            None
        );
        assert!(
            !format!("{c:?}").contains("s3:cret"),
            "Debug leaks the password"
        );
    }

    #[test]
    fn bad_pull_secrets_name_the_problem() {
        let cases: &[(&[u8], &str)] = &[
            (b"not json", "not a docker config JSON"),
            (
                br#"{"auths": {"r.io": {}}}"#,
                "neither auth nor username/password",
            ),
            (br#"{"auths": {"r.io": {"auth": "%%%"}}}"#, "not base64"),
        ];
        for (input, want) in cases {
            let err = credentials_for(input, "r.io", "ns/pull").unwrap_err();
            assert_eq!(err.reason(), api::Reason::InvalidPullSecret);
            let text = err.to_string();
            assert!(text.contains(want) && text.contains("ns/pull"), "{text}");
        }
        let no_colon = format!(
            r#"{{"auths": {{"r.io": {{"auth": "{}"}}}}}}"#,
            b64("nocolon")
        );
        assert!(credentials_for(no_colon.as_bytes(), "r.io", "s").is_err());
    }

    const AMD64: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const ARM64: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const WINDOWS: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

    #[test]
    fn manifests_of_every_kind_parse() {
        let index = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{ARM64}","size":1,"platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}},
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{AMD64}","size":1,"platform":{{"architecture":"amd64","os":"linux"}}}},
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{WINDOWS}","size":1,"platform":{{"architecture":"amd64","os":"windows"}}}},
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:dd","size":1,"platform":{{"architecture":"s390x","os":"linux"}}}},
            {{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{WINDOWS}","size":1,"annotations":{{"vnd.docker.reference.type":"attestation-manifest"}}}}]}}"#
        );
        let (mt, parsed) = parse_manifest(index.as_bytes(), "r").unwrap();
        assert_eq!(mt, OCI_INDEX);
        // The linux platforms' manifests, sorted; not another OS's, not an
        // attestation, not a malformed digest.
        assert_eq!(
            parsed,
            ParsedManifest::Index {
                architectures: BTreeSet::from(["amd64".into(), "arm64".into(), "s390x".into()]),
                platform_digests: vec![AMD64.to_owned(), ARM64.to_owned()],
            }
        );
        let list = br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"digest":"sha256:aa","platform":{"architecture":"s390x","os":"linux"}}]}"#;
        assert!(
            matches!(parse_manifest(list, "r").unwrap(), (m, ParsedManifest::Index { .. }) if m == DOCKER_LIST)
        );
        let docker = br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"digest":"sha256:cfg","size":2,"mediaType":"x"},"layers":[]}"#;
        assert_eq!(
            parse_manifest(docker, "r").unwrap(),
            (
                DOCKER_MANIFEST.to_owned(),
                ParsedManifest::Image {
                    config_digest: "sha256:cfg".into()
                }
            )
        );
        let oci_no_media_type = br#"{"schemaVersion":2,"config":{"digest":"sha256:cfg","size":2,"mediaType":"x"},"layers":[]}"#;
        assert_eq!(
            parse_manifest(oci_no_media_type, "r").unwrap().0,
            OCI_MANIFEST
        );
        let err = parse_manifest(b"{}", "quay.io/a:b").unwrap_err();
        assert_eq!(err.reason(), api::Reason::InvalidManifest);
        assert!(err.to_string().contains("quay.io/a:b"));
    }

    #[test]
    fn config_architecture_and_labels() {
        let config = br#"{"architecture":"arm64","os":"linux","config":{"Labels":{
            "containers.bootc":"1","redhat.id":"fedora","redhat.version-id":"42",
            "io.buildah.version":"1.39"}}}"#;
        let facts = parse_config(config, "r").unwrap();
        assert_eq!(facts.architectures, BTreeSet::from(["arm64".to_owned()]));
        let keys: Vec<&str> = facts.labels.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["containers.bootc", "redhat.id", "redhat.version-id"],
            "only the guards' labels are kept"
        );
        let windows = parse_config(br#"{"architecture":"amd64","os":"windows"}"#, "r").unwrap();
        assert!(windows.architectures.is_empty() && windows.labels.is_empty());
    }

    #[test]
    fn architecture_check_names_what_is_missing() {
        let facts = ManifestFacts {
            labels: BTreeMap::new(),
            digest: "sha256:x".into(),
            media_type: OCI_INDEX.into(),
            architectures: BTreeSet::from(["amd64".into()]),
            platform_digests: Vec::new(),
        };
        assert!(check_architectures(&facts, &BTreeSet::from(["amd64".into()]), "r").is_ok());
        assert!(check_architectures(&facts, &BTreeSet::new(), "r").is_ok());
        let err = check_architectures(
            &facts,
            &BTreeSet::from(["amd64".into(), "arm64".into()]),
            "q.io/os:1",
        )
        .unwrap_err();
        assert_eq!(err.reason(), api::Reason::UnsupportedArchitecture);
        let text = err.to_string();
        assert!(
            text.contains("arm64") && text.contains("q.io/os:1"),
            "{text}"
        );
    }

    #[test]
    fn every_location_tried_is_named_and_the_first_that_answered_gives_the_reason() {
        let unreachable = |r: &str| RegistryError::Unreachable {
            registry: r.into(),
            message: "could not be reached".into(),
        };
        let not_found = RegistryError::NotFound {
            reference: "m.example/os:1".into(),
            message: "HTTP 404 (MANIFEST_UNKNOWN)".into(),
        };
        let err = RegistryError::Locations {
            reference: "r.example/os:1".into(),
            prefix: "r.example".into(),
            skipped_mirrors: false,
            tried: vec![
                ("a.example/os:1".into(), unreachable("a.example")),
                ("m.example/os:1".into(), not_found),
                ("r.example/os:1".into(), unreachable("r.example")),
            ],
        };
        assert_eq!(err.reason(), api::Reason::ImageNotFound);
        let text = err.to_string();
        let want = [
            "a.example/os:1: RegistryUnreachable",
            "m.example/os:1: ImageNotFound (m.example/os:1 was not found",
            "r.example/os:1: RegistryUnreachable",
        ];
        let at: Vec<Option<usize>> = want.iter().map(|w| text.find(w)).collect();
        assert!(at.iter().all(Option::is_some) && at.is_sorted(), "{text}");
        assert!(text.contains("prefix \"r.example\""), "{text}");
        let only_source = RegistryError::Locations {
            reference: "r.example/os:1".into(),
            prefix: "r.example".into(),
            skipped_mirrors: true,
            tried: vec![("r.example/os:1".into(), unreachable("r.example"))],
        };
        assert_eq!(only_source.reason(), api::Reason::RegistryUnreachable);
        assert!(only_source.to_string().contains("mirror-by-digest-only"));
    }

    #[test]
    fn digests() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
