//! The update cycle and staging: Idle, Staging, Staged, Rebooting and Idle
//! again; a failed stage reported and recovered; an old bootc staging
//! unlocked; a new desired image while staging.

use api::conditions;
use api::{ConditionType, DesiredImageState, Reason};
use serde_json::json;
use tests::daemon_loop::{
    applies, degraded, patch_spec, phase, spec, stages, wait_bn, wait_for_reboot,
    wait_written_phases, world,
};
use tests::fake_bootc::Fault;
use tests::fake_host::{FakeHost, image};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node};
use tests::require_root;

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
    let bn = wait_bn(&w.nodes, "node-1", Reason::Idle.as_str(), |bn| {
        phase(bn) == Some(Reason::Idle.as_str())
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
    let bn = wait_bn(&w.nodes, "node-1", Reason::Staged.as_str(), |bn| {
        phase(bn) == Some(Reason::Staged.as_str())
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
    let bn = wait_bn(&w.nodes, "node-1", Reason::Rebooting.as_str(), |bn| {
        phase(bn) == Some(Reason::Rebooting.as_str())
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
        ["upgrade", "--from-downloaded", "--apply"]
    );

    // The node comes back: a new daemon reads the status and reports Idle.
    agent.kill();
    let agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", "Idle after reboot", |bn| {
        phase(bn) == Some(Reason::Idle.as_str())
    })
    .await;
    let status = bn.status.unwrap();
    // The record of the update, in the writes the daemon made anyway.
    let history: Vec<(&str, bool, bool, Option<api::UpdateOutcome>)> = status
        .history
        .iter()
        .map(|u| {
            (
                u.image.as_str(),
                u.staged.is_some(),
                u.booted.is_some(),
                u.outcome,
            )
        })
        .collect();
    assert_eq!(
        history,
        [
            (b.as_str(), true, true, Some(api::UpdateOutcome::Updated)),
            (a.as_str(), false, false, None),
        ]
    );
    assert_eq!(status.booted.and_then(|b| b.image), Some(b.as_str().into()));
    assert_ne!(
        status.boot_id.as_deref(),
        Some(first_boot.as_str()),
        "boot id did not change"
    );
    assert_eq!(applies(&host).len(), 1, "applied twice");

    // The controller releases the slot (the approval revoked): the node
    // stays Idle on b and the daemon has nothing new to say. Its next write
    // is the next update's Staged: a quick pull is reported once, done.
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"desiredImageState": DesiredImageState::Staged}),
    )
    .await;
    let c = image('c');
    patch_spec(&w.nodes, "node-1", json!({"desiredImage": c})).await;
    wait_bn(&w.nodes, "node-1", "c staged", |bn| {
        phase(bn) != Some(Reason::Idle.as_str())
    })
    .await;
    let (log, phases) = wait_written_phases(&agent, 2).await;
    assert_eq!(
        phases.get(..2),
        Some(
            &[
                Reason::Idle.as_str().to_owned(),
                Reason::Staged.as_str().to_owned()
            ][..]
        ),
        "status writes after the reboot: {phases:?}\n{}",
        log
    );
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

    let bn = wait_bn(&w.nodes, "node-1", ConditionType::Degraded.as_str(), |bn| {
        degraded(bn).is_some()
    })
    .await;
    let message = degraded(&bn).unwrap();
    assert!(
        message.contains(&Fault::Unauthorized.message(&b)),
        "bootc's message missing: {message}"
    );
    assert_eq!(phase(&bn), Some(Reason::Staging.as_str()));

    host.layout.set_fault(None).unwrap();
    let bn = wait_bn(&w.nodes, "node-1", "Staged and healthy", |bn| {
        phase(bn) == Some(Reason::Staged.as_str()) && degraded(bn).is_none()
    })
    .await;
    assert!(bn.status.unwrap().staged.is_some());
    assert!(agent.child.id() > 0);
}

/// Released bootc (no `--download-only`) stages locked all the same (ostree's
/// lock file): the BootcNode says so (Staged "locked", downloadOnlySupported
/// true), and the approved image is applied.
#[tokio::test]
async fn released_bootc_stages_locked_and_says_so() {
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
    let bn = wait_bn(&w.nodes, "node-1", Reason::Staged.as_str(), |bn| {
        phase(bn) == Some(Reason::Staged.as_str())
    })
    .await;
    let status = bn.status.unwrap();
    assert_eq!(status.download_only_supported, Some(true));
    assert!(status.staged.clone().unwrap().download_only);
    // The daemon says how its kernel confines it (this kernel has Landlock).
    let landlock = status.landlock.clone().expect("status.landlock");
    assert_eq!(landlock.state, api::LandlockState::Enforced, "{landlock:?}");
    let idle = conditions::find(&status.conditions, ConditionType::Idle).unwrap();
    assert!(
        idle.message.contains("(locked)"),
        "{}\n{}",
        idle.message,
        agent.log_text()
    );
    assert!(
        stages(&host)
            .iter()
            .all(|i| !i.argv.iter().any(|a| a == "--download-only")),
        "released bootc has no --download-only"
    );

    patch_spec(&w.nodes, "node-1", json!({"desiredImageState": "Booted"})).await;
    wait_for_reboot(&host, || format!("never applied:\n{}", agent.log_text())).await;
    assert_eq!(host.layout.read_reboots()[0].image, b);
}

#[tokio::test]
async fn desired_image_changed_during_staging_stages_the_new_one_and_never_applies_the_old() {
    require_root!();
    let w = world().await;
    let (a, b, c) = (image('a'), image('b'), image('c'));
    let host = FakeHost::start(Some(&a)).unwrap();
    // Longer than the daemon's wait before it reports Staging.
    std::fs::write(host.layout.stage_delay(), "8000").unwrap();
    let mut s = spec(&b);
    s.desired_image_state = DesiredImageState::Booted;
    create_bootc_node(&w.admin, "node-1", s).await.unwrap();
    let _agent = Agent::start(&w.cp, &host, &AgentOptions::new("node-1"), w.logs.path()).unwrap();

    // While b is being pulled, the controller moves on to c (and, as it
    // does on every new image, revokes the approval).
    wait_bn(&w.nodes, "node-1", Reason::Staging.as_str(), |bn| {
        phase(bn) == Some(Reason::Staging.as_str())
    })
    .await;
    patch_spec(
        &w.nodes,
        "node-1",
        json!({"desiredImage": c, "desiredImageState": DesiredImageState::Staged}),
    )
    .await;
    let bn = wait_bn(&w.nodes, "node-1", "Staged c", |bn| {
        phase(bn) == Some(Reason::Staged.as_str())
            && bn
                .status
                .as_ref()
                .and_then(|s| s.staged.as_ref())
                .and_then(|s| s.image.as_deref())
                == Some(c.as_str())
    })
    .await;
    assert_eq!(
        bn.status.unwrap().booted.unwrap().image,
        Some(a.as_str().into())
    );
    let staged: Vec<String> = stages(&host)
        .iter()
        .map(|i| i.argv.last().cloned().unwrap_or_default())
        .collect();
    assert_eq!(staged, [b.clone(), c.clone()], "stage order");
    assert!(applies(&host).is_empty(), "b was applied");
    assert!(host.layout.read_reboots().is_empty());
}
