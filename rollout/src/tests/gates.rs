//! The gates outside the pool's objects: a blocking pod keeps its node out
//! of a slot; a firing alert, or a gate that could not be asked, holds
//! every new slot; staging and the nodes already in slots go on.

use std::collections::BTreeSet;

use api::test_support::PodBuilder;
use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::holds::gates::{GATE_RECHECK, Gates, blocking_pods};

/// The pool of [`slot_staged_idle`], with these gates.
fn world(gates: Gates) -> World {
    let mut w = slot_staged_idle(|_| {});
    w.gates = gates;
    w
}

fn on_nodes(pods: &[(&str, &str)]) -> Gates {
    Gates {
        blocking_pods: Ok(pods
            .iter()
            .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
            .collect()),
        ..Gates::default()
    }
}

#[test]
fn gates_hold_new_slots_and_nothing_else() {
    let firing = Gates {
        alerts: Ok(vec![r#"NodeDown{severity="critical"}"#.to_owned()]),
        ..Gates::default()
    };
    let prometheus_down = Gates {
        alerts: Err("http://prom:9090: connection refused".to_owned()),
        ..Gates::default()
    };
    let unsilenced = Gates {
        silences: Err(r#"Alertmanager endpoint "main" could not be reached"#.to_owned()),
        ..Gates::default()
    };
    let pods_unknown = Gates {
        blocking_pods: Err("pods is forbidden".to_owned()),
        ..Gates::default()
    };
    // (what, gates, a new slot, UpToDate reason, message has)
    #[rustfmt::skip]
    let rows: Vec<(&str, Gates, bool, Reason, &str)> = vec![
        ("no gate holds", Gates::default(), true, Reason::RolloutInProgress, "in reboot slots: slot, staged"),
        ("an alert fires", firing, false, Reason::AlertFiring,
            r#"alerts fire (spec.rollout.alertGate), no new reboot slot until they resolve: NodeDown{severity="critical"}"#),
        ("Prometheus does not answer", prometheus_down, false, Reason::GateUnanswered,
            "spec.rollout.alertGate could not be checked, no new reboot slot (fail closed): http://prom:9090: connection refused"),
        ("a silence could not be made", unsilenced, false, Reason::GateUnanswered,
            r#"spec.rollout.silences could not be checked, no new reboot slot (fail closed): Alertmanager endpoint "main" could not be reached"#),
        ("the pods cannot be listed", pods_unknown, false, Reason::GateUnanswered,
            "spec.disruption.blockingPods could not be checked, no new reboot slot (fail closed): pods is forbidden"),
        ("a blocking pod on the staged node", on_nodes(&[("staged", "batch/etl-7")]), false, Reason::RolloutInProgress,
            "1 run blocking pods (spec.disruption.blockingPods), given no reboot slot: staged (batch/etl-7)"),
        ("a blocking pod elsewhere", on_nodes(&[("stranger", "batch/etl-7")]), true, Reason::RolloutInProgress,
            "in reboot slots: slot, staged"),
        // On the target already: nothing to hold, nothing said.
        ("a blocking pod on the node in its slot", on_nodes(&[("slot", "batch/etl-7")]), true, Reason::RolloutInProgress,
            "in reboot slots: slot, staged"),
    ];
    for (what, gates, new_slot, reason, says) in rows {
        let p = world(gates).plan();
        holds_slots_not_staging(&p, what, new_slot, reason, says);
        // The node in its slot finishes: nothing withdraws its approval.
        assert!(
            node_writes(&p, "slot").is_empty(),
            "{what}: {:?}",
            node_writes(&p, "slot")
        );
        // A gate that holds is asked again.
        let gated = !new_slot;
        assert_eq!(
            p.requeue_after.is_some_and(|d| d <= GATE_RECHECK),
            gated,
            "{what}: {:?}",
            p.requeue_after
        );
    }
}

#[test]
fn a_blocking_pod_does_not_release_a_node_already_in_its_slot() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(marked(node("drained", "a", true, true), "a"))
        .bn(bn("drained", NEW, Daemon::Staged(OLD)).slot(false))
        .drain("drained", DrainPhase::Succeeded);
    w.gates = on_nodes(&[("drained", "batch/etl-7")]);
    let p = w.plan();
    assert_eq!(
        (
            slot_record(&p, "drained"),
            applied(&p, "drained").map(|b| b.spec.desired_image_state)
        ),
        (None, Some(DesiredImageState::Booted)),
        "{:?}",
        p.writes
    );
}

fn pod(ns: &str, name: &str, node: Option<&str>, app: &str, phase: &str) -> Pod {
    PodBuilder::new(ns, name)
        .label("app", app)
        .on(node)
        .phase(phase)
        .build()
}

#[test]
fn the_blocking_pods_are_the_running_ones_the_selectors_match() {
    let spec: api::BlockingPods = serde_json::from_value(json!({
        "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["etl"]}]},
    }))
    .unwrap();
    let batch = BTreeSet::from(["batch".to_owned()]);
    // (what, pod, namespaces the namespace selector matches, blocks)
    type Row<'a> = (&'a str, Pod, Option<&'a BTreeSet<String>>, Option<&'a str>);
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("running", pod("batch", "a", Some("n1"), "etl", "Running"), None, Some("batch/a")),
        ("pending on its node", pod("batch", "a", Some("n1"), "etl", "Pending"), None, Some("batch/a")),
        ("not yet bound", pod("batch", "a", None, "etl", "Pending"), None, None),
        ("succeeded", pod("batch", "a", Some("n1"), "etl", "Succeeded"), None, None),
        ("failed", pod("batch", "a", Some("n1"), "etl", "Failed"), None, None),
        ("other labels", pod("batch", "a", Some("n1"), "web", "Running"), None, None),
        ("in a matching namespace", pod("batch", "a", Some("n1"), "etl", "Running"), Some(&batch), Some("batch/a")),
        ("in another namespace", pod("apps", "a", Some("n1"), "etl", "Running"), Some(&batch), None),
    ];
    for (what, pod, namespaces, want) in rows {
        let got = blocking_pods(&spec, [&pod], namespaces).unwrap();
        assert_eq!(got.get("n1").map(String::as_str), want, "{what}");
    }
    // Several on one node: the first by namespace and name is named.
    let pods = [
        pod("batch", "b", Some("n1"), "etl", "Running"),
        pod("batch", "a", Some("n1"), "etl", "Running"),
        pod("apps", "z", Some("n2"), "etl", "Running"),
    ];
    let got = blocking_pods(&spec, &pods, None).unwrap();
    assert_eq!(
        got,
        BTreeMap::from([
            ("n1".to_owned(), "batch/a".to_owned()),
            ("n2".to_owned(), "apps/z".to_owned()),
        ])
    );
}

/// A daemon pod the kubelet backs off or cannot make is named with its
/// reason; a running one, a pending one, or another app's pod is not.
#[test]
fn daemon_pods_that_cannot_run_are_found_with_the_kubelets_reason() {
    let pod = |name: &str,
               node: &str,
               app: &str,
               waiting: Option<&str>|
     -> k8s_openapi::api::core::v1::Pod {
        let state = match waiting {
            Some(reason) => json!({"waiting": {"reason": reason, "message": "back-off 5m0s"}}),
            None => json!({"running": {}}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "bootc-daemon",
                         "labels": {api::labels::APP_NAME_LABEL: app}},
            "spec": {"nodeName": node, "containers": [{"name": "daemon"}]},
            "status": {"containerStatuses": [{"name": "daemon", "image": "i", "imageID": "",
                "ready": false, "restartCount": 4, "state": state}]},
        }))
        .unwrap()
    };
    let daemon = api::labels::DAEMON_APP_NAME;
    let pods = [
        pod("d-1", "n1", daemon, Some("CrashLoopBackOff")),
        pod("d-2", "n2", daemon, Some("ImagePullBackOff")),
        pod("d-3", "n3", daemon, None),
        pod("d-4", "n4", daemon, Some("ContainerCreating")),
        pod("web", "n5", "web", Some("CrashLoopBackOff")),
    ];
    let found = crate::holds::gates::daemon_pod_problems(&pods);
    assert_eq!(
        found.keys().map(String::as_str).collect::<Vec<_>>(),
        ["n1", "n2"]
    );
    assert_eq!(
        found["n1"],
        "bootc-daemon/d-1: CrashLoopBackOff: back-off 5m0s (restarted 4 times)"
    );
}
