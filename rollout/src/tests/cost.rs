//! What one plan of a large pool costs, from scratch and with a warm memo
//! after one node changed; and that the warm plan recomputes only that
//! node. The test runs at 300 nodes; for the cost of a large pool run it in
//! release with a size
//! (`PLAN_COST_NODES=5000 cargo test --release -p rollout --lib plan_cost -- --nocapture`).

use std::time::Instant;

use super::*;

/// A pool mid-rollout: 40% done, 10% holding slots, the rest staged; or,
/// `starting`, every node idle on the old image, none told the new one.
fn pool_of(n: usize, starting: bool) -> (World, Vec<Node>) {
    let mut world = World::new(pool("a", IntOrString::String("10%".into()), false));
    let mut nodes = Vec::with_capacity(n);
    for i in 0..n {
        // Zero-padded: the input comes in name order, as the runtime gives it.
        let name: &'static str = Box::leak(format!("sim-node-{:06}", i + 1).into_boxed_str());
        let rebooting = !starting && (4 * n / 10..5 * n / 10).contains(&i);
        let mut node = if rebooting {
            rebooting_node(name, "a")
        } else {
            node(name, "a", true, false)
        };
        node.metadata.resource_version = Some((2 * i + 1).to_string());
        nodes.push(node);
        let b = if starting {
            bn(name, OLD, Daemon::Idle(OLD))
        } else if i < 4 * n / 10 {
            bn(name, NEW, Daemon::Idle(NEW))
        } else if rebooting {
            bn(name, NEW, Daemon::Rebooting(OLD)).approved().slot(false)
        } else {
            bn(name, NEW, Daemon::Staged(OLD))
        };
        let mut b = b.build();
        b.metadata.resource_version = Some((2 * i + 2).to_string());
        world.bns.push(b);
    }
    (world, nodes)
}

/// The pool's size: `PLAN_COST_NODES`, else 300.
fn size() -> usize {
    std::env::var("PLAN_COST_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

#[test]
fn plan_cost_follows_what_changed() {
    let n = size();
    for (what, starting) in [("mid-rollout", false), ("starting", true)] {
        let (mut world, nodes) = pool_of(n, starting);
        let started = Instant::now();
        let reference = plan(&world.input(&nodes));
        println!("{n} nodes, {what}: from scratch {:?}", started.elapsed());
        assert!(!reference.writes.is_empty() || reference.status.is_some());
        let mut memo = Memo::default();
        let warm = plan_incremental(&world.input(&nodes), &mut memo);
        memo.recycle(warm.summary);
        let rounds = 50;
        let started = Instant::now();
        for round in 0..rounds {
            let b = &mut world.bns[round * 7 % n];
            b.metadata.resource_version = Some((10 * n + round).to_string());
            // As the runtime does: the summary is handed back once read.
            let plan = plan_incremental(&world.input(&nodes), &mut memo);
            memo.recycle(plan.summary);
        }
        let (reused, computed) = memo.reused_and_computed();
        println!(
            "{n} nodes, {what}: warm, one node changed: {:?} per plan ({reused} reused, {computed} computed)",
            started.elapsed() / rounds as u32,
        );
        // The changed node's membership and verdict; every other answer kept.
        assert_eq!((computed, reused), (2, 2 * n - 2), "{what}");
    }
}

/// A look at 20 slot holders of a large pool mid-rollout (`releases`),
/// the pool's status as its plan reports it: what the runtime pays four
/// times a second while a large pool rolls out.
#[test]
fn a_look_costs_its_holders_not_the_pool() {
    let n = size();
    let (mut world, nodes) = pool_of(n, false);
    world.pool.status = plan(&world.input(&nodes)).status;
    let input = world.input(&nodes);
    let holders = |name: &str| {
        let i: usize = name.trim_start_matches("sim-node-").parse().unwrap_or(0);
        (4 * n / 10 + 1..=4 * n / 10 + 20).contains(&i)
    };
    let mut some = input.clone();
    some.nodes.retain(|node| holders(&node.name_any()));
    some.bootc_nodes.retain(|b| holders(&b.name_any()));
    assert_eq!(some.nodes.len(), 20);
    let rounds = 50;
    let started = Instant::now();
    for _ in 0..rounds {
        releases(&some);
    }
    println!(
        "{n} nodes, a look at 20 holders: {:?}",
        started.elapsed() / rounds
    );
}

/// The memo keeps a verdict for every member, each in an `Arc`: with the
/// `Arc`'s two counts it fits 512 bytes, the allocator's class below 640
/// (2.5 MiB less at 20,000 members). The texts few members carry are out
/// of line (`facts::Waits`) for this.
#[test]
fn a_kept_verdict_fits_512_bytes() {
    let kept = std::mem::size_of::<crate::facts::NodeVerdict>() + 2 * std::mem::size_of::<usize>();
    assert!(kept <= 512, "a kept verdict takes {kept} bytes");
}

/// A plan's BootcNode applies are the ones the memo keeps with the
/// verdicts, shared rather than copied, and every apply names the pool's
/// one owner reference: a new pool of 20,000 nodes holds one copy of the
/// 20,000 BootcNodes it creates, not two, while they are written.
#[test]
fn a_plans_applies_are_shared_with_the_memo() {
    let (mut world, nodes) = pool_of(10, true);
    world.bns.clear();
    let mut memo = Memo::default();
    let plan = plan_incremental(&world.input(&nodes), &mut memo);
    let applies: Vec<_> = plan
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::ApplyBootcNode(apply) => Some(apply),
            _ => None,
        })
        .collect();
    assert_eq!(applies.len(), 10, "every node's BootcNode is created");
    for apply in &applies {
        // The plan's and the kept verdict's.
        assert_eq!(std::sync::Arc::strong_count(apply), 2, "{}", apply.name);
        assert!(std::sync::Arc::ptr_eq(&apply.owner, &applies[0].owner));
    }
}
