//! The played node's steps without an API server: each written status is
//! put back on the BootcNode as the API server would, and the next step
//! sees it, as the watch would show it.
#![allow(clippy::unwrap_used)]

use api::{BootcNodeSpec, ConditionType, DaemonPhase};

use super::*;

const OLD: &str = "r.io/os@sha256:0000000000000000000000000000000000000000000000000000000000000000";
const NEW: &str = "r.io/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// A BootcNode and the player of its daemon, with the API server's part
/// (generations, resource versions) played by hand.
struct Rig {
    bn: BootcNode,
    node: PlayedNode,
    options: PlayerOptions,
    version: u64,
    writes: Vec<BootcNodeStatus>,
    reboots: usize,
    readies: usize,
}

impl Rig {
    fn new(desired: &str, status: Option<BootcNodeStatus>, options: PlayerOptions) -> Self {
        let mut bn = BootcNode::new("n1", crate::daemon_loop::spec(desired));
        bn.metadata.generation = Some(1);
        bn.metadata.uid = Some("uid-1".to_owned());
        bn.metadata.resource_version = Some("1".to_owned());
        bn.status = status;
        let node = PlayedNode::new(&bn, &options);
        Rig {
            bn,
            node,
            options,
            version: 1,
            writes: Vec::new(),
            reboots: 0,
            readies: 0,
        }
    }

    /// One watch event: the player's step, its write applied.
    fn event(&mut self) -> Option<DaemonPhase> {
        let step = self
            .node
            .plan(&self.bn, &self.options, Time(jiff::Timestamp::UNIX_EPOCH))?;
        self.reboots += usize::from(step.reboots);
        self.readies += usize::from(step.back);
        let phase = step.write.as_ref().map(|s| s.phase().unwrap().unwrap());
        if let Some(status) = &step.write {
            self.writes.push(status.clone());
            self.bn.status = Some(status.clone());
            self.bump();
        }
        self.node.adopt(step, Some(self.version));
        phase
    }

    /// The controller changes the spec.
    fn spec(&mut self, change: impl FnOnce(&mut BootcNodeSpec)) {
        change(&mut self.bn.spec);
        self.bn.metadata.generation = self.bn.metadata.generation.map(|g| g + 1);
        self.bump();
    }

    fn bump(&mut self) {
        self.version += 1;
        self.bn.metadata.resource_version = Some(self.version.to_string());
    }

    fn status(&self) -> &BootcNodeStatus {
        self.bn.status.as_ref().unwrap()
    }

    fn booted(&self) -> Option<&str> {
        self.status().booted.as_ref()?.image.as_deref()
    }
}

fn options() -> PlayerOptions {
    PlayerOptions {
        initial_image: OLD.to_owned(),
        ..PlayerOptions::default()
    }
}

fn approve(spec: &mut BootcNodeSpec) {
    spec.desired_image_state = DesiredImageState::Booted;
}

/// Staged on NEW: the rig after the node reported Staged.
fn staged(options: PlayerOptions) -> Rig {
    let mut rig = Rig::new(OLD, None, options);
    assert_eq!(rig.event(), Some(DaemonPhase::Idle));
    rig.spec(|s| s.desired_image = NEW.into());
    // The pull is instant: no Staging report, as the daemon's rule says.
    assert_eq!(rig.event(), Some(DaemonPhase::Staged));
    rig
}

#[test]
fn an_update_is_three_writes_of_the_daemons_own_statuses() {
    let mut rig = staged(options());
    let staged = rig.status().staged.clone().unwrap();
    assert_eq!(
        (staged.image.as_deref(), staged.download_only),
        (Some(NEW), true)
    );
    assert_eq!(rig.event(), None, "nothing new: no write");
    rig.spec(approve);
    assert_eq!(rig.event(), Some(DaemonPhase::Rebooting));
    assert_eq!((rig.reboots, rig.readies), (1, 0));
    assert_eq!(rig.booted(), Some(OLD), "written before the reboot");
    assert_eq!(rig.event(), Some(DaemonPhase::Idle));
    assert_eq!(rig.readies, 1, "Ready with the report of the new boot");
    assert_eq!(rig.booted(), Some(NEW));
    assert_eq!(rig.status().staged, None);
    assert_ne!(rig.status().boot_id.as_deref(), Some("n1-boot-0"));
    assert!(!api::conditions::is_true(
        &rig.status().conditions,
        ConditionType::Degraded
    ));
    // The controller revokes the approval as it frees the slot: nothing
    // to report (the daemon's own rule), and no second reboot.
    rig.spec(|s| s.desired_image_state = DesiredImageState::Staged);
    assert_eq!(rig.event(), None);
    assert_eq!(rig.event(), None);
    assert_eq!(rig.writes.len(), 1 + 3, "the initial Idle, then three");
    assert_eq!((rig.reboots, rig.readies), (1, 1));
}

#[test]
fn a_failed_reboot_comes_back_on_the_old_image_degraded_and_stays() {
    let mut rig = staged(PlayerOptions {
        fail_after_reboot: ["n1".to_owned()].into(),
        ..options()
    });
    rig.spec(approve);
    assert_eq!(rig.event(), Some(DaemonPhase::Rebooting));
    assert_eq!(rig.event(), Some(DaemonPhase::Rebooting));
    assert_eq!(rig.booted(), Some(OLD));
    let conditions = &rig.status().conditions;
    assert!(api::conditions::is_true(
        conditions,
        ConditionType::Degraded
    ));
    assert_eq!(
        api::conditions::message(conditions, ConditionType::Idle),
        Some(machine::FAILED_REBOOT)
    );
    assert_eq!(rig.readies, 1, "the node is back, on the old image");
    for _ in 0..3 {
        assert_eq!(rig.event(), None, "reported once, no retry");
    }
    assert_eq!(rig.reboots, 1);
}

#[test]
fn an_ignored_approval_is_seen_but_not_applied() {
    let mut rig = staged(PlayerOptions {
        ignore_approval: ["n1".to_owned()].into(),
        ..options()
    });
    rig.spec(approve);
    assert_eq!(rig.event(), Some(DaemonPhase::Staged));
    assert_eq!(rig.status().observed_generation, rig.bn.metadata.generation);
    assert_eq!(rig.event(), None);
    assert_eq!(rig.reboots, 0);
}

#[test]
fn a_player_started_mid_update_stages_again_before_applying() {
    let mut before = staged(options());
    before.spec(approve);
    // The player that staged it is gone; a new one reads the status.
    let mut rig = Rig::new(NEW, before.bn.status.clone(), options());
    rig.bn.spec = before.bn.spec.clone();
    rig.bn.metadata.generation = before.bn.metadata.generation;
    // One step: the instant pull again (the helper applies only what it
    // staged), then the Rebooting report and the apply.
    assert_eq!(rig.event(), Some(DaemonPhase::Rebooting));
    assert_eq!(rig.reboots, 1);
    assert_eq!(rig.event(), Some(DaemonPhase::Idle));
    assert_eq!(rig.booted(), Some(NEW));
}

#[test]
fn initial_overrides_and_events_older_than_the_last_write() {
    let mut rig = Rig::new(
        NEW,
        None,
        PlayerOptions {
            initial_overrides: [("n1".to_owned(), NEW.to_owned())].into(),
            ..options()
        },
    );
    let stale = rig.bn.clone();
    assert_eq!(rig.event(), Some(DaemonPhase::Idle));
    assert_eq!(rig.booted(), Some(NEW));
    // An event from before that write (a watch replaying) is skipped.
    assert!(
        rig.node
            .plan(&stale, &rig.options, Time(jiff::Timestamp::UNIX_EPOCH))
            .is_none()
    );
    // A new BootcNode of the same name is played afresh.
    let mut recreated = stale;
    recreated.metadata.uid = Some("uid-2".to_owned());
    let step = rig
        .node
        .plan(&recreated, &rig.options, Time(jiff::Timestamp::UNIX_EPOCH))
        .unwrap();
    assert!(step.write.is_some());
}
