//! The node daemon.

pub mod machine;
pub mod node_loop;
