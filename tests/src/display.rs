//! The simulator's live view of a rollout: a progress bar from the pool's
//! status and a table of nodes. Pure: the caller fetches, this renders.

use std::fmt::Write;

use api::Node;
use api::conditions;
use api::{BootcNode, BootcNodePool, ConditionType};

/// One row of the node table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub booted: String,
    pub desired: String,
    pub state: String,
    pub approved: bool,
    pub in_slot: bool,
    pub cordoned: bool,
    pub ready: bool,
    pub degraded: Option<String>,
    /// What the node's bootc offers: locked staging (`--download-only`),
    /// or unlocked (a reboot before its turn boots what is staged).
    pub staging: &'static str,
}

/// The version-ish tail of an image: the tag, or the digest's first 12 hex.
pub fn short_image(image: &str) -> String {
    if let Some((_, digest)) = image.split_once('@') {
        let hex = digest.split_once(':').map_or(digest, |(_, h)| h);
        return hex.chars().take(12).collect();
    }
    image.rsplit_once(':').map_or(image, |(_, t)| t).to_owned()
}

/// Joins BootcNodes with their Nodes into rows, sorted by name.
pub fn rows(bootc_nodes: &[BootcNode], nodes: &[Node]) -> Vec<NodeRow> {
    let mut rows: Vec<NodeRow> = bootc_nodes
        .iter()
        .map(|bn| {
            let name = bn.metadata.name.clone().unwrap_or_default();
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(&name));
            let status = bn.status.as_ref();
            let conds = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
            let booted = status
                .and_then(|s| s.booted.as_ref())
                .and_then(|b| b.image.clone())
                .map(|i| short_image(&i))
                .unwrap_or_else(|| "-".into());
            NodeRow {
                name,
                booted,
                desired: short_image(&bn.spec.desired_image),
                state: conditions::reason(conds, ConditionType::Idle)
                    .unwrap_or("Pending")
                    .to_owned(),
                approved: bn.approved(),
                in_slot: node.is_some_and(|n| api::node_health::disrupted_by(n).is_some())
                    || bn.legacy_slot_record(),
                cordoned: node.is_some_and(api::node_health::is_cordoned),
                ready: node.is_some_and(api::node_health::is_ready),
                degraded: bn.degraded().map(|c| c.message.to_string()),
                staging: match status.and_then(|s| s.download_only_supported) {
                    Some(true) => "locked",
                    Some(false) => "unlocked",
                    None => "-",
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// A text progress bar `[#####-----] 5/10`.
pub fn progress_bar(done: i32, total: i32, width: usize) -> String {
    let total_u = usize::try_from(total.max(0)).unwrap_or(0);
    let done_u = usize::try_from(done.clamp(0, total.max(0))).unwrap_or(0);
    let filled = (done_u * width).checked_div(total_u).unwrap_or(0);
    format!(
        "[{}{}] {done}/{total}",
        "#".repeat(filled),
        "-".repeat(width - filled)
    )
}

/// The whole screen for one pool.
pub fn render(pool: &BootcNodePool, rows: &[NodeRow]) -> String {
    let mut out = String::new();
    let status = pool.status.clone().unwrap_or_default();
    let name = pool.metadata.name.clone().unwrap_or_default();
    let up_to_date = conditions::find(&status.conditions, ConditionType::UpToDate);
    let health = conditions::find(&status.conditions, ConditionType::Degraded);
    let _ = writeln!(out, "pool {name}: {}", pool.spec.image.reference);
    let _ = writeln!(
        out,
        "  target {}  {}",
        status
            .target_digest
            .as_deref()
            .map_or("-".to_owned(), short_image),
        progress_bar(status.updated_count, status.node_count, 30)
    );
    if let Some(c) = up_to_date {
        let _ = writeln!(out, "  UpToDate={} ({}): {}", c.status, c.reason, c.message);
    }
    if let Some(c) = health {
        let _ = writeln!(out, "  Degraded={} ({}): {}", c.status, c.reason, c.message);
    }
    let _ = writeln!(
        out,
        "\n  {:<14} {:<13} {:<13} {:<10} {:<8} {:<5} {:<9} {:<6} DEGRADED",
        "NODE", "BOOTED", "DESIRED", "STATE", "STAGING", "SLOT", "CORDONED", "READY"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<14} {:<13} {:<13} {:<10} {:<8} {:<5} {:<9} {:<6} {}",
            r.name,
            r.booted,
            r.desired,
            r.state,
            r.staging,
            if r.in_slot {
                if r.approved { "boot" } else { "drain" }
            } else {
                ""
            },
            if r.cordoned { "yes" } else { "" },
            if r.ready { "yes" } else { "NO" },
            r.degraded.as_deref().unwrap_or("")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_images() {
        assert_eq!(short_image("r.io/os:v2"), "v2");
        assert_eq!(short_image("127.0.0.1:5000/os:v2"), "v2");
        assert_eq!(
            short_image("r.io/os@sha256:0123456789abcdef0123"),
            "0123456789ab"
        );
        assert_eq!(short_image("sha256:abcdef"), "abcdef");
    }

    #[test]
    fn progress() {
        assert_eq!(progress_bar(0, 4, 8), "[--------] 0/4");
        assert_eq!(progress_bar(2, 4, 8), "[####----] 2/4");
        assert_eq!(progress_bar(4, 4, 8), "[########] 4/4");
        assert_eq!(progress_bar(0, 0, 4), "[----] 0/0");
    }
}
