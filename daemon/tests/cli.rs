#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The daemon binary's command line. (This also makes `cargo test
//! --workspace` build `bootc-daemon`, which the tests/ crate runs.) Its
//! start-up settings, as an install gets them wrong: run the real binary
//! and read what it says.

use std::process::Command;

#[test]
fn help_hides_the_seccomp_selftest() {
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-daemon"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--host-root"));
    assert!(!help.contains("seccomp-selftest"));
}

/// Runs bootc-daemon with `args` and no allow-list from the environment;
/// returns its exit code and stderr. It must exit before starting the
/// helper (no root needed, no host touched).
fn daemon(args: &[&str], env: Option<&str>) -> (Option<i32>, String) {
    daemon_with(args, env, &[])
}

/// [`daemon`] with more environment variables.
fn daemon_with(args: &[&str], env: Option<&str>, more: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bootc-daemon"));
    cmd.args(["--node-name", "n1", "--helper", "/nonexistent/bootc-helper"])
        .args(args)
        .env_remove(daemon::agent::repositories::ENV)
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .envs(more.iter().copied());
    if let Some(value) = env {
        cmd.env(daemon::agent::repositories::ENV, value);
    }
    let out = cmd.output().expect("running bootc-daemon");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_daemon_refuses_to_start_without_an_allowed_repository() {
    // Neither the flag nor the environment, then the placeholder deploy/
    // ships (an empty value): exit 2, saying how to set it.
    for env in [None, Some("")] {
        let (code, stderr) = daemon(&[], env);
        assert_eq!(code, Some(2), "{env:?}: {stderr}");
        for needle in [
            "no allowed repository",
            daemon::agent::repositories::CONFIG_KEY,
            "--allowed-repository",
            "`any`",
        ] {
            assert!(
                stderr.contains(needle),
                "{env:?}: {needle} missing: {stderr}"
            );
        }
    }
    let (code, stderr) = daemon(&["--allowed-repository", "any,quay.io/acme/os"], None);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be combined"), "{stderr}");
}

#[test]
fn an_allowed_repository_or_any_gets_past_the_check() {
    // Past the check, the daemon goes on to start its helper (missing here)
    // and fails there, not on the allow-list.
    for (args, env) in [
        (&["--allowed-repository", "quay.io/acme/os"][..], None),
        (&[][..], Some("quay.io/acme/os,quay.io/acme/ns/")),
        (&["--allowed-repository=any"][..], None),
    ] {
        let (code, stderr) = daemon(args, env);
        assert_ne!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("no allowed repository"), "{stderr}");
        assert!(stderr.contains("allowed repositories"), "{stderr}");
    }
}

#[test]
fn the_sigpolicy_setting_reads_true_and_false_from_the_config_map() {
    // deploy/ ships `enforce-container-sigpolicy=false`: a daemon must start
    // with it (and enforce with `true`).
    for value in ["false", "true"] {
        let (code, stderr) = daemon_with(
            &["--allowed-repository", "quay.io/acme/os"],
            None,
            &[("BOOTC_ENFORCE_CONTAINER_SIGPOLICY", value)],
        );
        assert_ne!(code, Some(2), "{value}: {stderr}");
        assert!(
            stderr.contains(&format!("sigpolicy={value}")),
            "{value}: {stderr}"
        );
    }
}
