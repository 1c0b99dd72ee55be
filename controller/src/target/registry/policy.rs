//! The signature policy, in the hosts' own format: containers-policy.json(5),
//! the file an admin puts in `/etc/containers/policy.json` of the nodes'
//! image, given to the controller as well (`deploy/`'s ConfigMap
//! `bootc-signature-policy`, the chart's `controller.signaturePolicy`), so
//! that a target the nodes would refuse is refused before any of them is
//! told (`super::signatures` checks it).
//!
//! **The rules**, as containers/image applies them to a `docker` reference,
//! as pure functions ([`parse`], [`Policy::requirements_for`]):
//!
//! * The reference checked is what the nodes pull: `repository@digest` (the
//!   pool's own repository, Docker Hub's names in full:
//!   `docker.io/library/fedora`), whatever mirror answers.
//! * Its scope in `transports.docker` is the most specific that matches:
//!   the reference itself (`host/repo@sha256:...`), then its repository
//!   (`host/ns/repo`), each namespace above it (`host/ns`), the host
//!   (`host[:port]`), the host's wildcards from the longest
//!   (`*.b.example.com`, `*.example.com`, `*.com`), the transport's own
//!   default (`""`), and last the policy's `default`. A `host/repo:tag`
//!   scope never matches: the nodes are told a digest.
//! * A scope's requirements must all be met: `insecureAcceptAnything`
//!   accepts, `reject` refuses, `sigstoreSigned` asks for a signature in
//!   the registry (cosign's layout) that its public key (`keyPath`, or
//!   `keyData`: the PEM in base64) verifies, for the target's digest and
//!   an identity its `signedIdentity` accepts (by default
//!   `matchRepoDigestOrExact`: for a digest reference, the same repository).
//! * `signedBy` (GPG), keyless `sigstoreSigned` (`fulcio`), `keyPaths`,
//!   `remapIdentity` and other keys the controller cannot check refuse the
//!   whole policy with the field named (fail closed, never half applied);
//!   other transports (`docker-daemon`, `containers-storage`...) mean
//!   nothing to the controller and are left alone.
//!
//! [`PolicyFile`] is the file layer: read again before every check, as
//! registries.conf is (`super::mirrors::ConfFile`); an absent or empty file
//! is no policy (every target accepted, as before the policy existed).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use api::image_ref::ImageRef;

pub use super::mirrors::FileProblem;
use super::mirrors::read_admin_file;
use base64::Engine;
use p256::ecdsa::VerifyingKey;
use p256::pkcs8::DecodePublicKey;
use serde_json::Value;

/// A parsed policy: its `default` and its `transports.docker` scopes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub default: Vec<Requirement>,
    /// `transports.docker`, each scope with its requirements.
    pub docker: Vec<(String, Vec<Requirement>)>,
}

/// One policy requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    InsecureAcceptAnything,
    Reject,
    SigstoreSigned {
        key: VerifyingKey,
        /// Where the key came from, for messages: `keyPath /etc/...` or
        /// `keyData`.
        key_source: String,
        identity: SignedIdentity,
    },
}

/// A `sigstoreSigned` requirement's `signedIdentity`: which identity in a
/// signature's payload (`critical.identity.docker-reference`) is accepted
/// for the reference checked (`repository@digest`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignedIdentity {
    /// The default: for a digest reference, the same repository.
    MatchRepoDigestOrExact,
    MatchRepository,
    /// The identity is the reference itself (`repository@digest`).
    MatchExact,
    /// The identity's repository is this one.
    ExactRepository(String),
}

/// Why a policy is refused: the field, its value, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("not valid JSON for containers-policy.json: {0}")]
    Json(String),
    #[error("{field} {value}: {problem}")]
    Field {
        /// A JSON path: `transports.docker["quay.io/os"][0].keyPath`.
        field: String,
        /// The value found (JSON), or `(missing)`.
        value: String,
        problem: String,
    },
}

fn field_error(field: &str, value: Option<&Value>, problem: impl Into<String>) -> PolicyError {
    PolicyError::Field {
        field: field.to_owned(),
        value: value.map_or_else(|| "(missing)".to_owned(), Value::to_string),
        problem: problem.into(),
    }
}

/// Parses a containers-policy.json text; `read_key` reads a `keyPath`.
/// An empty text is no policy (None).
pub fn parse(
    text: &str,
    read_key: &dyn Fn(&Path) -> Result<Vec<u8>, String>,
) -> Result<Option<Policy>, PolicyError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let root: Value = serde_json::from_str(text).map_err(|e| PolicyError::Json(e.to_string()))?;
    let Value::Object(root) = root else {
        return Err(field_error("(top level)", Some(&root), "not an object"));
    };
    let default = requirements("default", root.get("default"), read_key)?;
    let mut docker = Vec::new();
    match root.get("transports") {
        None | Some(Value::Null) => {}
        Some(Value::Object(transports)) => match transports.get("docker") {
            None | Some(Value::Null) => {}
            Some(Value::Object(scopes)) => {
                for (scope, list) in scopes {
                    let field = format!("transports.docker[{scope:?}]");
                    check_scope(scope)
                        .map_err(|p| field_error(&field, Some(&Value::String(scope.clone())), p))?;
                    docker.push((scope.clone(), requirements(&field, Some(list), read_key)?));
                }
            }
            Some(other) => {
                return Err(field_error(
                    "transports.docker",
                    Some(other),
                    "not an object of scopes",
                ));
            }
        },
        Some(other) => return Err(field_error("transports", Some(other), "not an object")),
    }
    Ok(Some(Policy { default, docker }))
}

/// A `transports.docker` scope: `""`, `*.host`, or `host[:port][/path]`
/// (with a `:tag` or `@digest`: one image).
fn check_scope(scope: &str) -> Result<(), String> {
    if scope.is_empty() {
        return Ok(());
    }
    if scope.contains("://") || scope.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a scope is host[:port][/path] (no scheme, no spaces)".into());
    }
    if let Some(domain) = scope.strip_prefix("*.") {
        if domain.is_empty() || domain.contains(['*', '/', ':']) {
            return Err("a wildcard scope is *.host only (no path, port or other '*')".into());
        }
        return Ok(());
    }
    if scope.contains('*') {
        return Err("'*' is allowed only as a wildcard scope's start (*.example.com)".into());
    }
    if scope.contains('/') {
        ImageRef::parse(scope).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A requirement list (non-empty, as containers/image wants it).
fn requirements(
    field: &str,
    list: Option<&Value>,
    read_key: &dyn Fn(&Path) -> Result<Vec<u8>, String>,
) -> Result<Vec<Requirement>, PolicyError> {
    let Some(Value::Array(items)) = list else {
        return Err(field_error(
            field,
            list,
            "a list of requirements is required",
        ));
    };
    if items.is_empty() {
        return Err(field_error(
            field,
            list,
            "an empty list of requirements is not allowed (say insecureAcceptAnything or reject)",
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| requirement(&format!("{field}[{i}]"), item, read_key))
        .collect()
}

/// The keys a `sigstoreSigned` requirement may have here.
const SIGSTORE_KEYS: &[&str] = &["type", "keyPath", "keyData", "signedIdentity"];

fn requirement(
    field: &str,
    item: &Value,
    read_key: &dyn Fn(&Path) -> Result<Vec<u8>, String>,
) -> Result<Requirement, PolicyError> {
    let Value::Object(map) = item else {
        return Err(field_error(field, Some(item), "a requirement is an object"));
    };
    let kind = map.get("type");
    let only_type = |r: Requirement| match map.keys().find(|k| *k != "type") {
        Some(k) => Err(field_error(
            &format!("{field}.{k}"),
            map.get(k),
            "unknown field for this type",
        )),
        None => Ok(r),
    };
    match kind.and_then(Value::as_str) {
        Some("insecureAcceptAnything") => only_type(Requirement::InsecureAcceptAnything),
        Some("reject") => only_type(Requirement::Reject),
        Some("sigstoreSigned") => {
            if let Some(k) = map.keys().find(|k| !SIGSTORE_KEYS.contains(&k.as_str())) {
                return Err(field_error(
                    &format!("{field}.{k}"),
                    map.get(k),
                    "not supported by the controller (sigstoreSigned with keyPath or keyData only)",
                ));
            }
            let (key, key_source) = public_key(field, map, read_key)?;
            let identity = signed_identity(
                &format!("{field}.signedIdentity"),
                map.get("signedIdentity"),
            )?;
            Ok(Requirement::SigstoreSigned {
                key,
                key_source,
                identity,
            })
        }
        _ => Err(field_error(
            &format!("{field}.type"),
            kind,
            "not supported by the controller (insecureAcceptAnything, reject or sigstoreSigned)",
        )),
    }
}

/// A `sigstoreSigned` requirement's public key: exactly one of `keyPath`
/// and `keyData` (the PEM, base64 encoded), an ECDSA P-256 key (cosign's).
fn public_key(
    field: &str,
    map: &serde_json::Map<String, Value>,
    read_key: &dyn Fn(&Path) -> Result<Vec<u8>, String>,
) -> Result<(VerifyingKey, String), PolicyError> {
    let (name, value, pem) = match (map.get("keyPath"), map.get("keyData")) {
        (Some(path), None) => {
            let name = format!("{field}.keyPath");
            let text = path
                .as_str()
                .filter(|p| Path::new(p).is_absolute())
                .ok_or_else(|| field_error(&name, Some(path), "an absolute path is required"))?;
            let pem = read_key(Path::new(text))
                .map_err(|e| field_error(&name, Some(path), format!("cannot be read: {e}")))?;
            (name, path, pem)
        }
        (None, Some(data)) => {
            let name = format!("{field}.keyData");
            let pem = data
                .as_str()
                .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
                .ok_or_else(|| {
                    field_error(&name, Some(data), "base64 of a PEM public key is required")
                })?;
            (name, data, pem)
        }
        _ => {
            return Err(field_error(
                &format!("{field}.keyPath"),
                map.get("keyPath"),
                "exactly one of keyPath and keyData is required",
            ));
        }
    };
    let key = std::str::from_utf8(&pem)
        .ok()
        .and_then(|pem| VerifyingKey::from_public_key_pem(pem).ok())
        .ok_or_else(|| {
            field_error(
                &name,
                Some(value),
                "not a PEM ECDSA P-256 public key (-----BEGIN PUBLIC KEY-----, as cosign generate-key-pair writes)",
            )
        })?;
    let source = match value.as_str() {
        Some(path) if name.ends_with("keyPath") => format!("keyPath {path}"),
        _ => "keyData".to_owned(),
    };
    Ok((key, source))
}

fn signed_identity(field: &str, value: Option<&Value>) -> Result<SignedIdentity, PolicyError> {
    let Some(value) = value else {
        return Ok(SignedIdentity::MatchRepoDigestOrExact);
    };
    let kind = value.get("type");
    match kind.and_then(Value::as_str) {
        Some("matchRepoDigestOrExact") => Ok(SignedIdentity::MatchRepoDigestOrExact),
        Some("matchRepository") => Ok(SignedIdentity::MatchRepository),
        Some("matchExact") => Ok(SignedIdentity::MatchExact),
        Some("exactRepository") => {
            let repo = value.get("dockerRepository");
            repo.and_then(Value::as_str)
                .and_then(|r| ImageRef::parse(r).ok())
                .filter(|r| r.tag.is_none() && r.digest.is_none())
                .map(|r| SignedIdentity::ExactRepository(normalized_name(&r)))
                .ok_or_else(|| {
                    field_error(
                        &format!("{field}.dockerRepository"),
                        repo,
                        "a repository (host/path, no tag or digest) is required",
                    )
                })
        }
        _ => Err(field_error(
            &format!("{field}.type"),
            kind,
            "not supported by the controller (matchRepoDigestOrExact, matchRepository, matchExact or exactRepository)",
        )),
    }
}

/// `host/path` with Docker Hub's names in full (`docker.io/library/x`): the
/// name scopes and identities are compared in.
pub fn normalized_name(image: &ImageRef) -> String {
    format!("{}/{}", image.registry(), image.registry_path())
}

impl Policy {
    /// The scope that applies to `image` (a digest reference) and its
    /// requirements: the most specific scope (the rules above), else
    /// `default` (named `default`).
    pub fn requirements_for(&self, image: &ImageRef) -> (String, &[Requirement]) {
        for scope in scopes_of(image) {
            if let Some((name, list)) = self.docker.iter().find(|(s, _)| *s == scope) {
                return (format!("transports.docker[{name:?}]"), list);
            }
        }
        ("default".to_owned(), &self.default)
    }
}

/// The scopes that may apply to `image`, most specific first.
pub fn scopes_of(image: &ImageRef) -> Vec<String> {
    let name = normalized_name(image);
    let mut out = Vec::new();
    if let Some(digest) = &image.digest {
        out.push(format!("{name}@{digest}"));
    }
    let mut at = name.as_str();
    out.push(at.to_owned());
    while let Some((up, _)) = at.rsplit_once('/') {
        out.push(up.to_owned());
        at = up;
    }
    let host = image.registry().split(':').next().unwrap_or_default();
    let mut rest = host;
    while let Some((_, up)) = rest.split_once('.') {
        out.push(format!("*.{up}"));
        rest = up;
    }
    out.push(String::new());
    out
}

/// Does a signature's identity (`critical.identity.docker-reference`) meet
/// `rule` for `image` (the digest reference checked)?
pub fn identity_matches(rule: &SignedIdentity, image: &ImageRef, signed: &str) -> bool {
    let Ok(signed) = ImageRef::parse(signed) else {
        return false;
    };
    let (name, signed_name) = (normalized_name(image), normalized_name(&signed));
    match rule {
        // A digest reference: the repository; a tag one would be exact, but
        // the nodes are told digests only.
        SignedIdentity::MatchRepoDigestOrExact if image.digest.is_some() => name == signed_name,
        SignedIdentity::MatchRepoDigestOrExact | SignedIdentity::MatchExact => {
            name == signed_name && signed.tag == image.tag && signed.digest == image.digest
        }
        SignedIdentity::MatchRepository => name == signed_name,
        SignedIdentity::ExactRepository(repo) => *repo == signed_name,
    }
}

/// The policy file, read again before every check (a ConfigMap volume, as
/// `super::mirrors::ConfFile`), with the key files it names; parsed again
/// only when their bytes change. Absent or empty: no policy. One that
/// cannot be read or parsed fails every check with [`FileProblem`] until
/// it is put right, logged once per change.
pub struct PolicyFile {
    path: Option<PathBuf>,
    current: Mutex<Loaded>,
}

/// What was read (the policy's bytes, and each key file's) and what it means.
#[derive(Default)]
struct Loaded {
    bytes: Option<Vec<u8>>,
    keys: Vec<(PathBuf, Result<Vec<u8>, String>)>,
    policy: Option<Result<Arc<InForce>, FileProblem>>,
}

/// The policy in force, and a version of its bytes (its keys' too) that
/// keys what was verified under it.
#[derive(Debug)]
pub struct InForce {
    pub policy: Option<Policy>,
    pub version: String,
}

fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| e.to_string())
}

impl PolicyFile {
    pub fn new(path: Option<PathBuf>) -> Self {
        PolicyFile {
            path,
            current: Mutex::new(Loaded::default()),
        }
    }

    /// The policy the file holds now.
    pub fn current(&self) -> Result<Arc<InForce>, FileProblem> {
        let Some(path) = &self.path else {
            return Ok(Arc::new(InForce {
                policy: None,
                version: String::new(),
            }));
        };
        let bytes = read_admin_file(path)?;
        let Ok(mut loaded) = self.current.lock() else {
            return Err(FileProblem::new(
                path,
                "the signature policy's lock is poisoned",
            ));
        };
        let keys_same = loaded.keys.iter().all(|(p, was)| read_file(p) == *was);
        if let (Some(policy), true, true) = (
            &loaded.policy,
            loaded.bytes.as_ref() == Some(&bytes),
            keys_same,
        ) {
            return policy.clone();
        }
        let keys = Mutex::new(Vec::new());
        let read_key = |p: &Path| {
            let read = read_file(p);
            if let Ok(mut keys) = keys.lock() {
                keys.push((p.to_owned(), read.clone()));
            }
            read
        };
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|_| FileProblem::new(path, "not UTF-8 text"))
            .and_then(|text| {
                parse(text, &read_key).map_err(|e| FileProblem::new(path, e.to_string()))
            });
        let keys = keys.into_inner().unwrap_or_default();
        let version = {
            let mut all = bytes.clone();
            for (_, key) in &keys {
                all.extend(key.as_deref().unwrap_or_default());
            }
            super::sha256_digest(&all)
        };
        match &parsed {
            Ok(Some(policy)) => tracing::info!(
                file = %path.display(),
                scopes = policy.docker.len(),
                "signature policy read: its requirements are in force"
            ),
            Ok(None) => {
                tracing::info!(file = %path.display(), "signature policy empty: no signature is checked")
            }
            Err(error) => tracing::error!(
                %error,
                "signature policy refused: every pool's resolution fails until it is put right"
            ),
        }
        let policy = parsed.map(|policy| Arc::new(InForce { policy, version }));
        *loaded = Loaded {
            bytes: Some(bytes),
            keys,
            policy: Some(policy.clone()),
        };
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::pkcs8::EncodePublicKey;

    fn image(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap()
    }

    fn key_pem() -> String {
        let key = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
        VerifyingKey::from(&key)
            .to_public_key_pem(Default::default())
            .unwrap()
    }

    fn no_files(p: &Path) -> Result<Vec<u8>, String> {
        Err(format!("{} not found", p.display()))
    }

    fn key_file(p: &Path) -> Result<Vec<u8>, String> {
        match p.to_str() {
            Some("/keys/os.pub") => Ok(key_pem().into_bytes()),
            _ => no_files(p),
        }
    }

    const D: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    #[test]
    fn scopes_go_from_the_image_to_the_host_then_its_wildcards() {
        let got = scopes_of(&image(&format!("a.b.example.com:5000/ns/os@{D}")));
        let want = [
            format!("a.b.example.com:5000/ns/os@{D}"),
            "a.b.example.com:5000/ns/os".into(),
            "a.b.example.com:5000/ns".into(),
            "a.b.example.com:5000".into(),
            "*.b.example.com".into(),
            "*.example.com".into(),
            "*.com".into(),
            String::new(),
        ];
        assert_eq!(got, want);
        // Docker Hub's short names in full.
        assert_eq!(
            scopes_of(&image(&format!("fedora@{D}")))[1],
            "docker.io/library/fedora"
        );
    }

    #[test]
    fn the_most_specific_scope_applies() {
        let text = r#"{
            "default": [{"type": "reject"}],
            "transports": {
                "docker": {
                    "": [{"type": "reject"}],
                    "*.example.com": [{"type": "insecureAcceptAnything"}],
                    "q.example.com": [{"type": "reject"}],
                    "q.example.com/os": [{"type": "sigstoreSigned", "keyPath": "/keys/os.pub"}],
                    "q.example.com/os/sub": [{"type": "reject"}]
                },
                "docker-daemon": {"": [{"type": "whatever"}]}
            }
        }"#;
        let policy = parse(text, &key_file).unwrap().unwrap();
        let cases: &[(&str, &str, &str)] = &[
            (
                "q.example.com/os",
                "transports.docker[\"q.example.com/os\"]",
                "sigstore",
            ),
            (
                "q.example.com/osx",
                "transports.docker[\"q.example.com\"]",
                "reject",
            ),
            (
                "q.example.com/os/sub",
                "transports.docker[\"q.example.com/os/sub\"]",
                "reject",
            ),
            (
                "r.example.com/os",
                "transports.docker[\"*.example.com\"]",
                "accept",
            ),
            ("example.com/os", "transports.docker[\"\"]", "reject"),
            ("other.io/os", "transports.docker[\"\"]", "reject"),
        ];
        for (name, scope, kind) in cases {
            let (got, list) = policy.requirements_for(&image(&format!("{name}@{D}")));
            assert_eq!(got, *scope, "{name}");
            let first = match &list[0] {
                Requirement::InsecureAcceptAnything => "accept",
                Requirement::Reject => "reject",
                Requirement::SigstoreSigned { .. } => "sigstore",
            };
            assert_eq!(first, *kind, "{name}");
        }
        let only_default = parse(
            r#"{"default": [{"type": "insecureAcceptAnything"}]}"#,
            &no_files,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            only_default
                .requirements_for(&image(&format!("x.io/os@{D}")))
                .0,
            "default"
        );
    }

    #[test]
    fn keys_come_from_a_path_or_from_data() {
        let data = base64::engine::general_purpose::STANDARD.encode(key_pem());
        let text = format!(
            r#"{{"default": [{{"type": "sigstoreSigned", "keyData": "{data}", "signedIdentity": {{"type": "matchRepository"}}}}],
               "transports": {{"docker": {{"x.io/os": [{{"type": "sigstoreSigned", "keyPath": "/keys/os.pub"}}]}}}}}}"#
        );
        let policy = parse(&text, &key_file).unwrap().unwrap();
        let Requirement::SigstoreSigned {
            key_source,
            identity,
            key,
        } = &policy.default[0]
        else {
            panic!("{:?}", policy.default);
        };
        assert_eq!(
            (key_source.as_str(), identity),
            ("keyData", &SignedIdentity::MatchRepository)
        );
        let Requirement::SigstoreSigned {
            key_source,
            identity,
            key: from_path,
        } = &policy.docker[0].1[0]
        else {
            panic!("{:?}", policy.docker);
        };
        assert_eq!(key_source, "keyPath /keys/os.pub");
        assert_eq!(
            identity,
            &SignedIdentity::MatchRepoDigestOrExact,
            "the default identity rule"
        );
        assert_eq!(key, from_path);
    }

    #[test]
    fn bad_policies_name_the_field_and_its_value() {
        let cases: &[(&str, &str)] = &[
            ("{", "not valid JSON"),
            ("[]", "(top level) []: not an object"),
            (
                "{}",
                "default (missing): a list of requirements is required",
            ),
            (r#"{"default": []}"#, "default []: an empty list"),
            (
                r#"{"default": [{"type": "signedBy", "keyType": "GPGKeys"}]}"#,
                "default[0].type \"signedBy\": not supported",
            ),
            (
                r#"{"default": [{"type": "reject", "x": 1}]}"#,
                "default[0].x 1: unknown field",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned"}]}"#,
                "default[0].keyPath (missing): exactly one of keyPath and keyData",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/keys/none.pub"}]}"#,
                "default[0].keyPath \"/keys/none.pub\": cannot be read",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyPath": "os.pub"}]}"#,
                "default[0].keyPath \"os.pub\": an absolute path",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyData": "bm90IGEga2V5"}]}"#,
                "default[0].keyData \"bm90IGEga2V5\": not a PEM ECDSA P-256 public key",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/keys/os.pub", "fulcio": {}}]}"#,
                "default[0].fulcio {}: not supported",
            ),
            (
                r#"{"default": [{"type": "sigstoreSigned", "keyPath": "/keys/os.pub", "signedIdentity": {"type": "remapIdentity"}}]}"#,
                "default[0].signedIdentity.type \"remapIdentity\": not supported",
            ),
            (
                r#"{"default": [{"type": "reject"}], "transports": {"docker": {"https://x.io": [{"type": "reject"}]}}}"#,
                "transports.docker[\"https://x.io\"] \"https://x.io\": a scope is host",
            ),
            (
                r#"{"default": [{"type": "reject"}], "transports": {"docker": {"*.x.io/os": [{"type": "reject"}]}}}"#,
                "a wildcard scope is *.host only",
            ),
            (
                r#"{"default": [{"type": "reject"}], "transports": {"docker": {"x.io/os": {}}}}"#,
                "transports.docker[\"x.io/os\"] {}: a list of requirements",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text, &key_file).unwrap_err().to_string();
            assert!(err.contains(want), "{text}\n  gave {err}\n  want {want}");
        }
        assert_eq!(
            parse("  \n", &no_files).unwrap(),
            None,
            "an empty file is no policy"
        );
    }

    #[test]
    fn identities_by_rule() {
        let target = image(&format!("q.example.com/os@{D}"));
        let cases: &[(SignedIdentity, &str, bool)] = &[
            (
                SignedIdentity::MatchRepoDigestOrExact,
                "q.example.com/os",
                true,
            ),
            (
                SignedIdentity::MatchRepoDigestOrExact,
                "q.example.com/os:1",
                true,
            ),
            (
                SignedIdentity::MatchRepoDigestOrExact,
                "q.example.com/other",
                false,
            ),
            (
                SignedIdentity::MatchRepoDigestOrExact,
                "not a reference",
                false,
            ),
            (SignedIdentity::MatchRepository, "q.example.com/os:2", true),
            (SignedIdentity::MatchExact, "q.example.com/os", false),
            (
                SignedIdentity::MatchExact,
                &format!("q.example.com/os@{D}"),
                true,
            ),
            (
                SignedIdentity::ExactRepository("q.example.com/os".into()),
                "q.example.com/os",
                true,
            ),
            (
                SignedIdentity::ExactRepository("m.example.com/os".into()),
                "q.example.com/os",
                false,
            ),
        ];
        for (rule, signed, want) in cases {
            assert_eq!(
                identity_matches(rule, &target, signed),
                *want,
                "{rule:?} {signed}"
            );
        }
        // Docker Hub: the short and the full name are one repository.
        assert!(identity_matches(
            &SignedIdentity::MatchRepoDigestOrExact,
            &image(&format!("fedora@{D}")),
            "docker.io/library/fedora"
        ));
    }
}
