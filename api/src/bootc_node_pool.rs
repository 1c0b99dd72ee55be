//! How the operator reads a BootcNodePool written by the controller: every
//! question another pool, the plugin or the tests ask of its status is one
//! method here.

use crate::{BootcNodePool, ConditionType, conditions};

impl BootcNodePool {
    /// Is every member on the pool's current target? `UpToDate` is True and
    /// says so of the pool's current spec (its `observedGeneration` is the
    /// pool's generation): a pool whose image just changed is not, until the
    /// controller has looked at it.
    pub fn up_to_date(&self) -> bool {
        let Some(status) = self.status.as_ref() else {
            return false;
        };
        conditions::find(&status.conditions, ConditionType::UpToDate).is_some_and(|c| {
            c.status == "True" && c.observed_generation == self.metadata.generation
        })
    }
}
