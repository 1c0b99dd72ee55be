//! What holds a node, a target or the pool's new slots, each rule in its
//! own module with its reason (and, where it holds a member, its
//! [`crate::standing::Standing`]): maintenance [`window`]s and blackouts,
//! [`pause`]s with an end, [`depends`] (the pools this one waits for),
//! [`gates`] (alerts, blocking pods), the node order's [`groups`], canary
//! [`batches`], a [`halt`] after a failure, the [`budget`] of slots and
//! unhealthy holders, who counts as disrupted ([`disruption`]); and the
//! guards: a host's own [`updaters`], a daemon of another contract
//! ([`daemons`]), a target of another OS or kubelet ([`os_guard`]).

pub mod batches;
pub mod budget;
pub mod daemons;
pub mod depends;
pub mod disruption;
pub mod gates;
pub mod groups;
pub mod halt;
pub mod os_guard;
pub mod pause;
pub mod updaters;
pub mod window;
