//! Input validation for the helper's RPCs. Pure functions: nothing here
//! touches the host. Every rejection is its own error variant.

use api::image_ref::{ImageRef, ImageRefError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Largest docker config JSON the helper writes. Real pull secrets are a few
/// hundred bytes per registry.
pub const AUTH_MAX_BYTES: usize = 64 * 1024;

/// Why a request was refused before anything ran.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValidationError {
    #[error("stage: invalid image: {0}")]
    Image(#[from] ImageRefError),
    #[error("stage: repository {repository:?} is not allowed (--allowed-repository {allowed:?})")]
    RepositoryNotAllowed {
        repository: String,
        allowed: Vec<String>,
    },
    #[error("stage: {0} {1} is not a systemd weight (1-10000)")]
    Weight(&'static str, u32),
    #[error("write-auth: payload is {len} bytes; at most {max} are allowed")]
    AuthTooLarge { len: usize, max: usize },
    #[error("write-auth: payload is empty")]
    AuthEmpty,
    /// Never carries payload bytes: only where and what kind of problem.
    #[error("write-auth: payload is not a docker config JSON: {0}")]
    AuthNotDockerConfig(String),
}

/// Which images Stage may stage: fixed on the helper's command line (from
/// the DaemonSet) before any untrusted byte is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagePolicy {
    /// Repositories (`registry/path`, matched exactly) and namespaces
    /// (`registry/path/`, matching every repository below). Empty: any.
    pub allowed_repositories: Vec<String>,
    /// Pass `--enforce-container-sigpolicy` to bootc when staging, so that
    /// the host's `containers-policy.json` decides (signatures).
    pub enforce_sigpolicy: bool,
}

impl ImagePolicy {
    /// Whether `repository` (`registry/path`, no tag or digest) may be staged.
    pub fn allows(&self, repository: &str) -> bool {
        self.allowed_repositories.is_empty()
            || self.allowed_repositories.iter().any(|rule| {
                rule == repository || (rule.ends_with('/') && repository.starts_with(rule.as_str()))
            })
    }
}

/// Checks a Stage image: exactly `name@sha256:<64 lowercase hex>` under the
/// distribution reference grammar. Returns the canonical string to hand to
/// bootc (identical to the input: the grammar admits one spelling). Its
/// repository must be one `policy` allows.
pub fn stage_image(input: &str, policy: &ImagePolicy) -> Result<String, ValidationError> {
    let parsed = ImageRef::parse_pinned(input)?;
    let repository = parsed.repository();
    if !policy.allows(&repository) {
        return Err(ValidationError::RepositoryNotAllowed {
            repository,
            allowed: policy.allowed_repositories.clone(),
        });
    }
    let canonical = parsed.to_string();
    // parse_pinned accepted it, so Display reproduces it; belt and braces.
    if canonical != input {
        let reference = input.to_owned();
        return Err(ImageRefError::NotPinned { reference }.into());
    }
    Ok(canonical)
}

/// The stage unit's `IOWeight=` and `CPUWeight=` as `systemd-run`
/// properties: each in systemd's range, so that systemd never refuses the
/// unit for them.
pub fn stage_weights(io: u32, cpu: u32) -> Result<Vec<String>, ValidationError> {
    let property = |(key, w)| match w {
        1..=10_000 => Ok(format!("--property={key}={w}")),
        _ => Err(ValidationError::Weight(key, w)),
    };
    [("IOWeight", io), ("CPUWeight", cpu)]
        .into_iter()
        .map(property)
        .collect()
}

/// A docker config, reduced to the keys containers-image reads for static
/// credentials. Anything else (notably `credHelpers` and `credsStore`, which
/// would make bootc run a `docker-credential-*` program as root) is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerConfig {
    pub auths: BTreeMap<String, DockerAuth>,
}

/// One registry's credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identitytoken: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registrytoken: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

/// Checks a WriteAuth payload and returns the bytes to write: the config
/// re-serialised from the allow-listed fields (so nothing unvetted reaches
/// the host).
pub fn auth_payload(payload: &[u8]) -> Result<Vec<u8>, ValidationError> {
    if payload.is_empty() {
        return Err(ValidationError::AuthEmpty);
    }
    let (len, max) = (payload.len(), AUTH_MAX_BYTES);
    if len > max {
        return Err(ValidationError::AuthTooLarge { len, max });
    }
    let not_config = |e| ValidationError::AuthNotDockerConfig(json_error_position(&e));
    let config: DockerConfig = serde_json::from_slice(payload).map_err(not_config)?;
    let bad =
        |key: &String| key.is_empty() || key.chars().any(|c| c.is_control() || c.is_whitespace());
    if config.auths.keys().any(bad) {
        let why = "a registry key is empty or has whitespace".to_owned();
        return Err(ValidationError::AuthNotDockerConfig(why));
    }
    serde_json::to_vec(&config).map_err(not_config)
}

/// A JSON error without serde's text, which quotes the offending value (a
/// credential, for a string where an object was expected) or key: only its
/// kind and position.
fn json_error_position(e: &serde_json::Error) -> String {
    let (kind, line, column) = (e.classify(), e.line(), e.column());
    format!("{kind:?} error at line {line} column {column} (expected {DOCKER_CONFIG_SHAPE})")
}

/// What [`DockerConfig`] accepts, for error messages.
const DOCKER_CONFIG_SHAPE: &str = r#"{"auths": {"<registry>": {"auth", "username", "password", "identitytoken", "registrytoken", "email"}}}"#;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn stage_accepts_pinned_refs() {
        for ok in [
            format!("quay.io/acme/os@{D}"),
            format!("localhost:5000/os@{D}"),
            format!("os@{D}"),
        ] {
            assert_eq!(stage_image(&ok, &ImagePolicy::default()).unwrap(), ok);
        }
    }

    #[test]
    fn stage_rejects_each_bad_form_with_its_own_error() {
        use ImageRefError as E;
        let long = format!("quay.io/{}@{D}", "a".repeat(256));
        type Check = fn(&ImageRefError) -> bool;
        let cases: Vec<(String, Check)> = vec![
            (String::new(), |e| matches!(e, E::Empty)),
            ("--apply".into(), |e| matches!(e, E::LeadingDash)),
            (format!("-quay.io/a@{D}"), |e| matches!(e, E::LeadingDash)),
            (format!("quay.io/a @{D}"), |e| {
                matches!(e, E::ControlOrSpace { .. })
            }),
            (format!("quay.io/a\n@{D}"), |e| {
                matches!(e, E::ControlOrSpace { .. })
            }),
            (format!("quay.io/a@{D}\n"), |e| {
                matches!(e, E::ControlOrSpace { .. })
            }),
            (format!("quay.io/a\0@{D}"), |e| {
                matches!(e, E::ControlOrSpace { .. })
            }),
            (format!("docker://quay.io/a@{D}"), |e| {
                matches!(e, E::TransportPrefix { .. })
            }),
            (format!("oci:/var/mnt@{D}"), |e| {
                matches!(e, E::TransportPrefix { .. })
            }),
            (format!("ostree-unverified-registry:quay.io/a@{D}"), |e| {
                matches!(e, E::TransportPrefix { .. })
            }),
            (format!("quay.io/a:v1@{D}"), |e| {
                matches!(e, E::TagAndDigest { .. })
            }),
            ("quay.io/a:v1".into(), |e| matches!(e, E::NotPinned { .. })),
            ("quay.io/a".into(), |e| matches!(e, E::NotPinned { .. })),
            ("quay.io/a@sha256:ABC".into(), |e| {
                matches!(e, E::InvalidDigest { .. })
            }),
            (
                format!(
                    "quay.io/a@{}",
                    D.to_uppercase().replacen("SHA256", "sha256", 1)
                ),
                |e| matches!(e, E::InvalidDigest { .. }),
            ),
            (format!("quay.io/a@sha512:{}", "0".repeat(128)), |e| {
                matches!(e, E::UnsupportedDigest { .. })
            }),
            (format!("quay.io/Acme@{D}"), |e| {
                matches!(e, E::InvalidPathComponent { .. })
            }),
            (long, |e| matches!(e, E::NameTooLong { .. })),
            (format!("{}@{D}", "a/".repeat(300)), |e| {
                matches!(e, E::TooLong { .. })
            }),
        ];
        for (input, check) in cases {
            match stage_image(&input, &ImagePolicy::default()) {
                Err(ValidationError::Image(e)) => {
                    assert!(check(&e), "{input:?}: unexpected error {e:?}")
                }
                other => panic!("{input:?}: expected an image error, got {other:?}"),
            }
        }
    }

    #[test]
    fn stage_refuses_repositories_outside_the_allow_list() {
        let policy = ImagePolicy {
            allowed_repositories: vec!["quay.io/acme/os".into(), "registry.example.com/os/".into()],
            enforce_sigpolicy: false,
        };
        for ok in [
            format!("quay.io/acme/os@{D}"),
            format!("registry.example.com/os/base@{D}"),
            format!("registry.example.com/os/a/b@{D}"),
        ] {
            assert_eq!(stage_image(&ok, &policy).unwrap(), ok);
        }
        for (bad, repository) in [
            (format!("quay.io/acme/os2@{D}"), "quay.io/acme/os2"),
            (format!("quay.io/acme@{D}"), "quay.io/acme"),
            (format!("quay.io/evil/os@{D}"), "quay.io/evil/os"),
            (
                format!("registry.example.com/os@{D}"),
                "registry.example.com/os",
            ),
            (
                format!("registry.example.com/osx/a@{D}"),
                "registry.example.com/osx/a",
            ),
            (format!("acme/os@{D}"), "acme/os"),
        ] {
            let err = stage_image(&bad, &policy).unwrap_err();
            assert_eq!(
                err,
                ValidationError::RepositoryNotAllowed {
                    repository: repository.into(),
                    allowed: policy.allowed_repositories.clone()
                },
                "{bad}"
            );
            assert!(err.to_string().contains("--allowed-repository"), "{err}");
        }
    }

    #[test]
    fn auth_errors_never_quote_the_payload() {
        const SECRET: &str = "c2VjcmV0LXVzZXI6aHVudGVyMg";
        for bad in [
            format!(r#"{{"auths":{{"quay.io":"{SECRET}"}}}}"#),
            format!(r#"{{"auths":{{"quay.io":{{"auth":{SECRET}}}}}}}"#),
            format!(r#"{{"auths":{{"quay.io":{{"{SECRET}":"x"}}}}}}"#),
            format!(r#"{{"{SECRET}":{{}}}}"#),
            format!(r#"{{"auths":{{"{SECRET} x":{{}}}}}}"#),
            format!(r#"{{"auths":{{"quay.io":{{"auth":"{SECRET}"#),
            format!(r#"{{"auths":{{"quay.io":{{"auth":1}}}},"x":"{SECRET}"}}"#),
            format!(r#"["{SECRET}"]"#),
            SECRET.to_owned(),
        ] {
            let err = auth_payload(bad.as_bytes()).unwrap_err().to_string();
            assert!(
                !err.contains(SECRET) && !err.contains("c2Vj"),
                "{bad}: {err}"
            );
            assert!(
                err.starts_with("write-auth: payload is not a docker config JSON"),
                "{err}"
            );
        }
    }

    #[test]
    fn auth_accepts_docker_config_and_drops_nothing_allowed() {
        let p = br#"{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"},"127.0.0.1:5000":{"username":"u","password":"p"}}}"#;
        let out = auth_payload(p).unwrap();
        let back: DockerConfig = serde_json::from_slice(&out).unwrap();
        assert_eq!(back.auths.len(), 2);
        assert_eq!(back.auths["quay.io"].auth.as_deref(), Some("dXNlcjpwYXNz"));
    }

    #[test]
    fn auth_rejects_each_bad_payload() {
        assert_eq!(auth_payload(b""), Err(ValidationError::AuthEmpty));
        let big = vec![b' '; AUTH_MAX_BYTES + 1];
        assert!(matches!(
            auth_payload(&big),
            Err(ValidationError::AuthTooLarge { .. })
        ));
        for bad in [
            &b"not json"[..],
            b"[]",
            b"{}",
            br#"{"auths":[]}"#,
            br#"{"auths":{"quay.io":"x"}}"#,
            br#"{"auths":{},"credHelpers":{"quay.io":"evil"}}"#,
            br#"{"auths":{},"credsStore":"evil"}"#,
            br#"{"auths":{"quay.io":{"auth":"x","helper":"y"}}}"#,
            br#"{"auths":{"":{}}}"#,
            br#"{"auths":{"a b":{}}}"#,
        ] {
            assert!(
                matches!(
                    auth_payload(bad),
                    Err(ValidationError::AuthNotDockerConfig(_))
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
