//! The `api` section: API requests per node for one update, and while
//! idle, counted from the API server's audit log.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use tests::control_plane::{CONTROLLER_USER, DAEMON_USER};

use crate::report::{Report, out, row};
use crate::simulated::RolloutResult;

#[derive(Debug, Default, Clone)]
pub(crate) struct Counts {
    /// (user, verb, resource) -> requests.
    by: BTreeMap<(String, String, String), u64>,
}

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

impl Counts {
    pub(crate) fn parse(text: &str) -> Counts {
        let mut c = Counts::default();
        for line in text.lines() {
            let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if ev["stage"] != "RequestReceived" {
                continue;
            }
            let user = match ev["user"]["username"].as_str().unwrap_or("") {
                CONTROLLER_USER => "controller",
                DAEMON_USER => "daemon",
                _ => continue,
            };
            let verb = ev["verb"].as_str().unwrap_or("?").to_owned();
            let mut resource = ev["objectRef"]["resource"]
                .as_str()
                .unwrap_or("(non-resource)")
                .to_owned();
            if let Some(sub) = ev["objectRef"]["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            *c.by.entry((user.to_owned(), verb, resource)).or_default() += 1;
        }
        c
    }

    fn total(&self, user: &str, writes_only: bool) -> u64 {
        self.by
            .iter()
            .filter(|((u, v, _), _)| {
                u == user && (!writes_only || WRITE_VERBS.contains(&v.as_str()))
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of both components, reads included, to anything but the
    /// given resources.
    fn requests_except(&self, resources: &[&str]) -> u64 {
        self.by
            .iter()
            .filter(|((_, _, r), _)| !resources.contains(&r.as_str()))
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes (both components) to the given resources.
    fn writes_to(&self, resources: &[&str]) -> u64 {
        self.by
            .iter()
            .filter(|((_, v, r), _)| {
                WRITE_VERBS.contains(&v.as_str()) && resources.contains(&r.as_str())
            })
            .map(|(_, n)| n)
            .sum()
    }

    fn verb(&self, user: &str, verb: &str) -> u64 {
        self.by
            .iter()
            .filter(|((u, v, _), _)| u == user && v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    fn markdown(&self, title: &str, per: usize) -> String {
        let mut s = format!(
            "#### {title}\n\n| Component | Verb | Resource | Requests | Per node |\n|---|---|---|---:|---:|\n"
        );
        if self.by.is_empty() {
            s.push_str("| (none) | | | 0 | 0 |\n");
        }
        for ((u, v, r), n) in &self.by {
            s.push_str(&format!(
                "| {u} | {v} | {r} | {n} | {:.1} |\n",
                *n as f64 / per.max(1) as f64
            ));
        }
        s
    }
}

pub(crate) fn audit_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

pub(crate) fn audit_slice(path: &Path, from: u64, to: u64) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let from = usize::try_from(from)?.min(bytes.len());
    let to = usize::try_from(to)?.min(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[from..to]).into_owned())
}

/// The writes a node's update needs, each with its reason: the floor the
/// api section's target is. Taking a slot and releasing it are one Node
/// write each (the slot's record rides with the cordon); two writes are
/// above the seven an update needs by design, each for safety.
pub(crate) const WRITE_FLOOR: [(&str, &str); 8] = [
    ("controller, BootcNode: the target", "the daemon stages it"),
    (
        "controller, Node: slot taken, cordoned",
        "the slot's record and the cordon, one write",
    ),
    (
        "controller, BootcNode: approved",
        "the daemon may boot the staged image",
    ),
    (
        "controller, Node: slot released, uncordoned",
        "the record goes with the uncordon, one write",
    ),
    (
        "controller, BootcNode: approval withdrawn",
        "safety: an approval left standing would let a host rolled back reboot into the target outside any slot",
    ),
    (
        "daemon, status: staged",
        "only a staged node is given a slot",
    ),
    (
        "daemon, status: rebooting",
        "safety: says the node going NotReady is our reboot (the halt and the reboot deadline count on it)",
    ),
    (
        "daemon, status: back on the target",
        "the slot is released on it",
    ),
];

/// The reads a node's update needs beside its writes: the drain's pod
/// list, the pull secret the daemon stages with, and the watch of the
/// daemon started by the reboot.
const READS_PER_UPDATE: usize = 3;

/// What the controller writes per pool, not per node: its status and Events.
pub(crate) const POOL_SHARED: &[&str] = &["bootcnodepools/status", "events"];

/// The writes an update makes with `--node-lifecycle-conditions`: the
/// same as without, plus the Node status patches.
pub(crate) fn report_lifecycle(report: &mut Report, r: &RolloutResult, nodes: usize) {
    let per = |n: u64| n as f64 / nodes as f64;
    let node_objects = r.update.writes_to(&[
        "bootcnodes",
        "bootcnodes/status",
        "nodes",
        "nodes/status",
        "pods/eviction",
    ]);
    report.push(row(
        "  with --node-lifecycle-conditions (opt-in): writes per node to its objects",
        format!("{:.1}", per(node_objects)),
        "",
        None,
    ));
    report.push(row(
        "    of which the Node lifecycle conditions (nodes/status)",
        format!("{:.1}", per(r.update.writes_to(&["nodes/status"]))),
        "",
        None,
    ));
}

/// The writes per node against the floor, each of the floor's writes
/// named with its reason; returns the floor.
fn report_floor(report: &mut Report, per_node: f64) -> f64 {
    let floor = WRITE_FLOOR.len() as f64;
    report.push(row(
        "API writes per node per update, to its objects (BootcNode, Node, eviction)",
        format!("{per_node:.1}"),
        &format!("<= {floor:.0} (the floor below)"),
        Some(per_node <= floor),
    ));
    for (write, why) in WRITE_FLOOR {
        report.push(row(format!("  floor: {write}"), why, "", None));
    }
    floor
}

pub(crate) fn report_api(report: &mut Report, r: &RolloutResult, nodes: usize, idle: Duration) {
    out(&format!(
        "api: {nodes} nodes, maxUnavailable 1, rollout took {:.1}s\n",
        r.rollout_seconds
    ));
    let per = |n: u64| n as f64 / nodes as f64;
    let cw = r.update.total("controller", true);
    let dw = r.update.total("daemon", true);
    let writes = per(cw + dw);
    // The write target counts a node's update: stage, slot, drain, reboot,
    // release. Those are the writes to the node's own objects; the pool's
    // status and Events are per pool, shared by its nodes (see the scale rows).
    let node_objects =
        r.update
            .writes_to(&["bootcnodes", "bootcnodes/status", "nodes", "pods/eviction"]);
    let floor = report_floor(report, per(node_objects));
    report.push(row(
        format!("  all writes per node, the pool's share included ({nodes} nodes)"),
        format!("{writes:.1}"),
        "",
        None,
    ));
    report.push(row(
        "  of which controller writes per node",
        format!("{:.1}", per(cw)),
        "",
        None,
    ));
    report.push(row(
        "  of which daemon writes per node",
        format!("{:.1}", per(dw)),
        "",
        None,
    ));
    report.push(row(
        "  of which pool status",
        format!("{:.1}", per(r.update.writes_to(&["bootcnodepools/status"]))),
        "",
        None,
    ));
    report.push(row(
        "  of which events",
        format!("{:.1}", per(r.update.writes_to(&["events"]))),
        "",
        None,
    ));
    let cr = r.update.total("controller", false);
    let dr = r.update.total("daemon", false);
    // As for the writes: the node's own, the pool's status and Events apart.
    let node_requests = per(r.update.requests_except(POOL_SHARED));
    let request_floor = floor + READS_PER_UPDATE as f64;
    report.push(row(
        "API requests per node per update, to its objects (reads included)",
        format!("{node_requests:.1}"),
        &format!("<= {request_floor:.0} (the floor's writes, {READS_PER_UPDATE} reads)"),
        Some(node_requests <= request_floor),
    ));
    report.push(row(
        format!("  all requests per node, the pool's share included ({nodes} nodes)"),
        format!("{:.1}", per(cr + dr)),
        "",
        None,
    ));
    let watches = r.update.verb("daemon", "watch");
    // Every node's daemon is restarted once by its reboot: the new processes
    // are the ones whose watches fall in the update window.
    let starts = r.daemon_starts.max(1);
    let per_daemon = watches as f64 / starts as f64;
    report.push(row(
        format!("daemon watches per daemon process ({watches} / {starts} started)"),
        format!("{per_daemon:.2}"),
        "1",
        Some(watches as usize <= starts),
    ));
    let idle_daemon = r.idle.total("daemon", false);
    let idle_controller = r.idle.total("controller", false);
    let idle_controller_writes = r.idle.total("controller", true);
    report.push(row(
        format!(
            "daemon requests while idle ({}s, all daemons)",
            idle.as_secs()
        ),
        idle_daemon.to_string(),
        "0",
        Some(idle_daemon == 0),
    ));
    report.push(row(
        format!("controller writes while idle ({}s)", idle.as_secs()),
        idle_controller_writes.to_string(),
        "0",
        Some(idle_controller_writes == 0),
    ));
    report.push(row(
        format!("controller requests while idle ({}s)", idle.as_secs()),
        idle_controller.to_string(),
        "0",
        Some(idle_controller == 0),
    ));
    report.details.push(format!(
        "### API requests for one update of {nodes} nodes (maxUnavailable 1)\n\nCounted from the API server's audit log (stage RequestReceived), by user. Watches are counted when they start.\n\n{}\n{}",
        r.update.markdown("During the update", nodes),
        r.idle.markdown(&format!("While idle ({}s after the rollout)", idle.as_secs()), nodes),
    ));
}
