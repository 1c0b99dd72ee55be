//! The registry protocol's rules, as pure functions: where a redirect may
//! lead, what a `WWW-Authenticate` challenge asks for, and what of a
//! registry's error answer may be shown on a pool.
//!
//! A pool's image reference names any host its writer likes, so resolving
//! it must not become a way to reach and read the cluster's internal
//! services. Hence:
//!
//! * a manifest request is never redirected (the distribution protocol
//!   redirects blob downloads, to storage, and token requests only);
//! * a blob or token request follows at most [`MAX_REDIRECTS`] redirects,
//!   and never one from HTTPS to plain HTTP; the token realm a registry
//!   names obeys the same scheme rule;
//! * credentials go only to the registry's own origin and to its token
//!   realm, never to where a redirect leads;
//! * a response body never reaches a status: a failure is summarised as
//!   the HTTP status and the distribution error codes it carries
//!   (`MANIFEST_UNKNOWN`), each checked to be a code.

use reqwest::Url;

/// What a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Manifest,
    Blob,
    Token,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Manifest => "manifest",
            Endpoint::Blob => "blob",
            Endpoint::Token => "token",
        }
    }
}

/// The most redirects one blob or token request follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why a redirect (or a token realm) is not followed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "the registry redirected a {endpoint} request, which the registry protocol does not redirect; not followed"
    )]
    NotRedirected { endpoint: &'static str },
    #[error("more than {MAX_REDIRECTS} redirects for one {endpoint} request; not followed")]
    TooMany { endpoint: &'static str },
    #[error(
        "the registry sent a {endpoint} request from HTTPS to plain HTTP ({to}); never followed"
    )]
    Downgrade { endpoint: &'static str, to: String },
    #[error("the registry sent a {endpoint} request to an unusable location; not followed")]
    BadLocation { endpoint: &'static str },
}

/// Where a redirect from `from` to `location` leads, when `hops` redirects
/// were already followed for this request (see the module docs).
pub fn redirect(
    from: &Url,
    location: &str,
    hops: usize,
    endpoint: Endpoint,
) -> Result<Url, Refused> {
    if endpoint == Endpoint::Manifest {
        return Err(Refused::NotRedirected {
            endpoint: endpoint.as_str(),
        });
    }
    if hops >= MAX_REDIRECTS {
        return Err(Refused::TooMany {
            endpoint: endpoint.as_str(),
        });
    }
    let to = from.join(location).map_err(|_| Refused::BadLocation {
        endpoint: endpoint.as_str(),
    })?;
    allowed_scheme(from, to, endpoint)
}

/// The token realm a registry at `registry` names, under the redirect's
/// scheme rule (an HTTPS registry's realm is HTTPS).
pub fn token_realm(registry: &Url, realm: &str) -> Result<Url, Refused> {
    let to = Url::parse(realm).map_err(|_| Refused::BadLocation {
        endpoint: Endpoint::Token.as_str(),
    })?;
    allowed_scheme(registry, to, Endpoint::Token)
}

fn allowed_scheme(from: &Url, to: Url, endpoint: Endpoint) -> Result<Url, Refused> {
    match (from.scheme(), to.scheme()) {
        ("https", "https") | ("http", "https" | "http") if to.host().is_some() => Ok(to),
        ("https", "http") => Err(Refused::Downgrade {
            endpoint: endpoint.as_str(),
            to: origin(&to),
        }),
        _ => Err(Refused::BadLocation {
            endpoint: endpoint.as_str(),
        }),
    }
}

/// `scheme://host[:port]`: how a message names an address (never a path or
/// a query, which may carry anything, a signed storage URL included).
pub fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// `scheme://host[:port]/path`, for the registry's own URLs in messages.
pub fn without_query(url: &Url) -> String {
    format!("{}{}", origin(url), url.path())
}

/// Credentials go only to the registry's own origin.
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.origin() == b.origin()
}

/// What a `WWW-Authenticate` challenge asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header (`Basic realm="x"`, `Bearer
/// realm="https://auth/token",service="reg",scope="repository:a:pull"`).
pub fn challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let params = auth_params(rest);
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.clone())
    };
    if scheme.eq_ignore_ascii_case("basic") {
        Some(Challenge::Basic)
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Some(Challenge::Bearer {
            realm: get("realm")?,
            service: get("service"),
            scope: get("scope"),
        })
    } else {
        None
    }
}

/// `key=value` and `key="quoted, value"` pairs, comma-separated.
fn auth_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if chars.next().is_none() {
            return out;
        }
        let value: String = if chars.next_if_eq(&'"').is_some() {
            let mut v = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => v.extend(chars.next()),
                    c => v.push(c),
                }
            }
            v
        } else {
            std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect()
        };
        out.push((key.trim().to_owned(), value.trim().to_owned()));
    }
}

/// The distribution error codes in an error body (`{"errors": [{"code":
/// "MANIFEST_UNKNOWN", ...}]}`): only what has the form of a code, at most
/// four. Nothing else of the body is ever read.
pub fn error_codes(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: serde_json::Value,
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(body) else {
        return Vec::new();
    };
    let mut codes: Vec<String> = Vec::new();
    for code in envelope.errors.iter().filter_map(|e| e.code.as_str()) {
        let is_code = (1..=40).contains(&code.len())
            && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
        if is_code && !codes.iter().any(|c| c == code) && codes.len() < 4 {
            codes.push(code.to_owned());
        }
    }
    codes
}

/// How a registry's failure counts for the pool's condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Unauthorized,
    NotFound,
    Other,
}

/// Classifies an HTTP status and its error codes.
pub fn failure(status: u16, codes: &[String]) -> Failure {
    let any = |names: &[&str]| codes.iter().any(|c| names.contains(&c.as_str()));
    if matches!(status, 401 | 403) || any(&["UNAUTHORIZED", "DENIED"]) {
        Failure::Unauthorized
    } else if status == 404 || any(&["MANIFEST_UNKNOWN", "NAME_UNKNOWN", "BLOB_UNKNOWN"]) {
        Failure::NotFound
    } else {
        Failure::Other
    }
}

/// `HTTP 404 (MANIFEST_UNKNOWN)`: a failure as a status may show it.
pub fn summary(status: u16, codes: &[String]) -> String {
    if codes.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status} ({})", codes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn redirects_are_followed_only_for_blobs_and_tokens_and_never_down_to_http() {
        let https = url("https://reg.example/v2/a/blobs/sha256:1");
        let http = url("http://reg.local:5000/v2/a/blobs/sha256:1");
        // (what, from, location, hops, endpoint, followed to)
        #[rustfmt::skip]
        type Row<'a> = (&'a str, &'a Url, &'a str, usize, Endpoint, Option<&'a str>);
        let rows: Vec<Row<'_>> = vec![
            (
                "a blob to storage",
                &https,
                "https://storage.example/b?sig=1",
                0,
                Endpoint::Blob,
                Some("https://storage.example/b?sig=1"),
            ),
            (
                "relative",
                &https,
                "/other",
                0,
                Endpoint::Blob,
                Some("https://reg.example/other"),
            ),
            (
                "a token request",
                &https,
                "https://auth.example/t",
                1,
                Endpoint::Token,
                Some("https://auth.example/t"),
            ),
            (
                "a manifest: never",
                &https,
                "https://reg.example/x",
                0,
                Endpoint::Manifest,
                None,
            ),
            (
                "HTTPS to HTTP: never",
                &https,
                "http://10.0.0.1/internal",
                0,
                Endpoint::Blob,
                None,
            ),
            (
                "HTTPS to HTTP token: never",
                &https,
                "http://10.0.0.1/",
                0,
                Endpoint::Token,
                None,
            ),
            (
                "the last one allowed",
                &https,
                "https://s.example/",
                MAX_REDIRECTS - 1,
                Endpoint::Blob,
                Some("https://s.example/"),
            ),
            (
                "one too many",
                &https,
                "https://s.example/",
                MAX_REDIRECTS,
                Endpoint::Blob,
                None,
            ),
            (
                "plain HTTP registry (--insecure-registry) to HTTP",
                &http,
                "http://s.local/b",
                0,
                Endpoint::Blob,
                Some("http://s.local/b"),
            ),
            (
                "plain HTTP up to HTTPS",
                &http,
                "https://s.example/b",
                0,
                Endpoint::Blob,
                Some("https://s.example/b"),
            ),
            (
                "another scheme",
                &https,
                "file:///etc/passwd",
                0,
                Endpoint::Blob,
                None,
            ),
        ];
        for (what, from, location, hops, endpoint, want) in rows {
            let got = redirect(from, location, hops, endpoint)
                .ok()
                .map(|u| u.to_string());
            assert_eq!(got.as_deref(), want, "{what}");
        }
        let err = redirect(
            &https,
            "http://10.0.0.1:8080/internal?x=1",
            0,
            Endpoint::Blob,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("http://10.0.0.1:8080") && !err.contains("internal"),
            "{err}"
        );
        assert!(token_realm(&https, "http://auth.example/token").is_err());
        assert!(token_realm(&https, "https://auth.example/token").is_ok());
        assert!(token_realm(&http, "http://auth.local/token").is_ok());
        assert!(token_realm(&https, "not a url").is_err());
    }

    #[test]
    fn challenges_parse() {
        assert_eq!(
            challenge(r#"Basic realm="bootc-test""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            challenge(
                r#"Bearer realm="https://auth.example/token",service="reg.example",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("reg.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(
            challenge("bearer realm=https://a/t"),
            Some(Challenge::Bearer {
                realm: "https://a/t".into(),
                service: None,
                scope: None
            })
        );
        assert_eq!(challenge("Bearer service=x"), None, "no realm");
        assert_eq!(challenge("Negotiate abc"), None);
    }

    #[test]
    fn only_error_codes_of_a_body_are_read() {
        let body = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"SECRET-TEXT"},{"code":"\u001b]0;x\u0007"},{"code":"lower"},{"code":"MANIFEST_UNKNOWN"}]}"#;
        assert_eq!(error_codes(body), vec!["MANIFEST_UNKNOWN".to_owned()]);
        assert!(error_codes(b"{\"internal\":\"INTERNAL-SECRET-BODY\"}").is_empty());
        assert!(error_codes(b"<html>\x1b[2J</html>").is_empty());
        let codes = error_codes(body);
        assert_eq!(summary(404, &codes), "HTTP 404 (MANIFEST_UNKNOWN)");
        assert_eq!(summary(500, &[]), "HTTP 500");
        // (status, codes, failure)
        let rows: &[(u16, &[&str], Failure)] = &[
            (401, &[], Failure::Unauthorized),
            (403, &[], Failure::Unauthorized),
            (400, &["DENIED"], Failure::Unauthorized),
            (404, &[], Failure::NotFound),
            (400, &["NAME_UNKNOWN"], Failure::NotFound),
            (500, &[], Failure::Other),
            (302, &[], Failure::Other),
        ];
        for (status, codes, want) in rows {
            let codes: Vec<String> = codes.iter().map(|c| (*c).to_owned()).collect();
            assert_eq!(failure(*status, &codes), *want, "{status} {codes:?}");
        }
    }
}
