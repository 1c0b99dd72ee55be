//! The shared vocabulary (condition types and reasons, the daemon's phases,
//! the members' standings, event reasons, label and annotation names) is defined in the `api` crate
//! and nowhere else: no Rust source outside `api` spells one of its strings
//! as a literal; it names the enum variant or the constant. The list is read
//! from `api` itself (the condition enums' `ALL`, and its string constants),
//! so a new name is covered the day it is added.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use tests::repo_root;

/// The `api` files whose `pub const NAME: &str` are the vocabulary (beside
/// the condition types and reasons, read from their enums).
const VOCABULARY_FILES: &[&str] = &[
    "api/src/labels.rs",
    "api/src/v1alpha1.rs",
    "api/src/node_health.rs",
    "api/src/host_updaters.rs",
];

/// Constants of those files that name objects (the API group, field
/// managers, namespaces, a Role) rather than states or keys: their strings
/// also name service accounts, RBAC objects and test fixtures, and are not
/// what the rule is about.
const NOT_VOCABULARY: &[&str] = &[
    "GROUP",
    "VERSION",
    "CONTROLLER_MANAGER",
    "DAEMON_MANAGER",
    "CONTROLLER_APP_NAME",
    "DAEMON_APP_NAME",
    "CLUSTER_EVENTS_NAMESPACE",
    "OPERATOR_NAMESPACE",
    "DAEMON_PULL_SECRETS_ROLE",
];

/// Paths (relative to the repository, prefixes) not scanned.
const SKIPPED: &[&str] = &[
    // The vocabulary's home.
    "api/", "target/",
];

/// `(file, string)`: a file that may spell one vocabulary string because
/// it means something else there.
const ALLOWED: &[(&str, &str)] = &[
    // A row label of `kubectl bootc status`: the spec's `paused` field, not
    // the UpToDate reason.
    ("kubectl-bootc/src/status.rs", api::Reason::Paused.as_str()),
    // A Pod's Ready condition (the kubelet's), not a Node's or a pool's.
    ("tests/src/k8s.rs", api::node_health::NODE_READY),
];

/// `(NAME, value)` of every `pub const NAME: &str = "value";` in `source`.
fn string_constants(source: &str) -> Vec<(String, String)> {
    source
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("pub const ")?;
            let (name, rest) = rest.split_once(": &str = \"")?;
            let (value, _) = rest.split_once("\";")?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}

fn vocabulary(root: &Path) -> Vec<String> {
    // The daemon's phases are Reason variants (api::DaemonPhase::reason).
    let mut values: Vec<String> = api::ConditionType::ALL
        .iter()
        .map(|t| t.as_str())
        .chain(api::Reason::ALL.iter().map(|r| r.as_str()))
        .chain(api::StandingKind::ALL.iter().map(|k| k.as_str()))
        .map(str::to_owned)
        .collect();
    for file in VOCABULARY_FILES {
        let source = std::fs::read_to_string(root.join(file)).unwrap();
        for (name, value) in string_constants(&source) {
            if !NOT_VOCABULARY.contains(&name.as_str()) {
                values.push(value);
            }
        }
    }
    values.sort();
    values.dedup();
    values
}

fn rust_sources(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let relative = path.strip_prefix(root).unwrap().to_string_lossy();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden || SKIPPED.iter().any(|s| relative.starts_with(s)) {
            continue;
        }
        if path.is_dir() {
            rust_sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `path:line: text` of each line that quotes a vocabulary string.
fn literals(root: &Path, vocabulary: &[String]) -> Vec<String> {
    let quoted: Vec<String> = vocabulary.iter().map(|v| format!("\"{v}\"")).collect();
    let mut files = Vec::new();
    rust_sources(root, root, &mut files);
    files.sort();
    let mut hits = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let relative = file.strip_prefix(root).unwrap().display().to_string();
        for (n, line) in source.lines().enumerate() {
            // Comments may name the vocabulary; the rule is about literals.
            if line.trim_start().starts_with("//") {
                continue;
            }
            let hit = vocabulary.iter().zip(&quoted).any(|(v, q)| {
                line.contains(q.as_str()) && !ALLOWED.contains(&(relative.as_str(), v.as_str()))
            });
            if hit {
                hits.push(format!("{relative}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    hits
}

#[test]
fn the_vocabulary_is_read_from_api() {
    let vocabulary = vocabulary(&repo_root());
    for known in [
        api::ConditionType::Ready.as_str(),
        api::Reason::DrainTimedOut.as_str(),
        api::Reason::Staged.as_str(),
        api::event_reasons::DRAIN_BLOCKED,
        api::labels::MANAGED_LABEL,
        api::labels::ARCH_LABEL,
        api::node_health::NODE_READY,
    ] {
        assert!(vocabulary.iter().any(|v| v == known), "{known} not read");
    }
    assert!(
        !vocabulary
            .iter()
            .any(|v| v == api::labels::OPERATOR_NAMESPACE),
        "a namespace is not vocabulary"
    );
}

#[test]
fn no_vocabulary_literal_outside_api() {
    let root = repo_root();
    let hits = literals(&root, &vocabulary(&root));
    assert!(
        hits.is_empty(),
        "vocabulary spelled outside api (use api::ConditionType, api::Reason, \
         the constants of api::event_reasons, api::labels, api::node_health):\n{}",
        hits.join("\n")
    );
}
