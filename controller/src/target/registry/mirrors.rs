//! Registry mirrors, in the hosts' own format: containers-registries.conf(5)
//! version 2, the text an admin puts in `/etc/containers/registries.conf`
//! of the nodes' image, given to the controller as well (`deploy/`'s
//! ConfigMap `bootc-registries`, the chart's `controller.registriesConf`).
//!
//! **The rules**, as containers-registries.conf(5) and containers/image
//! apply them, as pure functions ([`parse`], [`plan`]):
//!
//! * One `[[registry]]` table is chosen for a reference: the one whose
//!   `prefix` is the longest that matches it (the first of equals). A
//!   prefix matches when the reference (`host[:port]/path`, with its
//!   `:tag` (`latest` when none is written) or `@digest`) starts with it
//!   and goes on with `/`, `:` or `@`, or ends there. `*.example.com`
//!   matches any subdomain of `example.com` (not `example.com` itself) and
//!   the host only. A missing `prefix` is the `location`.
//! * `blocked = true` refuses the reference: no location of it, mirror or
//!   not, is asked.
//! * The locations asked, in order: the `[[registry.mirror]]` entries, then
//!   the primary `location`; with `mirror-by-digest-only = true` the mirrors
//!   are asked for digest references only (a tag goes to the primary
//!   alone), and a mirror's own `pull-from-mirror` (`all`, `digest-only`,
//!   `tag-only`) narrows it the same way.
//! * A location replaces the matched prefix of the reference: prefix
//!   `registry.example.com/os`, location `mirror.example.internal/os-mirror`
//!   asks `mirror.example.internal/os-mirror/fedora:40` for
//!   `registry.example.com/os/fedora:40`. A wildcard prefix without a
//!   location keeps the reference as it is.
//! * `insecure = true` (of a registry, or of a mirror): the controller asks
//!   that location over plain HTTP, as `--insecure-registry` does. It never
//!   accepts a certificate it does not trust (a location's CA goes in the
//!   CA directory).
//! * `unqualified-search-registries`, `[aliases]`, `short-name-mode`,
//!   `credential-helpers` and any other key the hosts know mean nothing to
//!   the controller (it never resolves a short name) and are left alone; the
//!   deprecated version 1 tables (`[registries.search]`...) are refused.
//!
//! Whatever location answers, the reference a node is told is the pool's
//! own (`repository@digest`): the node's own registries.conf sends its pull
//! to the same mirror. [`ConfFile`] is the file layer: read again before
//! every resolution, as the CA directory is (`super::trust`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use api::image_ref::ImageRef;
use serde::Deserialize;

/// A parsed registries.conf: its `[[registry]]` tables, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistriesConf {
    pub rules: Vec<Rule>,
}

/// One `[[registry]]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub prefix: String,
    /// Empty only for a wildcard prefix (`*.example.com`): the matched host.
    pub location: String,
    pub insecure: bool,
    pub blocked: bool,
    pub mirror_by_digest_only: bool,
    pub mirrors: Vec<Mirror>,
}

/// One `[[registry.mirror]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    pub location: String,
    pub insecure: bool,
    pub pull_from: PullFrom,
}

/// A mirror's `pull-from-mirror`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullFrom {
    #[default]
    All,
    DigestOnly,
    TagOnly,
}

/// Why a registries.conf is refused (the whole file: none of its rules
/// applies, as the hosts' tools refuse it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfError {
    #[error("not valid TOML for registries.conf: {0}")]
    Toml(String),
    #[error(
        "the version 1 tables [registries.*] are not supported: use [[registry]] tables (version 2)"
    )]
    Version1,
    #[error("a [[registry]] has neither prefix nor location")]
    NoPrefix,
    #[error("{field} {value:?}: URI schemes are not supported (give host[:port][/path])")]
    Scheme { field: &'static str, value: String },
    #[error("[[registry]] prefix {prefix:?} has no location and is not a wildcard (*.example.com)")]
    NoLocation { prefix: String },
    #[error(
        "[[registry]] prefix {prefix:?}: a wildcard prefix is *.host only (no path, port or other '*')"
    )]
    BadWildcard { prefix: String },
    #[error("[[registry]] prefix {prefix:?}: a mirror has no location")]
    MirrorWithoutLocation { prefix: String },
    #[error(
        "[[registry]] prefix {prefix:?}: pull-from-mirror belongs on a mirror, not the registry"
    )]
    PullFromOnRegistry { prefix: String },
    #[error(
        "[[registry]] prefix {prefix:?}: pull-from-mirror cannot be set with mirror-by-digest-only"
    )]
    PullFromWithDigestOnly { prefix: String },
    #[error("registry {location:?} is defined more than once with a different {field:?}")]
    Conflict {
        location: String,
        field: &'static str,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawConf {
    #[serde(default)]
    registry: Vec<RawRegistry>,
    /// The version 1 format's tables: refused.
    #[serde(default)]
    registries: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawRegistry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<RawMirror>,
    #[serde(default)]
    pull_from_mirror: Option<PullFrom>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawMirror {
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    pull_from_mirror: Option<PullFrom>,
}

/// Parses registries.conf text; empty (or comments only): no rules.
pub fn parse(text: &str) -> Result<RegistriesConf, ConfError> {
    let raw: RawConf = toml::from_str(text).map_err(|e| ConfError::Toml(one_line(&e)))?;
    if raw.registries.is_some() {
        return Err(ConfError::Version1);
    }
    let mut rules = Vec::with_capacity(raw.registry.len());
    for registry in raw.registry {
        rules.push(rule(registry)?);
    }
    no_conflicts(&rules)?;
    Ok(RegistriesConf { rules })
}

/// The TOML error on one line, for a status message.
fn one_line(e: &toml::de::Error) -> String {
    e.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "|")
        .collect::<Vec<_>>()
        .join(" ")
}

/// A location or prefix without its trailing `/`; a URI scheme is refused.
fn location(field: &'static str, value: &str) -> Result<String, ConfError> {
    let trimmed = value.trim_end_matches('/');
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        return Err(ConfError::Scheme {
            field,
            value: value.to_owned(),
        });
    }
    Ok(trimmed.to_owned())
}

fn rule(raw: RawRegistry) -> Result<Rule, ConfError> {
    let location_ = location("location", &raw.location)?;
    let prefix = match location("prefix", &raw.prefix)? {
        p if p.is_empty() && location_.is_empty() => return Err(ConfError::NoPrefix),
        p if p.is_empty() => location_.clone(),
        p => p,
    };
    if let Some(host) = prefix.strip_prefix("*.") {
        if host.is_empty() || host.contains(['/', ':', '@', '*']) {
            return Err(ConfError::BadWildcard { prefix });
        }
    } else if location_.is_empty() {
        return Err(ConfError::NoLocation { prefix });
    }
    if raw.pull_from_mirror.is_some() {
        return Err(ConfError::PullFromOnRegistry { prefix });
    }
    let mut mirrors = Vec::with_capacity(raw.mirror.len());
    for m in raw.mirror {
        let at = location("mirror location", &m.location)?;
        if at.is_empty() {
            return Err(ConfError::MirrorWithoutLocation { prefix });
        }
        if raw.mirror_by_digest_only && m.pull_from_mirror.is_some() {
            return Err(ConfError::PullFromWithDigestOnly { prefix });
        }
        mirrors.push(Mirror {
            location: at,
            insecure: m.insecure,
            pull_from: m.pull_from_mirror.unwrap_or_default(),
        });
    }
    Ok(Rule {
        prefix,
        location: location_,
        insecure: raw.insecure,
        blocked: raw.blocked,
        mirror_by_digest_only: raw.mirror_by_digest_only,
        mirrors,
    })
}

/// One location named by several tables must say the same of `insecure`
/// and `blocked` (as the hosts' tools require).
fn no_conflicts(rules: &[Rule]) -> Result<(), ConfError> {
    for (i, a) in rules.iter().enumerate() {
        let key = |r: &Rule| {
            if r.location.is_empty() {
                r.prefix.clone()
            } else {
                r.location.clone()
            }
        };
        for b in rules[..i].iter().filter(|b| key(b) == key(a)) {
            let field = if a.insecure != b.insecure {
                "insecure"
            } else if a.blocked != b.blocked {
                "blocked"
            } else {
                continue;
            };
            return Err(ConfError::Conflict {
                location: key(a),
                field,
            });
        }
    }
    Ok(())
}

/// The reference as the rules match it: `host[:port]/path` with `:tag`
/// (`latest` when none is written) or `@digest`.
pub fn full_name(image: &ImageRef) -> String {
    let name = format!("{}/{}", image.registry(), image.registry_path());
    match &image.digest {
        Some(digest) => format!("{name}@{digest}"),
        None => format!("{name}:{}", image.tag_or_latest()),
    }
}

/// How much of `reference` `prefix` matches (the rules above), if it does.
pub fn matching_prefix(reference: &str, prefix: &str) -> Option<usize> {
    let ends_at = |at: usize| {
        (at == reference.len() || matches!(reference.as_bytes().get(at), Some(b'/' | b':' | b'@')))
            .then_some(at)
    };
    if let Some(domain) = prefix.strip_prefix('*') {
        // `*.example.com`: `.example.com` found in the host, the match
        // running to its end.
        let at = reference.find(domain)?;
        if reference[..at].contains('/') {
            return None;
        }
        return ends_at(at + domain.len());
    }
    reference.strip_prefix(prefix)?;
    ends_at(prefix.len())
}

/// The rule that applies to `reference`: the longest matching prefix.
pub fn rule_for<'a>(conf: &'a RegistriesConf, reference: &str) -> Option<(&'a Rule, usize)> {
    let mut best: Option<(&Rule, usize)> = None;
    for rule in &conf.rules {
        let Some(matched) = matching_prefix(reference, &rule.prefix) else {
            continue;
        };
        if best.is_none_or(|(b, _)| rule.prefix.len() > b.prefix.len()) {
            best = Some((rule, matched));
        }
    }
    best
}

/// One location to ask for a reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The reference as that location names it.
    pub image: ImageRef,
    /// Asked over plain HTTP.
    pub insecure: bool,
    /// A mirror (not the primary location).
    pub mirror: bool,
}

/// Where to ask for a reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The locations, in order. `rule`: the prefix of the table that chose
    /// them (None: no table matched, the reference's own registry);
    /// `skipped_mirrors`: the table has mirrors this reference may not use
    /// (`mirror-by-digest-only` or `pull-from-mirror` and a tag, or the
    /// other way round).
    Ask {
        candidates: Vec<Candidate>,
        rule: Option<String>,
        skipped_mirrors: bool,
    },
    /// The chosen table says `blocked = true`.
    Blocked { prefix: String },
}

/// Why a location's reference could not be formed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "[[registry]] prefix {prefix:?} rewrites {reference} to {rewritten:?}, which is not a reference: {problem}"
)]
pub struct RewriteError {
    pub prefix: String,
    pub reference: String,
    pub rewritten: String,
    pub problem: api::image_ref::ImageRefError,
}

/// The locations to ask for `image`, in order (the rules above).
pub fn plan(conf: &RegistriesConf, image: &ImageRef) -> Result<Plan, RewriteError> {
    let reference = full_name(image);
    let Some((rule, matched)) = rule_for(conf, &reference) else {
        return Ok(Plan::Ask {
            candidates: vec![Candidate {
                image: image.clone(),
                insecure: false,
                mirror: false,
            }],
            rule: None,
            skipped_mirrors: false,
        });
    };
    if rule.blocked {
        return Ok(Plan::Blocked {
            prefix: rule.prefix.clone(),
        });
    }
    let by_digest = image.digest.is_some();
    let usable = |m: &&Mirror| match (rule.mirror_by_digest_only, m.pull_from) {
        (true, _) | (false, PullFrom::DigestOnly) => by_digest,
        (false, PullFrom::TagOnly) => !by_digest,
        (false, PullFrom::All) => true,
    };
    let rewrite = |location: &str| -> Result<ImageRef, RewriteError> {
        if location.is_empty() {
            return Ok(image.clone());
        }
        let rewritten = format!("{location}{}", &reference[matched..]);
        ImageRef::parse(&rewritten).map_err(|problem| RewriteError {
            prefix: rule.prefix.clone(),
            reference: reference.clone(),
            rewritten,
            problem,
        })
    };
    let mut candidates = Vec::with_capacity(rule.mirrors.len() + 1);
    for m in rule.mirrors.iter().filter(usable) {
        candidates.push(Candidate {
            image: rewrite(&m.location)?,
            insecure: m.insecure,
            mirror: true,
        });
    }
    let skipped_mirrors = candidates.len() < rule.mirrors.len();
    candidates.push(Candidate {
        image: rewrite(&rule.location)?,
        insecure: rule.insecure,
        mirror: false,
    });
    Ok(Plan::Ask {
        candidates,
        rule: Some(rule.prefix.clone()),
        skipped_mirrors,
    })
}

/// The registries.conf file, read again before every resolution (a
/// ConfigMap volume: see `super::trust` for why a read sees a whole file);
/// parsed again only when its bytes change. An absent file, or an empty
/// one, has no rules; one that cannot be read or parsed fails every
/// resolution with [`FileProblem`] until it is put right (never a stale
/// rule in force: a blocked registry stays blocked), logged once per change.
pub struct ConfFile {
    path: Option<PathBuf>,
    current: Mutex<Read>,
}

/// The file's bytes as last read (None: not yet) and what they mean.
type Read = (Option<Vec<u8>>, Result<Arc<RegistriesConf>, FileProblem>);

/// Why an admin's file (registries.conf, the signature policy) is not in
/// force: the file and the error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct FileProblem {
    pub file: String,
    pub message: String,
}

impl FileProblem {
    pub fn new(path: &std::path::Path, message: impl Into<String>) -> Self {
        FileProblem {
            file: path.display().to_string(),
            message: message.into(),
        }
    }
}

/// An admin's file as it is now; one that does not exist reads as empty
/// (the ConfigMap's key left out: nothing configured).
pub fn read_admin_file(path: &std::path::Path) -> Result<Vec<u8>, FileProblem> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(FileProblem::new(path, e.to_string())),
    }
}

impl ConfFile {
    pub fn new(path: Option<PathBuf>) -> Self {
        ConfFile {
            path,
            current: Mutex::new((None, Ok(Arc::default()))),
        }
    }

    /// The rules the file holds now.
    pub fn current(&self) -> Result<Arc<RegistriesConf>, FileProblem> {
        let Some(path) = &self.path else {
            return Ok(Arc::default());
        };
        let bytes = read_admin_file(path)?;
        let Ok(mut current) = self.current.lock() else {
            return Err(FileProblem::new(
                path,
                "the registries.conf lock is poisoned",
            ));
        };
        if current.0.as_ref() != Some(&bytes) {
            let parsed = std::str::from_utf8(&bytes)
                .map_err(|_| FileProblem::new(path, "not UTF-8 text"))
                .and_then(|text| parse(text).map_err(|e| FileProblem::new(path, e.to_string())));
            match &parsed {
                Ok(conf) => tracing::info!(
                    file = %path.display(),
                    rules = conf.rules.len(),
                    "registries.conf read: its rules are in force"
                ),
                Err(error) => tracing::error!(
                    %error,
                    "registries.conf refused: every pool's resolution fails until it is put right"
                ),
            }
            *current = (Some(bytes), parsed.map(Arc::new));
        }
        current.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap()
    }

    #[test]
    fn prefixes_match_at_a_separator_or_the_end() {
        let cases: &[(&str, &str, Option<usize>)] = &[
            ("example.com/os:1", "example.com", Some(11)),
            ("example.com/os:1", "example.com/os", Some(14)),
            ("example.com/os:1", "example.com/os:1", Some(16)),
            ("example.com/os@sha256:x", "example.com/os", Some(14)),
            ("example.com/osx:1", "example.com/os", None),
            ("example.com.evil/os:1", "example.com", None),
            ("other.com/example.com/os:1", "example.com", None),
            ("example.com/os:1", "example.com/os/sub", None),
            // Wildcards: subdomains, the host only.
            ("a.example.com/os:1", "*.example.com", Some(13)),
            ("a.b.example.com/os:1", "*.example.com", Some(15)),
            ("a.example.com:5000/os:1", "*.example.com", Some(13)),
            ("example.com/os:1", "*.example.com", None),
            ("a.example.company/os:1", "*.example.com", None),
            ("evil.com/a.example.com/os:1", "*.example.com", None),
        ];
        for (reference, prefix, want) in cases {
            assert_eq!(
                matching_prefix(reference, prefix),
                *want,
                "{reference} ~ {prefix}"
            );
        }
    }

    const CONF: &str = r#"
unqualified-search-registries = ["registry.example.com"]
short-name-mode = "enforcing"

[[registry]]
location = "registry.example.com"
[[registry.mirror]]
location = "mirror.example.internal"
[[registry.mirror]]
location = "mirror2.example.internal:5000/cache"
insecure = true

[[registry]]
prefix = "registry.example.com/os"
location = "os.example.internal/mirrored/os/"
mirror-by-digest-only = true
[[registry.mirror]]
location = "digests.example.internal/os"

[[registry]]
prefix = "*.blocked.example"
blocked = true

[[registry]]
location = "quarantine.example.com/bad"
blocked = true

[[registry]]
prefix = "*.example.org"
[[registry.mirror]]
location = "org-mirror.example.internal"
"#;

    /// A location: its reference, insecure, a mirror.
    type Location = (String, bool, bool);

    fn names(plan: &Plan) -> Vec<Location> {
        match plan {
            Plan::Ask { candidates, .. } => candidates
                .iter()
                .map(|c| (c.image.to_string(), c.insecure, c.mirror))
                .collect(),
            Plan::Blocked { .. } => Vec::new(),
        }
    }

    const D: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn the_longest_prefix_chooses_the_locations_and_rewrites_the_reference() {
        let conf = parse(CONF).unwrap();
        let owned = |v: &[(&str, bool, bool)]| -> Vec<Location> {
            v.iter().map(|(s, i, m)| (s.to_string(), *i, *m)).collect()
        };
        let digest_app = format!("registry.example.com/app@{D}");
        let digest_os = format!("registry.example.com/os/fedora@{D}");
        let cases: Vec<(&str, Vec<Location>)> = vec![
            // Mirrors in order, then the primary; a mirror's path replaces
            // the prefix; its own insecure.
            (
                "registry.example.com/app:1",
                owned(&[
                    ("mirror.example.internal/app:1", false, true),
                    ("mirror2.example.internal:5000/cache/app:1", true, true),
                    ("registry.example.com/app:1", false, false),
                ]),
            ),
            (
                &digest_app,
                vec![
                    (format!("mirror.example.internal/app@{D}"), false, true),
                    (
                        format!("mirror2.example.internal:5000/cache/app@{D}"),
                        true,
                        true,
                    ),
                    (digest_app.clone(), false, false),
                ],
            ),
            // The longer prefix wins; mirror-by-digest-only: a tag goes to
            // the (rewritten) primary alone, a digest to the mirror first.
            (
                "registry.example.com/os/fedora:40",
                owned(&[("os.example.internal/mirrored/os/fedora:40", false, false)]),
            ),
            (
                &digest_os,
                vec![
                    (
                        format!("digests.example.internal/os/fedora@{D}"),
                        false,
                        true,
                    ),
                    (
                        format!("os.example.internal/mirrored/os/fedora@{D}"),
                        false,
                        false,
                    ),
                ],
            ),
            // Not at a separator: the shorter prefix.
            (
                "registry.example.com/osx:1",
                owned(&[
                    ("mirror.example.internal/osx:1", false, true),
                    ("mirror2.example.internal:5000/cache/osx:1", true, true),
                    ("registry.example.com/osx:1", false, false),
                ]),
            ),
            // No tag: latest.
            (
                "registry.example.com/os/fedora",
                owned(&[(
                    "os.example.internal/mirrored/os/fedora:latest",
                    false,
                    false,
                )]),
            ),
            // A wildcard without location: the matched host stays.
            (
                "a.example.org/x/os:2",
                owned(&[
                    ("org-mirror.example.internal/x/os:2", false, true),
                    ("a.example.org/x/os:2", false, false),
                ]),
            ),
            // No table: the reference's own registry.
            (
                "elsewhere.example.net/os:1",
                owned(&[("elsewhere.example.net/os:1", false, false)]),
            ),
        ];
        for (reference, want) in cases {
            let got = plan(&conf, &image(reference)).unwrap();
            assert_eq!(names(&got), want, "{reference}");
        }
    }

    #[test]
    fn the_plan_names_its_rule_and_the_mirrors_it_skipped() {
        let conf = parse(CONF).unwrap();
        let got = plan(&conf, &image("registry.example.com/os/fedora:40")).unwrap();
        assert!(matches!(
            got,
            Plan::Ask { rule: Some(ref p), skipped_mirrors: true, .. } if p == "registry.example.com/os"
        ));
        let got = plan(&conf, &image("elsewhere.example.net/os:1")).unwrap();
        assert!(matches!(
            got,
            Plan::Ask {
                rule: None,
                skipped_mirrors: false,
                ..
            }
        ));
    }

    #[test]
    fn a_blocked_table_refuses_every_location_naming_its_prefix() {
        let conf = parse(CONF).unwrap();
        for (reference, prefix) in [
            ("x.blocked.example/os:1", "*.blocked.example"),
            (
                "quarantine.example.com/bad/os:1",
                "quarantine.example.com/bad",
            ),
        ] {
            assert_eq!(
                plan(&conf, &image(reference)).unwrap(),
                Plan::Blocked {
                    prefix: prefix.into()
                },
                "{reference}"
            );
        }
        // A sibling path is not blocked.
        assert!(matches!(
            plan(&conf, &image("quarantine.example.com/good/os:1")).unwrap(),
            Plan::Ask { .. }
        ));
    }

    #[test]
    fn pull_from_mirror_narrows_one_mirror() {
        let conf = parse(
            r#"
[[registry]]
location = "registry.example.com"
[[registry.mirror]]
location = "tags.example.internal"
pull-from-mirror = "tag-only"
[[registry.mirror]]
location = "digests.example.internal"
pull-from-mirror = "digest-only"
"#,
        )
        .unwrap();
        let tag = plan(&conf, &image("registry.example.com/os:1")).unwrap();
        assert_eq!(names(&tag)[0].0, "tags.example.internal/os:1");
        assert_eq!(names(&tag).len(), 2);
        let digest = plan(&conf, &image(&format!("registry.example.com/os@{D}"))).unwrap();
        assert_eq!(
            names(&digest)[0].0,
            format!("digests.example.internal/os@{D}")
        );
        assert_eq!(names(&digest).len(), 2);
    }

    /// The example of docs/operations.md parses and means what it says.
    #[test]
    fn the_documented_example_holds() {
        let doc = include_str!("../../../../docs/operations.md");
        let section = doc
            .split("## Mirrors and disconnected clusters")
            .nth(1)
            .unwrap();
        let toml = section.split("```toml\n").nth(1).unwrap();
        let toml = toml.split("```").next().unwrap();
        let conf = parse(toml).unwrap();
        let got = plan(&conf, &image("registry.example.com/os/fedora:40")).unwrap();
        assert_eq!(
            names(&got)[0].0,
            "mirror.example.internal/registry.example.com/os/fedora:40"
        );
        let tag = plan(&conf, &image("builds.example.com/os/fedora:40")).unwrap();
        assert_eq!(names(&tag).len(), 1, "mirror-by-digest-only");
        assert_eq!(
            plan(&conf, &image("a.untrusted.example/os:1")).unwrap(),
            Plan::Blocked {
                prefix: "*.untrusted.example".into()
            }
        );
        let lab = plan(&conf, &image("lab.example.internal:5000/os:1")).unwrap();
        assert!(names(&lab)[0].1, "insecure");
    }

    #[test]
    fn an_empty_file_has_no_rules() {
        assert_eq!(parse("").unwrap(), RegistriesConf::default());
        assert_eq!(
            parse("# nothing\nunqualified-search-registries = []\n").unwrap(),
            RegistriesConf::default()
        );
    }

    #[test]
    fn bad_files_are_refused_naming_the_problem() {
        let cases: &[(&str, &str)] = &[
            ("[[registry]\nlocation = 1", "not valid TOML"),
            ("[[registry]]\nlocation = 1", "not valid TOML"),
            (
                "[[registry]]\ninsecure = true",
                "neither prefix nor location",
            ),
            (
                "[[registry]]\nlocation = \"https://example.com\"",
                "URI schemes",
            ),
            (
                "[[registry]]\nprefix = \"example.com\"",
                "no location and is not a wildcard",
            ),
            (
                "[[registry]]\nprefix = \"*.example.com/os\"",
                "a wildcard prefix is *.host only",
            ),
            (
                "[[registry]]\nlocation = \"example.com\"\n[[registry.mirror]]\ninsecure = true",
                "a mirror has no location",
            ),
            (
                "[[registry]]\nlocation = \"example.com\"\npull-from-mirror = \"all\"",
                "belongs on a mirror",
            ),
            (
                "[[registry]]\nlocation = \"example.com\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m.example\"\npull-from-mirror = \"all\"",
                "cannot be set with mirror-by-digest-only",
            ),
            (
                "[[registry]]\nlocation = \"example.com\"\n[[registry.mirror]]\nlocation = \"m.example\"\npull-from-mirror = \"sometimes\"",
                "not valid TOML",
            ),
            (
                "[[registry]]\nprefix = \"a.example.com\"\nlocation = \"example.com\"\n[[registry]]\nprefix = \"b.example.com\"\nlocation = \"example.com\"\nblocked = true",
                "different \"blocked\"",
            ),
            (
                "[registries.search]\nregistries = [\"example.com\"]",
                "version 1",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn the_file_is_read_again_and_a_bad_one_is_not_kept_in_force() {
        let dir = std::env::temp_dir().join(format!("registries-conf-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("registries.conf");
        let file = ConfFile::new(Some(path.clone()));
        assert_eq!(file.current().unwrap().rules.len(), 0, "absent: none");
        std::fs::write(&path, "[[registry]]\nlocation = \"a.example\"\n").unwrap();
        assert_eq!(file.current().unwrap().rules.len(), 1);
        std::fs::write(&path, "[[registry]\n").unwrap();
        let err = file.current().unwrap_err();
        assert_eq!(err.file, path.display().to_string());
        assert!(err.message.contains("not valid TOML"), "{err}");
        std::fs::write(&path, "").unwrap();
        assert_eq!(file.current().unwrap().rules.len(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
