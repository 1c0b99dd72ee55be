//! The disruptive step (SECURITY.md P28): the apply only on a fresh
//! approval of the staged image, a soft reboot only where allowed and
//! capable, a reboot into the wrong image reported and never retried.

use std::time::Duration;

use api::conditions;
use api::{BootcNode, ConditionType, DesiredImageState, Reason, RebootPolicy};
use serde_json::json;
use tests::daemon_loop::{
    WAIT, World, applies, degraded, patch_spec, phase, spec, stages, wait_bn, wait_for_reboot,
    wait_written_phases, world,
};
use tests::fake_bootc::BootcVersion;
use tests::fake_host::{FakeHost, image};
use tests::freeze_proxy::FreezeProxy;
use tests::node_agent::{Agent, AgentOptions, create_bootc_node};
use tests::require_root;

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
        wait_bn(&w.nodes, name, Reason::Rebooting.as_str(), |bn| {
            phase(bn) == Some(Reason::Rebooting.as_str())
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
    let bn = wait_bn(&w.nodes, name, ConditionType::Degraded.as_str(), |bn| {
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
    wait_bn(&w.nodes, &name, Reason::Rebooting.as_str(), |bn| {
        phase(bn) == Some(Reason::Rebooting.as_str())
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
    wait_bn(&w.nodes, "node-1", Reason::Rebooting.as_str(), |bn| {
        phase(bn) == Some(Reason::Rebooting.as_str())
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

/// BootcNode `node-1` on `host` staged `image` with a daemon that is then
/// stopped, and approved while no daemon runs: the next daemon stages again
/// (the helper applies only what it staged itself), taking `stage_delay_ms`.
/// Returns the number of stages so far.
async fn staged_then_approved_while_down(
    w: &World,
    host: &FakeHost,
    image: &str,
    stage_delay_ms: &str,
) -> usize {
    create_bootc_node(&w.admin, "node-1", spec(image))
        .await
        .unwrap();
    let mut agent = Agent::start(&w.cp, host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    wait_bn(&w.nodes, "node-1", Reason::Staged.as_str(), |bn| {
        phase(bn) == Some(Reason::Staged.as_str())
    })
    .await;
    agent.kill();
    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    std::fs::write(host.layout.stage_delay(), stage_delay_ms).unwrap();
    stages(host).len()
}

/// The apply is decided on the watch's copy of the BootcNode, which can be
/// stale: the daemon's `Rebooting` report is written on condition that the
/// object is still that copy's version. Here the approval is revoked while
/// the daemon is busy re-staging, and everything the API server sends is
/// held back (a proxy), so the watch event arrives only after the daemon
/// has decided to apply on its stale copy. Only the server's refusal of
/// the report (and the fresh read it leads to) can stop the apply.
#[tokio::test]
async fn a_revocation_the_watch_has_not_delivered_stops_the_apply() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    // The next daemon stages again, slowly, then applies.
    let stages_before = staged_then_approved_while_down(&w, &host, &b, "8000").await;

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
    // last time before deciding to apply. Its Staging report, sent once the
    // stage has run for `STAGING_REPORT_AFTER`, has its answer (the daemon logs the write once answered): a
    // freeze must not catch that answer in flight, or the daemon waits for
    // it and neither asks nor applies. `log_text` is this daemon's log
    // only: the node's first daemon logged a Staging write of its own.
    let deadline = std::time::Instant::now() + WAIT;
    while stages(&host).len() == stages_before
        || !agent
            .log_text()
            .contains(&format!("status written phase=\"{}\"", Reason::Staging))
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
    // Hold the revocation back until the daemon has decided: it sends the
    // server something (the guarded report), or it has applied.
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
        (phase(bn) == Some(Reason::Staged.as_str())
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

#[tokio::test]
async fn a_daemon_restarted_while_approved_applies_the_staged_image() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let host = FakeHost::start(Some(&a)).unwrap();
    // The new daemon stages again, then applies. The re-stage is slow here,
    // as a pull on a real host can be: the node says Staging meanwhile, not
    // Rebooting.
    let stages_before = staged_then_approved_while_down(&w, &host, &b, "8000").await;
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", "Staging again", |bn| {
        phase(bn) == Some(Reason::Staging.as_str())
    })
    .await;
    let idle =
        conditions::find(&bn.status.as_ref().unwrap().conditions, ConditionType::Idle).unwrap();
    assert!(idle.message.contains(&b), "{}", idle.message);
    assert!(applies(&host).is_empty(), "applied before staging again");
    wait_bn(&w.nodes, "node-1", Reason::Rebooting.as_str(), |bn| {
        phase(bn) == Some(Reason::Rebooting.as_str())
    })
    .await;
    wait_for_reboot(&host, || format!("never applied:\n{}", agent.log_text())).await;
    assert_eq!(host.layout.read_reboots()[0].image, b);
    assert_eq!(applies(&host).len(), 1);
    assert_eq!(stages(&host).len(), stages_before + 1, "staged again once");
    // The new daemon's writes, in order.
    let (log, phases) = wait_written_phases(&agent, 2).await;
    assert_eq!(
        phases,
        [Reason::Staging, Reason::Rebooting],
        "status writes after the restart:\n{}",
        log
    );
}
