//! The `rss` section: the daemon's and the helper's memory during and after
//! the simulated rollout.

use tests::sim::Sim;

use crate::procfs::{children, memory_kib};
use crate::report::{Report, mib, row};
use crate::simulated::RolloutResult;

/// Peak memory of the node agents seen by a sampler, by process kind.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AgentMemory {
    pub(crate) daemon_rss_max: u64,
    pub(crate) daemon_hwm_max: u64,
    pub(crate) helper_rss_max: u64,
    pub(crate) helper_hwm_max: u64,
}

pub(crate) async fn sample_agents(sim: &Sim) -> AgentMemory {
    let mut m = AgentMemory::default();
    for (_, pid) in sim.daemon_pids().await {
        if let Some((rss, hwm)) = memory_kib(pid) {
            m.daemon_rss_max = m.daemon_rss_max.max(rss);
            m.daemon_hwm_max = m.daemon_hwm_max.max(hwm);
        }
        for child in children(pid) {
            if let Some((rss, hwm)) = memory_kib(child) {
                m.helper_rss_max = m.helper_rss_max.max(rss);
                m.helper_hwm_max = m.helper_hwm_max.max(hwm);
            }
        }
    }
    m
}

pub(crate) fn merge(a: AgentMemory, b: AgentMemory) -> AgentMemory {
    AgentMemory {
        daemon_rss_max: a.daemon_rss_max.max(b.daemon_rss_max),
        daemon_hwm_max: a.daemon_hwm_max.max(b.daemon_hwm_max),
        helper_rss_max: a.helper_rss_max.max(b.helper_rss_max),
        helper_hwm_max: a.helper_hwm_max.max(b.helper_hwm_max),
    }
}

/// `judged`: whether the targets apply (release builds, or debug builds
/// when no release build is there).
pub(crate) fn report_rss(report: &mut Report, label: &str, r: &RolloutResult, judged: bool) {
    let d = r.steady.daemon_rss_max;
    let h = r.steady.helper_rss_max;
    let (dt, ht) = if judged {
        ("<= 8 MiB", "<= 3 MiB")
    } else {
        ("(release)", "(release)")
    };
    report.push(row(
        format!("daemon RSS, steady ({label}; max VmRSS over nodes)"),
        mib(d),
        dt,
        judged.then_some(d > 0 && d <= 8 * 1024),
    ));
    report.push(row(
        format!("daemon peak (VmHWM) during the update ({label})"),
        mib(r.during.daemon_hwm_max),
        "",
        None,
    ));
    report.push(row(
        format!("helper RSS, steady ({label}; max VmRSS over nodes)"),
        mib(h),
        ht,
        judged.then_some(h > 0 && h <= 3 * 1024),
    ));
    report.push(row(
        format!("helper peak (VmHWM) during the update ({label})"),
        mib(r.during.helper_hwm_max),
        "",
        None,
    ));
}
