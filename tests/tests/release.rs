//! A release as `./dev release` assembles it (`tests/scripts/assemble-release.sh`,
//! here on the test build's plugin and a stand-in image layout): every
//! binary prints the workspace's version; `kubectl apply -f install.yaml`
//! installs deploy/'s objects pinned to the image digest on a real API
//! server; the packaged chart is pinned the same way; the real krew (built
//! from its Go module) installs the plugin from the krew manifest; the
//! checksums hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use tests::helm::{Helm, first_difference, objects};
use tests::{ControlPlane, binaries, repo_root};

const REPOSITORY: &str = "registry.test/bootc-operator";
const COMMAND: &str = "./dev release --image-repository registry.test/bootc-operator --base-url x";
const BUILDER: &str = "urn:bootc-operator:test";

fn digest() -> String {
    format!("sha256:{}", "d".repeat(64))
}

/// The workspace's version (Cargo.toml).
fn workspace_version() -> String {
    let text = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_owned()
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `--version` of the controller, the daemon and the plugin; the helper
/// (1,000 lines at most, SECURITY.md P39) says its version in its refusal
/// of any argument it does not take, `--version` included.
#[test]
fn every_binary_prints_the_workspace_version() {
    let version = workspace_version();
    for bin in ["bootc-controller", "bootc-daemon", "kubectl-bootc"] {
        let printed = stdout(Command::new(tests::fake_host::bin(bin)).arg("--version"));
        assert_eq!(printed.trim(), format!("{bin} {version}"));
    }
    let helper = Command::new(tests::fake_host::bin("bootc-helper"))
        .arg("--version")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&helper.stderr);
    assert!(
        said.contains(&format!("(bootc-helper {version})")),
        "{said}"
    );
}

/// Runs the assembly into `out`, signing with `key` if given; what it said
/// on stderr. The stand-in layout's index names the image's manifest.
fn assemble(out: &Path, key: Option<&Path>) -> String {
    let layout = out.with_extension("layout");
    std::fs::create_dir_all(&layout).unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let index = json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest(), "size": 1,
        "annotations": {"org.opencontainers.image.ref.name": workspace_version()},
    }]});
    std::fs::write(layout.join("index.json"), index.to_string()).unwrap();
    let mut cmd = Command::new(repo_root().join("tests/scripts/assemble-release.sh"));
    cmd.arg(out)
        .arg(&layout)
        .arg(digest())
        .arg(REPOSITORY)
        .arg(tests::fake_host::bin("kubectl-bootc"))
        .arg(format!("file://{}", out.display()))
        .arg(image_binaries(out))
        .env("HELM", binaries::helm().unwrap())
        .env("KUBECTL", binaries::kubectl().unwrap())
        .env("RELEASE_TOOL", tests::fake_host::bin("bootc-release"))
        .env("RELEASE_COMMAND", COMMAND)
        .env("RELEASE_BUILDER", BUILDER);
    match key {
        Some(key) => cmd.env("SIGNING_KEY", key),
        None => cmd.env_remove("SIGNING_KEY"),
    };
    let output = cmd.output().unwrap();
    assert!(output.status.success(), "{cmd:?}: {output:?}");
    String::from_utf8(output.stderr).unwrap()
}

/// The image's binaries, as the tests built them (the helper as it
/// ships), in one directory as `./dev release` has them.
fn image_binaries(out: &Path) -> std::path::PathBuf {
    let dir = out.with_extension("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for bin in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        std::os::unix::fs::symlink(tests::fake_host::bin(bin), dir.join(bin)).unwrap();
    }
    dir
}

/// A throwaway signing key, made as docs/development.md says.
fn signing_key(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let key = dir.join("cosign.key");
    stdout(
        Command::new("openssl")
            .args(["genpkey", "-algorithm", "EC", "-pkeyopt"])
            .arg("ec_paramgen_curve:P-256")
            .arg("-out")
            .arg(&key),
    );
    key
}

/// Every image of a manifest's pod templates.
fn images(manifest: &str) -> Vec<String> {
    objects(manifest)
        .unwrap()
        .values()
        .filter_map(|o| {
            o["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
        })
        .flatten()
        .map(|c| c["image"].as_str().unwrap().to_owned())
        .collect()
}

/// install.yaml is deploy/ object by object but for the images, which are
/// the release's digest; the packaged chart renders the same images.
fn pinned_to_the_digest(out: &Path, version: &str) {
    let install = std::fs::read_to_string(out.join("install.yaml")).unwrap();
    let pinned = format!("{REPOSITORY}@{}", digest());
    let found = images(&install);
    assert_eq!(found, vec![pinned.clone(); 2], "install.yaml's images");
    let kustomized = stdout(
        Command::new(binaries::kubectl().unwrap())
            .arg("kustomize")
            .arg(repo_root().join("deploy")),
    );
    let as_deploy = install.replace(&pinned, "bootc-operator:latest");
    let (ours, deploy) = (objects(&as_deploy).unwrap(), objects(&kustomized).unwrap());
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        deploy.keys().collect::<Vec<_>>()
    );
    for (key, object) in &ours {
        assert_eq!(first_difference(object, &deploy[key], ""), None, "{key:?}");
    }
    let chart = out.join(format!("bootc-operator-{version}.tgz"));
    let rendered = Helm::new()
        .unwrap()
        .run(&[
            "template",
            "bootc-operator",
            chart.to_str().unwrap(),
            "-n",
            "bootc-operator",
            "--set",
            "daemon.allowedRepositories={any}",
        ])
        .unwrap();
    assert_eq!(images(&rendered), vec![pinned; 2], "the chart's images");
}

/// The real krew installs the plugin from the release's manifest and
/// archive, in a network namespace of its own (it reaches nothing); the
/// archive carries the LICENSE, and krew keeps it with the plugin.
fn krew_installs_the_plugin(out: &Path, version: &str) {
    let archive = out.join("kubectl-bootc-linux-amd64.tar.gz");
    let listed = stdout(Command::new("tar").arg("-tzf").arg(&archive));
    let mut listed: Vec<&str> = listed.lines().collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        ["./", "./LICENSE", "./kubectl-bootc"],
        "the archive"
    );
    let license = std::fs::read_to_string(repo_root().join("LICENSE")).unwrap();
    assert!(
        license.contains("Apache License\n                           Version 2.0, January 2004")
    );
    let root = out.with_extension("krew");
    let krew = binaries::krew().unwrap();
    stdout(
        Command::new("unshare")
            .args(["--net", "--"])
            .arg(krew)
            .arg("install")
            .arg(format!("--manifest={}", out.join("bootc.yaml").display()))
            .arg(format!(
                "--archive={}",
                out.join("kubectl-bootc-linux-amd64.tar.gz").display()
            ))
            .env("KREW_ROOT", &root)
            .env("KREW_NO_UPGRADE_CHECK", "1"),
    );
    let installed = root.join("bin/kubectl-bootc");
    let printed = stdout(Command::new(installed).arg("--version"));
    assert_eq!(printed.trim(), format!("kubectl-bootc {version}"));
    let kept = root.join(format!("store/bootc/v{version}/LICENSE"));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), license, "{kept:?}");
}

#[tokio::test]
async fn a_release_installs_with_kubectl_apply_and_its_plugin_with_krew() {
    let version = workspace_version();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("release");
    let said = assemble(&out, Some(&signing_key(dir.path())));
    assert!(!said.contains("UNSIGNED"), "{said}");
    signatures_hold(&out, &version);
    the_sbom_lists_what_the_image_holds(&out);
    the_provenance_names_the_commit_and_what_was_built(&out, &version);
    stdout(
        Command::new("sha256sum")
            .args(["--check", "--strict", "SHA256SUMS"])
            .current_dir(&out),
    );
    pinned_to_the_digest(&out, &version);
    krew_installs_the_plugin(&out, &version);

    let cp = ControlPlane::start().await.unwrap();
    stdout(
        cp.kubectl()
            .arg("apply")
            .arg("-f")
            .arg(out.join("install.yaml")),
    );
    stdout(cp.kubectl().args([
        "wait",
        "--for=condition=Established",
        "crd/bootcnodepools.node.bootc.dev",
        "--timeout=60s",
    ]));
    let pool: Value = json!({
        "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
        "metadata": {"name": "workers"},
        "spec": {"nodeSelector": {"matchLabels": {"pool": "workers"}},
                 "image": {"ref": format!("registry.test/acme/os@{}", digest())}},
    });
    let pools: kube::Api<api::BootcNodePool> = kube::Api::all(cp.admin().await.unwrap());
    pools
        .create(&Default::default(), &serde_json::from_value(pool).unwrap())
        .await
        .unwrap();
    let image = stdout(cp.kubectl().args([
        "get",
        "deployment/bootc-controller",
        "-n",
        api::labels::OPERATOR_NAMESPACE,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]));
    assert_eq!(image, format!("{REPOSITORY}@{}", digest()));
}

/// `./dev release` in a copy of `dev` in a git repository of its own, with
/// `cargo` a stand-in that says it was called (the build's first step).
fn dev_release_in(repo: &Path, args: &[&str]) -> std::process::Output {
    let bin = repo.with_extension("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\necho \"stand-in cargo $*\" >&2\nexit 1\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&cargo).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&cargo, perms).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    Command::new(repo.join("dev"))
        .args(["release", "--image-repository", REPOSITORY])
        .args(["--base-url", "https://example.com/r"])
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap()
}

fn git(repo: &Path, args: &[&str]) {
    stdout(
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(repo),
    );
}

/// A release is built from a commit: `./dev release` refuses a tree with a
/// change or a file git does not have, naming each, before it builds
/// anything; target/ (ignored) is no change.
#[test]
fn a_release_refuses_a_dirty_tree() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("target")).unwrap();
    for file in ["dev", ".gitignore", "Cargo.toml"] {
        std::fs::copy(repo_root().join(file), repo.join(file)).unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "release"]);
    std::fs::write(repo.join("target/built"), "x").unwrap();

    let clean = dev_release_in(&repo, &[]);
    let said = String::from_utf8_lossy(&clean.stderr);
    assert!(
        said.contains("stand-in cargo"),
        "a clean tree builds: {said}"
    );

    std::fs::write(repo.join("notes.txt"), "x").unwrap();
    std::fs::write(repo.join("Cargo.toml"), "changed").unwrap();
    let no_key = dev_release_in(&repo, &["--signing-key", "/nonexistent/cosign.key"]);
    let said = String::from_utf8_lossy(&no_key.stderr);
    assert!(!said.contains("stand-in cargo"), "nothing built: {said}");
    assert!(
        said.contains("/nonexistent/cosign.key cannot be read"),
        "{said}"
    );

    let dirty = dev_release_in(&repo, &[]);
    let said = String::from_utf8_lossy(&dirty.stderr);
    assert!(!dirty.status.success(), "{said}");
    assert!(!said.contains("stand-in cargo"), "nothing built: {said}");
    assert!(said.contains("differs from its commit"), "{said}");
    assert!(said.contains("?? notes.txt"), "the untracked file: {said}");
    assert!(said.contains(" M Cargo.toml"), "the change: {said}");
    assert!(!said.contains("target"), "target/ is no change: {said}");
}

/// Reads a blob of an OCI layout.
fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    std::fs::read(
        layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:")),
    )
    .unwrap()
}

/// The image's signature in the layout, as the controller reads one from
/// a registry (the `.sig` tag's manifest, its payloads checked against
/// their digests) and checks it: a policy that requires `cosign.pub`, the
/// controller's parser and rule.
fn image_signature_check(out: &Path, index: &Value) -> Result<(), String> {
    use controller::target::registry::{policy, sha256_digest, signatures};
    let layout = out.join("image");
    let tag = signatures::signature_tag(&digest()).unwrap();
    let manifest = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag.as_str())
        .unwrap_or_else(|| panic!("no {tag} in {index}"));
    let body = blob(&layout, manifest["digest"].as_str().unwrap());
    assert_eq!(sha256_digest(&body), manifest["digest"].as_str().unwrap());
    let signed: Vec<signatures::Signed> = signatures::signature_layers(&body)
        .unwrap()
        .into_iter()
        .map(|layer| {
            let payload = blob(&layout, &layer.digest);
            assert_eq!(sha256_digest(&payload), layer.digest);
            signatures::Signed {
                payload,
                signature: layer.signature,
            }
        })
        .collect();
    assert_eq!(signed.len(), 1);
    let text = json!({"default": [{"type": "sigstoreSigned",
        "keyPath": out.join("cosign.pub"), "signedIdentity": {"type": "matchRepository"}}]});
    let read = |p: &Path| std::fs::read(p).map_err(|e| e.to_string());
    let policy = policy::parse(&text.to_string(), &read).unwrap().unwrap();
    let image = api::image_ref::ImageRef::parse(&format!("{REPOSITORY}@{}", digest())).unwrap();
    let (scope, requirements) = policy.requirements_for(&image);
    signatures::check(&scope, requirements, &image, &signed)
}

/// `FILE.sig` checked as `cosign verify-blob --key cosign.pub` does: the
/// DER signature (base64) over the file, with SHA-256.
fn blob_signature_check(out: &Path, file: &str, bytes: &[u8]) -> Result<(), String> {
    use base64::Engine;
    use p256::ecdsa::signature::Verifier;
    use p256::pkcs8::DecodePublicKey;
    let pem = std::fs::read_to_string(out.join("cosign.pub")).unwrap();
    let key = p256::ecdsa::VerifyingKey::from_public_key_pem(&pem).unwrap();
    let sig = std::fs::read_to_string(out.join(format!("{file}.sig"))).unwrap();
    let der = base64::engine::general_purpose::STANDARD
        .decode(sig.trim())
        .map_err(|e| e.to_string())?;
    let signature = p256::ecdsa::Signature::from_der(&der).map_err(|e| e.to_string())?;
    key.verify(bytes, &signature).map_err(|e| e.to_string())
}

/// The image's signature (in the layout, by the controller's own check),
/// the chart's and `SHA256SUMS`'s hold; a tampered file, or an image
/// signature checked for another key, fails.
fn signatures_hold(out: &Path, version: &str) {
    let index: Value =
        serde_json::from_slice(&std::fs::read(out.join("image/index.json")).unwrap()).unwrap();
    image_signature_check(out, &index).unwrap();
    let chart = format!("bootc-operator-{version}.tgz");
    for file in ["SHA256SUMS", chart.as_str(), "provenance.intoto.json"] {
        let bytes = std::fs::read(out.join(file)).unwrap();
        blob_signature_check(out, file, &bytes).unwrap();
        // And as openssl checks it: nothing of ours in the way.
        let der = out.with_extension("der");
        let sig = std::fs::read_to_string(out.join(format!("{file}.sig"))).unwrap();
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(sig.trim())
            .unwrap();
        std::fs::write(&der, raw).unwrap();
        stdout(
            Command::new("openssl")
                .args(["dgst", "-sha256", "-verify"])
                .arg(out.join("cosign.pub"))
                .arg("-signature")
                .arg(&der)
                .arg(out.join(file)),
        );
        let mut tampered = bytes.clone();
        tampered.push(b'\n');
        assert!(
            blob_signature_check(out, file, &tampered).is_err(),
            "a tampered {file} is refused"
        );
    }
    // Another key's public key in place of the release's: refused.
    let real = std::fs::read(out.join("cosign.pub")).unwrap();
    let other = signing_key(&out.with_extension("other"));
    let other_pub = stdout(
        Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(other),
    );
    std::fs::write(out.join("cosign.pub"), other_pub).unwrap();
    let refused = image_signature_check(out, &index).unwrap_err();
    assert!(
        refused.contains("no signature is verified by the key"),
        "{refused}"
    );
    assert!(
        blob_signature_check(
            out,
            "SHA256SUMS",
            &std::fs::read(out.join("SHA256SUMS")).unwrap()
        )
        .is_err()
    );
    std::fs::write(out.join("cosign.pub"), real).unwrap();
}

/// Without a key the release is built, and says it is unsigned.
#[test]
fn a_release_without_a_key_says_it_is_unsigned() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("release");
    let said = assemble(&out, None);
    assert!(said.contains("UNSIGNED release"), "{said}");
    assert!(!out.join("cosign.pub").exists());
    assert!(!out.join("SHA256SUMS.sig").exists());
}

/// The SBOM (SPDX 2.3) lists every crate `cargo tree -e normal` gives for
/// the packages of the image's binaries, each built on its own, with its
/// version; and the Debian package, with its installed version, of each
/// library `ldd` says a binary links (what build-image.sh copies). Each
/// identifier is unique and each relationship names one.
fn the_sbom_lists_what_the_image_holds(out: &Path) {
    let sbom: Value =
        serde_json::from_slice(&std::fs::read(out.join("sbom.spdx.json")).unwrap()).unwrap();
    assert_eq!(sbom["spdxVersion"], "SPDX-2.3");
    let packages = sbom["packages"].as_array().unwrap();
    let listed: std::collections::BTreeSet<(&str, &str)> = packages
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["versionInfo"].as_str().unwrap(),
            )
        })
        .collect();
    let ids: std::collections::BTreeSet<&str> = packages
        .iter()
        .map(|p| p["SPDXID"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), packages.len(), "unique SPDXIDs");
    for r in sbom["relationships"].as_array().unwrap() {
        let related = r["relatedSpdxElement"].as_str().unwrap();
        assert!(ids.contains(related), "{r}");
    }
    let mut crates = 0;
    for package in ["controller", "daemon", "helper"] {
        let tree = stdout(
            Command::new("cargo")
                .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
                .args(["--format", "{p}", "-p", package])
                .current_dir(repo_root()),
        );
        for line in tree.lines() {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap();
            let version = words.next().unwrap().trim_start_matches('v');
            assert!(
                listed.contains(&(name, version)),
                "{name} {version} ({package}) is not in the SBOM"
            );
            crates += 1;
        }
    }
    assert!(crates > 100, "{crates} crates");
    let mut libraries = 0;
    for bin in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        let ldd = stdout(Command::new("ldd").arg(tests::fake_host::bin(bin)));
        for lib in ldd
            .lines()
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        {
            let owner = stdout(Command::new("dpkg").arg("-S").arg(lib));
            let package = owner.split(':').next().unwrap();
            let version =
                stdout(Command::new("dpkg-query").args(["-W", "-f", "${Version}", package]));
            assert!(
                listed.contains(&(package, version.as_str())),
                "{lib}: {package} {version} is not in the SBOM"
            );
            libraries += 1;
        }
    }
    assert!(libraries >= 3, "{libraries} libraries");
}

/// The provenance is an in-toto Statement with an SLSA v1 predicate: its
/// subjects are the image (by its digest) and each file of the release
/// (by its SHA-256, as it is), and it names the commit the release was
/// built from, the command and the builder.
fn the_provenance_names_the_commit_and_what_was_built(out: &Path, version: &str) {
    let statement: Value =
        serde_json::from_slice(&std::fs::read(out.join("provenance.intoto.json")).unwrap())
            .unwrap();
    assert_eq!(statement["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(statement["predicateType"], "https://slsa.dev/provenance/v1");
    let subjects = statement["subject"].as_array().unwrap();
    assert_eq!(
        subjects[0],
        json!({"name": REPOSITORY, "digest": {"sha256": digest().trim_start_matches("sha256:")}})
    );
    let chart = format!("bootc-operator-{version}.tgz");
    let files = [
        "install.yaml",
        chart.as_str(),
        "kubectl-bootc-linux-amd64.tar.gz",
        "bootc.yaml",
        "sbom.spdx.json",
    ];
    assert_eq!(subjects.len(), files.len() + 1, "{subjects:?}");
    for file in files {
        let bytes = std::fs::read(out.join(file)).unwrap();
        let sha = controller::target::registry::sha256_digest(&bytes);
        assert!(
            subjects.contains(
                &json!({"name": file, "digest": {"sha256": sha.trim_start_matches("sha256:")}})
            ),
            "{file} {sha}: {subjects:?}"
        );
    }
    let head = stdout(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(repo_root()),
    );
    let build = &statement["predicate"]["buildDefinition"];
    assert_eq!(build["externalParameters"]["command"], COMMAND);
    assert_eq!(
        build["externalParameters"]["source"]["digest"]["gitCommit"],
        head.trim()
    );
    let run = &statement["predicate"]["runDetails"];
    assert_eq!(run["builder"]["id"], BUILDER);
    assert!(
        run["builder"]["version"]["rustc"]
            .as_str()
            .unwrap()
            .starts_with("rustc ")
    );
    let sums = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert!(sums.contains("  provenance.intoto.json\n"), "{sums}");
}
