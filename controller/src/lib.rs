//! The pool controller (the planner and actuator land with the controller issue).

pub mod registry;
pub mod tag_policy;
