//! The operator's image as `./dev image` builds it (tests/scripts/build-image.sh,
//! Debian's umoci): reproducible, holding only the binaries, the libraries
//! they need, a CA bundle and the users; pushed to a real registry with
//! skopeo, pulled back, unpacked, and its binaries run from its own root
//! file system (the controller as its non-root user, the daemon's privilege
//! drop and seccomp filter); the image's daemon and helper then run a node
//! of a real API server. The tests build it from the binaries cargo built
//! for them; `./dev image` from the release ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use tests::fake_host::{FakeHost, bin, image};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node, install_daemon_rbac};
use tests::registry::TestRegistry;
use tests::{ControlPlane, k8s};

const TAG: &str = "test";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds the image into `layout`; returns its manifest digest.
fn build(layout: &Path) -> String {
    let bin_dir = bin("bootc-controller").parent().unwrap().to_path_buf();
    tests::image::build(&bin_dir, layout, TAG, 1_700_000_000).unwrap()
}

fn unpack(layout: &Path, bundle: &Path) -> PathBuf {
    tests::image::unpack(layout, TAG, bundle).unwrap()
}

/// Every file in `root`, relative.
fn files(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                out.insert(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out
}

fn config(rootfs: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(rootfs.parent().unwrap().join("config.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_image_is_reproducible_and_holds_only_what_the_binaries_need() {
    let dir = tempfile::tempdir().unwrap();
    let first = build(&dir.path().join("a"));
    let second = build(&dir.path().join("b"));
    assert!(first.starts_with("sha256:"), "{first}");
    assert_eq!(first, second, "same inputs, same digest");

    let rootfs = unpack(&dir.path().join("a"), &dir.path().join("bundle"));
    let all = files(&rootfs);
    let expected_fixed: BTreeSet<String> = [
        "usr/bin/bootc-controller",
        "usr/bin/bootc-daemon",
        "usr/bin/bootc-helper",
        "etc/ssl/certs/ca-certificates.crt",
        "etc/passwd",
        "etc/group",
        "etc/nsswitch.conf",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let libraries: Vec<&String> = all.difference(&expected_fixed).collect();
    assert!(expected_fixed.is_subset(&all), "{all:?}");
    assert!(
        libraries.iter().all(|l| l.contains(".so")),
        "only shared libraries besides: {libraries:?}"
    );
    assert!(
        libraries.iter().any(|l| l.contains("libc.so")),
        "{libraries:?}"
    );
    let config = config(&rootfs);
    assert_eq!(config["process"]["user"]["uid"], 65532, "{config}");
    assert_eq!(config["process"]["args"][0], "/usr/bin/bootc-controller");
}

#[tokio::test]
async fn the_pushed_image_runs_from_its_own_root() {
    let registry = TestRegistry::start("pusher", "secret").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("oci");
    let digest = build(&layout);
    // skopeo reads CA certificates (*.crt) from a directory.
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    std::fs::copy(registry.ca_path(), certs.join("ca.crt")).unwrap();
    let remote = format!("docker://{}/bootc-operator:{TAG}", registry.host());
    run(Command::new("skopeo")
        .args(["copy", "--dest-creds", "pusher:secret", "--dest-cert-dir"])
        .arg(&certs)
        .arg(format!("oci:{}:{TAG}", layout.display()))
        .arg(&remote));
    // What the registry serves is what was built.
    let pulled = dir.path().join("pulled");
    run(Command::new("skopeo")
        .args(["copy", "--src-creds", "pusher:secret", "--src-cert-dir"])
        .arg(&certs)
        .arg(&remote)
        .arg(format!("oci:{}:{TAG}", pulled.display())));
    let index = std::fs::read_to_string(pulled.join("index.json")).unwrap();
    assert!(index.contains(&digest), "{digest} not in {index}");

    let rootfs = unpack(&pulled, &dir.path().join("bundle"));
    // Reachable by any user, as a container runtime's rootfs is (the daemon
    // may start as another user than the test's: daemon_user).
    for path in [dir.path(), rootfs.parent().unwrap()] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The controller as the image's user: its libraries are all there.
    let help = run(Command::new("chroot")
        .arg("--userspec=65532:65532")
        .arg(&rootfs)
        .args(["/usr/bin/bootc-controller", "--help"]));
    assert!(help.contains("--metrics-addr"), "{help}");
    // The daemon drops every privilege and installs its seccomp filter from
    // inside the image: getpid is allowed, ptrace is not (refused or killed,
    // as the filter decides). It reads /proc/self/status, which a container
    // runtime mounts: so does this, in a mount namespace of its own.
    std::fs::create_dir_all(rootfs.join("proc")).unwrap();
    let selftest = |case: &str| {
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--fork"])
            .arg(format!("--mount-proc={}", rootfs.join("proc").display()))
            .arg("chroot")
            .arg(&rootfs)
            .args(["/usr/bin/bootc-daemon", "seccomp-selftest", case])
            .status()
            .unwrap()
    };
    let allowed = Some(i32::from(daemon::confinement::selftest::ALLOWED));
    let getpid = selftest("getpid");
    assert_eq!(getpid.code(), allowed, "getpid: {getpid}");
    let ptrace = selftest("ptrace");
    assert!(
        ptrace.code() != allowed
            && ptrace.code() != Some(i32::from(daemon::confinement::selftest::SETUP_FAILED)),
        "ptrace: {ptrace}"
    );
    let helper = Command::new("chroot")
        .arg(&rootfs)
        .args(["/usr/bin/bootc-helper", "--help"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&helper.stderr).contains("error while loading shared libraries"),
        "{helper:?}"
    );
    the_images_daemon_runs_a_node(&rootfs).await;
}

/// The executable behind `pid`.
fn exe(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

/// The user (and with it the capabilities) a container runtime starts the
/// image's daemon as under `deploy/daemon.yaml`'s pod spec: its
/// `runAsUser`/`runAsGroup`, else the image's user (65532, the
/// controller's).
fn daemon_user(rootfs: &Path) -> (u32, u32) {
    let config = config(rootfs);
    let id = |key: &str| u32::try_from(config["process"]["user"][key].as_u64().unwrap()).unwrap();
    let text = std::fs::read_to_string(tests::repo_root().join("deploy/daemon.yaml")).unwrap();
    let daemonset: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    let pod = &daemonset["spec"]["template"]["spec"];
    tests::image::container_user(pod, "daemon", (id("uid"), id("gid")), &passwd).unwrap()
}

/// The image's `bootc-daemon` and `bootc-helper` (the files pulled from the
/// registry, not cargo's) run a node of a real API server, as the DaemonSet
/// runs them (as the user, and with the capabilities, that its pod spec
/// gives them with the image's config: [`daemon_user`]): the daemon starts
/// the helper, drops every privilege and reports the fake host's bootc
/// status on its BootcNode with a node-bound token. (They run on the machine's own shared libraries, which the image
/// copies: the chroot runs above show the image's copies load.)
async fn the_images_daemon_runs_a_node(rootfs: &Path) {
    use api::{BootcNode, BootcNodeSpec};
    tests::require_root!();
    let cp = ControlPlane::start().await.unwrap();
    let admin = cp.admin().await.unwrap();
    k8s::install_crds(&admin).await.unwrap();
    install_daemon_rbac(&cp).unwrap();
    let booted = image('a');
    let host = FakeHost::start(Some(&booted)).unwrap();
    let spec = BootcNodeSpec {
        desired_image: booted.as_str().into(),
        desired_image_state: api::DesiredImageState::Staged,
        reboot_policy: api::RebootPolicy::RebootOnly,
        pull_secret_ref: None,
        pull_secret_hash: None,
        staging_weights: None,
    };
    create_bootc_node(&admin, "node-1", spec).await.unwrap();
    let logs = tempfile::tempdir().unwrap();
    let user = daemon_user(rootfs);
    let options = AgentOptions {
        bin_dir: Some(rootfs.join("usr/bin")),
        user: Some(user),
        ..AgentOptions::new("node-1")
    };
    let agent = Agent::start(&cp, &host, &options, logs.path()).unwrap();
    let idle = k8s::wait_for(
        kube::Api::<BootcNode>::all(admin.clone()),
        "node-1",
        std::time::Duration::from_secs(60),
        "the image's daemon reports Idle",
        |bn| {
            bn.and_then(|b| b.status.as_ref())
                .and_then(|s| api::conditions::reason(&s.conditions, api::ConditionType::Idle))
                == Some(api::Reason::Idle.as_str())
        },
    )
    .await;
    let log = agent.log_text();
    let bn = idle
        .unwrap_or_else(|e| panic!("{e} (the daemon started as uid/gid {user:?})\n{log}"))
        .unwrap();
    let status = bn.status.unwrap();
    assert_eq!(
        status.booted.unwrap().image.as_deref(),
        Some(booted.as_str())
    );

    let daemon = agent.child.id();
    assert_eq!(exe(daemon), rootfs.join("usr/bin/bootc-daemon"));
    let proc_status = std::fs::read_to_string(format!("/proc/{daemon}/status")).unwrap();
    daemon::confinement::privdrop::check_unprivileged(&proc_status, true)
        .unwrap_or_else(|e| panic!("the image's daemon kept a privilege: {e}\n{proc_status}"));
    assert!(log.contains("privileges dropped"), "{log}");
    let helper: u32 = std::fs::read_to_string(format!("/proc/{daemon}/task/{daemon}/children"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("the daemon has no helper child:\n{log}"))
        .parse()
        .unwrap();
    assert_eq!(exe(helper), rootfs.join("usr/bin/bootc-helper"));
    assert!(log.contains("bootc-helper serving"), "{log}");
}
