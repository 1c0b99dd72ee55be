//! The real `kubectl-bootc` binary against the simulated cluster (a real
//! API server, the real controller, real daemons and helpers on fake bootc
//! hosts): pause, status and why while paused, resume, a reboot that comes
//! back on the old image (why, a refused and an accepted retry), and the
//! history of the rollout; a plan previewed, then run; kubectl's flags
//! (`--kubeconfig`, `--context`, `-o json`) and the exit status of a name
//! that does not exist; the fleet's switch (`stop --all`, `resume --all`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use api::Node;
use api::{BootcNode, BootcNodePool, ConditionType, Reason};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tests::sim::{POOL, Sim, SimOptions};
use tests::{Identity, k8s, require_root};

const ROLLOUT: Duration = Duration::from_secs(120);

/// Runs `kubectl-bootc ARGS` as an admin; (exit code, stdout, stderr).
fn plugin(sim: &Sim, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-bootc"))
        .args(args)
        .env("KUBECONFIG", sim.cp.kubeconfig(Identity::Admin))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `kubectl-bootc ARGS` with no KUBECONFIG: the flags alone say where
/// the cluster is; (exit code, stdout, stderr).
fn plugin_by_flags(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-bootc"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A kubeconfig of two contexts: `sim`, the admin's, and the current one,
/// `nowhere`, a server nothing listens on.
fn two_contexts(sim: &Sim) -> std::path::PathBuf {
    use kube::config::{Kubeconfig, NamedCluster, NamedContext};
    let admin = sim.cp.kubeconfig(Identity::Admin);
    let mut config = Kubeconfig::read_from(&admin).unwrap();
    let mut nowhere_cluster: NamedCluster = config.clusters[0].clone();
    nowhere_cluster.name = "nowhere".into();
    if let Some(c) = nowhere_cluster.cluster.as_mut() {
        c.server = Some("https://127.0.0.1:1".into());
    }
    let mut sim_context: NamedContext = config.contexts[0].clone();
    let mut nowhere_context = sim_context.clone();
    sim_context.name = "sim".into();
    nowhere_context.name = "nowhere".into();
    if let Some(c) = nowhere_context.context.as_mut() {
        c.cluster = "nowhere".into();
    }
    config.clusters.push(nowhere_cluster);
    config.contexts = vec![nowhere_context, sim_context];
    config.current_context = Some("nowhere".into());
    let path = admin.with_file_name("two-contexts.kubeconfig");
    // JSON is YAML.
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    path
}

/// Runs it and expects success; its stdout.
fn ok(sim: &Sim, args: &[&str]) -> String {
    let (code, stdout, stderr) = plugin(sim, args);
    assert_eq!(code, 0, "kubectl-bootc {args:?}: {stderr}{stdout}");
    stdout
}

async fn wait_pool(sim: &Sim, what: &str, cond: impl Fn(&BootcNodePool) -> bool) {
    k8s::wait_for(
        Api::<BootcNodePool>::all(sim.admin.clone()),
        POOL,
        ROLLOUT,
        what,
        |p| p.is_some_and(&cond),
    )
    .await
    .unwrap();
}

async fn wait_bn(sim: &Sim, name: &str, what: &str, cond: impl Fn(&BootcNode) -> bool) {
    k8s::wait_for(
        Api::<BootcNode>::all(sim.admin.clone()),
        name,
        ROLLOUT,
        what,
        |b| b.is_some_and(&cond),
    )
    .await
    .unwrap();
}

fn pool_reason(p: &BootcNodePool, type_: ConditionType) -> Option<String> {
    let s = p.status.as_ref()?;
    api::conditions::reason(&s.conditions, type_).map(str::to_owned)
}

fn phase(bn: &BootcNode) -> Option<api::DaemonPhase> {
    bn.status.as_ref()?.phase().ok().flatten()
}

/// The first Node to go NotReady (a reboot), from a watch.
async fn first_not_ready(sim: &Sim) -> String {
    let nodes: Api<Node> = Api::all(sim.admin.clone());
    let stream = watcher(nodes, watcher::Config::default()).applied_objects();
    let mut stream = std::pin::pin!(stream);
    let found = tokio::time::timeout(ROLLOUT, async {
        while let Some(node) = stream.next().await {
            let node = node.unwrap();
            if !api::node_health::is_ready(&node) {
                return node.metadata.name.unwrap();
            }
        }
        panic!("the Node watch ended");
    })
    .await;
    found.expect("no node rebooted")
}

/// While `name` reboots, its host is made to come back on the image it ran
/// before (as a boot that failed over would): the staged one is gone.
async fn fall_back(sim: &Sim, name: &str) {
    let nodes = sim.nodes.lock().await;
    let node = nodes.iter().find(|n| n.name == name).unwrap();
    let mut state = node.host.layout.read_state().unwrap();
    state.booted = state.rollback.take();
    state.staged = None;
    node.host.layout.write_state(&state).unwrap();
}

async fn reboots(sim: &Sim, name: &str) -> usize {
    let nodes = sim.nodes.lock().await;
    let node = nodes.iter().find(|n| n.name == name).unwrap();
    node.host.layout.read_reboots().len()
}

async fn rolled_out_v1(sim: &mut Sim) -> Vec<String> {
    let v1 = sim.push_version("1.0").await.unwrap();
    let names = sim.add_nodes(3, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_pool(sim, "v1 everywhere", |p| {
        api::conditions::is_true(
            &p.status.clone().unwrap_or_default().conditions,
            ConditionType::Ready,
        )
    })
    .await;
    names
}

#[tokio::test]
async fn pause_why_retry_resume_and_history_through_the_plugin() {
    require_root!();
    let options = SimOptions {
        nodes: 3,
        // Long enough to make the first rebooted host fall back meanwhile.
        reboot_time: Duration::from_secs(5),
        ..SimOptions::default()
    };
    let mut sim = Sim::start(options).await.unwrap();
    let names = rolled_out_v1(&mut sim).await;
    let status = ok(&sim, &["status"]);
    for name in &names {
        assert!(status.contains(&format!("{name} ")), "{status}");
    }
    assert!(status.contains("up to date: runs the target"), "{status}");

    // Pause, then a new image: every node stages it, none reboots.
    assert!(ok(&sim, &["pause", POOL]).contains("paused"));
    sim.push_version("2.0").await.unwrap();
    for name in &names {
        wait_bn(&sim, name, "staged", |b| {
            phase(b) == Some(api::DaemonPhase::Staged)
        })
        .await;
    }
    wait_pool(&sim, "paused", |p| {
        p.spec.rollout.paused
            && pool_reason(p, ConditionType::UpToDate).as_deref() == Some(Reason::Paused.as_str())
    })
    .await;
    let why = ok(&sim, &["why", &names[0]]);
    assert!(why.starts_with("the pool is paused"), "{why}");
    let status = ok(&sim, &["status", POOL]);
    assert!(status.contains("Paused:   yes"), "{status}");

    // Resume; the first node to reboot comes back on the old image.
    assert!(ok(&sim, &["resume", POOL]).contains("resumed"));
    let failed = first_not_ready(&sim).await;
    fall_back(&sim, &failed).await;
    wait_bn(&sim, &failed, "Degraded after its reboot", |b| {
        b.awaits_retry()
    })
    .await;
    let why = ok(&sim, &["why", &failed]);
    assert!(why.starts_with("the node is Degraded"), "{why}");
    assert!(why.contains("not applying again"), "{why}");
    assert!(
        why.contains(&format!("kubectl bootc retry {failed}")),
        "{why}"
    );
    let waiting = names.iter().find(|n| **n != failed).unwrap();
    let why = ok(&sim, &["why", waiting]);
    assert!(why.contains("waiting for a reboot slot"), "{why}");
    assert!(why.contains(&format!("slots held by {failed} ")), "{why}");

    // A retry of a node that does not await one is refused; of the failed
    // one, it reboots again and the rollout completes.
    let (code, _, stderr) = plugin(&sim, &["retry", waiting]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("does not await a retry"), "{stderr}");
    assert_eq!(reboots(&sim, &failed).await, 1);
    assert!(ok(&sim, &["retry", &failed]).contains("retry requested"));
    wait_pool(&sim, "v2 everywhere after the retry", |p| {
        api::conditions::is_true(
            &p.status.clone().unwrap_or_default().conditions,
            ConditionType::Ready,
        )
    })
    .await;
    assert_eq!(reboots(&sim, &failed).await, 2, "{failed} rebooted again");
    let bn = Api::<BootcNode>::all(sim.admin.clone())
        .get(&failed)
        .await
        .unwrap();
    assert!(
        !bn.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(api::labels::RETRY_ANNOTATION),
        "the request is consumed"
    );

    let history = ok(&sim, &["history", POOL]);
    let started = history.find(api::event_reasons::ROLLOUT_STARTED);
    let complete = history.find(api::event_reasons::ROLLOUT_COMPLETE);
    assert!(started.is_some() && started < complete, "{history}");
    let status = ok(&sim, &["status", POOL]);
    assert!(status.contains(Reason::AllUpdated.as_str()), "{status}");
}

/// The preview of a rollout names the waves the controller then makes, in
/// their order, and writes nothing.
#[tokio::test]
async fn the_plan_preview_agrees_with_the_rollout() {
    require_root!();
    let mut sim = Sim::start(SimOptions::default()).await.unwrap();
    rolled_out_v1(&mut sim).await;
    // One node at a time, each told only when a slot awaits it: the order
    // is the planner's alone.
    sim.patch_pool(serde_json::json!({"rollout": {"stageAhead": 0}}))
        .await
        .unwrap();
    let v2 = sim.push_version_tagged("2.0", "next").await.unwrap();
    let image = sim.pinned(&v2);
    let before = Api::<BootcNodePool>::all(sim.admin.clone())
        .get(POOL)
        .await
        .unwrap();
    let preview = ok(&sim, &["plan", POOL, "--image", &image]);
    let waves: Vec<Vec<String>> = preview
        .lines()
        .filter_map(|l| l.strip_prefix("wave "))
        .map(|l| {
            let (_, nodes) = l.split_once(": ").unwrap();
            nodes.split(", ").map(str::to_owned).collect()
        })
        .collect();
    assert_eq!(waves.len(), 3, "{preview}");
    assert!(
        preview.ends_with("then every member runs the target\n"),
        "{preview}"
    );
    let after = Api::<BootcNodePool>::all(sim.admin.clone())
        .get(POOL)
        .await
        .unwrap();
    assert_eq!(
        before.metadata.resource_version, after.metadata.resource_version,
        "the preview wrote to the pool"
    );
    by_flags(&sim, &image, &waves);

    let recorder = tests::recorder::Recorder::start(&sim.cp).await.unwrap();
    sim.patch_pool(serde_json::json!({"image": {"ref": image}}))
        .await
        .unwrap();
    wait_pool(&sim, "v2 everywhere", |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.deployed_digest.as_deref() == Some(v2.as_str()))
    })
    .await;
    let approvals = recorder.approvals().await.unwrap();
    let previewed: Vec<String> = waves.into_iter().flatten().collect();
    assert_eq!(approvals, previewed, "{preview}");
}

/// kubectl's flags, not KUBECONFIG: `--kubeconfig` and `--context` reach
/// the cluster (the file's current context does not); `-o json` prints the
/// plan's waves as the text does; a name that does not exist exits 1.
fn by_flags(sim: &Sim, image: &str, waves: &[Vec<String>]) {
    let path = two_contexts(sim);
    let path = path.to_str().unwrap();
    let flags = ["--kubeconfig", path, "--context", "sim"];
    let run = |args: &[&str]| plugin_by_flags(&[&flags[..], args].concat());

    let (code, json, stderr) = run(&["plan", POOL, "--image", image, "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["apiVersion"], "kubectl-bootc/v1", "{json}");
    assert_eq!(doc["kind"], "Plan", "{json}");
    assert_eq!(doc["waves"], serde_json::json!(waves), "{json}");

    let (code, json, stderr) = run(&["status", "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["pools"][0]["name"], POOL, "{json}");
    assert_eq!(doc["pools"][0]["nodes"].as_array().map(Vec::len), Some(3));

    // Without --context, the file's current context: nothing answers.
    let (code, _, stderr) = plugin_by_flags(&["--kubeconfig", path, "status"]);
    assert_eq!(code, 1, "{stderr}");
    let (code, _, stderr) = plugin_by_flags(&["status", "--kubeconfig", path, "--context", "gone"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--context \"gone\""), "{stderr}");

    for (args, message) in [
        (
            &["status", "nosuch"][..],
            "BootcNodePool \"nosuch\" not found",
        ),
        (&["why", "nosuch"], "Node \"nosuch\" not found"),
        (&["history", "nosuch", "-o", "yaml"], "\"nosuch\" not found"),
        (
            &["plan", "nosuch", "-o", "json"],
            "BootcNodePool \"nosuch\" not found",
        ),
        (&["pause", "nosuch"], "BootcNodePool \"nosuch\" not found"),
    ] {
        let (code, stdout, stderr) = run(args);
        assert_eq!((code, stdout.as_str()), (1, ""), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

/// `kubectl bootc stop --all` holds every pool's new slots at once (the
/// pool says so, and `why` names the switch); `resume --all` lets it go on
/// at once. With an hour between two tag resolutions and the nodes staged,
/// only the watch of the switch brings the controller back to the pool.
#[tokio::test]
async fn stop_all_holds_new_slots_and_resume_all_lets_them_go() {
    require_root!();
    let options = SimOptions {
        tag_interval: Duration::from_secs(3600),
        ..SimOptions::default()
    };
    let mut sim = Sim::start(options).await.unwrap();
    let names = rolled_out_v1(&mut sim).await;
    let before: Vec<usize> =
        futures::future::join_all(names.iter().map(|n| reboots(&sim, n))).await;
    let out = ok(&sim, &["stop", "--all", "--reason", "incident 4521"]);
    assert!(out.starts_with("fleet stopped"), "{out}");
    let v2 = sim.push_version("2.0").await.unwrap();
    ok(&sim, &["refresh", POOL]);
    for name in &names {
        wait_bn(&sim, name, "staged", |b| {
            phase(b) == Some(api::DaemonPhase::Staged)
        })
        .await;
    }
    wait_pool(&sim, "stopped", |p| {
        pool_reason(p, ConditionType::UpToDate).as_deref() == Some(Reason::FleetStopped.as_str())
    })
    .await;
    let why = ok(&sim, &["why", &names[0]]);
    assert!(
        why.starts_with("the fleet is stopped (bootc.dev/stop: incident 4521)"),
        "{why}"
    );
    let after: Vec<usize> = futures::future::join_all(names.iter().map(|n| reboots(&sim, n))).await;
    assert_eq!(before, after, "a node rebooted while the fleet was stopped");

    let out = ok(&sim, &["resume", "--all"]);
    assert!(out.starts_with("fleet resumed"), "{out}");
    wait_pool(&sim, "v2 everywhere", |p| {
        p.status.as_ref().is_some_and(|s| {
            s.deployed_digest.as_deref() == Some(v2.as_str())
                && api::conditions::is_true(&s.conditions, ConditionType::Ready)
        })
    })
    .await;
}

/// `kubectl bootc refresh POOL` resolves the tag at once: with an hour
/// between two resolutions, a pushed image becomes the target within the
/// test's wait only because of it; a pool that follows a digest is refused.
#[tokio::test]
async fn refresh_resolves_the_tag_now() {
    require_root!();
    let options = SimOptions {
        nodes: 1,
        tag_interval: Duration::from_secs(3600),
        ..SimOptions::default()
    };
    let mut sim = Sim::start(options).await.unwrap();
    let v1 = sim.push_version("1.0").await.unwrap();
    sim.add_nodes(1, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_pool(&sim, "v1 is the target", |p| {
        p.status.as_ref().and_then(|s| s.target_digest.as_deref()) == Some(v1.as_str())
    })
    .await;
    let v2 = sim.push_version("2.0").await.unwrap();
    let said = ok(&sim, &["refresh", POOL]);
    assert!(said.contains("resolves"), "{said}");
    wait_pool(&sim, "v2 is the target", |p| {
        p.status.as_ref().and_then(|s| s.target_digest.as_deref()) == Some(v2.as_str())
    })
    .await;

    sim.patch_pool(serde_json::json!({"image": {"ref": sim.pinned(&v2)}}))
        .await
        .unwrap();
    let (code, _, stderr) = plugin(&sim, &["refresh", POOL]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("follows a digest"), "{stderr}");
}

/// The pool's UpToDate message.
fn up_to_date_message(p: &BootcNodePool) -> String {
    api::conditions::message(
        &p.status.clone().unwrap_or_default().conditions,
        ConditionType::UpToDate,
    )
    .unwrap_or_default()
    .to_owned()
}

/// The first line of `kubectl bootc why NODE` and the WHY column of
/// `status` for it: the same headline.
fn headline(sim: &Sim, node: &str) -> String {
    let why = ok(sim, &["why", node]);
    let first = why.lines().next().unwrap_or_default().to_owned();
    let status = ok(sim, &["status", POOL]);
    let row = status
        .lines()
        .find(|l| l.starts_with(&format!("{node} ")))
        .unwrap_or_default();
    // The two commands run a moment apart: an age may have ticked over.
    assert!(
        without_ages(row).ends_with(&without_ages(&first)),
        "status says otherwise: {row:?} vs {first:?}"
    );
    first
}

/// `text` with every age (`4s`, `12m,`) written `Ns`: what two readings a
/// second apart share.
fn without_ages(text: &str) -> String {
    let age = |word: &str| {
        let unit = word.trim_end_matches(',');
        let digits = unit.trim_end_matches(['s', 'm', 'h', 'd']);
        !digits.is_empty()
            && digits.len() < unit.len()
            && digits.bytes().all(|b| b.is_ascii_digit())
    };
    text.split(' ')
        .map(|w| {
            if age(w) {
                w.trim_start_matches(|c: char| c.is_ascii_digit())
            } else {
                w
            }
        })
        .map(|w| w.to_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What holds a staged node (a canary soak, a closed maintenance window, a
/// hold, a blocking pod), `kubectl bootc why` and `status` say as the
/// pool's message does: the plan's one standing, rendered by each.
#[tokio::test]
async fn why_and_status_say_what_the_pool_says() {
    require_root!();
    let mut sim = Sim::start(SimOptions::default()).await.unwrap();
    let names = rolled_out_v1(&mut sim).await;

    // A canary step of one node soaking for an hour: the others wait.
    sim.patch_pool(serde_json::json!({"rollout": {"batches": [1, "100%"], "soakSeconds": 3600}}))
        .await
        .unwrap();
    let v2 = sim.push_version("2.0").await.unwrap();
    let p = Api::<BootcNodePool>::all(sim.admin.clone());
    wait_pool(&sim, "the first step of v2 soaking", |p| {
        let on_v2 = p.status.as_ref().and_then(|s| s.target_digest.as_deref()) == Some(v2.as_str());
        on_v2
            && up_to_date_message(p).contains("1/3 updated")
            && up_to_date_message(p).contains("soaking")
    })
    .await;
    let waiting = names
        .iter()
        .find(|n| !ok(&sim, &["why", n]).starts_with("up to date"))
        .unwrap_or_else(|| panic!("{}", ok(&sim, &["status", POOL])))
        .clone();
    let said = headline(&sim, &waiting);
    let pool = up_to_date_message(&p.get(POOL).await.unwrap());
    let soak = pool
        .split("; ")
        .find(|part| part.contains("soaking"))
        .unwrap();
    assert!(
        said.contains("canary step") && said.contains(soak.split(": ").next().unwrap()),
        "{said} / {pool}"
    );

    // A maintenance window that opens in three hours.
    let later = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(3))
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%H:%M")
        .to_string();
    sim.patch_pool(
        serde_json::json!({"rollout": {"batches": null, "soakSeconds": null,
        "maintenanceWindows": [{"start": later, "duration": "1h"}]}}),
    )
    .await
    .unwrap();
    wait_pool(&sim, "outside the window", |p| {
        pool_reason(p, ConditionType::UpToDate).as_deref()
            == Some(Reason::OutsideMaintenanceWindow.as_str())
    })
    .await;
    let said = headline(&sim, &waiting);
    assert!(
        said.contains("outside the pool's maintenance windows"),
        "{said}"
    );
    let pool = up_to_date_message(&p.get(POOL).await.unwrap());
    assert!(pool.contains("outside the maintenance windows"), "{pool}");

    // A hold on the waiting node, the window gone: it is named as held.
    let hold = format!(
        "{}alice=kernel-debugging",
        api::labels::HOLD_ANNOTATION_PREFIX
    );
    annotate_node(&sim, &waiting, &hold).await;
    sim.patch_pool(serde_json::json!({"rollout": {"maintenanceWindows": null}}))
        .await
        .unwrap();
    wait_pool(&sim, "the held node named", |p| {
        up_to_date_message(p).contains("held by hold.bootc.dev/<who> annotations")
    })
    .await;
    let said = headline(&sim, &waiting);
    assert!(said.contains("held: given no reboot slot"), "{said}");
    assert!(up_to_date_message(&p.get(POOL).await.unwrap()).contains(&waiting));

    // A blocking pod on it instead of the hold.
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(sim.admin.clone(), "default");
    let etl = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "etl-1", "labels": {"app": "etl"}},
        "spec": {"nodeName": waiting, "automountServiceAccountToken": false,
                 "containers": [{"name": "etl", "image": "example.invalid/etl:1"}]},
    }))
    .unwrap();
    k8s::create_running_pod(&pods, &etl).await.unwrap();
    sim.patch_pool(serde_json::json!({"disruption": {"blockingPods": {
        "selector": {"matchLabels": {"app": "etl"}}}}}))
        .await
        .unwrap();
    annotate_node(
        &sim,
        &waiting,
        &format!("{}alice", api::labels::HOLD_ANNOTATION_PREFIX),
    )
    .await;
    wait_pool(&sim, "the blocked node named", |p| {
        up_to_date_message(p).contains("run blocking pods")
    })
    .await;
    let said = headline(&sim, &waiting);
    assert!(
        said.contains("its Node runs default/etl-1, a blocking pod"),
        "{said}"
    );
    let pool = up_to_date_message(&p.get(POOL).await.unwrap());
    assert!(
        pool.contains(&format!("{waiting} (default/etl-1)")),
        "{pool}"
    );
}

/// Annotates a Node (`key=value`), or removes the annotation (`key`).
async fn annotate_node(sim: &Sim, node: &str, annotation: &str) {
    let (key, value) = match annotation.split_once('=') {
        Some((key, value)) => (key, serde_json::json!(value)),
        None => (annotation, serde_json::Value::Null),
    };
    Api::<k8s_openapi::api::core::v1::Node>::all(sim.admin.clone())
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {key: value}}}),
            ),
        )
        .await
        .unwrap();
}
