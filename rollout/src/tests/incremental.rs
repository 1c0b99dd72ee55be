//! Incremental planning against the reference: random event sequences (the
//! daemons' reports, readiness, an admin's cordons and labels, drains, time,
//! the target, a pause, and the plan's own writes landing) fed to a pool;
//! after every event [`plan_incremental`] with the memo it keeps (and, most
//! times, the last plan's summary handed back: [`Memo::recycle`]) must give
//! exactly the plan [`plan`] makes from scratch; and a look at some of the
//! members ([`releases`]) must free exactly the slots the whole pool's plan
//! frees first among them.

use api::labels::{CORDONED_BY_ANNOTATION, DISRUPTED_BY_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;

use crate::test_rng::Rng;

const NAMES: [&str; 6] = ["n1", "n2", "n3", "n4", "n5", "n6"];

/// The cluster the plans read, with an API server's resource versions.
struct Cluster {
    world: World,
    nodes: Vec<Node>,
    now: Timestamp,
    version: u64,
}

impl Cluster {
    fn new(rng: &mut Rng) -> Self {
        let mut world = World::new(pool("a", IntOrString::Int(2), false));
        world.others.push(pool("b", IntOrString::Int(1), false));
        world.target = Ok(target(OLD));
        // Staging limits make who is told the target move between plans.
        let rollout = &mut world.pool.spec.rollout;
        rollout.max_concurrent_staging = [None, Some(1), Some(2)][rng.below(3) as usize];
        rollout.stage_ahead = [None, Some(0), Some(1)][rng.below(3) as usize];
        world.node_lifecycle_conditions = rng.below(2) == 0;
        let nodes = NAMES.iter().map(|n| node(n, "a", true, false)).collect();
        let mut c = Cluster {
            world,
            nodes,
            now: now(),
            version: 1,
        };
        for i in 0..NAMES.len() {
            c.touch_node(i);
        }
        c
    }

    fn bump(&mut self) -> Option<String> {
        self.version += 1;
        Some(self.version.to_string())
    }

    fn touch_node(&mut self, i: usize) {
        self.nodes[i].metadata.resource_version = self.bump();
    }

    fn bn_index(&self, name: &str) -> Option<usize> {
        self.world.bns.iter().position(|b| b.name_any() == name)
    }

    fn input(&self) -> PlanInput<'_> {
        let mut input = self.world.input(&self.nodes);
        input.now = self.now;
        input
    }

    /// One random event.
    fn event(&mut self, rng: &mut Rng) {
        let i = rng.below(NAMES.len() as u64) as usize;
        let name = NAMES[i];
        match rng.below(10) {
            0 => self.set_ready(i, rng.below(3) > 0),
            1 => {
                let spec = self.nodes[i].spec.get_or_insert_default();
                spec.unschedulable = Some(rng.below(2) == 0);
                self.touch_node(i);
            }
            2 => {
                let pool_label = *rng.pick(&["a", "a", "a", "b"]);
                self.nodes[i]
                    .labels_mut()
                    .insert("pool".into(), pool_label.into());
                self.touch_node(i);
            }
            3 | 4 => self.daemon_reports(name, rng),
            5 => {
                let phase = match rng.below(4) {
                    0 => None,
                    1 => Some(DrainPhase::Running),
                    2 => Some(DrainPhase::Succeeded),
                    _ => Some(DrainPhase::Failed {
                        message: "pod p refuses".into(),
                        at: self.now,
                    }),
                };
                match phase {
                    Some(p) => self.world.drains.insert(name.into(), p),
                    None => self.world.drains.remove(name),
                };
            }
            6 => {
                let secs = *rng.pick(&[0, 1, 30, 61, 599, 601, 1800]);
                self.now += jiff::SignedDuration::from_secs(secs);
            }
            7 => {
                let digest: &str = [OLD, NEW][rng.below(2) as usize];
                self.world.target = Ok(target(digest));
            }
            8 => {
                self.world.pool.spec.rollout.paused = rng.below(4) == 0;
            }
            _ => {}
        }
    }

    fn set_ready(&mut self, i: usize, ready: bool) {
        let at = self.now;
        if let Some(c) = self.nodes[i]
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|cs| cs.first_mut())
        {
            c.status = if ready { "True" } else { "False" }.into();
            c.last_transition_time = Some(Time(at));
        }
        self.touch_node(i);
    }

    /// The daemon reports a step of its cycle towards its BootcNode's spec.
    fn daemon_reports(&mut self, name: &'static str, rng: &mut Rng) {
        let Some(b) = self.bn_index(name) else {
            return;
        };
        let desired = self.world.bns[b].spec.desired_image.clone();
        let digest: &'static str = if desired.ends_with(NEW) { NEW } else { OLD };
        let from = *rng.pick(&[OLD, NEW]);
        let daemon = *rng.pick(&[
            Daemon::Idle(digest),
            Daemon::Idle(from),
            Daemon::Staging(from),
            Daemon::Staged(from),
            Daemon::Rebooting(from),
        ]);
        let mut report = bn(name, digest, daemon);
        report.booted_state = self.world.bns[b].spec.desired_image_state;
        report.degraded = rng.below(8) == 0;
        let built = report.build();
        let version = self.bump();
        let kept = &mut self.world.bns[b];
        kept.status = built.status;
        kept.metadata.resource_version = version;
    }

    /// The plan's writes land, as the actuator makes them.
    fn land(&mut self, plan: &Plan) {
        for w in plan.writes.iter() {
            match w {
                Write::ApplyBootcNode(a) => self.apply(a),
                Write::DeleteBootcNode { name } => {
                    self.world.bns.retain(|b| b.name_any() != *name);
                }
                Write::PatchNode { name, patch } => self.patch(name, patch),
                Write::PatchNodeConditions { name, conditions } => {
                    self.set_conditions(name, conditions);
                }
                Write::StartDrain { node } => {
                    self.world.drains.insert(node.clone(), DrainPhase::Running);
                }
                Write::CancelDrain { node } => {
                    self.world.drains.remove(node);
                }
            }
        }
        self.world.clock = stuck::tick(&self.world.clock, plan.phases.clone(), self.now);
    }

    fn apply(&mut self, a: &BootcNodeApply) {
        let version = self.bump();
        let b = match self.bn_index(&a.name) {
            Some(b) => b,
            None => {
                self.world.bns.push(BootcNode::new(&a.name, a.spec.clone()));
                self.world.bns.len() - 1
            }
        };
        let kept = &mut self.world.bns[b];
        kept.spec = a.spec.clone();
        kept.metadata.owner_references = Some(vec![(*a.owner).clone()]);
        kept.metadata.annotations = Some(a.annotations.clone());
        kept.metadata.resource_version = version;
    }

    /// A lifecycle-condition status patch, merged by type as the API server
    /// merges it.
    fn set_conditions(&mut self, name: &str, conditions: &[crate::LifecycleCondition]) {
        let Some(i) = NAMES.iter().position(|n| *n == name) else {
            return;
        };
        let status = self.nodes[i].status.get_or_insert_default();
        let all = status.conditions.get_or_insert_default();
        for c in conditions {
            all.retain(|have| have.type_ != c.type_);
            all.push(api::node::NodeCondition {
                type_: c.type_.into(),
                status: if c.status { "True" } else { "False" }.into(),
                reason: Some(api::node_health::LIFECYCLE_REASON.into()),
                ..Default::default()
            });
        }
        self.touch_node(i);
    }

    fn patch(&mut self, name: &str, patch: &NodePatch) {
        let Some(i) = NAMES.iter().position(|n| *n == name) else {
            return;
        };
        let n = &mut self.nodes[i];
        let mut mark = |key: &str, on: Option<bool>| match on {
            Some(true) => {
                n.annotations_mut().insert(key.into(), "a".into());
            }
            Some(false) => {
                n.annotations_mut().remove(key);
            }
            None => {}
        };
        mark(CORDONED_BY_ANNOTATION, patch.mark);
        mark(DISRUPTED_BY_ANNOTATION, patch.disrupted);
        match patch.managed {
            Some(true) => {
                n.labels_mut().insert(MANAGED_LABEL.into(), String::new());
            }
            Some(false) => {
                n.labels_mut().remove(MANAGED_LABEL);
            }
            None => {}
        }
        if let Some(u) = patch.unschedulable {
            n.spec.get_or_insert_default().unschedulable = Some(u);
        }
        self.touch_node(i);
    }
}

#[test]
fn incremental_plans_equal_plans_from_scratch() {
    let (mut reused, mut computed) = (0, 0);
    for seed in 1..=200u64 {
        let mut rng = Rng::seeded(seed);
        let mut cluster = Cluster::new(&mut rng);
        let mut memo = Memo::default();
        for step in 0..80 {
            cluster.event(&mut rng);
            let input = cluster.input();
            let reference = plan(&input);
            let incremental = plan_incremental(&input, &mut memo);
            assert_eq!(
                incremental, reference,
                "seed {seed}, step {step}: the incremental plan differs"
            );
            let (r, c) = memo.reused_and_computed();
            reused += r;
            computed += c;
            // The runtime hands each plan's summary back once read.
            if rng.below(4) > 0 {
                memo.recycle(incremental.summary);
            }
            if rng.below(3) > 0 {
                cluster.land(&reference);
            }
        }
    }
    // The memo did its job: most answers were kept, not recomputed.
    assert!(
        reused > computed,
        "reused {reused}, computed {computed}: the memo kept almost nothing"
    );
}

/// The names of `input`'s objects kept, in `chosen` (a bit per name of
/// [`NAMES`]).
fn some_members<'a>(input: &PlanInput<'a>, chosen: u64) -> PlanInput<'a> {
    let kept = |name: &str| {
        NAMES
            .iter()
            .position(|n| *n == name)
            .is_some_and(|i| chosen & (1 << i) != 0)
    };
    let mut some = input.clone();
    some.nodes.retain(|n| kept(&n.name_any()));
    some.bootc_nodes.retain(|b| kept(&b.name_any()));
    some
}

/// The first write the plan makes for each node.
fn first_writes(plan: &Plan) -> BTreeMap<String, Write> {
    let mut first = BTreeMap::new();
    for w in plan.writes.iter() {
        first
            .entry(w.node().to_owned())
            .or_insert_with(|| w.clone());
    }
    first
}

#[test]
fn a_look_at_some_members_frees_exactly_the_slots_the_whole_plan_frees_first() {
    let mut freed = 0;
    for seed in 1..=200u64 {
        let mut rng = Rng::seeded(seed);
        let mut cluster = Cluster::new(&mut rng);
        for step in 0..160 {
            cluster.event(&mut rng);
            let input = cluster.input();
            let whole = plan(&input);
            let first = first_writes(&whole);
            let chosen = rng.below(1 << NAMES.len());
            let look = releases(&some_members(&input, chosen));
            for w in look.iter() {
                assert!(w.frees_slot(), "seed {seed}, step {step}: {w:?}");
                assert_eq!(
                    first.get(w.node()),
                    Some(w),
                    "seed {seed}, step {step}: the look frees a slot the whole plan does not free first"
                );
            }
            // Every slot the whole plan frees, among the members looked at.
            for (node, w) in &first {
                let looked_at = NAMES
                    .iter()
                    .position(|n| n == node)
                    .is_some_and(|i| chosen & (1 << i) != 0);
                if looked_at && w.frees_slot() {
                    assert!(
                        look.contains(w),
                        "seed {seed}, step {step}: the look misses {w:?}"
                    );
                }
            }
            freed += look.len();
            if rng.below(4) > 0 {
                cluster.land(&whole);
            }
        }
    }
    assert!(
        freed > 100,
        "only {freed} slots freed: the events free too few to test"
    );
}
