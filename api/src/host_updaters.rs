//! The host's own automatic updaters: systemd units that would update and
//! reboot a node outside the operator's reboot slots. The helper reports
//! which of them are on (enabled, linked or active); the controller stages
//! nothing on such a node and names the unit and this fix. The operator
//! never masks one itself: every change to the OS flows through its image.

/// bootc's own timer (`bootc upgrade --apply --quiet`, 1 h after boot and
/// every 8 h), enabled in Fedora's and CentOS Stream's bootc images.
pub const BOOTC_TIMER: &str = "bootc-fetch-apply-updates.timer";
/// rpm-ostree's automatic updates.
pub const RPM_OSTREE_TIMER: &str = "rpm-ostreed-automatic.timer";
/// Fedora CoreOS's update agent.
pub const ZINCATI: &str = "zincati.service";

/// Every updater the helper asks about, and the only names it reports.
pub const UNITS: [&str; 3] = [BOOTC_TIMER, RPM_OSTREE_TIMER, ZINCATI];

/// What a person does about `units` (unit names): mask them in the OS image.
pub fn fix(units: &[String]) -> String {
    format!(
        "mask it in the OS image: `RUN systemctl mask {}` in its Containerfile",
        units.join(" ")
    )
}
