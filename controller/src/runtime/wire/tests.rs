//! The wire types give exactly what decoding the full types and trimming
//! them as the watches did gives, for objects as a cluster leaves them. And
//! what each costs to decode: printed only
//! (`cargo test --release -p controller --lib wire -- --nocapture`).

use std::time::Instant;

use kube::ResourceExt;
use kube::core::WatchEvent;
use serde::Serialize;
use serde_json::{Value, json};

use super::*;
use api::labels::{
    ARCH_LABEL, CONTROLLER_MANAGER, CORDONED_BY_ANNOTATION, DAEMON_MANAGER,
    DISRUPTED_BY_ANNOTATION, HOSTNAME_LABEL, IN_REBOOT_SLOT_ANNOTATION, MANAGED_LABEL,
    WAS_CORDONED_ANNOTATION,
};
use api::node_health::NODE_READY;
use api::{ConditionType, Reason};

const TARGET: &str =
    "quay.example/os/node@sha256:1c0f8d3f0b9c5b1e6a2d7e4f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b";
const OLD: &str =
    "quay.example/os/node@sha256:9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d";

/// A kubelet's image list entry (it reports up to 50).
fn image(i: usize) -> Value {
    json!({
        "names": [
            format!("registry.example/team-{i}/service-{i}@sha256:{:064x}", i * 7919),
            format!("registry.example/team-{i}/service-{i}:v1.{i}.3"),
        ],
        "sizeBytes": 48_000_000 + i * 1_234_567,
    })
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": "2026-03-02T11:58:40Z",
        "lastTransitionTime": "2026-03-01T10:01:12Z",
    })
}

/// A Node as the kubelet, kube-controller-manager and our controller leave
/// it: one of ours, cordoned for a reboot and being deleted meanwhile. Every
/// field the Node cache keeps is set (`node_sample_sets_every_kept_field`),
/// so a wire type that dropped one fails the comparison.
fn node_json() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": node_metadata(),
        "spec": {
            "podCIDR": "10.244.17.0/24",
            "podCIDRs": ["10.244.17.0/24", "fd00:10:244:17::/64"],
            "providerID": "kind://docker/kind/worker-17",
            "externalID": "worker-17",
            "taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-03-02T11:50:00Z"},
                {"key": "dedicated", "value": "batch", "effect": "NoExecute"}
            ],
            "unschedulable": true
        },
        "status": node_status(),
    })
}

fn node_metadata() -> Value {
    json!({
        "name": "worker-17",
        // No API server of today sets these three on a Node: here so that
        // every field of the metadata is compared.
        "namespace": "",
        "generateName": "worker-",
        "selfLink": "/api/v1/nodes/worker-17",
        "uid": "5f0c6a52-3a1e-4c59-9b7c-2f4f3b8d1e01",
        "resourceVersion": "48213",
        "generation": 3,
        "creationTimestamp": "2026-03-01T10:00:00Z",
        "deletionTimestamp": "2026-03-02T12:00:00Z",
        "deletionGracePeriodSeconds": 0,
        "finalizers": ["example.com/node-cleanup"],
        "ownerReferences": [{
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "name": "worker-17",
            "uid": "0b7e1c44-9d2a-4b8e-a6f1-1e2d3c4b5a69", "controller": true
        }],
        "labels": {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            ARCH_LABEL: "amd64",
            HOSTNAME_LABEL: "worker-17",
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "m6i.xlarge",
            "topology.kubernetes.io/zone": "eu-west-1b",
            "pool": "pool-a",
            MANAGED_LABEL: "true"
        },
        "annotations": {
            "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "projectcalico.org/IPv4Address": "172.18.0.17/16",
            "kubectl.kubernetes.io/last-applied-configuration":
                "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":{\"pool\":\"pool-a\"},\"name\":\"worker-17\"}}\n",
            CORDONED_BY_ANNOTATION: "pool-a",
            DISRUPTED_BY_ANNOTATION: "pool-a"
        },
        "managedFields": [node_kubelet_fields(), node_kcm_fields(), node_controller_fields()]
    })
}

fn node_kubelet_fields() -> Value {
    json!({
        "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
        "time": "2026-03-02T11:58:40Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {
            "f:metadata": {"f:annotations": {
                "f:kubeadm.alpha.kubernetes.io/cri-socket": {},
                "f:volumes.kubernetes.io/controller-managed-attach-detach": {}
            }, "f:labels": {
                ".": {}, "f:beta.kubernetes.io/arch": {}, "f:beta.kubernetes.io/os": {},
                "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {}
            }},
            "f:status": {
                "f:allocatable": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}},
                "f:capacity": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}},
                "f:conditions": {
                    "k:{\"type\":\"DiskPressure\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}},
                    "k:{\"type\":\"MemoryPressure\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}},
                    "k:{\"type\":\"PIDPressure\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}},
                    "k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}}
                },
                "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}},
                "f:features": {".": {}, "f:supplementalGroupsPolicy": {}},
                "f:images": {}, "f:nodeInfo": {"f:bootID": {}, "f:containerRuntimeVersion": {}, "f:kernelVersion": {}, "f:kubeProxyVersion": {}, "f:kubeletVersion": {}, "f:machineID": {}, "f:osImage": {}, "f:systemUUID": {}},
                "f:runtimeHandlers": {}
            }
        }
    })
}

fn node_kcm_fields() -> Value {
    json!({
        "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": "2026-03-01T10:00:31Z", "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}},
            "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, "v:\"10.244.17.0/24\"": {}}}
        }
    })
}

fn node_controller_fields() -> Value {
    json!({
        "manager": CONTROLLER_MANAGER, "operation": "Apply", "apiVersion": "v1",
        "time": "2026-03-02T11:50:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {
                "f:annotations": {"f:bootc.dev/cordoned-by": {}, "f:bootc.dev/disrupted-by": {}},
                "f:labels": {"f:bootc.dev/managed": {}}
            },
            "f:spec": {"f:unschedulable": {}}
        }
    })
}

fn node_status() -> Value {
    let resources = json!({
        "cpu": "4", "ephemeral-storage": "101430960Ki", "hugepages-1Gi": "0",
        "hugepages-2Mi": "0", "memory": "16221676Ki", "pods": "110"
    });
    json!({
        "addresses": [
            {"type": "InternalIP", "address": "172.18.0.17"},
            {"type": "Hostname", "address": "worker-17"}
        ],
        "allocatable": resources,
        "capacity": resources,
        "conditions": [
            condition("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node"),
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition(NODE_READY, "True", "KubeletReady", "kubelet is posting ready status")
        ],
        "config": {"error": "assigned config not yet downloaded"},
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "features": {"supplementalGroupsPolicy": true},
        "images": (0..30).map(image).collect::<Vec<_>>(),
        "nodeInfo": {
            "architecture": "amd64", "bootID": "8d7b2c1e-5f4a-4e3b-9c2d-1a0b9c8d7e6f",
            "containerRuntimeVersion": "containerd://2.1.3", "kernelVersion": "6.12.0-55.el10.x86_64",
            "kubeProxyVersion": "", "kubeletVersion": "v1.37.0",
            "machineID": "4c4c4544004a3510804cb4c04f4d3232", "operatingSystem": "linux",
            "osImage": "CentOS Stream 10 (Coughlan)", "systemUUID": "ec2d1f4e-8a9b-4c3d-a2e1-f0b9c8d7e6a5"
        },
        "phase": "Running",
        "runtimeHandlers": [
            {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
            {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}}
        ],
        "volumesAttached": [{"name": "kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f", "devicePath": ""}],
        "volumesInUse": ["kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f"]
    })
}

/// A BootcNode as our controller and daemon leave it mid-rollout: staged,
/// approved, holding a reboot slot.
fn bootc_node_json() -> Value {
    json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNode",
        "metadata": {
            "name": "worker-17",
            "uid": "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e",
            "resourceVersion": "48290",
            "generation": 7,
            "creationTimestamp": "2026-03-01T10:02:00Z",
            "labels": {"pool": "pool-a"},
            "annotations": {
                IN_REBOOT_SLOT_ANNOTATION: "true",
                WAS_CORDONED_ANNOTATION: "false",
                "example.com/note": "kept: a BootcNode keeps all its annotations"
            },
            "ownerReferences": [{
                "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool", "name": "pool-a",
                "uid": "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d", "controller": true, "blockOwnerDeletion": true
            }],
            "managedFields": [bootc_node_controller_fields(), bootc_node_daemon_fields()]
        },
        "spec": {
            "desiredImage": TARGET,
            "desiredImageState": "Booted",
            "rebootPolicy": "AllowSoftReboot",
            "pullSecretRef": {"name": "pull", "namespace": "bootc-operator"},
            "pullSecretHash": "sha256:5d41402abc4b2a76b9719d911017c592ae1c3f9d3b0b1e2f3a4b5c6d7e8f9a0b"
        },
        "status": {
            "observedGeneration": 7,
            "booted": boot_entry(OLD, "10.0.20260215", false),
            "staged": boot_entry(TARGET, "10.0.20260301", true),
            "rollback": boot_entry(OLD, "10.0.20260101", false),
            "bootId": "8d7b2c1e-5f4a-4e3b-9c2d-1a0b9c8d7e6f",
            "downloadOnlySupported": true,
            "hostUpdaters": [api::host_updaters::BOOTC_TIMER],
            "history": [
                {"image": TARGET, "staged": "2026-03-01T09:30:00Z"},
                {"image": OLD, "digest": OLD.split_once('@').map(|(_, d)| d),
                 "staged": "2026-02-15T09:30:00Z", "booted": "2026-02-15T09:40:00Z", "outcome": "Updated"}
            ],
            "conditions": [
                bn_condition(ConditionType::Idle, "False", Reason::Rebooting, "rebooting into the staged image"),
                bn_condition(ConditionType::Degraded, "False", Reason::Healthy, ""),
                bn_condition(ConditionType::UpToDate, "False", Reason::Staged, "the target is staged")
            ]
        }
    })
}

fn boot_entry(image: &str, version: &str, staged: bool) -> Value {
    let digest = image.split_once('@').map(|(_, d)| d);
    json!({
        "image": image, "imageDigest": digest, "version": version,
        "timestamp": "2026-03-01T09:00:00Z", "architecture": "amd64",
        "softRebootCapable": true, "incompatible": false, "downloadOnly": staged
    })
}

fn bn_condition(type_: ConditionType, status: &str, reason: Reason, message: &str) -> Value {
    json!({
        "type": type_.as_str(), "status": status, "reason": reason.as_str(), "message": message,
        "observedGeneration": 7, "lastTransitionTime": "2026-03-02T11:55:00Z"
    })
}

fn bootc_node_controller_fields() -> Value {
    json!({
        "manager": CONTROLLER_MANAGER, "operation": "Apply", "apiVersion": "node.bootc.dev/v1alpha1",
        "time": "2026-03-02T11:50:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {
                "f:annotations": {"f:bootc.dev/in-reboot-slot": {}, "f:bootc.dev/was-cordoned": {}},
                "f:labels": {"f:pool": {}},
                "f:ownerReferences": {"k:{\"uid\":\"6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d\"}": {}}
            },
            "f:spec": {
                "f:desiredImage": {}, "f:desiredImageState": {}, "f:pullSecretHash": {},
                "f:pullSecretRef": {"f:name": {}, "f:namespace": {}}, "f:rebootPolicy": {}
            }
        }
    })
}

fn bootc_node_daemon_fields() -> Value {
    let entry = json!({
        "f:architecture": {}, "f:downloadOnly": {}, "f:image": {}, "f:imageDigest": {},
        "f:incompatible": {}, "f:softRebootCapable": {}, "f:timestamp": {}, "f:version": {}
    });
    let cond = json!({"f:lastTransitionTime": {}, "f:message": {}, "f:observedGeneration": {}, "f:reason": {}, "f:status": {}, "f:type": {}});
    json!({
        "manager": DAEMON_MANAGER, "operation": "Apply", "apiVersion": "node.bootc.dev/v1alpha1",
        "time": "2026-03-02T11:55:00Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {"f:status": {
            "f:booted": entry, "f:bootId": {}, "f:downloadOnlySupported": {},
            "f:observedGeneration": {}, "f:rollback": entry, "f:staged": entry,
            "f:conditions": {
                "k:{\"type\":\"Degraded\"}": cond, "k:{\"type\":\"Idle\"}": cond,
                "k:{\"type\":\"UpToDate\"}": cond
            }
        }}
    })
}

/// The long way: Kubernetes' full type, read as the operator reads a Node,
/// then trimmed as the cache does.
fn node_full(json: &str) -> Node {
    let full: k8s_openapi::api::core::v1::Node = serde_json::from_str(json).unwrap();
    let mut node = Node::from(full);
    crate::runtime::strip_node(&mut node);
    node
}

fn node_wire(json: &str) -> Node {
    serde_json::from_str::<NodeWire>(json).unwrap().into()
}

fn bootc_node_full(json: &str) -> BootcNode {
    let mut bn: BootcNode = serde_json::from_str(json).unwrap();
    assert_eq!(bn.status.as_ref().unwrap().history.len(), 2, "the sample's");
    crate::runtime::strip_bootc_node(&mut bn);
    bn
}

fn bootc_node_wire(json: &str) -> BootcNode {
    serde_json::from_str::<BootcNodeWire>(json).unwrap().into()
}

/// A BootcNode, all of it, as something to compare (the type has no
/// `PartialEq`; a field added to it fails to compile here).
fn whole(bn: BootcNode) -> (ObjectMeta, BootcNodeSpec, Option<BootcNodeStatus>) {
    let BootcNode {
        metadata,
        spec,
        status,
    } = bn;
    (metadata, spec, status)
}

/// The object of an event that carries one.
fn object<K: Clone>(event: Event<std::sync::Arc<K>>) -> K {
    match event {
        Event::Apply(obj) | Event::Delete(obj) | Event::InitApply(obj) => (*obj).clone(),
        Event::Init | Event::InitDone => panic!("no object"),
    }
}

/// The keys `value` serializes with (its unset fields are left out).
fn keys(value: &impl Serialize) -> Vec<String> {
    match serde_json::to_value(value).unwrap() {
        Value::Object(map) => map.keys().cloned().collect(),
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn node_sample_sets_every_kept_field() {
    let node = node_full(&node_json().to_string());
    let mut meta = keys(&node.metadata);
    meta.sort();
    assert_eq!(
        meta,
        [
            "annotations",
            "creationTimestamp",
            "deletionGracePeriodSeconds",
            "deletionTimestamp",
            "finalizers",
            "generateName",
            "generation",
            "labels",
            "name",
            "namespace",
            "ownerReferences",
            "resourceVersion",
            "selfLink",
            "uid"
        ]
    );
    assert_eq!(keys(node.status.as_ref().unwrap()), ["conditions"]);
    assert_eq!(keys(node.spec.as_ref().unwrap()), ["unschedulable"]);
    assert_eq!(node.annotations().len(), 2, "ours only");
}

#[test]
fn a_node_decodes_as_it_is_cached() {
    let json = node_json().to_string();
    assert_eq!(node_wire(&json), node_full(&json));
}

#[test]
fn a_bare_node_decodes_as_it_is_cached() {
    // No annotations, spec or status; and one without metadata at all.
    for json in [
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}"#,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","annotations":{"a":"b"}},"status":{}}"#,
        r#"{"apiVersion":"v1","kind":"Node"}"#,
    ] {
        assert_eq!(node_wire(json), node_full(json), "{json}");
    }
}

#[test]
fn a_bootc_node_decodes_as_it_is_cached() {
    let json = bootc_node_json().to_string();
    let bn = bootc_node_wire(&json);
    assert!(bn.status.is_some() && bn.metadata.owner_references.is_some());
    assert_eq!(bn.annotations().len(), 3, "a BootcNode keeps all");
    assert!(
        bn.status.as_ref().unwrap().history.is_empty(),
        "nor its history"
    );
    assert_eq!(whole(bn), whole(bootc_node_full(&json)));
}

/// The room a list holds beyond its length.
fn spare<T>(list: &[T], room: usize) -> usize {
    room - list.len()
}

#[test]
fn a_decoded_object_keeps_no_spare_room_in_its_lists() {
    let node = node_wire(&node_json().to_string());
    let conditions = node.status.as_ref().unwrap().conditions.as_ref().unwrap();
    let finalizers = node.metadata.finalizers.as_ref().unwrap();
    let owners = node.metadata.owner_references.as_ref().unwrap();
    assert_eq!(
        [
            spare(conditions, conditions.capacity()),
            spare(finalizers, finalizers.capacity()),
            spare(owners, owners.capacity()),
        ],
        [0, 0, 0],
        "a Node's conditions ({}), finalizers, owner references",
        conditions.len()
    );

    let bn = bootc_node_wire(&bootc_node_json().to_string());
    let status = bn.status.as_ref().unwrap();
    let owners = bn.metadata.owner_references.as_ref().unwrap();
    assert_eq!(
        [
            spare(&status.conditions, status.conditions.capacity()),
            spare(&status.host_updaters, status.host_updaters.capacity()),
            spare(owners, owners.capacity()),
        ],
        [0, 0, 0],
        "a BootcNode's conditions, host updaters, owner references"
    );
}

#[test]
fn a_watch_event_decodes_as_it_is_cached() {
    let line = json!({"type": "MODIFIED", "object": node_json()}).to_string();
    let (WatchEvent::Modified(wire), WatchEvent::Modified(full)) = (
        serde_json::from_str::<WatchEvent<NodeWire>>(&line).unwrap(),
        serde_json::from_str::<WatchEvent<k8s_openapi::api::core::v1::Node>>(&line).unwrap(),
    ) else {
        panic!("not a MODIFIED event");
    };
    let mut full = Node::from(full);
    crate::runtime::strip_node(&mut full);
    assert_eq!(object::<Node>(real(Event::Apply(wire))), full);

    let line = json!({"type": "ADDED", "object": bootc_node_json()}).to_string();
    let Ok(WatchEvent::Added(wire)) = serde_json::from_str::<WatchEvent<BootcNodeWire>>(&line)
    else {
        panic!("not an ADDED event");
    };
    let full = bootc_node_full(&bootc_node_json().to_string());
    let bn: BootcNode = object(real(Event::InitApply(wire)));
    assert_eq!(whole(bn), whole(full));
}

#[test]
fn wire_types_are_listed_and_watched_as_the_real_kinds() {
    assert_eq!(NodeWire::url_path(&(), None), Node::url_path(&(), None));
    assert_eq!(NodeWire::kind(&()), "Node");
    assert_eq!(
        BootcNodeWire::url_path(&(), None),
        BootcNode::url_path(&(), None)
    );
    assert_eq!(BootcNodeWire::api_version(&()), BootcNode::api_version(&()));
    assert_eq!(BootcNodeWire::kind(&()), "BootcNode");
}

/// Microseconds per call of `decode`: the best of five batches of `rounds`
/// calls (the least disturbed by whatever else the machine runs).
fn micros<T>(rounds: u32, decode: impl Fn() -> T) -> f64 {
    let batch = || {
        let started = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(decode());
        }
        started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
    };
    (0..5).map(|_| batch()).fold(f64::INFINITY, f64::min)
}

#[test]
fn wire_decode_cost() {
    // Printed, never asserted: meaningful in release only (a few rounds
    // otherwise, to keep the debug suite quick).
    let rounds = if cfg!(debug_assertions) { 4 } else { 2000 };
    let node = node_json().to_string();
    let bn = bootc_node_json().to_string();
    println!(
        "Node ({} bytes): full {:.1} µs, wire {:.1} µs; BootcNode ({} bytes): full {:.1} µs, wire {:.1} µs",
        node.len(),
        micros(rounds, || node_full(&node)),
        micros(rounds, || node_wire(&node)),
        bn.len(),
        micros(rounds, || bootc_node_full(&bn)),
        micros(rounds, || bootc_node_wire(&bn)),
    );
}

/// Two nodes' BootcNodes, decoded as the cache decodes them, hold one copy
/// of the texts a pool's nodes share (`api::Shared`): the images, digests
/// and versions of their boot entries, their desired image, their
/// conditions' words.
#[test]
fn two_nodes_share_the_texts_of_their_pool() {
    let mut other = bootc_node_json();
    other["metadata"]["name"] = json!("worker-18");
    let a = bootc_node_wire(&bootc_node_json().to_string());
    let b = bootc_node_wire(&other.to_string());
    let same = |x: &str, y: &str| x.as_ptr() == y.as_ptr();
    assert!(same(&a.spec.desired_image, &b.spec.desired_image));
    let (sa, sb) = (a.status.unwrap(), b.status.unwrap());
    let (ea, eb) = (sa.booted.unwrap(), sb.booted.unwrap());
    assert!(same(
        ea.image.as_deref().unwrap(),
        eb.image.as_deref().unwrap()
    ));
    assert!(same(
        ea.version.as_deref().unwrap(),
        eb.version.as_deref().unwrap()
    ));
    for (ca, cb) in sa.conditions.iter().zip(&sb.conditions) {
        assert!(same(&ca.type_, &cb.type_) && same(&ca.reason, &cb.reason));
        assert!(same(&ca.message, &cb.message), "{}", ca.message);
    }
    assert!(!same(&a.metadata.name.unwrap(), &b.metadata.name.unwrap()));
}
