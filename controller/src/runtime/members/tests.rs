//! The kept selection against the reference: random sequences of changes to
//! Nodes, BootcNodes and the pool (labels, owners, disruption records,
//! deletions, relists, a new selector or uid); after each, the selection
//! [`Members`] keeps must equal what [`Selection::of`] chooses from scratch.
#![allow(clippy::unwrap_used)]

use api::test_support::{BootcNodeBuilder, NodeBuilder, PoolBuilder};

use super::*;

use rollout::test_rng::Rng;

const NAMES: [&str; 5] = ["n1", "n2", "n3", "n4", "n5"];
const POOLS: [&str; 2] = ["web", "db"];
const ARCHES: [Option<&str>; 3] = [None, Some("amd64"), Some("arm64")];

fn pool(selector_role: &str, uid: &str) -> BootcNodePool {
    PoolBuilder::new("web")
        .selects("role", selector_role)
        .image("quay.io/os:1")
        .uid(uid)
        .build()
}

fn node(name: &str, role: &str, arch: Option<&str>, disrupted_by: Option<&str>) -> Arc<Node> {
    let mut n = NodeBuilder::new(name).label("role", role);
    if let Some(arch) = arch {
        n = n.label(api::labels::ARCH_LABEL, arch);
    }
    if let Some(pool) = disrupted_by {
        n = n.annotation(api::labels::DISRUPTED_BY_ANNOTATION, pool);
    }
    Arc::new(n.build())
}

fn bn(name: &str, owner: Option<(&str, &str)>, arch: Option<&str>, retry: bool) -> Arc<BootcNode> {
    let mut b = BootcNodeBuilder::new(name)
        .desired("quay.io/os@sha256:1")
        .booted_architecture(arch);
    if let Some((pool, uid)) = owner {
        b = b.owner(pool, uid);
    }
    if retry {
        b = b.annotation(api::labels::RETRY_ANNOTATION, "");
    }
    Arc::new(b.build())
}

/// The caches: objects by name.
#[derive(Default)]
struct Cluster {
    nodes: BTreeMap<String, Arc<Node>>,
    bns: BTreeMap<String, Arc<BootcNode>>,
}

impl Caches for Cluster {
    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name).cloned()
    }
    fn bn(&self, name: &str) -> Option<Arc<BootcNode>> {
        self.bns.get(name).cloned()
    }
    fn all_nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.values().cloned().collect()
    }
    fn all_bns(&self) -> Vec<Arc<BootcNode>> {
        self.bns.values().cloned().collect()
    }
}

/// The retry requests, comparable.
fn requests<'a>(pool: &BootcNodePool, bns: impl IntoIterator<Item = &'a BootcNode>) -> Vec<String> {
    let mut names: Vec<String> = crate::actions::retry::requests(pool, bns)
        .into_iter()
        .map(|r| r.node)
        .collect();
    names.sort();
    names
}

/// Names and architectures of a selection, comparable.
fn seen(s: &Selection<'_>) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut nodes: Vec<String> = s.nodes.iter().map(|n| n.name_any()).collect();
    let mut bns: Vec<String> = s.bns.iter().map(|b| b.name_any()).collect();
    nodes.sort();
    bns.sort();
    (nodes, bns, s.architectures.iter().cloned().collect())
}

/// One random change, recorded as the watches would record it.
fn change(rng: &mut Rng, cluster: &mut Cluster, changes: &Changes, pool: &mut BootcNodePool) {
    let name = NAMES[rng.below(NAMES.len() as u64) as usize];
    let role = POOLS[rng.below(2) as usize];
    let arch = ARCHES[rng.below(3) as usize];
    let watched = match rng.below(10) {
        0..=2 => {
            let disrupted = (rng.below(3) == 0).then_some("web");
            let node = node(name, role, arch, disrupted);
            cluster.nodes.insert(name.into(), node);
            true
        }
        3 => {
            cluster.nodes.remove(name);
            true
        }
        4..=6 => {
            let uid = pool.metadata.uid.clone().unwrap();
            let owner = [None, Some(("web", uid.as_str())), Some(("db", "uid-db"))];
            let owner = *rng.pick(&owner);
            let bn = bn(name, owner, arch, rng.below(4) == 0);
            cluster.bns.insert(name.into(), bn);
            true
        }
        7 => {
            cluster.bns.remove(name);
            true
        }
        8 => {
            // A relist: the cache replaced, a deletion without its event.
            cluster.nodes.remove(name);
            changes.everything();
            false
        }
        _ => {
            let selected = pool.spec.node_selector.match_labels.as_ref().unwrap()["role"].clone();
            let uid = pool.metadata.uid.clone().unwrap();
            *pool = if rng.below(2) == 0 {
                self::pool(role, &uid)
            } else {
                let uids = ["uid-1", "uid-2"];
                let uid = *rng.pick(&uids);
                self::pool(&selected, uid)
            };
            false
        }
    };
    if watched {
        changes.touched(name);
    }
}

#[test]
fn the_kept_selection_equals_the_one_chosen_from_scratch() {
    for seed in 1..=300_u64 {
        let mut rng = Rng::seeded(seed);
        let mut cluster = Cluster::default();
        let changes = Changes::default();
        let mut pool = pool("web", "uid-1");
        let mut members = Members::default();
        let mut partial = 0;
        for step in 0..40 {
            // Several changes may land between two reconciles.
            for _ in 0..=rng.below(3) {
                change(&mut rng, &mut cluster, &changes, &mut pool);
            }
            let decided = members.update(&pool, changes.take("web"), &cluster);
            if decided < NAMES.len() {
                partial += 1;
            }
            let (nodes, bns) = (cluster.all_nodes(), cluster.all_bns());
            let reference = Selection::of(&pool, &nodes, &bns);
            assert_eq!(
                seen(&members.chosen(&cluster).selection()),
                seen(&reference),
                "seed {seed}, step {step}"
            );
            assert_eq!(
                requests(
                    &pool,
                    members.retry_requests(&cluster).iter().map(AsRef::as_ref)
                ),
                requests(&pool, bns.iter().map(AsRef::as_ref)),
                "seed {seed}, step {step}: retry requests"
            );
        }
        assert!(partial > 0, "seed {seed}: every update decided everything");
    }
}

#[test]
fn a_pool_seen_first_and_a_relist_decide_everything() {
    let changes = Changes::default();
    let cluster = Cluster::default();
    let pool = pool("web", "uid-1");
    assert_eq!(changes.take("web"), Pending::Everything);
    changes.touched("n1");
    assert_eq!(
        changes.take("web"),
        Pending::Names(["n1".to_owned()].into_iter().collect())
    );
    assert_eq!(changes.take("web"), Pending::Names(Default::default()));
    changes.everything();
    assert_eq!(changes.take("web"), Pending::Everything);
    // Nothing kept yet: everything, whatever is pending.
    let mut members = Members::default();
    let mut c = cluster;
    c.nodes.insert("n1".into(), node("n1", "web", None, None));
    assert_eq!(
        members.update(&pool, Pending::Names(Default::default()), &c),
        1
    );
    assert_eq!(seen(&members.chosen(&c).selection()).0, ["n1"]);
    changes.forget("web");
    assert_eq!(changes.take("web"), Pending::Everything);
}

/// A pool is triggered by the first change after it looked, not by those
/// that follow (its reconcile reads them all); looking arms it again, and so
/// does a reconcile that ended without looking.
#[test]
fn a_pool_is_triggered_once_per_look() {
    let changes = Changes::default();
    let names = |n: &[&str]| Pending::Names(n.iter().map(|s| (*s).to_owned()).collect());
    assert!(changes.arm("web"), "never looked: triggered");
    assert!(!changes.arm("web"), "triggered already");
    changes.touched("n1");
    assert_eq!(changes.take("web"), Pending::Everything, "never looked");
    changes.touched("n1");
    assert!(changes.arm("web"), "the first change since it looked");
    changes.touched("n2");
    assert!(!changes.arm("web"), "the next waits for that reconcile");
    assert!(changes.arm("db"), "each pool on its own");
    assert_eq!(changes.take("web"), names(&["n1", "n2"]));
    assert!(changes.arm("web"), "looked: the next change triggers it");
    changes.touched("n3");
    changes.rearm("web");
    assert!(changes.arm("web"), "ended without looking: triggered again");
    assert_eq!(changes.take("web"), names(&["n3"]), "nothing lost");
    assert!(!changes.arm("db"));
    changes.forget("db");
    assert!(changes.arm("db"), "forgotten: as if never looked");
}

#[test]
fn a_look_reads_the_names_changed_since_it_last_read_them_and_leaves_them_pending() {
    let changes = Changes::default();
    let set = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    let names = |n: &[&str]| Pending::Names(n.iter().map(|s| (*s).to_owned()).collect());
    changes.arm("web");
    changes.touched("n0");
    assert_eq!(
        changes.fresh("web"),
        set(&[]),
        "never looked: nothing kept by name"
    );
    changes.take("web");
    changes.touched("n2");
    changes.touched("n1");
    assert_eq!(changes.fresh("web"), set(&["n1", "n2"]), "in name order");
    assert_eq!(changes.fresh("web"), set(&[]), "read once");
    changes.again("web", set(&["n2"]));
    assert_eq!(
        changes.fresh("web"),
        set(&["n2"]),
        "put back to be read again"
    );
    changes.touched("n3");
    assert_eq!(
        changes.take("web"),
        names(&["n1", "n2", "n3"]),
        "still pending for the reconcile"
    );
    assert_eq!(
        changes.fresh("web"),
        set(&[]),
        "the reconcile read them all"
    );
}
