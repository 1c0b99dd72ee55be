//! Tag resolution against a real registry (Debian's docker-registry with TLS
//! and htpasswd auth), through the real controller binary: new digests are
//! adopted, credentials come from the pool's pull secret, and every registry
//! failure keeps the previous target and says why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use api::BootcNode;
use common::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;
use tests::registry::{TestImage, TestRegistry};

fn pull_secret(config: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "pull", "namespace": "bootc-operator",
                     "annotations": {api::labels::POOLS_ANNOTATION: "workers"}},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": ByteString(config.as_bytes().to_vec())},
    }))
    .unwrap()
}

async fn put_secret(admin: &kube::Client, config: &str) {
    let api: Api<Secret> = Api::namespaced(admin.clone(), "bootc-operator");
    match api.get_opt("pull").await.unwrap() {
        Some(old) => {
            let mut s = pull_secret(config);
            s.metadata.resource_version = old.metadata.resource_version;
            api.replace("pull", &PostParams::default(), &s)
                .await
                .unwrap();
        }
        None => {
            api.create(&PostParams::default(), &pull_secret(config))
                .await
                .unwrap();
        }
    }
}

fn amd64(version: &str) -> TestImage<'_> {
    TestImage {
        architecture: "amd64",
        version,
        marker: version,
    }
}

/// How many tag resolutions the controller has logged.
fn resolutions(c: &ControllerProc) -> usize {
    c.log_text()
        .matches("next tag resolution scheduled")
        .count()
}

/// Waits until the controller has logged `n` tag resolutions.
async fn wait_resolutions(c: &ControllerProc, n: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while resolutions(c) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} tag resolutions not logged; log:\n{}",
            c.log_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn pool_version(admin: &kube::Client) -> Option<String> {
    Api::<api::BootcNodePool>::all(admin.clone())
        .get("workers")
        .await
        .unwrap()
        .metadata
        .resource_version
}

fn target(p: &api::BootcNodePool) -> Option<String> {
    p.status.as_ref().and_then(|s| s.target_digest.clone())
}

/// Waits until the pool "workers" is Degraded for `reason`.
async fn wait_degraded(admin: &kube::Client, reason: Reason) -> api::BootcNodePool {
    wait_pool(admin, "workers", reason.as_str(), move |p| {
        degraded_reason(p).as_deref() == Some(reason.as_str())
    })
    .await
}

fn degraded_reason(p: &api::BootcNodePool) -> Option<String> {
    condition(p, ConditionType::Degraded)
        .filter(|c| c.0 == "True")
        .map(|c| c.1)
}

/// The controller `c1`, trusting the registry and resolving tags every 2 s.
fn setup(reg: &TestRegistry) -> Setup {
    let ca = reg.ca_path().display().to_string();
    Setup::default().controller(
        "c1",
        &[
            "--registry-ca-file",
            &ca,
            "--tag-resolution-interval-seconds",
            "2",
        ],
    )
}

/// The labels of a member of `tag_pool`'s pool on `arch`.
fn member(arch: &str) -> [(&str, &str); 2] {
    [("pool", "w"), (api::labels::ARCH_LABEL, arch)]
}

fn tag_pool(reg: &TestRegistry, tag: &str) -> api::BootcNodePool {
    let mut p = pool(
        "workers",
        json!({"pool": "w"}),
        &format!("{}/acme/os:{tag}", reg.host()),
        json!(1),
    );
    p.spec.pull_secret_ref = Some(api::SecretReference {
        name: "pull".into(),
        namespace: "bootc-operator".into(),
    });
    p
}

#[tokio::test]
async fn tags_are_followed_and_registry_failures_fail_closed() {
    let env = env().await;
    let mut reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    let v1 = reg
        .push_image("acme/os", "prod", &amd64("1"))
        .await
        .unwrap();
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: c,
    } = setup(&reg)
        .node("n1", &member("amd64"))
        .node("n2", &member("amd64"))
        .initial_image(format!("{}/acme/os@{v1}", reg.host()))
        .pool(tag_pool(&reg, "prod"))
        .start_in(env)
        .await;

    // The tag resolves with the pool's credentials.
    let p = wait_pool(&env.admin, "workers", "target v1", {
        let v1 = v1.clone();
        move |p| target(p).as_deref() == Some(v1.as_str())
    })
    .await;
    let status = p.status.unwrap();
    assert_eq!(
        status.target_image,
        Some(format!("{}/acme/os@{v1}", reg.host()))
    );

    // A new image under the same tag is adopted and rolled out.
    let v2 = reg
        .push_image("acme/os", "prod", &amd64("2"))
        .await
        .unwrap();
    wait_rolled(&env.admin, "workers", &v2, 2).await;

    // At rest, polls that find the same digest write nothing: the pool is
    // not rewritten across two more resolutions (interval 2 s).
    let seen = resolutions(&c);
    wait_resolutions(&c, seen + 1).await;
    let before = pool_version(&env.admin).await;
    wait_resolutions(&c, seen + 3).await;
    assert_eq!(
        pool_version(&env.admin).await,
        before,
        "the pool was written while nothing changed"
    );

    // Wrong password: the credentials condition, the target stays.
    put_secret(&env.admin, &reg.docker_config("tester", "wrong")).await;
    let p = wait_degraded(&env.admin, Reason::RegistryUnauthorized).await;
    assert_eq!(
        target(&p).as_deref(),
        Some(v2.as_str()),
        "target changed on a 401"
    );
    assert!(
        condition(&p, ConditionType::Degraded)
            .unwrap()
            .2
            .contains("keeping the previous target")
    );

    // Rotated to the right one: healthy again.
    put_secret(&env.admin, &reg.good_docker_config()).await;
    wait_pool(&env.admin, "workers", "healthy after rotation", |p| {
        degraded_reason(p).is_none()
    })
    .await;

    // A tag that does not exist: not found, target kept.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": format!("{}/acme/os:nope", reg.host())}}}),
    )
    .await;
    let p = wait_degraded(&env.admin, Reason::ImageNotFound).await;
    assert_eq!(target(&p).as_deref(), Some(v2.as_str()));
    assert!(
        condition(&p, ConditionType::Degraded)
            .unwrap()
            .2
            .contains("nope")
    );

    // The registry goes away: unreachable, target kept; back: resolves.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": format!("{}/acme/os:prod", reg.host())}}}),
    )
    .await;
    wait_pool(&env.admin, "workers", "healthy on prod", |p| {
        degraded_reason(p).is_none()
    })
    .await;
    reg.stop();
    let p = wait_degraded(&env.admin, Reason::RegistryUnreachable).await;
    assert_eq!(target(&p).as_deref(), Some(v2.as_str()));
    reg.restart().await.unwrap();
    let v3 = reg
        .push_image("acme/os", "prod", &amd64("3"))
        .await
        .unwrap();
    wait_rolled(&env.admin, "workers", &v3, 2).await;
    drop(c);
}

/// Writes `pem` into `dir` as the kubelet updates a ConfigMap volume: the
/// file in a new timestamped folder, the `..data` symlink swapped to it in
/// one rename, the file's own name a symlink through `..data`.
fn kubelet_writes_configmap(dir: &std::path::Path, generation: u32, pem: &[u8]) {
    kubelet_writes(dir, generation, "ca.crt", pem);
}

/// [`kubelet_writes_configmap`] for the key `name`.
fn kubelet_writes(dir: &std::path::Path, generation: u32, name: &str, text: &[u8]) {
    let folder = format!("..2026_01_0{generation}");
    std::fs::create_dir_all(dir.join(&folder)).unwrap();
    std::fs::write(dir.join(&folder).join(name), text).unwrap();
    let swap = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&folder, &swap).unwrap();
    std::fs::rename(&swap, dir.join("..data")).unwrap();
    if dir.join(name).symlink_metadata().is_err() {
        std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
}

/// A private registry's CA given after the controller started, in its
/// `--registry-ca-dir` (the ConfigMap volume, as the kubelet updates it):
/// before it, the pool says `RegistryUntrusted` naming the registry (not
/// `RegistryUnreachable`) and counts the three nodes that match, though it
/// has no target; after it, the same controller process resolves the tag
/// and rolls it, without a restart.
#[tokio::test]
async fn a_registry_ca_given_after_the_start_is_trusted_without_a_restart() {
    let env = env().await;
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    let v1 = reg
        .push_image("acme/os", "prod", &amd64("1"))
        .await
        .unwrap();
    // The optional ConfigMap's volume before the ConfigMap: empty.
    let ca_dir = env.cp.dir().join("registry-ca");
    std::fs::create_dir_all(&ca_dir).unwrap();
    let dir = ca_dir.display().to_string();
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: c,
    } = Setup::default()
        .controller(
            "c1",
            &[
                "--registry-ca-dir",
                &dir,
                "--tag-resolution-interval-seconds",
                "2",
            ],
        )
        .node("n1", &member("amd64"))
        .node("n2", &member("amd64"))
        .node("n3", &member("amd64"))
        .initial_image(format!("{}/acme/os@{v1}", reg.host()))
        .pool(tag_pool(&reg, "prod"))
        .start_in(env)
        .await;

    let untrusted = Reason::RegistryUntrusted.as_str();
    let p = wait_pool(&env.admin, "workers", untrusted, |p| {
        degraded_reason(p).as_deref() == Some(untrusted)
            && p.status.as_ref().is_some_and(|s| s.node_count == 3)
    })
    .await;
    let message = condition(&p, ConditionType::Degraded).unwrap().2;
    assert!(
        message.contains(&format!("registry {}", reg.host())) && message.contains("unknown CA"),
        "{message}"
    );
    assert_eq!(target(&p), None);
    let up = condition(&p, ConditionType::UpToDate).unwrap().2;
    assert!(up.contains("3 members wait for a target image"), "{up}");

    let pid = c.pid();
    kubelet_writes_configmap(&ca_dir, 1, &reg.ca_pem().unwrap());
    let p = wait_rolled(&env.admin, "workers", &v1, 3).await;
    assert_eq!(degraded_reason(&p), None);
    assert_eq!(c.pid(), pid, "the controller was restarted");
    c.wait_log("the registry CAs changed").await;
}

#[tokio::test]
async fn an_image_must_cover_every_members_architecture() {
    let env = env().await;
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    // What the nodes run first: in neither index (a host on one of an
    // index's platforms runs that index already, and is not told it).
    let old = reg.push_image("acme/os", "old", &amd64("0")).await.unwrap();
    let amd = reg.push_image("acme/os", "amd", &amd64("1")).await.unwrap();
    let arm = reg
        .push_image(
            "acme/os",
            "arm",
            &TestImage {
                architecture: "arm64",
                version: "1",
                marker: "arm",
            },
        )
        .await
        .unwrap();
    let amd_only = reg
        .push_index("acme/os", "amd-only", &[("amd64", &amd)])
        .await
        .unwrap();
    let both = reg
        .push_index("acme/os", "multi", &[("amd64", &amd), ("arm64", &arm)])
        .await
        .unwrap();
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: _c,
    } = setup(&reg)
        .node("x86", &member("amd64"))
        .node("arm", &member("arm64"))
        .initial_image(format!("{}/acme/os@{old}", reg.host()))
        // An index without arm64: refused before any node is told about it.
        .pool(tag_pool(&reg, "amd-only"))
        .start_in(env)
        .await;
    let p = wait_degraded(&env.admin, Reason::UnsupportedArchitecture).await;
    assert_eq!(target(&p), None);
    assert!(
        condition(&p, ConditionType::Degraded)
            .unwrap()
            .2
            .contains("arm64")
    );
    let bns: Vec<BootcNode> = Api::<BootcNode>::all(env.admin.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert!(
        bns.iter()
            .all(|bn| !bn.spec.desired_image.contains(&amd_only)),
        "the refused index reached a node"
    );

    // An index covering both rolls, pinned by its index digest.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": format!("{}/acme/os:multi", reg.host())}}}),
    )
    .await;
    wait_rolled(&env.admin, "workers", &both, 2).await;
    let bn = bootc_node(&env.admin, "arm").await.unwrap();
    assert_eq!(
        bn.spec.desired_image,
        format!("{}/acme/os@{both}", reg.host())
    );
    let _ = BTreeMap::<String, String>::new();
}

/// A digest reference is checked as a tag's digest is, before any node is
/// told: a mistyped digest is not found, an image without a member's
/// architecture is refused, each with the tag's reasons and the previous
/// target kept; a good one rolls out.
#[tokio::test]
async fn digest_refs_are_checked_before_any_node_is_told() {
    let env = env().await;
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    let amd = reg.push_image("acme/os", "amd", &amd64("1")).await.unwrap();
    let arm = reg
        .push_image(
            "acme/os",
            "arm",
            &TestImage {
                architecture: "arm64",
                version: "1",
                marker: "arm",
            },
        )
        .await
        .unwrap();
    let amd_only = reg
        .push_index("acme/os", "amd-only", &[("amd64", &amd)])
        .await
        .unwrap();
    let both = reg
        .push_index("acme/os", "multi", &[("amd64", &amd), ("arm64", &arm)])
        .await
        .unwrap();
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: _c,
    } = setup(&reg)
        .node("x86", &member("amd64"))
        .node("arm", &member("arm64"))
        .initial_image(format!("{}/acme/os@{amd}", reg.host()))
        .start_in(env)
        .await;
    let pinned = |digest: &str| format!("{}/acme/os@{digest}", reg.host());
    let bootc_nodes = Api::<BootcNode>::all(env.admin.clone());
    let told = |digest: String| {
        let bootc_nodes = bootc_nodes.clone();
        async move {
            bootc_nodes
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|bn| bn.spec.desired_image.contains(&digest))
        }
    };

    // A digest nobody pushed: not found, no target, nobody told.
    let typo = format!("sha256:{}", "0".repeat(64));
    let mut p = tag_pool(&reg, "unused");
    p.spec.image.reference = pinned(&typo);
    create_pool(&env.admin, &p).await;
    let p = wait_degraded(&env.admin, Reason::ImageNotFound).await;
    assert_eq!(target(&p), None);
    assert!(
        !told(typo.clone()).await,
        "the mistyped digest reached a node"
    );

    // An index without arm64, by digest: refused before any node is told.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": pinned(&amd_only)}}}),
    )
    .await;
    let p = wait_degraded(&env.admin, Reason::UnsupportedArchitecture).await;
    assert_eq!(target(&p), None);
    assert!(
        condition(&p, ConditionType::Degraded)
            .unwrap()
            .2
            .contains("arm64")
    );
    assert!(
        !told(amd_only.clone()).await,
        "the refused index reached a node"
    );

    // The index covering both, by digest: it rolls out.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": pinned(&both)}}}),
    )
    .await;
    wait_rolled(&env.admin, "workers", &both, 2).await;

    // Then a mistyped digest again: the target in force is kept.
    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": pinned(&typo)}}}),
    )
    .await;
    let p = wait_degraded(&env.admin, Reason::ImageNotFound).await;
    assert_eq!(target(&p).as_deref(), Some(both.as_str()));
    assert!(!told(typo).await);
}

/// The controller's registry client against a registry that redirects:
/// a manifest request is never redirected, nothing goes from HTTPS to plain
/// HTTP (the internal service below is never reached), a blob follows a
/// redirect to HTTPS storage but at most a bounded number, and no response
/// body reaches a pool's status (only its status code and error codes).
#[tokio::test]
async fn redirects_are_followed_only_for_blobs_and_never_to_plain_http() {
    use tests::redirecting_registry::{Canned, CannedServer};
    let env = env().await;
    let internal = CannedServer::http(std::sync::Arc::new(|_: &_| {
        Canned::new(500, br#"{"internal":"INTERNAL-SECRET-BODY"}"#)
    }))
    .await
    .unwrap();
    let inside = format!("http://{}", internal.host());
    let config =
        br#"{"architecture":"amd64","os":"linux","config":{"Labels":{"containers.bootc":"1"}}}"#
            .to_vec();
    let config_digest = controller::target::registry::sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config.len()},
        "layers": [],
    }))
    .unwrap();
    let manifest_digest = controller::target::registry::sha256_digest(&manifest);
    let routes = {
        let inside = inside.clone();
        move |request: &tests::redirecting_registry::Request| {
            let path = request.path.as_str();
            let image = Canned::new(200, &manifest)
                .header("Content-Type", "application/vnd.oci.image.manifest.v1+json");
            let blob = format!("/blobs/{config_digest}");
            match path {
                "/v2/acme/down/manifests/1" => Canned::redirect(&format!("{inside}/internal")),
                "/v2/acme/body/manifests/1" => Canned::new(
                    500,
                    br#"{"errors":[{"code":"BLOB_UPLOAD_INVALID","message":"REGISTRY-BODY-TEXT \u001b]0;OWNED\u0007"}]}"#,
                ),
                "/storage/config" => Canned::new(200, &config),
                p if p.ends_with("/manifests/1") => image,
                p if p == format!("/v2/acme/ok{blob}") => Canned::redirect("/storage/config"),
                p if p == format!("/v2/acme/blobdown{blob}") => {
                    Canned::redirect(&format!("{inside}/blob"))
                }
                p if p == format!("/v2/acme/loop{blob}") => Canned::redirect(p),
                _ => Canned::new(404, b"{\"errors\":[{\"code\":\"NAME_UNKNOWN\"}]}"),
            }
        }
    };
    let server = CannedServer::https(std::sync::Arc::new(routes))
        .await
        .unwrap();
    let ca = server.ca_path().unwrap().display().to_string();
    let _c = ControllerProc::spawn(&env, "c1", &["--registry-ca-file", &ca]);
    for name in ["down", "body", "ok", "blobdown", "loop"] {
        create_pool(
            &env.admin,
            &pool(
                name,
                json!({"pool": name}),
                &format!("{}/acme/{name}:1", server.host()),
                json!(1),
            ),
        )
        .await;
    }
    let degraded = |name: &'static str| {
        let admin = env.admin.clone();
        async move {
            let p = wait_pool(&admin, name, ConditionType::Degraded.as_str(), |p| {
                degraded_reason(p).is_some()
            })
            .await;
            let (_, reason, message) = condition(&p, ConditionType::Degraded).unwrap();
            (reason, message)
        }
    };

    // The manifest redirected to an internal plain-HTTP address: refused.
    let (reason, message) = degraded("down").await;
    assert_eq!(reason, Reason::RegistryError, "{message}");
    assert!(
        message.contains("manifest") && message.contains("not followed"),
        "{message}"
    );
    // A registry's error body: its status and error code only.
    let (reason, message) = degraded("body").await;
    assert_eq!(reason, Reason::RegistryError, "{message}");
    assert!(
        message.contains("HTTP 500 (BLOB_UPLOAD_INVALID)"),
        "{message}"
    );
    assert!(
        !message.contains("REGISTRY-BODY-TEXT") && !message.contains('\u{1b}'),
        "{message}"
    );
    // A blob redirected within HTTPS: followed.
    let p = wait_pool(&env.admin, "ok", "target", |p| target(p).is_some()).await;
    assert_eq!(target(&p).as_deref(), Some(manifest_digest.as_str()));
    assert!(
        server.hits().iter().any(|h| h == "/storage/config"),
        "{:?}",
        server.hits()
    );
    // A blob redirected to plain HTTP: refused.
    let (_, message) = degraded("blobdown").await;
    assert!(
        message.contains("never followed") && message.contains(&inside),
        "{message}"
    );
    // A blob redirected in a loop: given up after the bound.
    let (_, message) = degraded("loop").await;
    assert!(message.contains("more than 5 redirects"), "{message}");

    assert!(
        internal.hits().is_empty(),
        "the internal service was reached: {:?}",
        internal.hits()
    );
    for name in ["down", "body", "blobdown", "loop"] {
        let p = Api::<api::BootcNodePool>::all(env.admin.clone())
            .get(name)
            .await
            .unwrap();
        let text = serde_json::to_string(&p.status).unwrap();
        assert!(
            !text.contains("INTERNAL-SECRET-BODY") && !text.contains("REGISTRY-BODY-TEXT"),
            "{name}: {text}"
        );
    }
}

/// `/healthz` fails while the reconcile loop is wedged, and answers again
/// once it is not. The controller reaches the API server through a proxy
/// that is then frozen (its requests arrive, no answer comes back, as on a
/// hung connection); a new image under the pool's tag makes the next
/// reconcile (tag resolutions go to the registry, not through the proxy)
/// write the new target and wait for an answer that does not come.
#[tokio::test]
async fn healthz_fails_while_a_reconcile_is_wedged() {
    let env = env().await;
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    let v1 = reg
        .push_image("acme/os", "prod", &amd64("1"))
        .await
        .unwrap();
    let upstream = env.cp.url().trim_start_matches("https://").parse().unwrap();
    let proxy = tests::freeze_proxy::FreezeProxy::start(upstream)
        .await
        .unwrap();
    let kubeconfig = env.cp.dir().join("controller-via-proxy.kubeconfig");
    let text = std::fs::read_to_string(env.cp.kubeconfig(tests::Identity::Controller)).unwrap();
    std::fs::write(&kubeconfig, text.replace(&env.cp.url(), &proxy.url())).unwrap();
    let addr = format!("127.0.0.1:{}", tests::control_plane::free_port().unwrap());
    let ca = reg.ca_path().display().to_string();
    let c = ControllerProc::spawn_with_kubeconfig(
        &env,
        &kubeconfig,
        "c1",
        &[
            "--registry-ca-file",
            &ca,
            "--tag-resolution-interval-seconds",
            "1",
            "--health-addr",
            &addr,
            "--wedged-after-seconds",
            "3",
        ],
    );
    create_pool(&env.admin, &tag_pool(&reg, "prod")).await;
    wait_pool(&env.admin, "workers", "target v1", move |p| {
        target(p).as_deref() == Some(v1.as_str())
    })
    .await;
    assert_eq!(http_get(&addr, "/healthz").await, 200);
    // A resolution after that write: the controller's caches have seen it
    // (a reconcile resolves only then), so a frozen watch does not hold the
    // next reconcile back before it writes.
    wait_resolutions(&c, resolutions(&c) + 1).await;

    proxy.freeze();
    let v2 = reg
        .push_image("acme/os", "prod", &amd64("2"))
        .await
        .unwrap();
    // The write reaches the server (the admin sees it); its answer is held.
    wait_pool(&env.admin, "workers", "target v2 written", move |p| {
        target(p).as_deref() == Some(v2.as_str())
    })
    .await;
    let deadline = std::time::Instant::now() + WAIT;
    while http_get(&addr, "/healthz").await == 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "/healthz stayed 200 with a reconcile wedged; log:\n{}",
            c.log_text()
        );
        // /healthz is polled, as the kubelet does: there is no event.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(http_get(&addr, "/healthz").await, 503);
    assert_eq!(
        http_get(&addr, "/readyz").await,
        200,
        "still ready; log:\n{}",
        c.log_text()
    );

    proxy.thaw();
    let deadline = std::time::Instant::now() + WAIT;
    while http_get(&addr, "/healthz").await != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "/healthz did not recover; log:\n{}",
            c.log_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A loopback "registry" over plain HTTP that answers every request with a
/// 200 promising 100,000 bytes, then sends one every 500 ms for as long as
/// the connection stays open: no read waits long enough to time out.
async fn trickling_registry() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = conn.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: 100000\r\n\r\n";
                if conn.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
                while conn.write_all(b" ").await.is_ok() {
                    tick.tick().await;
                }
            });
        }
    });
    host
}

/// A pool whose registry trickles its answer a byte at a time fails its own
/// resolution at the deadline (`--registry-timeout-seconds`), and neither
/// `/healthz` nor another pool's rollout waits for it.
#[tokio::test]
async fn a_registry_that_trickles_fails_its_pool_not_the_controller() {
    let env = env().await;
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    let v1 = reg
        .push_image("acme/os", "prod", &amd64("1"))
        .await
        .unwrap();
    let slow = trickling_registry().await;
    let addr = format!("127.0.0.1:{}", tests::control_plane::free_port().unwrap());
    let ca = reg.ca_path().display().to_string();
    let c = ControllerProc::spawn(
        &env,
        "c1",
        &[
            "--registry-ca-file",
            &ca,
            "--insecure-registry",
            &slow,
            "--registry-timeout-seconds",
            "2",
            "--health-addr",
            &addr,
            "--wedged-after-seconds",
            "6",
        ],
    );
    create_pool(
        &env.admin,
        &pool(
            "slow",
            json!({"pool": "none"}),
            &format!("{slow}/acme/os:latest"),
            json!(1),
        ),
    )
    .await;
    create_pool(&env.admin, &tag_pool(&reg, "prod")).await;
    let deadline = std::time::Instant::now() + WAIT;
    let admin = env.admin.clone();
    let pools = Api::<api::BootcNodePool>::all(admin);
    loop {
        assert_eq!(
            http_get(&addr, "/healthz").await,
            200,
            "/healthz failed while a registry trickled; log:\n{}",
            c.log_text()
        );
        let slow_pool = pools.get("slow").await.unwrap();
        let workers = pools.get("workers").await.unwrap();
        let timed_out = condition(&slow_pool, ConditionType::Degraded).filter(|c| {
            c.1 == Reason::RegistryUnreachable.as_str() && c.2.contains("did not answer within 2s")
        });
        if timed_out.is_some() && target(&workers).as_deref() == Some(v1.as_str()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "slow: {:?}; workers: {:?}; log:\n{}",
            condition(&slow_pool, ConditionType::Degraded),
            target(&workers),
            c.log_text()
        );
        // /healthz is polled, as the kubelet does: there is no event.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// An address on loopback that refuses connections: a port bound on
/// 127.0.0.3 then released (the tests' own servers listen on 127.0.0.1).
fn refusing_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.3:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn degraded_message(p: &api::BootcNodePool) -> String {
    condition(p, ConditionType::Degraded).unwrap().2
}

/// A disconnected cluster: the pool's registry refuses connections, and
/// the registries.conf the hosts have (given to the controller in its
/// ConfigMap volume, changed while it runs) names a mirror that holds the
/// image under another namespace. The tag resolves and the digest check
/// passes through the mirror (with the mirror's own credentials), and the
/// pool's own reference is what the nodes are told; with
/// `mirror-by-digest-only` a tag goes to the source only and the pool
/// says so naming the rule; a `blocked` registry is refused naming its
/// prefix; when every location fails each is named with its class; a file
/// that is not TOML is named with its error, the controller still running.
#[tokio::test]
async fn a_disconnected_cluster_resolves_through_its_mirror() {
    let env = env().await;
    let mirror = TestRegistry::start("tester", "pw").await.unwrap();
    // The pull secret has the mirror's credentials only.
    put_secret(&env.admin, &mirror.good_docker_config()).await;
    let m = mirror.host();
    let v0 = mirror
        .push_image("mirrored/acme/os", "old", &amd64("0"))
        .await
        .unwrap();
    let v1 = mirror
        .push_image("mirrored/acme/os", "prod", &amd64("1"))
        .await
        .unwrap();
    let v2 = mirror
        .push_image("mirrored/acme/os", "next", &amd64("2"))
        .await
        .unwrap();
    let source = refusing_address();
    let conf_dir = env.cp.dir().join("registries");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let conf = |extra: &str| {
        format!(
            "unqualified-search-registries = []\n\n[[registry]]\nlocation = \"{source}\"\n{extra}\n[[registry.mirror]]\nlocation = \"{m}/mirrored\"\n"
        )
    };
    kubelet_writes(&conf_dir, 1, "registries.conf", conf("").as_bytes());
    let conf_path = conf_dir.join("registries.conf").display().to_string();
    let ca = mirror.ca_path().display().to_string();
    let mut pool = tag_pool(&mirror, "prod");
    pool.spec.image.reference = format!("{source}/acme/os:prod");
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: c,
    } = Setup::default()
        .controller(
            "c1",
            &[
                "--registry-ca-file",
                &ca,
                "--registries-conf",
                &conf_path,
                "--tag-resolution-interval-seconds",
                "2",
            ],
        )
        .node("n1", &member("amd64"))
        .node("n2", &member("amd64"))
        .initial_image(format!("{source}/acme/os@{v0}"))
        .pool(pool)
        .start_in(env)
        .await;

    // The tag, through the mirror: rolled out, the nodes told the pool's
    // own reference (their registries.conf sends them to the mirror).
    let p = wait_rolled(&env.admin, "workers", &v1, 2).await;
    assert_eq!(
        p.status.unwrap().target_image,
        Some(format!("{source}/acme/os@{v1}"))
    );
    // A digest, checked through the mirror.
    let pin = |d: &str| json!({"spec": {"image": {"ref": format!("{source}/acme/os@{d}")}}});
    patch_pool(&env.admin, "workers", pin(&v2)).await;
    wait_rolled(&env.admin, "workers", &v2, 2).await;

    // mirror-by-digest-only: a tag goes to the source alone, which refuses.
    kubelet_writes(
        &conf_dir,
        2,
        "registries.conf",
        conf("mirror-by-digest-only = true").as_bytes(),
    );
    let tag = |t: &str| json!({"spec": {"image": {"ref": format!("{source}/acme/os:{t}")}}});
    patch_pool(&env.admin, "workers", tag("prod")).await;
    let p = wait_degraded(&env.admin, Reason::RegistryUnreachable).await;
    let message = degraded_message(&p);
    assert!(
        message.contains("mirror-by-digest-only")
            && message.contains(&format!("prefix {source:?}"))
            && message.contains(&format!("{source}/acme/os:prod: RegistryUnreachable"))
            && !message.contains(&m),
        "{message}"
    );
    assert_eq!(target(&p).as_deref(), Some(v2.as_str()), "target not kept");
    // ... while a digest (not checked before) still goes to the mirror.
    patch_pool(&env.admin, "workers", pin(&v0)).await;
    wait_rolled(&env.admin, "workers", &v0, 2).await;

    // blocked: refused naming the prefix, the mirror not asked either (nor
    // the digest's facts learned before).
    kubelet_writes(
        &conf_dir,
        3,
        "registries.conf",
        conf("blocked = true").as_bytes(),
    );
    patch_pool(&env.admin, "workers", pin(&v2)).await;
    let p = wait_degraded(&env.admin, Reason::RegistryBlocked).await;
    let message = degraded_message(&p);
    assert!(
        message.contains(&format!("prefix {source:?}")) && message.contains("blocked = true"),
        "{message}"
    );
    assert_eq!(target(&p).as_deref(), Some(v0.as_str()));

    // Every location fails: each named, in order, with its class. The
    // pool follows the tag before the table unblocks, and the controller is
    // seen to have read that spec, so that the pinned digest it followed
    // is never resolved under the new table.
    patch_pool(&env.admin, "workers", tag("next")).await;
    let next = format!("{source}/acme/os:next");
    wait_pool(&env.admin, "workers", "the tag blocked", move |p| {
        degraded_reason(p).as_deref() == Some(Reason::RegistryBlocked.as_str())
            && degraded_message(p).contains(&next)
    })
    .await;
    let other_mirror = refusing_address();
    kubelet_writes(
        &conf_dir,
        4,
        "registries.conf",
        format!(
            "[[registry]]\nprefix = \"{source}/acme\"\nlocation = \"{source}/acme\"\n[[registry.mirror]]\nlocation = \"{other_mirror}/acme\"\n[[registry.mirror]]\nlocation = \"{m}/nowhere\"\n"
        )
        .as_bytes(),
    );
    let p = wait_degraded(&env.admin, Reason::ImageNotFound).await;
    let message = degraded_message(&p);
    let tried = [
        format!("{other_mirror}/acme/os:next: RegistryUnreachable"),
        format!("{m}/nowhere/os:next: ImageNotFound"),
        format!("{source}/acme/os:next: RegistryUnreachable"),
    ];
    let at: Vec<Option<usize>> = tried.iter().map(|t| message.find(t.as_str())).collect();
    assert!(
        at.iter().all(Option::is_some) && at.is_sorted(),
        "{message}"
    );
    assert_eq!(target(&p).as_deref(), Some(v0.as_str()));

    // A file that is not TOML: named with its error; the controller runs on.
    let pid = c.pid();
    kubelet_writes(&conf_dir, 5, "registries.conf", b"[[registry]\n");
    patch_pool(&env.admin, "workers", tag("prod")).await;
    let p = wait_degraded(&env.admin, Reason::InvalidRegistriesConf).await;
    let message = degraded_message(&p);
    assert!(
        message.contains(&conf_path) && message.contains("not valid TOML"),
        "{message}"
    );
    c.wait_log("registries.conf refused").await;
    assert_eq!(c.pid(), pid, "the controller was restarted");
    // Put right: the tag resolves through the mirror again.
    kubelet_writes(&conf_dir, 6, "registries.conf", conf("").as_bytes());
    patch_pool(&env.admin, "workers", tag("next")).await;
    wait_rolled(&env.admin, "workers", &v2, 2).await;
}

/// A signing key of the tests (RustCrypto's, as cosign's: ECDSA P-256).
fn signing_key(seed: u8) -> p256::ecdsa::SigningKey {
    p256::ecdsa::SigningKey::from_slice(&[seed; 32]).unwrap()
}

/// The PEM public key of [`signing_key`], as `cosign generate-key-pair`
/// writes `cosign.pub`.
fn public_pem(seed: u8) -> String {
    use p256::pkcs8::EncodePublicKey;
    signing_key(seed)
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap()
}

/// The signature policy (containers-policy.json, in its ConfigMap volume,
/// changed while the controller runs) is checked before any node is told:
/// a target signed with the scope's key (cosign's layout in the real
/// registry, signed in the test) rolls out, by tag and by digest; an
/// unsigned one, one signed with another key and one whose signature names
/// another digest are each refused with `SignatureRefused` naming the scope
/// and why, the previous target kept and no BootcNode told; a `reject`
/// scope refuses a signed image; `insecureAcceptAnything` lets an unsigned
/// one through; a policy that is not valid names the field and its value.
#[tokio::test]
async fn signatures_are_checked_before_any_node_is_told() {
    let env = env().await;
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    put_secret(&env.admin, &reg.good_docker_config()).await;
    let host = reg.host();
    let push = |tag: &'static str, version: &'static str| {
        let reg = &reg;
        async move {
            reg.push_image("acme/os", tag, &amd64(version))
                .await
                .unwrap()
        }
    };
    let v0 = push("old", "0").await;
    let signed = push("prod", "1").await;
    let unsigned = push("unsigned", "2").await;
    let other_key = push("other-key", "3").await;
    let other_digest = push("other-digest", "4").await;
    let signed_later = push("later", "5").await;
    let (ours, theirs) = (signing_key(1), signing_key(2));
    for (digest, signed_digest, key) in [
        (&signed, &signed, &ours),
        (&other_key, &other_key, &theirs),
        (&other_digest, &signed, &ours),
        (&signed_later, &signed_later, &ours),
    ] {
        reg.push_cosign_signature("acme/os", digest, signed_digest, key)
            .await
            .unwrap();
    }
    // The key beside the policy, as the ConfigMap holds both.
    let keys = env.cp.dir().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let key_path = keys.join("os.pub");
    std::fs::write(&key_path, public_pem(1)).unwrap();
    let policy_dir = env.cp.dir().join("policy");
    std::fs::create_dir_all(&policy_dir).unwrap();
    let scope = format!("{host}/acme/os");
    let policy = |requirement: serde_json::Value| {
        json!({
            "default": [{"type": "insecureAcceptAnything"}],
            "transports": {"docker": {scope.clone(): [requirement]}},
        })
        .to_string()
    };
    let sigstore = json!({"type": "sigstoreSigned", "keyPath": key_path.display().to_string()});
    kubelet_writes(
        &policy_dir,
        1,
        "policy.json",
        policy(sigstore.clone()).as_bytes(),
    );
    let policy_path = policy_dir.join("policy.json").display().to_string();
    let ca = reg.ca_path().display().to_string();
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: c,
    } = Setup::default()
        .controller(
            "c1",
            &[
                "--registry-ca-file",
                &ca,
                "--signature-policy",
                &policy_path,
                "--tag-resolution-interval-seconds",
                "2",
            ],
        )
        .node("n1", &member("amd64"))
        .node("n2", &member("amd64"))
        .initial_image(format!("{host}/acme/os@{v0}"))
        .pool(tag_pool(&reg, "prod"))
        .start_in(env)
        .await;
    let bootc_nodes = Api::<BootcNode>::all(env.admin.clone());
    let told = |digest: String| {
        let bootc_nodes = bootc_nodes.clone();
        async move {
            bootc_nodes
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|bn| bn.spec.desired_image.contains(&digest))
        }
    };
    let pin = |d: &str| json!({"spec": {"image": {"ref": format!("{host}/acme/os@{d}")}}});

    // Signed with the policy's key, by tag: it rolls out. Verified once:
    // the tag's next resolutions find the same digest and do not ask for
    // its signatures again.
    wait_rolled(&env.admin, "workers", &signed, 2).await;
    let n = resolutions(&c);
    wait_resolutions(&c, n + 2).await;
    let verified = c
        .log_text()
        .matches("signatures meet the signature policy")
        .count();
    assert_eq!(verified, 1, "the signatures were read again");

    // Each bad signature, by digest: refused before any node is told.
    let scope_named = format!("transports.docker[{scope:?}] is sigstoreSigned");
    for (digest, why) in [
        (&unsigned, "the registry has no signature for it"),
        (&other_key, "no signature is verified by the key"),
        (&other_digest, "the key's signature is for another digest"),
    ] {
        patch_pool(&env.admin, "workers", pin(digest)).await;
        let p = wait_pool(&env.admin, "workers", why, move |p| {
            degraded_reason(p).as_deref() == Some(Reason::SignatureRefused.as_str())
                && degraded_message(p).contains(why)
        })
        .await;
        let message = degraded_message(&p);
        assert!(
            message.contains(&scope_named) && message.contains(digest.as_str()),
            "{message}"
        );
        assert_eq!(
            target(&p).as_deref(),
            Some(signed.as_str()),
            "target not kept"
        );
        assert!(!told(digest.clone()).await, "{why}: a node was told");
    }

    c.wait_log("signatures meet the signature policy").await;

    // The scope says reject: a signed image is refused too.
    kubelet_writes(
        &policy_dir,
        2,
        "policy.json",
        policy(json!({"type": "reject"})).as_bytes(),
    );
    patch_pool(&env.admin, "workers", pin(&signed_later)).await;
    let p = wait_pool(&env.admin, "workers", "reject", |p| {
        degraded_reason(p).as_deref() == Some(Reason::SignatureRefused.as_str())
            && degraded_message(p).contains("is reject")
    })
    .await;
    assert!(degraded_message(&p).contains(&format!("transports.docker[{scope:?}] is reject")));
    assert_eq!(target(&p).as_deref(), Some(signed.as_str()));
    assert!(!told(signed_later.clone()).await);

    // insecureAcceptAnything: an unsigned image rolls out.
    kubelet_writes(
        &policy_dir,
        3,
        "policy.json",
        policy(json!({"type": "insecureAcceptAnything"})).as_bytes(),
    );
    patch_pool(&env.admin, "workers", pin(&unsigned)).await;
    wait_rolled(&env.admin, "workers", &unsigned, 2).await;

    // A policy the controller cannot check: the field and its value named.
    kubelet_writes(
        &policy_dir,
        4,
        "policy.json",
        policy(json!({"type": "signedBy", "keyType": "GPGKeys"})).as_bytes(),
    );
    patch_pool(&env.admin, "workers", pin(&signed_later)).await;
    let p = wait_degraded(&env.admin, Reason::InvalidSignaturePolicy).await;
    let message = degraded_message(&p);
    assert!(
        message.contains(&policy_path) && message.contains("[0].type \"signedBy\""),
        "{message}"
    );
    assert_eq!(target(&p).as_deref(), Some(unsigned.as_str()));
    assert!(!told(signed_later.clone()).await);

    // Signatures asked again: the signed one passes.
    kubelet_writes(&policy_dir, 5, "policy.json", policy(sigstore).as_bytes());
    patch_pool(&env.admin, "workers", pin(&signed_later)).await;
    wait_rolled(&env.admin, "workers", &signed_later, 2).await;
}
