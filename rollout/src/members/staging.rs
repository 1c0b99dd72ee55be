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
//! whose daemon stages unlocked (`status.downloadOnlySupported: false`:
//! daemons of earlier releases on bootc without `--download-only`; today's
//! lock with ostree's lock file there; an unplanned reboot would boot an
//! unlocked staged image outside any slot) is told only when
//! it is about to take a slot: while fewer such hosts wait for a slot than
//! there are free slots. The free slots are the slot hand-out's own answer
//! for that member (`verdict::Rollout::free_slots_each`): none while
//! the pool is paused or halted, and none that the pool's own unavailable
//! nodes (NotReady, cordoned) use up. A member not told is kept on what it runs: its
//! `desiredImage` is its booted image, pinned to the digest bootc deployed
//! (`api::BootcNode::running_image`: a host installed from a tag reports
//! the tag), so a target withdrawn before a node booted it (a tag moving
//! A, B, A) costs that node nothing. A member whose host runs its own
//! automatic updater is not told ([`crate::holds::updaters`]).

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

/// One member as the staging rule sees it (members are told in the order
/// given: name order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Member {
    /// Its BootcNode already says the target (or it is about to be created).
    pub told: bool,
    pub runs_target: bool,
    /// It reports the target staged.
    pub staged: bool,
    pub in_slot: bool,
    /// Its bootc cannot stage locked.
    pub unlocked: bool,
    /// Its host reports an automatic updater on ([`crate::holds::updaters`]), or
    /// a deployment bootc cannot update from an image
    /// ([`api::BootcNode::unmanageable`]), or its daemon speaks a contract
    /// this controller does not drive ([`crate::holds::daemons`]): never told, and no longer told
    /// if it was (unless on the target or in a slot).
    pub refused: bool,
}

impl Member {
    /// Told before this plan decides anything: already told, on the target
    /// or in a slot.
    pub fn already_told(&self) -> bool {
        (self.told && !self.refused) || self.runs_target || self.in_slot
    }

    fn waiting(&self) -> bool {
        !self.runs_target && !self.in_slot
    }
}

/// The members told the target after this plan: one flag per member, in
/// the order given; `free_slots` gives, for each member in the same order,
/// the free slots a new slot for it could come from. Linear: the counts of
/// told members waiting are kept as members are told, not recounted for
/// each.
pub fn told(members: &[Member], bounds: Bounds, free_slots: &[usize]) -> Vec<bool> {
    let mut out: Vec<bool> = members.iter().map(Member::already_told).collect();
    let mut waiting = Waiting::default();
    for m in members.iter().zip(&out).filter(|(_, told)| **told) {
        waiting.add(m.0);
    }
    let rows = members.iter().zip(free_slots).zip(out.iter_mut());
    for ((m, &free_slots), told) in rows.filter(|(_, t)| !**t) {
        let fits = !m.refused
            && bounds
                .max_concurrent
                .is_none_or(|max| waiting.downloading < max)
            && bounds
                .ahead
                .is_none_or(|max| waiting.ahead < max + free_slots)
            && (!m.unlocked || waiting.unlocked < free_slots);
        if fits {
            *told = true;
            waiting.add(m);
        }
    }
    out
}

/// Told members that wait for a slot: all, those still downloading, those
/// whose bootc cannot stage locked.
#[derive(Default)]
struct Waiting {
    ahead: usize,
    downloading: usize,
    unlocked: usize,
}

impl Waiting {
    fn add(&mut self, m: &Member) {
        if m.waiting() {
            self.ahead += 1;
            self.downloading += usize::from(!m.staged);
            self.unlocked += usize::from(m.unlocked);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member; the rows name members a, b, c, d by position.
    fn m(_position: &str) -> Member {
        Member::default()
    }

    fn names(told: &[bool]) -> Vec<&'static str> {
        ["a", "b", "c", "d"]
            .into_iter()
            .zip(told)
            .filter(|(_, t)| **t)
            .map(|(name, _)| name)
            .collect()
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
            let free = vec![free; members.len()];
            assert_eq!(names(&told(&members, bounds, &free)), want, "{name}");
        }
    }
}
