//! The daemon's loop end to end: the real bootc-daemon and bootc-helper
//! against a fake bootc host, a real API server, and the daemon's own RBAC.
//! The test plays the controller (it writes BootcNode specs) and the node
//! simulator (it restarts the daemon after a simulated reboot).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use api::conditions;
use api::{BootcNode, BootcNodeSpec, DesiredImageState, RebootPolicy, SecretReference, reasons};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tests::fake_bootc::{BootcVersion, Fault, Invocation, UnplannedReboot};
use tests::fake_host::{FakeHost, image};
use tests::freeze_proxy::FreezeProxy;
use tests::node_agent::{
    Agent, AgentOptions, create_bootc_node, grant_pull_secrets, install_daemon_rbac,
};
use tests::{ControlPlane, k8s, require_root};

const WAIT: Duration = Duration::from_secs(30);

fn spec(desired: &str) -> BootcNodeSpec {
    BootcNodeSpec {
        desired_image: desired.to_owned(),
        desired_image_state: DesiredImageState::Staged,
        reboot_policy: RebootPolicy::RebootOnly,
        pull_secret_ref: None,
        pull_secret_hash: None,
    }
}

fn phase(bn: &BootcNode) -> Option<&str> {
    bn.status
        .as_ref()
        .and_then(|s| conditions::reason(&s.conditions, reasons::IDLE))
}

fn degraded(bn: &BootcNode) -> Option<String> {
    bn.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, reasons::DEGRADED))
        .filter(|c| c.status == "True")
        .map(|c| c.message.clone())
}

async fn wait_bn(
    api: &Api<BootcNode>,
    name: &str,
    what: &str,
    cond: impl Fn(&BootcNode) -> bool,
) -> BootcNode {
    k8s::wait_for(
        api.clone(),
        name,
        WAIT,
        what,
        move |o: Option<&BootcNode>| o.is_some_and(&cond),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .unwrap()
}

async fn patch_spec(api: &Api<BootcNode>, name: &str, spec: serde_json::Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec})),
    )
    .await
    .unwrap();
}

struct World {
    cp: ControlPlane,
    admin: kube::Client,
    nodes: Api<BootcNode>,
    logs: tempfile::TempDir,
}

async fn world() -> World {
    let cp = ControlPlane::start().await.unwrap();
    let admin = cp.admin().await.unwrap();
    k8s::install_crds(&admin).await.unwrap();
    install_daemon_rbac(&cp).unwrap();
    let nodes = Api::all(admin.clone());
    World {
        cp,
        admin,
        nodes,
        logs: tempfile::tempdir().unwrap(),
    }
}

/// Waits until the fake host records a (simulated) reboot. The reboot is a
/// file the fake bootc appends to: poll it.
async fn wait_for_reboot(host: &FakeHost, what: impl Fn() -> String) {
    let deadline = std::time::Instant::now() + WAIT;
    while host.layout.read_reboots().is_empty() {
        assert!(std::time::Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stages(host: &FakeHost) -> Vec<Invocation> {
    host.layout
        .read_invocations()
        .into_iter()
        .filter(|i| {
            i.argv.first().is_some_and(|a| a == "switch")
                && !i.argv.iter().any(|a| a == "--help" || a == "--apply")
        })
        .collect()
}

fn applies(host: &FakeHost) -> Vec<Invocation> {
    host.layout
        .read_invocations()
        .into_iter()
        .filter(|i| i.argv.iter().any(|a| a == "--apply"))
        .collect()
}

#[tokio::test]
async fn full_cycle_idle_staging_staged_rebooting_idle() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&a))
        .await
        .unwrap();
    let mut agent =
        Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();

    // Desired == booted: Idle, nothing staged.
    let bn = wait_bn(&w.nodes, "node-1", reasons::REASON_IDLE, |bn| {
        phase(bn) == Some(reasons::REASON_IDLE)
    })
    .await;
    let status = bn.status.clone().unwrap();
    assert_eq!(
        status.booted.as_ref().and_then(|b| b.image.as_deref()),
        Some(a.as_str())
    );
    let first_boot = status.boot_id.clone().unwrap();
    assert!(degraded(&bn).is_none());
    assert!(stages(&host).is_empty(), "staged for nothing");

    // A new desired image: Staging, then Staged (locked).
    patch_spec(&w.nodes, "node-1", json!({"desiredImage": b})).await;
    let bn = wait_bn(&w.nodes, "node-1", reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED)
    })
    .await;
    let staged = bn.status.as_ref().unwrap().staged.clone().unwrap();
    assert_eq!(staged.image.as_deref(), Some(b.as_str()));
    assert!(staged.download_only, "staged without --download-only");
    assert_eq!(
        bn.status.as_ref().unwrap().observed_generation,
        bn.metadata.generation
    );
    assert!(applies(&host).is_empty(), "applied without approval");

    // Approved: Rebooting is written, then the apply runs.
    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    let bn = wait_bn(&w.nodes, "node-1", reasons::REBOOTING, |bn| {
        phase(bn) == Some(reasons::REBOOTING)
    })
    .await;
    assert_eq!(
        bn.status.as_ref().unwrap().boot_id.as_deref(),
        Some(first_boot.as_str())
    );
    // The simulated reboot: the fake bootc moved staged to booted.
    wait_for_reboot(&host, || format!("no reboot:\n{}", agent.log_text())).await;
    let reboot = &host.layout.read_reboots()[0];
    assert!(!reboot.soft, "RebootOnly used a soft reboot");
    assert_eq!(
        applies(&host)[0].argv,
        ["switch", "--from-downloaded", "--apply"]
    );

    // The node comes back: a new daemon reads the status and reports Idle.
    agent.kill();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", "Idle after reboot", |bn| {
        phase(bn) == Some(reasons::REASON_IDLE)
    })
    .await;
    let status = bn.status.unwrap();
    assert_eq!(status.booted.and_then(|b| b.image), Some(b.clone()));
    assert_ne!(
        status.boot_id.as_deref(),
        Some(first_boot.as_str()),
        "boot id did not change"
    );
    assert_eq!(applies(&host).len(), 1, "applied twice");

    // The controller releases the slot (the approval revoked): the node
    // stays Idle on b and the daemon has nothing new to say. Its next write
    // is the next update's Staging.
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"desiredImageState": DesiredImageState::Staged}),
    )
    .await;
    let c = image('c');
    patch_spec(&w.nodes, "node-1", json!({"desiredImage": c})).await;
    wait_bn(&w.nodes, "node-1", "Staging c", |bn| {
        phase(bn) != Some(reasons::REASON_IDLE)
    })
    .await;
    // The daemon logs a write once the API server answered it, which may be
    // after the test saw it: wait for the line.
    let deadline = std::time::Instant::now() + WAIT;
    let (log, phases) = loop {
        let log = agent.log_text();
        let phases = written_phases(&log);
        if phases.len() >= 2 || std::time::Instant::now() > deadline {
            break (log, phases);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        phases.get(..2),
        Some(&[reasons::REASON_IDLE.to_owned(), reasons::STAGING.to_owned()][..]),
        "status writes after the reboot: {phases:?}\n{}",
        log
    );
}

/// The phases of the daemon's "status written" log lines, in order.
fn written_phases(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("status written"))
        .filter_map(|l| l.split("phase=").nth(1))
        .filter_map(|rest| {
            rest.trim_start_matches('"')
                .split(['"', ' '])
                .next()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn stage_failure_degrades_then_recovers_without_restart() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    host.layout.set_fault(Some(Fault::Unauthorized)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&b))
        .await
        .unwrap();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();

    let bn = wait_bn(&w.nodes, "node-1", reasons::DEGRADED, |bn| {
        degraded(bn).is_some()
    })
    .await;
    let message = degraded(&bn).unwrap();
    assert!(
        message.contains(&Fault::Unauthorized.message(&b)),
        "bootc's message missing: {message}"
    );
    assert_eq!(phase(&bn), Some(reasons::STAGING));

    host.layout.set_fault(None).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", "Staged and healthy", |bn| {
        phase(bn) == Some(reasons::STAGED) && degraded(bn).is_none()
    })
    .await;
    assert!(bn.status.unwrap().staged.is_some());
    assert!(agent.child.id() > 0);
}

#[tokio::test]
async fn soft_reboot_only_when_allowed_and_capable() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    // (policy, host capable, expect soft)
    let cases = [
        ("soft-ok", RebootPolicy::AllowSoftReboot, true, true),
        (
            "soft-incapable",
            RebootPolicy::AllowSoftReboot,
            false,
            false,
        ),
        ("reboot-only", RebootPolicy::RebootOnly, true, false),
    ];
    let mut hosts = Vec::new();
    for (name, policy, capable, _) in cases {
        let host = FakeHost::start(Some(&a)).unwrap();
        if !capable {
            std::fs::write(host.layout.no_soft_reboot(), "").unwrap();
        }
        let mut s = spec(&b);
        s.reboot_policy = policy;
        s.desired_image_state = DesiredImageState::Booted;
        create_bootc_node(&w.admin, name, s).await.unwrap();
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(name), w.logs.path()).unwrap();
        hosts.push((host, agent));
    }
    for ((name, _, _, soft), (host, _agent)) in cases.iter().zip(&hosts) {
        wait_bn(&w.nodes, name, reasons::REBOOTING, |bn| {
            phase(bn) == Some(reasons::REBOOTING)
        })
        .await;
        wait_for_reboot(host, || format!("{name}: no reboot")).await;
        let argv = &applies(host)[0].argv;
        assert_eq!(
            argv.iter().any(|a| a == "--soft-reboot=auto"),
            *soft,
            "{name}: {argv:?}"
        );
        assert_eq!(host.layout.read_reboots()[0].soft, *soft, "{name}");
    }
}

/// The host came back on the deployment it ran before (as a failed boot
/// would): the staged one is gone.
fn fall_back_to_the_old_deployment(host: &FakeHost) {
    let mut state = host.layout.read_state().unwrap();
    state.booted = state.rollback.take();
    state.staged = None;
    host.layout.write_state(&state).unwrap();
}

/// A new daemon after a reboot into `old` instead of `new`: Degraded, naming
/// both, and it neither applies (once was all) nor stages again.
async fn failed_reboot_is_degraded_and_not_retried(
    w: &World,
    host: &FakeHost,
    name: &str,
    (old, new): (&str, &str),
    stages_before: usize,
) -> BootcNode {
    let agent = Agent::start(&w.cp, host, &AgentOptions::new(name), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, name, reasons::DEGRADED, |bn| {
        degraded(bn).is_some()
    })
    .await;
    let message = degraded(&bn).unwrap();
    assert!(
        message.contains(old) && message.contains(new),
        "both images must be named: {message}"
    );
    // The daemon decides again on its next pass (its own status write, a
    // host change): the verdict must hold there too. A host change makes it
    // read bootc's status at the start of its next loop, after the pass
    // that followed the report: wait for that read, then look.
    let status_reads = || {
        agent
            .log_text()
            .matches(tests::daemon_proc::HELPER_RAN_STATUS)
            .count()
    };
    let before = status_reads();
    std::fs::File::open(host.layout.ostree_bootc())
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while status_reads() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "no status read:\n{}",
            agent.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !agent.log_text().contains("staging image="),
        "restaged after a failed reboot:\n{}",
        agent.log_text()
    );
    assert_eq!(applies(host).len(), 1, "re-applied after the failed reboot");
    assert_eq!(
        stages(host).len(),
        stages_before,
        "restaged after a failed reboot:\n{}",
        agent.log_text()
    );
    bn
}

/// On both bootc versions.
#[tokio::test]
async fn rebooted_into_the_wrong_image_is_degraded_and_not_reapplied() {
    require_root!();
    let w = world().await;
    for version in BootcVersion::ALL {
        rebooted_into_the_wrong_image_on(&w, version).await;
    }
}

async fn rebooted_into_the_wrong_image_on(w: &World, version: BootcVersion) {
    let name = format!("node-{}", version.name().replace('.', "-"));
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    host.layout.set_version(version).unwrap();
    let mut s = spec(&b);
    s.desired_image_state = DesiredImageState::Booted;
    create_bootc_node(&w.admin, &name, s).await.unwrap();
    let mut agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
    wait_bn(&w.nodes, &name, reasons::REBOOTING, |bn| {
        phase(bn) == Some(reasons::REBOOTING)
    })
    .await;
    wait_for_reboot(&host, || "no reboot".to_owned()).await;
    agent.kill();
    let stages_before = stages(&host).len();
    // The boot fell back to the old deployment (as a failed boot would).
    fall_back_to_the_old_deployment(&host);
    std::fs::write(
        host.layout.boot_id(),
        format!("{}\n", tests::fake_bootc::new_boot_id()),
    )
    .unwrap();

    failed_reboot_is_degraded_and_not_retried(w, &host, &name, (&a, &b), stages_before).await;
}

/// A soft reboot keeps the kernel's boot id. One that comes back on the old
/// deployment must still be seen as a failed reboot: degraded, and neither
/// staged nor applied again (that would be a soft-reboot loop).
#[tokio::test]
async fn soft_rebooted_into_the_wrong_image_is_degraded_and_not_reapplied() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    let boot_id = host.layout.read_boot_id();
    let mut s = spec(&b);
    s.desired_image_state = DesiredImageState::Booted;
    s.reboot_policy = RebootPolicy::AllowSoftReboot;
    create_bootc_node(&w.admin, "node-1", s).await.unwrap();
    let mut agent =
        Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", reasons::REBOOTING, |bn| {
        phase(bn) == Some(reasons::REBOOTING)
    })
    .await;
    wait_for_reboot(&host, || format!("no reboot:\n{}", agent.log_text())).await;
    agent.kill();
    let reboot = &host.layout.read_reboots()[0];
    assert!(reboot.soft, "AllowSoftReboot on a capable host: {reboot:?}");
    assert_eq!(
        host.layout.read_boot_id(),
        boot_id,
        "a soft reboot keeps the boot id"
    );
    let stages_before = stages(&host).len();
    // Userspace came back on the old deployment; the staged one is gone.
    fall_back_to_the_old_deployment(&host);

    let bn =
        failed_reboot_is_degraded_and_not_retried(&w, &host, "node-1", (&a, &b), stages_before)
            .await;
    assert_eq!(
        bn.status.as_ref().unwrap().boot_id.as_deref(),
        Some(boot_id.as_str())
    );
}

/// The apply is decided on the watch's copy of the BootcNode, which can be
/// stale: the daemon re-reads the object before it applies. Here the
/// approval is revoked while the daemon is busy re-staging, and everything
/// the API server sends is held back (a proxy), so the watch event arrives
/// only after the daemon has decided to apply on its stale copy. Only the
/// fresh read (`approval_still_holds`) can stop the apply.
#[tokio::test]
async fn a_revocation_the_watch_has_not_delivered_stops_the_apply() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&b))
        .await
        .unwrap();
    let mut agent =
        Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED)
    })
    .await;
    agent.kill();
    // Approved while the daemon is down: the next daemon stages again (the
    // helper applies only what it staged itself), slowly, then applies.
    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    std::fs::write(host.layout.stage_delay(), "2000").unwrap();
    let stages_before = stages(&host).len();

    let upstream = w.cp.url().trim_start_matches("https://").parse().unwrap();
    let proxy = FreezeProxy::start(upstream).await.unwrap();
    let kubeconfig = w.logs.path().join("daemon-via-proxy.kubeconfig");
    let text = std::fs::read_to_string(w.cp.node_bound_kubeconfig("node-1").unwrap()).unwrap();
    std::fs::write(&kubeconfig, text.replace(&w.cp.url(), &proxy.url())).unwrap();
    let agent = Agent::start_with_kubeconfig(
        &kubeconfig,
        &host,
        &AgentOptions::new("node-1"),
        w.logs.path(),
    )
    .unwrap();

    // The daemon is inside the slow re-stage: it has read its watch for the
    // last time before deciding to apply. Its Staging report, sent with the
    // stage, has its answer (the daemon logs the write once answered): a
    // freeze must not catch that answer in flight, or the daemon waits for
    // it and neither asks nor applies. `log_text` is this daemon's log
    // only: the node's first daemon logged a Staging write of its own.
    let deadline = std::time::Instant::now() + WAIT;
    while stages(&host).len() == stages_before
        || !agent
            .log_text()
            .contains(&format!("status written phase=\"{}\"", reasons::STAGING))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "never staged again:\n{}",
            agent.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.freeze();
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"desiredImageState": DesiredImageState::Staged}),
    )
    .await;
    // Hold the revocation back until the daemon has decided: it asks the
    // server something (the fresh read), or it has applied.
    let deadline = std::time::Instant::now() + WAIT;
    while proxy.sent_while_frozen() == 0 && applies(&host).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon neither asked nor applied:\n{}",
            agent.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.thaw();

    // Either outcome ends the wait; only one passes.
    wait_bn(&w.nodes, "node-1", "Staged after the revocation", |bn| {
        (phase(bn) == Some(reasons::STAGED)
            && bn.spec.desired_image_state == DesiredImageState::Staged)
            || !applies(&host).is_empty()
    })
    .await;
    assert!(
        applies(&host).is_empty(),
        "applied on a stale approval:\n{}",
        agent.log_text()
    );
    assert!(host.layout.read_reboots().is_empty());
}

/// A bootc without `--download-only` stages unlocked: the BootcNode says so
/// (Staged "unlocked: ...", downloadOnlySupported false), and the approved
/// image is still applied.
#[tokio::test]
async fn an_old_bootc_stages_unlocked_and_says_so() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    host.layout
        .set_version(tests::fake_bootc::BootcVersion::V1_16)
        .unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&b))
        .await
        .unwrap();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED)
    })
    .await;
    let status = bn.status.unwrap();
    assert_eq!(status.download_only_supported, Some(false));
    assert!(!status.staged.unwrap().download_only);
    let idle = conditions::find(&status.conditions, reasons::IDLE).unwrap();
    assert!(
        idle.message.contains("unlocked"),
        "{}\n{}",
        idle.message,
        agent.log_text()
    );
    assert!(
        stages(&host)
            .iter()
            .all(|i| !i.argv.iter().any(|a| a == "--download-only")),
        "an old bootc has no --download-only"
    );

    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    wait_for_reboot(&host, || format!("never applied:\n{}", agent.log_text())).await;
    assert_eq!(host.layout.read_reboots()[0].image, b);
}

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
/// `content` (and its hash), and a daemon that has written the host's auth
/// file and reported Idle.
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
    s.pull_secret_hash = Some(api::secret_hash::pull_secret_hash(
        secret.data.as_ref().unwrap(),
    ));
    create_bootc_node(&w.admin, "node-1", s).await.unwrap();
    let agent = Agent::start(&w.cp, host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", reasons::REASON_IDLE, |bn| {
        phase(bn) == Some(reasons::REASON_IDLE)
    })
    .await;
    wait_auth(host, content, || {
        format!("auth file not written:\n{}", agent.log_text())
    })
    .await;
    (secrets, agent)
}

/// The host's auth file is written on every spec change of the BootcNode,
/// not only when the pull secret's reference or hash changes: removed from
/// the host (`/run` is a tmpfs; anything may clear it), it is back, with
/// the Secret's content, before bootc pulls the next image.
#[tokio::test]
async fn auth_file_is_rewritten_on_a_spec_change_before_staging() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    let v1 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#;
    let (_secrets, agent) = idle_with_pull_secret(&w, &host, &a, v1).await;

    // The file disappears from the host; the pull secret is unchanged.
    std::fs::remove_file(host.layout.auth()).unwrap();
    patch_spec(&w.nodes, "node-1", json!({"desiredImage": b})).await;
    let run = wait_stage_of(&host, &b, || {
        format!("{b} never staged:\n{}", agent.log_text())
    })
    .await;
    assert_eq!(
        run.auth_file.as_deref(),
        Some(v1),
        "bootc staged {b} without the pull secret's auth file:\n{}",
        agent.log_text()
    );
    wait_bn(&w.nodes, "node-1", reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED) && degraded(bn).is_none()
    })
    .await;
}

/// A spec change that arrives after the Secret was rotated but before the
/// controller announced the new content (its hash) is no failure: the host
/// keeps the announced content, the node is not Degraded and stages.
#[tokio::test]
async fn a_spec_change_before_a_rotation_is_announced_still_stages() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    let v1 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTE6cDE="}}}"#;
    let v2 = r#"{"auths":{"127.0.0.1:5000":{"auth":"dTI6cDI="}}}"#;
    let (secrets, agent) = idle_with_pull_secret(&w, &host, &a, v1).await;

    // Rotated, not yet announced: the BootcNode still carries v1's hash.
    secrets
        .replace(
            "pull",
            &PostParams::default(),
            &pull_secret("pull", "bootc-operator", v2),
        )
        .await
        .unwrap();
    patch_spec(&w.nodes, "node-1", json!({"desiredImage": b})).await;
    let run = wait_stage_of(&host, &b, || {
        format!("{b} never staged:\n{}", agent.log_text())
    })
    .await;
    assert_eq!(run.auth_file.as_deref(), Some(v1), "{}", agent.log_text());
    wait_bn(&w.nodes, "node-1", reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED) && degraded(bn).is_none()
    })
    .await;
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

    // Rotation: the controller bumps the hash, the file follows.
    let rotated = secrets
        .replace(
            "pull",
            &PostParams::default(),
            &pull_secret("pull", "bootc-operator", v2),
        )
        .await
        .unwrap();
    let hash2 = api::secret_hash::pull_secret_hash(rotated.data.as_ref().unwrap());
    patch_spec(&w.nodes, "node-1", json!({"pullSecretHash": hash2})).await;
    wait_auth(&host, v2, || {
        format!("rotation not followed:\n{}", agent.log_text())
    })
    .await;

    // A Secret outside the operator namespace is refused, and reported
    // once the node needs it (a new image to download), which it then does
    // not download.
    let b = image('b');
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"pullSecretRef": {"name": "pull", "namespace": "default"}, "pullSecretHash": null,
               "desiredImage": b}),
    )
    .await;
    let bn = wait_bn(&w.nodes, "node-1", reasons::DEGRADED, |bn| {
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
        !stages(&host).iter().any(|i| i.argv.contains(&b)),
        "staged without its pull secret"
    );
}

#[tokio::test]
async fn desired_image_changed_during_staging_stages_the_new_one_and_never_applies_the_old() {
    require_root!();
    let w = world().await;
    let (a, b, c) = (image('a'), image('b'), image('c'));
    let host = FakeHost::start(Some(&a)).unwrap();
    std::fs::write(host.layout.stage_delay(), "1500").unwrap();
    let mut s = spec(&b);
    s.desired_image_state = DesiredImageState::Booted;
    create_bootc_node(&w.admin, "node-1", s).await.unwrap();
    let _agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();

    // While b is being pulled, the controller moves on to c (and, as it
    // does on every new image, revokes the approval).
    wait_bn(&w.nodes, "node-1", reasons::STAGING, |bn| {
        phase(bn) == Some(reasons::STAGING)
    })
    .await;
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"desiredImage": c, "desiredImageState": DesiredImageState::Staged}),
    )
    .await;
    let bn = wait_bn(&w.nodes, "node-1", "Staged c", |bn| {
        phase(bn) == Some(reasons::STAGED)
            && bn
                .status
                .as_ref()
                .and_then(|s| s.staged.as_ref())
                .and_then(|s| s.image.as_deref())
                == Some(c.as_str())
    })
    .await;
    assert_eq!(bn.status.unwrap().booted.unwrap().image, Some(a.clone()));
    let staged: Vec<String> = stages(&host)
        .iter()
        .map(|i| i.argv.last().cloned().unwrap_or_default())
        .collect();
    assert_eq!(staged, [b.clone(), c.clone()], "stage order");
    assert!(applies(&host).is_empty(), "b was applied");
    assert!(host.layout.read_reboots().is_empty());
}

#[tokio::test]
async fn idle_daemon_holds_one_watch_and_sends_nothing() {
    require_root!();
    let cp = ControlPlane::start_with(tests::control_plane::Options { audit: true })
        .await
        .unwrap();
    let admin = cp.admin().await.unwrap();
    k8s::install_crds(&admin).await.unwrap();
    install_daemon_rbac(&cp).unwrap();
    let nodes: Api<BootcNode> = Api::all(admin.clone());
    let logs = tempfile::tempdir().unwrap();
    let a = image('a');
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&admin, "node-1", spec(&a)).await.unwrap();
    let mut options = AgentOptions::new("node-1");
    // Poll the host every second: polls must not turn into writes.
    options.poll_interval = Duration::from_secs(1);
    let agent = Agent::start(&cp, &host, &options, logs.path()).unwrap();
    let bn = wait_bn(&nodes, "node-1", reasons::REASON_IDLE, |bn| {
        phase(bn) == Some(reasons::REASON_IDLE)
    })
    .await;
    let rv = bn.metadata.resource_version.clone();

    // An idle period is what is measured here: nothing can be awaited.
    let audit_before = daemon_requests(&cp);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let during: Vec<String> = daemon_requests(&cp).split_off(audit_before.len());
    // The one watch may still be starting (it is checked to be the only
    // one below); anything else while idle is a failure.
    let other: Vec<&String> = during.iter().filter(|r| !r.starts_with("watch ")).collect();
    assert!(
        other.is_empty(),
        "requests while idle: {other:?}\n{}",
        agent.log_text()
    );
    assert_eq!(
        nodes.get("node-1").await.unwrap().metadata.resource_version,
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

    // Over the whole life: one watch, on its own object, and nothing else
    // but the initial list and status writes.
    let all = daemon_requests(&cp);
    let watches: Vec<&String> = all.iter().filter(|r| r.starts_with("watch ")).collect();
    assert_eq!(watches.len(), 1, "watches: {all:?}");
    assert!(
        watches[0].contains("metadata.name%3Dnode-1")
            || watches[0].contains("metadata.name=node-1"),
        "{}",
        watches[0]
    );
    for r in &all {
        assert!(
            r.starts_with("watch ") || r.starts_with("list ") || r.starts_with("patch "),
            "unexpected daemon request {r}"
        );
        assert!(
            r.contains("bootcnodes"),
            "daemon touched something else: {r}"
        );
    }
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
    let cp = ControlPlane::start_with(tests::control_plane::Options { audit: true })
        .await
        .unwrap();
    let admin = cp.admin().await.unwrap();
    k8s::install_crds(&admin).await.unwrap();
    install_daemon_rbac(&cp).unwrap();
    let nodes: Api<BootcNode> = Api::all(admin.clone());
    let logs = tempfile::tempdir().unwrap();

    // What the kubelet projects into a pod: world-readable files.
    let sa = tempfile::tempdir().unwrap();
    std::fs::set_permissions(sa.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let write = |name: &str, content: &[u8]| {
        let tmp = sa.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, content).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&tmp, sa.path().join(name)).unwrap();
    };
    write("token", cp.node_bound_token("node-1").unwrap().as_bytes());
    write("ca.crt", &std::fs::read(cp.ca_file()).unwrap());
    write("namespace", b"bootc-operator");

    let a = image('a');
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&admin, "node-1", spec(&a)).await.unwrap();
    let agent = Agent::start_in_cluster(
        sa.path(),
        "127.0.0.1",
        cp.port(),
        &host,
        &AgentOptions::new("node-1"),
        logs.path(),
    )
    .unwrap();
    wait_bn(&nodes, "node-1", reasons::REASON_IDLE, |bn| {
        phase(bn) == Some(reasons::REASON_IDLE)
    })
    .await;
    let first = daemon_credentials(&cp);
    assert_eq!(first.len(), 1, "{first:?}\n{}", agent.log_text());
    assert!(
        agent.log_text().contains("privileges dropped"),
        "{}",
        agent.log_text()
    );

    // The kubelet rotates the token (atomically); the daemon keeps running.
    write("token", cp.node_bound_token("node-1").unwrap().as_bytes());
    // Each change of the desired image makes the daemon write its status (a
    // request with whatever token it holds; a spec change that leaves it Idle
    // is not acknowledged). The client re-reads the token file within about
    // a minute of its first read: poll until a request carries the rotated one.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let b = image('b');
    let mut desired = &b;
    while daemon_credentials(&cp).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated token was never used: {:?}\n{}",
            daemon_credentials(&cp),
            agent.log_text()
        );
        let generation = patch_spec_generation(&nodes, json!({"desiredImage": desired})).await;
        wait_bn(&nodes, "node-1", "status for the new generation", |bn| {
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
    let text = std::fs::read_to_string(cp.audit_log()).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["user"]["username"] == tests::control_plane::DAEMON_USER)
        .filter_map(|e| {
            e["user"]["extra"]["authentication.kubernetes.io/credential-id"][0]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// `verb uri` of every request the daemon's identity made (one entry per
/// request: its RequestReceived stage).
fn daemon_requests(cp: &ControlPlane) -> Vec<String> {
    let text = std::fs::read_to_string(cp.audit_log()).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["user"]["username"] == tests::control_plane::DAEMON_USER)
        .filter(|e| e["stage"] == "RequestReceived")
        .map(|e| {
            format!(
                "{} {}",
                e["verb"].as_str().unwrap_or(""),
                e["requestURI"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn a_daemon_restarted_while_approved_applies_the_staged_image() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    create_bootc_node(&w.admin, "node-1", spec(&b))
        .await
        .unwrap();
    let mut agent =
        Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED)
    })
    .await;
    agent.kill();
    // Approved while the daemon is down; the new daemon stages again (the
    // helper applies only what it staged itself), then applies. The
    // re-stage is slow here, as a pull on a real host can be: the node says
    // Staging meanwhile, not Rebooting.
    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    std::fs::write(host.layout.stage_delay(), "1000").unwrap();
    let stages_before = stages(&host).len();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", "Staging again", |bn| {
        phase(bn) == Some(reasons::STAGING)
    })
    .await;
    let idle = conditions::find(&bn.status.as_ref().unwrap().conditions, reasons::IDLE).unwrap();
    assert!(idle.message.contains(&b), "{}", idle.message);
    assert!(applies(&host).is_empty(), "applied before staging again");
    wait_bn(&w.nodes, "node-1", reasons::REBOOTING, |bn| {
        phase(bn) == Some(reasons::REBOOTING)
    })
    .await;
    wait_for_reboot(&host, || format!("never applied:\n{}", agent.log_text())).await;
    assert_eq!(host.layout.read_reboots()[0].image, b);
    assert_eq!(applies(&host).len(), 1);
    assert_eq!(stages(&host).len(), stages_before + 1, "staged again once");
    // The new daemon's writes, in order (it logs each once the API server
    // answered, before it asks for the apply).
    let deadline = std::time::Instant::now() + WAIT;
    let (log, phases) = loop {
        let log = agent.log_text();
        let phases = written_phases(&log);
        if phases.len() >= 2 || std::time::Instant::now() > deadline {
            break (log, phases);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        phases,
        [reasons::STAGING, reasons::REBOOTING],
        "status writes after the restart:\n{}",
        log
    );
}

/// A node named after its bootc version, booted into `booted`, wanting
/// `desired`, with its daemon running.
async fn node_on(
    w: &World,
    version: BootcVersion,
    prefix: &str,
    booted: &str,
    desired: BootcNodeSpec,
) -> (String, FakeHost, Agent) {
    let name = format!("{prefix}-{}", version.name().replace('.', "-"));
    let host = FakeHost::start(Some(booted)).unwrap();
    host.layout.set_version(version).unwrap();
    create_bootc_node(&w.admin, &name, desired).await.unwrap();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
    (name, host, agent)
}

fn idle_message(bn: &BootcNode) -> String {
    bn.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, reasons::IDLE))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Every step of an update on both bootc versions: staging (locked only
/// where bootc can), the report of it, a daemon restart while approved (the
/// image is staged again: a no-op for bootc), the apply with each
/// version's argv, the reboot, and a rollback to the old image the same way.
#[tokio::test]
async fn an_update_and_a_rollback_on_both_bootc_versions() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    for version in BootcVersion::ALL {
        let (name, host, mut agent) = node_on(&w, version, "upd", &a, spec(&b)).await;
        let locked = version.locked_staging();
        let bn = wait_bn(&w.nodes, &name, reasons::STAGED, |bn| {
            phase(bn) == Some(reasons::STAGED)
        })
        .await;
        let status = bn.status.clone().unwrap();
        assert_eq!(status.download_only_supported, Some(locked), "{version:?}");
        assert_eq!(status.staged.unwrap().download_only, locked, "{version:?}");
        assert_eq!(
            idle_message(&bn).contains("unlocked"),
            !locked,
            "{version:?}"
        );
        let download_only = stages(&host)
            .iter()
            .all(|i| i.argv.iter().any(|a| a == "--download-only"));
        assert_eq!(download_only, locked, "{version:?}");

        // Approved while the daemon is down: the next one stages again
        // (bootc: "Image specification is unchanged.", lock kept), applies.
        agent.kill();
        patch_spec(&w.nodes, &name, json!({"desiredImageState": "Booted"})).await;
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        wait_for_reboot(&host, || {
            format!("{version:?}: no reboot:\n{}", agent.log_text())
        })
        .await;
        let apply = applies(&host).pop().unwrap().argv;
        let want: Vec<String> = if locked {
            vec![
                "switch".into(),
                "--from-downloaded".into(),
                "--apply".into(),
            ]
        } else {
            vec!["switch".into(), "--apply".into(), "--".into(), b.clone()]
        };
        assert_eq!(apply, want, "{version:?}");
        assert_eq!(host.state().booted.unwrap().image, b, "{version:?}");
        drop(agent);
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        wait_bn(&w.nodes, &name, "Idle on b", |bn| {
            phase(bn) == Some(reasons::REASON_IDLE)
                && bn
                    .status
                    .as_ref()
                    .and_then(|s| s.booted.as_ref())
                    .and_then(|b| b.image.as_deref())
                    == Some(b.as_str())
        })
        .await;

        // Rolled back to a (the rollback deployment): staged and booted
        // like any other image.
        patch_spec(
            &w.nodes,
            &name,
            json!({"desiredImage": a, "desiredImageState": DesiredImageState::Staged}),
        )
        .await;
        wait_bn(&w.nodes, &name, "Staged a", |bn| {
            phase(bn) == Some(reasons::STAGED)
        })
        .await;
        patch_spec(&w.nodes, &name, json!({"desiredImageState": "Booted"})).await;
        let deadline = std::time::Instant::now() + WAIT;
        while host.layout.read_reboots().len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{version:?}: never rebooted back:\n{}",
                agent.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(host.state().booted.unwrap().image, a, "{version:?}");
    }
}

/// An unplanned reboot while an image is staged and not yet approved. With
/// locked staging nothing changes: the node boots what it ran, the staged
/// deployment is gone, and the daemon stages it again. Without it (bootc
/// 1.16), an orderly reboot boots the staged image outside any reboot slot:
/// the node is on its desired image, and its status says how it got there;
/// a crash boots nothing new.
#[tokio::test]
async fn an_unplanned_reboot_while_staged_on_both_bootc_versions() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    for (version, kind) in [
        (BootcVersion::Pr, UnplannedReboot::Orderly),
        (BootcVersion::Pr, UnplannedReboot::Crash),
        (BootcVersion::V1_16, UnplannedReboot::Orderly),
        (BootcVersion::V1_16, UnplannedReboot::Crash),
    ] {
        let prefix = format!("unpl-{}", format!("{kind:?}").to_lowercase());
        let (name, host, mut agent) = node_on(&w, version, &prefix, &a, spec(&b)).await;
        let before = wait_bn(&w.nodes, &name, reasons::STAGED, |bn| {
            phase(bn) == Some(reasons::STAGED)
        })
        .await;
        let old_boot = before.status.unwrap().boot_id.unwrap();
        let stages_before = stages(&host).len();
        agent.kill();
        let reboot = host.layout.reboot_unplanned(kind).unwrap();
        let boots_b = !version.locked_staging() && kind == UnplannedReboot::Orderly;
        assert_eq!(reboot.applied_staged, boots_b, "{version:?} {kind:?}");
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        let case = format!("{version:?} {kind:?}");
        if boots_b {
            let bn = wait_bn(&w.nodes, &name, "Idle on b", |bn| {
                phase(bn) == Some(reasons::REASON_IDLE)
            })
            .await;
            let status = bn.status.clone().unwrap();
            assert_eq!(status.booted.unwrap().image.as_deref(), Some(b.as_str()));
            assert_ne!(status.boot_id.as_deref(), Some(old_boot.as_str()));
            let message = idle_message(&bn);
            assert!(
                message.starts_with(daemon::machine::UNPLANNED_BOOT),
                "{case}: {message}\n{}",
                agent.log_text()
            );
            assert!(degraded(&bn).is_none(), "{case}");
        } else {
            // Back on a with nothing staged: staged again, and Staged.
            let bn = wait_bn(&w.nodes, &name, "Staged again", |bn| {
                phase(bn) == Some(reasons::STAGED)
                    && bn.status.as_ref().and_then(|s| s.boot_id.as_deref())
                        != Some(old_boot.as_str())
            })
            .await;
            let status = bn.status.unwrap();
            assert_eq!(
                status.booted.unwrap().image.as_deref(),
                Some(a.as_str()),
                "{case}"
            );
            assert_eq!(stages(&host).len(), stages_before + 1, "{case}");
        }
        assert!(applies(&host).is_empty(), "{case}: nothing was applied");
    }
}

/// Rolled back to the booted image while another image is staged unlocked
/// (bootc 1.16): any reboot would boot the staged one, so the daemon stages
/// the booted image over it; a reboot then changes nothing.
#[tokio::test]
async fn a_rollback_before_the_reboot_leaves_nothing_an_unlocked_reboot_would_boot() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let (name, host, _agent) = node_on(&w, BootcVersion::V1_16, "back", &a, spec(&b)).await;
    wait_bn(&w.nodes, &name, reasons::STAGED, |bn| {
        phase(bn) == Some(reasons::STAGED)
    })
    .await;
    patch_spec(&w.nodes, &name, json!({"desiredImage": a})).await;
    let bn = wait_bn(&w.nodes, &name, "Idle, a staged over b", |bn| {
        phase(bn) == Some(reasons::REASON_IDLE)
            && bn
                .status
                .as_ref()
                .and_then(|s| s.staged.as_ref())
                .and_then(|s| s.image.as_deref())
                == Some(a.as_str())
    })
    .await;
    assert!(degraded(&bn).is_none());
    host.layout
        .reboot_unplanned(UnplannedReboot::Orderly)
        .unwrap();
    assert_eq!(host.state().booted.unwrap().image, a);
}

/// bootc's errors reach the BootcNode's Degraded condition classified, with
/// bootc's own message.
#[tokio::test]
async fn bootc_errors_reach_the_status_classified() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let mut running = Vec::new();
    for (fault, reason) in [
        (Some(Fault::NotFound), reasons::IMAGE_NOT_FOUND),
        (Some(Fault::Unauthorized), reasons::REGISTRY_UNAUTHORIZED),
        (Some(Fault::PullError), reasons::REGISTRY_UNREACHABLE),
        (Some(Fault::NoSpace), reasons::INSUFFICIENT_SPACE),
        (None, reasons::NOT_A_BOOTC_HOST),
    ] {
        let name = format!("err-{}", reason.to_lowercase());
        let host = FakeHost::start(fault.map(|_| a.as_str())).unwrap();
        host.layout.set_fault(fault).unwrap();
        create_bootc_node(&w.admin, &name, spec(&b)).await.unwrap();
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        running.push((name, reason, fault, host, agent));
    }
    for (name, reason, fault, _host, agent) in &running {
        let bn = wait_bn(&w.nodes, name, reasons::DEGRADED, |bn| {
            degraded(bn).is_some()
        })
        .await;
        let c = conditions::find(&bn.status.as_ref().unwrap().conditions, reasons::DEGRADED)
            .unwrap()
            .clone();
        assert_eq!(c.reason, *reason, "{}\n{}", c.message, agent.log_text());
        let bootcs = match fault {
            Some(f) => f.message(&b),
            // bootc status answers with no booted deployment: nothing is
            // staged on such a host (see the test below).
            None => "not deployed via bootc".into(),
        };
        assert!(c.message.contains(&bootcs), "{reason}: {}", c.message);
    }
}

/// `bootc status` failing (a broken bootc) is reported in the BootcNode's
/// status, with bootc's words and its own reason, not only logged; nothing
/// is staged on a host the daemon cannot see. A host that bootc says is not
/// deployed via bootc is reported as such, and is not staged either. Once
/// status answers again (the daemon reads it again on its own), the node is
/// healthy and goes on.
#[tokio::test]
async fn a_failing_bootc_status_is_reported_and_the_node_recovers() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let broken = FakeHost::start(Some(&a)).unwrap();
    broken
        .layout
        .set_status_fault(Some(tests::fake_bootc::BROKEN_STATUS))
        .unwrap();
    let foreign = FakeHost::start(None).unwrap();
    let mut agents = Vec::new();
    for (name, host) in [("broken", &broken), ("foreign", &foreign)] {
        create_bootc_node(&w.admin, name, spec(&b)).await.unwrap();
        agents.push(Agent::start(&w.cp, host, &AgentOptions::new(name), w.logs.path()).unwrap());
    }
    for (name, reason, words) in [
        (
            "broken",
            reasons::BOOTC_STATUS_FAILED,
            tests::fake_bootc::BROKEN_STATUS,
        ),
        (
            "foreign",
            reasons::NOT_A_BOOTC_HOST,
            "not deployed via bootc",
        ),
    ] {
        let bn = wait_bn(&w.nodes, name, reasons::DEGRADED, |bn| {
            degraded(bn).is_some()
        })
        .await;
        let status = bn.status.unwrap();
        let c = conditions::find(&status.conditions, reasons::DEGRADED).unwrap();
        assert_eq!(c.reason, reason, "{name}: {}", c.message);
        assert!(c.message.contains(words), "{name}: {}", c.message);
        assert_eq!(
            status.observed_generation, bn.metadata.generation,
            "{name}: spec seen"
        );
    }
    assert!(stages(&broken).is_empty(), "staged on a host it cannot see");
    assert!(
        stages(&foreign).is_empty(),
        "staged on a host bootc does not run"
    );

    // bootc is repaired: the daemon reads status again after its backoff.
    broken.layout.set_status_fault(None).unwrap();
    let bn = wait_bn(&w.nodes, "broken", "healthy and Staged", |bn| {
        degraded(bn).is_none() && phase(bn) == Some(reasons::STAGED)
    })
    .await;
    let c = conditions::find(&bn.status.unwrap().conditions, reasons::DEGRADED)
        .unwrap()
        .clone();
    assert_eq!(c.reason, reasons::HEALTHY);
    assert_eq!(stages(&broken).len(), 1);
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
    let bn = wait_bn(&w.nodes, "node-1", reasons::DEGRADED, |bn| {
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
