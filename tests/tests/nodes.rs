//! The operator as a user installs it, on real nodes (tests/src/nodes/):
//! node containers with a real systemd, containerd and kubelet that really
//! reboot, a real scheduler and controller manager, the operator's own image
//! installed with `kubectl apply -k` of `deploy/`. Only bootc is faked.
//!
//! Each test enters a network namespace of its own before its runtime
//! starts, so every address it uses lives there.
// Test checks: a failure is a panic that says what was expected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use api::BootcNodePool;
use api::Node;
use kube::api::Api;
use tests::e2e::assert_cluster_disruption_at_most;
use tests::nodes::operator::Install;
use tests::nodes::pool::{
    POOL, ROLLOUT, WORKLOAD, digest_of, installed_with_a_pool_on_v1, kubectl, pool_yaml,
    pool_yaml_at, wait_pool, wait_pool_for,
};
use tests::nodes::{NodeCluster, NodeClusterOptions, OS_REPO, push_os, source_registry};

/// Runs `body` on a fresh cluster of `nodes` real nodes.
fn on_real_nodes<F, Fut>(nodes: usize, body: F)
where
    F: FnOnce(NodeCluster) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    tests::require_root!();
    let options = NodeClusterOptions {
        nodes,
        ..NodeClusterOptions::default()
    };
    tests::nodes::on_real_nodes(&options, body).unwrap();
}

/// How often the controller's Lease changed hands.
async fn lease_transitions(cluster: &NodeCluster) -> i32 {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases = Api::<Lease>::namespaced(cluster.cp.admin().await.unwrap(), "bootc-operator");
    let lease = leases.get("bootc-controller").await.unwrap();
    lease.spec.and_then(|s| s.lease_transitions).unwrap_or(0)
}

/// Runs a command to success.
fn run(mut cmd: std::process::Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `cond` (files in a node's disk and kubectl's answers have no
/// watch) until it holds, failing after the rollout's time.
async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + ROLLOUT;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_until_async<F, Fut>(what: &str, cond: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + ROLLOUT;
    while !cond().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Returns once a node reports that its bootc could not pull (its
/// BootcNode Degraded for the registry), naming the node and bootc's words.
async fn a_pull_failing(cluster: &NodeCluster) -> String {
    use api::{ConditionType, Reason};
    let bns = Api::<api::BootcNode>::all(cluster.cp.admin().await.unwrap());
    let pull_reasons = [
        Reason::RegistryUnreachable,
        Reason::ImageNotFound,
        Reason::RegistryUnauthorized,
    ];
    let failed = std::sync::Mutex::new(String::new());
    wait_until_async("a node's pull failing", || async {
        for bn in bns.list(&Default::default()).await.unwrap() {
            let c = bn.status.unwrap_or_default().conditions;
            let reason = api::conditions::reason(&c, ConditionType::Degraded);
            if api::conditions::is_true(&c, ConditionType::Degraded)
                && pull_reasons.iter().any(|r| Some(r.as_str()) == reason)
            {
                let message = api::conditions::message(&c, ConditionType::Degraded);
                *failed.lock().unwrap() = format!(
                    "{}: {reason:?}: {message:?}",
                    bn.metadata.name.unwrap_or_default()
                );
                return true;
            }
        }
        false
    })
    .await;
    failed.into_inner().unwrap()
}

/// No node is cordoned or carries the operator's marks.
async fn nothing_cordoned(cluster: &NodeCluster) {
    let nodes = Api::<Node>::all(cluster.cp.admin().await.unwrap());
    for node in &cluster.nodes {
        let n = nodes.get(&node.name).await.unwrap();
        assert!(
            !api::node_health::is_cordoned(&n),
            "{} left cordoned",
            node.name
        );
        let marks: Vec<String> = n
            .metadata
            .annotations
            .unwrap_or_default()
            .into_keys()
            .chain(n.metadata.labels.unwrap_or_default().into_keys())
            .filter(|k| k.starts_with("bootc.dev/") && k != api::labels::MANAGED_LABEL)
            .collect();
        assert!(marks.is_empty(), "{}: {marks:?} left", node.name);
    }
}

/// `/proc/<pid>/status` as key and value.
fn proc_status(pid: i32) -> std::collections::BTreeMap<String, String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// The daemon and its helper as the container runtime started them from
/// deploy/'s pod spec, read from /proc: the daemon on its own uid with no
/// capability, no_new_privs and its seccomp filter; the helper root.
fn daemon_confined_as_deployed(node: &tests::nodes::RealNode) {
    let daemons = node.processes("bootc-daemon");
    assert_eq!(
        daemons.len(),
        1,
        "{}: daemon processes {daemons:?}",
        node.name
    );
    let status = proc_status(daemons[0]);
    assert_eq!(
        status["Uid"], "41742\t41742\t41742\t41742",
        "{}: {status:?}",
        node.name
    );
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            status[set], "0000000000000000",
            "{}: {set} {status:?}",
            node.name
        );
    }
    assert_eq!(status["NoNewPrivs"], "1", "{}: {status:?}", node.name);
    assert_eq!(status["Seccomp"], "2", "{}: {status:?}", node.name);
    let helpers = node.processes("bootc-helper");
    assert_eq!(
        helpers.len(),
        1,
        "{}: helper processes {helpers:?}",
        node.name
    );
    let helper = proc_status(helpers[0]);
    assert_eq!(
        helper["PPid"],
        daemons[0].to_string(),
        "{}: {helper:?}",
        node.name
    );
}

/// The operator's main path on real nodes, for a disconnected cluster: the
/// pool names v2 at a source registry that refuses connections, and the
/// nodes' image and the controller's ConfigMap carry the same
/// registries.conf naming its mirror (the cluster's registry). The
/// controller resolves the tag through the mirror, each node's bootc pulls
/// the pool's own reference through the mirror its host's registries.conf
/// names, and the three nodes roll to v2 one at a time behind a health
/// gate, as the cluster sees it: each BootcNode booted on v2's digest, each
/// Node Ready with v2's OS, nothing cordoned.
#[test]
fn a_pool_rolls_v1_to_v2_across_three_real_nodes_through_their_mirror() {
    on_real_nodes(3, |cluster| async move {
        let recorder = installed_with_a_pool_on_v1(&cluster, Some(WORKLOAD), &Install::default())
            .await
            .unwrap();
        let v2 = push_os(&cluster.registry, "2.0", "v2").await.unwrap();
        for node in &cluster.nodes {
            daemon_confined_as_deployed(node);
        }
        let boots_before: Vec<u32> = cluster.nodes.iter().map(|n| n.boot_count()).collect();
        let transitions_before = lease_transitions(&cluster).await;
        // A health gate on what the real kubelets report: each node's own
        // daemon pod Ready again, for 5 s, before the next node's turn.
        let gated = format!(
            "{}  health:\n    pods:\n      - namespace: bootc-daemon\n        selector: {{matchLabels: {{app.kubernetes.io/name: bootc-daemon}}}}\n    settleSeconds: 5\n    timeoutSeconds: 300\n",
            pool_yaml_at(&source_registry(), "v2")
        );
        kubectl(&cluster, &["apply", "-f", "-"], Some(&gated)).unwrap();
        let v2_digest = digest_of(&v2).to_owned();
        let v2_at_source = format!("{}/{OS_REPO}@{v2_digest}", source_registry());
        let rolled = wait_pool(&cluster, "every node on v2", move |p| {
            let s = p.status.clone().unwrap_or_default();
            s.target_digest.as_deref() == Some(v2_digest.as_str())
                && s.updated_count == 3
                && s.updating_count == 0
        });
        let p = tokio::select! {
            p = rolled => p.unwrap(),
            failed = a_pull_failing(&cluster) => panic!("{failed}"),
        };
        // The tag, resolved through the mirror: the nodes told the pool's
        // own name (their registries.conf sends the pull to the mirror).
        assert_eq!(
            p.status.unwrap().target_image.as_deref(),
            Some(v2_at_source.as_str())
        );
        for (node, before) in cluster.nodes.iter().zip(boots_before) {
            assert_eq!(node.boot_count(), before + 1, "{} rebooted once", node.name);
            let state = node.bootc().read_state().unwrap();
            assert_eq!(
                state.booted.unwrap().digest,
                digest_of(&v2),
                "{} boots v2",
                node.name
            );
        }
        nothing_cordoned(&cluster).await;
        // Each node's record of the update, written by its daemon, and the
        // daemon's Landlock sandbox as the node's kernel enforces it.
        let bns = Api::<api::BootcNode>::all(cluster.cp.admin().await.unwrap());
        for node in &cluster.nodes {
            let status = bns.get(&node.name).await.unwrap().status.unwrap();
            // The pool's own reference, pulled through the mirror.
            let booted = status.booted.clone().unwrap();
            assert_eq!(
                (booted.image.as_deref(), booted.image_digest.as_deref()),
                (Some(v2_at_source.as_str()), Some(digest_of(&v2))),
                "{} booted v2 as the pool names it",
                node.name
            );
            // bootc's timer is in the node's systemd, masked by its image.
            assert!(
                status.host_updaters.is_empty(),
                "{}: {:?}",
                node.name,
                status.host_updaters
            );
            let landlock = status.landlock.clone();
            assert_eq!(
                landlock.map(|l| l.state),
                Some(api::LandlockState::Enforced),
                "{}: {:?}",
                node.name,
                status.landlock
            );
            let newest = status.history.into_iter().next().unwrap();
            assert_eq!(
                newest.outcome,
                Some(api::UpdateOutcome::Updated),
                "{}",
                node.name
            );
            assert!(
                newest.staged.is_some() && newest.booted.is_some(),
                "{newest:?}"
            );
        }
        let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(cluster.cp.admin().await.unwrap());
        for node in &cluster.nodes {
            let n = nodes.get(&node.name).await.unwrap();
            let os = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .unwrap()
                .os_image
                .clone();
            assert!(
                api::node_health::is_ready(&Node::from(n)),
                "{} Ready",
                node.name
            );
            assert_eq!(
                os, "bootc test OS 2.0",
                "{}'s kubelet reports v2",
                node.name
            );
        }
        assert_cluster_disruption_at_most(&recorder, 1).await;
        // Every node rebooted, the leader's too: the other replica took over.
        assert!(
            lease_transitions(&cluster).await > transitions_before,
            "the controller's Lease never changed hands"
        );
        let described = kubectl(&cluster, &["describe", "bnp", POOL], None).unwrap();
        assert!(
            described.contains(api::event_reasons::ROLLOUT_COMPLETE),
            "{described}"
        );
        let plugin = std::process::Command::new(tests::fake_host::bin("kubectl-bootc"))
            .args(["status", POOL])
            .env("KUBECONFIG", cluster.cp.kubeconfig(tests::Identity::Admin))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&plugin.stdout);
        assert!(
            plugin.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&plugin.stderr)
        );
        assert!(text.contains("2.0 (sha256:"), "{text}");
        for node in &cluster.nodes {
            assert!(text.contains(&node.name), "{text}");
        }
    });
}

/// A pod pinned to node-1 that a PodDisruptionBudget never lets go.
const PINNED: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: default, labels: {app: pinned}}
spec:
  nodeName: node-1
  terminationGracePeriodSeconds: 5
  containers:
    - name: pinned
      image: TOOLS
      command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pinned, namespace: default}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: pinned}}
"#;

/// Faults on real nodes, judged by what the kubelets report: a PDB that
/// never allows node-1's drain (named on the pool, the node kept cordoned in
/// its slot until the PDB goes), node-2's daemon pod deleted while it stages
/// (the DaemonSet recreates it; the stage unit is not started twice), and
/// node-3 rebooted by hand mid-rollout (outside any slot: its locked staged
/// image is dropped, it boots v1 again and is updated in its turn). The
/// rollout completes with never more than one node disrupted by the operator.
#[test]
fn faults_on_real_nodes_leave_the_rollout_safe_and_complete() {
    on_real_nodes(3, |cluster| async move {
        let recorder = installed_with_a_pool_on_v1(&cluster, Some(PINNED), &Install::default())
            .await
            .unwrap();
        let (n1, n2, n3) = (&cluster.nodes[0], &cluster.nodes[1], &cluster.nodes[2]);
        // node-2's pull takes 8 s: long enough to lose its daemon meanwhile.
        run(n2
            .exec(&["sh", "-c", "echo 8000 > /fake-bootc/stage-delay-ms"])
            .unwrap());
        // node-3's takes 3 s, so that node-1 is staged first and takes the
        // one slot (a slot goes to the first staged node by name): node-3's
        // hand reboot below must come outside any slot.
        run(n3
            .exec(&["sh", "-c", "echo 3000 > /fake-bootc/stage-delay-ms"])
            .unwrap());
        let v2 = push_os(&cluster.registry, "2.0", "v2").await.unwrap();
        let n3_boots = n3.boot_count();
        let n3_reboots = n3.bootc().read_reboots().len();
        kubectl(
            &cluster,
            &["apply", "-f", "-"],
            Some(&pool_yaml(&cluster, "v2")),
        )
        .unwrap();

        // When each `switch` that stages `image` started, in µs (released
        // bootc: a plain `switch`, locked by ostree's lock file).
        let staging = |node: &tests::nodes::RealNode, image: &str| -> Vec<u64> {
            node.bootc()
                .read_invocations()
                .iter()
                .filter(|i| {
                    i.argv.first().is_some_and(|a| a == "switch")
                        && i.argv.iter().any(|a| a == image)
                })
                .map(|i| i.unix_micros)
                .collect()
        };
        wait_until("node-2 staging v2", || staging(n2, &v2).len() == 1).await;
        kubectl(
            &cluster,
            &[
                "delete",
                "pod",
                "-n",
                "bootc-daemon",
                "--wait=false",
                "--field-selector",
                "spec.nodeName=node-2",
            ],
            None,
        )
        .unwrap();

        // node-1 takes the slot first (staged first) and its drain is refused.
        wait_until_async("the pool names the blocked drain", || async {
            let described = kubectl(&cluster, &["describe", "bnp", POOL], None).unwrap();
            described.contains(api::event_reasons::DRAIN_BLOCKED) && described.contains("pinned")
        })
        .await;
        let held = Api::<Node>::all(cluster.cp.admin().await.unwrap())
            .get("node-1")
            .await
            .unwrap();
        assert!(
            api::node_health::is_cordoned(&held),
            "node-1 cordoned in its slot"
        );
        // node-3 goes down by hand while it waits for its turn, v2 staged.
        let staged_v2 = || {
            n3.bootc()
                .read_state()
                .is_ok_and(|s| s.staged.is_some_and(|d| d.image == v2))
        };
        wait_until("node-3 staged v2", staged_v2).await;
        run(n3.exec(&["systemctl", "reboot"]).unwrap());
        wait_until("node-3's hand reboot", || {
            n3.bootc().read_reboots().len() > n3_reboots
        })
        .await;
        let hand = n3.bootc().read_reboots().pop().unwrap();
        assert!(
            !hand.applied_staged,
            "node-3: a reboot outside any slot booted v2: {hand:?}"
        );
        kubectl(
            &cluster,
            &["delete", "pdb", "pinned", "-n", "default"],
            None,
        )
        .unwrap();

        let v2_digest = digest_of(&v2).to_owned();
        wait_pool(&cluster, "every node on v2", move |p| {
            let s = p.status.clone().unwrap_or_default();
            s.target_digest.as_deref() == Some(v2_digest.as_str())
                && s.updated_count == 3
                && s.updating_count == 0
        })
        .await
        .unwrap();
        // The new daemon's helper waited for the stage unit the old one had
        // started, then staged again (a no-op for bootc: the same image),
        // as it must to apply only what it staged itself: never two at once.
        let stages = staging(n2, &v2);
        assert!(stages.len() <= 2, "node-2 staged v2 {} times", stages.len());
        if let [first, second] = stages[..] {
            assert!(
                second - first >= 8_000_000,
                "node-2: a second stage {} ms after the first, while it ran",
                (second - first) / 1000
            );
        }
        assert_eq!(
            n3.boot_count(),
            n3_boots + 2,
            "node-3: the hand reboot, then its slot's"
        );
        for node in [n1, n2, n3] {
            let booted = node.bootc().read_state().unwrap().booted.unwrap();
            assert_eq!(booted.digest, digest_of(&v2), "{} boots v2", node.name);
        }
        nothing_cordoned(&cluster).await;
        let all = BTreeSet::new();
        let by_operator = recorder.peak_records(&all, &all).await.unwrap();
        assert!(
            by_operator.count <= 1,
            "{by_operator:?}\n{}",
            recorder.timeline(by_operator.resource_version, 40)
        );
        let others: BTreeSet<String> = [n1.name.clone(), n2.name.clone()].into();
        let seen = recorder.peak(&others, &all).await.unwrap();
        assert!(
            seen.count <= 1,
            "{seen:?}\n{}",
            recorder.timeline(seen.resource_version, 40)
        );
    });
}

/// The controller's `--stuck-deadline-scale` in the stuck-node test: its
/// deadlines are minutes (10 for a reboot), scaled to seconds (30).
const STUCK_DEADLINE_SCALE: &str = "0.05";
/// How long the report may take after the pool's change: the drain and
/// the reboot, then the deadline, from NotReady or (if it comes first) from
/// the node lifecycle controller calling the silent node Unknown after
/// 50 s, a new transition of its Ready condition that restarts the clock.
const STUCK_REPORTED: Duration = Duration::from_secs(180);

/// Whether the pool is Degraded because a node is stuck rebooting.
fn stuck_rebooting(p: &BootcNodePool) -> bool {
    let conditions = p.status.clone().unwrap_or_default().conditions;
    api::conditions::is_true(&conditions, api::ConditionType::Degraded)
        && api::conditions::reason(&conditions, api::ConditionType::Degraded)
            == Some(api::Reason::NodeStuck.as_str())
        && api::conditions::message(&conditions, api::ConditionType::Degraded)
            .is_some_and(|m| m.contains(" rebooting (NotReady) for "))
}

/// A node that never comes back from its reboot: the first node in a slot
/// loses power while it reboots. The pool names it (Degraded, `NodeStuck`:
/// the node and its phase), keeps its slot (no other node is disrupted, as
/// the cluster saw it, even after a spec change), and once the node is
/// powered on again the rollout completes with nothing left cordoned.
///
/// deploy/ itself is unchanged: the test's overlay adds the controller's
/// documented `--stuck-deadline-scale` as a user's kustomize patch would
/// (a reboot's deadline, 10 minutes, becomes 30 s). The report may lapse
/// when the node lifecycle controller turns NotReady into Unknown (see
/// [`STUCK_REPORTED`]): while the node is off, the test waits for the
/// report and never asserts that it stays.
#[test]
fn a_node_that_never_comes_back_is_reported_stuck_and_keeps_its_slot() {
    on_real_nodes(3, |mut cluster| async move {
        let install = Install {
            controller_args: vec![format!("--stuck-deadline-scale={STUCK_DEADLINE_SCALE}")],
            ..Install::default()
        };
        let recorder = installed_with_a_pool_on_v1(&cluster, None, &install)
            .await
            .unwrap();
        let v2 = push_os(&cluster.registry, "2.0", "v2").await.unwrap();
        let boots_before: Vec<u32> = cluster.nodes.iter().map(|n| n.boot_count()).collect();
        // Every node loses power when its running boot ends: whichever the
        // operator reboots first stays off (and so would a second one).
        for node in &cluster.nodes {
            node.power_off_at_next_boot().unwrap();
        }
        kubectl(
            &cluster,
            &["apply", "-f", "-"],
            Some(&pool_yaml(&cluster, "v2")),
        )
        .unwrap();
        // Within the test's time (nextest ends it at 300 s): the report
        // comes a deadline after the node went NotReady.
        let p = wait_pool_for(
            &cluster,
            "a node reported stuck rebooting",
            STUCK_REPORTED,
            stuck_rebooting,
        )
        .await
        .unwrap();
        let off: Vec<usize> = (0..cluster.nodes.len())
            .filter(|&i| cluster.nodes[i].is_off())
            .collect();
        let [stuck] = off[..] else {
            panic!("nodes off: {off:?}");
        };
        let name = cluster.nodes[stuck].name.clone();
        let conditions = p.status.unwrap().conditions;
        let message = api::conditions::message(&conditions, api::ConditionType::Degraded).unwrap();
        let named = format!("node {name} rebooting (NotReady) for ");
        assert!(message.contains(&named), "{message} does not say {named}");

        // The slot stays held when the controller plans again: a spec change.
        kubectl(
            &cluster,
            &[
                "patch",
                "bnp",
                POOL,
                "--type=merge",
                "-p",
                r#"{"spec":{"rollout":{"drainTimeoutSeconds":61}}}"#,
            ],
            None,
        )
        .unwrap();
        let still = named.clone();
        wait_pool(&cluster, "still stuck after a spec change", move |p| {
            let s = p.status.clone().unwrap_or_default();
            s.observed_generation == p.metadata.generation
                && stuck_rebooting(p)
                && api::conditions::message(&s.conditions, api::ConditionType::Degraded)
                    .is_some_and(|m| m.contains(&still))
        })
        .await
        .unwrap();
        let approved = recorder.approvals().await.unwrap();
        assert_eq!(
            approved,
            std::slice::from_ref(&name),
            "one slot, one reboot"
        );
        for (i, node) in cluster.nodes.iter().enumerate() {
            if i != stuck {
                assert_eq!(node.boot_count(), boots_before[i], "{} rebooted", node.name);
            }
        }
        assert_cluster_disruption_at_most(&recorder, 1).await;

        // Powered on again, it boots what it staged; the rollout goes on.
        for node in &cluster.nodes {
            node.keep_power_on().unwrap();
        }
        cluster.nodes[stuck].power_on().unwrap();
        let v2_digest = digest_of(&v2).to_owned();
        wait_pool(&cluster, "every node on v2, none stuck", move |p| {
            let s = p.status.clone().unwrap_or_default();
            s.target_digest.as_deref() == Some(v2_digest.as_str())
                && s.updated_count == 3
                && s.updating_count == 0
                && !stuck_rebooting(p)
        })
        .await
        .unwrap();
        for (node, before) in cluster.nodes.iter().zip(&boots_before) {
            // One boot each: the stuck node's is its power-on.
            assert_eq!(node.boot_count(), before + 1, "{}'s boots", node.name);
            let booted = node.bootc().read_state().unwrap().booted.unwrap();
            assert_eq!(booted.digest, digest_of(&v2), "{} boots v2", node.name);
        }
        nothing_cordoned(&cluster).await;
        assert_cluster_disruption_at_most(&recorder, 1).await;
    });
}

/// A node driver that stops being Ready on v2: its readiness probe reads
/// the os-release the node booted (the fake bootc's boot hook writes it).
const DRIVER: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {name: driver, namespace: default}
spec:
  selector: {matchLabels: {app: driver}}
  template:
    metadata: {labels: {app: driver}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: driver
          image: TOOLS
          command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
          volumeMounts: [{name: os-release, mountPath: /host/os-release, readOnly: true}]
          readinessProbe:
            exec:
              command: ["/bin/sh", "-c", 'case "$(cat /host/os-release)" in *VERSION_ID=\"2.0\"*) exit 1;; esac']
            periodSeconds: 1
      volumes:
        - name: os-release
          hostPath: {path: /usr/lib/os-release, type: File}
"#;

/// An image that breaks a node's driver, behind a health gate that rolls a
/// failed node back: the first node boots v2, its driver pod (as its real
/// kubelet reports it) is never Ready, so at the timeout the node is marked
/// failed and booted back into v1 in the same slot. No other node is
/// approved, no node is left on v2 or cordoned, and the pool says why. One
/// node's failure is the pool's here (`nodesToFailImage: 1`).
#[test]
fn an_image_that_breaks_a_driver_is_rolled_back_on_one_real_node() {
    on_real_nodes(3, |cluster| async move {
        let recorder = installed_with_a_pool_on_v1(&cluster, Some(DRIVER), &Install::default())
            .await
            .unwrap();
        let v2 = push_os(&cluster.registry, "2.0", "v2").await.unwrap();
        let boots_before: Vec<u32> = cluster.nodes.iter().map(|n| n.boot_count()).collect();
        let gated = format!(
            "{}  health:\n    pods:\n      - namespace: default\n        selector: {{matchLabels: {{app: driver}}}}\n    settleSeconds: 3\n    timeoutSeconds: 40\n    onFailure: Rollback\n    nodesToFailImage: 1\n",
            pool_yaml(&cluster, "v2")
        );
        kubectl(&cluster, &["apply", "-f", "-"], Some(&gated)).unwrap();
        let p = wait_pool(&cluster, "the failed node booted back", |p| {
            let c = p.status.clone().unwrap_or_default().conditions;
            api::conditions::is_true(&c, api::ConditionType::Degraded)
                && api::conditions::reason(&c, api::ConditionType::Degraded)
                    == Some(api::Reason::RolledBack.as_str())
                && api::conditions::message(&c, api::ConditionType::Degraded)
                    .is_some_and(|m| m.contains("it was booted back"))
        })
        .await
        .unwrap();
        let failed = p.status.unwrap().failed_images;
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].digest, digest_of(&v2));
        let approvals = recorder.approvals().await.unwrap();
        assert_eq!(approvals, [failed[0].node.clone()], "one node approved");
        for (node, before) in cluster.nodes.iter().zip(boots_before) {
            let booted = node.bootc().read_state().unwrap().booted.unwrap();
            assert_eq!(
                booted.digest,
                digest_of(&cluster.os_v1),
                "{} on v1",
                node.name
            );
            // The failed node: to v2 and back; the others never.
            let boots = if node.name == failed[0].node { 2 } else { 0 };
            assert_eq!(node.boot_count(), before + boots, "{}'s boots", node.name);
        }
        wait_until_async("the failed node uncordoned", || async {
            let nodes = Api::<Node>::all(cluster.cp.admin().await.unwrap());
            let n = nodes.get(&failed[0].node).await.unwrap();
            !api::node_health::is_cordoned(&n)
        })
        .await;
        nothing_cordoned(&cluster).await;
        assert_cluster_disruption_at_most(&recorder, 1).await;
    });
}

/// The README's *Try it on real nodes*, as `./dev cluster --nodes 2
/// --install chart` runs it: the chart installed with Helm's usual flags,
/// then every command the cluster prints run as a user pastes it (the pull
/// secret, the labels, the workload and its budget, the pool, `./dev
/// os-image 1.1` through the cluster's socket, `kubectl bootc refresh`):
/// both nodes roll to the image it pushed, the budget respected, nothing
/// left cordoned.
#[test]
fn the_readme_walkthrough_rolls_an_image_os_image_pushed() {
    use tests::nodes::walkthrough::{self, CHANNEL, Method};
    on_real_nodes(2, |cluster| async move {
        walkthrough::install(&cluster, Method::Chart).await.unwrap();
        let files = walkthrough::write_files(&cluster).unwrap();
        let socket = cluster.dir().join("os-image.sock");
        let recorder = tests::recorder::Recorder::start(&cluster.cp).await.unwrap();
        let steps = walkthrough::next_steps(&cluster, &files);
        let listener = walkthrough::listen(&socket).unwrap();
        let serving = walkthrough::serve_os_images(&cluster.registry, listener);
        let pasted = async {
            let mut pushed = None;
            for line in steps.lines() {
                let words: Vec<&str> = line.split('#').next().unwrap().split_whitespace().collect();
                match words.as_slice() {
                    ["kubectl", "bootc", args @ ..] => plugin(&cluster, args),
                    ["kubectl", args @ ..] => {
                        kubectl(&cluster, args, None).unwrap();
                    }
                    ["./dev", "os-image", version] => {
                        let (socket, version) = (socket.clone(), (*version).to_owned());
                        let asked = tokio::task::spawn_blocking(move || {
                            walkthrough::request_os_image(Some(&socket), &version, CHANNEL)
                        });
                        pushed = Some(asked.await.unwrap().unwrap());
                    }
                    other => panic!("a printed step this test cannot run: {other:?}"),
                }
            }
            pushed.expect("the walkthrough pushes an image")
        };
        let pushed = tokio::select! {
            r = serving => panic!("the socket stopped: {r:?}"),
            pushed = pasted => pushed,
        };
        let digest = digest_of(&pushed).to_owned();
        wait_pool(&cluster, "both nodes on the pushed image", move |p| {
            let s = p.status.clone().unwrap_or_default();
            s.target_digest.as_deref() == Some(digest.as_str()) && s.updated_count == 2
        })
        .await
        .unwrap();
        assert_cluster_disruption_at_most(&recorder, 1).await;
        nothing_cordoned(&cluster).await;
    });
}

/// `kubectl bootc ARGS` on the cluster, as a user runs the plugin.
fn plugin(cluster: &NodeCluster, args: &[&str]) {
    let mut cmd = std::process::Command::new(tests::fake_host::bin("kubectl-bootc"));
    cmd.args(args)
        .env("KUBECONFIG", cluster.cp.kubeconfig(tests::Identity::Admin));
    run(cmd);
}
