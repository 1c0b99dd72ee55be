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
    #[error("write-auth: payload is {len} bytes; at most {max} are allowed")]
    AuthTooLarge { len: usize, max: usize },
    #[error("write-auth: payload is empty")]
    AuthEmpty,
    #[error("write-auth: payload is not a docker config JSON: {0}")]
    AuthNotDockerConfig(String),
}

/// Checks a Stage image: exactly `name@sha256:<64 lowercase hex>` under the
/// distribution reference grammar. Returns the canonical string to hand to
/// bootc (identical to the input: the grammar admits one spelling).
pub fn stage_image(input: &str) -> Result<String, ValidationError> {
    let parsed = ImageRef::parse_pinned(input)?;
    let canonical = parsed.to_string();
    // parse_pinned accepted it, so Display reproduces it; belt and braces.
    if canonical != input {
        return Err(ValidationError::Image(ImageRefError::NotPinned {
            reference: input.to_owned(),
        }));
    }
    Ok(canonical)
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

/// Where and how a payload failed to parse, without serde's message: that
/// quotes the offending value, which in a pull secret may be a credential.
fn parse_error(e: &serde_json::Error) -> String {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => {
            "not {\"auths\": {<registry>: {auth, username, password, identitytoken, registrytoken, email}}}"
        }
        serde_json::error::Category::Eof => "truncated JSON",
    };
    format!("{kind} (line {} column {})", e.line(), e.column())
}

/// Checks a WriteAuth payload and returns the bytes to write: the config
/// re-serialised from the allow-listed fields (so nothing unvetted reaches
/// the host).
pub fn auth_payload(payload: &[u8]) -> Result<Vec<u8>, ValidationError> {
    if payload.is_empty() {
        return Err(ValidationError::AuthEmpty);
    }
    if payload.len() > AUTH_MAX_BYTES {
        return Err(ValidationError::AuthTooLarge {
            len: payload.len(),
            max: AUTH_MAX_BYTES,
        });
    }
    let config: DockerConfig = serde_json::from_slice(payload)
        .map_err(|e| ValidationError::AuthNotDockerConfig(parse_error(&e)))?;
    for registry in config.auths.keys() {
        if registry.is_empty()
            || registry
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(ValidationError::AuthNotDockerConfig(format!(
                "registry key {registry:?} is empty or has whitespace"
            )));
        }
    }
    serde_json::to_vec(&config).map_err(|e| ValidationError::AuthNotDockerConfig(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn auth_errors_never_quote_the_payload() {
        for payload in [
            r#"{"auths":{"r.io":"hunter2-secret"}}"#,
            r#"{"auths":{"r.io":{"password":["hunter2-secret"]}}}"#,
            r#"{"auths":{"r.io":{"hunter2-secret":"x"}}}"#,
            r#"{"hunter2-secret": 1}"#,
            r#"hunter2-secret"#,
        ] {
            let e = auth_payload(payload.as_bytes()).unwrap_err().to_string();
            assert!(!e.contains("hunter2"), "{payload}: {e}");
        }
    }

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn stage_accepts_pinned_refs() {
        for ok in [
            format!("quay.io/acme/os@{D}"),
            format!("localhost:5000/os@{D}"),
            format!("os@{D}"),
        ] {
            assert_eq!(stage_image(&ok).unwrap(), ok);
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
            match stage_image(&input) {
                Err(ValidationError::Image(e)) => {
                    assert!(check(&e), "{input:?}: unexpected error {e:?}")
                }
                other => panic!("{input:?}: expected an image error, got {other:?}"),
            }
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
