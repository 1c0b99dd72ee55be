//! Gates outside the pool's own objects that hold new reboot slots back:
//! `spec.disruption.blockingPods`, `spec.rollout.alertGate`, and the
//! silences of `spec.rollout.silences` (a silence that could not be made).
//!
//! The runtime asks them (the pods from the API server, the alerts from
//! Prometheus) and hands the answers to the plan in [`Gates`]; this module
//! is the one reading of those answers.
//!
//! * A member whose Node runs a blocking pod (bound to it, not finished,
//!   matching the selector, in a namespace the namespace selector matches)
//!   is no candidate for a slot, like a held one. A member already in a slot
//!   goes on: its drain evicts such a pod like any other.
//! * While a matching alert fires, no new slot is handed out.
//! * A gate that could not be asked holds every new slot (fail closed) and
//!   says why; so does a silence of `spec.rollout.silences` that could not
//!   be made or checked (the person asked not to be paged: the next node
//!   waits for Alertmanager, the nodes in slots go on).
//! * Staging goes on: the gates hold reboot slots only.
//! * A gate that holds is asked again after [`GATE_RECHECK`]: the plan
//!   requeues the pool, and the runtime keeps an answer that long.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::{BlockingPods, HealthPods};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube_core::{ResourceExt, Selector, SelectorExt};

use crate::members::selector;

/// How long a gate's answer is kept, and how soon a pool a gate holds is
/// looked at again.
pub const GATE_RECHECK: Duration = Duration::from_secs(30);

/// What the gates said, as the runtime asked them (the default: nothing
/// holds, for a pool that uses no gate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gates {
    /// `spec.disruption.blockingPods`: the nodes that run a blocking pod,
    /// each with the first such pod (`namespace/name`); or why the pods
    /// could not be listed.
    pub blocking_pods: Result<BTreeMap<String, String>, String>,
    /// `spec.rollout.alertGate`: the matching alerts that fire, each as
    /// `alertname{label="value",...}`; or why Prometheus did not answer.
    pub alerts: Result<Vec<String>, String>,
    /// `spec.health.pods`: the pods each entry matches, by the node they
    /// are bound to (see [`health_pods`]); or why they could not be listed.
    pub health_pods: Result<BTreeMap<String, Vec<PodSeen>>, String>,
    /// The daemon pods that cannot run, by node, each described
    /// ([`daemon_pod_problems`]); asked only while a member's daemon is
    /// silent. Err: why they could not be listed (nothing is concluded).
    pub daemon_pods: Result<BTreeMap<String, String>, String>,
    /// The fleet's switch: the value of `bootc.dev/stop` on the operator's
    /// Namespace, while set (who and why). No pool hands out a new slot.
    pub fleet_stop: Option<String>,
    /// With the switch, `bootc.dev/stop-before-approval`: nodes in slots
    /// are not approved to boot either.
    pub fleet_holds_approvals: bool,
    /// `spec.rollout.silences`: why the silences of the nodes in slots
    /// could not be made or checked at the pool's Alertmanager
    /// ([`crate::reboot::silences`]); the next slot waits for them.
    pub silences: Result<(), String>,
}

/// The fleet's switch as the operator's Namespace carries it (its
/// annotations): `bootc.dev/stop`'s value while on, and whether
/// `bootc.dev/stop-before-approval: "true"` holds approvals too. One
/// reading, for the controller and the plugin alike.
pub fn fleet_switch(annotations: &BTreeMap<String, String>) -> (Option<String>, bool) {
    let stop = annotations.get(api::labels::FLEET_STOP_ANNOTATION).cloned();
    let flag = annotations.get(api::labels::FLEET_STOP_BEFORE_APPROVAL_ANNOTATION);
    let holds = stop.is_some() && flag.is_some_and(|v| v == "true");
    (stop, holds)
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            blocking_pods: Ok(BTreeMap::new()),
            alerts: Ok(Vec::new()),
            health_pods: Ok(BTreeMap::new()),
            daemon_pods: Ok(BTreeMap::new()),
            fleet_stop: None,
            fleet_holds_approvals: false,
            silences: Ok(()),
        }
    }
}

/// A pod of `spec.health.pods` on a node, as the health gate reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSeen {
    /// The entry of `spec.health.pods` it matches.
    pub entry: usize,
    /// `namespace/name`.
    pub name: String,
    /// Its Ready condition is True.
    pub ready: bool,
    /// When its Ready condition last changed.
    pub since: Option<jiff::Timestamp>,
}

/// The pool-wide gates now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Gate {
    #[default]
    Open,
    /// Matching alerts fire (described as in [`Gates::alerts`]).
    AlertsFiring(Vec<String>),
    /// A gate could not be asked: the field of the gate and the error.
    Unanswered { field: &'static str, error: String },
}

/// The field of the blocking-pod selector, as errors name it.
pub const BLOCKING_PODS_FIELD: &str = "spec.disruption.blockingPods";
/// The field of the alert gate, as errors name it.
pub const ALERT_GATE_FIELD: &str = "spec.rollout.alertGate";

impl Gate {
    /// The pool-wide gate from what the gates said: an unanswered gate
    /// first (it may hide anything), then firing alerts.
    pub fn of(gates: &Gates) -> Gate {
        if let Err(error) = &gates.blocking_pods {
            return Gate::Unanswered {
                field: BLOCKING_PODS_FIELD,
                error: error.clone(),
            };
        }
        if let Err(error) = &gates.silences {
            return Gate::Unanswered {
                field: crate::reboot::silences::FIELD,
                error: error.clone(),
            };
        }
        match &gates.alerts {
            Err(error) => Gate::Unanswered {
                field: ALERT_GATE_FIELD,
                error: error.clone(),
            },
            Ok(firing) if !firing.is_empty() => Gate::AlertsFiring(firing.clone()),
            Ok(_) => Gate::Open,
        }
    }

    pub fn is_open(&self) -> bool {
        *self == Gate::Open
    }

    /// What holds the slots, for the pool's status.
    pub fn message(&self) -> String {
        match self {
            Gate::Open => String::new(),
            Gate::AlertsFiring(alerts) => format!(
                "alerts fire ({ALERT_GATE_FIELD}), no new reboot slot until they resolve: {}",
                alerts.join(", ")
            ),
            Gate::Unanswered { field, error } => {
                format!("{field} could not be checked, no new reboot slot (fail closed): {error}")
            }
        }
    }
}

impl Gates {
    /// The pods of `spec.health.pods` bound to `node` (or why they could
    /// not be listed).
    pub fn health_pods_on(&self, node: &str) -> Result<&[PodSeen], &str> {
        match &self.health_pods {
            Ok(by_node) => Ok(by_node.get(node).map_or(&[], Vec::as_slice)),
            Err(e) => Err(e),
        }
    }

    /// Why the daemon pod on `node` cannot run, if it cannot.
    pub fn daemon_down(&self, node: &str) -> Option<&str> {
        self.daemon_pods
            .as_ref()
            .ok()?
            .get(node)
            .map(String::as_str)
    }

    /// The blocking pod on `node`, if any.
    pub fn blocking_pod(&self, node: &str) -> Option<&str> {
        self.blocking_pods
            .as_ref()
            .ok()?
            .get(node)
            .map(String::as_str)
    }
}

/// The blocking pods' label selector, parsed (its text is what the runtime
/// lists pods with), or an error naming the field.
pub fn pod_selector(spec: &BlockingPods) -> Result<Selector, String> {
    selector::parse_at(&spec.selector, &format!("{BLOCKING_PODS_FIELD}.selector"))
}

/// The namespace selector, parsed (None: every namespace).
pub fn namespace_selector(spec: &BlockingPods) -> Result<Option<Selector>, String> {
    spec.namespace_selector
        .as_ref()
        .map(|s| selector::parse_at(s, &format!("{BLOCKING_PODS_FIELD}.namespaceSelector")))
        .transpose()
}

/// The names of the namespaces of `spec`'s namespace selector among
/// `namespaces` (None: the selector is unset, every namespace counts).
pub fn matching_namespaces<'n>(
    spec: &BlockingPods,
    namespaces: impl IntoIterator<Item = &'n Namespace>,
) -> Result<Option<BTreeSet<String>>, String> {
    let Some(selector) = namespace_selector(spec)? else {
        return Ok(None);
    };
    Ok(Some(
        namespaces
            .into_iter()
            .filter(|n| selector.matches(n.labels()))
            .map(ResourceExt::name_any)
            .collect(),
    ))
}

/// Which nodes run a blocking pod, and the first of them on each (by
/// namespace and name): the pods bound to a node and not finished that the
/// selector matches, in `namespaces` (the names the namespace selector
/// matches; None: every namespace).
pub fn blocking_pods<'p>(
    spec: &BlockingPods,
    pods: impl IntoIterator<Item = &'p Pod>,
    namespaces: Option<&BTreeSet<String>>,
) -> Result<BTreeMap<String, String>, String> {
    let selector = pod_selector(spec)?;
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for pod in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let namespace = pod.namespace().unwrap_or_default();
        let in_namespace = namespaces.is_none_or(|n| n.contains(&namespace));
        if !in_namespace || finished(pod) || !selector.matches(pod.labels()) {
            continue;
        }
        let name = format!("{namespace}/{}", pod.name_any());
        found
            .entry(node.to_owned())
            .and_modify(|first| {
                if name < *first {
                    first.clone_from(&name);
                }
            })
            .or_insert(name);
    }
    Ok(found)
}

/// The field of the health gate's pods, as errors name it.
pub const HEALTH_PODS_FIELD: &str = "spec.health.pods";

/// The label selector of `spec.health.pods[entry]`, parsed.
pub fn health_pod_selector(spec: &HealthPods, entry: usize) -> Result<Selector, String> {
    selector::parse_at(
        &spec.selector,
        &format!("{HEALTH_PODS_FIELD}[{entry}].selector"),
    )
}

/// The pods of `spec.health.pods[entry]` among `pods` (listed in its
/// namespace), by the node they are bound to, unfinished ones only.
pub fn health_pods<'p>(
    spec: &HealthPods,
    entry: usize,
    pods: impl IntoIterator<Item = &'p Pod>,
    found: &mut BTreeMap<String, Vec<PodSeen>>,
) -> Result<(), String> {
    let selector = health_pod_selector(spec, entry)?;
    for pod in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        if pod.namespace().as_deref() != Some(spec.namespace.as_str())
            || finished(pod)
            || !selector.matches(pod.labels())
        {
            continue;
        }
        let ready = api::node_health::pod_ready(pod);
        found.entry(node.to_owned()).or_default().push(PodSeen {
            entry,
            name: format!("{}/{}", spec.namespace, pod.name_any()),
            ready: ready.is_some_and(|(ready, _)| ready),
            since: ready.and_then(|(_, since)| since),
        });
    }
    Ok(())
}

/// The container waiting reasons of a pod that will not run without a
/// person: the kubelet backs off, or cannot make the container at all.
const CANNOT_RUN: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// The daemon pods among `pods` (labelled [`api::labels::DAEMON_APP_NAME`])
/// that cannot run, by the node they are bound to: "namespace/pod:
/// CrashLoopBackOff: <the kubelet's message> (restarted N times)".
pub fn daemon_pod_problems<'p>(
    pods: impl IntoIterator<Item = &'p Pod>,
) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for pod in pods {
        let daemon = pod
            .labels()
            .get(api::labels::APP_NAME_LABEL)
            .map(String::as_str)
            == Some(api::labels::DAEMON_APP_NAME);
        let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|_| daemon)
        else {
            continue;
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default();
        let problem = statuses.iter().find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            CANNOT_RUN.contains(&reason).then(|| {
                let message = waiting.message.as_deref().unwrap_or("no message");
                format!("{reason}: {message} (restarted {} times)", c.restart_count)
            })
        });
        if let Some(problem) = problem {
            let name = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
            found.insert(node.to_owned(), format!("{name}: {problem}"));
        }
    }
    found
}

/// The pods that can block a node as a field selector, for the API server
/// to apply before [`blocking_pods`] does: bound to a node, not finished.
pub const RUNNING_ON_A_NODE: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// Has the pod finished (Succeeded or Failed)? Such a pod holds nothing.
fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}
