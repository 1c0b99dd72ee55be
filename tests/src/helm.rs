//! The real `helm` (built from its Go module, [`crate::binaries::helm`]) for
//! the chart's tests, with homes of its own (no user's repositories or
//! registry logins leak in), and the comparison of rendered manifests
//! object by object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{ControlPlane, Identity, binaries, repo_root};

/// The chart's folder in the repository.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/bootc-operator")
}

/// helm with its cache, configuration and data in a directory of its own.
#[derive(Debug)]
pub struct Helm {
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    /// helm for rendering, linting and packaging (no cluster).
    pub fn new() -> Result<Self> {
        Ok(Self {
            home: tempfile::Builder::new().prefix("helm-home-").tempdir()?,
            kubeconfig: None,
        })
    }

    /// helm acting on `cp` as its admin.
    pub fn on(cp: &ControlPlane) -> Result<Self> {
        let mut helm = Self::new()?;
        helm.kubeconfig = Some(cp.kubeconfig(Identity::Admin));
        Ok(helm)
    }

    /// Its home (a place for packaged charts and the like).
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// A helm command with this instance's environment.
    pub fn command(&self) -> Result<Command> {
        let mut cmd = Command::new(binaries::helm()?);
        let home = self.home.path();
        cmd.env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env_remove("HELM_NAMESPACE");
        match &self.kubeconfig {
            Some(path) => cmd.env("KUBECONFIG", path),
            None => cmd.env("KUBECONFIG", home.join("no-cluster")),
        };
        Ok(cmd)
    }

    /// Runs helm with `args`: its stdout, or an error with both outputs.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command()?
            .args(args)
            .output()
            .with_context(|| format!("running helm {args:?}"))?;
        if !out.status.success() {
            bail!(
                "helm {args:?} failed ({}):\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `helm template` of the chart with `--set` values `sets`.
    pub fn template(&self, sets: &[&str]) -> Result<String> {
        let chart = chart_dir();
        let mut args = vec![
            "template",
            "bootc-operator",
            chart.to_str().context("chart path")?,
        ];
        for set in sets {
            args.extend(["--set", set]);
        }
        self.run(&args)
    }
}

/// What only a Helm release puts on an object, and `deploy/` cannot
/// (which release, which chart, which version, who manages it; the
/// checksum of the settings a pod template reads): the one list of keys the
/// comparison with `deploy/` leaves out ([`without_helm_only`]), of an
/// object's labels and of its pod template's labels and annotations.
pub const HELM_ONLY: &[&str] = &[
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "checksum/config",
];

/// `object` without the [`HELM_ONLY`] keys (a map they leave empty goes
/// too, as `deploy/` has none there).
pub fn without_helm_only(object: &Value) -> Value {
    let mut object = object.clone();
    let maps = [
        "/metadata/labels",
        "/spec/template/metadata/labels",
        "/spec/template/metadata/annotations",
    ];
    for path in maps {
        let Some(Value::Object(map)) = object.pointer_mut(path) else {
            continue;
        };
        map.retain(|k, _| !HELM_ONLY.contains(&k.as_str()));
        if map.is_empty() {
            let (parent, key) = path.rsplit_once('/').unwrap_or_default();
            if let Some(Value::Object(parent)) = object.pointer_mut(parent) {
                parent.remove(key);
            }
        }
    }
    object
}

/// An object's identity in a manifest: kind, namespace (empty for
/// cluster-scoped objects) and name.
pub type ObjectKey = (String, String, String);

/// The objects of a multi-document YAML manifest, by [`ObjectKey`].
pub fn objects(manifest: &str) -> Result<BTreeMap<ObjectKey, Value>> {
    use serde::Deserialize;
    let mut out = BTreeMap::new();
    for doc in serde_yaml::Deserializer::from_str(manifest) {
        let value = Value::deserialize(doc).context("parsing a manifest's document")?;
        if value.is_null() {
            continue;
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let key = (
            text(&value["kind"]),
            text(&value["metadata"]["namespace"]),
            text(&value["metadata"]["name"]),
        );
        if out.insert(key.clone(), value).is_some() {
            bail!("{key:?} twice in one manifest");
        }
    }
    Ok(out)
}

/// The first place where `a` and `b` differ, as a path and both values, or
/// `None` when they are the same. Numbers compare by value (`1` and `1.0`
/// are one number to the API server), and a string spread over lines
/// compares with each run of white space taken as one space: kustomize
/// re-folds YAML's folded scalars (CEL expressions here), and its output can
/// hold a line break the source does not.
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys().filter(|k| !x.contains_key(*k)))
            .find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, &format!("{path}.{k}")),
                (p, q) => Some(format!("{path}.{k}: {p:?} != {q:?}")),
            }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        (Value::String(x), Value::String(y)) if folded(x) == folded(y) => None,
        _ if a == b => None,
        _ => Some(format!("{path}: {a} != {b}")),
    }
}

fn folded(text: &str) -> String {
    if !text.contains('\n') {
        return text.to_owned();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
