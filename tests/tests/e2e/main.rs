//! End to end on the simulated cluster: the real controller, the real
//! daemons and helpers on fake bootc hosts that pull from a real registry,
//! a real API server. A recorder watches every Node and BootcNode change to
//! prove the disruption bound over the whole run. One module a theme; the
//! shared set-up and checks are `tests::e2e`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod controller;
mod deletion;
mod failures;
mod gates;
mod guards;
mod health;
mod mid_reboot;
mod rollout;
mod silences;
mod updaters;

use std::collections::BTreeSet;
use std::time::Duration;

use api::Node;
use api::labels::HOSTNAME_LABEL;
use api::{BootcNode, BootcNodePool, ConditionType, DesiredImageState, Reason, event_reasons};
use kube::api::{Api, ListParams};
use serde_json::json;
use tests::e2e::*;
use tests::fake_bootc::{BootcVersion, Fault, UnplannedReboot};
use tests::recorder::Recorder;
use tests::sim::{POOL, Sim, SimOptions};
use tests::{k8s, require_root};
