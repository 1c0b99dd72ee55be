//! The actions: the writes and requests that carry out a plan.
//!
//! * [`actuator`]: makes the planner's writes, in the planner's order;
//! * [`drain`]: node drains through the Eviction API;
//! * [`events`]: Kubernetes Events about pools, best effort;
//! * [`daemon_secrets`]: the daemons' Role on the pull secrets the pools name;
//! * [`retry`]: a person's retry of a node whose reboot failed;
//! * [`silences`]: the Alertmanager silences of the nodes in reboot slots.
//!
//! May import `rollout`, `api`, [`crate::metrics`] and [`crate::outbound`]; never the runtime
//! above it, nor the target beside it.

pub mod actuator;
pub mod daemon_secrets;
pub mod drain;
pub mod events;
pub mod retry;
pub mod silences;
