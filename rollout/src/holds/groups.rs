//! Order within a pool (`spec.rollout.order`): node groups take their
//! reboot slots in turn. Typical uses: control-plane nodes last, one zone
//! at a time.
//!
//! * A member belongs to the first group whose selector matches its Node's
//!   labels; members in no group (and members without a Node) form one
//!   more group, the last.
//! * It is a group's turn once every member of the groups before it runs
//!   the target: only then may its members take a new slot, in name order
//!   as always. Members of later groups stage meanwhile.
//! * A selector that does not parse holds every new slot (fail closed) and
//!   is reported as `InvalidSpec`, naming it.

use std::collections::BTreeMap;

use api::{NodeGroup, Reason};
use kube_core::{Selector, SelectorExt};

use crate::model::Problem;

/// The pool's groups, read.
#[derive(Clone, Debug, Default)]
pub struct Groups(Vec<Selector>);

/// Whose turn it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The group whose members may take new slots (0-based; the number of
    /// groups for the nodes in none).
    pub group: usize,
    /// Members of that group or earlier ones not yet on the target.
    pub behind: Vec<String>,
}

impl Groups {
    /// Reads `spec.rollout.order`; an error names the selector.
    pub fn read(order: &[NodeGroup]) -> Result<Groups, String> {
        order
            .iter()
            .enumerate()
            .map(|(i, g)| {
                crate::members::selector::parse_at(
                    &g.selector,
                    &format!("spec.rollout.order[{i}].selector"),
                )
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Groups)
    }

    /// Reads `spec.rollout.order`, reporting a selector that does not parse
    /// (None: every new slot is held).
    pub fn of_pool(order: &[NodeGroup], problems: &mut Vec<Problem>) -> Option<Groups> {
        Groups::read(order)
            .map_err(|e| problems.push((Reason::InvalidSpec, e)))
            .ok()
    }

    /// Does the pool order its nodes at all?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The group of a member whose Node has `labels` (None: no Node).
    pub fn of(&self, labels: Option<&BTreeMap<String, String>>) -> usize {
        labels
            .and_then(|labels| self.0.iter().position(|s| s.matches(labels)))
            .unwrap_or(self.0.len())
    }

    /// How a person names group `group`.
    pub fn name(&self, group: usize) -> String {
        if group < self.0.len() {
            format!("group {} of spec.rollout.order", group + 1)
        } else {
            "the nodes in no group of spec.rollout.order".to_owned()
        }
    }
}

/// Whose turn it is among `members` (name, group, runs the target): the
/// first group with a member behind; None when every member is on it.
pub fn turn<'a>(members: impl IntoIterator<Item = (&'a str, usize, bool)>) -> Option<Turn> {
    let behind: Vec<(&str, usize)> = members
        .into_iter()
        .filter(|(_, _, on_target)| !on_target)
        .map(|(name, group, _)| (name, group))
        .collect();
    let group = behind.iter().map(|(_, g)| *g).min()?;
    Some(Turn {
        group,
        behind: behind
            .iter()
            .filter(|(_, g)| *g == group)
            .map(|(n, _)| (*n).to_owned())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(labels: &[(&str, &str)]) -> NodeGroup {
        serde_json::from_value(serde_json::json!({
            "selector": {"matchLabels": labels.iter().copied().collect::<BTreeMap<_, _>>()}
        }))
        .unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn members_belong_to_the_first_group_that_matches() {
        let groups = Groups::read(&[group(&[("zone", "a")]), group(&[("role", "cp")])]).unwrap();
        // (labels, group)
        let rows = [
            (Some(labels(&[("zone", "a")])), 0),
            (Some(labels(&[("zone", "a"), ("role", "cp")])), 0),
            (Some(labels(&[("zone", "b"), ("role", "cp")])), 1),
            (Some(labels(&[("zone", "b")])), 2),
            (None, 2),
        ];
        for (l, want) in rows {
            assert_eq!(groups.of(l.as_ref()), want, "{l:?}");
        }
        assert_eq!(groups.name(1), "group 2 of spec.rollout.order");
        assert_eq!(
            groups.name(2),
            "the nodes in no group of spec.rollout.order"
        );
    }

    #[test]
    fn the_first_group_with_a_member_behind_has_the_turn() {
        let t = |group, behind: &[&str]| {
            Some(Turn {
                group,
                behind: behind.iter().map(|s| (*s).to_owned()).collect(),
            })
        };
        // (members (name, group, on the target), turn)
        #[rustfmt::skip]
        type Row = (Vec<(&'static str, usize, bool)>, Option<Turn>);
        let rows: Vec<Row> = vec![
            (
                vec![("a1", 0, false), ("a2", 0, true), ("b1", 1, false)],
                t(0, &["a1"]),
            ),
            (
                vec![
                    ("a1", 0, true),
                    ("b1", 1, false),
                    ("b2", 1, false),
                    ("x", 2, false),
                ],
                t(1, &["b1", "b2"]),
            ),
            (vec![("a1", 0, true), ("x", 2, false)], t(2, &["x"])),
            (vec![("a1", 0, true), ("b1", 1, true)], None),
        ];
        for (members, want) in rows {
            assert_eq!(turn(members.clone()), want, "{members:?}");
        }
    }

    #[test]
    fn a_selector_that_does_not_parse_is_named() {
        let bad: NodeGroup = serde_json::from_value(serde_json::json!({
            "selector": {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
        }))
        .unwrap();
        let mut problems = Vec::new();
        assert!(Groups::of_pool(&[group(&[]), bad], &mut problems).is_none());
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .1
                .starts_with("spec.rollout.order[1].selector.matchExpressions[0]"),
            "{problems:?}"
        );
    }
}
