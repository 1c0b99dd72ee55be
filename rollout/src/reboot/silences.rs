//! Alertmanager silences while nodes hold reboot slots
//! (`spec.rollout.silences`): which of the operator's silences to make,
//! renew and expire, given the slot holders and the silences found. The
//! controller lists them and carries the steps out
//! (`controller::actions::silences`); the rules are here:
//!
//! * A node that holds a slot has one silence of ours that matches its
//!   alerts: its `nodeLabel` equal to its name, and every extra matcher
//!   ([`matchers`]).
//! * Ours are the silences made by [`CREATED_BY`] whose comment names the
//!   pool and the node ([`comment`], [`read_comment`]): nothing else in
//!   Alertmanager is touched, and no Kubernetes object records them.
//! * Every silence ends by itself [`LENGTH`] after it is made or renewed;
//!   one with less than [`RENEW_BEFORE`] left is renewed while its node
//!   holds its slot, so a controller that stops leaves none for longer than
//!   [`LENGTH`].
//! * The silence of a node that holds no slot, one whose matchers are no
//!   longer the pool's, and all but the longest-lasting of several for one
//!   node are expired.
//! * The steps come in the order that matters most first: the silences
//!   made, then renewed, then expired.

use std::collections::{BTreeMap, BTreeSet};

use api::Silences;
use jiff::{SignedDuration, Timestamp};

/// The `createdBy` of the operator's silences.
pub const CREATED_BY: &str = "bootc-operator";

/// How long a silence lasts after it is made or renewed.
pub const LENGTH: SignedDuration = SignedDuration::from_secs(60 * 60);

/// A silence with less than this left is renewed.
pub const RENEW_BEFORE: SignedDuration = SignedDuration::from_secs(30 * 60);

/// The field the rules read, as errors name it.
pub const FIELD: &str = "spec.rollout.silences";

/// One matcher of a silence, as Alertmanager's API has it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Matcher {
    pub name: String,
    pub value: String,
    pub is_regex: bool,
    pub is_equal: bool,
}

/// A silence of ours for a node of the pool, still in force, as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Silence {
    pub id: String,
    pub node: String,
    pub matchers: Vec<Matcher>,
    pub ends_at: Timestamp,
}

/// What to do at Alertmanager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Make a silence for the node, in force from now to `ends_at`.
    Create {
        node: String,
        matchers: Vec<Matcher>,
        ends_at: Timestamp,
    },
    /// Make silence `id` last until `ends_at`.
    Renew {
        id: String,
        node: String,
        matchers: Vec<Matcher>,
        ends_at: Timestamp,
    },
    /// Expire silence `id`.
    Expire { id: String, node: String },
}

/// The matchers of `node`'s silence: its `nodeLabel` equal to its name,
/// and each of `spec.matchers` (in the alert gate's form, a value taken as
/// written but for `\"` and `\\`), in a fixed order.
pub fn matchers(spec: &Silences, node: &str) -> Result<Vec<Matcher>, String> {
    let label = spec.node_label();
    if !api::schema::is_label_name(label) {
        return Err(format!(
            "{FIELD}.nodeLabel {:?} is not a label name",
            api::text::escape_controls(label)
        ));
    }
    let mut all = vec![Matcher {
        name: label.to_owned(),
        value: node.to_owned(),
        is_regex: false,
        is_equal: true,
    }];
    for (i, written) in spec.matchers.iter().enumerate() {
        let matcher = parse(written).ok_or_else(|| {
            format!(
                "{FIELD}.matchers[{i}] {:?} is not one label matcher",
                api::text::escape_controls(written)
            )
        })?;
        all.push(matcher);
    }
    all.sort();
    all.dedup();
    Ok(all)
}

/// One label matcher in the alert gate's form (`api::schema::is_alert_matcher`).
fn parse(written: &str) -> Option<Matcher> {
    if !api::schema::is_alert_matcher(written) {
        return None;
    }
    let at = written.find(['=', '!'])?;
    let (name, rest) = written.split_at(at);
    let (op, quoted) = ["=~", "!~", "!=", "="]
        .iter()
        .find_map(|op| rest.strip_prefix(op).map(|q| (*op, q)))?;
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut value = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next @ ('"' | '\\'))) => {
                value.push(next);
                chars.next();
            }
            _ => value.push(c),
        }
    }
    Some(Matcher {
        name: name.to_owned(),
        value,
        is_regex: op.ends_with('~'),
        is_equal: !op.starts_with('!'),
    })
}

/// The comment of `node`'s silence for `pool`: what a person reads in
/// Alertmanager, and how the operator knows its own.
pub fn comment(pool: &str, node: &str) -> String {
    format!("{node} holds a reboot slot of pool {pool}; {CREATED_BY} expires this when it leaves")
}

/// The node a comment of [`comment`] names for `pool`, if it is one.
pub fn read_comment<'a>(comment: &'a str, pool: &str) -> Option<&'a str> {
    let suffix =
        format!(" holds a reboot slot of pool {pool}; {CREATED_BY} expires this when it leaves");
    comment
        .strip_suffix(&suffix)
        .filter(|node| !node.is_empty() && !node.contains(char::is_whitespace))
}

/// What to do at Alertmanager so that each of `holders` has one silence of
/// ours in force for at least [`RENEW_BEFORE`] more, and no other node has
/// one; `ours` are the pool's silences found (ended ones are ignored).
pub fn steps(
    spec: &Silences,
    holders: &BTreeSet<String>,
    ours: &[Silence],
    now: Timestamp,
) -> Result<Vec<Step>, String> {
    let mut expire = Vec::new();
    let mut kept: BTreeMap<&str, &Silence> = BTreeMap::new();
    for silence in ours.iter().filter(|s| s.ends_at > now) {
        let mut found = silence.matchers.clone();
        found.sort();
        let wanted = holders.contains(&silence.node) && found == matchers(spec, &silence.node)?;
        let other = match kept.get(silence.node.as_str()) {
            Some(k) if wanted && k.ends_at < silence.ends_at => {
                kept.insert(silence.node.as_str(), silence)
            }
            Some(_) => Some(silence),
            None if wanted => kept.insert(silence.node.as_str(), silence),
            None => Some(silence),
        };
        if let Some(s) = other {
            expire.push(Step::Expire {
                id: s.id.clone(),
                node: s.node.clone(),
            });
        }
    }
    let ends_at = now + LENGTH;
    let mut create = Vec::new();
    let mut renew = Vec::new();
    for node in holders {
        match kept.get(node.as_str()) {
            None => create.push(Step::Create {
                node: node.clone(),
                matchers: matchers(spec, node)?,
                ends_at,
            }),
            Some(s) if s.ends_at.duration_since(now) < RENEW_BEFORE => renew.push(Step::Renew {
                id: s.id.clone(),
                node: node.clone(),
                matchers: matchers(spec, node)?,
                ends_at,
            }),
            Some(_) => {}
        }
    }
    create.extend(renew);
    create.extend(expire);
    Ok(create)
}

/// How long until one of `ours` is due for renewal (zero if one is now);
/// None without any in force.
pub fn renewal_due(ours: &[Silence], now: Timestamp) -> Option<std::time::Duration> {
    ours.iter()
        .filter(|s| s.ends_at > now)
        .map(|s| (s.ends_at - RENEW_BEFORE).duration_since(now))
        .min()
        .map(|d| {
            if d.is_negative() {
                std::time::Duration::ZERO
            } else {
                d.unsigned_abs()
            }
        })
}
