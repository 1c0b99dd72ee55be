//! Order across pools (`spec.rollout.dependsOn`): a pool hands out a new
//! reboot slot only while every pool it names is up to date on its current
//! target ([`api::BootcNodePool::up_to_date`]), for example workers after
//! infra. Staging does not wait.
//!
//! * A named pool that does not exist holds the pool, and the status names
//!   it (it may be created later, or the name is wrong).
//! * Names are first come, first served: whoever may create pools may
//!   create a missing one, and so release the wait. The status lists each
//!   named pool found with its uid and creation time
//!   (`status.dependencies`), so that one created after this pool shows as
//!   such.
//! * A cycle (the pool depends, through others, on itself) holds the pool
//!   too, and is a problem a person must solve: `Degraded/DependencyCycle`
//!   names it. Each pool of the cycle reports it.

use std::collections::BTreeMap;

use api::{BootcNodePool, Reason};
use kube_core::ResourceExt;

use crate::model::Problem;

/// The pools `spec.rollout.dependsOn` waits for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// Named pools not up to date yet.
    pub behind: Vec<String>,
    /// Named pools that do not exist.
    pub missing: Vec<String>,
    /// The cycle the pool is in, from the pool back to itself.
    pub cycle: Option<Vec<String>>,
    /// The named pools found, as objects (`status.dependencies`).
    pub found: Vec<api::PoolDependency>,
}

impl Waiting {
    /// Does nothing hold the pool?
    pub fn is_met(&self) -> bool {
        self.behind.is_empty() && self.missing.is_empty() && self.cycle.is_none()
    }

    /// What the pool waits for, as its status says it.
    pub fn message(&self) -> String {
        let mut parts = Vec::new();
        if !self.behind.is_empty() {
            parts.push(format!("not yet up to date: {}", self.behind.join(", ")));
        }
        if !self.missing.is_empty() {
            parts.push(format!("no such pool: {}", self.missing.join(", ")));
        }
        if let Some(cycle) = &self.cycle {
            parts.push(format!("a cycle: {}", cycle.join(" -> ")));
        }
        format!(
            "no new reboot slot until the pools of spec.rollout.dependsOn are up to date ({})",
            parts.join("; ")
        )
    }
}

/// What `pool` waits for among `others`; a cycle is also a problem.
pub fn check(
    pool: &BootcNodePool,
    others: &[&BootcNodePool],
    problems: &mut Vec<Problem>,
) -> Waiting {
    let named = &pool.spec.rollout.depends_on;
    if named.is_empty() {
        return Waiting::default();
    }
    let by_name: BTreeMap<String, &BootcNodePool> =
        others.iter().map(|p| (p.name_any(), *p)).collect();
    let mut waiting = Waiting::default();
    let own = pool.name_any();
    // Naming itself is a cycle, reported as one.
    for name in named.iter().filter(|n| **n != own) {
        let Some(other) = by_name.get(name) else {
            waiting.missing.push(name.clone());
            continue;
        };
        waiting.found.push(api::PoolDependency {
            name: name.clone(),
            uid: other.metadata.uid.clone(),
            created: other.metadata.creation_timestamp.clone(),
        });
        if !other.up_to_date() {
            waiting.behind.push(name.clone());
        }
    }
    waiting.cycle = cycle(pool, &by_name);
    if let Some(cycle) = &waiting.cycle {
        problems.push((
            Reason::DependencyCycle,
            format!(
                "spec.rollout.dependsOn forms a cycle: {}; no new reboot slot until it is broken",
                cycle.join(" -> ")
            ),
        ));
    }
    waiting
}

/// The shortest way from `pool` back to itself through `dependsOn`, if any
/// (a breadth-first walk: each pool is looked at once).
fn cycle(pool: &BootcNodePool, others: &BTreeMap<String, &BootcNodePool>) -> Option<Vec<String>> {
    let start = pool.name_any();
    let depends = |name: &str| -> &[String] {
        if name == start {
            &pool.spec.rollout.depends_on
        } else {
            others
                .get(name)
                .map_or(&[][..], |p| &p.spec.rollout.depends_on)
        }
    };
    // Each pool reached, with the pool it was reached from.
    let mut from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut frontier = vec![start.as_str()];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for at in frontier {
            for dep in depends(at) {
                if *dep == start {
                    return Some(path_back(&from, &start, at));
                }
                if !from.contains_key(dep.as_str()) {
                    from.insert(dep, at);
                    next.push(dep.as_str());
                }
            }
        }
        frontier = next;
    }
    None
}

/// `start -> ... -> last -> start`, from the walk's record.
fn path_back(from: &BTreeMap<&str, &str>, start: &str, last: &str) -> Vec<String> {
    let mut chain = vec![last.to_owned()];
    let mut at = last;
    while at != start {
        let Some(prev) = from.get(at) else { break };
        at = prev;
        chain.push(at.to_owned());
    }
    chain.reverse();
    chain.push(start.to_owned());
    chain
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::ConditionType;
    use api::test_support::PoolBuilder;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A pool named `name` depending on `on`; up to date or not.
    fn pool(name: &str, on: &[&str], up_to_date: bool) -> BootcNodePool {
        let reason = if up_to_date {
            Reason::AllUpdated
        } else {
            Reason::RolloutInProgress
        };
        PoolBuilder::new(name)
            .image("quay.io/a/os:1")
            .depends_on(on)
            .generation(3)
            .condition(ConditionType::UpToDate, up_to_date, reason, "m")
            .build()
    }

    #[test]
    fn a_pool_waits_for_the_pools_it_depends_on() {
        let infra = pool("infra", &[], true);
        let storage = pool("storage", &[], false);
        let mut stale = pool("stale", &[], true);
        // Up to date, but of an older spec: not yet.
        stale.metadata.generation = Some(4);
        let a = pool("a", &["b"], true);
        let b = pool("b", &["c"], true);
        let c = pool("c", &["a"], true);
        let selfish = pool("selfish", &["selfish"], true);
        let others = [&infra, &storage, &stale, &a, &b, &c, &selfish];
        let waiting = |behind: &[&str], missing: &[&str], cycle: Option<&[&str]>| Waiting {
            behind: behind.iter().map(|s| s.to_string()).collect(),
            missing: missing.iter().map(|s| s.to_string()).collect(),
            cycle: cycle.map(|c| c.iter().map(|s| s.to_string()).collect()),
            found: Vec::new(),
        };
        #[rustfmt::skip]
        let rows = [
            ("no dependencies", pool("w", &[], false), waiting(&[], &[], None)),
            ("up to date", pool("w", &["infra"], false), waiting(&[], &[], None)),
            ("one behind", pool("w", &["infra", "storage"], false), waiting(&["storage"], &[], None)),
            ("of an older spec", pool("w", &["stale"], false), waiting(&["stale"], &[], None)),
            ("missing", pool("w", &["infra", "ghost"], false), waiting(&[], &["ghost"], None)),
            ("in a cycle", a.clone(), waiting(&[], &[], Some(&["a", "b", "c", "a"]))),
            ("on itself", selfish.clone(), waiting(&[], &[], Some(&["selfish", "selfish"]))),
        ];
        for (what, p, want) in rows {
            let name = p.name_any();
            let others: Vec<&BootcNodePool> = others
                .iter()
                .copied()
                .filter(|o| o.name_any() != name)
                .collect();
            let mut problems = Vec::new();
            let got = check(&p, &others, &mut problems);
            let found = Waiting {
                found: Vec::new(),
                ..got.clone()
            };
            assert_eq!(found, want, "{what}");
            assert_eq!(got.is_met(), want.is_met(), "{what}");
            let cycle_reported = problems.iter().any(|(r, _)| *r == Reason::DependencyCycle);
            assert_eq!(cycle_reported, want.cycle.is_some(), "{what}: {problems:?}");
        }
    }

    /// Who a dependency is: its uid and creation time, so that a pool of
    /// that name created later (by another pool writer) shows as such.
    #[test]
    fn the_status_names_each_dependency_found_with_its_uid_and_creation_time() {
        let mut infra = pool("infra", &[], true);
        infra.metadata.uid = Some("uid-infra".into());
        let created = Time(jiff::Timestamp::from_second(1_800_000_000).unwrap());
        infra.metadata.creation_timestamp = Some(created.clone());
        let w = pool("w", &["infra", "ghost"], false);
        let got = check(&w, &[&infra], &mut Vec::new());
        assert_eq!(
            got.found,
            [api::PoolDependency {
                name: "infra".into(),
                uid: Some("uid-infra".into()),
                created: Some(created),
            }]
        );
    }
}
