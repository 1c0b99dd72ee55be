//! `kubectl apply -k deploy/` against a real API server, and the RBAC it
//! grants each component, checked with `kubectl auth can-i`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use tests::control_plane::{CONTROLLER_USER, DAEMON_USER};
use tests::{ControlPlane, repo_root};

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
    match resource.split_once('/') {
        Some((resource, sub)) => cmd.args([resource, "--subresource", sub]),
        None => cmd.arg(resource),
    };
    match namespace {
        Some(ns) => cmd.args(["-n", ns]),
        None => cmd.arg("--all-namespaces"),
    };
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[tokio::test]
async fn kubectl_apply_k_installs_everything_and_rbac_is_minimal() {
    let cp = ControlPlane::start().await.unwrap();
    let deploy = repo_root().join("deploy");

    // The CRDs must be established before a pool can be created: apply,
    // wait on the condition, apply again (what the README tells users).
    ok(cp.kubectl().arg("apply").arg("-k").arg(&deploy));
    ok(cp.kubectl().args([
        "wait",
        "--for=condition=Established",
        "crd/bootcnodepools.node.bootc.dev",
        "crd/bootcnodes.node.bootc.dev",
        "--timeout=60s",
    ]));

    let listed = ok(cp.kubectl().args([
        "get",
        "namespace/bootc-operator",
        "serviceaccount/bootc-controller",
        "serviceaccount/bootc-daemon",
        "deployment/bootc-controller",
        "daemonset/bootc-daemon",
        "role/bootc-controller",
        "role/bootc-daemon",
        "-n",
        "bootc-operator",
        "-o",
        "name",
    ]));
    for name in [
        "namespace/bootc-operator",
        "serviceaccount/bootc-controller",
        "serviceaccount/bootc-daemon",
        "deployment.apps/bootc-controller",
        "daemonset.apps/bootc-daemon",
    ] {
        assert!(
            listed.contains(name),
            "{name} missing after apply -k:\n{listed}"
        );
    }
    let ns_labels = ok(cp.kubectl().args([
        "get",
        "namespace",
        "bootc-operator",
        "-o",
        "jsonpath={.metadata.labels}",
    ]));
    assert!(
        ns_labels.contains(r#""pod-security.kubernetes.io/enforce":"privileged""#),
        "{ns_labels}"
    );
    assert!(
        ns_labels.contains(r#""pod-security.kubernetes.io/warn":"restricted""#),
        "{ns_labels}"
    );

    let ds = ok(cp.kubectl().args([
        "get",
        "daemonset/bootc-daemon",
        "-n",
        "bootc-operator",
        "-o",
        "json",
    ]));
    let ds: serde_json::Value = serde_json::from_str(&ds).unwrap();
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["bootc.dev/managed"], "");
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
    // The namespace the daemon reads pull secrets from is its own.
    assert!(env.iter().any(|e| e["name"] == "POD_NAMESPACE"
        && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"));

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
    assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
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
    let ns = Some("bootc-operator");
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
        (DAEMON_USER, "get", "secrets", ns, true),
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
        (CONTROLLER_USER, "get", "secrets", other, false),
        (
            CONTROLLER_USER,
            "update",
            "leases.coordination.k8s.io",
            ns,
            true,
        ),
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
        (CONTROLLER_USER, "bootc-operator", CONTROLLER_IN_OPERATOR_NS),
        (CONTROLLER_USER, "default", CONTROLLER_ELSEWHERE),
        (DAEMON_USER, "bootc-operator", DAEMON_IN_OPERATOR_NS),
        (DAEMON_USER, "default", DAEMON_ELSEWHERE),
    ] {
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

/// The controller's whole grant in its own namespace (sorted as printed):
/// its ClusterRole plus the Role for Secrets and Leases.
const CONTROLLER_IN_OPERATOR_NS: &[&str] = &[
    "bootcnodepools.node.bootc.dev [] [] [get list watch patch update]",
    "bootcnodepools.node.bootc.dev/finalizers [] [] [update]",
    "bootcnodepools.node.bootc.dev/status [] [] [get patch update]",
    "bootcnodes.node.bootc.dev [] [] [get list watch create patch update delete]",
    "leases.coordination.k8s.io [] [] [get create update]",
    "nodes [] [] [get list watch patch]",
    "pods [] [] [get list]",
    "pods/eviction [] [] [create]",
    "secrets [] [] [get list watch]",
];
/// Elsewhere: the ClusterRole, and events (where the evicted pods live).
const CONTROLLER_ELSEWHERE: &[&str] = &[
    "bootcnodepools.node.bootc.dev [] [] [get list watch patch update]",
    "bootcnodepools.node.bootc.dev/finalizers [] [] [update]",
    "bootcnodepools.node.bootc.dev/status [] [] [get patch update]",
    "bootcnodes.node.bootc.dev [] [] [get list watch create patch update delete]",
    "events.events.k8s.io [] [] [create patch]",
    "nodes [] [] [get list watch patch]",
    "pods [] [] [get list]",
    "pods/eviction [] [] [create]",
];
/// The daemon: BootcNodes, their status, and Secrets by name here only.
const DAEMON_IN_OPERATOR_NS: &[&str] = &[
    "bootcnodes.node.bootc.dev [] [] [get list watch]",
    "bootcnodes.node.bootc.dev/status [] [] [patch]",
    "secrets [] [] [get]",
];
const DAEMON_ELSEWHERE: &[&str] = &[
    "bootcnodes.node.bootc.dev [] [] [get list watch]",
    "bootcnodes.node.bootc.dev/status [] [] [patch]",
];
