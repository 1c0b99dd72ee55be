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
}
