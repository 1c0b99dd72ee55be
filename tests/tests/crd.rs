//! The CRDs against a real API server: schema validation of invalid pools,
//! round trips, and the status subresource.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use api::{BootcNode, BootcNodePool, BootcNodePoolStatus, BootcNodeStatus, ConditionType, Reason};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tests::{ControlPlane, k8s};

fn pool(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "node.bootc.dev/v1alpha1",
        "kind": "BootcNodePool",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn valid_spec() -> Value {
    json!({
        "nodeSelector": {"matchLabels": {"pool": "workers"}},
        "image": {"ref": "quay.io/acme/os:prod"},
        "rollout": {"maxUnavailable": 1},
    })
}

/// A control plane with the CRDs installed, and an untyped API of `K` (so
/// that invalid objects can be sent).
async fn dynamic_api<K>() -> (ControlPlane, Api<kube::api::DynamicObject>)
where
    K: kube::Resource<DynamicType = ()>,
{
    let cp = ControlPlane::start().await.unwrap();
    let client = cp.admin().await.unwrap();
    k8s::install_crds(&client).await.unwrap();
    let api = Api::all_with(client, &kube::api::ApiResource::erase::<K>(&()));
    (cp, api)
}

/// Creating `obj` fails with an error that names `field` and `rule`.
async fn assert_refused(
    api: &Api<kube::api::DynamicObject>,
    obj: kube::api::DynamicObject,
    field: &str,
    rule: &str,
) {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let err = api
        .create(&PostParams::default(), &obj)
        .await
        .expect_err(&format!("{name}: {:?} was accepted", obj.data));
    let text = err.to_string();
    assert!(
        text.contains(field) && text.contains(rule),
        "{name}: error does not name {field} and {rule:?}: {text}"
    );
}

#[tokio::test]
async fn invalid_pools_are_rejected_naming_the_field() {
    let (_cp, pools) = dynamic_api::<BootcNodePool>().await;

    let with = |path: &[&str], value: Value| {
        let mut spec = valid_spec();
        let mut cursor = &mut spec;
        for key in &path[..path.len() - 1] {
            cursor = &mut cursor[*key];
        }
        cursor[path[path.len() - 1]] = value;
        spec
    };
    let without = |key: &str| {
        let mut spec = valid_spec();
        spec.as_object_mut().unwrap().remove(key);
        spec
    };

    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "max-unavailable-negative",
            with(&["rollout", "maxUnavailable"], json!(-1)),
            "spec.rollout.maxUnavailable",
        ),
        (
            "max-unhealthy-zero",
            with(&["rollout", "maxUnhealthy"], json!(0)),
            "spec.rollout.maxUnhealthy",
        ),
        (
            "max-unhealthy-zero-percent",
            with(&["rollout", "maxUnhealthy"], json!("0%")),
            "spec.rollout.maxUnhealthy",
        ),
        (
            "max-unavailable-101-percent",
            with(&["rollout", "maxUnavailable"], json!("101%")),
            "spec.rollout.maxUnavailable",
        ),
        (
            "max-unavailable-word",
            with(&["rollout", "maxUnavailable"], json!("abc")),
            "spec.rollout.maxUnavailable",
        ),
        (
            "max-concurrent-staging-zero",
            with(&["rollout", "maxConcurrentStaging"], json!(0)),
            "spec.rollout.maxConcurrentStaging",
        ),
        (
            "stage-ahead-negative",
            with(&["rollout", "stageAhead"], json!(-1)),
            "spec.rollout.stageAhead",
        ),
        (
            "max-unavailable-bare-number-string",
            with(&["rollout", "maxUnavailable"], json!("5")),
            "spec.rollout.maxUnavailable",
        ),
        (
            "image-empty",
            with(&["image", "ref"], json!("")),
            "spec.image.ref",
        ),
        (
            "image-uppercase-path",
            with(&["image", "ref"], json!("quay.io/Acme/OS:1")),
            "spec.image.ref",
        ),
        (
            "image-spaces",
            with(&["image", "ref"], json!("quay.io/acme/os :1")),
            "spec.image.ref",
        ),
        (
            "image-transport",
            with(&["image", "ref"], json!("docker://quay.io/acme/os:1")),
            "spec.image.ref",
        ),
        (
            "image-short-digest",
            with(&["image", "ref"], json!("quay.io/acme/os@sha256:abc")),
            "spec.image.ref",
        ),
        (
            // The grammar allows sha512; the controller and the helper refuse
            // it, so the schema does too.
            "image-sha512",
            with(
                &["image", "ref"],
                json!(format!("quay.io/acme/os@sha512:{}", "a".repeat(128))),
            ),
            "spec.image.ref",
        ),
        (
            "selector-operator-unknown",
            with(
                &["nodeSelector"],
                json!({"matchExpressions": [{"key": "pool", "operator": "Equals", "values": ["a"]}]}),
            ),
            "spec.nodeSelector.matchExpressions",
        ),
        (
            "selector-operator-lowercase",
            with(
                &["nodeSelector"],
                json!({"matchExpressions": [{"key": "pool", "operator": "in", "values": ["a"]}]}),
            ),
            "operator",
        ),
        (
            "image-leading-dash",
            with(&["image", "ref"], json!("--apply")),
            "spec.image.ref",
        ),
        (
            "reboot-policy-unknown",
            with(&["disruption"], json!({"rebootPolicy": "Sometimes"})),
            "spec.disruption.rebootPolicy",
        ),
        (
            "no-node-selector",
            without("nodeSelector"),
            "spec.nodeSelector",
        ),
        ("no-image", without("image"), "spec.image"),
        (
            "pull-secret-empty-name",
            with(
                &["pullSecretRef"],
                json!({"name": "", "namespace": "bootc-operator"}),
            ),
            "spec.pullSecretRef.name",
        ),
        (
            "pull-secret-no-namespace",
            with(&["pullSecretRef"], json!({"name": "x"})),
            "spec.pullSecretRef.namespace",
        ),
        (
            "drain-timeout-zero",
            with(&["rollout", "drainTimeoutSeconds"], json!(0)),
            "spec.rollout.drainTimeoutSeconds",
        ),
        (
            "staging-deadline-zero",
            with(&["rollout", "deadlines"], json!({"stagingSeconds": 0})),
            "spec.rollout.deadlines.stagingSeconds",
        ),
        (
            "silent-deadline-over-a-week",
            with(
                &["rollout", "deadlines"],
                json!({"daemonSilentSeconds": 604801}),
            ),
            "spec.rollout.deadlines.daemonSilentSeconds",
        ),
    ];

    // Rules only CEL can say (they span fields), and CEL's messages for
    // rules a pattern could say but not explain: (name, spec, field, rule).
    let expression = |operator: &str, values: Value| {
        with(
            &["nodeSelector"],
            json!({"matchExpressions": [{"key": "pool", "operator": operator, "values": values}]}),
        )
    };
    let window = |w: Value| with(&["rollout", "maintenanceWindows"], json!([w]));
    let cel_cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "selector-in-without-values",
            expression("In", json!([])),
            "spec.nodeSelector.matchExpressions[0]",
            "In and NotIn need at least one value",
        ),
        (
            "selector-exists-with-values",
            expression("Exists", json!(["a"])),
            "spec.nodeSelector.matchExpressions[0]",
            "Exists and DoesNotExist take none",
        ),
        (
            "image-transport-explained",
            with(&["image", "ref"], json!("docker://quay.io/acme/os:1")),
            "spec.image.ref",
            "no transport prefix",
        ),
        (
            "window-day-unknown",
            window(json!({"days": ["Funday"], "start": "02:00", "duration": "4h"})),
            "spec.rollout.maintenanceWindows[0].days[0]",
            "Unsupported value",
        ),
        (
            "window-start-malformed",
            window(json!({"start": "25:00", "duration": "4h"})),
            "spec.rollout.maintenanceWindows[0].start",
            "should match",
        ),
        (
            "window-duration-malformed",
            window(json!({"start": "02:00", "duration": "4 hours"})),
            "spec.rollout.maintenanceWindows[0].duration",
            "should match",
        ),
        (
            "window-duration-zero",
            window(json!({"start": "02:00", "duration": "0h"})),
            "spec.rollout.maintenanceWindows[0].duration",
            "more than zero and at most 168h",
        ),
        (
            "window-duration-over-a-week",
            window(json!({"start": "02:00", "duration": "168h1m"})),
            "spec.rollout.maintenanceWindows[0].duration",
            "more than zero and at most 168h",
        ),
        (
            "blackout-end-before-start",
            with(
                &["rollout", "blackouts"],
                json!([{"start": "2026-12-20T00:00", "end": "2026-12-19T23:59"}]),
            ),
            "spec.rollout.blackouts[0]",
            "a blackout's end must come after its start",
        ),
        (
            "blackout-start-malformed",
            with(
                &["rollout", "blackouts"],
                json!([{"start": "2026-12-20 00:00", "end": "2027-01-04T08:00"}]),
            ),
            "spec.rollout.blackouts[0].start",
            "should match",
        ),
        (
            "paused-until-not-a-time",
            with(&["rollout", "pausedUntil"], json!("next monday")),
            "spec.rollout.pausedUntil",
            "date-time",
        ),
        (
            "depends-on-not-a-name",
            with(&["rollout", "dependsOn"], json!(["Infra_Pool"])),
            "spec.rollout.dependsOn[0]",
            "should match",
        ),
        (
            "depends-on-twice",
            with(&["rollout", "dependsOn"], json!(["infra", "infra"])),
            "spec.rollout.dependsOn[1]",
            "Duplicate value",
        ),
        (
            "order-operator-unknown",
            with(
                &["rollout", "order"],
                json!([{"selector": {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}}]),
            ),
            "spec.rollout.order[0].selector.matchExpressions[0].operator",
            "Unsupported value",
        ),
        (
            "order-without-selector",
            with(&["rollout", "order"], json!([{}])),
            "spec.rollout.order[0].selector",
            "Required value",
        ),
        (
            "on-drain-timeout-unknown",
            with(&["rollout", "onDrainTimeout"], json!("Sometimes")),
            "spec.rollout.onDrainTimeout",
            "Unsupported value",
        ),
        (
            "on-delete-unknown",
            with(&["onDelete"], json!("Abandon")),
            "spec.onDelete",
            "Unsupported value",
        ),
        (
            "window-without-start",
            window(json!({"duration": "4h"})),
            "spec.rollout.maintenanceWindows[0].start",
            "Required value",
        ),
        (
            "max-unavailable-negative-explained",
            with(&["rollout", "maxUnavailable"], json!(-1)),
            "spec.rollout.maxUnavailable",
            "a number of nodes (0 or more), or a percentage from 0% to 100%",
        ),
        (
            "batches-zero",
            with(&["rollout", "batches"], json!([0, "50%"])),
            "spec.rollout.batches[0]",
            "must be a number of nodes of at least 1, or a percentage from 1% to 100%",
        ),
        (
            "batches-not-a-percentage",
            with(&["rollout", "batches"], json!([1, "half"])),
            "spec.rollout.batches[1]",
            "must be a number of nodes of at least 1, or a percentage from 1% to 100%",
        ),
        (
            "success-threshold-over-100",
            with(&["rollout", "successThreshold"], json!(101)),
            "spec.rollout.successThreshold",
            "should be less than or equal to 100",
        ),
        (
            "health-timeout-within-settle",
            with(
                &["health"],
                json!({"settleSeconds": 600, "timeoutSeconds": 600}),
            ),
            "spec.health.timeoutSeconds",
            "must be greater than spec.health.settleSeconds",
        ),
        (
            "health-rollback-updated-without-rollback",
            with(&["health"], json!({"rollbackUpdated": true})),
            "spec.health.rollbackUpdated",
            "needs spec.health.onFailure: Rollback",
        ),
        (
            "health-on-failure-unknown",
            with(&["health"], json!({"onFailure": "Retry"})),
            "spec.health.onFailure",
            "Unsupported value",
        ),
        (
            "health-condition-status-unknown",
            with(
                &["health"],
                json!({"conditions": [{"type": "GPUHealthy", "status": "Yes"}]}),
            ),
            "spec.health.conditions[0].status",
            "Unsupported value",
        ),
        (
            "health-pods-without-namespace",
            with(
                &["health"],
                json!({"pods": [{"selector": {"matchLabels": {"app": "driver"}}}]}),
            ),
            "spec.health.pods[0].namespace",
            "Required value",
        ),
        (
            "alert-gate-not-a-url",
            with(
                &["rollout", "alertGate"],
                json!({"prometheusURL": "prometheus:9090"}),
            ),
            "spec.rollout.alertGate.prometheusURL",
            "must be an http or https URL with a host",
        ),
        (
            "alert-gate-other-scheme",
            with(
                &["rollout", "alertGate"],
                json!({"prometheusURL": "ftp://prometheus:9090"}),
            ),
            "spec.rollout.alertGate.prometheusURL",
            "must be an http or https URL with a host",
        ),
        (
            "alert-gate-matcher-unquoted",
            with(
                &["rollout", "alertGate"],
                json!({"prometheusURL": "http://prometheus:9090", "matchers": ["severity=critical"]}),
            ),
            "spec.rollout.alertGate.matchers[0]",
            "must be a PromQL label matcher",
        ),
        (
            "alert-gate-no-endpoint",
            with(
                &["rollout", "alertGate"],
                json!({"matchers": ["severity=\"critical\""]}),
            ),
            "spec.rollout.alertGate",
            "needs exactly one of endpoint",
        ),
        (
            "alert-gate-endpoint-and-url",
            with(
                &["rollout", "alertGate"],
                json!({"endpoint": "main", "prometheusURL": "http://prometheus:9090"}),
            ),
            "spec.rollout.alertGate",
            "needs exactly one of endpoint",
        ),
        (
            "alert-gate-endpoint-not-a-name",
            with(
                &["rollout", "alertGate"],
                json!({"endpoint": "http://prometheus:9090"}),
            ),
            "spec.rollout.alertGate.endpoint",
            "should match",
        ),
        (
            "silences-endpoint-not-a-name",
            with(
                &["rollout", "silences"],
                json!({"endpoint": "http://alertmanager:9093"}),
            ),
            "spec.rollout.silences.endpoint",
            "should match",
        ),
        (
            "silences-without-endpoint",
            with(&["rollout", "silences"], json!({"nodeLabel": "node"})),
            "spec.rollout.silences.endpoint",
            "Required value",
        ),
        (
            "silences-node-label-not-a-label",
            with(
                &["rollout", "silences"],
                json!({"endpoint": "main", "nodeLabel": "node-name"}),
            ),
            "spec.rollout.silences.nodeLabel",
            "must be a Prometheus label name",
        ),
        (
            "silences-matcher-unquoted",
            with(
                &["rollout", "silences"],
                json!({"endpoint": "main", "matchers": ["severity!=critical"]}),
            ),
            "spec.rollout.silences.matchers[0]",
            "must be a label matcher",
        ),
        (
            "health-nodes-to-fail-image-zero",
            with(&["health"], json!({"nodesToFailImage": 0})),
            "spec.health.nodesToFailImage",
            "should be greater than or equal to 1",
        ),
        (
            "blocking-pods-operator-unknown",
            with(
                &["disruption", "blockingPods"],
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["etl"]}]}}),
            ),
            "spec.disruption.blockingPods.selector.matchExpressions[0].operator",
            "Unsupported value",
        ),
        (
            "max-unhealthy-zero-explained",
            with(&["rollout", "maxUnhealthy"], json!(0)),
            "spec.rollout.maxUnhealthy",
            "a number of nodes of at least 1, or a percentage from 1% to 100%",
        ),
    ];
    let cases = cases
        .into_iter()
        .map(|(name, spec, field)| (name, spec, field, ""))
        .chain(cel_cases);
    for (name, spec, field, rule) in cases {
        let obj = serde_json::from_value(pool(name, spec.clone())).unwrap();
        assert_refused(&pools, obj, field, rule).await;
    }

    // The valid one is accepted, so the rejections above are about the field.
    let obj: kube::api::DynamicObject =
        serde_json::from_value(pool("valid", valid_spec())).unwrap();
    pools.create(&PostParams::default(), &obj).await.unwrap();
    // Every selector operator the controller understands is accepted.
    for op in api::SELECTOR_OPERATORS {
        let values = if op.ends_with("In") {
            json!(["a"])
        } else {
            json!(null)
        };
        let name = format!("valid-op-{}", op.to_lowercase());
        let obj: kube::api::DynamicObject = serde_json::from_value(pool(
            &name,
            with(
                &["nodeSelector"],
                json!({"matchExpressions": [{"key": "pool", "operator": op, "values": values}]}),
            ),
        ))
        .unwrap();
        pools
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("operator {op} rejected: {e}"));
    }
    // Windows as a person writes them: a weekend night in Paris, a daily
    // hour and a half in UTC, a whole week.
    let windows = json!([
        {"days": ["Saturday", "Sunday"], "start": "22:00", "duration": "6h", "timeZone": "Europe/Paris"},
        {"start": "00:30", "duration": "1h30m"},
        {"days": ["Monday"], "start": "00:00", "duration": "168h"},
    ]);
    let mut spec = with(&["rollout", "maintenanceWindows"], windows);
    // And the other rollout rules as a person writes them.
    spec["rollout"]["dependsOn"] = json!(["infra"]);
    spec["rollout"]["order"] = json!([{"selector": {"matchLabels": {"zone": "a"}}}]);
    spec["rollout"]["onDrainTimeout"] = json!("Release");
    spec["onDelete"] = json!("Finish");
    spec["rollout"]["pausedUntil"] = json!("2027-01-04T08:00:00Z");
    spec["rollout"]["blackouts"] = json!([
        {"start": "2026-12-20T00:00", "end": "2027-01-04T08:00", "timeZone": "Europe/Paris"},
        {"start": "2026-11-26T00:00", "end": "2026-11-27T00:00"},
    ]);
    spec["rollout"]["maxUnhealthy"] = json!("10%");
    spec["rollout"]["alertGate"] = json!({
        "prometheusURL": "http://prometheus.monitoring.svc:9090/",
        "matchers": ["severity=\"critical\"", "alertname=~\"Node.*\"", "team!=\"\""],
    });
    spec["disruption"]["blockingPods"] = json!({
        "selector": {"matchLabels": {"app": "etl"}},
        "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["data"]}]},
    });
    let obj: kube::api::DynamicObject =
        serde_json::from_value(pool("valid-windows", spec)).unwrap();
    pools
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("windows rejected: {e}"));
    let limits = [
        ("maxUnavailable", json!(3)),
        ("maxUnavailable", json!("25%")),
        ("maxUnavailable", json!("100%")),
        ("maxUnavailable", json!("1%")),
        ("maxUnavailable", json!(0)),
        ("maxUnavailable", json!("0%")),
        ("maxUnhealthy", json!(1)),
        ("maxUnhealthy", json!("10%")),
    ];
    for (i, (field, ok)) in limits.into_iter().enumerate() {
        let name = format!("valid-{}-{i}", field.to_lowercase());
        let obj: kube::api::DynamicObject =
            serde_json::from_value(pool(&name, with(&["rollout", field], ok.clone()))).unwrap();
        pools
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("{ok} rejected: {e}"));
    }
}

#[tokio::test]
async fn pool_round_trips_and_status_does_not_bump_generation() {
    let cp = ControlPlane::start().await.unwrap();
    let client = cp.admin().await.unwrap();
    k8s::install_crds(&client).await.unwrap();
    let pools: Api<BootcNodePool> = Api::all(client.clone());

    let digest = format!("sha256:{}", "a".repeat(64));
    let mut pool: BootcNodePool = serde_json::from_value(pool(
        "workers",
        json!({
            "nodeSelector": {"matchLabels": {"pool": "workers"}},
            "image": {"ref": format!("quay.io/acme/os@{digest}")},
            "rollout": {"maxUnavailable": "25%", "paused": true, "drainTimeoutSeconds": 30},
            "disruption": {"rebootPolicy": "AllowSoftReboot"},
            "pullSecretRef": {"name": "pull", "namespace": "bootc-operator"},
        }),
    ))
    .unwrap();
    let created = pools.create(&PostParams::default(), &pool).await.unwrap();
    pool.metadata = created.metadata.clone();
    assert_eq!(created.spec, pool.spec, "spec changed in the round trip");
    let generation = created.metadata.generation;

    // Defaults are filled by the schema.
    let minimal: BootcNodePool = serde_json::from_value(pool_json_minimal()).unwrap();
    let created_min = pools
        .create(&PostParams::default(), &minimal)
        .await
        .unwrap();
    assert_eq!(
        created_min.spec.rollout.max_unavailable,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)
    );
    assert_eq!(created_min.spec.rollout.drain_timeout_seconds, 600);

    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff_now());
    let mut status = BootcNodePoolStatus {
        observed_generation: generation,
        target_digest: Some(digest.clone()),
        target_image: Some(format!("quay.io/acme/os@{digest}")),
        target_platform_digests: vec![digest.clone()],
        target_kubelet_version: Some("1.37.2".into()),
        target_summary: Some("9.4 (sha256:aaaaaaaaaaaa)".into()),
        deployed_digest: None,
        update_available: true,
        node_count: 3,
        updated_count: 1,
        updating_count: 2,
        degraded_count: 0,
        next_maintenance_window: Some(now.clone()),
        conditions: vec![],
        failed_images: vec![api::FailedImage {
            reference: "quay.io/acme/os:9.4".into(),
            digest: digest.clone(),
            node: "n1".into(),
            check: "pod gpu/driver-x Ready not shown within timeoutSeconds 600".into(),
            at: now.clone(),
        }],
        batch: Some(api::BatchStatus {
            digest: digest.clone(),
            step: 1,
            limit: 2,
            soaking_since: Some(now.clone()),
            healthy: 2,
            updated: 2,
        }),
        rollouts: vec![api::RolloutRecord {
            digest: digest.clone(),
            image: format!("quay.io/acme/os@{digest}"),
            platform_digests: vec![digest.clone()],
            started: now.clone(),
            nodes: 3,
            ended: Some(now.clone()),
            outcome: Some(api::RolloutOutcome::Completed),
            updated: 3,
            failed: 0,
        }],
        dependencies: vec![api::PoolDependency {
            name: "infra".into(),
            uid: Some("0b6c8f1e-1d6e-4c1a-9d63-6f3f2b1e7a10".into()),
            created: Some(now.clone()),
        }],
    };
    api::conditions::apply(
        &mut status.conditions,
        &api::conditions::ConditionUpdate::new(
            ConditionType::UpToDate,
            false,
            Reason::Paused,
            "1/3 updated; 2 staged",
        ),
        generation,
        &now,
    );
    let patched = pools
        .patch_status(
            "workers",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({
                "apiVersion": "node.bootc.dev/v1alpha1",
                "kind": "BootcNodePool",
                "status": status,
            })),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.generation, generation,
        "status write bumped generation"
    );
    assert_eq!(
        patched.status.as_ref(),
        Some(&status),
        "status did not round-trip"
    );

    // BootcNode status, every field set, is accepted by the schema as is.
    let nodes: Api<BootcNode> = Api::all(client.clone());
    let bn: BootcNode = serde_json::from_value(json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
        "metadata": {"name": "worker-1"},
        "spec": {"desiredImage": format!("quay.io/acme/os@{digest}"), "desiredImageState": "Booted",
                 "rebootPolicy": "AllowSoftReboot",
                 "pullSecretRef": {"name": "pull", "namespace": "bootc-operator"},
                 "pullSecretHash": "sha256:00"}
    }))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &bn).await.unwrap();
    assert_eq!(created.spec, bn.spec);
    let entry = api::BootEntryStatus {
        image: Some(api::Shared::from(format!("quay.io/acme/os@{digest}"))),
        image_digest: Some(digest.as_str().into()),
        version: Some("9.4".into()),
        timestamp: Some("2026-03-20T12:00:00Z".into()),
        architecture: Some("amd64".into()),
        soft_reboot_capable: true,
        incompatible: false,
        download_only: true,
    };
    let mut bn_status = BootcNodeStatus {
        observed_generation: created.metadata.generation,
        booted: Some(entry.clone()),
        staged: Some(entry.clone()),
        rollback: Some(entry),
        boot_id: Some("0f0e".into()),
        download_only_supported: Some(true),
        host_updaters: vec![api::host_updaters::BOOTC_TIMER.to_owned()],
        conditions: vec![],
        history: vec![api::NodeUpdate {
            image: format!("quay.io/acme/os@{digest}"),
            digest: Some(digest.clone()),
            version: Some("9.4".into()),
            staged: Some(now.clone()),
            booted: Some(now.clone()),
            outcome: Some(api::UpdateOutcome::Failed),
            reason: Some("pod gpu/driver-x Ready not shown within timeoutSeconds 600".into()),
        }],
        landlock: Some(api::LandlockStatus {
            state: api::LandlockState::Partial,
            abi: Some(4),
            message: Some("partially enforced (ABI 4)".into()),
        }),
        daemon: Some(api::DaemonStatus {
            version: "0.1.0".into(),
            contract: api::daemon_contract::CONTRACT,
        }),
    };
    api::conditions::apply(
        &mut bn_status.conditions,
        &api::conditions::ConditionUpdate::new(
            ConditionType::Idle,
            false,
            Reason::Staged,
            "Image staged",
        ),
        created.metadata.generation,
        &now,
    );
    let patched = nodes
        .patch_status(
            "worker-1",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({"apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode", "status": bn_status})),
        )
        .await
        .unwrap();
    assert_eq!(patched.status.as_ref(), Some(&bn_status));
    assert_eq!(patched.metadata.generation, created.metadata.generation);

    // kubectl shows the printer columns.
    let out = cp.kubectl().args(["get", "bnp,bn"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for column in [
        "TARGET", "NODES", "UPDATED", "UPDATING", "READY", "STATUS", "POOL", "PHASE", "SINCE",
        "ALLOWED", "VERSION",
    ] {
        assert!(
            text.contains(column),
            "kubectl get is missing column {column}:\n{text}"
        );
    }
    // A 120-column terminal holds every line; -o wide adds the references.
    for line in text.lines() {
        assert!(line.len() <= 120, "{} columns:\n{text}", line.len());
    }
    let wide = cp
        .kubectl()
        .args(["get", "bootc", "-o", "wide"])
        .output()
        .unwrap();
    let wide = String::from_utf8_lossy(&wide.stdout);
    for column in [
        "IMAGE",
        "TARGET DIGEST",
        "DEPLOYED",
        "DESIRED",
        "BOOTED",
        "STAGED",
    ] {
        assert!(wide.contains(column), "-o wide lacks {column}:\n{wide}");
    }
    assert!(
        wide.contains("@sha256:"),
        "full references in -o wide:\n{wide}"
    );
    assert!(
        text.contains(Reason::Staged.as_str()),
        "BootcNode state not shown:\n{text}"
    );
    let _ = Duration::from_secs(0);
}

fn pool_json_minimal() -> Value {
    pool(
        "minimal",
        json!({"nodeSelector": {}, "image": {"ref": "registry.example/os:1"}}),
    )
}

fn jiff_now() -> jiff::Timestamp {
    // Whole seconds: the API server stores times at second precision.
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap()
}

/// YAML's empty value is null: `maxUnavailable:` with nothing after it (and
/// any other field left empty) must not leave a null the controller cannot
/// read. The schema says these fields are not nullable, so the API server
/// drops the null and applies the default; every pool still lists as a
/// typed object (a kube watcher fails its whole LIST on one bad object).
#[tokio::test]
async fn empty_yaml_values_are_defaulted_not_stored_as_null() {
    let cp = ControlPlane::start().await.unwrap();
    let client = cp.admin().await.unwrap();
    k8s::install_crds(&client).await.unwrap();

    let manifest = "\
apiVersion: node.bootc.dev/v1alpha1
kind: BootcNodePool
metadata:
  name: empty-values
spec:
  nodeSelector:
    matchLabels:
      pool: workers
  image:
    ref: quay.io/acme/os:prod
  rollout:
    maxUnavailable:
    paused:
    drainTimeoutSeconds:
  disruption:
    rebootPolicy:
";
    let path = cp.dir().join("empty-values.yaml");
    std::fs::write(&path, manifest).unwrap();
    let out = cp
        .kubectl()
        .args(["apply", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // kubectl may drop the nulls itself: also send them as they are, through
    // a create and a server-side apply.
    let dynamic: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<BootcNodePool>(&()),
    );
    let nulls = json!({
        "nodeSelector": {"matchLabels": {"pool": "workers"}},
        "image": {"ref": "quay.io/acme/os:prod"},
        "rollout": {"maxUnavailable": null, "paused": null, "drainTimeoutSeconds": null},
        "disruption": {"rebootPolicy": null},
    });
    let obj: kube::api::DynamicObject =
        serde_json::from_value(pool("null-create", nulls.clone())).unwrap();
    dynamic.create(&PostParams::default(), &obj).await.unwrap();
    dynamic
        .patch(
            "null-apply",
            &PatchParams::apply("test").force(),
            &Patch::Apply(pool("null-apply", nulls)),
        )
        .await
        .unwrap();

    // The API server itself stored the default, not the null.
    for name in ["null-create", "null-apply"] {
        let raw = dynamic.get(name).await.unwrap();
        assert_eq!(
            raw.data["spec"]["rollout"]["maxUnavailable"],
            json!(1),
            "{name}: {}",
            raw.data["spec"]
        );
    }

    let pools: Api<BootcNodePool> = Api::all(client.clone());
    let listed = pools
        .list(&Default::default())
        .await
        .expect("a pool with null values breaks the typed LIST");
    for name in ["empty-values", "null-create", "null-apply"] {
        let pool = listed
            .items
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap();
        assert_eq!(
            pool.spec.rollout.max_unavailable,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1),
            "{name}"
        );
        assert!(!pool.spec.rollout.paused, "{name}");
        assert_eq!(
            pool.spec.rollout.drain_timeout_seconds,
            api::DEFAULT_DRAIN_TIMEOUT_SECONDS,
            "{name}"
        );
        assert_eq!(
            pool.spec.disruption.reboot_policy,
            api::RebootPolicy::RebootOnly,
            "{name}"
        );
    }
}

#[tokio::test]
async fn invalid_bootc_nodes_are_rejected_naming_the_field() {
    let (_cp, nodes) = dynamic_api::<BootcNode>().await;
    let digest = format!("quay.io/acme/os@sha256:{}", "a".repeat(64));
    let node = |name: &str, spec: Value| -> kube::api::DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNode",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    };
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "tag-only",
            json!({"desiredImage": "quay.io/acme/os:prod"}),
            "spec.desiredImage",
            "must be repository@sha256:<64 hex digits>",
        ),
        (
            "hash-without-secret",
            json!({"desiredImage": digest, "pullSecretHash": "abc"}),
            "spec",
            "pullSecretHash names a version of pullSecretRef: it needs pullSecretRef",
        ),
    ];
    for (name, spec, field, rule) in cases {
        assert_refused(&nodes, node(name, spec), field, rule).await;
    }
    nodes
        .create(
            &PostParams::default(),
            &node("valid", json!({"desiredImage": digest})),
        )
        .await
        .unwrap();
}
