//! The bootc pool controller: the I/O around the `rollout` crate's plan.
//!
//! Three layers, each a folder whose module doc says what it holds; a layer
//! imports only those below it:
//!
//! * [`runtime`]: watches, caches and each pool's choice of objects, the
//!   reconcile (gather, plan, act, record), pacing, leader election and the
//!   HTTP endpoints;
//! * [`actions`]: the writes and requests that carry a plan out (actuator,
//!   drains, events, the daemons' grant on pull secrets, retries);
//! * [`target`]: which digest a pool should run (the tag policy, the
//!   registry client and the resolver that schedules it);
//! * [`gates`]: what outside a pool's objects holds its new reboot slots
//!   back (blocking pods, Prometheus alerts);
//! * [`metrics`], [`outbound`] and [`cache`], at the bottom: what every
//!   layer counts, the one rule of every HTTP client toward a server other
//!   than the API server (no redirects, whole-request deadlines, bounded
//!   bodies, nothing a server wrote in a status), and the caches of Nodes
//!   and BootcNodes, keyed by name.
//!
//! Below them all, the `rollout` crate decides (no I/O, no clock of its own)
//! and `api` names every object, field and reason.
//!
//! In-process use: `controller::run(config, Options::new("me"), token)`
//! with a `kube::Config` and a [`CancellationToken`]; it returns once the
//! token is cancelled (or with [`Error::LeaseLost`]). The binary
//! `bootc-controller` wraps it: `KUBECONFIG` (or the in-cluster config),
//! `--leader-elect`, `--lease-name` (bootc-controller), `--namespace`
//! (bootc-operator), `--identity` ($POD_NAME, else the host name),
//! `--lease-duration-seconds` (15), `--health-addr` (0.0.0.0:8081, "" to
//! disable; /healthz, /readyz, plain), `--metrics-addr` (0.0.0.0:8080;
//! /metrics over HTTPS for permitted tokens, [`runtime::secure_metrics`]),
//! `--metrics-cert-dir`, `--resync-seconds` (600). SIGTERM/SIGINT stop it
//! cleanly and release the lease.
//!
//! RBAC it needs (deploy/rbac/controller.yaml, which the tests install, and
//! where each verb says why): cluster-wide `node.bootc.dev` bootcnodepools
//! list/watch/patch, bootcnodepools/status patch, bootcnodepools/finalizers
//! update, bootcnodes list/watch/create/patch/delete; core nodes
//! list/watch/patch, pods list, pods/eviction create, namespaces list (for
//! `spec.disruption.blockingPods.namespaceSelector`); in its namespace:
//! secrets get/list/watch, coordination.k8s.io leases create and get/update
//! of its Lease, rbac roles patch of [`actions::daemon_secrets::ROLE`]; in `default`:
//! events.k8s.io events create; for /metrics, authentication.k8s.io
//! tokenreviews create and authorization.k8s.io subjectaccessreviews create.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod actions;
pub mod cache;
pub mod cli;
pub mod gates;
pub mod metrics;
pub mod outbound;
pub mod runtime;
pub mod target;

pub use runtime::{Error, Options, run};
pub use tokio_util::sync::CancellationToken;
