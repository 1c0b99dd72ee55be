//! Staging that does not flood the network: which members are told the
//! pool's target now. Pure; the planner calls it.
//!
//! A member is *told* when its BootcNode's `desiredImage` is the target.
//! Members already told stay told; so do members on the target or in a
//! reboot slot. The others are told in name order while
//!
//! * fewer than `spec.rollout.maxConcurrentStaging` told members are still
//!   downloading (told, not on the target, not staged, not in a slot), and
//! * fewer than `spec.rollout.stageAhead` plus the free slots told members
//!   wait for a slot (told, not on the target, not in a slot): with 0, a
//!   node is told only when a free slot awaits it;
//!
//! both unset (the default) tell every member at once, as before. A host
//! whose bootc cannot stage locked (no `--download-only`: an unplanned
//! reboot would boot the staged image outside any slot) is told only when
//! it is about to take a slot: while fewer such hosts wait for a slot than
//! there are free slots. A member not told is kept on what it runs: its
//! `desiredImage` is its booted image, so a target withdrawn before a node
//! booted it (a tag moving A, B, A) costs that node nothing.

use std::collections::BTreeSet;

/// The pool's staging bounds (`spec.rollout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    pub max_concurrent: Option<usize>,
    pub ahead: Option<usize>,
}

impl Bounds {
    pub fn of(rollout: &api::RolloutSpec) -> Self {
        let n = |v: Option<i32>| v.and_then(|v| usize::try_from(v).ok());
        Bounds {
            max_concurrent: n(rollout.max_concurrent_staging),
            ahead: n(rollout.stage_ahead),
        }
    }
}

/// One member as the staging rule sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Its BootcNode already says the target (or it is about to be created).
    pub told: bool,
    pub runs_target: bool,
    /// It reports the target staged.
    pub staged: bool,
    pub in_slot: bool,
    /// Its bootc cannot stage locked.
    pub unlocked: bool,
}

impl Member {
    fn waiting(&self) -> bool {
        !self.runs_target && !self.in_slot
    }
}

/// The members told the target after this plan.
pub fn told(members: &[Member], bounds: Bounds, free_slots: usize) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = members
        .iter()
        .filter(|m| m.told || m.runs_target || m.in_slot)
        .map(|m| m.name.clone())
        .collect();
    let told_waiting = |out: &BTreeSet<String>, pred: &dyn Fn(&Member) -> bool| {
        members
            .iter()
            .filter(|m| out.contains(&m.name) && m.waiting() && pred(m))
            .count()
    };
    let rest: Vec<&Member> = members.iter().filter(|m| !out.contains(&m.name)).collect();
    for m in rest {
        let downloading = told_waiting(&out, &|m| !m.staged);
        let ahead = told_waiting(&out, &|_| true);
        let unlocked = told_waiting(&out, &|m| m.unlocked);
        let fits = bounds.max_concurrent.is_none_or(|max| downloading < max)
            && bounds.ahead.is_none_or(|max| ahead < max + free_slots)
            && (!m.unlocked || unlocked < free_slots);
        if fits {
            out.insert(m.name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> Member {
        Member {
            name: name.into(),
            ..Member::default()
        }
    }

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    #[test]
    fn staging_bounds_table() {
        let four = || vec![m("a"), m("b"), m("c"), m("d")];
        // (name, members, bounds, free slots, told)
        type Row = (&'static str, Vec<Member>, Bounds, usize, Vec<&'static str>);
        let rows: Vec<Row> = vec![
            (
                "unbounded: all at once",
                four(),
                Bounds::default(),
                1,
                vec!["a", "b", "c", "d"],
            ),
            (
                "two downloads at a time",
                four(),
                Bounds {
                    max_concurrent: Some(2),
                    ahead: None,
                },
                1,
                vec!["a", "b"],
            ),
            (
                "staged nodes download no more",
                vec![
                    Member {
                        told: true,
                        staged: true,
                        ..m("a")
                    },
                    m("b"),
                    m("c"),
                ],
                Bounds {
                    max_concurrent: Some(1),
                    ahead: None,
                },
                1,
                vec!["a", "b"],
            ),
            (
                "stage ahead 1: one waiting, slot holders and updated nodes aside",
                vec![
                    Member {
                        told: true,
                        in_slot: true,
                        ..m("a")
                    },
                    Member {
                        runs_target: true,
                        ..m("b")
                    },
                    m("c"),
                    m("d"),
                ],
                Bounds {
                    max_concurrent: None,
                    ahead: Some(1),
                },
                0,
                vec!["a", "b", "c"],
            ),
            (
                "stage ahead 0: one per free slot",
                four(),
                Bounds {
                    max_concurrent: None,
                    ahead: Some(0),
                },
                1,
                vec!["a"],
            ),
            (
                "stage ahead 0, every slot taken",
                four(),
                Bounds {
                    max_concurrent: None,
                    ahead: Some(0),
                },
                0,
                vec![],
            ),
            (
                "unlocked hosts only when a slot is free for them",
                vec![
                    Member {
                        unlocked: true,
                        ..m("a")
                    },
                    Member {
                        unlocked: true,
                        ..m("b")
                    },
                    m("c"),
                ],
                Bounds::default(),
                1,
                vec!["a", "c"],
            ),
            (
                "unlocked, no free slot",
                vec![Member {
                    unlocked: true,
                    ..m("a")
                }],
                Bounds::default(),
                0,
                vec![],
            ),
            (
                "told stays told",
                vec![Member {
                    told: true,
                    unlocked: true,
                    ..m("a")
                }],
                Bounds {
                    max_concurrent: Some(1),
                    ahead: Some(0),
                },
                0,
                vec!["a"],
            ),
        ];
        for (name, members, bounds, free, want) in rows {
            assert_eq!(names(&told(&members, bounds, free)), want, "{name}");
        }
    }
}
