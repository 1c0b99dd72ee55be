//! The bootc pool controller.
//!
//! * [`planner`]: the pool reconciler's decisions as a pure function;
//! * [`actuator`]: makes the planner's writes;
//! * [`drain`]: node drains through the Eviction API;
//! * [`target`]: the `resolve_target` step (digest references; the seam for
//!   a registry-backed tag resolver);
//! * [`lease`]: leader election on a Lease;
//! * [`runtime`]: caches, watches, reconcile, finalizer, health endpoints.
//!
//! In-process use: `controller::run(client, Options::new("me"), token)`,
//! which returns once `token` is cancelled.

pub mod actuator;
pub mod drain;
pub mod events;
pub mod lease;
pub mod planner;
pub mod runtime;
pub mod target;

pub use runtime::{Error, Options, run};
