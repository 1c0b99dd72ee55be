//! bootc's error texts, classified for the BootcNode's Degraded reason. The
//! words are those real bootc prints (its own error chain and
//! containers/image's registry messages; see the contract reference's
//! section 4.2), matched on stable fragments. Pure.

use api::Reason;

/// Which Degraded reason a failed bootc command's message gets.
pub fn reason_for(message: &str) -> Reason {
    let m = message.to_ascii_lowercase();
    let any = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
    if any(&["insufficient free space", "no space left on device"]) {
        Reason::InsufficientSpace
    } else if any(&[
        "system not booted via bootc",
        "detected container; this command requires a booted host",
    ]) {
        Reason::NotABootcHost
    } else if any(&[
        "authentication required",
        "unauthorized",
        "invalid username/password",
        "unable to retrieve auth token",
        "access to the requested resource is not authorized",
    ]) {
        Reason::RegistryUnauthorized
    } else if any(&["manifest unknown", "name unknown", "not found: manifest"]) {
        Reason::ImageNotFound
    } else if any(&[
        "pinging container registry",
        "connection refused",
        "no such host",
        "i/o timeout",
        "network is unreachable",
        "tls handshake timeout",
    ]) {
        Reason::RegistryUnreachable
    } else {
        Reason::Error
    }
}

/// May the cause of a failed command with this Degraded reason pass by
/// itself (the registry unreachable for a moment, an error bootc does not
/// name), so that a retry can succeed unchanged? Not for an image the
/// registry does not have, credentials it refuses, a disk too small or a
/// host that is not a bootc host: those need a person, and are reported at
/// once.
pub fn passes(reason: Reason) -> bool {
    matches!(reason, Reason::RegistryUnreachable | Reason::Error)
}

/// `message` with every occurrence of a credential replaced. `secrets` are
/// the strings of the node's pull secret that must never reach the API
/// (passwords, tokens, the base64 `auth` and what it decodes to).
pub fn redact(message: &str, secrets: &[String]) -> String {
    let mut out = message.to_owned();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s.as_str(), "<redacted>");
    }
    out
}

/// The strings of a pull secret's docker config JSON that must not reach
/// the API, for [`redact`]: every string value at any depth (passwords,
/// tokens, `auth`, and whatever a malformed secret holds where a credential
/// belongs, which a parser's error message may quote), plus each `auth`
/// decoded and its password half.
pub fn secret_strings(docker_config_json: &[u8]) -> Vec<String> {
    let Ok(config) = serde_json::from_slice::<serde_json::Value>(docker_config_json) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    collect(&config, None, &mut out);
    // Longest first, so that a secret containing another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

fn collect(value: &serde_json::Value, key: Option<&str>, out: &mut Vec<String>) {
    use base64::Engine;
    match value {
        serde_json::Value::String(v) => {
            out.push(v.clone());
            if key == Some("auth")
                && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(v)
                && let Ok(text) = String::from_utf8(bytes)
            {
                if let Some((_, password)) = text.split_once(':') {
                    out.push(password.to_owned());
                }
                out.push(text);
            }
        }
        serde_json::Value::Number(n) => out.push(n.to_string()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, None, out)),
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| collect(v, Some(k), out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "error: Switching: Switching (ostree): Preparing import: Fetching manifest: failed to invoke method OpenImage: ";

    #[test]
    fn classifies_bootcs_messages() {
        let rows = [
            (
                format!("{PREFIX}reading manifest sha256:aa in r.io/os: manifest unknown"),
                Reason::ImageNotFound,
            ),
            (
                format!("{PREFIX}reading manifest sha256:aa in r.io/os: authentication required"),
                Reason::RegistryUnauthorized,
            ),
            (
                format!("{PREFIX}reading manifest latest in quay.io/x: unauthorized: access to the requested resource is not authorized"),
                Reason::RegistryUnauthorized,
            ),
            (
                format!("{PREFIX}pinging container registry r.io: Get \"https://r.io/v2/\": dial tcp: lookup r.io: no such host"),
                Reason::RegistryUnreachable,
            ),
            (
                "error: Switching: Switching (ostree): Insufficient free space for r.io/os@sha256:aa (available: 1 GB required: 2 GB)".to_owned(),
                Reason::InsufficientSpace,
            ),
            (
                "error: Switching: Initializing storage: System not booted via bootc".to_owned(),
                Reason::NotABootcHost,
            ),
            (
                "error: Switching: Initializing storage: Preparing for write: Detected container; this command requires a booted host system.".to_owned(),
                Reason::NotABootcHost,
            ),
            (
                "error: Switching: Switching (ostree): No staged deployment found".to_owned(),
                Reason::Error,
            ),
        ];
        for (message, reason) in rows {
            assert_eq!(reason_for(&message), reason, "{message}");
        }
    }

    #[test]
    fn redacts_every_credential_form() {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret-pw");
        let config = format!(
            r#"{{"auths":{{"r.io":{{"auth":"{auth}"}},"q.io":{{"username":"u","password":"hunter22","identitytoken":"tok-123456"}}}}}}"#
        );
        let secrets = secret_strings(config.as_bytes());
        let message = format!("bad {auth} alice:s3cret-pw s3cret-pw hunter22 tok-123456 end");
        let clean = redact(&message, &secrets);
        for s in [auth.as_str(), "s3cret-pw", "hunter22", "tok-123456"] {
            assert!(!clean.contains(s), "{clean}");
        }
        assert!(clean.starts_with("bad ") && clean.ends_with(" end"));
        assert_eq!(redact("nothing secret", &secrets), "nothing secret");
        // A malformed secret: what sits where a credential belongs is
        // redacted too (a parser's error message quotes it).
        let malformed = secret_strings(br#"{"auths":{"r.io":"hunter2-bytes"}}"#);
        assert_eq!(
            redact(
                r#"invalid type: string "hunter2-bytes", expected struct"#,
                &malformed
            ),
            r#"invalid type: string "<redacted>", expected struct"#
        );
    }
}
