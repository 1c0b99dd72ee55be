#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The helper's four RPCs against a fake bootc host, through the real setns
//! path: bootc runs inside the fake host's mount namespace.

use proto::Code;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tests::fake_bootc::Fault;
use tests::fake_host::{FakeHost, image};
use tests::require_root;

const FIXED_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn argvs(host: &FakeHost) -> Vec<Vec<String>> {
    host.invocations().into_iter().map(|i| i.argv).collect()
}

/// A Stage call with weights unlike systemd's and the operator's defaults,
/// so that the stage unit's properties show whose they are.
fn stage_request(image: String) -> proto::StageRequest {
    proto::StageRequest {
        image,
        io_weight: 30,
        cpu_weight: 70,
    }
}

fn v(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn stage_status_apply_through_setns() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    let boot_id = host.layout.read_boot_id();

    let s = h.client.status(proto::StatusRequest {}).await.unwrap();
    assert_eq!(s.booted.as_ref().unwrap().image, image('a'));
    assert_eq!(
        s.booted.as_ref().unwrap().digest,
        format!("sha256:{}", "a".repeat(64))
    );
    assert!(s.staged.is_none());
    assert_eq!(
        s.boot_id, boot_id,
        "boot id read inside the host's mount namespace"
    );
    assert!(s.download_only_supported);

    let r = h.client.stage(stage_request(image('b'))).await.unwrap();
    assert!(r.locked);
    let staged = host.state().staged.unwrap();
    assert_eq!(staged.image, image('b'));
    // Released bootc (the fake's default): locked by ostree's lock file.
    assert!(host.layout.finalization_lock().exists());

    let s = h.client.status(proto::StatusRequest {}).await.unwrap();
    let st = s.staged.unwrap();
    assert_eq!(st.image, image('b'));
    assert!(st.download_only && st.soft_reboot_capable);

    h.client
        .apply(proto::ApplyRequest { soft_reboot: true })
        .await
        .unwrap();
    let reboots = host.layout.read_reboots();
    assert_eq!(reboots.len(), 1);
    assert!(reboots[0].soft);
    assert_eq!(reboots[0].image, image('b'));

    let s = h.client.status(proto::StatusRequest {}).await.unwrap();
    assert_eq!(s.booted.unwrap().image, image('b'));
    assert_eq!(s.rollback.unwrap().image, image('a'));
    // A soft reboot keeps the kernel's boot id, as on a real host.
    assert_eq!(s.boot_id, boot_id);
    assert_eq!(s.boot_id, host.layout.read_boot_id());

    assert_eq!(
        argvs(&host),
        [
            v(&["switch", "--help"]),
            v(&["status", "--format=json", "--format-version=1"]),
            v(&["switch", "--", &image('b')]),
            v(&["status", "--format=json", "--format-version=1"]),
            v(&["status", "--format=json", "--format-version=1"]),
            v(&[
                "upgrade",
                "--from-downloaded",
                "--apply",
                "--soft-reboot=auto"
            ]),
            v(&["status", "--format=json", "--format-version=1"]),
        ]
    );
    let own_ns = std::fs::read_link("/proc/self/ns/mnt")
        .unwrap()
        .display()
        .to_string();
    let units = host.layout.systemd().history();
    for inv in host.invocations() {
        assert_eq!(
            inv.mount_ns,
            host.mount_ns(),
            "bootc ran in the host's mount namespace"
        );
        assert_ne!(inv.mount_ns, own_ns);
        // PWD is set by the /bin/sh wrapper that starts the fake bootc.
        let env: Vec<_> = inv
            .env
            .iter()
            .filter(|e| !e.starts_with("PWD=") && !e.starts_with("INVOCATION_ID="))
            .collect();
        assert_eq!(env, [FIXED_ENV], "empty environment plus the fixed PATH");
        // Every run is a transient unit on the host (systemd's environment
        // has the unit's INVOCATION_ID), never the helper's child: the reads
        // under generated names, the stage and the apply under fixed ones.
        let mutating = inv
            .argv
            .first()
            .is_some_and(|a| a == "switch" || a == "upgrade")
            && !inv.argv.iter().any(|a| a == "--help");
        let unit = inv
            .env_var("INVOCATION_ID")
            .and_then(|id| host.layout.systemd().unit_of_invocation(id, &units));
        if mutating {
            let want = if inv.argv.iter().any(|a| a == "--apply") {
                "bootc-operator-apply.service"
            } else {
                "bootc-operator-stage.service"
            };
            assert_eq!(unit.as_deref(), Some(want), "{:?}", inv.argv);
            // The stage's pull runs with the weights asked for.
            let id = inv.env_var("INVOCATION_ID");
            let run = units.iter().find(|u| Some(u.invocation_id.as_str()) == id);
            if want == "bootc-operator-stage.service" {
                let properties = run.map(|u| u.properties.clone());
                assert_eq!(properties, Some(v(&["IOWeight=30", "CPUWeight=70"])));
            }
        } else {
            assert!(
                unit.as_deref().is_some_and(|u| u.starts_with("run-u")),
                "{:?} in {unit:?}",
                inv.argv
            );
        }
        assert_ne!(inv.ppid, h.process.pid() as i32, "{:?}", inv.argv);
        assert_eq!(inv.uid, 0);
        assert!(
            inv.extra_fds.is_empty(),
            "bootc inherits no descriptor: {:?}",
            inv.extra_fds
        );
    }
}

#[tokio::test]
async fn apply_without_soft_reboot_adds_no_flag() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    h.client.stage(stage_request(image('c'))).await.unwrap();
    h.client
        .apply(proto::ApplyRequest { soft_reboot: false })
        .await
        .unwrap();
    assert_eq!(
        argvs(&host).last().unwrap(),
        &v(&["upgrade", "--from-downloaded", "--apply"])
    );
    assert!(!host.layout.read_reboots()[0].soft);
}

#[tokio::test]
async fn write_auth_writes_mode_0600_in_the_host() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    let json = br#"{"auths":{"127.0.0.1:5000":{"auth":"dXNlcjpwYXNz"}}}"#;
    h.client
        .write_auth(proto::WriteAuthRequest {
            docker_config_json: json.to_vec(),
        })
        .await
        .unwrap();
    let path = host.layout.auth();
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let sent: serde_json::Value = serde_json::from_slice(json).unwrap();
    assert_eq!(written, sent);
    // Rotation replaces it.
    let json2 = br#"{"auths":{"127.0.0.1:5000":{"username":"u","password":"p"}}}"#;
    h.client
        .write_auth(proto::WriteAuthRequest {
            docker_config_json: json2.to_vec(),
        })
        .await
        .unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(written["auths"]["127.0.0.1:5000"]["username"], "u");
    assert!(host.invocations().is_empty(), "WriteAuth runs nothing");
}

#[tokio::test]
async fn bad_requests_are_refused_each_with_its_own_error_and_nothing_runs() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    let d = format!("sha256:{}", "a".repeat(64));
    let images: Vec<(String, &str)> = vec![
        (String::new(), "empty"),
        ("--apply".into(), "starts with '-'"),
        (format!("-quay.io/os@{d}"), "starts with '-'"),
        (
            format!("quay.io/os @{d}"),
            "whitespace or a control character",
        ),
        (
            format!("quay.io/os@{d}\n"),
            "whitespace or a control character",
        ),
        (
            format!("quay.io/os\t@{d}"),
            "whitespace or a control character",
        ),
        (format!("docker://quay.io/os@{d}"), "transport prefix"),
        (format!("oci:/var/mnt/os@{d}"), "transport prefix"),
        (
            format!("containers-storage:quay.io/os@{d}"),
            "transport prefix",
        ),
        (format!("quay.io/os:v1@{d}"), "both a tag and a digest"),
        ("quay.io/os:v1".into(), "must be pinned by digest"),
        ("quay.io/os".into(), "must be pinned by digest"),
        ("quay.io/os@sha256:abc".into(), "digest"),
        (
            format!(
                "quay.io/os@{}",
                d.to_uppercase().replacen("SHA256", "sha256", 1)
            ),
            "digest",
        ),
        (format!("quay.io/{}@{d}", "a".repeat(256)), "at most 255"),
        (format!("quay.io/OS@{d}"), "repository path component"),
    ];
    let mut messages = Vec::new();
    for (img, expect) in &images {
        let err = h
            .client
            .stage(stage_request(img.clone()))
            .await
            .expect_err(img);
        assert_eq!(err.code(), Code::InvalidArgument, "{img:?}: {err:?}");
        assert!(err.message().contains(expect), "{img:?}: {}", err.message());
        messages.push(err.message().to_owned());
    }
    let err = h
        .client
        .apply(proto::ApplyRequest { soft_reboot: true })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("nothing was staged"),
        "{}",
        err.message()
    );

    let auths: Vec<(Vec<u8>, &str)> = vec![
        (Vec::new(), "empty"),
        (b"not json".to_vec(), "not a docker config"),
        (b"[]".to_vec(), "not a docker config"),
        (
            br#"{"auths":{},"credHelpers":{"q.io":"x"}}"#.to_vec(),
            "not a docker config",
        ),
        (vec![b' '; 64 * 1024 + 1], "at most 65536"),
    ];
    for (payload, expect) in &auths {
        let err = h
            .client
            .write_auth(proto::WriteAuthRequest {
                docker_config_json: payload.clone(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains(expect), "{}", err.message());
    }
    // Over the protocol's message limit: refused by the transport.
    let err = h
        .client
        .write_auth(proto::WriteAuthRequest {
            docker_config_json: vec![b'x'; proto::MAX_MESSAGE_BYTES + 1],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");

    // A symlink on the auth path.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), host.root().join("run/ostree")).unwrap();
    let err = h
        .client
        .write_auth(proto::WriteAuthRequest {
            docker_config_json: br#"{"auths":{}}"#.to_vec(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(
        err.message().contains("refusing symlink"),
        "{}",
        err.message()
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);

    assert!(
        host.invocations().is_empty(),
        "bootc never ran: {:?}",
        host.invocations()
    );
    // The helper still serves after all that.
    h.client.status(proto::StatusRequest {}).await.unwrap();
}

#[tokio::test]
async fn apply_refused_when_the_host_staged_something_else() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    h.client.stage(stage_request(image('b'))).await.unwrap();
    // Someone else re-staged the host behind the helper's back.
    let mut state = host.state();
    state.staged = Some(tests::fake_bootc::Deployment::of(&image('c')));
    host.layout.write_state(&state).unwrap();
    let err = h
        .client
        .apply(proto::ApplyRequest { soft_reboot: false })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains(&image('c')), "{}", err.message());
    assert!(host.layout.read_reboots().is_empty());
    assert!(
        !argvs(&host)
            .iter()
            .any(|a| a.contains(&"--apply".to_string()))
    );
}

#[tokio::test]
async fn stage_failures_return_bootc_stderr() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    for fault in [Fault::PullError, Fault::Unauthorized, Fault::NoSpace] {
        host.layout.set_fault(Some(fault)).unwrap();
        let err = h.client.stage(stage_request(image('b'))).await.unwrap_err();
        assert_eq!(err.code(), Code::Aborted);
        let want = fault.message(&image('b'));
        assert!(
            err.message().contains(&want),
            "{fault:?}: {}",
            err.message()
        );
    }
    // A failed stage leaves nothing to apply.
    let err = h
        .client
        .apply(proto::ApplyRequest { soft_reboot: false })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    host.layout.set_fault(None).unwrap();
    h.client.stage(stage_request(image('b'))).await.unwrap();
}

/// Released bootc (no `switch --download-only`): Stage locks with ostree's
/// lock file around a plain `switch`, Status reports the staged deployment
/// locked, and Apply removes the file before `switch --apply`. Without the
/// file an orderly reboot before the apply would boot `b`.
#[tokio::test]
async fn released_bootc_stages_locked_with_ostrees_lock_file() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    host.layout
        .set_version(tests::fake_bootc::BootcVersion::V1_16)
        .unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    let s = h.client.status(proto::StatusRequest {}).await.unwrap();
    assert!(
        s.download_only_supported,
        "staging is locked on every bootc"
    );
    for _ in 0..2 {
        let r = h.client.stage(stage_request(image('b'))).await.unwrap();
        assert!(r.locked);
        assert!(host.layout.finalization_lock().exists());
        let s = h.client.status(proto::StatusRequest {}).await.unwrap();
        assert!(s.staged.unwrap().download_only, "the lock file locks it");
    }
    // Over a staged deployment ostree drops the file: Stage makes it again.
    h.client.stage(stage_request(image('c'))).await.unwrap();
    assert!(host.layout.finalization_lock().exists(), "locked again");
    assert!(!host.state().staged.unwrap().download_only, "bootc's flag");
    h.client
        .apply(proto::ApplyRequest { soft_reboot: true })
        .await
        .unwrap();
    let a = argvs(&host);
    assert!(a.contains(&v(&["switch", "--", &image('b')])));
    assert_eq!(
        a.last().unwrap(),
        &v(&[
            "upgrade",
            "--from-downloaded",
            "--apply",
            "--soft-reboot=auto"
        ])
    );
    assert!(
        !host.layout.finalization_lock().exists(),
        "removed to apply"
    );
    assert_eq!(host.state().booted.unwrap().image, image('c'));
}

/// Pids of processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

#[tokio::test]
async fn apply_answers_while_bootc_parks() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_millis(300)).await.unwrap();
    h.client.stage(stage_request(image('b'))).await.unwrap();
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        h.client.apply(proto::ApplyRequest { soft_reboot: false }),
    )
    .await
    .expect("Apply must answer while bootc is still running");
    reply.unwrap();
    assert_eq!(host.layout.read_reboots().len(), 1);
    let parked = processes_mentioning(&host.root().display().to_string())
        .into_iter()
        .filter(|p| *p != host.pid())
        .collect::<Vec<_>>();
    // bootc parks until the reboot kills it; the fake machine's reboot
    // killed it, and systemd-run (waiting for the unit) parks as well.
    assert!(!parked.is_empty(), "the apply is still under way");
    for pid in parked {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

#[tokio::test]
async fn helper_exits_when_the_daemon_end_closes() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let h = host.helper(Duration::from_secs(5)).await.unwrap();
    let pid = h.process.pid();
    drop(h.client);
    let status = tokio::time::timeout(Duration::from_secs(5), h.process.exited())
        .await
        .expect("helper did not exit after its peer went away")
        .unwrap();
    assert!(
        status.success(),
        "clean exit on EOF: {status:?} (pid {pid})"
    );
}

#[tokio::test]
async fn a_weight_outside_systemds_range_is_refused_before_bootc_runs() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    for (io_weight, cpu_weight, field) in [(0, 50, "IOWeight 0"), (50, 10_001, "CPUWeight 10001")] {
        let request = proto::StageRequest {
            io_weight,
            cpu_weight,
            ..stage_request(image('b'))
        };
        let err = h.client.stage(request).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains(field), "{}", err.message());
    }
    assert!(host.invocations().is_empty(), "bootc never ran for them");
}

#[tokio::test]
async fn only_allowed_repositories_are_staged_and_bootc_enforces_the_sigpolicy() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host
        .helper_with(daemon::confinement::spawn::HelperOptions {
            apply_window: Duration::from_secs(5),
            allowed_repositories: vec!["127.0.0.1:5000/os".into()],
            enforce_sigpolicy: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let other = format!("127.0.0.1:5000/other@sha256:{}", "c".repeat(64));
    let err = h
        .client
        .stage(stage_request(other.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(
        err.message()
            .contains("\"127.0.0.1:5000/other\" is not allowed")
            && err.message().contains("--allowed-repository"),
        "{}",
        err.message()
    );
    assert!(host.invocations().is_empty(), "bootc never ran for it");
    h.client.stage(stage_request(image('b'))).await.unwrap();
    assert_eq!(
        argvs(&host).last().unwrap(),
        &v(&["switch", "--enforce-container-sigpolicy", "--", &image('b')])
    );
}

#[tokio::test]
async fn write_auth_errors_never_echo_credentials() {
    require_root!();
    const SECRET: &str = "dXNlcjpodW50ZXIyLXNlY3JldA";
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    for payload in [
        format!(r#"{{"auths":{{"quay.io":"{SECRET}"}}}}"#),
        format!(r#"{{"auths":{{"quay.io":{{"{SECRET}":"x"}}}}}}"#),
        format!(r#"{{"auths":{{"quay.io":{{"auth":"{SECRET}""#),
    ] {
        let err = h
            .client
            .write_auth(proto::WriteAuthRequest {
                docker_config_json: payload.clone().into_bytes(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            !err.message().contains(SECRET),
            "{payload}: {}",
            err.message()
        );
    }
}

/// What the helper starts (the `systemd-run` / `systemctl` clients) dies
/// with it; bootc itself runs in a unit, by design (see the next test).
#[tokio::test]
async fn the_helpers_children_die_with_it() {
    require_root!();
    // Orphans come to this process, so they can be awaited.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    std::fs::write(host.layout.stage_delay(), "3000").unwrap();
    let systemd = host.layout.systemd();
    let h = host.helper(Duration::from_secs(5)).await.unwrap();
    let mut client = h.client.clone();
    let stage = tokio::spawn(async move { client.stage(stage_request(image('b'))).await });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // The unit's start is a file the fake systemd writes: poll it.
    while systemd.unit(STAGE_UNIT).is_none() {
        assert!(std::time::Instant::now() < deadline, "no stage unit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let helper_pid = h.process.pid() as i32;
    // `systemd-run --wait` for the stage unit.
    let children = children_of(helper_pid);
    assert!(!children.is_empty(), "the stage's client is running");
    let helper = nix::unistd::Pid::from_raw(helper_pid);
    nix::sys::signal::kill(helper, nix::sys::signal::SIGKILL).unwrap();
    let _ = stage.await;
    // Reaped: its children are this process's now.
    tokio::time::timeout(Duration::from_secs(5), h.process.exited())
        .await
        .unwrap()
        .unwrap();
    for pid in children {
        // Waiting on its unit for 3 s unless its parent-death signal ends it.
        let status =
            tests::daemon_proc::wait_pid(nix::unistd::Pid::from_raw(pid), Duration::from_secs(2))
                .unwrap_or_else(|e| {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::SIGKILL,
                    );
                    panic!("a child of the helper outlived it: {e}")
                });
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "{status:?}");
    }
}

/// The pids whose parent is `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("PPid:").map(|v| v.trim().parse::<i32>()))
                })
                .is_some_and(|p| p.ok() == Some(parent))
        })
        .collect()
}

const STAGE_UNIT: &str = "bootc-operator-stage.service";

/// bootc's pull runs in a transient unit on the host, not as the helper's
/// child: it survives the helper's death (the daemon's pod killed or
/// rolled), and the next helper finds it running under its fixed name and
/// waits for it rather than starting a second bootc next to it.
#[tokio::test]
async fn a_stage_outlives_its_helper_and_the_next_helper_waits_for_it() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    std::fs::write(host.layout.stage_delay(), "3000").unwrap();
    let systemd = host.layout.systemd();
    let first = host.helper(Duration::from_secs(5)).await.unwrap();
    let mut client = first.client.clone();
    let stage = tokio::spawn(async move { client.stage(stage_request(image('b'))).await });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // The unit's start is a file the fake systemd writes: poll it.
    let unit = loop {
        if let Some(unit) = systemd.unit(STAGE_UNIT) {
            break unit;
        }
        assert!(std::time::Instant::now() < deadline, "no stage unit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The helper dies as in a pod kill.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.process.pid() as i32),
        nix::sys::signal::SIGKILL,
    )
    .unwrap();
    let _ = stage.await;
    assert!(
        std::path::Path::new(&format!("/proc/{}", unit.main_pid)).exists(),
        "bootc died with its helper"
    );
    assert_eq!(
        systemd.unit(STAGE_UNIT).map(|u| u.invocation_id),
        Some(unit.invocation_id.clone())
    );

    let mut second = host.helper(Duration::from_secs(5)).await.unwrap();
    let reply = second
        .client
        .stage(stage_request(image('b')))
        .await
        .unwrap();
    assert!(reply.locked);
    let runs: Vec<_> = systemd
        .history()
        .into_iter()
        .filter(|r| r.name == STAGE_UNIT)
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].invocation_id, unit.invocation_id);
    assert_eq!(runs[0].result, "success", "the first pull finished");
    assert!(
        runs[1].started_micros >= runs[0].finished_micros,
        "a second bootc ran next to the first: {runs:?}"
    );
    let staged = host.state().staged.unwrap();
    assert_eq!(staged.image, image('b'));
    assert!(host.layout.finalization_lock().exists(), "staged locked");
}

#[tokio::test]
async fn status_names_the_hosts_own_updaters_that_are_on() {
    require_root!();
    use api::host_updaters::{BOOTC_TIMER, RPM_OSTREE_TIMER, ZINCATI};
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let mut h = host.helper(Duration::from_secs(5)).await.unwrap();
    let mut updaters = async || {
        let s = h.client.status(proto::StatusRequest {}).await.unwrap();
        s.host_updaters
    };
    // The tests' image masks bootc's timer; the others are not installed.
    assert_eq!(updaters().await, Vec::<String>::new());
    // As Fedora ships it: enabled, and reported.
    host.leave_updater_on(true).unwrap();
    assert_eq!(updaters().await, v(&[BOOTC_TIMER]));
    let systemd = host.layout.systemd();
    systemd.set_unit_file(ZINCATI, "enabled").unwrap();
    systemd.set_unit_file(RPM_OSTREE_TIMER, "disabled").unwrap();
    assert_eq!(updaters().await, v(&[BOOTC_TIMER, ZINCATI]));
    // Masked by a person: read again, not cached.
    host.leave_updater_on(false).unwrap();
    systemd.set_unit_file(ZINCATI, "masked").unwrap();
    assert_eq!(updaters().await, Vec::<String>::new());
    // Read only: nothing but the status reads ran bootc.
    assert!(
        argvs(&host)
            .iter()
            .all(|a| a.first().is_some_and(|c| c == "status" || c == "switch")),
        "{:?}",
        argvs(&host)
    );
}
