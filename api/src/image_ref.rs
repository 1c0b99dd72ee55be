//! Container image references, parsed by the distribution reference grammar:
//!
//! ```text
//! reference   := name [ ":" tag ] [ "@" digest ]
//! name        := [ domain "/" ] path
//! domain      := host [ ":" port ]
//! host        := domain-name | "[" ipv6 "]"
//! path        := component ( "/" component )*
//! component   := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
//! tag         := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
//! digest      := "sha256:" 64 lowercase hex | "sha512:" 128 lowercase hex
//! ```
//!
//! Written by hand (no regex crate) because the privileged helper uses it.

use std::fmt;

/// Longest accepted name (domain and path), as in the distribution grammar.
pub const NAME_MAX_LEN: usize = 255;
/// Longest accepted tag.
pub const TAG_MAX_LEN: usize = 128;
/// Longest accepted reference as a whole.
pub const REFERENCE_MAX_LEN: usize = 512;

/// Docker Hub, the registry of references that name no domain.
pub const DEFAULT_DOMAIN: &str = "docker.io";

/// [`IMAGE_REF_PATTERN`] as a literal, for rules built with `concat!`.
#[macro_export]
macro_rules! image_ref_pattern {
    () => {
        concat!(
            r"^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?/)?",
            r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*",
            r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
            r"(?:@sha256:[a-f0-9]{64})?$"
        )
    };
}

/// An OpenAPI `pattern` (RE2 and ECMA compatible) that accepts well-formed
/// references the operator can deploy. It is the first line of defence in the
/// CRD schema; [`ImageRef::parse`] is the full check (it also enforces length
/// limits and the domain rules).
///
/// Unlike the grammar, the pattern takes `sha256` digests only: the
/// controller and the helper refuse anything else (bootc and the helper's
/// `Stage` need `name@sha256:<64 hex>`), so the schema refuses it too.
pub const IMAGE_REF_PATTERN: &str = image_ref_pattern!();

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageRef {
    /// Registry host and optional port, as written (None: Docker Hub).
    pub domain: Option<String>,
    /// Repository path inside the registry, as written.
    pub path: String,
    pub tag: Option<String>,
    /// `algorithm:hex`.
    pub digest: Option<String>,
}

/// Why a string is not an image reference. Each variant says which part failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    #[error("image reference is empty")]
    Empty,
    #[error("image reference is {len} characters long; at most {max} are allowed")]
    TooLong { len: usize, max: usize },
    #[error("image reference {reference:?} contains whitespace or a control character")]
    ControlOrSpace { reference: String },
    #[error("image reference starts with '-', which a command line would take as an option")]
    LeadingDash,
    #[error("image reference has a transport prefix {prefix:?}; give a plain registry reference")]
    TransportPrefix { prefix: String },
    #[error("registry host {domain:?} is not a valid host[:port]")]
    InvalidDomain { domain: String },
    #[error(
        "repository path component {component:?} is invalid: use lowercase letters, digits and single separators (., _, __, -)"
    )]
    InvalidPathComponent { component: String },
    #[error("repository name is {len} characters long; at most {max} are allowed")]
    NameTooLong { len: usize, max: usize },
    #[error(
        "tag {tag:?} is invalid: 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'"
    )]
    InvalidTag { tag: String },
    #[error(
        "digest {digest:?} is invalid: expected sha256:<64 lowercase hex> or sha512:<128 lowercase hex>"
    )]
    InvalidDigest { digest: String },
    #[error("image reference must be pinned by digest (name@sha256:<64 hex>), got {reference:?}")]
    NotPinned { reference: String },
    #[error("only sha256 digests are supported, got {digest:?} in {reference:?}")]
    UnsupportedDigest { reference: String, digest: String },
    #[error("image reference must not carry both a tag and a digest, got {reference:?}")]
    TagAndDigest { reference: String },
}

impl ImageRef {
    /// Parses any well-formed reference: tag, digest, both or neither.
    pub fn parse(input: &str) -> Result<Self, ImageRefError> {
        if input.is_empty() {
            return Err(ImageRefError::Empty);
        }
        if input.len() > REFERENCE_MAX_LEN {
            return Err(ImageRefError::TooLong {
                len: input.len(),
                max: REFERENCE_MAX_LEN,
            });
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ImageRefError::ControlOrSpace {
                reference: input.to_owned(),
            });
        }
        if input.starts_with('-') {
            return Err(ImageRefError::LeadingDash);
        }
        if let Some(prefix) = transport_prefix(input) {
            return Err(ImageRefError::TransportPrefix { prefix });
        }

        let (rest, digest) = match input.split_once('@') {
            Some((rest, digest)) => {
                validate_digest(digest)?;
                (rest, Some(digest.to_owned()))
            }
            None => (input, None),
        };

        // A tag is after the last ':' that follows the last '/', so that a
        // registry port ("host:5000/repo") is not mistaken for a tag.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&rest[..at], Some(rest[at + 1..].to_owned()))
            }
            None => (rest, None),
        };
        if let Some(tag) = &tag {
            validate_tag(tag)?;
        }
        if name.len() > NAME_MAX_LEN {
            return Err(ImageRefError::NameTooLong {
                len: name.len(),
                max: NAME_MAX_LEN,
            });
        }

        let (domain, path) = split_domain(name);
        if let Some(domain) = domain {
            validate_domain(domain)?;
        }
        if path.is_empty() {
            return Err(ImageRefError::InvalidPathComponent {
                component: String::new(),
            });
        }
        for component in path.split('/') {
            validate_path_component(component)?;
        }

        Ok(ImageRef {
            domain: domain.map(str::to_owned),
            path: path.to_owned(),
            tag,
            digest,
        })
    }

    /// Parses a reference that must be exactly `name@sha256:<64 hex>`: the
    /// only form the node agent ever stages.
    pub fn parse_pinned(input: &str) -> Result<Self, ImageRefError> {
        let parsed = Self::parse(input)?;
        match (&parsed.tag, &parsed.digest) {
            (Some(_), Some(_)) => Err(ImageRefError::TagAndDigest {
                reference: input.to_owned(),
            }),
            (_, Some(digest)) if digest.starts_with("sha256:") => Ok(parsed),
            (_, Some(digest)) => Err(ImageRefError::UnsupportedDigest {
                reference: input.to_owned(),
                digest: digest.clone(),
            }),
            _ => Err(ImageRefError::NotPinned {
                reference: input.to_owned(),
            }),
        }
    }

    /// `domain/path` as written, without tag or digest.
    pub fn repository(&self) -> String {
        match &self.domain {
            Some(domain) => format!("{domain}/{}", self.path),
            None => self.path.clone(),
        }
    }

    /// The registry host to contact (Docker Hub when none is written).
    pub fn registry(&self) -> &str {
        self.domain.as_deref().unwrap_or(DEFAULT_DOMAIN)
    }

    /// The repository path as the registry API wants it (`library/` added
    /// for single-component Docker Hub names).
    pub fn registry_path(&self) -> String {
        if self.domain.is_none() && !self.path.contains('/') {
            format!("library/{}", self.path)
        } else {
            self.path.clone()
        }
    }

    /// `repository@digest`: the pinned form written to BootcNodes.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}@{digest}", self.repository())
    }

    /// The tag to resolve: the written tag, or `latest` when there is none.
    pub fn tag_or_latest(&self) -> &str {
        self.tag.as_deref().unwrap_or("latest")
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repository())?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Returns the digest part (`sha256:...`) of a reference string, if any.
pub fn digest_of(reference: &str) -> Option<&str> {
    reference.split_once('@').map(|(_, digest)| digest)
}

/// Is `digest` a well-formed `sha256:<64 lowercase hex>`?
pub fn is_sha256_digest(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| is_lower_hex(hex, 64))
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn transport_prefix(input: &str) -> Option<String> {
    // containers-transports(5) names, and any URL scheme.
    const TRANSPORTS: &[&str] = &[
        "docker:",
        "oci:",
        "oci-archive:",
        "docker-archive:",
        "docker-daemon:",
        "containers-storage:",
        "dir:",
        "registry:",
        "ostree-unverified-registry:",
        "ostree-remote-registry:",
        "ostree-image-signed:",
        "ostree-unverified-image:",
        "sif:",
    ];
    if let Some(i) = input.find("://") {
        return Some(input[..i + 3].to_owned());
    }
    TRANSPORTS
        .iter()
        .find(|p| input.starts_with(*p))
        .map(|p| (*p).to_owned())
}

fn split_domain(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.')
                || first.contains(':')
                || first.starts_with('[')
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    }
}

fn validate_digest(digest: &str) -> Result<(), ImageRefError> {
    let ok = match digest.split_once(':') {
        Some(("sha256", hex)) => is_lower_hex(hex, 64),
        Some(("sha512", hex)) => is_lower_hex(hex, 128),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ImageRefError::InvalidDigest {
            digest: digest.to_owned(),
        })
    }
}

fn validate_tag(tag: &str) -> Result<(), ImageRefError> {
    let bytes = tag.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= TAG_MAX_LEN
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ImageRefError::InvalidTag {
            tag: tag.to_owned(),
        })
    }
}

fn validate_domain(domain: &str) -> Result<(), ImageRefError> {
    let invalid = || ImageRefError::InvalidDomain {
        domain: domain.to_owned(),
    };
    let (host, port) = if let Some(rest) = domain.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or_else(invalid)?;
        if v6.is_empty() || !v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return Err(invalid());
        }
        match after {
            "" => ("", None),
            p => ("", Some(p.strip_prefix(':').ok_or_else(invalid)?)),
        }
    } else {
        match domain.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (domain, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(invalid());
    }
    if domain.starts_with('[') {
        return Ok(());
    }
    let label_ok = |label: &str| {
        let b = label.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    if host.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(invalid())
    }
}

fn validate_path_component(component: &str) -> Result<(), ImageRefError> {
    let invalid = || ImageRefError::InvalidPathComponent {
        component: component.to_owned(),
    };
    let b = component.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return Err(invalid());
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or one or more "-".
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &component[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return Err(invalid());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_common_forms() {
        let r = ImageRef::parse("quay.io/acme/os:prod").unwrap();
        assert_eq!(r.domain.as_deref(), Some("quay.io"));
        assert_eq!(r.path, "acme/os");
        assert_eq!(r.tag.as_deref(), Some("prod"));
        assert_eq!(r.digest, None);

        let r = ImageRef::parse("localhost:5000/os").unwrap();
        assert_eq!(r.domain.as_deref(), Some("localhost:5000"));
        assert_eq!(r.tag, None);

        let r = ImageRef::parse("127.0.0.1:5000/a/b:v2").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.tag.as_deref(), Some("v2"));

        let r = ImageRef::parse("fedora").unwrap();
        assert_eq!(r.registry(), DEFAULT_DOMAIN);
        assert_eq!(r.registry_path(), "library/fedora");
        assert_eq!(r.tag_or_latest(), "latest");

        let r = ImageRef::parse(&format!("quay.io/a/b:tag@{D}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(D));
        assert_eq!(r.pinned(D), format!("quay.io/a/b@{D}"));

        let r = ImageRef::parse("[::1]:5000/os:1").unwrap();
        assert_eq!(r.domain.as_deref(), Some("[::1]:5000"));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "quay.io/a/b:c",
            &format!("x.io/y@{D}"),
            "a__b/c-d.e_f:T.1-x",
        ] {
            assert_eq!(ImageRef::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        let long_name = format!("quay.io/{}", "a".repeat(260));
        type Check = fn(&ImageRefError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| matches!(e, ImageRefError::Empty)),
            ("-rf", |e| matches!(e, ImageRefError::LeadingDash)),
            ("--apply", |e| matches!(e, ImageRefError::LeadingDash)),
            ("quay.io/a b", |e| {
                matches!(e, ImageRefError::ControlOrSpace { .. })
            }),
            ("quay.io/a\nb", |e| {
                matches!(e, ImageRefError::ControlOrSpace { .. })
            }),
            ("docker://quay.io/a", |e| {
                matches!(e, ImageRefError::TransportPrefix { .. })
            }),
            ("oci:/var/mnt/os", |e| {
                matches!(e, ImageRefError::TransportPrefix { .. })
            }),
            ("containers-storage:x", |e| {
                matches!(e, ImageRefError::TransportPrefix { .. })
            }),
            ("quay.io/Acme/os", |e| {
                matches!(e, ImageRefError::InvalidPathComponent { .. })
            }),
            ("quay.io/a..b", |e| {
                matches!(e, ImageRefError::InvalidPathComponent { .. })
            }),
            ("quay.io//a", |e| {
                matches!(e, ImageRefError::InvalidPathComponent { .. })
            }),
            ("quay.io/a:", |e| {
                matches!(e, ImageRefError::InvalidTag { .. })
            }),
            ("quay.io/a:.x", |e| {
                matches!(e, ImageRefError::InvalidTag { .. })
            }),
            ("quay.io/a@sha256:abc", |e| {
                matches!(e, ImageRefError::InvalidDigest { .. })
            }),
            ("quay.io/a@md5:0123456789abcdef0123456789abcdef", |e| {
                matches!(e, ImageRefError::InvalidDigest { .. })
            }),
            ("-h.io/a", |e| matches!(e, ImageRefError::LeadingDash)),
            ("h-.io/a", |e| {
                matches!(e, ImageRefError::InvalidDomain { .. })
            }),
            ("h.io:x/a", |e| {
                matches!(e, ImageRefError::InvalidDomain { .. })
            }),
            (&long_name, |e| {
                matches!(e, ImageRefError::NameTooLong { .. })
            }),
        ];
        for (input, check) in cases {
            let err = ImageRef::parse(input).expect_err(input);
            assert!(check(&err), "{input:?}: unexpected error {err:?}");
            assert!(!err.to_string().is_empty());
        }
    }

    #[test]
    fn pinned_form_only() {
        assert!(ImageRef::parse_pinned(&format!("quay.io/a@{D}")).is_ok());
        assert!(matches!(
            ImageRef::parse_pinned("quay.io/a:v1"),
            Err(ImageRefError::NotPinned { .. })
        ));
        assert!(matches!(
            ImageRef::parse_pinned(&format!("quay.io/a:v1@{D}")),
            Err(ImageRefError::TagAndDigest { .. })
        ));
        let upper = format!("quay.io/a@{}", D.to_uppercase().replace("SHA256", "sha256"));
        assert!(ImageRef::parse_pinned(&upper).is_err());
    }

    #[test]
    fn digest_helpers() {
        assert!(is_sha256_digest(D));
        assert!(!is_sha256_digest("sha256:00"));
        assert_eq!(digest_of(&format!("a/b@{D}")), Some(D));
        assert_eq!(digest_of("a/b:c"), None);
    }
}
