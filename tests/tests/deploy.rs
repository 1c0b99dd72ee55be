//! `kubectl apply -k deploy/` against a real API server, and the RBAC it
//! grants each component, checked with `kubectl auth can-i`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use api::BootcNodePool;
use api::test_support::PoolBuilder;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use tests::control_plane::{CONTROLLER_USER, DAEMON_NAMESPACE, DAEMON_USER};
use tests::{ControlPlane, Identity, repo_root};

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn can_i(
    cp: &ControlPlane,
    user: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> bool {
    let mut cmd = cp.kubectl();
    cmd.args(["auth", "can-i", verb, "--as", user]);
    // `resource#name`: that one object.
    if let Some((resource, name)) = resource.split_once('#') {
        cmd.arg(format!("{resource}/{name}"));
    } else {
        match resource.split_once('/') {
            Some((resource, sub)) => cmd.args([resource, "--subresource", sub]),
            None => cmd.arg(resource),
        };
    }
    match namespace {
        Some(ns) => cmd.args(["-n", ns]),
        None => cmd.arg("--all-namespaces"),
    };
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// The daemon takes its allow-list from the ConfigMap bootc-daemon, which
/// deploy/ ships with an empty placeholder (the daemon refuses to start on
/// it, `daemon/tests/cli.rs`), and which an overlay sets with a
/// configMapGenerator merge, no JSON patch.
fn the_allowed_repositories_are_a_required_setting(cp: &ControlPlane, env: &[serde_json::Value]) {
    use daemon::agent::repositories::{CONFIG_KEY, ENV};
    assert!(
        env.iter().any(|e| e["name"] == ENV
            && e["valueFrom"]["configMapKeyRef"]["name"] == "bootc-daemon"
            && e["valueFrom"]["configMapKeyRef"]["key"] == CONFIG_KEY),
        "{env:?}"
    );
    let placeholder = ok(cp.kubectl().args([
        "get",
        "configmap/bootc-daemon",
        "-n",
        DAEMON_NAMESPACE,
        "-o",
        &format!("jsonpath={{.data.{CONFIG_KEY}}}"),
    ]));
    assert_eq!(placeholder, "", "deploy/ must not choose the repositories");
    // Kustomize takes a base by relative path only: the overlay lives in
    // target/, two levels below the repository.
    std::fs::create_dir_all(repo_root().join("target")).unwrap();
    let overlay = tempfile::Builder::new()
        .prefix("overlay-")
        .tempdir_in(repo_root().join("target"))
        .unwrap();
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "resources:\n  - ../../deploy\nconfigMapGenerator:\n  - name: bootc-daemon\n    namespace: {DAEMON_NAMESPACE}\n    behavior: merge\n    literals:\n      - {CONFIG_KEY}=registry.example.com/acme/os\n"
        ),
    )
    .unwrap();
    let built = ok(cp.kubectl().arg("kustomize").arg(overlay.path()));
    assert!(
        built.contains(&format!("{CONFIG_KEY}: registry.example.com/acme/os"))
            && built.contains("name: bootc-daemon\n  namespace: bootc-daemon"),
        "{built}"
    );
}

/// `kubectl apply -k deploy/`, and the CRDs established (a pool can be
/// created), as the README tells users.
fn install(cp: &ControlPlane) {
    ok(cp
        .kubectl()
        .arg("apply")
        .arg("-k")
        .arg(repo_root().join("deploy")));
    ok(cp.kubectl().args([
        "wait",
        "--for=condition=Established",
        "crd/bootcnodepools.node.bootc.dev",
        "crd/bootcnodes.node.bootc.dev",
        "--timeout=60s",
    ]));
}

#[tokio::test]
async fn kubectl_apply_k_installs_everything_and_rbac_is_minimal() {
    let cp = ControlPlane::start().await.unwrap();
    let deploy = repo_root().join("deploy");
    install(&cp);

    for (namespace, names) in [
        (
            OPERATOR_NS,
            &[
                "namespace/bootc-operator",
                "serviceaccount/bootc-controller",
                "deployment.apps/bootc-controller",
                "role.rbac.authorization.k8s.io/bootc-controller",
                "role.rbac.authorization.k8s.io/bootc-daemon-pull-secrets",
                "rolebinding.rbac.authorization.k8s.io/bootc-daemon-pull-secrets",
            ][..],
        ),
        (
            DAEMON_NAMESPACE,
            &[
                "namespace/bootc-daemon",
                "serviceaccount/bootc-daemon",
                "daemonset.apps/bootc-daemon",
            ][..],
        ),
    ] {
        let mut get = cp.kubectl();
        get.arg("get")
            .args(names)
            .args(["-n", namespace, "-o", "name"]);
        let listed = ok(&mut get);
        for name in names {
            assert!(
                listed.contains(name),
                "{name} missing after apply -k:\n{listed}"
            );
        }
    }
    // The controller and the pull secrets under `restricted`; the daemon,
    // alone, where privileged pods may run.
    for (namespace, level) in [
        (OPERATOR_NS, "restricted"),
        (DAEMON_NAMESPACE, "privileged"),
    ] {
        let labels = ok(cp.kubectl().args([
            "get",
            "namespace",
            namespace,
            "-o",
            "jsonpath={.metadata.labels}",
        ]));
        assert!(
            labels.contains(&format!(
                r#""pod-security.kubernetes.io/enforce":"{level}""#
            )),
            "{namespace}: {labels}"
        );
    }

    let ds = ok(cp.kubectl().args([
        "get",
        "daemonset/bootc-daemon",
        "-n",
        DAEMON_NAMESPACE,
        "-o",
        "json",
    ]));
    let ds: serde_json::Value = serde_json::from_str(&ds).unwrap();
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"][api::labels::MANAGED_LABEL], "");
    assert_eq!(pod["hostPID"], true);
    assert!(
        pod["volumes"].is_null(),
        "the daemon must mount no host path: {}",
        pod["volumes"]
    );
    assert_eq!(
        pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"], true,
        "the daemon writes nothing to its container's filesystem"
    );
    let env = pod["containers"][0]["env"].as_array().unwrap();
    assert!(
        env.iter().any(|e| e["name"] == "NODE_NAME"
            && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName")
    );
    // The namespace the daemon reads pull secrets from is the operator's,
    // not its own.
    assert!(
        env.iter()
            .any(|e| e["name"] == "BOOTC_NAMESPACE" && e["value"] == OPERATOR_NS),
        "{env:?}"
    );
    the_allowed_repositories_are_a_required_setting(&cp, env);

    let dep = ok(cp.kubectl().args([
        "get",
        "deployment/bootc-controller",
        "-n",
        "bootc-operator",
        "-o",
        "json",
    ]));
    let dep: serde_json::Value = serde_json::from_str(&dep).unwrap();
    let env = dep["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    assert!(env.iter().any(|e| e["name"] == "BOOTC_NAMESPACE"
        && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"));
    let sc = &dep["spec"]["template"]["spec"]["containers"][0]["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    assert_eq!(
        dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
        true
    );
    // The two replicas never share a node, and a replica recreated while
    // its node is cordoned for a reboot may go back to it.
    let pod_spec = &dep["spec"]["template"]["spec"];
    let anti = &pod_spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        [0];
    assert_eq!(anti["topologyKey"], api::labels::HOSTNAME_LABEL);
    assert_eq!(
        anti["labelSelector"]["matchLabels"][api::labels::APP_NAME_LABEL],
        api::labels::CONTROLLER_APP_NAME
    );
    assert_eq!(
        dep["spec"]["template"]["metadata"]["labels"][api::labels::APP_NAME_LABEL],
        api::labels::CONTROLLER_APP_NAME
    );
    assert!(pod_spec["tolerations"].as_array().is_some_and(|t| {
        t.iter()
            .any(|t| t["key"] == "node.kubernetes.io/unschedulable")
    }));

    // The example pool is valid and shows in kubectl get.
    ok(cp
        .kubectl()
        .arg("apply")
        .arg("-f")
        .arg(deploy.join("examples/pool.yaml")));
    let table = ok(cp.kubectl().args(["get", "bnp"]));
    assert!(table.contains("workers"), "{table}");
    for column in [
        "TARGET", "NODES", "UPDATED", "UPDATING", "READY", "STATUS", "AGE",
    ] {
        assert!(table.contains(column), "column {column} missing:\n{table}");
    }
    let table = ok(cp.kubectl().args(["get", "bootc"]));
    assert!(
        table.contains("workers"),
        "category `bootc` lists pools:\n{table}"
    );

    // RBAC: what each component may and may not do.
    let ns = Some(OPERATOR_NS);
    let other = Some("default");
    let cases: &[(&str, &str, &str, Option<&str>, bool)] = &[
        (
            DAEMON_USER,
            "watch",
            "bootcnodes.node.bootc.dev",
            None,
            true,
        ),
        (DAEMON_USER, "get", "bootcnodes.node.bootc.dev", None, true),
        (
            DAEMON_USER,
            "patch",
            "bootcnodes.node.bootc.dev/status",
            None,
            true,
        ),
        (
            DAEMON_USER,
            "patch",
            "bootcnodes.node.bootc.dev",
            None,
            false,
        ),
        (
            DAEMON_USER,
            "update",
            "bootcnodes.node.bootc.dev/status",
            None,
            false,
        ),
        (
            DAEMON_USER,
            "list",
            "bootcnodepools.node.bootc.dev",
            None,
            false,
        ),
        (DAEMON_USER, "list", "nodes", None, false),
        // Its watch starts with the object (sendInitialEvents): no LIST.
        (
            DAEMON_USER,
            "list",
            "bootcnodes.node.bootc.dev",
            None,
            false,
        ),
        // Only the Secrets a pool names, by name (none yet: no pool).
        (DAEMON_USER, "get", "secrets", ns, false),
        (DAEMON_USER, "get", "secrets", Some(DAEMON_NAMESPACE), false),
        (DAEMON_USER, "list", "secrets", ns, false),
        (DAEMON_USER, "watch", "secrets", ns, false),
        (DAEMON_USER, "get", "secrets", other, false),
        (DAEMON_USER, "list", "pods", None, false),
        (
            CONTROLLER_USER,
            "watch",
            "bootcnodepools.node.bootc.dev",
            None,
            true,
        ),
        (
            CONTROLLER_USER,
            "patch",
            "bootcnodepools.node.bootc.dev/status",
            None,
            true,
        ),
        (
            CONTROLLER_USER,
            "create",
            "bootcnodes.node.bootc.dev",
            None,
            true,
        ),
        (
            CONTROLLER_USER,
            "delete",
            "bootcnodes.node.bootc.dev",
            None,
            true,
        ),
        (
            CONTROLLER_USER,
            "patch",
            "bootcnodes.node.bootc.dev/status",
            None,
            false,
        ),
        (CONTROLLER_USER, "patch", "nodes", None, true),
        (CONTROLLER_USER, "delete", "nodes", None, false),
        (CONTROLLER_USER, "create", "pods/eviction", other, true),
        (CONTROLLER_USER, "delete", "pods", other, false),
        (CONTROLLER_USER, "watch", "secrets", ns, true),
        // The fleet's switch: the operator's Namespace alone.
        (
            CONTROLLER_USER,
            "watch",
            "namespaces#bootc-operator",
            None,
            true,
        ),
        (CONTROLLER_USER, "watch", "namespaces", None, false),
        (
            CONTROLLER_USER,
            "patch",
            "namespaces#bootc-operator",
            None,
            false,
        ),
        (CONTROLLER_USER, "get", "secrets", other, false),
        (
            CONTROLLER_USER,
            "update",
            "leases.coordination.k8s.io#bootc-controller",
            ns,
            true,
        ),
        (
            CONTROLLER_USER,
            "update",
            "leases.coordination.k8s.io#another",
            ns,
            false,
        ),
        (
            CONTROLLER_USER,
            "patch",
            "roles.rbac.authorization.k8s.io#bootc-daemon-pull-secrets",
            ns,
            true,
        ),
        (
            CONTROLLER_USER,
            "patch",
            "roles.rbac.authorization.k8s.io#bootc-controller",
            ns,
            false,
        ),
        (
            CONTROLLER_USER,
            "escalate",
            "roles.rbac.authorization.k8s.io",
            ns,
            false,
        ),
        (
            CONTROLLER_USER,
            "create",
            "rolebindings.rbac.authorization.k8s.io",
            ns,
            false,
        ),
        (CONTROLLER_USER, "create", "pods", ns, false),
        (
            CONTROLLER_USER,
            "update",
            "leases.coordination.k8s.io",
            other,
            false,
        ),
        (
            CONTROLLER_USER,
            "create",
            "events.events.k8s.io",
            Some("default"),
            true,
        ),
        (CONTROLLER_USER, "create", "events.events.k8s.io", ns, false),
    ];
    let mut wrong = Vec::new();
    for (user, verb, resource, namespace, expected) in cases {
        let got = can_i(&cp, user, verb, resource, *namespace);
        if got != *expected {
            wrong.push(format!(
                "{user} {verb} {resource} in {namespace:?}: got {got}, want {expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "RBAC differs:\n{}", wrong.join("\n"));

    // Not a sample: everything each identity may do, compared whole (less
    // what every authenticated user may do, which differs between
    // Kubernetes versions: discovery, self reviews).
    let mut wrong = Vec::new();
    for (user, namespace, expected) in [
        (CONTROLLER_USER, OPERATOR_NS, CONTROLLER_IN_OPERATOR_NS),
        (CONTROLLER_USER, "default", CONTROLLER_ELSEWHERE),
        (DAEMON_USER, OPERATOR_NS, DAEMON_EVERYWHERE),
        (DAEMON_USER, DAEMON_NAMESPACE, DAEMON_EVERYWHERE),
        (DAEMON_USER, "default", DAEMON_EVERYWHERE),
    ] {
        let mut expected = expected.to_vec();
        expected.sort_unstable();
        let mut got = can_i_list(&cp, user, namespace);
        for everyone in can_i_list(&cp, NOBODY, namespace) {
            if let Some(i) = got.iter().position(|g| *g == everyone) {
                got.remove(i);
            }
        }
        if got != expected {
            wrong.push(format!(
                "kubectl auth can-i --list --as {user} -n {namespace}:\n  got  {got:#?}\n  want {expected:#?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The operator's namespace: the controller and the pull secrets.
const OPERATOR_NS: &str = api::labels::OPERATOR_NAMESPACE;

/// A service account with no binding at all: what every authenticated user
/// may do.
const NOBODY: &str = "system:serviceaccount:bootc-operator:no-bindings";

/// `kubectl auth can-i --list` for `user` in `namespace`, one rule a line
/// (`resource [non-resource URLs] [resource names] [verbs]`, columns joined
/// by single spaces), sorted, without the header.
fn can_i_list(cp: &ControlPlane, user: &str, namespace: &str) -> Vec<String> {
    let text = ok(cp
        .kubectl()
        .args(["auth", "can-i", "--list", "--as", user, "-n", namespace]));
    let mut rows: Vec<String> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    rows.sort();
    rows
}

/// The controller's whole grant in its own namespace: its ClusterRole plus
/// the Role for Secrets, its Lease and the daemons' pull-secret Role.
const CONTROLLER_IN_OPERATOR_NS: &[&str] = &[
    "bootcnodepools.node.bootc.dev [] [] [list watch patch]",
    "bootcnodepools.node.bootc.dev/finalizers [] [] [update]",
    "bootcnodepools.node.bootc.dev/status [] [] [patch]",
    "bootcnodes.node.bootc.dev [] [] [list watch create patch delete]",
    "leases.coordination.k8s.io [] [] [create]",
    "leases.coordination.k8s.io [] [bootc-controller] [get update]",
    "namespaces [] [] [list]",
    "namespaces [] [bootc-operator] [watch]",
    "nodes [] [] [list watch patch]",
    "pods [] [] [list watch]",
    "pods/eviction [] [] [create]",
    "roles.rbac.authorization.k8s.io [] [bootc-daemon-pull-secrets] [patch]",
    "secrets [] [] [get list watch]",
    "subjectaccessreviews.authorization.k8s.io [] [] [create]",
    "tokenreviews.authentication.k8s.io [] [] [create]",
];
/// Elsewhere: the ClusterRole, and events (where the evicted pods live).
const CONTROLLER_ELSEWHERE: &[&str] = &[
    "bootcnodepools.node.bootc.dev [] [] [list watch patch]",
    "bootcnodepools.node.bootc.dev/finalizers [] [] [update]",
    "bootcnodepools.node.bootc.dev/status [] [] [patch]",
    "bootcnodes.node.bootc.dev [] [] [list watch create patch delete]",
    "events.events.k8s.io [] [] [create]",
    "namespaces [] [] [list]",
    "namespaces [] [bootc-operator] [watch]",
    "nodes [] [] [list watch patch]",
    "pods [] [] [list watch]",
    "pods/eviction [] [] [create]",
    "subjectaccessreviews.authorization.k8s.io [] [] [create]",
    "tokenreviews.authentication.k8s.io [] [] [create]",
];
/// The daemon, everywhere while no pool names a pull secret: BootcNodes and
/// their status.
const DAEMON_EVERYWHERE: &[&str] = &[
    "bootcnodes.node.bootc.dev [] [] [get watch]",
    "bootcnodes.node.bootc.dev/status [] [] [patch]",
];

/// A pool following a digest (nothing to resolve) with pull secret `secret`.
fn pool(secret: &str) -> BootcNodePool {
    PoolBuilder::new("workers")
        .selects("pool", "workers")
        .image(format!("quay.io/acme/os@sha256:{}", "1".repeat(64)))
        .pull_secret(OPERATOR_NS, secret)
        .build()
}

/// An empty `kubernetes.io/dockerconfigjson` Secret that opts in to the
/// pool `workers`.
fn pull_secret(name: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {api::labels::POOLS_ANNOTATION: "workers"}},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": ByteString(br#"{"auths":{}}"#.to_vec())},
    }))
    .unwrap()
}

/// Waits until the daemons' pull-secret Role grants `get` on exactly
/// `names`: one rule, or none at all for no name (a rule with an empty
/// `resourceNames` is stored without it: every name).
async fn await_grant(roles: &Api<Role>, names: &[&str]) {
    let want: Vec<PolicyRule> = if names.is_empty() {
        Vec::new()
    } else {
        vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            resource_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
            verbs: vec!["get".into()],
            non_resource_urls: None,
        }]
    };
    let wanted = want.clone();
    let cond = move |role: Option<&Role>| {
        role.is_some_and(|r| r.rules.clone().unwrap_or_default() == wanted)
    };
    let role = api::labels::DAEMON_PULL_SECRETS_ROLE;
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        kube::runtime::wait::await_condition(roles.clone(), role, cond),
    )
    .await;
    let now = roles.get(role).await.unwrap().rules;
    assert!(
        waited.is_ok_and(|r| r.is_ok()),
        "Role {role}: want {want:?}, have {now:?}"
    );
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(ref s)) if s.code == 403)
}

/// The controller in-process, as its ServiceAccount (deploy/'s RBAC).
async fn start_controller(
    cp: &ControlPlane,
) -> (
    controller::CancellationToken,
    tokio::task::JoinHandle<Result<(), controller::Error>>,
) {
    let shutdown = controller::CancellationToken::new();
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(cp.kubeconfig(Identity::Controller)).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let running = tokio::spawn(controller::run(
        config,
        controller::Options::new("deploy-test"),
        shutdown.clone(),
    ));
    (shutdown, running)
}

/// A daemon, with its own node-bound token, may GET the pull secrets its
/// pools name and no other Secret, as the real controller (its
/// ServiceAccount, deploy/'s RBAC) keeps its Role: the named Secret is
/// readable, another one in the same namespace is forbidden, the grant
/// follows a pool's change of Secret, and with no pool left there is no
/// rule at all (an empty `resourceNames` would grant every name).
#[tokio::test]
async fn the_daemon_reads_only_the_pull_secrets_its_pools_name() {
    let cp = ControlPlane::start().await.unwrap();
    install(&cp);
    let admin = cp.admin().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), OPERATOR_NS);
    for name in ["pull-a", "pull-b", "unrelated"] {
        secrets
            .create(&PostParams::default(), &pull_secret(name))
            .await
            .unwrap();
    }
    // Not a pull secret, and opted in to no pool (security review N2).
    let tls: Secret = serde_json::from_value(json!({
        "metadata": {"name": "webhook-tls"},
        "data": {"tls.key": ByteString(b"PRIVATE-KEY-OF-SOMETHING-ELSE".to_vec())},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &tls).await.unwrap();
    let daemon = {
        let kubeconfig = cp.node_bound_kubeconfig("node-1").unwrap();
        let kc = Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    };
    let reads: Api<Secret> = Api::namespaced(daemon.clone(), OPERATOR_NS);

    let (shutdown, running) = start_controller(&cp).await;
    let roles: Api<Role> = Api::namespaced(admin.clone(), OPERATOR_NS);
    let pools: Api<BootcNodePool> = Api::all(admin.clone());

    pools
        .create(&PostParams::default(), &pool("pull-a"))
        .await
        .unwrap();
    await_grant(&roles, &["pull-a"]).await;
    // Re-applying deploy/ (an upgrade) leaves the controller's rules alone.
    install(&cp);
    let rules = roles
        .get(api::labels::DAEMON_PULL_SECRETS_ROLE)
        .await
        .unwrap()
        .rules;
    assert_eq!(
        rules.unwrap_or_default().len(),
        1,
        "kubectl apply -k deploy/ took the grant away"
    );
    reads.get("pull-a").await.unwrap();
    for name in ["pull-b", "unrelated"] {
        assert!(forbidden(reads.get(name).await), "{name} readable");
    }
    assert!(forbidden(reads.list(&Default::default()).await));
    assert!(forbidden(
        Api::<Secret>::namespaced(daemon.clone(), "default")
            .get("pull-a")
            .await
    ));
    let mut listed = can_i_list(&cp, DAEMON_USER, OPERATOR_NS);
    for everyone in can_i_list(&cp, NOBODY, OPERATOR_NS) {
        listed.retain(|l| *l != everyone);
    }
    let mut want: Vec<&str> = DAEMON_EVERYWHERE.to_vec();
    want.push("secrets [] [pull-a] [get]");
    want.sort_unstable();
    assert_eq!(listed, want);

    // The pool moves to another Secret: the grant follows.
    pools
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"pullSecretRef": {"name": "pull-b", "namespace": OPERATOR_NS}}}),
            ),
        )
        .await
        .unwrap();
    await_grant(&roles, &["pull-b"]).await;
    reads.get("pull-b").await.unwrap();
    assert!(
        forbidden(reads.get("pull-a").await),
        "pull-a still readable"
    );

    // A pool writer names a Secret that does not opt in to the pool: no
    // grant, and the pool says why and how to opt it in.
    pools
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"pullSecretRef": {"name": "webhook-tls", "namespace": OPERATOR_NS}}}),
            ),
        )
        .await
        .unwrap();
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        kube::runtime::wait::await_condition(
            pools.clone(),
            "workers",
            |p: Option<&BootcNodePool>| {
                p.and_then(|p| p.status.as_ref()).is_some_and(|s| {
                    api::conditions::reason(&s.conditions, api::ConditionType::Degraded)
                        == Some(api::Reason::PullSecretNotAllowed.as_str())
                })
            },
        ),
    )
    .await
    .expect("the refused Secret is not reported on the pool")
    .unwrap()
    .unwrap();
    let message = api::conditions::message(
        &refused.status.unwrap().conditions,
        api::ConditionType::Degraded,
    )
    .unwrap_or_default()
    .to_owned();
    assert!(
        message.contains("webhook-tls") && message.contains("bootc.dev/pools=workers"),
        "{message}"
    );
    await_grant(&roles, &[]).await;
    assert!(
        forbidden(reads.get("webhook-tls").await),
        "webhook-tls readable"
    );

    // No pool names a Secret: no rule at all.
    pools.delete("workers", &Default::default()).await.unwrap();
    await_grant(&roles, &[]).await;
    for name in ["pull-a", "pull-b", "unrelated"] {
        assert!(forbidden(reads.get(name).await), "{name} readable");
    }

    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// A pool's Secret is granted before the controller writes a BootcNode that
/// names it, so that no daemon is sent to a Secret it may not read yet (it
/// would report its node Degraded and retry after a backoff): in the API
/// server's audit log, the controller's write of the Role has completed
/// before its first write of the BootcNode arrives.
#[tokio::test]
async fn a_pools_secret_is_granted_before_a_bootc_node_names_it() {
    let cp = ControlPlane::start_with(tests::control_plane::Options {
        audit: true,
        ..Default::default()
    })
    .await
    .unwrap();
    install(&cp);
    let admin = cp.admin().await.unwrap();
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "node-1", "labels": {"pool": "workers"}},
    }))
    .unwrap();
    Api::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    tests::daemon_player::set_ready(&admin, "node-1", true)
        .await
        .unwrap();
    Api::<Secret>::namespaced(admin.clone(), OPERATOR_NS)
        .create(&PostParams::default(), &pull_secret("pull-a"))
        .await
        .unwrap();
    let (shutdown, running) = start_controller(&cp).await;
    Api::<BootcNodePool>::all(admin.clone())
        .create(&PostParams::default(), &pool("pull-a"))
        .await
        .unwrap();
    let named = |bn: Option<&api::BootcNode>| {
        bn.and_then(|b| b.spec.pull_secret_ref.as_ref())
            .is_some_and(|r| r.name == "pull-a")
    };
    tokio::time::timeout(
        Duration::from_secs(60),
        kube::runtime::wait::await_condition(Api::all(admin.clone()), "node-1", named),
    )
    .await
    .expect("no BootcNode naming pull-a")
    .unwrap();
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let entries: Vec<serde_json::Value> = cp
        .audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == CONTROLLER_USER)
        .collect();
    let position = |resource: &str, name: &str, stage: &str| {
        entries.iter().position(|e| {
            e["objectRef"]["resource"] == resource
                && e["objectRef"]["name"] == name
                && e["verb"] == "patch"
                && e["stage"] == stage
                && (stage != "ResponseComplete" || e["responseStatus"]["code"] == 200)
        })
    };
    let role = position(
        "roles",
        api::labels::DAEMON_PULL_SECRETS_ROLE,
        "ResponseComplete",
    );
    let bootc_node = position("bootcnodes", "node-1", "RequestReceived");
    assert!(
        role.is_some() && bootc_node.is_some() && role < bootc_node,
        "the Role written at entry {role:?}, the BootcNode first at {bootc_node:?}"
    );
}

/// A Pod of `template` (a Deployment's or DaemonSet's) in `namespace`,
/// created with a server-side dry run: Pod Security admission enforces the
/// namespace's level on Pods (a Deployment only gets a warning).
async fn dry_run_pod(
    admin: &kube::Client,
    template: &serde_json::Value,
    namespace: &str,
) -> Result<Pod, kube::Error> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "dry-run-", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }))
    .unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    Api::<Pod>::namespaced(admin.clone(), namespace)
        .create(&params, &pod)
        .await
}

/// The controller's pods pass the `restricted` level its namespace enforces,
/// and the daemon's pass in its own namespace only: the same pod is refused
/// in the operator's (so `restricted` is enforced there, not only audited).
#[tokio::test]
async fn pods_pass_the_pod_security_level_of_their_namespace() {
    let cp = ControlPlane::start().await.unwrap();
    install(&cp);
    let admin = cp.admin().await.unwrap();
    let template = |kind: &str, namespace: &str| {
        let out = ok(cp
            .kubectl()
            .args(["get", kind, "-n", namespace, "-o", "json"]));
        let object: serde_json::Value = serde_json::from_str(&out).unwrap();
        object["spec"]["template"].clone()
    };
    let controller = template("deployment/bootc-controller", OPERATOR_NS);
    let daemon = template("daemonset/bootc-daemon", DAEMON_NAMESPACE);

    dry_run_pod(&admin, &controller, OPERATOR_NS)
        .await
        .expect("the controller's pod under `restricted`");
    dry_run_pod(&admin, &daemon, DAEMON_NAMESPACE)
        .await
        .expect("the daemon's pod in its own namespace");
    match dry_run_pod(&admin, &daemon, OPERATOR_NS).await {
        Err(kube::Error::Api(s)) => assert!(
            s.code == 403 && s.message.contains(r#"violates PodSecurity "restricted"#),
            "{s:?}"
        ),
        other => panic!(
            "a privileged pod admitted in {OPERATOR_NS}: {:?}",
            other.map(|p| p.metadata.name)
        ),
    }
}
