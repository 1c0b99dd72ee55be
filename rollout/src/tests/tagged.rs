//! Hosts as `bootc install` leaves them: installed from a tag, bootc
//! reports the tag as its image and the manifest it deployed as its digest.
//! Whatever it reports, the images the plan writes are
//! `repository@sha256:…` ([`api::BootEntryStatus::pinned_image`]).

use api::image_ref::ImageRef;

use crate::preview::{self, Start};

use super::*;

/// The tag the hosts were installed from.
const TAG: &str = "quay.io/acme/os:prod";
/// A target told before and withdrawn.
const MID: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

/// `b` as a host installed from [`TAG`] reports it, its bootc unable to
/// stage locked (released bootc: no `switch --download-only`).
fn tag_installed(b: Bn) -> BootcNode {
    let mut b = b.build();
    if let Some(s) = b.status.as_mut() {
        s.download_only_supported = Some(false);
        if let Some(booted) = s.booted.as_mut() {
            booted.image = Some(TAG.into());
        }
    }
    b
}

/// The desired images of `plan`'s BootcNode writes the schema refuses
/// (anything but `repository@sha256:…`), by node.
fn refused(plan: &Plan) -> Vec<(String, String)> {
    plan.writes
        .iter()
        .filter_map(|w| match w {
            Write::ApplyBootcNode(b) => Some((b.name.clone(), b.spec.desired_image.to_string())),
            _ => None,
        })
        .filter(|(_, image)| ImageRef::parse_pinned(image).is_err())
        .collect()
}

#[test]
fn a_second_rollout_on_tag_installed_unlocked_hosts_writes_digests_and_completes() {
    // The first rollout left n1 and n2 told OLD, which they run; n3 was
    // told MID, withdrawn before it staged. One slot: n1 is told NEW, the
    // others wait on what they run.
    let p = pool("a", IntOrString::Int(1), false);
    let nodes: Vec<Node> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| node(n, "a", true, false))
        .collect();
    let mut start = Start {
        pool: p,
        nodes,
        bootc_nodes: vec![
            tag_installed(bn("n1", OLD, Daemon::Idle(OLD))),
            tag_installed(bn("n2", OLD, Daemon::Idle(OLD))),
            tag_installed(bn("n3", MID, Daemon::Idle(OLD))),
        ],
        other_pools: vec![],
        pull_secret: None,
        gates: crate::holds::gates::Gates::default(),
        operator_namespace: api::labels::OPERATOR_NAMESPACE.into(),
        now: now(),
    };
    let first = plan(&preview::input(&start, &target(NEW), &BTreeMap::new()));
    assert_eq!(refused(&first), [], "{:?}", first.writes);
    assert_eq!(
        applied(&first, "n1").map(|b| b.spec.desired_image.as_str()),
        Some(image(NEW).as_str())
    );
    assert!(applied(&first, "n2").is_none(), "n2 runs what it is told");
    assert_eq!(
        applied(&first, "n3").map(|b| b.spec.desired_image.as_str()),
        Some(image(OLD).as_str()),
        "n3 is kept on what it runs, pinned"
    );
    // Every write lands as the API server takes it (a refused one stops
    // the actuator): the rollout completes, one node after the other.
    let mut drains = BTreeMap::new();
    let mut waves = Vec::new();
    for _ in 0..40 {
        let p = plan(&preview::input(&start, &target(NEW), &drains));
        assert_eq!(refused(&p), [], "{:?}", p.writes);
        waves.extend(slotted(&p));
        if let Some(status) = p.status.clone() {
            start.pool.status = Some(status);
        }
        for write in p.writes.iter() {
            preview::land(write, "a", &mut start, &mut drains);
        }
        preview::play_daemons(&mut start.bootc_nodes, start.now);
    }
    assert_eq!(waves, ["n1", "n2", "n3"]);
    assert!(
        start.bootc_nodes.iter().all(|b| b.runs(&image(NEW))),
        "{:?}",
        start.bootc_nodes
    );
}

/// The index the pool's tag resolves to, and its platform manifests.
const INDEX: &str = "sha256:4444444444444444444444444444444444444444444444444444444444444444";
const AMD64: &str = "sha256:5555555555555555555555555555555555555555555555555555555555555555";
const ARM64: &str = "sha256:6666666666666666666666666666666666666666666666666666666666666666";

#[test]
fn a_tag_installed_host_on_a_platform_of_the_target_index_is_up_to_date_and_stages_nothing() {
    let index = Target {
        platform_digests: vec![AMD64.to_owned(), ARM64.to_owned()],
        kubelet: None,
        ..target(INDEX)
    };
    // "new" was just created told the index; "kept" was kept on OLD by a
    // rollout before; "arm" was told the index and booted it; "single"
    // runs a single-manifest target by its tag (below).
    let mut w = World::new(pool("a", IntOrString::Int(1), false));
    for n in ["new", "kept", "arm"] {
        w = w.node(node(n, "a", true, false));
    }
    w.bns
        .push(tag_installed(bn("new", INDEX, Daemon::Idle(AMD64))));
    w.bns
        .push(tag_installed(bn("kept", OLD, Daemon::Idle(AMD64))));
    let mut arm = bn("arm", INDEX, Daemon::Idle(ARM64)).build();
    arm.status.as_mut().unwrap().booted.as_mut().unwrap().image = Some(image(INDEX).into());
    w.bns.push(arm);
    w.target = Ok(index.clone());
    for b in &w.bns {
        assert_eq!(classify(b, &index), NodeState::UpToDate, "{}", b.name_any());
    }
    let p = w.plan();
    // Each is kept on what it runs, its platform's manifest: its daemon
    // has nothing to stage. "arm" already says the index it booted.
    assert_eq!(
        applied(&p, "new").map(|b| b.spec.desired_image.clone()),
        Some(image(AMD64).into())
    );
    assert_eq!(
        applied(&p, "kept").map(|b| b.spec.desired_image.clone()),
        Some(image(AMD64).into())
    );
    assert!(applied(&p, "arm").is_none(), "{:?}", p.writes);
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    let (status, reason, _) = up_to_date(&p);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", Reason::AllUpdated.as_str())
    );
    let recorded = p.status.as_ref().unwrap();
    assert_eq!(recorded.target_platform_digests, index.platform_digests);
    // Written as planned, the next plan writes nothing.
    for b in w.bns.iter_mut() {
        if let Some(a) = applied(&p, &b.name_any()) {
            b.spec = a.spec.clone();
        }
    }
    let p = w.plan();
    assert!(p.writes.is_empty(), "{:?}", p.writes);

    // Single-arch: a host on the target by its tag runs it, told it or
    // not, and nothing makes it stage.
    let mut w = World::new(pool("a", IntOrString::Int(1), false))
        .node(node("told", "a", true, false))
        .node(node("kept", "a", true, false));
    w.bns
        .push(tag_installed(bn("told", NEW, Daemon::Idle(NEW))));
    w.bns
        .push(tag_installed(bn("kept", OLD, Daemon::Idle(NEW))));
    let p = w.plan();
    assert!(applied(&p, "told").is_none(), "{:?}", p.writes);
    assert_eq!(
        applied(&p, "kept").map(|b| b.spec.desired_image.clone()),
        Some(image(NEW).into())
    );
    assert!(slotted(&p).is_empty(), "{:?}", p.writes);
    assert_eq!(up_to_date(&p).1, Reason::AllUpdated.as_str());
}
