//! Both bootc versions (with and without locked staging): an update and a
//! rollback, an unplanned reboot while staged, a rollback before the reboot.

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
        let bn = wait_bn(&w.nodes, &name, Reason::Staged.as_str(), |bn| {
            phase(bn) == Some(Reason::Staged.as_str())
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
        let before = wait_bn(&w.nodes, &name, Reason::Staged.as_str(), |bn| {
            phase(bn) == Some(Reason::Staged.as_str())
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
                phase(bn) == Some(Reason::Idle.as_str())
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
                phase(bn) == Some(Reason::Staged.as_str())
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
    wait_bn(&w.nodes, &name, Reason::Staged.as_str(), |bn| {
        phase(bn) == Some(Reason::Staged.as_str())
    })
    .await;
    patch_spec(&w.nodes, &name, json!({"desiredImage": a})).await;
    let bn = wait_bn(&w.nodes, &name, "Idle, a staged over b", |bn| {
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
