//! One wave in a small pool, step by step: while the calibration pool (one
//! slot) rolls out, watches on BootcNodes and Nodes note when each step of
//! each node became visible, and the controller's log gives its drains.
//! Between one node and the next in the slot, a wave's controller-side
//! latency runs from the node back Ready on the target to the next node's
//! approval, in the steps [`STEPS`] names.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use api::BootcNode;
use api::Node;
use futures::StreamExt;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::report::{Report, percentile, row};

/// A step of a node's turn, as a watch (or the controller's log) shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mark {
    /// The slot's record on the Node, written with its cordon.
    SlotTaken,
    DrainDone,
    Approved,
    NotReady,
    Ready,
    SlotReleased,
}

/// The steps of a wave: from the mark of one node (`true`: the node that
/// leaves the slot; `false`: the next) to the next mark.
pub(crate) const STEPS: [(&str, bool, Mark); 5] = [
    (
        "the node back on the target and Ready seen",
        true,
        Mark::Ready,
    ),
    ("its slot released (uncordoned)", true, Mark::SlotReleased),
    (
        "the next node's slot taken (cordoned)",
        false,
        Mark::SlotTaken,
    ),
    ("drain done", false, Mark::DrainDone),
    ("approval written", false, Mark::Approved),
];

/// What was seen, in order: (when, node, mark).
pub(crate) type Seen = Vec<(Timestamp, String, Mark)>;

/// Watches BootcNodes and Nodes until dropped, noting each mark.
pub(crate) struct Recorder {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A BootcNode's marks: (approved, -).
fn bootc_state(bn: &BootcNode) -> [bool; 2] {
    [bn.approved(), false]
}

/// A Node's marks: (its slot's record, Ready).
fn node_state(n: &Node) -> [bool; 2] {
    [
        api::node_health::disrupted_by(n).is_some(),
        api::node_health::is_ready(n),
    ]
}

/// The marks between two states of an object: each flag's rise or fall.
fn changes(before: [bool; 2], after: [bool; 2], marks: [[Option<Mark>; 2]; 2]) -> Vec<Mark> {
    (0..2)
        .filter(|&i| before[i] != after[i])
        .filter_map(|i| marks[i][usize::from(after[i])])
        .collect()
}

/// (fall, rise) marks of a BootcNode's and a Node's flags.
const BOOTC_MARKS: [[Option<Mark>; 2]; 2] = [[None, Some(Mark::Approved)], [None, None]];
const NODE_MARKS: [[Option<Mark>; 2]; 2] = [
    [Some(Mark::SlotReleased), Some(Mark::SlotTaken)],
    [Some(Mark::NotReady), Some(Mark::Ready)],
];

fn watch<K>(
    api: Api<K>,
    state: fn(&K) -> [bool; 2],
    marks: [[Option<Mark>; 2]; 2],
    seen: Arc<Mutex<Seen>>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        let mut last: BTreeMap<String, [bool; 2]> = BTreeMap::new();
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(obj)) = stream.next().await {
            let now = Timestamp::now();
            let after = state(&obj);
            let name = obj.name_any();
            if let Some(before) = last.insert(name.clone(), after)
                && let Ok(mut s) = seen.lock()
            {
                for m in changes(before, after, marks) {
                    s.push((now, name.clone(), m));
                }
            }
        }
    })
}

impl Recorder {
    pub(crate) fn start(admin: &kube::Client) -> Recorder {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tasks = vec![
            watch(
                Api::<BootcNode>::all(admin.clone()),
                bootc_state,
                BOOTC_MARKS,
                seen.clone(),
            ),
            watch(
                Api::<Node>::all(admin.clone()),
                node_state,
                NODE_MARKS,
                seen.clone(),
            ),
        ];
        Recorder { seen, tasks }
    }

    /// Watches Nodes only: their slot's record and readiness (what
    /// [`releases`] reads), one watch less on the API server of a big pool.
    pub(crate) fn nodes(admin: &kube::Client) -> Recorder {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tasks = vec![watch(
            Api::<Node>::all(admin.clone()),
            node_state,
            NODE_MARKS,
            seen.clone(),
        )];
        Recorder { seen, tasks }
    }

    /// What was seen, the drains the controller logged (`log`) included.
    pub(crate) fn seen(&self, log: &str) -> Seen {
        let mut all = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        all.extend(drains_done(log));
        all.sort();
        all
    }
}

/// The controller's `drain finished` lines: (when, node).
fn drains_done(log: &str) -> Vec<(Timestamp, String, Mark)> {
    drain_ends(log)
        .into_iter()
        .map(|(at, node)| (at, node, Mark::DrainDone))
        .collect()
}

/// The controller's `drain finished` lines: (when, node).
pub(crate) fn drain_ends(log: &str) -> Vec<(Timestamp, String)> {
    log.lines()
        .filter(|l| l.contains("drain finished"))
        .filter_map(|l| {
            let plain = crate::scale::strip_ansi(l);
            let at = plain.split_whitespace().next()?.parse().ok()?;
            // `node=<name>`, maybe inside a span's braces.
            let node: String = plain
                .split_whitespace()
                .find_map(|w| w.strip_prefix("node="))?
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
                .collect();
            Some((at, node))
        })
        .collect()
}

/// Each wave's step durations (s), one row per wave: the nodes in slot
/// order, each next to the one before. A wave missing a mark is left out.
pub(crate) fn waves(seen: &Seen) -> Vec<Vec<f64>> {
    let first = |node: &str, mark: Mark, after: Timestamp| {
        seen.iter()
            .find(|(t, n, m)| n == node && *m == mark && *t >= after)
            .map(|(t, ..)| *t)
    };
    let mut order: Vec<(Timestamp, &str)> = seen
        .iter()
        .filter(|(_, _, m)| *m == Mark::SlotTaken)
        .map(|(t, n, _)| (*t, n.as_str()))
        .collect();
    order.sort();
    order
        .windows(2)
        .filter_map(|w| {
            let [(left_at, left), (_, next)] = [w[0], w[1]];
            let mut at = first(left, Mark::NotReady, left_at)?;
            let mut times = Vec::new();
            for (_, leaving, mark) in STEPS {
                let node = if leaving { left } else { next };
                let t = first(node, mark, at).or_else(|| first(node, mark, Timestamp::MIN))?;
                times.push(t);
                at = t;
            }
            Some(
                times
                    .windows(2)
                    .map(|p| (p[1] - p[0]).total(jiff::Unit::Second).unwrap_or(0.0))
                    .collect(),
            )
        })
        .collect()
}

/// Each node's wait to be released once back (s): from its Ready after a
/// NotReady to its slot's release. A node never seen released is left out.
pub(crate) fn releases(seen: &Seen) -> Vec<f64> {
    let mut back: BTreeMap<&str, (bool, Option<Timestamp>)> = BTreeMap::new();
    let mut out = Vec::new();
    for (t, node, mark) in seen {
        let (down, ready_at) = back.entry(node.as_str()).or_default();
        match mark {
            Mark::NotReady => (*down, *ready_at) = (true, None),
            Mark::Ready if *down => (*down, *ready_at) = (false, Some(*t)),
            Mark::SlotReleased => {
                if let Some(at) = ready_at.take() {
                    out.push((*t - at).total(jiff::Unit::Second).unwrap_or(0.0));
                }
            }
            _ => {}
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The target of a wave's controller-side latency at the calibration size.
const WAVE_P50_TARGET: f64 = 0.10;

/// Prints the wave, step by step, p50 and p99 over the waves.
pub(crate) fn report_waves(report: &mut Report, nodes: usize, waves: &[Vec<f64>]) {
    if waves.is_empty() {
        report
            .notes
            .push("the calibration's waves were not seen step by step".to_owned());
        return;
    }
    let column = |i: Option<usize>| {
        let mut v: Vec<f64> = waves
            .iter()
            .map(|w| i.map_or_else(|| w.iter().sum(), |i| w[i]))
            .collect();
        v.sort_by(f64::total_cmp);
        (percentile(&v, 50.0), percentile(&v, 99.0))
    };
    let (p50, p99) = column(None);
    report.push(row(
        format!(
            "one wave at {nodes} nodes, one slot: back Ready -> next approval, p50 / p99 (n={})",
            waves.len()
        ),
        format!("{:.3} / {:.3} s", p50, p99),
        &format!("p50 <= {WAVE_P50_TARGET:.2} s"),
        Some(p50 <= WAVE_P50_TARGET),
    ));
    for (i, pair) in STEPS.windows(2).enumerate() {
        let (p50, p99) = column(Some(i));
        report.push(row(
            format!("  {} -> {}", pair[0].0, pair[1].0),
            format!("{:.1} / {:.1} ms", p50 * 1000.0, p99 * 1000.0),
            "",
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(ms).unwrap()
    }

    #[test]
    fn a_flag_rise_or_fall_is_its_mark() {
        let c = |b, a| changes(b, a, NODE_MARKS);
        assert_eq!(c([false, true], [true, true]), [Mark::SlotTaken]);
        assert_eq!(c([true, true], [false, true]), [Mark::SlotReleased]);
        assert_eq!(c([true, true], [true, false]), [Mark::NotReady]);
        assert_eq!(c([true, false], [true, true]), [Mark::Ready]);
        assert_eq!(
            c([true, false], [false, true]),
            [Mark::SlotReleased, Mark::Ready],
            "both at once: both marks"
        );
    }

    #[test]
    fn a_release_is_timed_from_the_node_back_ready() {
        let mut seen: Seen = [
            (0, "a", Mark::SlotTaken),
            (10, "a", Mark::Ready),
            (40, "a", Mark::NotReady),
            (100, "a", Mark::Ready),
            (130, "a", Mark::SlotReleased),
            (50, "b", Mark::NotReady),
            (90, "b", Mark::Ready),
            (300, "b", Mark::SlotReleased),
            (60, "c", Mark::NotReady),
            (70, "c", Mark::SlotReleased),
        ]
        .into_iter()
        .map(|(t, n, m)| (at(t), n.to_owned(), m))
        .collect();
        seen.sort();
        let ms: Vec<i64> = releases(&seen)
            .iter()
            .map(|s| (s * 1000.0).round() as i64)
            .collect();
        // a: from its Ready after the reboot (not the one before); c: never
        // back, left out.
        assert_eq!(ms, [30, 210]);
    }

    #[test]
    fn a_wave_runs_from_one_node_back_to_the_next_approved() {
        let seen: Seen = [
            (0, "a", Mark::SlotTaken),
            (20, "a", Mark::DrainDone),
            (30, "a", Mark::Approved),
            (40, "a", Mark::NotReady),
            (100, "a", Mark::Ready),
            (130, "a", Mark::SlotReleased),
            (135, "b", Mark::SlotTaken),
            (160, "b", Mark::DrainDone),
            (190, "b", Mark::Approved),
            (200, "b", Mark::NotReady),
        ]
        .into_iter()
        .map(|(t, n, m)| (at(t), n.to_owned(), m))
        .collect();
        let w = waves(&seen);
        assert_eq!(w.len(), 1, "b never came back: one wave");
        let ms: Vec<i64> = w[0].iter().map(|s| (s * 1000.0).round() as i64).collect();
        assert_eq!(ms, [30, 5, 25, 30]);
    }
}
