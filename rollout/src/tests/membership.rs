//! Membership and conflicts.

use super::*;

#[test]
fn a_new_member_gets_a_bootc_node_then_its_label() {
    let mut n = node("w1", "a", true, false);
    n.labels_mut().remove(MANAGED_LABEL);
    let w = World::new(pool("a", IntOrString::Int(1), false)).node(n);
    let p = w.plan();
    let apply = applied(&p, "w1").expect("BootcNode created");
    assert_eq!(apply.spec.desired_image, image(NEW));
    assert_eq!(apply.spec.desired_image_state, DesiredImageState::Staged);
    assert_eq!(apply.owner.name, "a");
    assert_eq!(apply.owner.uid, "uid-a");
    assert!(apply.annotations.is_empty(), "{apply:?}");
    let apply_at = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::ApplyBootcNode(_)));
    let label_at = p
        .writes
        .iter()
        .position(|w| matches!(w, Write::PatchNode { patch, .. } if patch.managed == Some(true)));
    assert!(apply_at < label_at && label_at.is_some(), "{:?}", p.writes);
    let s = p.status.unwrap();
    assert_eq!(s.node_count, 1);
    assert_eq!(s.target_digest.as_deref(), Some(NEW));
    assert_eq!(s.target_image, Some(image(NEW)));
    assert_eq!(s.observed_generation, Some(3));
}

#[test]
fn conflicts_skip_the_node_and_name_the_other_pool() {
    let mut a = pool("a", IntOrString::Int(1), false);
    a.spec.node_selector =
        serde_json::from_value(json!({"matchLabels": {"role": "worker"}})).unwrap();
    let mut b = pool("b", IntOrString::Int(1), false);
    b.spec.node_selector = serde_json::from_value(json!({"matchLabels": {"zone": "z1"}})).unwrap();
    let mut shared = node("shared", "x", true, false);
    shared.labels_mut().insert("role".into(), "worker".into());
    shared.labels_mut().insert("zone".into(), "z1".into());
    shared.labels_mut().remove(MANAGED_LABEL);
    let mut own = node("own", "x", true, false);
    own.labels_mut().insert("role".into(), "worker".into());
    own.labels_mut().remove(MANAGED_LABEL);
    let mut w = World::new(a).node(shared.clone()).node(own);
    w.others = vec![b.clone()];
    let p = w.plan();
    assert!(applied(&p, "shared").is_none());
    assert!(applied(&p, "own").is_some(), "uncontested nodes go on");
    assert_eq!(degraded_reason(&p), Reason::NodeConflict);
    assert!(degraded_message(&p).contains("node shared"));
    assert!(degraded_message(&p).contains("pool(s) b"));

    // The other side sees the same conflict naming "a".
    let mut a2 = pool("a", IntOrString::Int(1), false);
    a2.spec.node_selector =
        serde_json::from_value(json!({"matchLabels": {"role": "worker"}})).unwrap();
    let mut w = World::new(b).node(shared);
    w.others = vec![a2];
    let p = w.plan();
    assert!(p.writes.is_empty());
    assert!(degraded_message(&p).contains("pool(s) a"));

    // A BootcNode owned by another pool: a conflict naming the owner.
    let w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)).owned_by("z"));
    let p = w.plan();
    assert!(p.writes.is_empty(), "{:?}", p.writes);
    assert!(degraded_message(&p).contains("pool(s) z"));
}

#[test]
fn an_unparsable_selector_changes_no_membership() {
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("w1", "a", true, false))
        .node(node("new", "a", true, false))
        .bn(bn("w1", NEW, Daemon::Idle(NEW)));
    w.pool.spec.node_selector = serde_json::from_value(json!({"matchExpressions": [
        {"key": "pool", "operator": "Sometimes", "values": ["a"]}]}))
    .unwrap();
    let p = w.plan();
    assert!(p.writes.is_empty(), "{:?}", p.writes);
    assert_eq!(degraded_reason(&p), Reason::InvalidSpec);
    let message = degraded_message(&p);
    assert!(
        message.contains("spec.nodeSelector.matchExpressions[0]") && message.contains("Sometimes"),
        "{message}"
    );
    assert_eq!(p.status.unwrap().node_count, 1);
}

#[test]
fn spec_errors_name_the_field_and_the_value() {
    let req = |key: &str, operator: &str, values: Option<Vec<&str>>| {
        serde_json::from_value::<LabelSelector>(json!({"matchExpressions": [
            {"key": "ok", "operator": "Exists"},
            {"key": key, "operator": operator, "values": values},
        ]}))
        .unwrap()
    };
    let e = parse_selector(&req("zone", "Near", Some(vec!["a"]))).unwrap_err();
    assert!(
        e.starts_with("spec.nodeSelector.matchExpressions[1]")
            && e.contains("\"Near\"")
            && e.contains("\"zone\""),
        "{e}"
    );
    let e = parse_selector(&req("zone", "In", None)).unwrap_err();
    assert!(
        e.contains("matchExpressions[1]") && e.contains("\"In\""),
        "{e}"
    );
    assert!(parse_selector(&req("zone", "NotIn", Some(vec!["a"]))).is_ok());

    let e = max_unavailable(&IntOrString::Int(-1), 3).unwrap_err();
    assert!(
        e.starts_with("spec.rollout.maxUnavailable") && e.contains("-1"),
        "{e}"
    );
    let e = max_unavailable(&IntOrString::String("lots".into()), 3).unwrap_err();
    assert!(
        e.starts_with("spec.rollout.maxUnavailable") && e.contains("\"lots\""),
        "{e}"
    );
}

/// Who is a member, who is in conflict, from the node's labels, its
/// BootcNode's owner and the other pool's selector.
#[test]
fn membership_table() {
    // (what, node's pool label, BootcNode owner, pool b exists, member,
    //  conflicting pools)
    type Row = (
        &'static str,
        &'static str,
        Option<&'static str>,
        bool,
        bool,
        &'static [&'static str],
    );
    #[rustfmt::skip]
    let rows: &[Row] = &[
        ("selected, new", "a", None, false, true, &[]),
        ("selected, ours", "a", Some("a"), false, true, &[]),
        ("not selected", "b", None, false, false, &[]),
        ("another pool's BootcNode", "a", Some("b"), false, false, &["b"]),
        ("ours, also selected by b: stays, named", "a", Some("a"), true, true, &["b"]),
        ("new, also selected by b", "a", None, true, false, &["b"]),
    ];
    for (what, label, owner, b_exists, member, conflicts) in rows {
        let mut n = node("w1", label, true, false);
        if *b_exists {
            n.labels_mut().insert("pool-b".into(), String::new());
        }
        let mut w = World::new(pool("a", IntOrString::Int(1), false)).node(n);
        if let Some(owner) = owner {
            w = w.bn(bn("w1", NEW, Daemon::Idle(OLD)).owned_by(owner));
        }
        if *b_exists {
            let mut b = pool("b", IntOrString::Int(1), false);
            b.spec.node_selector =
                serde_json::from_value(json!({"matchLabels": {"pool-b": ""}})).unwrap();
            w.others = vec![b];
        }
        let input = w.input(&w.nodes);
        let view = crate::view::View::of(&input);
        let got = crate::members::membership::of(
            &view,
            &mut crate::memo::Answers::default(),
            &mut Vec::new(),
        );
        assert_eq!(got.contains("w1"), *member, "{what}");
        let named: Vec<&str> = got
            .conflicts
            .get("w1")
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        assert_eq!(named, *conflicts, "{what}");
        // One node read on its own (`kubectl bootc why`): the same answer.
        let others: Vec<&BootcNodePool> = w.others.iter().collect();
        let alone =
            crate::members::membership::conflict(&w.pool, &w.nodes[0], w.bns.first(), &others);
        let alone: Vec<&str> = alone.iter().flatten().map(String::as_str).collect();
        assert_eq!(alone, *conflicts, "{what}: read alone");
    }
}

/// A node two pools select, one of them being deleted: no conflict on
/// either side (the deleted pool is cleaned up, not planned).
#[test]
fn a_pool_being_deleted_claims_nothing() {
    let mut n = node("w1", "a", true, false);
    n.labels_mut().insert("pool-b".into(), String::new());
    let a = pool("a", IntOrString::Int(1), false);
    let mut b = pool("b", IntOrString::Int(1), false);
    b.spec.node_selector = serde_json::from_value(json!({"matchLabels": {"pool-b": ""}})).unwrap();
    let member = bn("w1", NEW, Daemon::Idle(OLD)).owned_by("a").build();
    let conflict = |p: &BootcNodePool, other: &BootcNodePool| {
        crate::members::membership::conflict(p, &n, Some(&member), &[other])
    };
    assert!(conflict(&a, &b).is_some() && conflict(&b, &a).is_some());
    let mut deleting = b.clone();
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert_eq!(conflict(&a, &deleting), None);
    assert_eq!(conflict(&deleting, &a), None);
}
