//! Both bootc versions (released bootc, whose staging the helper locks with
//! ostree's lock file, and PR #2342's `switch --download-only`): an update
//! and a rollback, an unplanned reboot while staged, a rollback over an
//! image someone else staged unlocked.

use std::time::Duration;

use api::conditions;
use api::{BootcNode, BootcNodeSpec, ConditionType, DesiredImageState, Reason};
use serde_json::json;
use tests::daemon_loop::{
    WAIT, World, applies, degraded, patch_spec, phase, spec, stages, wait_bn, wait_for_reboot,
    world,
};
use tests::fake_bootc::{BootcVersion, UnplannedReboot};
use tests::fake_host::{FakeHost, image};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node};
use tests::require_root;

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
        .and_then(|s| conditions::find(&s.conditions, ConditionType::Idle))
        .map(|c| c.message.to_string())
        .unwrap_or_default()
}

/// Every step of an update on both bootc versions: staging (locked on both:
/// `--download-only` where bootc has it, ostree's lock file where it does
/// not), the report of it, a daemon restart while approved (the image is
/// staged again: a no-op for bootc), the apply with each version's argv
/// (the lock file removed first), the reboot, and a rollback to the old
/// image the same way.
#[tokio::test]
async fn an_update_and_a_rollback_on_both_bootc_versions() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    for version in BootcVersion::ALL {
        let (name, host, mut agent) = node_on(&w, version, "upd", &a, spec(&b)).await;
        let download_only_flag = version.has_download_only();
        let bn = wait_bn(&w.nodes, &name, Reason::Staged.as_str(), |bn| {
            phase(bn) == Some(Reason::Staged.as_str())
        })
        .await;
        let status = bn.status.clone().unwrap();
        assert_eq!(status.download_only_supported, Some(true), "{version:?}");
        assert!(status.staged.unwrap().download_only, "{version:?}");
        assert!(!idle_message(&bn).contains("unlocked"), "{version:?}");
        let download_only = stages(&host)
            .iter()
            .all(|i| i.argv.iter().any(|a| a == "--download-only"));
        assert_eq!(download_only, download_only_flag, "{version:?}");
        assert_eq!(
            host.layout.finalization_lock().exists(),
            !download_only_flag,
            "{version:?}: the lock file is released bootc's lock"
        );

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
        let want = ["upgrade", "--from-downloaded", "--apply"];
        assert_eq!(apply, want, "{version:?}");
        assert_eq!(host.state().booted.unwrap().image, b, "{version:?}");
        drop(agent);
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        wait_bn(&w.nodes, &name, "Idle on b", |bn| {
            phase(bn) == Some(Reason::Idle.as_str())
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
            phase(bn) == Some(Reason::Staged.as_str())
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

/// An unplanned reboot while an image is staged and not yet approved, on
/// both versions and both kinds of reboot: nothing changes, the node boots
/// what it ran, the staged deployment is gone, and the daemon stages it
/// again. On released bootc this is ostree's lock file at work: without it
/// an orderly reboot would boot the staged image outside any reboot slot.
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
        let before = wait_bn(&w.nodes, &name, Reason::Staged.as_str(), |bn| {
            phase(bn) == Some(Reason::Staged.as_str())
        })
        .await;
        let old_boot = before.status.unwrap().boot_id.unwrap();
        let stages_before = stages(&host).len();
        agent.kill();
        let reboot = host.layout.reboot_unplanned(kind).unwrap();
        let case = format!("{version:?} {kind:?}");
        assert!(
            !reboot.applied_staged,
            "{case}: the staged image was booted"
        );
        let _agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        // Back on a with nothing staged: staged again, and Staged.
        let bn = wait_bn(&w.nodes, &name, "Staged again", |bn| {
            phase(bn) == Some(Reason::Staged.as_str())
                && bn.status.as_ref().and_then(|s| s.boot_id.as_deref()) != Some(old_boot.as_str())
        })
        .await;
        let status = bn.status.unwrap();
        assert_eq!(
            status.booted.unwrap().image.as_deref(),
            Some(a.as_str()),
            "{case}"
        );
        assert_eq!(stages(&host).len(), stages_before + 1, "{case}");
        assert!(applies(&host).is_empty(), "{case}: nothing was applied");
    }
}

/// On its booted image while another image is staged unlocked (by someone
/// else: an admin's `bootc switch`, an older helper): any reboot would boot
/// the staged one, so the daemon stages the booted image over it; a reboot
/// then changes nothing.
#[tokio::test]
async fn an_image_staged_unlocked_by_someone_else_is_replaced_by_the_booted_one() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let name = "back-1-16";
    let host = FakeHost::start(Some(&a)).unwrap();
    let mut state = host.state();
    state.staged = Some(tests::fake_bootc::Deployment::of(&b));
    host.layout.write_state(&state).unwrap();
    create_bootc_node(&w.admin, name, spec(&a)).await.unwrap();
    let _agent = Agent::start(&w.cp, &host, &AgentOptions::new(name), w.logs.path()).unwrap();
    let bn = wait_bn(&w.nodes, name, "Idle, a staged over b", |bn| {
        phase(bn) == Some(Reason::Idle.as_str())
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
