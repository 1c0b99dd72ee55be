//! Leader election and write economy, against a real API server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;
use tests::daemon_player::{DaemonPlayer, PlayerOptions};

async fn wait_holder(admin: &kube::Client, holder: Option<&'static str>) {
    tests::k8s::wait_for(
        Api::<Lease>::namespaced(admin.clone(), "bootc-operator"),
        "bootc-controller",
        WAIT,
        "lease holder",
        move |l: Option<&Lease>| {
            l.and_then(|l| l.spec.as_ref())
                .map(|s| s.holder_identity.as_deref())
                .is_some_and(|h| h == holder)
        },
    )
    .await
    .unwrap();
}

/// Two replicas: only the lease holder acts; SIGTERM releases the lease and
/// the standby takes over at once.
#[tokio::test]
async fn leader_election_hands_over_on_sigterm() {
    let args = ["--leader-elect", "--lease-duration-seconds", "6"];
    let Cluster {
        env,
        recorder: _,
        player: _player,
        ctl: mut a,
    } = Setup::workers(&["n1", "n2"])
        .controller("replica-a", &args)
        .start()
        .await;
    wait_holder(&env.admin, Some("replica-a")).await;
    let port = tests::control_plane::free_port().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let mut b_args = args.to_vec();
    b_args.extend(["--health-addr", addr.as_str()]);
    let mut b = ControllerProc::spawn(&env, "replica-b", &b_args);
    // The standby is live and ready (it is doing what it should: waiting).
    assert_eq!(http_get(&addr, "/healthz").await, 200);
    assert_eq!(http_get(&addr, "/readyz").await, 200);
    assert_eq!(http_get(&addr, "/nope").await, 404);
    create_pool(&env.admin, &workers_pool(1)).await;
    wait_rolled(&env.admin, "workers", NEW, 2).await;
    let standby = b.log_text();
    assert!(standby.contains("waiting for the lease"), "{standby}");
    assert!(
        !standby.contains("reconciled"),
        "the standby acted:\n{standby}"
    );

    let status = a.terminate().await;
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");
    assert!(a.log_text().contains("lease released"));
    wait_holder(&env.admin, Some("replica-b")).await;

    patch_pool(
        &env.admin,
        "workers",
        json!({"spec": {"image": {"ref": image(OLD)}}}),
    )
    .await;
    wait_rolled(&env.admin, "workers", OLD, 2).await;
    b.terminate().await;
}

/// Once a rollout is done, noise (kubelet heartbeats, daemon rewrites of the
/// same status, unrelated labels) makes the controller write nothing.
#[tokio::test]
async fn nothing_is_written_while_nothing_changes() {
    use kube::api::{Patch, PatchParams};
    let names = ["n1", "n2", "n3"];
    let Cluster {
        env,
        recorder: _,
        player,
        mut ctl,
    } = Setup::workers(&names)
        .pool(workers_pool(1))
        .start_in(env_with_audit().await)
        .await;
    wait_rolled(&env.admin, "workers", NEW, 3).await;
    drop(player);
    let per_node = controller_write_lines(&env)
        .iter()
        .filter(|l| !l.contains("bootcnodepools"))
        .count() as f64
        / names.len() as f64;
    assert!(per_node <= 10.0, "{per_node} writes per node for a rollout");

    // A sync point: a spec change the controller answers with exactly one
    // write (the status with the new observedGeneration).
    let sync = |timeout: i64| {
        let admin = env.admin.clone();
        async move {
            patch_pool(
                &admin,
                "workers",
                json!({"spec": {"rollout": {"drainTimeoutSeconds": timeout}}}),
            )
            .await;
            wait_pool(&admin, "workers", "new generation observed", |p| {
                p.status
                    .as_ref()
                    .is_some_and(|s| s.observed_generation == p.metadata.generation)
            })
            .await;
        }
    };
    sync(700).await;
    assert_eq!(writes_after_admin_patch(&env, 1).await.len(), 1);

    // Noise: heartbeats, an unrelated label, a daemon rewriting its status.
    for n in names {
        tests::daemon_player::set_ready(&env.admin, n, true)
            .await
            .unwrap();
        Api::<k8s_openapi::api::core::v1::Node>::all(env.admin.clone())
            .patch(
                n,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"noise": "1"}}})),
            )
            .await
            .unwrap();
        Api::<api::BootcNode>::all(env.admin.clone())
            .patch_status(
                n,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"bootId": "same-boot"}})),
            )
            .await
            .unwrap();
    }
    sync(701).await;
    let after = writes_after_admin_patch(&env, 1).await;
    // From the first sync to the second: its status write, nothing for noise.
    let noise_writes = writes_after_admin_patches(&env, 1, 1).await;
    assert_eq!(noise_writes.len(), 1, "noise made writes: {noise_writes:?}");
    assert_eq!(after.len(), 1, "{after:?}");
    ctl.terminate().await;
}

/// The controller as a library call with a shutdown handle.
#[tokio::test]
async fn runs_in_process_until_cancelled() {
    let env = env().await;
    create_node(&env.admin, "n1", &[("pool", "workers")], false).await;
    let _player = DaemonPlayer::start(
        env.admin.clone(),
        PlayerOptions {
            initial_image: image(OLD),
            ..PlayerOptions::default()
        },
    );
    let kubeconfig =
        kube::config::Kubeconfig::read_from(env.cp.kubeconfig(tests::Identity::Controller))
            .unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let stop = controller::CancellationToken::new();
    let task = tokio::spawn(controller::run(
        config,
        controller::Options::new("in-process"),
        stop.clone(),
    ));
    create_pool(&env.admin, &workers_pool(1)).await;
    wait_rolled(&env.admin, "workers", NEW, 1).await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A leader whose renewals get no answer (the API server hangs) stops acting
/// before a standby may take the lease over (`renewTime` + lease duration),
/// so there are never two leaders. The standby takes over once the server
/// answers again.
#[tokio::test]
async fn a_leader_that_cannot_renew_stops_before_the_lease_expires() {
    let env = env().await;
    let duration = 6;
    let args = [
        "--leader-elect",
        "--lease-duration-seconds",
        &duration.to_string(),
    ]
    .map(|a| a.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut a = ControllerProc::spawn(&env, "replica-a", &args);
    wait_holder(&env.admin, Some("replica-a")).await;
    // The stored holder is not enough: under load the acquiring write can
    // land after the replica's own 2 s timeout, and the replica then does
    // not know it leads until its next attempt.
    a.wait_log("became leader").await;
    let mut b = ControllerProc::spawn(&env, "replica-b", &args);

    env.cp.pause_apiserver().unwrap();
    let status = a.wait().await;
    let stopped = jiff::Timestamp::now();
    env.cp.resume_apiserver().unwrap();

    assert!(!status.success(), "a lost lease is an error exit");
    let log = a.log_text();
    assert!(log.contains("renew deadline"), "{log}");
    // The leader cannot have renewed while the server was frozen: the
    // stored renewTime is its last successful renewal.
    let lease = Api::<Lease>::namespaced(env.admin.clone(), "bootc-operator")
        .get("bootc-controller")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    let renewed = spec.renew_time.unwrap().0;
    let expires = renewed + jiff::SignedDuration::from_secs(duration);
    assert!(
        stopped < expires,
        "the old leader stopped at {stopped}, after its lease expired at {expires}:\n{log}"
    );

    wait_holder(&env.admin, Some("replica-b")).await;
    b.terminate().await;
}
