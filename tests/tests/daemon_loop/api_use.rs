//! The daemon's use of the API (SECURITY.md P26, P29): one watch, nothing
//! sent while idle, the in-cluster service account and its rotated token.

use std::time::Duration;

use api::{BootcNode, Reason};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tests::daemon_loop::{
    daemon_requests, patch_spec, phase, spec, wait_bn, wait_for_reboot, world_with,
};
use tests::fake_host::{FakeHost, image};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node};
use tests::{ControlPlane, require_root};

#[tokio::test]
async fn idle_daemon_holds_one_watch_and_sends_nothing() {
    require_root!();
    let w = world_with(tests::control_plane::Options {
        audit: true,
        ..Default::default()
    })
    .await;
    let a = image('a');
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&a))
        .await
        .unwrap();
    let mut options = AgentOptions::new("node-1");
    // Poll the host every second: polls must not turn into writes.
    options.poll_interval = Duration::from_secs(1);
    let agent = Agent::start(&w.cp, &host, &options, w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", Reason::Idle.as_str(), |bn| {
        phase(bn) == Some(Reason::Idle.as_str())
    })
    .await;
    let rv = bn.metadata.resource_version.clone();

    // An idle period is what is measured here: nothing can be awaited.
    let audit_before = daemon_requests(&w.cp);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during: Vec<String> = daemon_requests(&w.cp).split_off(audit_before.len());
    // The one watch may still be starting (it is checked to be the only
    // one below); anything else while idle is a failure.
    let other: Vec<&String> = during.iter().filter(|r| !r.starts_with("watch ")).collect();
    assert!(
        other.is_empty(),
        "requests while idle: {other:?}\n{}",
        agent.log_text()
    );
    assert_eq!(
        w.nodes
            .get("node-1")
            .await
            .unwrap()
            .metadata
            .resource_version,
        rv,
        "written while idle"
    );
    assert!(
        host.layout
            .read_invocations()
            .iter()
            .filter(|i| i.argv[0] == "status")
            .count()
            >= 4,
        "the fallback poll did not run"
    );

    // Over the whole life: one watch, on its own object, that also brought
    // the object in (a streaming list: no LIST before it), and nothing else
    // but status writes.
    let all = daemon_requests(&w.cp);
    let watches: Vec<&String> = all.iter().filter(|r| r.starts_with("watch ")).collect();
    assert_eq!(watches.len(), 1, "watches: {all:?}");
    assert!(
        watches[0].contains("metadata.name%3Dnode-1")
            || watches[0].contains("metadata.name=node-1"),
        "{}",
        watches[0]
    );
    assert!(
        watches[0].contains("sendInitialEvents=true"),
        "not a streaming list: {}",
        watches[0]
    );
    for r in &all {
        assert!(
            r.starts_with("watch ") || r.starts_with("patch "),
            "unexpected daemon request {r}"
        );
        assert!(
            r.contains("bootcnodes"),
            "daemon touched something else: {r}"
        );
    }
    drop(agent);
}

/// An approved apply costs no read (SECURITY.md P28): the `Rebooting`
/// report, written on condition that the BootcNode is still the version
/// that approved it, is the confirmation. From Staged to the reboot the
/// daemon sends that one write and nothing else.
#[tokio::test]
async fn an_approval_is_confirmed_by_the_guarded_report_not_a_read() {
    require_root!();
    let w = world_with(tests::control_plane::Options {
        audit: true,
        ..Default::default()
    })
    .await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&b))
        .await
        .unwrap();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", Reason::Staged.as_str(), |bn| {
        phase(bn) == Some(Reason::Staged.as_str())
    })
    .await;

    let before = daemon_requests(&w.cp).len();
    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    wait_for_reboot(&host, || format!("no reboot:\n{}", agent.log_text())).await;
    let since: Vec<String> = daemon_requests(&w.cp).split_off(before);
    assert_eq!(
        since.len(),
        1,
        "requests from the approval to the reboot: {since:?}\n{}",
        agent.log_text()
    );
    assert!(
        since[0].starts_with("patch ") && since[0].contains("/bootcnodes/node-1/status"),
        "{since:?}"
    );
    drop(agent);
}

/// The production auth path: no kubeconfig, the in-cluster service account
/// (environment plus token, CA and namespace files at the fixed path), read
/// after the privilege drop and under the seccomp filter. A rotated token is
/// picked up by the running daemon (the client re-reads the file about once
/// a minute: this test waits that long).
#[tokio::test]
async fn in_cluster_service_account_is_used_and_a_rotated_token_is_reread() {
    use std::os::unix::fs::PermissionsExt;
    require_root!();
    let w = world_with(tests::control_plane::Options {
        audit: true,
        ..Default::default()
    })
    .await;

    // What the kubelet projects into a pod: world-readable files.
    let sa = tempfile::tempdir().unwrap();
    std::fs::set_permissions(sa.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let write = |name: &str, content: &[u8]| {
        let tmp = sa.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, content).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&tmp, sa.path().join(name)).unwrap();
    };
    write("token", w.cp.node_bound_token("node-1").unwrap().as_bytes());
    write("ca.crt", &std::fs::read(w.cp.ca_file()).unwrap());
    write("namespace", b"bootc-operator");

    let a = image('a');
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&a))
        .await
        .unwrap();
    let agent = Agent::start_in_cluster(
        sa.path(),
        "127.0.0.1",
        w.cp.port(),
        &host,
        &AgentOptions::new("node-1"),
        w.logs.path(),
    )
    .unwrap();
    wait_bn(&w.nodes, "node-1", Reason::Idle.as_str(), |bn| {
        phase(bn) == Some(Reason::Idle.as_str())
    })
    .await;
    let first = daemon_credentials(&w.cp);
    assert_eq!(first.len(), 1, "{first:?}\n{}", agent.log_text());
    assert!(
        agent.log_text().contains("privileges dropped"),
        "{}",
        agent.log_text()
    );

    // The kubelet rotates the token (atomically); the daemon keeps running.
    write("token", w.cp.node_bound_token("node-1").unwrap().as_bytes());
    // Each change of the desired image makes the daemon write its status (a
    // request with whatever token it holds; a spec change that leaves it Idle
    // is not acknowledged). The client re-reads the token file within about
    // a minute of its first read: poll until a request carries the rotated one.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let b = image('b');
    let mut desired = &b;
    while daemon_credentials(&w.cp).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated token was never used: {:?}\n{}",
            daemon_credentials(&w.cp),
            agent.log_text()
        );
        let generation = patch_spec_generation(&w.nodes, json!({"desiredImage": desired})).await;
        wait_bn(&w.nodes, "node-1", "status for the new generation", |bn| {
            bn.status.as_ref().and_then(|s| s.observed_generation) == Some(generation)
        })
        .await;
        desired = if desired == &a { &b } else { &a };
        // The token is re-read on a clock, not on an event: wait between
        // nudges (this is the poll's interval, not a synchronisation).
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    drop(agent);
}

async fn patch_spec_generation(api: &Api<BootcNode>, spec: serde_json::Value) -> i64 {
    api.patch(
        "node-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await
    .unwrap()
    .metadata
    .generation
    .unwrap()
}

/// The credentials (one id per service account token) the daemon's
/// requests carried.
fn daemon_credentials(cp: &ControlPlane) -> std::collections::BTreeSet<String> {
    cp.audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == tests::control_plane::DAEMON_USER)
        .filter_map(|e| {
            e["user"]["extra"]["authentication.kubernetes.io/credential-id"][0]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}
