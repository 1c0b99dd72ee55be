//! `spec.rollout.silences` (`crate::reboot::silences`): which silences to
//! make, renew and expire. The gate a silence that could not be made puts
//! on the next slot is a row of `gates.rs`.

use std::collections::BTreeSet;

use api::Silences;
use jiff::{SignedDuration, Timestamp};

use crate::reboot::silences::{
    LENGTH, Matcher, RENEW_BEFORE, Silence, Step, comment, matchers, read_comment, renewal_due,
    steps,
};

fn spec(label: Option<&str>, extra: &[&str]) -> Silences {
    Silences {
        endpoint: "main".into(),
        node_label: label.map(str::to_owned),
        matchers: extra.iter().map(|m| (*m).to_owned()).collect(),
    }
}

fn eq(name: &str, value: &str) -> Matcher {
    Matcher {
        name: name.into(),
        value: value.into(),
        is_regex: false,
        is_equal: true,
    }
}

fn now() -> Timestamp {
    Timestamp::UNIX_EPOCH + SignedDuration::from_secs(1_000_000)
}

/// A silence of ours for `node` with the default matchers, `left` to run.
fn ours(id: &str, node: &str, left: SignedDuration) -> Silence {
    Silence {
        id: id.into(),
        node: node.into(),
        matchers: vec![eq("node", node)],
        ends_at: now() + left,
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn create(node: &str) -> Step {
    Step::Create {
        node: node.into(),
        matchers: vec![eq("node", node)],
        ends_at: now() + LENGTH,
    }
}

fn renew(id: &str, node: &str) -> Step {
    Step::Renew {
        id: id.into(),
        node: node.into(),
        matchers: vec![eq("node", node)],
        ends_at: now() + LENGTH,
    }
}

fn expire(id: &str, node: &str) -> Step {
    Step::Expire {
        id: id.into(),
        node: node.into(),
    }
}

/// (what, holders, ours found, the steps)
type Row = (&'static str, Vec<&'static str>, Vec<Silence>, Vec<Step>);

#[test]
fn each_holder_has_one_silence_in_force_and_no_other_node_has_one() {
    let long = LENGTH - SignedDuration::from_secs(60);
    let short = RENEW_BEFORE - SignedDuration::from_secs(1);
    let other = Silence {
        matchers: vec![eq("instance", "a")],
        ..ours("s9", "a", long)
    };
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        ("nothing held, nothing found: nothing to do", vec![], vec![], vec![]),
        ("a node takes a slot: its silence is made", vec!["a"], vec![], vec![create("a")]),
        ("its silence in force: nothing to do", vec!["a"], vec![ours("s1", "a", long)], vec![]),
        ("less than RENEW_BEFORE left: renewed", vec!["a"], vec![ours("s1", "a", short)], vec![renew("s1", "a")]),
        ("ended already: a new one (the ended one is Alertmanager's)", vec!["a"],
            vec![ours("s1", "a", SignedDuration::ZERO)], vec![create("a")]),
        ("the node left its slot: expired", vec![], vec![ours("s1", "a", long)], vec![expire("s1", "a")]),
        ("made first, expired last", vec!["b"], vec![ours("s1", "a", long)], vec![create("b"), expire("s1", "a")]),
        ("several for one node: the longest kept", vec!["a"],
            vec![ours("s1", "a", short), ours("s2", "a", long)], vec![expire("s1", "a")]),
        ("matchers no longer the pool's: replaced", vec!["a"], vec![other], vec![create("a"), expire("s9", "a")]),
    ];
    for (what, holders, found, want) in rows {
        let got = steps(&spec(None, &[]), &set(&holders), &found, now()).unwrap();
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn a_silence_matches_the_nodes_label_and_every_extra_matcher() {
    let got = matchers(
        &spec(
            Some("instance"),
            &[
                r#"severity!="critical""#,
                r#"alertname=~"Kube.*""#,
                r#"team="a\"b\\c""#,
            ],
        ),
        "n1",
    )
    .unwrap();
    let want = vec![
        Matcher {
            name: "alertname".into(),
            value: "Kube.*".into(),
            is_regex: true,
            is_equal: true,
        },
        eq("instance", "n1"),
        Matcher {
            name: "severity".into(),
            value: "critical".into(),
            is_regex: false,
            is_equal: false,
        },
        eq("team", r#"a"b\c"#),
    ];
    assert_eq!(got, want);
    // What the schema refuses, the rule refuses again, naming the field.
    let err = matchers(&spec(Some("node-name"), &[]), "n1").unwrap_err();
    assert!(err.contains("spec.rollout.silences.nodeLabel"), "{err}");
    let err = matchers(&spec(None, &["severity"]), "n1").unwrap_err();
    assert!(err.contains("spec.rollout.silences.matchers[0]"), "{err}");
}

#[test]
fn ours_are_known_by_their_comment_for_the_pool() {
    let written = comment("workers", "node-1.example");
    assert_eq!(read_comment(&written, "workers"), Some("node-1.example"));
    assert_eq!(read_comment(&written, "infra"), None);
    assert_eq!(read_comment(&written, "kers"), None);
    assert_eq!(read_comment("maintenance of node-1", "workers"), None);
}

#[test]
fn the_next_renewal_is_due_when_the_first_silence_has_renew_before_left() {
    let left = RENEW_BEFORE + SignedDuration::from_secs(90);
    let found = [
        ours("s1", "a", left),
        ours("s2", "b", LENGTH),
        ours("s3", "c", SignedDuration::ZERO),
    ];
    assert_eq!(
        renewal_due(&found, now()),
        Some(std::time::Duration::from_secs(90))
    );
    let late = [ours("s1", "a", SignedDuration::from_secs(5))];
    assert_eq!(renewal_due(&late, now()), Some(std::time::Duration::ZERO));
    assert_eq!(renewal_due(&[], now()), None);
}
