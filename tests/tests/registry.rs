//! Tag resolution and manifest inspection against a real registry
//! (Debian's docker-registry with TLS and htpasswd auth).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use api::image_ref::ImageRef;
use controller::target::registry::{
    PullSecret, RegistryError, RegistryOptions, Resolver, check_architectures,
};
use tests::registry::{TestImage, TestRegistry};

fn resolver(reg: &TestRegistry) -> Resolver {
    Resolver::new(RegistryOptions {
        ca_bundle: Some(reg.ca_pem().unwrap()),
        ..Default::default()
    })
}

/// The pool's pull secret with `tester:password` for the registry.
fn creds(reg: &TestRegistry, password: &str) -> PullSecret {
    PullSecret {
        label: "bootc-operator/pull".into(),
        docker_config: reg.docker_config("tester", password).into_bytes(),
    }
}

fn image(version: &str) -> TestImage<'_> {
    TestImage {
        architecture: "amd64",
        version,
        marker: version,
    }
}

#[tokio::test]
async fn tags_resolve_follow_pushes_and_errors_are_told_apart() {
    let mut reg = TestRegistry::start("tester", "correct-horse")
        .await
        .unwrap();
    let good = creds(&reg, "correct-horse");
    let r = resolver(&reg);
    let tag_ref = ImageRef::parse(&format!("{}/acme/os:prod", reg.host())).unwrap();

    let v1 = reg
        .push_image("acme/os", "prod", &image("1.0"))
        .await
        .unwrap();
    let resolved = r.resolve(&tag_ref, Some(&good), "h1").await.unwrap();
    assert_eq!(resolved.facts.digest, v1);
    assert_eq!(resolved.pinned, format!("{}/acme/os@{v1}", reg.host()));
    assert_eq!(
        resolved.facts.architectures,
        BTreeSet::from(["amd64".to_owned()])
    );

    // Same tag, new image: the new digest is seen.
    let v2 = reg
        .push_image("acme/os", "prod", &image("2.0"))
        .await
        .unwrap();
    assert_ne!(v1, v2);
    assert_eq!(
        r.resolve(&tag_ref, Some(&good), "h1")
            .await
            .unwrap()
            .facts
            .digest,
        v2
    );

    // A digest reference resolves to itself.
    let by_digest = ImageRef::parse(&format!("{}/acme/os@{v1}", reg.host())).unwrap();
    assert_eq!(
        r.resolve(&by_digest, Some(&good), "h1")
            .await
            .unwrap()
            .facts
            .digest,
        v1
    );

    // A digest nobody pushed is asked for, and not found (never answered
    // from the reference alone).
    let typo = format!("sha256:{}", "0".repeat(64));
    let by_typo = ImageRef::parse(&format!("{}/acme/os@{typo}", reg.host())).unwrap();
    let err = r.resolve(&by_typo, Some(&good), "h1").await.unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err:?}");
    assert_eq!(err.reason(), api::Reason::ImageNotFound);

    // A digest found in one repository is not taken to exist in another
    // (the facts learned for acme/os are not answered for acme/other).
    let elsewhere = ImageRef::parse(&format!("{}/acme/other@{v1}", reg.host())).unwrap();
    let err = r.resolve(&elsewhere, Some(&good), "h1").await.unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err:?}");

    // Wrong password, no credentials: the credentials error.
    for (label, c) in [
        ("wrong password", Some(creds(&reg, "wrong"))),
        ("anonymous", None),
    ] {
        let err = r.resolve(&tag_ref, c.as_ref(), "h2").await.unwrap_err();
        assert!(
            matches!(err, RegistryError::Unauthorized { .. }),
            "{label}: {err:?}"
        );
        assert_eq!(err.reason(), api::Reason::RegistryUnauthorized);
    }

    // Missing tag, missing repository: not found.
    for missing in ["acme/os:nope", "acme/nothing:prod"] {
        let missing_ref = ImageRef::parse(&format!("{}/{missing}", reg.host())).unwrap();
        let err = r
            .resolve(&missing_ref, Some(&good), "h1")
            .await
            .unwrap_err();
        assert!(
            matches!(err, RegistryError::NotFound { .. }),
            "{missing}: {err:?}"
        );
        assert!(err.to_string().contains(missing), "{err}");
    }

    // The registry goes away: unreachable, then back.
    reg.stop();
    let err = r.resolve(&tag_ref, Some(&good), "h1").await.unwrap_err();
    assert!(matches!(err, RegistryError::Unreachable { .. }), "{err:?}");
    reg.restart().await.unwrap();
    assert_eq!(
        r.resolve(&tag_ref, Some(&good), "h1")
            .await
            .unwrap()
            .facts
            .digest,
        v2
    );

    // An unknown CA is a TLS failure, not a pass: reached but not trusted,
    // a reason of its own that names the registry and what to add (not
    // "unreachable").
    let untrusting = Resolver::new(RegistryOptions::default());
    let err = untrusting
        .resolve(&tag_ref, Some(&good), "h1")
        .await
        .unwrap_err();
    assert!(matches!(err, RegistryError::Untrusted { .. }), "{err:?}");
    assert_eq!(err.reason(), api::Reason::RegistryUntrusted);
    let text = err.to_string();
    assert!(
        text.contains(&reg.host()) && text.contains("issued by an unknown CA"),
        "{text}"
    );
    assert!(text.contains("--registry-ca-dir"), "{text}");
}

#[tokio::test]
async fn indexes_and_docker_manifests() {
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    let good = creds(&reg, "pw");
    let r = resolver(&reg);

    let amd = reg
        .push_image(
            "acme/os",
            "amd64-1",
            &TestImage {
                architecture: "amd64",
                version: "1",
                marker: "a",
            },
        )
        .await
        .unwrap();
    let arm = reg
        .push_image(
            "acme/os",
            "arm64-1",
            &TestImage {
                architecture: "arm64",
                version: "1",
                marker: "b",
            },
        )
        .await
        .unwrap();
    let both = reg
        .push_index("acme/os", "multi", &[("amd64", &amd), ("arm64", &arm)])
        .await
        .unwrap();
    let amd_only = reg
        .push_index("acme/os", "amd-only", &[("amd64", &amd)])
        .await
        .unwrap();

    let multi = r
        .resolve(
            &ImageRef::parse(&format!("{}/acme/os:multi", reg.host())).unwrap(),
            Some(&good),
            "h",
        )
        .await
        .unwrap();
    assert_eq!(
        multi.facts.digest, both,
        "an index resolves to the index digest"
    );
    assert_eq!(
        multi.facts.media_type,
        "application/vnd.oci.image.index.v1+json"
    );
    let fleet = BTreeSet::from(["amd64".to_owned(), "arm64".to_owned()]);
    check_architectures(&multi.facts, &fleet, "multi").unwrap();

    let only = r
        .resolve(
            &ImageRef::parse(&format!("{}/acme/os:amd-only", reg.host())).unwrap(),
            Some(&good),
            "h",
        )
        .await
        .unwrap();
    assert_eq!(only.facts.digest, amd_only);
    let err = check_architectures(&only.facts, &fleet, "amd-only").unwrap_err();
    assert!(
        matches!(&err, RegistryError::UnsupportedArchitecture { missing, .. } if missing == &vec!["arm64".to_owned()]),
        "{err:?}"
    );

    let docker = reg
        .push_docker_image(
            "acme/os",
            "docker",
            &TestImage {
                architecture: "arm64",
                version: "1",
                marker: "d",
            },
        )
        .await
        .unwrap();
    let resolved = r
        .resolve(
            &ImageRef::parse(&format!("{}/acme/os:docker", reg.host())).unwrap(),
            Some(&good),
            "h",
        )
        .await
        .unwrap();
    assert_eq!(resolved.facts.digest, docker);
    assert_eq!(
        resolved.facts.media_type,
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(
        resolved.facts.architectures,
        BTreeSet::from(["arm64".to_owned()])
    );
}

#[tokio::test]
async fn the_fake_hosts_pull_uses_the_hosts_auth_file_and_ca() {
    let reg = TestRegistry::start("tester", "pw").await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let certs = root.path().join("etc/containers/certs.d").join(reg.host());
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), reg.ca_pem().unwrap()).unwrap();
    std::fs::create_dir_all(root.path().join("run/ostree")).unwrap();
    let auth = root.path().join("run/ostree/auth.json");

    let amd = reg
        .push_image(
            "acme/os",
            "a",
            &TestImage {
                architecture: "amd64",
                version: "7.1",
                marker: "a",
            },
        )
        .await
        .unwrap();
    let arm = reg
        .push_image(
            "acme/os",
            "b",
            &TestImage {
                architecture: "arm64",
                version: "7.1",
                marker: "b",
            },
        )
        .await
        .unwrap();
    let index = reg
        .push_index("acme/os", "multi", &[("amd64", &amd), ("arm64", &arm)])
        .await
        .unwrap();

    // No auth file: the registry's 401.
    let err = tests::image_pull::pull(
        &format!("{}/acme/os@{amd}", reg.host()),
        root.path(),
        None,
        "amd64",
    )
    .await
    .unwrap_err();
    // containers/image's words, which bootc prints.
    assert!(
        format!("{err:#}").ends_with(&format!(
            "reading manifest {amd} in {}/acme/os: authentication required",
            reg.host()
        )),
        "{err:#}"
    );

    std::fs::write(&auth, reg.docker_config("tester", "pw")).unwrap();
    let single = tests::image_pull::pull(
        &format!("{}/acme/os@{amd}", reg.host()),
        root.path(),
        Some(auth.as_path()),
        "amd64",
    )
    .await
    .unwrap();
    assert_eq!(single.manifest_digest, amd);
    assert_eq!(single.architecture, "amd64");
    assert_eq!(single.version.as_deref(), Some("7.1"));

    // An index: the per-platform manifest, as real bootc reports it.
    let multi = tests::image_pull::pull(
        &format!("{}/acme/os@{index}", reg.host()),
        root.path(),
        Some(auth.as_path()),
        "arm64",
    )
    .await
    .unwrap();
    assert_eq!(multi.manifest_digest, arm);
    assert_eq!(multi.architecture, "arm64");
    let err = tests::image_pull::pull(
        &format!("{}/acme/os@{index}", reg.host()),
        root.path(),
        Some(auth.as_path()),
        "s390x",
    )
    .await
    .unwrap_err();
    assert!(format!("{err:#}").contains("linux/s390x"), "{err:#}");

    // A digest that is not there: the registry's not-found.
    let missing = format!("sha256:{}", "e".repeat(64));
    let err = tests::image_pull::pull(
        &format!("{}/acme/os@{missing}", reg.host()),
        root.path(),
        Some(auth.as_path()),
        "amd64",
    )
    .await
    .unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "reading manifest {missing} in {}/acme/os: manifest unknown",
            reg.host()
        )
    );

    // Wrong password: 401 again.
    std::fs::write(&auth, reg.docker_config("tester", "nope")).unwrap();
    let err = tests::image_pull::pull(
        &format!("{}/acme/os@{amd}", reg.host()),
        root.path(),
        Some(auth.as_path()),
        "amd64",
    )
    .await
    .unwrap_err();
    assert!(
        format!("{err:#}").ends_with(": authentication required"),
        "{err:#}"
    );
}

/// Registries such as quay.io and Docker Hub answer with a bearer
/// challenge (the real docker-registry here uses basic auth): the resolver
/// asks the realm the challenge names for a token, with the pull secret's
/// credentials as basic auth and the challenge's service and scope, and
/// retries with the token; the credentials go to the realm and the
/// registry's own origin only, and never to a blob's storage. Without
/// credentials it asks for an anonymous token.
#[tokio::test]
async fn bearer_challenges_get_a_token_from_the_realm() {
    use std::sync::Arc;
    use tests::redirecting_registry::{Canned, CannedServer, Request};
    let token_server = CannedServer::https(Arc::new(|r: &Request| {
        if r.path.starts_with("/token?") {
            Canned::new(200, br#"{"token":"T0KEN"}"#)
        } else {
            Canned::new(404, b"")
        }
    }))
    .await
    .unwrap();
    let realm = format!("https://{}/token", token_server.host());
    let config =
        br#"{"architecture":"arm64","os":"linux","config":{"Labels":{"containers.bootc":"1"}}}"#
            .to_vec();
    let config_digest = controller::target::registry::sha256_digest(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config.len()},
        "layers": [],
    }))
    .unwrap();
    let digest = controller::target::registry::sha256_digest(&manifest);
    let challenge =
        format!(r#"Bearer realm="{realm}",service="reg.test",scope="repository:acme/os:pull""#);
    let registry = CannedServer::https(Arc::new(move |r: &Request| {
        let authorized = r.authorization.as_deref() == Some("Bearer T0KEN");
        match r.path.as_str() {
            _ if !authorized && r.path.starts_with("/v2/") => {
                Canned::new(401, b"").header("WWW-Authenticate", &challenge)
            }
            "/v2/acme/os/manifests/1" => Canned::new(200, &manifest),
            p if p == format!("/v2/acme/os/blobs/{config_digest}") => {
                Canned::redirect("/storage/config?signature=s3cret")
            }
            "/storage/config?signature=s3cret" => Canned::new(200, &config),
            _ => Canned::new(404, b""),
        }
    }))
    .await
    .unwrap();
    let mut bundle = registry.ca_pem().unwrap();
    bundle.extend(token_server.ca_pem().unwrap());
    let r = Resolver::new(RegistryOptions {
        ca_bundle: Some(bundle),
        ..Default::default()
    });
    let image = ImageRef::parse(&format!("{}/acme/os:1", registry.host())).unwrap();
    let creds = PullSecret {
        label: "bootc-operator/pull".into(),
        docker_config: format!(
            r#"{{"auths": {{"{}": {{"username": "robot", "password": "pw"}}}}}}"#,
            registry.host()
        )
        .into_bytes(),
    };
    let resolved = r.resolve(&image, Some(&creds), "v1").await.unwrap();
    assert_eq!(resolved.facts.digest, digest);
    assert_eq!(
        resolved.facts.architectures,
        BTreeSet::from(["arm64".to_owned()])
    );
    let asked = token_server.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].path.contains("service=reg.test")
            && asked[0]
                .path
                .contains("scope=repository%3Aacme%2Fos%3Apull"),
        "{asked:?}"
    );
    // robot:pw
    assert_eq!(
        asked[0].authorization.as_deref(),
        Some("Basic cm9ib3Q6cHc=")
    );
    let storage: Vec<Request> = registry
        .requests()
        .into_iter()
        .filter(|q| q.path.starts_with("/storage/"))
        .collect();
    assert_eq!(storage.len(), 1, "{:?}", registry.requests());
    // The storage is the registry's own origin here, so the token goes
    // with it; the basic credentials never reach the registry.
    assert!(
        registry
            .requests()
            .iter()
            .all(|q| q.authorization.as_deref() != Some("Basic cm9ib3Q6cHc=")),
        "{:?}",
        registry.requests()
    );

    // No credentials: an anonymous token (no basic auth to the realm).
    let anonymous = Resolver::new(RegistryOptions {
        ca_bundle: Some({
            let mut b = registry.ca_pem().unwrap();
            b.extend(token_server.ca_pem().unwrap());
            b
        }),
        ..Default::default()
    });
    anonymous.resolve(&image, None, "none").await.unwrap();
    let asked = token_server.requests();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[1].authorization, None, "{asked:?}");
}

/// The fake bootc pulls as bootc's containers/image does: through the
/// mirrors the host's registries.conf (and its drop-ins, a later one
/// replacing a table of the same prefix) names for the reference, in order,
/// then the source; `mirror-by-digest-only` keeps a tag at the source; a
/// `blocked` registry is refused naming the files; when every location
/// fails, each is named. Without the file, the source alone is asked.
#[tokio::test]
async fn the_fake_hosts_pull_goes_through_the_hosts_mirrors() {
    let mirror = TestRegistry::start("tester", "pw").await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let m = mirror.host();
    let certs = root.path().join("etc/containers/certs.d").join(&m);
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::write(certs.join("ca.crt"), mirror.ca_pem().unwrap()).unwrap();
    let auth = root.path().join("auth.json");
    std::fs::write(&auth, mirror.docker_config("tester", "pw")).unwrap();
    let digest = mirror
        .push_image("mirrored/acme/os", "a", &image("7.1"))
        .await
        .unwrap();
    // A source that refuses connections: a port bound, then released.
    let source = std::net::TcpListener::bind("127.0.0.3:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let pinned = format!("{source}/acme/os@{digest}");
    let pull = |reference: String| {
        let (root, auth) = (root.path().to_owned(), auth.clone());
        async move { tests::image_pull::pull(&reference, &root, Some(&auth), "amd64").await }
    };
    let refused = format!(
        "pinging container registry {source}: Get \"https://{source}/v2/\": dial tcp {source}: connect: connection refused"
    );

    // No registries.conf: the source alone.
    let err = format!("{:#}", pull(pinned.clone()).await.unwrap_err());
    assert_eq!(err, refused);

    let conf_dir = root.path().join("etc/containers");
    let table = |extra: &str, mirror_path: &str| {
        format!(
            "[[registry]]\nprefix = \"{source}/acme\"\nlocation = \"{source}/acme\"\n{extra}\n[[registry.mirror]]\nlocation = \"{m}/{mirror_path}\"\n"
        )
    };
    std::fs::write(conf_dir.join("registries.conf"), table("", "mirrored/acme")).unwrap();
    let pulled = pull(pinned.clone()).await.unwrap();
    assert_eq!(pulled.manifest_digest, digest);
    assert_eq!(pulled.version.as_deref(), Some("7.1"));

    // mirror-by-digest-only: a tag goes to the source alone.
    std::fs::write(
        conf_dir.join("registries.conf"),
        table("mirror-by-digest-only = true", "mirrored/acme"),
    )
    .unwrap();
    let err = format!(
        "{:#}",
        pull(format!("{source}/acme/os:a")).await.unwrap_err()
    );
    assert_eq!(err, refused);
    assert_eq!(pull(pinned.clone()).await.unwrap().manifest_digest, digest);

    // A drop-in's table of the same prefix replaces the file's: blocked.
    let drop_ins = conf_dir.join("registries.conf.d");
    std::fs::create_dir_all(&drop_ins).unwrap();
    std::fs::write(
        drop_ins.join("50-block.conf"),
        table("blocked = true", "mirrored/acme"),
    )
    .unwrap();
    let err = format!("{:#}", pull(pinned.clone()).await.unwrap_err());
    assert_eq!(
        err,
        format!(
            "registry {source}/acme is blocked in /etc/containers/registries.conf or /etc/containers/registries.conf.d"
        )
    );
    // ... and a later one replaces that: a mirror without the image. Each
    // location named, the mirror's in brackets, the source's last.
    std::fs::write(drop_ins.join("60-elsewhere.conf"), table("", "nowhere")).unwrap();
    std::fs::write(drop_ins.join("70-ignored.txt"), "not toml [").unwrap();
    let err = format!("{:#}", pull(pinned.clone()).await.unwrap_err());
    assert_eq!(
        err,
        format!(
            "(Mirrors also failed: [{m}/nowhere/os@{digest}: reading manifest {digest} in {m}/nowhere/os: manifest unknown]): {pinned}: {refused}"
        )
    );
}
