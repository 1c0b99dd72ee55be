//! The rollout ahead ([`crate::preview`]): the plan itself, run on a copy
//! where everything lands at once, wave after wave.

use crate::preview::{Preview, Start, preview};

use super::*;

/// Three members on OLD, not yet told NEW, with `max` slots.
fn start(max: i32, f: impl FnOnce(&mut BootcNodePool, &mut Vec<Node>)) -> Start {
    let mut p = pool("a", IntOrString::Int(max), false);
    let mut nodes: Vec<Node> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| node(n, "a", true, false))
        .collect();
    f(&mut p, &mut nodes);
    let w = ["n1", "n2", "n3"]
        .iter()
        .fold(World::new(p.clone()), |w, n| {
            w.bn(bn(n, OLD, Daemon::Idle(OLD)))
        });
    Start {
        pool: p,
        nodes,
        bootc_nodes: w.bns,
        other_pools: vec![],
        pull_secret: None,
        gates: crate::holds::gates::Gates::default(),
        operator_namespace: api::labels::OPERATOR_NAMESPACE.into(),
        now: now(),
    }
}

fn waves(p: &Preview) -> Vec<Vec<&str>> {
    p.waves
        .iter()
        .map(|w| w.iter().map(String::as_str).collect())
        .collect()
}

#[test]
fn wave_after_wave_and_what_holds_the_rest() {
    let plain = |_: &mut BootcNodePool, _: &mut Vec<Node>| {};
    let p = preview(start(1, plain), &target(NEW));
    assert_eq!(waves(&p), [vec!["n1"], vec!["n2"], vec!["n3"]]);
    assert_eq!(p.held, None);

    let p = preview(start(2, plain), &target(NEW));
    assert_eq!(waves(&p), [vec!["n1", "n2"], vec!["n3"]]);

    // A canary step soaks on the preview's clock.
    let canary = |p: &mut BootcNodePool, _: &mut Vec<Node>| {
        p.spec.rollout.batches = vec![IntOrString::Int(1)];
        p.spec.rollout.soak_seconds = 600;
    };
    let p = preview(start(2, canary), &target(NEW));
    assert_eq!(waves(&p), [vec!["n1"], vec!["n2", "n3"]]);

    // A hold is outside the pool's objects: the rest waits, and says why.
    let held = |_: &mut BootcNodePool, nodes: &mut Vec<Node>| {
        nodes[1].annotations_mut().insert(
            format!("{}alice", api::labels::HOLD_ANNOTATION_PREFIX),
            "debugging".into(),
        );
    };
    let p = preview(start(1, held), &target(NEW));
    assert_eq!(waves(&p), [vec!["n1"], vec!["n3"]]);
    let (reason, message) = p.held.expect("n2 is held");
    assert_eq!(reason, Reason::RolloutInProgress);
    assert!(
        message.starts_with("2/3 updated") && message.contains("n2"),
        "{message}"
    );
}
