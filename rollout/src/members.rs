//! Who is in the pool and what each member runs: [`membership`] (the
//! selector, conflicts between pools; [`selector`], [`owned`]), the nodes
//! that leave ([`leaving`]), each member's [`state`], its BootcNode's
//! [`spec`], who is told the target ahead of a slot ([`staging`]), the
//! pull secret the nodes are told of ([`pull_secret`]) and the pool's
//! record of its rollouts ([`history`]).

pub mod history;
pub mod leaving;
pub mod membership;
pub(crate) mod owned;
pub mod pull_secret;
pub(crate) mod selector;
pub mod spec;
pub mod staging;
pub mod state;
