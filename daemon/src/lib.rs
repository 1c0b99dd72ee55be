//! The node daemon.

pub mod machine;
