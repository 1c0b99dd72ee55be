//! The host's own automatic updaters, read-only. Each would reboot the node
//! outside the operator's slots (bootc's timer runs `bootc upgrade --apply`
//! against what the operator staged), so Status names the ones that are on
//! (`api::host_updaters`, the only names it can report).

use crate::bootc::{CLIENT_TIMEOUT, RunError, Runner, SYSTEMCTL};
use api::host_updaters::UNITS;

/// `systemctl show --property=Id,UnitFileState,ActiveState -- <UNITS>`.
pub fn show_argv() -> Vec<String> {
    let head = ["show", "--property=Id,UnitFileState,ActiveState", "--"];
    head.into_iter().chain(UNITS).map(str::to_owned).collect()
}

/// The units of `systemctl show`'s output (one blank-line separated block
/// per unit) that are on: enabled or linked to start, or active. Masked,
/// disabled or missing (`UnitFileState=` empty) and inactive is off.
pub fn on(show: &str) -> Vec<String> {
    let on = |block: &str| {
        let field = |k| block.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("");
        let file = field("UnitFileState=").trim_end_matches("-runtime");
        let on = ["enabled", "linked"].contains(&file)
            || ["active", "activating"].contains(&field("ActiveState="));
        Some(field("Id=").to_owned()).filter(|id| on && UNITS.contains(&id.as_str()))
    };
    show.split("\n\n").filter_map(on).collect()
}

/// Asks the host's systemd (one short client run, no unit).
pub async fn read(runner: &Runner) -> Result<Vec<String>, RunError> {
    let argv = show_argv();
    let (status, out, err) = runner.run_program(SYSTEMCTL, &argv, CLIENT_TIMEOUT).await?;
    crate::bootc::failed(&argv, status, &err)?;
    Ok(on(&String::from_utf8_lossy(&out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_fixed() {
        assert_eq!(
            show_argv(),
            [
                "show",
                "--property=Id,UnitFileState,ActiveState",
                "--",
                api::host_updaters::BOOTC_TIMER,
                api::host_updaters::RPM_OSTREE_TIMER,
                api::host_updaters::ZINCATI,
            ]
        );
    }

    #[test]
    fn counts_enabled_linked_or_active_units_only() {
        let block = |id: &str, file: &str, active: &str| {
            format!("Id={id}\nActiveState={active}\nUnitFileState={file}\n")
        };
        let show = |blocks: &[String]| blocks.join("\n");
        let [timer, rpm, zincati] = UNITS;
        let cases: &[(&[String], &[&str])] = &[
            (&[block(timer, "enabled", "active")], &[timer]),
            (&[block(timer, "enabled-runtime", "inactive")], &[timer]),
            (&[block(timer, "linked", "inactive")], &[timer]),
            (&[block(timer, "masked", "inactive")], &[]),
            (&[block(timer, "disabled", "inactive")], &[]),
            // Masked by hand without `--now`: still armed until a reboot.
            (&[block(timer, "masked", "active")], &[timer]),
            (&[block(zincati, "disabled", "activating")], &[zincati]),
            // A unit the host does not have.
            (&[block(rpm, "", "inactive")], &[]),
            (
                &[
                    block(timer, "masked", "inactive"),
                    block(rpm, "enabled", "active"),
                    block(zincati, "enabled", "active"),
                ],
                &[rpm, zincati],
            ),
            // Only the units asked about, whatever systemctl prints.
            (&[block("evil.service", "enabled", "active")], &[]),
        ];
        for (blocks, want) in cases {
            assert_eq!(on(&show(blocks)), *want, "{blocks:?}");
        }
        assert!(on("").is_empty());
    }
}
