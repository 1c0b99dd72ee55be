//! The pull secret (SECURITY.md P27, P44): the host's auth file written
//! before every pull of a new spec (never at a daemon's start), from the
//! content already read while the announced hash holds; rotations followed
//! once written; other namespaces refused; no credential bytes in the status.

use std::time::Duration;

use api::{ConditionType, Reason, SecretReference};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::collections::BTreeMap;
use tests::daemon_loop::{
    WAIT, World, daemon_requests, degraded, patch_spec, phase, spec, stages, wait_bn, world,
    world_with,
};
use tests::fake_bootc::Invocation;
use tests::fake_host::{FakeHost, image};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node, grant_pull_secrets};
use tests::require_root;

/// A `kubernetes.io/dockerconfigjson` Secret holding `content`.
fn pull_secret(name: &str, ns: &str, content: &str) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            ByteString(content.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// Waits until the host's auth file holds `content`.
async fn wait_auth(host: &FakeHost, content: &str, what: impl Fn() -> String) {
    let auth = host.layout.auth();
    let deadline = std::time::Instant::now() + WAIT;
    while std::fs::read_to_string(&auth).unwrap_or_default() != content {
        assert!(std::time::Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the fake bootc has started staging `image` and returns that
/// run (recorded as it starts, with the auth file it found).
async fn wait_stage_of(host: &FakeHost, image: &str, what: impl Fn() -> String) -> Invocation {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(run) = stages(host)
            .into_iter()
            .find(|i| i.argv.last().is_some_and(|a| a == image))
        {
            return run;
        }
        assert!(std::time::Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A BootcNode `node-1` on `image` with pull secret `pull` holding
/// `content` (and its hash), and a daemon that reported Idle.
async fn idle_with_pull_secret(
    w: &World,
    host: &FakeHost,
    image: &str,
    content: &str,
) -> (Api<Secret>, Agent) {
    let secrets: Api<Secret> = Api::namespaced(w.admin.clone(), "bootc-operator");
    grant_pull_secrets(&w.cp, &["pull"]).await.unwrap();
    let secret = secrets
        .create(
            &PostParams::default(),
            &pull_secret("pull", "bootc-operator", content),
        )
        .await
        .unwrap();
    let mut s = spec(image);
    s.pull_secret_ref = Some(SecretReference {
        name: "pull".into(),
        namespace: "bootc-operator".into(),
    });
    s.pull_secret_hash = api::pull_secret::version(&secret.metadata);
    create_bootc_node(&w.admin, "node-1", s).await.unwrap();
    let agent = Agent::start(&w.cp, host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", Reason::Idle.as_str(), |bn| {
        phase(bn) == Some(Reason::Idle.as_str())
    })
    .await;
    (secrets, agent)
}

/// Moves `node-1` to `image`; returns bootc's pull of it, once the node
/// reports it staged and not Degraded.
async fn staged(w: &World, host: &FakeHost, agent: &Agent, image: &str) -> Invocation {
    patch_spec(&w.nodes, "node-1", json!({"desiredImage": image})).await;
    let run = wait_stage_of(host, image, || {
        format!("{image} never staged:\n{}", agent.log_text())
    })
    .await;
    wait_bn(&w.nodes, "node-1", Reason::Staged.as_str(), |bn| {
        phase(bn) == Some(Reason::Staged.as_str()) && degraded(bn).is_none()
    })
    .await;
    run
}

/// Replaces the content of Secret `pull` (a rotation), as an admin would.
async fn rotate(secrets: &Api<Secret>, content: &str) -> Secret {
    secrets
        .replace(
            "pull",
            &PostParams::default(),
            &pull_secret("pull", "bootc-operator", content),
        )
        .await
        .unwrap()
}

/// A started daemon on a node that needs no pull reads no Secret and
/// writes no auth file; its first pull finds the file, after one GET. Then
/// the file is written again on every spec change before bootc pulls:
/// removed from the host (`/run` is a tmpfs; anything may clear it), it is
/// back, with the content read before (the hash is unchanged, so the Secret
/// is not read again).
#[tokio::test]
async fn the_auth_file_is_written_before_every_pull_and_never_at_start() {
    require_root!();
    let w = world_with(tests::control_plane::Options {
        audit: true,
        ..Default::default()
    })
    .await;
    let (a, b, c) = (image('a'), image('b'), image('c'));
    let host = FakeHost::start(Some(&a)).unwrap();
    let v1 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#;
    let (_secrets, agent) = idle_with_pull_secret(&w, &host, &a, v1).await;
    let secret_reads = || {
        daemon_requests(&w.cp)
            .iter()
            .filter(|r| r.contains("/secrets/"))
            .count()
    };
    assert_eq!(secret_reads(), 0, "{:?}", daemon_requests(&w.cp));
    assert!(!host.layout.auth().exists(), "auth file written at start");

    for next in [&b, &c] {
        let run = staged(&w, &host, &agent, next).await;
        assert_eq!(
            run.auth_file.as_deref(),
            Some(v1),
            "bootc pulled {next} without the pull secret's auth file:\n{}",
            agent.log_text()
        );
        assert_eq!(
            secret_reads(),
            1,
            "one read of the Secret for an unchanged hash: {:?}",
            daemon_requests(&w.cp)
        );
        // The file disappears from the host; the pull secret is unchanged.
        std::fs::remove_file(host.layout.auth()).unwrap();
    }
}

/// A spec change that arrives after the Secret was rotated but before the
/// controller announced the new content (its hash) is no failure: the host
/// keeps the announced content, the node is not Degraded and stages.
#[tokio::test]
async fn a_spec_change_before_a_rotation_is_announced_still_stages() {
    require_root!();
    let w = world().await;
    let (a, b, c) = (image('a'), image('b'), image('c'));
    let host = FakeHost::start(Some(&a)).unwrap();
    let v1 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#;
    let v2 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTI6cDI="}}}"#;
    let (secrets, agent) = idle_with_pull_secret(&w, &host, &a, v1).await;
    staged(&w, &host, &agent, &b).await;

    // Rotated, not yet announced: the BootcNode still carries v1's hash.
    rotate(&secrets, v2).await;
    let run = staged(&w, &host, &agent, &c).await;
    assert_eq!(run.auth_file.as_deref(), Some(v1), "{}", agent.log_text());
}

#[tokio::test]
async fn pull_secret_follows_rotation_and_other_namespaces_are_refused() {
    require_root!();
    let w = world().await;
    let a = image('a');
    let host = FakeHost::start(Some(&a)).unwrap();
    let v1 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#;
    let v2 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTI6cDI="}}}"#;
    let (secrets, agent) = idle_with_pull_secret(&w, &host, &a, v1).await;
    let auth = host.layout.auth();
    staged(&w, &host, &agent, &image('b')).await;

    // Rotation: the controller bumps the hash; the file, written for the
    // pull, follows.
    let rotated = rotate(&secrets, v2).await;
    let hash2 = api::pull_secret::version(&rotated.metadata).unwrap();
    patch_spec(&w.nodes, "node-1", json!({"pullSecretHash": hash2})).await;
    wait_auth(&host, v2, || {
        format!("rotation not followed:\n{}", agent.log_text())
    })
    .await;

    // A Secret outside the operator namespace is refused, and reported
    // once the node needs it (a new image to download), which it then does
    // not download.
    let c = image('c');
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"pullSecretRef": {"name": "pull", "namespace": "default"}, "pullSecretHash": null,
               "desiredImage": c}),
    )
    .await;
    let bn = wait_bn(&w.nodes, "node-1", ConditionType::Degraded.as_str(), |bn| {
        degraded(bn).is_some()
    })
    .await;
    let message = degraded(&bn).unwrap();
    assert!(
        message.contains("outside the operator namespace"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(&auth).unwrap(),
        v2,
        "auth file changed"
    );
    assert!(
        !stages(&host).iter().any(|i| i.argv.contains(&c)),
        "staged without its pull secret"
    );
}

/// A malformed pull secret is refused by the helper with the parser's
/// words, which quote what sits where a credential belongs: the BootcNode's
/// status reports the refusal without those bytes.
#[tokio::test]
async fn a_refused_pull_secret_never_puts_its_bytes_in_the_status() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    let secret = "hunter2-not-for-the-api";
    let secrets: Api<Secret> = Api::namespaced(w.admin.clone(), "bootc-operator");
    grant_pull_secrets(&w.cp, &["bad"]).await.unwrap();
    secrets
        .create(
            &PostParams::default(),
            &pull_secret(
                "bad",
                "bootc-operator",
                &format!(r#"{{"auths":{{"127.0.0.1:5000":"{secret}"}}}}"#),
            ),
        )
        .await
        .unwrap();
    let mut s = spec(&b);
    s.pull_secret_ref = Some(SecretReference {
        name: "bad".into(),
        namespace: "bootc-operator".into(),
    });
    create_bootc_node(&w.admin, "node-1", s).await.unwrap();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", ConditionType::Degraded.as_str(), |bn| {
        degraded(bn).is_some()
    })
    .await;
    let message = degraded(&bn).unwrap();
    assert!(message.contains("not a docker config JSON"), "{message}");
    let whole = serde_json::to_string(&bn.status).unwrap();
    assert!(!whole.contains(secret), "{whole}");
    assert!(
        !agent.log_text().contains(secret),
        "the daemon's log has it"
    );
    assert!(stages(&host).is_empty(), "staged without its pull secret");
}
