//! The guards that hold a node whatever the pool's rules say (see
//! docs/operations.md, "Guards"): a host bootc cannot update from an image.

use super::*;

/// Waits until `name`'s BootcNode satisfies `cond`.
async fn wait_bootc_node(
    sim: &Sim,
    name: &str,
    what: &str,
    cond: impl Fn(&BootcNode) -> bool + Send + 'static,
) {
    let result = k8s::wait_for(
        Api::<BootcNode>::all(sim.admin.clone()),
        name,
        ROLLOUT,
        what,
        move |b: Option<&BootcNode>| b.is_some_and(&cond),
    )
    .await;
    if let Err(e) = result {
        panic!("{e}\n{}", diagnostics(sim).await);
    }
}

/// `kubectl bootc why NODE`, as a person runs it: its output.
fn why(sim: &Sim, node: &str) -> String {
    let out = std::process::Command::new(tests::fake_host::bin("kubectl-bootc"))
        .args(["why", node])
        .env("KUBECONFIG", sim.cp.kubeconfig(tests::Identity::Admin))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl bootc why: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A person layers a package on a node by hand: bootc marks its deployment
/// incompatible. Its daemon says so in bootc's words (Degraded), the pool
/// names it, it is never told the new image, never approved, never
/// rebooted, and the pool is never all updated; reset, it is updated.
#[tokio::test]
async fn a_host_bootc_marks_incompatible_is_named_in_bootcs_words_and_never_moved() {
    require_root!();
    let (sim, recorder, v1) = started(SimOptions::default(), 3).await;
    sim.layer_locally(FIRST, true).await.unwrap();
    wait_bootc_node(&sim, FIRST, "Degraded in bootc's words", |b| {
        b.degraded().is_some_and(|c| {
            c.reason == Reason::HostIncompatible && c.message.contains(api::BOOTC_INCOMPATIBLE)
        })
    })
    .await;

    let v2 = sim.push_version("2.0").await.unwrap();
    let target = v2.clone();
    let named = format!("node {FIRST}: bootc marks the booted deployment incompatible");
    let pool = wait_pool(
        &sim,
        "the others updated, the layered node named",
        move |p| {
            p.status.as_ref().is_some_and(|s| {
                s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count == 2
            }) && condition(p, ConditionType::Degraded).is_some_and(|c| {
                c.0 == "True" && c.1 == Reason::HostIncompatible && c.2.contains(&named)
            })
        },
    )
    .await;
    let up_to_date = condition(&pool, ConditionType::UpToDate).unwrap();
    assert_ne!(up_to_date.1, Reason::AllUpdated.as_str(), "{up_to_date:?}");
    let bootc_nodes = Api::<BootcNode>::all(sim.admin.clone());
    let held = bootc_nodes.get(FIRST).await.unwrap();
    assert_eq!(held.spec.desired_image, sim.pinned(&v1));
    let approved = recorder.approvals().await.unwrap();
    assert!(!approved.iter().any(|n| n == FIRST), "{approved:?}");
    assert_eq!(sim.reboots().await.get(FIRST).map_or(0, Vec::len), 0);
    let said = why(&sim, FIRST);
    assert!(
        said.contains("bootc cannot update its host from an image")
            && said.contains(api::BOOTC_INCOMPATIBLE),
        "{said}"
    );

    // `rpm-ostree reset` by hand: the node is updated like the others.
    sim.layer_locally(FIRST, false).await.unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
    wait_pool(&sim, "no longer degraded", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::Healthy)
    })
    .await;
}

/// The operator upgraded while its DaemonSet has not rolled one node yet:
/// that node's daemon is an older build, speaking an older contract. It is
/// told no new image, never approved, never rebooted, and the pool names
/// it with its build while the others roll; once its pod runs this release,
/// it is updated like the others.
#[tokio::test]
async fn a_node_whose_daemon_is_too_old_is_named_and_never_moved_until_its_pod_is_upgraded() {
    require_root!();
    let (sim, recorder, v1) = started(SimOptions::default(), 3).await;
    // The older build on the first node: its status says so (this build's
    // daemon would write its own over it, so none runs there meanwhile).
    sim.stop_daemon(FIRST).await.unwrap();
    let older = api::daemon_contract::DRIVEN.start() - 1;
    let bootc_nodes = Api::<BootcNode>::all(sim.admin.clone());
    let body = json!({"status": {"daemon": {"version": "0.0.1", "contract": older}}});
    bootc_nodes
        .patch_status(
            FIRST,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&body),
        )
        .await
        .unwrap();

    let v2 = sim.push_version("2.0").await.unwrap();
    let target = v2.clone();
    let named = format!("node {FIRST} runs bootc-daemon 0.0.1 (contract {older})");
    let on_pool = named.clone();
    wait_pool(&sim, "the others updated, the old daemon named", move |p| {
        p.status.as_ref().is_some_and(|s| {
            s.target_digest.as_deref() == Some(target.as_str()) && s.updated_count == 2
        }) && condition(p, ConditionType::Degraded)
            .is_some_and(|c| c.0 == "True" && c.1 == Reason::DaemonTooOld && c.2.contains(&on_pool))
    })
    .await;
    let held = bootc_nodes.get(FIRST).await.unwrap();
    assert_eq!(held.spec.desired_image, sim.pinned(&v1));
    let approved = recorder.approvals().await.unwrap();
    assert!(!approved.iter().any(|n| n == FIRST), "{approved:?}");
    assert_eq!(sim.reboots().await.get(FIRST).map_or(0, Vec::len), 0);
    let said = why(&sim, FIRST);
    assert!(said.contains(&named), "{said}");

    // The DaemonSet rolls its pod to this release.
    sim.restart_daemon(FIRST).await.unwrap();
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
    wait_pool(&sim, "no longer degraded", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| c.1 == Reason::Healthy)
    })
    .await;
    let daemon = bootc_nodes.get(FIRST).await.unwrap().status.unwrap().daemon;
    assert_eq!(
        daemon.map(|d| d.contract),
        Some(api::daemon_contract::CONTRACT)
    );
}

/// A registry hiccup while a node stages: its daemon retries with backoff,
/// reports Staging with the last error, and is never Degraded (it was,
/// and back, before failures settled); once the registry answers, the
/// rollout completes.
#[tokio::test]
async fn a_registry_hiccup_while_staging_never_flips_the_node_degraded() {
    require_root!();
    let (sim, recorder, _v1) = started(SimOptions::default(), 3).await;
    let set_fault = |fault| {
        let sim = &sim;
        async move {
            let nodes = sim.nodes.lock().await;
            let node = nodes.iter().find(|n| n.name == FIRST).unwrap();
            node.host.layout.set_fault(fault).unwrap();
        }
    };
    set_fault(Some(Fault::PullError)).await;
    let v2 = sim.push_version("2.0").await.unwrap();
    // Its first pull failed: it says so, and retries (a daemon that
    // alarms at once says Degraded instead, which the end finds).
    wait_bootc_node(&sim, FIRST, "a failed pull reported", |b| {
        b.is_degraded()
            || b.status.as_ref().is_some_and(|s| {
                api::conditions::message(&s.conditions, ConditionType::Idle)
                    .is_some_and(|m| m.contains("retrying") && m.contains("connection refused"))
            })
    })
    .await;
    set_fault(None).await;
    rolled_out_one_at_a_time(&sim, &recorder, &v2, 3).await;
    let degraded = recorder.ever_degraded().await.unwrap();
    assert!(degraded.is_empty(), "Degraded at some point: {degraded:?}");
}

/// Waits until the first node's host satisfies `cond`; if it does not,
/// fails with the cluster's and that daemon's story.
async fn wait_first_host(
    sim: &Sim,
    what: &str,
    cond: impl Fn(&tests::fake_bootc::State) -> bool,
) -> tests::fake_bootc::State {
    match sim.wait_host(FIRST, what, ROLLOUT, cond).await {
        Ok(state) => state,
        Err(e) => panic!(
            "{e}\n{}\ndaemon log:\n{}",
            diagnostics(sim).await,
            sim.daemon_logs().remove(FIRST).unwrap_or_default()
        ),
    }
}

/// A node leaves its pool (unlabelled) while the pool's new image is
/// staged there unlocked: any reboot would boot an update nobody
/// approved. Its daemon tells it back to what it runs (the booted image,
/// pinned to its digest), so that rebooted by hand it boots what it ran.
#[tokio::test]
async fn a_node_that_leaves_with_the_pools_image_staged_boots_what_it_ran() {
    require_root!();
    let (sim, _recorder, v1) = started(SimOptions::default(), 1).await;
    let hold = format!("{}e2e", api::labels::HOLD_ANNOTATION_PREFIX);
    kubectl(
        &sim,
        &["annotate", "node", FIRST, &format!("{hold}=staged only")],
    );
    let v2 = sim.push_version("2.0").await.unwrap();
    wait_phase(&sim, FIRST, Reason::Staged.as_str()).await;
    wait_first_host(&sim, "v2 staged", |s| {
        s.staged.as_ref().is_some_and(|d| d.digest == v2)
    })
    .await;
    // Unlocked: the next orderly reboot would boot v2.
    sim.unlock_staged(FIRST).await.unwrap();

    leave_pool(&sim, FIRST).await;
    let state = wait_first_host(&sim, "told back to v1", |s| {
        s.staged.as_ref().is_some_and(|d| d.digest == v1)
    })
    .await;
    assert_eq!(
        state.staged.unwrap().image,
        sim.pinned(&v1),
        "the booted image, pinned to its digest"
    );
    let reboot = sim
        .reboot_unplanned(FIRST, UnplannedReboot::Orderly)
        .await
        .unwrap();
    let state = wait_first_host(&sim, "rebooted, nothing staged", |s| s.staged.is_none()).await;
    assert_eq!(
        state.booted.unwrap().digest,
        v1,
        "booted what it ran: {reboot:?}"
    );
}

/// Every BootcNode is told `digest`, and nothing else.
async fn told_only(sim: &Sim, digest: &str) {
    let image = sim.pinned(digest);
    let (_, bns, _) = sim.snapshot().await.unwrap();
    let told: Vec<&str> = bns.iter().map(|b| b.spec.desired_image.as_str()).collect();
    assert!(
        told.iter().all(|t| *t == image),
        "told {told:?}, not only {image}"
    );
}

/// The OS guards on a new target, before any node is told: a tag moved to
/// the next major release of the members' OS is refused on the pool,
/// naming both releases and the field that allows it; allowed, it rolls
/// out; an image that is not a bootc image is refused.
#[tokio::test]
async fn a_major_upgrade_waits_for_the_pool_to_allow_it_and_a_plain_image_is_refused() {
    use api::image_labels::{CONTAINERS_BOOTC, OS_ID, OS_VERSION_ID};
    use tests::sim::TAG;
    require_root!();
    let mut sim = Sim::start(SimOptions::default()).await.unwrap();
    let recorder = Recorder::start(&sim.cp).await.unwrap();
    let fedora = |version| [(OS_ID, "fedora"), (OS_VERSION_ID, version)];
    let v1 = sim.push_labelled("42.1", TAG, &fedora("42")).await.unwrap();
    sim.add_nodes(2, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_rolled(&sim, &v1, 2).await;

    let v2 = sim.push_labelled("43.1", TAG, &fedora("43")).await.unwrap();
    wait_pool(&sim, "the major upgrade refused", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.1 == Reason::OsMajorChange
                && c.2.contains("is fedora 43 and 2 member(s) run fedora 42")
                && c.2.contains("spec.image.allowMajorUpgrade: true")
        })
    })
    .await;
    told_only(&sim, &v1).await;

    sim.patch_pool(json!({"image": {"allowMajorUpgrade": true}}))
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v2, 2).await;

    let _plain = sim
        .push_labelled("43.2", TAG, &[(CONTAINERS_BOOTC, "")])
        .await
        .unwrap();
    wait_pool(&sim, "a plain image refused", |p| {
        condition(p, ConditionType::Degraded)
            .is_some_and(|c| c.1 == Reason::ImageNotBootable && c.2.contains("containers.bootc=1"))
    })
    .await;
    told_only(&sim, &v2).await;
}

/// The kubelet ships in the OS image. A target that declares none rolls
/// out, and the pool says its kubelet was not checked; one whose kubelet is
/// newer than the API server is refused before any node is told, the
/// policy quoted; one within the policy rolls out, and the pool says so.
#[tokio::test]
async fn a_kubelet_newer_than_the_api_server_is_refused_and_one_undeclared_is_said_so() {
    use api::image_labels::KUBELET_VERSION;
    use tests::sim::TAG;
    require_root!();
    let mut sim = Sim::start(SimOptions::default()).await.unwrap();
    let recorder = Recorder::start(&sim.cp).await.unwrap();
    let info = sim.admin.apiserver_version().await.unwrap();
    let api_server = ::rollout::holds::os_guard::KubeVersion::parse(&info.git_version).unwrap();
    let kubelet = |minor: u32| format!("{}.{minor}.0", api_server.major);
    let v1 = sim.push_labelled("1.0", TAG, &[]).await.unwrap();
    sim.add_nodes(2, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_rolled(&sim, &v1, 2).await;
    wait_pool(&sim, "the kubelet said not checked", |p| {
        condition(p, ConditionType::KubeletSkewChecked)
            .is_some_and(|c| c.0 == "False" && c.1 == Reason::KubeletUndeclared)
    })
    .await;

    let newer = kubelet(api_server.minor + 1);
    let _v2 = sim
        .push_labelled("2.0", TAG, &[(KUBELET_VERSION, &newer)])
        .await
        .unwrap();
    let said = format!(
        "its kubelet {api_server_next} is newer than the API server {api_server}",
        api_server_next = ::rollout::holds::os_guard::KubeVersion {
            minor: api_server.minor + 1,
            ..api_server
        }
    );
    wait_pool(&sim, "the newer kubelet refused", move |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.1 == Reason::KubeletSkew
                && c.2.contains(&said)
                && c.2.contains("may be up to three minor versions older")
        })
    })
    .await;
    told_only(&sim, &v1).await;

    let within = kubelet(api_server.minor - 1);
    let v3 = sim
        .push_labelled("3.0", TAG, &[(KUBELET_VERSION, &within)])
        .await
        .unwrap();
    rolled_out_within_one(&sim, &recorder, &v3, 2).await;
    let checked = within.clone();
    wait_pool(&sim, "the kubelet said checked", move |p| {
        condition(p, ConditionType::KubeletSkewChecked)
            .is_some_and(|c| c.0 == "True" && c.1 == Reason::KubeletWithinSkew)
            && p.status
                .as_ref()
                .and_then(|s| s.target_kubelet_version.as_deref())
                == Some(checked.as_str())
    })
    .await;
}

/// Signs `digest` of the sim's repository with `key`, as cosign does.
async fn sign(sim: &Sim, key: &p256::ecdsa::SigningKey, digest: &str) {
    sim.registry
        .push_cosign_signature(tests::sim::REPO, digest, digest, key)
        .await
        .unwrap();
}

/// The signature policy on a new target, before any node is told: with a
/// policy that asks every image for the cosign signature of one key, a
/// signed image rolls out, a tag moved to an unsigned one is refused on
/// the pool (`SignatureRefused`) and no BootcNode is told it; once it is
/// signed (cosign's layout, pushed to the registry), the next resolution
/// rolls it out.
#[tokio::test]
async fn an_unsigned_image_is_refused_before_any_node_is_told() {
    use base64::Engine;
    use p256::pkcs8::EncodePublicKey;
    use tests::sim::TAG;
    require_root!();
    let key = p256::ecdsa::SigningKey::from_slice(&[9; 32]).unwrap();
    let pem = key
        .verifying_key()
        .to_public_key_pem(Default::default())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.json");
    let key_data = base64::engine::general_purpose::STANDARD.encode(pem);
    std::fs::write(
        &policy,
        json!({"default": [{"type": "sigstoreSigned", "keyData": key_data}]}).to_string(),
    )
    .unwrap();
    let mut sim = Sim::start(SimOptions {
        signature_policy: Some(policy),
        ..Default::default()
    })
    .await
    .unwrap();
    let v1 = sim.push_labelled("1", TAG, &[]).await.unwrap();
    sign(&sim, &key, &v1).await;
    sim.add_nodes(2, &v1).await.unwrap();
    sim.create_pool().await.unwrap();
    sim.start_kubelet();
    wait_rolled(&sim, &v1, 2).await;

    let v2 = sim.push_labelled("2", TAG, &[]).await.unwrap();
    wait_pool(&sim, "the unsigned image refused", |p| {
        condition(p, ConditionType::Degraded).is_some_and(|c| {
            c.1 == Reason::SignatureRefused
                && c.2.contains("default is sigstoreSigned")
                && c.2.contains("the registry has no signature for it")
        })
    })
    .await;
    told_only(&sim, &v1).await;

    sign(&sim, &key, &v2).await;
    wait_rolled(&sim, &v2, 2).await;
}
