//! Label, annotation and finalizer names. Every name the operator writes on
//! an object it does not own is defined here and nowhere else.

/// API group of both custom resources.
pub const GROUP: &str = "node.bootc.dev";
/// Served version of both custom resources.
pub const VERSION: &str = "v1alpha1";

/// On a Node: the node belongs to a pool. The DaemonSet selects on it.
pub const MANAGED_LABEL: &str = "bootc.dev/managed";
/// On a BootcNode, written by 0.1.0 only: the node holds a reboot slot.
/// A slot is now recorded on the Node alone ([`DISRUPTED_BY_ANNOTATION`],
/// in the cordon's write); this one is still read, so that a slot taken
/// before an upgrade is kept, and the controller's next apply removes it.
pub const IN_REBOOT_SLOT_ANNOTATION: &str = "bootc.dev/in-reboot-slot";
/// On a BootcNode, written by 0.1.0 only: whether the Node was
/// unschedulable before the operator cordoned it ("true" / "false"). Now
/// [`CORDONED_BY_ANNOTATION`] on the Node says whose a cordon is; this one is
/// still read for a slot taken before an upgrade, then removed.
pub const WAS_CORDONED_ANNOTATION: &str = "bootc.dev/was-cordoned";
/// On a Node: the pool whose reboot slot cordoned it. Written with the
/// cordon and removed with the uncordon: a cordon without it is someone
/// else's, and a release leaves it in place.
pub const CORDONED_BY_ANNOTATION: &str = "bootc.dev/cordoned-by";
/// On a Node: the pool whose reboot slot disrupted it: the slot record.
/// Written with the slot's cordon, in the same write that takes the slot
/// (alone on a node an admin had cordoned), and removed only
/// once the node is back (Ready, uncordoned unless an admin had cordoned
/// it, no reboot in flight), so that the node keeps counting against the
/// pool's `maxUnavailable` while it reboots even if it left the pool, its
/// BootcNode was deleted, the pool's target changed or the controller
/// restarted.
pub const DISRUPTED_BY_ANNOTATION: &str = "bootc.dev/disrupted-by";
/// On a BootcNode: the target digest the node was skipped for, after its
/// drain failed under `spec.rollout.onDrainTimeout: Release`. It takes no
/// reboot slot for that target; a new target or `kubectl bootc retry NODE`
/// clears it.
pub const SKIPPED_ANNOTATION: &str = "bootc.dev/skipped";
/// On a BootcNode: why it was skipped (the drain's failure, naming the pod
/// that would not leave).
pub const SKIPPED_BECAUSE_ANNOTATION: &str = "bootc.dev/skipped-because";
/// On a BootcNode: the target digest it failed its health gate on
/// (`spec.health`); a new target or `kubectl bootc retry NODE` clears it.
pub const HEALTH_FAILED_ANNOTATION: &str = "bootc.dev/health-failed";
/// On a BootcNode: the check it failed (what the node did not show in time).
pub const HEALTH_FAILED_BECAUSE_ANNOTATION: &str = "bootc.dev/health-failed-because";
/// On a Node: Karpenter leaves it alone while it is "true". Set with the
/// disruption record when no one else had set it, and removed with it.
pub const KARPENTER_DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
/// On a Node: Kubernetes' service controller (and the cloud load balancers
/// that follow it) takes the node out of external load balancers. Set with
/// the slot's cordon when no one else had set it, removed with its release.
pub const EXCLUDE_FROM_LBS_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// On a Node: the pool that set [`EXCLUDE_FROM_LBS_LABEL`], so that only
/// ours is ever removed (an admin's stays as it was).
pub const LB_EXCLUDED_BY_ANNOTATION: &str = "bootc.dev/lb-excluded-by";
/// On a Node: the pool that set [`KARPENTER_DO_NOT_DISRUPT_ANNOTATION`], so
/// that only ours is ever removed (as [`CORDONED_BY_ANNOTATION`] marks our
/// cordon).
pub const DO_NOT_DISRUPT_BY_ANNOTATION: &str = "bootc.dev/do-not-disrupt-by";
/// On a BootcNode: a person asks for its failed reboot to be tried again
/// (`kubectl bootc retry NODE`; the value is when, for the record). The
/// controller consumes it: it removes the annotation and, if the node is
/// approved to boot and Degraded ([`crate::BootcNode::awaits_retry`]),
/// withdraws the approval, so that the daemon stages the target again under
/// a new spec and the node is approved again like any other in its slot.
pub const RETRY_ANNOTATION: &str = "bootc.dev/retry";
/// On a BootcNodePool: a person asks for its tag to be resolved now
/// (`kubectl bootc refresh POOL`; the value, when, tells one request from
/// the next). The controller resolves at once a value it has not honoured,
/// at most once per `REFRESH_MIN_INTERVAL` of its tag policy; it leaves the
/// annotation in place.
pub const REFRESH_ANNOTATION: &str = "bootc.dev/refresh";
/// On a BootcNodePool: a person confirms that its target (this digest)
/// failed, on the word of fewer nodes than
/// `spec.health.nodesToFailImage`: the image is failed for the whole pool
/// (`rollout::reboot::health_gate`). Any other digest is ignored.
pub const CONFIRM_IMAGE_FAILURE_ANNOTATION: &str = "bootc.dev/confirm-image-failure";
/// On the operator's Namespace: one switch for the fleet (`kubectl bootc
/// stop --all`; the value says who and why). While it is set no pool hands
/// out a new reboot slot; nodes in slots finish, and staging goes on.
pub const FLEET_STOP_ANNOTATION: &str = "bootc.dev/stop";
/// On the operator's Namespace, beside [`FLEET_STOP_ANNOTATION`] (`kubectl
/// bootc stop --all --before-approval`; the value is `"true"`): nodes in
/// reboot slots are not approved to boot either, and wait cordoned; those
/// already approved finish.
pub const FLEET_STOP_BEFORE_APPROVAL_ANNOTATION: &str = "bootc.dev/stop-before-approval";
/// On a Node: the prefix of a hold, `hold.bootc.dev/<who>: <reason>`. Any
/// actor may hold a node (several may hold one): a held node takes no new
/// reboot slot, and one in a slot but not yet approved to boot is released
/// (see [`crate::node_health::holds`]).
pub const HOLD_ANNOTATION_PREFIX: &str = "hold.bootc.dev/";
/// On a Secret of the operator's namespace: the pools (comma-separated)
/// that may use it as their pull secret (see [`crate::pull_secret`]).
/// Without it, naming the Secret in a pool grants nothing.
pub const POOLS_ANNOTATION: &str = "bootc.dev/pools";
/// On a BootcNodePool: cleanup (uncordon, unlabel) runs before deletion.
pub const POOL_FINALIZER: &str = "node.bootc.dev/pool-cleanup";
/// Field manager used by the controller for server-side apply.
pub const CONTROLLER_MANAGER: &str = "bootc-controller";
/// Field manager used by the daemon for its status writes.
pub const DAEMON_MANAGER: &str = "bootc-daemon";
/// On the controller's pods (deploy/controller.yaml): `app.kubernetes.io/name`
/// is this. A drain leaves such pods in the operator's namespace alone, as it
/// does DaemonSet pods: evicted from a cordoned node they could only come back
/// to it (they tolerate the cordon, so that a one-node cluster keeps its
/// controller) or stay Pending, and on a one-node cluster nobody would then
/// approve the reboot or lift the cordon. The reboot stops the pod; the
/// other replica (never on the same node) takes the lease meanwhile.
pub const CONTROLLER_APP_NAME: &str = "bootc-controller";
/// The `app.kubernetes.io/name` of the daemon's pods (deploy/daemon.yaml):
/// the controller reads the pods of members whose daemon is silent.
pub const DAEMON_APP_NAME: &str = "bootc-daemon";
/// The label key [`CONTROLLER_APP_NAME`] and [`DAEMON_APP_NAME`] are values of.
pub const APP_NAME_LABEL: &str = "app.kubernetes.io/name";
/// On a Node: its CPU architecture (set by the kubelet). A pool's target
/// must have an image for each of its members' architectures.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// On a Node: its host name (set by the kubelet).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// On a Pod: the kubelet runs it from a static manifest (a mirror pod). A
/// drain cannot evict such pods and leaves them alone.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Where Events about pools (cluster-scoped objects) live: the API server
/// keeps an Event about a cluster-scoped object in `default`, and that is
/// where `kubectl describe bnp` finds them.
pub const CLUSTER_EVENTS_NAMESPACE: &str = "default";
/// Namespace the operator runs in, and the only one pull secrets may live in.
pub const OPERATOR_NAMESPACE: &str = "bootc-operator";
/// The Role in [`OPERATOR_NAMESPACE`] (deploy/rbac/controller.yaml) that lets
/// the daemons GET the pull secrets the pools name, and only those: the
/// controller writes its rules.
pub const DAEMON_PULL_SECRETS_ROLE: &str = "bootc-daemon-pull-secrets";
