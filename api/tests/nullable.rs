//! Every field the CRD schemas mark `nullable` can be read back when it is
//! null. The API server stores a null on a nullable field as it is, and a
//! kube watcher fails its whole LIST when one object does not parse, so a
//! nullable field whose Rust type cannot take null stops every reconcile.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::CustomResourceExt;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn entry() -> Value {
    json!({
        "image": format!("quay.io/acme/os@{DIGEST}"), "imageDigest": DIGEST,
        "version": "1", "timestamp": "2026-01-01T00:00:00Z", "architecture": "amd64",
        "softRebootCapable": true, "incompatible": false, "downloadOnly": true,
    })
}

fn condition() -> Value {
    json!({"type": "Idle", "status": "True", "reason": "Idle", "message": "m",
           "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
}

/// A pool with every field of the schema set.
fn full_pool() -> Value {
    json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
        "metadata": {"name": "p"},
        "spec": {
            "nodeSelector": {
                "matchLabels": {"a": "b"},
                "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}],
            },
            "image": {"ref": "quay.io/acme/os:prod"},
            "rollout": {
                "maxUnavailable": 2, "maxUnhealthy": "10%", "paused": true,
                "drainTimeoutSeconds": 30,
                "batches": [1, "50%"], "soakSeconds": 60, "successThreshold": 80,
                "deadlines": {"stagingSeconds": 60},
                "stagingWeights": {"io": 20, "cpu": 30},
                "maintenanceWindows": [{
                    "days": ["Monday"], "start": "02:00", "duration": "4h",
                    "timeZone": "Europe/Paris",
                }],
                "pausedUntil": "2027-01-04T08:00:00Z",
                "blackouts": [{
                    "start": "2026-12-20T00:00", "end": "2027-01-04T08:00",
                    "timeZone": "Europe/Paris",
                }],
            },
            "disruption": {"rebootPolicy": "AllowSoftReboot"},
            "pullSecretRef": {"name": "s", "namespace": "bootc-operator"},
            "onDelete": "Finish",
            "health": {
                "conditions": [{"type": "GPUHealthy", "status": "True"}],
                "pods": [{"namespace": "gpu", "selector": {"matchLabels": {"app": "driver"}}}],
                "settleSeconds": 60, "timeoutSeconds": 600, "onFailure": "Rollback",
                "rollbackUpdated": true,
            },
        },
        "status": {
            "observedGeneration": 1, "targetDigest": DIGEST,
            "targetImage": format!("quay.io/acme/os@{DIGEST}"), "deployedDigest": DIGEST,
            "updateAvailable": false, "nodeCount": 1, "updatedCount": 1, "updatingCount": 0,
            "degradedCount": 0, "nextMaintenanceWindow": "2026-01-01T02:00:00Z",
            "conditions": [condition()],
            "failedImages": [{"ref": "quay.io/acme/os:prod", "digest": DIGEST, "node": "n",
                              "check": "c", "at": "2026-01-01T00:00:00Z"}],
            "batch": {"digest": DIGEST, "step": 1, "limit": 2,
                      "soakingSince": "2026-01-01T00:00:00Z", "healthy": 2, "updated": 2},
            "rollouts": [{"digest": DIGEST, "image": format!("quay.io/acme/os@{DIGEST}"),
                          "started": "2026-01-01T00:00:00Z", "nodes": 1,
                          "ended": "2026-01-01T01:00:00Z", "outcome": "Completed",
                          "updated": 1, "failed": 0}],
            "dependencies": [{"name": "infra", "uid": "u", "created": "2026-01-01T00:00:00Z"}],
        },
    })
}

/// A BootcNode with every field of the schema set.
fn full_node() -> Value {
    json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
        "metadata": {"name": "n"},
        "spec": {
            "desiredImage": format!("quay.io/acme/os@{DIGEST}"), "desiredImageState": "Booted",
            "rebootPolicy": "RebootOnly",
            "pullSecretRef": {"name": "s", "namespace": "bootc-operator"},
            "pullSecretHash": "sha256:00",
            "stagingWeights": {"io": 20, "cpu": 30},
        },
        "status": {
            "observedGeneration": 1, "booted": entry(), "staged": entry(), "rollback": entry(),
            "bootId": "b", "downloadOnlySupported": true, "conditions": [condition()],
            "history": [{"image": format!("quay.io/acme/os@{DIGEST}"), "digest": DIGEST,
                         "version": "1", "staged": "2026-01-01T00:00:00Z",
                         "booted": "2026-01-01T01:00:00Z", "outcome": "Failed", "reason": "c"}],
            "landlock": {"state": "Partial", "abi": 4, "message": "partially enforced (ABI 4)"},
        },
    })
}

/// The JSON paths (keys, `[]` for array items) of the nullable properties.
fn nullable_paths(schema: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        out.push(path.clone());
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            path.push(name.clone());
            nullable_paths(prop, path, out);
            path.pop();
        }
    }
    if let Some(items) = schema.get("items") {
        path.push("[]".into());
        nullable_paths(items, path, out);
        path.pop();
    }
}

fn set_null(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut cursor = obj;
    for key in parents {
        cursor = if key == "[]" {
            match cursor.get_mut(0) {
                Some(v) => v,
                None => return false,
            }
        } else {
            match cursor.get_mut(key.as_str()) {
                Some(v) => v,
                None => return false,
            }
        };
    }
    match cursor.as_object_mut() {
        Some(map) => {
            map.insert(last.clone(), Value::Null);
            true
        }
        None => false,
    }
}

fn check<K: CustomResourceExt + DeserializeOwned>(full: Value) -> usize {
    serde_json::from_value::<K>(full.clone()).expect("the full example parses");
    let crd = serde_json::to_value(K::crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut paths = Vec::new();
    nullable_paths(schema, &mut Vec::new(), &mut paths);
    for path in &paths {
        let mut obj = full.clone();
        assert!(
            set_null(&mut obj, path),
            "{}: the example lacks a parent of {path:?}; extend it",
            K::crd_name()
        );
        if let Err(e) = serde_json::from_value::<K>(obj) {
            panic!(
                "{}: {} is nullable in the schema but null does not parse: {e}",
                K::crd_name(),
                path.join(".")
            );
        }
    }
    paths.len()
}

#[test]
fn every_nullable_field_parses_as_null() {
    assert!(check::<api::BootcNodePool>(full_pool()) > 0);
    assert!(check::<api::BootcNode>(full_node()) > 0);
}
