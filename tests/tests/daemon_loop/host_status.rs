//! What bootc says reaches the status: its errors classified, a failing
//! `bootc status` reported, a host not deployed via bootc left alone.

use api::conditions;
use api::{ConditionType, Reason};
use tests::daemon_loop::{degraded, phase, spec, stages, wait_bn, world};
use tests::fake_bootc::Fault;
use tests::fake_host::{FakeHost, image};
use tests::node_agent::{Agent, AgentOptions, create_bootc_node};
use tests::require_root;

/// bootc's errors reach the BootcNode's Degraded condition classified, with
/// bootc's own message.
#[tokio::test]
async fn bootc_errors_reach_the_status_classified() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let mut running = Vec::new();
    for (fault, reason) in [
        (Some(Fault::NotFound), Reason::ImageNotFound),
        (Some(Fault::Unauthorized), Reason::RegistryUnauthorized),
        (Some(Fault::PullError), Reason::RegistryUnreachable),
        (Some(Fault::NoSpace), Reason::InsufficientSpace),
        (None, Reason::NotABootcHost),
    ] {
        let name = format!("err-{}", reason.as_str().to_lowercase());
        let host = FakeHost::start(fault.map(|_| a.as_str())).unwrap();
        host.layout.set_fault(fault).unwrap();
        create_bootc_node(&w.admin, &name, spec(&b)).await.unwrap();
        let agent = Agent::start(&w.cp, &host, &AgentOptions::new(&name), w.logs.path()).unwrap();
        running.push((name, reason, fault, host, agent));
    }
    for (name, reason, fault, _host, agent) in &running {
        let bn = wait_bn(&w.nodes, name, ConditionType::Degraded.as_str(), |bn| {
            degraded(bn).is_some()
        })
        .await;
        let c = conditions::find(
            &bn.status.as_ref().unwrap().conditions,
            ConditionType::Degraded,
        )
        .unwrap()
        .clone();
        assert_eq!(c.reason, *reason, "{}\n{}", c.message, agent.log_text());
        let bootcs = match fault {
            Some(f) => f.message(&b),
            // bootc status answers with no booted deployment: nothing is
            // staged on such a host (see the test below).
            None => "not deployed via bootc".into(),
        };
        assert!(c.message.contains(&bootcs), "{reason}: {}", c.message);
    }
}

/// `bootc status` failing (a broken bootc) is reported in the BootcNode's
/// status, with bootc's words and its own reason, not only logged; nothing
/// is staged on a host the daemon cannot see. A host that bootc says is not
/// deployed via bootc is reported as such, and is not staged either. Once
/// status answers again (the daemon reads it again on its own), the node is
/// healthy and goes on.
#[tokio::test]
async fn a_failing_bootc_status_is_reported_and_the_node_recovers() {
    require_root!();
    let w = world().await;
    let (a, b) = (image('a'), image('b'));
    let broken = FakeHost::start(Some(&a)).unwrap();
    broken
        .layout
        .set_status_fault(Some(tests::fake_bootc::BROKEN_STATUS))
        .unwrap();
    let foreign = FakeHost::start(None).unwrap();
    let mut agents = Vec::new();
    for (name, host) in [("broken", &broken), ("foreign", &foreign)] {
        create_bootc_node(&w.admin, name, spec(&b)).await.unwrap();
        agents.push(Agent::start(&w.cp, host, &AgentOptions::new(name), w.logs.path()).unwrap());
    }
    for (name, reason, words) in [
        (
            "broken",
            Reason::BootcStatusFailed,
            tests::fake_bootc::BROKEN_STATUS,
        ),
        ("foreign", Reason::NotABootcHost, "not deployed via bootc"),
    ] {
        let bn = wait_bn(&w.nodes, name, ConditionType::Degraded.as_str(), |bn| {
            degraded(bn).is_some()
        })
        .await;
        let status = bn.status.unwrap();
        let c = conditions::find(&status.conditions, ConditionType::Degraded).unwrap();
        assert_eq!(c.reason, reason, "{name}: {}", c.message);
        assert!(c.message.contains(words), "{name}: {}", c.message);
        // bootc's own words and status, not a failed start job's (systemd-run
        // with --service-type=exec, see fake_systemd::job_failed).
        assert!(!c.message.contains("Job for"), "{name}: {}", c.message);
        assert_eq!(
            status.observed_generation, bn.metadata.generation,
            "{name}: spec seen"
        );
    }
    assert!(stages(&broken).is_empty(), "staged on a host it cannot see");
    assert!(
        stages(&foreign).is_empty(),
        "staged on a host bootc does not run"
    );

    // bootc is repaired: the daemon reads status again after its backoff.
    broken.layout.set_status_fault(None).unwrap();
    let bn = wait_bn(&w.nodes, "broken", "healthy and Staged", |bn| {
        degraded(bn).is_none() && phase(bn) == Some(Reason::Staged.as_str())
    })
    .await;
    let c = conditions::find(&bn.status.unwrap().conditions, ConditionType::Degraded)
        .unwrap()
        .clone();
    assert_eq!(c.reason, Reason::Healthy);
    assert_eq!(stages(&broken).len(), 1);
}
