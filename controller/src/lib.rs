//! The bootc pool controller.
//!
//! * [`planner`]: the pool reconciler's decisions, a pipeline of pure steps
//!   (`docs/design.md` names each rule's home);
//! * [`disruption`]: the disruption bound (who counts as disrupted, when a
//!   node is back, when a new slot may be handed out);
//! * [`staging`]: which members are told the target (staging bounds);
//! * [`stuck`]: each phase a node waits in, its deadline and next step;
//! * [`actuator`]: makes the planner's writes, in the planner's order;
//! * [`drain`]: node drains through the Eviction API;
//! * [`target`]: the `resolve_target` step (digest references; the seam for
//!   a registry-backed tag resolver);
//! * [`members`]: each pool's objects, kept up to date from the watch
//!   events (what [`selection`] chooses from scratch);
//! * [`retry`]: a person's retry of a node whose reboot failed;
//! * [`lease`]: leader election on a Lease;
//! * [`liveness`]: when `/healthz` fails (a wedged reconcile loop);
//! * [`synced`]: which caches have listed their objects (reconciles and
//!   `/readyz` wait on it);
//! * [`daemon_secrets`]: the daemons' Role on the pull secrets the pools name;
//! * [`runtime`]: caches, watches, reconcile, finalizer, health endpoints.
//!
//! In-process use: `controller::run(config, Options::new("me"), token)`
//! with a `kube::Config` and a [`CancellationToken`]; it returns once the
//! token is cancelled (or with [`Error::LeaseLost`]). The binary
//! `bootc-controller` wraps it: `KUBECONFIG` (or the in-cluster config),
//! `--leader-elect`, `--lease-name` (bootc-controller), `--namespace`
//! (bootc-operator), `--identity` ($POD_NAME, else the host name),
//! `--lease-duration-seconds` (15), `--health-addr` (0.0.0.0:8081, "" to
//! disable; /healthz, /readyz), `--resync-seconds` (600). SIGTERM/SIGINT stop
//! it cleanly and release the lease.
//!
//! RBAC it needs (deploy/rbac/controller.yaml, which the tests install, and
//! where each verb says why): cluster-wide `node.bootc.dev` bootcnodepools
//! list/watch/patch, bootcnodepools/status patch, bootcnodepools/finalizers
//! update, bootcnodes list/watch/create/patch/delete; core nodes
//! list/watch/patch, pods list, pods/eviction create; in its namespace:
//! secrets get/list/watch, coordination.k8s.io leases create and get/update
//! of its Lease, rbac roles patch of [`daemon_secrets::ROLE`]; in `default`:
//! events.k8s.io events create.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod actuator;
pub mod daemon_secrets;
pub mod disruption;
pub mod drain;
pub mod events;
pub mod health;
pub mod lease;
pub mod liveness;
pub mod members;

pub mod metrics;
pub mod pace;
pub mod planner;
pub mod registry;
pub mod resolver;
pub mod retry;
pub mod runtime;
pub mod selection;
pub mod staging;
pub mod stuck;
pub mod synced;
pub mod tag_policy;
pub mod target;
#[cfg(test)]
mod test_rng;

pub use runtime::{Error, Options, run};
pub use tokio_util::sync::CancellationToken;
