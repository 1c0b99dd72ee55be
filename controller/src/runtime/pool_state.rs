//! What the controller remembers about one pool between its reconciles, in
//! one record ([`PoolState`]) and one map ([`PoolStates`]) keyed by the
//! pool's uid: a pool recreated under the same name starts afresh.
//!
//! A state is created on the pool's first reconcile and removed in one
//! place, [`Held::forget`], when the pool's cleanup ends. A reconcile takes
//! its pool's state out of the map and puts it back when it ends, however
//! it ends ([`Held`]'s drop): kube's controller never runs two reconciles of
//! one pool at once, so nothing else reads the state meanwhile.
//!
//! Outside the record, by design: the watch tasks' inbox of changed names
//! ([`Changes`](super::members::Changes), written while a reconcile runs),
//! the drains in flight (tasks of their own), and the metrics' series (what
//! Prometheus reads, by pool name). The cleanup forgets those too, in the
//! same place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use api::BootcNodePool;
use kube::ResourceExt;

use super::members::Members;
use super::pace;
use crate::actions::actuator::OwnWrites;
use crate::actions::silences::SilenceMemory;
use crate::gates::GateMemory;
use crate::target::TargetMemory;

/// Everything the controller remembers about one pool.
#[derive(Debug, Default)]
pub struct PoolState {
    /// The pool's objects, kept up to date from the watch events.
    pub members: Members,
    /// Per-node answers kept for the next plan (incremental planning).
    pub memo: rollout::Memo,
    /// When each member entered the phase it waits in (stuck deadlines).
    pub phase_clock: Arc<rollout::reboot::stuck::Clock>,
    /// The last reconcile, for pacing.
    pub pace: Option<pace::Last>,
    /// The target's schedule and the registry's last error.
    pub target: TargetMemory,
    /// The gates' last answers.
    pub gates: GateMemory,
    /// The pool's Alertmanager silences (`spec.rollout.silences`).
    pub silences: SilenceMemory,
    /// The versions of the controller's own writes, and its last status
    /// write.
    pub writes: OwnWrites,
    /// What the last plan of the whole pool planned for, which the looks
    /// between plans read (`reconcile::look`); None before the first plan
    /// and while the pool has no target.
    pub planned: Option<Planned>,
}

/// The pool's generation and target its last plan read.
#[derive(Clone, Debug)]
pub struct Planned {
    pub generation: Option<i64>,
    pub target: rollout::Target,
}

/// Every pool's state, by uid.
#[derive(Debug, Default)]
pub struct PoolStates(Mutex<HashMap<String, PoolState>>);

/// The key of a pool's state: its uid (else its name, for a pool not yet
/// stored, which the API server never hands out).
fn key(pool: &BootcNodePool) -> String {
    pool.uid().unwrap_or_else(|| pool.name_any())
}

impl PoolStates {
    /// Takes `pool`'s state for the length of a reconcile (a new one on
    /// first sight).
    pub fn hold(&self, pool: &BootcNodePool) -> Held<'_> {
        let key = key(pool);
        let state = self
            .0
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&key))
            .unwrap_or_default();
        Held {
            states: self,
            key,
            state,
            forgotten: false,
        }
    }

    /// How many pools have a state (for tests of forgetting).
    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A pool's state, held by its reconcile; put back when dropped.
#[derive(Debug)]
pub struct Held<'a> {
    states: &'a PoolStates,
    key: String,
    state: PoolState,
    forgotten: bool,
}

impl Held<'_> {
    /// The pool is gone: its state is not put back.
    pub fn forget(mut self) {
        self.forgotten = true;
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = PoolState;
    fn deref(&self) -> &PoolState {
        &self.state
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut PoolState {
        &mut self.state
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.forgotten {
            return;
        }
        if let Ok(mut m) = self.states.0.lock() {
            m.insert(
                std::mem::take(&mut self.key),
                std::mem::take(&mut self.state),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::test_support::PoolBuilder;

    fn pool(name: &str, uid: &str) -> BootcNodePool {
        PoolBuilder::new(name)
            .image("quay.io/acme/os:1")
            .uid(uid)
            .build()
    }

    #[test]
    fn a_state_is_put_back_however_the_reconcile_ends() {
        let states = PoolStates::default();
        {
            let mut held = states.hold(&pool("p", "u1"));
            held.pace = Some(pace::Last::ended_now(std::time::Duration::ZERO, 1));
        }
        assert_eq!(states.len(), 1);
        assert!(states.hold(&pool("p", "u1")).pace.is_some());
    }

    #[test]
    fn a_forgotten_pool_leaves_nothing_and_its_successor_starts_afresh() {
        let states = PoolStates::default();
        let mut held = states.hold(&pool("p", "u1"));
        held.pace = Some(pace::Last::ended_now(std::time::Duration::ZERO, 1));
        held.forget();
        assert!(states.is_empty());
        let mut held = states.hold(&pool("p", "u1"));
        held.pace = Some(pace::Last::ended_now(std::time::Duration::ZERO, 1));
        drop(held);
        // Recreated under the same name: another uid, another state.
        assert!(states.hold(&pool("p", "u2")).pace.is_none());
    }
}
