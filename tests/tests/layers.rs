//! The house rules of the code's shape, checked on the sources:
//!
//! - the `rollout` crate decides without I/O: its dependencies are `api`
//!   and a few pure crates (no client, no runtime, no clock);
//! - inside it no module reaches back: the imports between its modules form
//!   no circle, and no step imports the crate root (the pipeline in
//!   `lib.rs` imports the steps, never the other way);
//! - the controller's layers import only what is below them
//!   (`docs/design.md`, "The layers").
//!
//! Test modules (everything from a file's first `#[cfg(test)]`) are not
//! read: tests may reach anywhere.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tests::repo_root;

/// What `rollout` may depend on: nothing that does I/O or keeps time.
const ROLLOUT_DEPENDENCIES: &[&str] = &[
    "api",
    "jiff",
    "k8s-openapi",
    "kube-core",
    "serde_json",
    "thiserror",
    "foldhash",
];

/// `(layer, what it must not import)`: the controller's layers, as paths
/// under `controller/src` (a folder and its module file).
const CONTROLLER_LAYERS: &[(&str, &[&str])] = &[
    (
        "actions",
        &["crate::runtime", "crate::target", "crate::gates"],
    ),
    (
        "target",
        &["crate::runtime", "crate::actions", "crate::gates"],
    ),
    (
        "gates",
        &["crate::runtime", "crate::actions", "crate::target"],
    ),
    (
        "metrics",
        &[
            "crate::runtime",
            "crate::actions",
            "crate::target",
            "crate::gates",
        ],
    ),
];

/// A source file without its test modules.
fn production_part(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

/// The paths after each `crate::` in `text` (at most three segments),
/// groups (`crate::{a, b::c}`) included.
fn crate_imports(text: &str) -> BTreeSet<String> {
    // A path ends at its third segment, or at the first character that is
    // neither part of a name nor `::`.
    let path = |s: &str| -> String {
        let mut segments = Vec::new();
        for seg in s.split("::").take(3) {
            let seg = seg.trim_start();
            let name: String = seg
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let whole = name.len() == seg.trim_end().len();
            if name.is_empty() {
                break;
            }
            segments.push(name);
            if !whole {
                break;
            }
        }
        segments.join("::")
    };
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.insert(path(item));
            }
        } else {
            out.insert(path(rest));
        }
    }
    out.remove("");
    out.remove("self");
    out
}

/// A circle in `graph`, if there is one, as the modules along it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// The rollout crate's modules, rooms' included (`holds::window`; not the
/// unit tests under `tests/`), and what each imports of the others.
fn rollout_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = repo_root().join("rollout/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<String, std::path::PathBuf> = files
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).ok()?.with_extension("");
            let name = relative.to_str()?.replace('/', "::");
            (!name.starts_with("tests")).then_some((name, path))
        })
        .collect();
    // An import names the longest module its path starts with; one that
    // names none is kept as it is (a root re-export, refused below).
    let module_of = |import: &str| -> String {
        let segments: Vec<&str> = import.split("::").collect();
        (1..=segments.len())
            .rev()
            .map(|n| segments[..n].join("::"))
            .find(|prefix| modules.contains_key(prefix))
            .unwrap_or_else(|| import.to_owned())
    };
    modules
        .iter()
        .map(|(m, path)| {
            let imports = crate_imports(&production_part(path))
                .iter()
                .map(|i| module_of(i))
                .filter(|i| i != m)
                .collect();
            (m.clone(), imports)
        })
        .collect()
}

#[test]
fn the_rollout_crate_depends_on_nothing_that_does_io() {
    let manifest = std::fs::read_to_string(repo_root().join("rollout/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for line in deps.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap();
        assert!(
            ROLLOUT_DEPENDENCIES.contains(&name),
            "rollout depends on {name}: the pure crate takes no client, runtime or clock"
        );
    }
}

#[test]
fn no_module_of_the_rollout_crate_reaches_back() {
    let graph = rollout_graph();
    let modules: BTreeSet<&String> = graph.keys().collect();
    for (module, imports) in &graph {
        if module == "lib" {
            continue;
        }
        for name in imports {
            assert!(
                modules.contains(name),
                "rollout module {module} imports crate::{name} from the crate root: \
                 import it from the module that defines it"
            );
        }
    }
    let steps: BTreeMap<String, BTreeSet<String>> =
        graph.into_iter().filter(|(m, _)| m != "lib").collect();
    if let Some(found) = circle(&steps) {
        panic!("a circle of imports in rollout: {}", found.join(" -> "));
    }
}

/// Every `.rs` file under `dir`, at any depth.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.map(|e| e.unwrap().path()) {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_controller_layers_import_only_what_is_below_them() {
    let src = repo_root().join("controller/src");
    for (layer, forbidden) in CONTROLLER_LAYERS {
        let mut files = vec![src.join(format!("{layer}.rs"))];
        rust_files(&src.join(layer), &mut files);
        for file in &files {
            let text = production_part(file);
            for f in *forbidden {
                assert!(
                    !text.contains(f),
                    "{} ({layer}) imports {f}, a layer above it",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_circle_check_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circle(&graph).unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(
        crate_imports("use crate::{a, b::C};\nuse crate::d::E; crate::f::g::h::i()"),
        ["a", "b::C", "d::E", "f::g::h"].map(String::from).into()
    );
}
