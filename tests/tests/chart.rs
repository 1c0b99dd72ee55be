//! The Helm chart `charts/bootc-operator/` with the real helm: it lints,
//! renders `deploy/` object by object at its default values (with the
//! standard labels), renames the namespaces with one value each (the
//! admission policies then judge the renamed service accounts), refuses
//! what cannot work before anything is created (its schema, a missing
//! allow-list, namespaces that clash), installs with the usual flags
//! (`-n NS --create-namespace`), rolls the daemons when their settings
//! change, upgrades and uninstalls on a real API server, and installs from
//! an OCI registry it was pushed to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use api::test_support::{BootcNodeBuilder, PoolBuilder};
use api::{BootcNode, BootcNodePool, ConditionType, Reason};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tests::helm::{Helm, ObjectKey, chart_dir, first_difference, objects, without_helm_only};
use tests::k8s::refused;
use tests::registry::{TestImage, TestRegistry};
use tests::{ControlPlane, Identity, binaries, repo_root};

/// What the admission test's BootcNodes name (nothing resolves it).
const IMAGE: &str =
    "registry.test/acme/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// Namespaces other than deploy/'s, for the values tests.
const OPERATOR_NS: &str = "ops-bootc";
const DAEMON_NS: &str = "ops-bootc-nodes";

/// The repository the default renders allow (`daemon.allowedRepositories`
/// has no default: it is required).
const ALLOWED: &str = "registry.example.com/acme/os";

/// What the chart needs besides its defaults to render `deploy/`: the
/// operator's namespace named (left empty it is the release's, and
/// `helm template`'s is `default`, refused) and the required allow-list,
/// which [`deploy_allowing`] sets in `deploy/` as its README says.
fn defaults() -> Vec<String> {
    vec![
        "namespaces.operator=bootc-operator".into(),
        format!("daemon.allowedRepositories={{{ALLOWED}}}"),
    ]
}

/// `helm template` of the chart at [`defaults`] and `sets`.
fn render(helm: &Helm, sets: &[&str]) -> anyhow::Result<String> {
    let defaults = defaults();
    let all: Vec<&str> = defaults
        .iter()
        .map(String::as_str)
        .chain(sets.iter().copied())
        .collect();
    helm.template(&all)
}

fn kustomize(dir: &std::path::Path) -> String {
    let out = std::process::Command::new(binaries::kubectl().unwrap())
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `kubectl kustomize` of the repository's `dir`.
fn kustomize_repo(dir: &str) -> String {
    kustomize(&repo_root().join(dir))
}

/// `deploy/` with [`ALLOWED`] merged into its ConfigMap, by the overlay
/// deploy/kustomization.yaml documents.
fn deploy_allowing() -> String {
    // In target/ (as tests/tests/deploy.rs's): kustomize takes a base by a
    // relative path only.
    std::fs::create_dir_all(repo_root().join("target")).unwrap();
    let overlay = tempfile::Builder::new()
        .prefix("overlay-")
        .tempdir_in(repo_root().join("target"))
        .unwrap();
    let kustomization = format!(
        "resources: [../../deploy]\nconfigMapGenerator:\n  - name: bootc-daemon\n    namespace: bootc-daemon\n    behavior: merge\n    literals: [allowed-repositories={ALLOWED}]\n"
    );
    std::fs::write(overlay.path().join("kustomization.yaml"), kustomization).unwrap();
    kustomize(overlay.path())
}

/// Both manifests hold the same objects, each the same field by field but
/// for what only a Helm release has ([`tests::helm::HELM_ONLY`]).
fn assert_same_objects(chart: &str, deploy: &str) {
    let chart = objects(chart).unwrap();
    let deploy = objects(deploy).unwrap();
    let keys = |m: &std::collections::BTreeMap<ObjectKey, Value>| {
        m.keys().cloned().collect::<BTreeSet<_>>()
    };
    assert_eq!(
        keys(&chart),
        keys(&deploy),
        "the chart's objects and deploy/'s"
    );
    for (key, object) in &chart {
        if let Some(diff) = first_difference(&without_helm_only(object), &deploy[key], "") {
            panic!("{key:?}: the chart renders {diff} (chart != deploy/)");
        }
    }
}

#[test]
fn the_chart_lints() {
    let helm = Helm::new().unwrap();
    let allowed = format!("daemon.allowedRepositories={{{ALLOWED}}}");
    let out = helm
        .run(&[
            "lint",
            "--strict",
            chart_dir().to_str().unwrap(),
            "--namespace",
            "bootc-operator",
            "--set",
            &allowed,
        ])
        .unwrap();
    assert!(
        out.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{out}"
    );
}

/// One source of truth: at its default values (and [`defaults`]) the
/// chart renders exactly the objects of `kubectl kustomize deploy/` (with
/// the same allow-list), and with monitoring on, those of
/// `deploy/monitoring/` besides; with the Node lifecycle conditions on,
/// those of `deploy/optional/node-lifecycle-conditions/`; but for what
/// only a Helm release has ([`tests::helm::HELM_ONLY`]).
#[test]
fn default_values_render_deploy_object_by_object() {
    let helm = Helm::new().unwrap();
    assert_same_objects(&render(&helm, &[]).unwrap(), &deploy_allowing());
    let monitoring = added_by(&helm, "monitoring.enabled=true");
    assert_same_objects(&monitoring, &kustomize_repo("deploy/monitoring"));
    assert_same_objects(
        &added_by(&helm, "controller.nodeLifecycleConditions=true"),
        &kustomize_repo("deploy/optional/node-lifecycle-conditions"),
    );
}

/// Every object carries the standard labels, the release's own among them;
/// the workloads' selectors only their name, which never changes.
#[test]
fn every_object_carries_the_standard_labels() {
    let helm = Helm::new().unwrap();
    let rendered = render(
        &helm,
        &[
            "monitoring.enabled=true",
            "controller.nodeLifecycleConditions=true",
        ],
    )
    .unwrap();
    let version = chart_version();
    for (key, object) in objects(&rendered).unwrap() {
        let labels = &object["metadata"]["labels"];
        assert_eq!(
            labels["app.kubernetes.io/instance"], "bootc-operator",
            "{key:?}"
        );
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{key:?}");
        assert_eq!(
            labels["app.kubernetes.io/part-of"], "bootc-operator",
            "{key:?}"
        );
        assert_eq!(
            labels["app.kubernetes.io/version"],
            version.as_str(),
            "{key:?}"
        );
        assert_eq!(
            labels["helm.sh/chart"],
            format!("bootc-operator-{version}").as_str(),
            "{key:?}"
        );
        assert!(labels[api::labels::APP_NAME_LABEL].is_string(), "{key:?}");
        let selector = &object["spec"]["selector"];
        if key.0 == "Deployment" || key.0 == "DaemonSet" {
            let name = &labels[api::labels::APP_NAME_LABEL];
            assert_eq!(
                selector["matchLabels"],
                json!({api::labels::APP_NAME_LABEL: name})
            );
            assert_eq!(
                object["spec"]["template"]["metadata"]["labels"], *labels,
                "{key:?}"
            );
        }
    }
}

/// The objects a render with `set` has beyond the default render's, as a
/// manifest.
fn added_by(helm: &Helm, set: &str) -> String {
    let base = objects(&render(helm, &[]).unwrap()).unwrap();
    objects(&render(helm, &[set]).unwrap())
        .unwrap()
        .into_iter()
        .filter(|(k, _)| !base.contains_key(k))
        .map(|(_, v)| format!("---\n{}", serde_yaml::to_string(&v).unwrap()))
        .collect()
}

/// The optional Node lifecycle conditions come with their flag, and one name
/// for both namespaces is refused before anything is rendered (so before
/// `helm install` creates anything), naming both values.
#[test]
fn optional_pieces_come_whole_and_one_namespace_for_both_is_refused() {
    let helm = Helm::new().unwrap();
    let rendered = render(&helm, &["controller.nodeLifecycleConditions=true"]).unwrap();
    let all = objects(&rendered).unwrap();
    let key = |kind: &str, ns: &str, name: &str| (kind.to_owned(), ns.to_owned(), name.to_owned());
    let args = &all[&key("Deployment", "bootc-operator", "bootc-controller")]["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--node-lifecycle-conditions"),
        "{args}"
    );
    let refused = render(&helm, &["namespaces.daemon=bootc-operator"])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("namespaces.operator and namespaces.daemon are both \"bootc-operator\""),
        "{refused}"
    );
}

/// `controller.registryCA.configMap` names the ConfigMap of CAs mounted at
/// the controller's `--registry-ca-dir` (optional: it may come later, and
/// is read again while the controller runs); empty, neither the flag nor
/// the volume.
#[test]
fn the_registry_ca_value_is_the_configmap_mounted_for_the_controller() {
    let helm = Helm::new().unwrap();
    let controller = |sets: &[&str]| {
        let all = objects(&render(&helm, sets).unwrap()).unwrap();
        let key = (
            "Deployment".to_owned(),
            "bootc-operator".to_owned(),
            "bootc-controller".to_owned(),
        );
        all[&key]["spec"]["template"]["spec"].clone()
    };
    let flag = json!("--registry-ca-dir=/etc/bootc-operator/registry-ca");
    let pod = controller(&["controller.registryCA.configMap=corp-ca"]);
    assert!(
        pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&flag)
    );
    assert_eq!(
        pod["volumes"][0],
        json!({"name": "registry-ca", "configMap": {"name": "corp-ca", "optional": true}})
    );
    let pod = controller(&["controller.registryCA.configMap="]);
    assert!(
        !pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&flag)
    );
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(
        volumes.iter().all(|v| v["name"] != "registry-ca"),
        "{volumes:?}"
    );
}

/// `controller.signaturePolicy` is the text of the ConfigMap
/// bootc-signature-policy (empty by default, as deploy/ ships it: no
/// policy), and `controller.signatureKeys` its key files beside it, mounted
/// where the controller's `--signature-policy` reads them.
#[test]
fn the_signature_policy_value_is_the_controllers_policy_file() {
    let helm = Helm::new().unwrap();
    let text = r#"{"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {"registry.example.com/os": [{"type": "sigstoreSigned", "keyPath": "/etc/bootc-operator/signature-policy/os.pub"}]}}}"#;
    let pem = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n";
    let dir = tempfile::Builder::new()
        .prefix("policy-")
        .tempdir_in(repo_root().join("target"))
        .unwrap();
    let (file, key_file) = (dir.path().join("policy.json"), dir.path().join("os.pub"));
    std::fs::write(&file, text).unwrap();
    std::fs::write(&key_file, pem).unwrap();
    let allowed = format!("daemon.allowedRepositories={{{ALLOWED}}}");
    let set_file = format!(
        "controller.signaturePolicy={},controller.signatureKeys.os\\.pub={}",
        file.display(),
        key_file.display()
    );
    let key = |kind: &str, name: &str| {
        (
            kind.to_owned(),
            "bootc-operator".to_owned(),
            name.to_owned(),
        )
    };
    let flag = json!("--signature-policy=/etc/bootc-operator/signature-policy/policy.json");
    let volume =
        json!({"name": "signature-policy", "configMap": {"name": "bootc-signature-policy"}});
    let base = ["-n", "bootc-operator", "--set", allowed.as_str()];
    for (extra, want) in [
        (vec![], json!({"policy.json": ""})),
        (
            vec!["--set-file", set_file.as_str()],
            json!({"policy.json": text, "os.pub": pem}),
        ),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let all = objects(&template_with(&helm, &args).unwrap()).unwrap();
        let data = &all[&key("ConfigMap", "bootc-signature-policy")]["data"];
        assert_eq!(data, &want);
        let pod = &all[&key("Deployment", "bootc-controller")]["spec"]["template"]["spec"];
        assert!(
            pod["containers"][0]["args"]
                .as_array()
                .unwrap()
                .contains(&flag)
        );
        assert!(pod["volumes"].as_array().unwrap().contains(&volume));
    }
}

/// `controller.registriesConf` is the text of the ConfigMap
/// bootc-registries (empty by default, as deploy/ ships it), mounted where
/// the controller's `--registries-conf` reads it.
#[test]
fn the_registries_conf_value_is_the_controllers_mirrors_file() {
    let helm = Helm::new().unwrap();
    let text = "[[registry]]\nlocation = \"registry.example.com\"\n\n[[registry.mirror]]\nlocation = \"mirror.example.internal\"\n";
    let dir = tempfile::Builder::new()
        .prefix("registries-")
        .tempdir_in(repo_root().join("target"))
        .unwrap();
    let file = dir.path().join("registries.conf");
    std::fs::write(&file, text).unwrap();
    let allowed = format!("daemon.allowedRepositories={{{ALLOWED}}}");
    let set_file = format!("controller.registriesConf={}", file.display());
    let key = |kind: &str, name: &str| {
        (
            kind.to_owned(),
            "bootc-operator".to_owned(),
            name.to_owned(),
        )
    };
    let flag = json!("--registries-conf=/etc/bootc-operator/registries/registries.conf");
    let volume = json!({"name": "registries", "configMap": {"name": "bootc-registries"}});
    let base = ["-n", "bootc-operator", "--set", allowed.as_str()];
    for (extra, want) in [(vec![], ""), (vec!["--set-file", set_file.as_str()], text)] {
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let all = objects(&template_with(&helm, &args).unwrap()).unwrap();
        let data = &all[&key("ConfigMap", "bootc-registries")]["data"];
        assert_eq!(data["registries.conf"], json!(want));
        let pod = &all[&key("Deployment", "bootc-controller")]["spec"]["template"]["spec"];
        assert!(
            pod["containers"][0]["args"]
                .as_array()
                .unwrap()
                .contains(&flag)
        );
        assert!(pod["volumes"].as_array().unwrap().contains(&volume));
    }
}

/// Every namespaced object of a render with renamed namespaces.
fn namespaces_of(manifest: &str) -> BTreeSet<String> {
    objects(manifest)
        .unwrap()
        .keys()
        .map(|(_, ns, _)| ns.clone())
        .filter(|ns| !ns.is_empty())
        .collect()
}

/// The values other than the defaults land where deploy/'s comments say
/// they matter, and renaming a namespace is one value: nothing names the
/// old one afterwards (but the Events' Role in `default`).
#[test]
fn values_rename_namespaces_and_set_the_image_and_the_daemon() {
    let helm = Helm::new().unwrap();
    let digest = format!("sha256:{}", "c".repeat(64));
    let rendered = render(
        &helm,
        &[
            &format!("namespaces.operator={OPERATOR_NS}"),
            &format!("namespaces.daemon={DAEMON_NS}"),
            "image.repository=registry.test/bootc-operator",
            &format!("image.digest={digest}"),
            "daemon.allowedRepositories={registry.test/os,registry.test/team/}",
            "daemon.enforceContainerSigpolicy=true",
            "daemon.nodeSelector.role=os",
            "daemon.tolerations[0].key=dedicated",
            "daemon.tolerations[0].operator=Exists",
            "daemon.resources.limits.memory=48Mi",
            "monitoring.enabled=true",
            "controller.alertGateEndpoints.main=http://prometheus-k8s.monitoring.svc:9090",
            "controller.alertmanagerEndpoints.main=http://alertmanager-main.monitoring.svc:9093",
            "controller.nodeLifecycleConditions=true",
        ],
    )
    .unwrap();
    assert_eq!(
        namespaces_of(&rendered),
        BTreeSet::from([OPERATOR_NS.into(), DAEMON_NS.into(), "default".into()])
    );
    for old in [
        "bootc-operator:",
        "bootc-daemon:bootc-daemon",
        "[bootc-operator]",
    ] {
        assert!(!rendered.contains(old), "{old} left in\n{rendered}");
    }
    let all = objects(&rendered).unwrap();
    let get = |kind: &str, ns: &str, name: &str| {
        all[&(kind.to_owned(), ns.to_owned(), name.to_owned())].clone()
    };
    let ds = get("DaemonSet", DAEMON_NS, "bootc-daemon");
    let pod = &ds["spec"]["template"]["spec"];
    let want_image = format!("registry.test/bootc-operator@{digest}");
    assert_eq!(pod["containers"][0]["image"], want_image.as_str());
    assert_eq!(
        pod["nodeSelector"],
        json!({api::labels::MANAGED_LABEL: "", "role": "os"})
    );
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "dedicated", "operator": "Exists"}])
    );
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["memory"],
        "48Mi"
    );
    let env = &pod["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "BOOTC_NAMESPACE", "value": OPERATOR_NS})),
        "{env}"
    );
    let config = get("ConfigMap", DAEMON_NS, "bootc-daemon");
    assert_eq!(
        config["data"],
        json!({"allowed-repositories": "registry.test/os,registry.test/team/",
               "enforce-container-sigpolicy": "true"})
    );
    let controller = get("Deployment", OPERATOR_NS, "bootc-controller");
    assert_eq!(
        controller["spec"]["template"]["spec"]["containers"][0]["image"],
        want_image.as_str()
    );
    let args = &controller["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array().unwrap().contains(&json!(
            "--alert-gate-endpoint=main=http://prometheus-k8s.monitoring.svc:9090"
        )),
        "{args}"
    );
    assert!(
        args.as_array().unwrap().contains(&json!(
            "--alertmanager-endpoint=main=http://alertmanager-main.monitoring.svc:9093"
        )),
        "{args}"
    );
    let binding = get("RoleBinding", OPERATOR_NS, "bootc-daemon-pull-secrets");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "bootc-daemon", "namespace": DAEMON_NS}])
    );
}

fn kubectl_ok(cp: &ControlPlane, args: &[&str]) -> String {
    let out = cp.kubectl().args(args).output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_crds(cp: &ControlPlane) {
    kubectl_ok(
        cp,
        &[
            "wait",
            "--for=condition=Established",
            "crd/bootcnodepools.node.bootc.dev",
            "crd/bootcnodes.node.bootc.dev",
            "--timeout=60s",
        ],
    );
}

/// The enforced Pod Security level of namespace `ns` ("" without one).
fn pod_security(cp: &ControlPlane, ns: &str) -> String {
    kubectl_ok(
        cp,
        &[
            "get",
            "namespace",
            ns,
            "-o",
            r"jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce}",
        ],
    )
}

/// `helm template` of the chart with `args` (flags and `--set`s as given).
fn template_with(helm: &Helm, args: &[&str]) -> anyhow::Result<String> {
    let chart = chart_dir();
    let mut all = vec!["template", "bootc-operator", chart.to_str().unwrap()];
    all.extend(args);
    helm.run(&all)
}

/// What cannot work is refused by `helm template`, so before `helm install`
/// creates anything, naming the value: the schema's types and the required
/// allow-list (by the template too when the schema is skipped), and
/// namespaces that clash with the release's.
#[test]
fn bad_values_are_refused_naming_them() {
    let helm = Helm::new().unwrap();
    let allowed = format!("daemon.allowedRepositories={{{ALLOWED}}}");
    let ns = ["-n", "bootc-operator"];
    #[rustfmt::skip]
    let cases: &[(&str, Vec<&str>, &str)] = &[
        ("no allow-list", vec![], "at '/daemon/allowedRepositories': minItems"),
        ("no allow-list, no schema", vec!["--skip-schema-validation"],
         "daemon.allowedRepositories is required"),
        ("a repository with a space",
         vec!["--set", "daemon.allowedRepositories[0]=registry.example.com/a b"],
         "at '/daemon/allowedRepositories/0'"),
        ("a log format", vec!["--set", &allowed, "--set", "controller.logFormat=xml"],
         "at '/controller/logFormat'"),
        ("no replica", vec!["--set", &allowed, "--set", "controller.replicas=0"],
         "at '/controller/replicas'"),
        ("a misspelt value", vec!["--set", &allowed, "--set", "deamon.logLevel=debug"],
         "deamon"),
        ("a digest", vec!["--set", &allowed, "--set", "image.digest=latest"],
         "at '/image/digest'"),
    ];
    for (what, args, want) in cases {
        let args: Vec<&str> = ns.iter().copied().chain(args.iter().copied()).collect();
        let refused = template_with(&helm, &args).unwrap_err().to_string();
        assert!(refused.contains(want), "{what}: {refused}");
    }
    // The operator's namespace is the release's unless named: never
    // `default`; the release is never in the daemons' namespace.
    let refused = template_with(&helm, &["--set", &allowed])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("the operator's namespace would be \"default\""),
        "{refused}"
    );
    let refused = template_with(
        &helm,
        &[
            "-n",
            "bootc-daemon",
            "--set",
            &allowed,
            "--set",
            "namespaces.operator=ops",
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("the release's namespace is the daemons'"),
        "{refused}"
    );
}

/// Everything a release of the chart could have made, by name.
fn everything(cp: &ControlPlane) -> String {
    kubectl_ok(
        cp,
        &[
            "get",
            "namespaces,crd,clusterroles,clusterrolebindings,validatingadmissionpolicies,\
             validatingadmissionpolicybindings,serviceaccounts,roles,rolebindings,configmaps,\
             secrets,deployments,daemonsets,services",
            "-A",
            "-o",
            "name",
        ],
    )
}

/// `helm install` without the required allow-list, with the usual flags
/// (`--create-namespace` too) is refused, naming the value, and leaves the
/// cluster as it found it: not even the namespace.
#[tokio::test]
async fn a_missing_allow_list_is_refused_before_anything_is_created() {
    let cp = ControlPlane::start().await.unwrap();
    let helm = Helm::on(&cp).unwrap();
    let before = everything(&cp);
    let refused = helm
        .run(&[
            "install",
            "bootc-operator",
            chart_dir().to_str().unwrap(),
            "-n",
            "bootc-operator",
            "--create-namespace",
        ])
        .unwrap_err()
        .to_string();
    assert!(refused.contains("/daemon/allowedRepositories"), "{refused}");
    assert_eq!(everything(&cp), before, "the refused install left objects");
    assert_eq!(helm.run(&["list", "-A", "--all", "-q"]).unwrap().trim(), "");
}

/// The Helm flags operators use, `helm install -n bootc-operator
/// --create-namespace`: Helm makes the namespace and the chart does not
/// create it again (which failed the install half-way); the daemons'
/// namespace is the chart's, privileged; the release is listed in the
/// operator's namespace; NOTES says how to label it, and no more once it
/// is labelled.
#[tokio::test]
async fn the_usual_helm_flags_install_into_the_namespace_helm_creates() {
    let cp = ControlPlane::start().await.unwrap();
    let helm = Helm::on(&cp).unwrap();
    let chart = chart_dir();
    let allowed = format!("daemon.allowedRepositories={{{ALLOWED}}}");
    let args = |verb| {
        vec![
            verb,
            "bootc-operator",
            chart.to_str().unwrap(),
            "-n",
            "bootc-operator",
            "--set",
            allowed.as_str(),
        ]
    };
    let mut install = args("install");
    install.push("--create-namespace");
    let notes = helm.run(&install).unwrap();
    assert!(
        notes.contains("kubectl label --overwrite namespace bootc-operator"),
        "{notes}"
    );
    kubectl_ok(
        &cp,
        &["get", "deployment/bootc-controller", "-n", "bootc-operator"],
    );
    kubectl_ok(
        &cp,
        &["get", "daemonset/bootc-daemon", "-n", "bootc-daemon"],
    );
    assert_eq!(pod_security(&cp, "bootc-daemon"), "privileged");
    let listed = helm.run(&["list", "-n", "bootc-operator", "-q"]).unwrap();
    assert_eq!(listed.trim(), "bootc-operator");

    let level = "restricted";
    kubectl_ok(
        &cp,
        &[
            "label",
            "--overwrite",
            "namespace",
            "bootc-operator",
            &format!("pod-security.kubernetes.io/enforce={level}"),
            &format!("pod-security.kubernetes.io/audit={level}"),
            &format!("pod-security.kubernetes.io/warn={level}"),
        ],
    );
    let notes = helm.run(&args("upgrade")).unwrap();
    assert!(notes.contains("Next:"), "{notes}");
    assert!(!notes.contains("kubectl label"), "{notes}");
}

/// The pod template of `kind/name` in `ns`, and its object's generation.
fn pod_template(cp: &ControlPlane, ns: &str, kind_name: &str) -> (Value, i64) {
    let text = kubectl_ok(cp, &["get", kind_name, "-n", ns, "-o", "json"]);
    let object: Value = serde_json::from_str(&text).unwrap();
    let generation = object["metadata"]["generation"].as_i64().unwrap();
    (object["spec"]["template"].clone(), generation)
}

/// `helm upgrade` with other daemon settings (they reach the daemons
/// through a ConfigMap they read at start) changes the DaemonSet's pod
/// template, which is what rolls the daemons; the controller's settings
/// are its pod template's own, and roll it likewise. A setting of one
/// leaves the other's template alone.
#[tokio::test]
async fn an_upgrade_that_changes_the_daemons_settings_rolls_them() {
    let cp = ControlPlane::start().await.unwrap();
    let helm = Helm::on(&cp).unwrap();
    let chart = chart_dir();
    let release = |verb: &'static str, sets: &[&str]| {
        let mut args = vec![
            verb,
            "bootc-operator",
            chart.to_str().unwrap(),
            "-n",
            "bootc-operator",
            "--create-namespace",
        ];
        for set in sets {
            args.extend(["--set", set]);
        }
        helm.run(&args).unwrap();
    };
    let daemon = |cp: &ControlPlane| pod_template(cp, "bootc-daemon", "daemonset/bootc-daemon");
    let controller =
        |cp: &ControlPlane| pod_template(cp, "bootc-operator", "deployment/bootc-controller");
    let allowed = format!("daemon.allowedRepositories={{{ALLOWED}}}");
    release("install", &[&allowed]);
    let (before, generation) = daemon(&cp);
    let (controller_before, _) = controller(&cp);

    let more = format!("daemon.allowedRepositories={{{ALLOWED},registry.example.com/acme/other}}");
    release("upgrade", &[&more]);
    let (after, next) = daemon(&cp);
    let checksum = |t: &Value| t["metadata"]["annotations"]["checksum/config"].clone();
    assert_ne!(checksum(&after), checksum(&before), "{after}");
    assert!(next > generation, "the DaemonSet's template did not change");
    assert_eq!(controller(&cp).0, controller_before);

    release("upgrade", &[&more, "daemon.enforceContainerSigpolicy=true"]);
    assert_ne!(checksum(&daemon(&cp).0), checksum(&after));

    let (daemon_before, _) = daemon(&cp);
    release(
        "upgrade",
        &[
            &more,
            "daemon.enforceContainerSigpolicy=true",
            "controller.logFormat=json",
        ],
    );
    assert_ne!(controller(&cp).0, controller_before);
    assert_eq!(daemon(&cp).0, daemon_before);
}

fn bootc_node(name: &str) -> BootcNode {
    BootcNodeBuilder::new(name).desired(IMAGE).build()
}

/// The chart installed with both namespaces renamed: each admission policy
/// refuses and allows by the renamed service accounts, with their own
/// tokens (a TokenRequest of each; the daemon's bound to a Pod on its
/// node, as the kubelet's are).
#[tokio::test]
async fn the_admission_policies_follow_renamed_namespaces() {
    let cp = ControlPlane::start().await.unwrap();
    let helm = Helm::on(&cp).unwrap();
    // No -n: the release's namespace is `default`, and the chart creates
    // the operator's, labelled.
    helm.run(&[
        "install",
        "bootc",
        chart_dir().to_str().unwrap(),
        "--set",
        &format!("namespaces.operator={OPERATOR_NS}"),
        "--set",
        &format!("namespaces.daemon={DAEMON_NS}"),
        "--set",
        &format!("daemon.allowedRepositories={{{ALLOWED}}}"),
    ])
    .unwrap();
    wait_crds(&cp);
    assert_eq!(pod_security(&cp, OPERATOR_NS), "restricted");
    assert_eq!(pod_security(&cp, DAEMON_NS), "privileged");
    let admin = cp.admin().await.unwrap();
    let token = kubectl_ok(
        &cp,
        &["create", "token", "bootc-controller", "-n", OPERATOR_NS],
    );
    let controller = cp.client_with_token(token.trim()).await.unwrap();
    let daemon = cp
        .client_with_token(&cp.node_bound_token_in(DAEMON_NS, "node-a").unwrap())
        .await
        .unwrap();

    // bootc-node-spec-by-controller-only: an admin may not create a
    // BootcNode; the renamed controller may.
    let as_admin: Api<BootcNode> = Api::all(admin.clone());
    // A new name each attempt: one made before the policy was in force
    // must not take node-a's.
    let message = refused("an admin creating a BootcNode", |n| {
        let as_admin = as_admin.clone();
        async move {
            as_admin
                .create(&PostParams::default(), &bootc_node(&format!("probe-{n}")))
                .await
                .map(|_| ())
        }
    })
    .await;
    assert!(
        message.contains("created by bootc-controller only"),
        "{message}"
    );
    let as_controller: Api<BootcNode> = Api::all(controller.clone());
    for name in ["node-a", "node-b"] {
        as_controller
            .create(&PostParams::default(), &bootc_node(name))
            .await
            .unwrap();
    }

    // bootc-daemon-own-node-only: node-a's daemon may not write node-b's
    // status, and may write its own.
    let as_daemon: Api<BootcNode> = Api::all(daemon);
    let pp = PatchParams::default();
    // A new message each time (tests/tests/admission.rs's status writes).
    let status = |n: u32| {
        Patch::Merge(json!({"status": {"conditions": [{
            "type": ConditionType::Idle.as_str(), "status": "False",
            "reason": Reason::Staging.as_str(), "message": format!("attempt {n}"),
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
    };
    let message = refused("node-a's daemon writing node-b's status", |n| {
        let (as_daemon, pp) = (as_daemon.clone(), pp.clone());
        async move {
            as_daemon
                .patch_status("node-b", &pp, &status(n))
                .await
                .map(|_| ())
        }
    })
    .await;
    assert!(message.contains("named after its own node"), "{message}");
    as_daemon
        .patch_status("node-a", &pp, &status(1))
        .await
        .unwrap();

    // bootc-controller-node-writes: the renamed controller may cordon, and
    // may not set a label of its choosing.
    let nodes: Api<Node> = Api::all(admin);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-a"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let as_controller: Api<Node> = Api::all(controller);
    let message = refused("the controller labelling a Node", |n| {
        let (nodes, pp) = (as_controller.clone(), pp.clone());
        async move {
            nodes
                .patch(
                    "node-a",
                    &pp,
                    &Patch::Merge(json!({"metadata": {"labels": {"team": format!("t{n}")}}})),
                )
                .await
                .map(|_| ())
        }
    })
    .await;
    assert!(message.contains("only bootc.dev/ labels"), "{message}");
    as_controller
        .patch(
            "node-a",
            &pp,
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
}

/// The real controller binary, as the chart's ServiceAccount (the static
/// token of the test control plane's `bootc-operator:bootc-controller`),
/// logging to `log`; it dies with the test.
fn start_controller(
    cp: &ControlPlane,
    registry: &TestRegistry,
    log: &std::path::Path,
) -> std::process::Child {
    let file = std::fs::File::create(log).unwrap();
    std::process::Command::new("setpriv")
        .args(["--pdeathsig", "KILL", "--"])
        .arg(tests::fake_host::bin("bootc-controller"))
        .args(["--health-addr", "", "--metrics-addr", ""])
        .arg("--registry-ca-file")
        .arg(registry.ca_path())
        .env("KUBECONFIG", cp.kubeconfig(Identity::Controller))
        .env("RUST_LOG", "info")
        .env_remove("POD_NAME")
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap()
}

/// Polls `check` (every 200 ms, at most 60 s) until it holds; the
/// controller's `log` tells why not.
async fn eventually<F, Fut>(what: &str, log: &std::path::Path, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what}: not within 60 s\n{}",
            tests::control_plane::tail(log)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn marked(node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    labels
        .keys()
        .chain(annotations.keys())
        .any(|k| k.starts_with("bootc.dev/"))
        || node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// A pool of the nodes labelled `pool=workers` following `image` (a
/// digest in the test registry) with the pull secret `pull`.
fn pool(image: &str) -> BootcNodePool {
    PoolBuilder::new("workers")
        .selects("pool", "workers")
        .image(image)
        .pull_secret("bootc-operator", "pull")
        .build()
}

/// An image in `registry` and the Secret `pull` for it, opted in to the
/// pool `workers`: the controller checks a pool's digest at its registry
/// before any node hears of it.
async fn image_and_pull_secret(registry: &TestRegistry, admin: &kube::Client) -> String {
    let image = TestImage {
        architecture: "amd64",
        version: "1.0",
        marker: "chart",
    };
    let digest = registry.push_image("acme/os", "v1", &image).await.unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "pull", "annotations": {api::labels::POOLS_ANNOTATION: "workers"}},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": ByteString(registry.good_docker_config().into_bytes())},
    }))
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), "bootc-operator")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    format!("{}/acme/os@{digest}", registry.host())
}

/// `helm install`, then `helm upgrade` with other values: the pool and its
/// BootcNode are the same objects afterwards; then the README's uninstall
/// order (the pools first, their finalizers run by the controller, then
/// `helm uninstall`) leaves no node cordoned or labelled, and nothing of
/// the release.
#[tokio::test]
async fn install_upgrade_and_uninstall_leave_no_node_marked() {
    let cp = ControlPlane::start().await.unwrap();
    let helm = Helm::on(&cp).unwrap();
    let chart = chart_dir();
    helm.run(&[
        "install",
        "bootc",
        chart.to_str().unwrap(),
        "-n",
        "bootc-operator",
        "--create-namespace",
        "--set",
        &format!("daemon.allowedRepositories={{{ALLOWED}}}"),
    ])
    .unwrap();
    wait_crds(&cp);
    let admin = cp.admin().await.unwrap();
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-1",
        "labels": {"pool": "workers", api::labels::ARCH_LABEL: "amd64"}}}))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    tests::daemon_player::set_ready(&admin, "node-1", true)
        .await
        .unwrap();
    let registry = TestRegistry::start("chart-user", "chart-pass")
        .await
        .unwrap();
    let image = image_and_pull_secret(&registry, &admin).await;
    let log = cp.dir().join("controller.log");
    let mut controller = start_controller(&cp, &registry, &log);
    let pools: Api<BootcNodePool> = Api::all(admin.clone());
    let bns: Api<BootcNode> = Api::all(admin.clone());
    let created = pools
        .create(&PostParams::default(), &pool(&image))
        .await
        .unwrap();
    eventually("node-1 managed and its BootcNode made", &log, || async {
        let labelled = nodes.get("node-1").await.is_ok_and(|n| marked(&n));
        labelled && bns.get_opt("node-1").await.ok().flatten().is_some()
    })
    .await;
    let bn_uid = bns.get("node-1").await.unwrap().metadata.uid;

    helm.run(&[
        "upgrade",
        "bootc",
        chart.to_str().unwrap(),
        "-n",
        "bootc-operator",
        "--set",
        "controller.logLevel=debug",
        "--set",
        &format!("daemon.allowedRepositories={{{}/acme/os}}", registry.host()),
    ])
    .unwrap();
    let kept = pools.get("workers").await.unwrap();
    assert_eq!(
        kept.metadata.uid, created.metadata.uid,
        "the pool was recreated"
    );
    assert_eq!(bns.get("node-1").await.unwrap().metadata.uid, bn_uid);
    let data = kubectl_ok(
        &cp,
        &[
            "get",
            "configmap/bootc-daemon",
            "-n",
            "bootc-daemon",
            "-o",
            "jsonpath={.data}",
        ],
    );
    assert!(
        data.contains(&format!("{}/acme/os", registry.host())),
        "{data}"
    );

    kubectl_ok(&cp, &["delete", "bnp", "--all", "--wait=false"]);
    let gone = cp
        .kubectl()
        .args(["wait", "--for=delete", "bnp", "--all", "--timeout=60s"])
        .output()
        .unwrap();
    assert!(
        gone.status.success(),
        "the pools' finalizers did not finish: {gone:?}\n{}",
        tests::control_plane::tail(&log)
    );
    // No --wait: without kube-controller-manager here, the namespaces stay
    // Terminating.
    helm.run(&["uninstall", "bootc", "-n", "bootc-operator"])
        .unwrap();
    controller.kill().unwrap();
    controller.wait().unwrap();
    let node = nodes.get("node-1").await.unwrap();
    assert!(!marked(&node), "node-1 left marked: {:?}", node.metadata);
    assert_eq!(
        helm.run(&["list", "--all", "--short", "-A"])
            .unwrap()
            .trim(),
        ""
    );
    let crds = kubectl_ok(&cp, &["get", "crd", "-o", "name"]);
    assert!(!crds.contains("bootc"), "{crds}");
}

/// The packaged chart pushed to a registry as an OCI artifact (`helm
/// push`, as a user publishes it) and installed from there by its version.
#[tokio::test]
async fn the_chart_pushed_to_a_registry_installs_from_oci() {
    let registry = TestRegistry::start("chart-user", "chart-pass")
        .await
        .unwrap();
    let cp = ControlPlane::start().await.unwrap();
    let helm = Helm::on(&cp).unwrap();
    let out_dir = helm.home().join("packages");
    let ca = registry.ca_path();
    let ca = ca.to_str().unwrap();
    let packaged = helm
        .run(&[
            "package",
            chart_dir().to_str().unwrap(),
            "--destination",
            out_dir.to_str().unwrap(),
        ])
        .unwrap();
    let version = chart_version();
    let tgz = out_dir.join(format!("bootc-operator-{version}.tgz"));
    assert!(tgz.exists(), "{packaged}");
    let (user, password) = registry.login();
    helm.run(&[
        "registry",
        "login",
        &registry.host(),
        "--username",
        user,
        "--password",
        password,
        "--ca-file",
        ca,
    ])
    .unwrap();
    let oci = format!("oci://{}/charts", registry.host());
    helm.run(&["push", tgz.to_str().unwrap(), &oci, "--ca-file", ca])
        .unwrap();
    helm.run(&[
        "install",
        "bootc",
        &format!("{oci}/bootc-operator"),
        "--version",
        &version,
        "--ca-file",
        ca,
        "-n",
        "bootc-operator",
        "--create-namespace",
        "--set",
        &format!("daemon.allowedRepositories={{{ALLOWED}}}"),
    ])
    .unwrap();
    let listed = helm
        .run(&["list", "-o", "json", "-n", "bootc-operator"])
        .unwrap();
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["status"], "deployed", "{listed}");
    assert_eq!(
        listed[0]["chart"],
        format!("bootc-operator-{version}").as_str()
    );
    wait_crds(&cp);
    kubectl_ok(
        &cp,
        &["get", "daemonset/bootc-daemon", "-n", "bootc-daemon"],
    );
}

/// The chart's version (Chart.yaml).
fn chart_version() -> String {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap();
    let chart: Value = serde_yaml::from_str(&text).unwrap();
    chart["version"].as_str().unwrap().to_owned()
}
